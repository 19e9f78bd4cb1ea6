"""Launch arguments that realise a plan in a training framework (Megatron-LM, torchtitan, DeepSpeed).

``emit_launch(plan, model, cluster, job, framework)`` returns a :class:`LaunchCommand`: the command
line (parallel sizes, micro- and global batch, sequence length, recomputation, precision), an
optional config file (DeepSpeed JSON) and notes on anything the framework cannot express. Model
shape, data and optimizer arguments are left to the user's existing script.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any, Final

from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.train.cluster import Cluster
from xpuplan.train.plan import ParallelPlan
from xpuplan.workload.training import TrainingJob

FRAMEWORKS: Final = ("megatron", "torchtitan", "deepspeed")


@dataclass(frozen=True)
class LaunchCommand:
    """A framework command line, an optional config file and the caveats."""

    framework: str
    argv: tuple[str, ...]
    config_name: str | None = None
    config: dict[str, Any] | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def command(self) -> str:
        return " \\\n  ".join(_join_pairs(self.argv))

    def to_text(self) -> str:
        lines = [f"# {self.framework}: launch arguments for this plan"]
        lines += [f"# note: {n}" for n in self.notes]
        if self.config is not None:
            lines.append(f"cat > {self.config_name} <<'EOF'")
            lines.append(json.dumps(self.config, indent=2))
            lines.append("EOF")
        lines.append(self.command)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"framework": self.framework, "argv": list(self.argv), "command": " ".join(map(shlex.quote, self.argv)),
                "config_name": self.config_name, "config": self.config, "notes": list(self.notes)}


def _join_pairs(argv: tuple[str, ...]) -> list[str]:
    """Group '--flag value' pairs on one line each for readability."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a.startswith("-") and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            out.append(f"{a} {shlex.quote(argv[i + 1])}")
            i += 2
        else:
            out.append(shlex.quote(a) if not a.startswith("-") else a)
            i += 1
    return out


def _torchrun(cluster: Cluster) -> list[str]:
    per_node = min(cluster.domain_size, cluster.n_devices) if cluster.topology != "torus" else 8
    per_node = max(1, min(per_node, 8))
    nodes = -(-cluster.n_devices // per_node)
    return ["torchrun", "--nnodes", str(nodes), "--nproc-per-node", str(per_node)]


def _megatron(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob) -> LaunchCommand:
    a = _torchrun(cluster) + ["pretrain_gpt.py"]
    notes: list[str] = []
    a += ["--tensor-model-parallel-size", str(plan.tp), "--pipeline-model-parallel-size", str(plan.pp)]
    if plan.vpp > 1:
        a += ["--num-layers-per-virtual-pipeline-stage", str(model.n_layers // (plan.pp * plan.vpp))]
    if plan.cp > 1:
        a += ["--context-parallel-size", str(plan.cp)]
    if plan.ep > 1:
        a += ["--expert-model-parallel-size", str(plan.ep)]
    if plan.sp:
        a += ["--sequence-parallel"]
    if plan.zero_stage == 1:
        a += ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
    elif plan.zero_stage in (2, 3):
        strategy = "optim_grads" if plan.zero_stage == 2 else "optim_grads_params"
        a += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy, "--use-distributed-optimizer",
              "--no-gradient-accumulation-fusion", "--ckpt-format", "fsdp_dtensor"]
        notes.append("ZeRO-2/3 use Megatron-FSDP (Megatron-Core >= 0.14; older releases call it --use-custom-fsdp)")
    else:
        a += ["--overlap-grad-reduce"]
    a += ["--micro-batch-size", str(plan.micro_batch), "--global-batch-size", str(plan.global_batch_seqs),
          "--seq-length", str(job.seq_len)]
    if plan.recompute == "selective":
        a += ["--recompute-granularity", "selective"]
    elif plan.recompute == "full":
        a += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if plan.precision == "fp8":
        a += ["--bf16", "--fp8-format", "hybrid"]
    else:
        a += [f"--{plan.precision}"]
    a += ["--use-flash-attn"]
    if job.method != "full":
        notes.append(f"{job.method}: Megatron-LM has no LoRA trainer; use NeMo's PEFT or torchtune for adapters")
    return LaunchCommand("megatron", tuple(a), notes=tuple(notes))


def _torchtitan(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob) -> LaunchCommand:
    a = _torchrun(cluster) + ["-m", "torchtitan.train"]
    notes: list[str] = []
    dp = plan.dp
    if plan.zero_stage == 3:
        shard, replicate = dp, 1
    elif plan.zero_stage == 0:
        shard, replicate = 1, dp
    else:
        shard, replicate = dp, 1
        notes.append(f"torchtitan shards with FSDP2 (ZeRO-3); ZeRO-{plan.zero_stage} is approximated by "
                     "--parallelism.fsdp_reshard_after_forward never (weights kept gathered between forward and backward)")
        a += ["--parallelism.fsdp_reshard_after_forward", "never"]
    a += ["--parallelism.data_parallel_shard_degree", str(shard),
          "--parallelism.data_parallel_replicate_degree", str(replicate),
          "--parallelism.tensor_parallel_degree", str(plan.tp),
          "--parallelism.pipeline_parallel_degree", str(plan.pp),
          "--parallelism.context_parallel_degree", str(plan.cp)]
    if plan.ep > 1:
        a += ["--parallelism.expert_parallel_degree", str(plan.ep)]
    if plan.pp > 1:
        a += ["--parallelism.pipeline_parallel_schedule", "Interleaved1F1B" if plan.vpp > 1 else "1F1B",
              "--parallelism.pipeline_parallel_microbatch_size", str(plan.micro_batch)]
        if plan.vpp > 1:
            a += ["--parallelism.pipeline_parallel_layers_per_stage", str(model.n_layers // (plan.pp * plan.vpp))]
        local = plan.micro_batch * plan.grad_accum
    else:
        local = plan.micro_batch
    a += ["--training.local_batch_size", str(local), "--training.global_batch_size", str(plan.global_batch_seqs),
          "--training.seq_len", str(job.seq_len)]
    a += ["--activation_checkpoint.mode", plan.recompute]
    if plan.recompute == "selective":
        a += ["--activation_checkpoint.selective_ac_option", "op"]
    if plan.precision == "fp8":
        a += ["--model.converters", "float8"]
    elif plan.precision == "fp16":
        notes.append("torchtitan trains in bf16; fp16 is not offered")
    if plan.tp > 1 and not plan.sp:
        notes.append("torchtitan's tensor parallelism always shards the sequence (SP on)")
    if job.method != "full":
        notes.append(f"{job.method}: torchtitan has no adapter training; use torchtune for LoRA/QLoRA")
    return LaunchCommand("torchtitan", tuple(a), notes=tuple(notes))


def _deepspeed(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob) -> LaunchCommand:
    notes: list[str] = []
    config: dict[str, Any] = {
        "train_batch_size": plan.global_batch_seqs,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "gradient_clipping": 1.0,
        "zero_optimization": {"stage": plan.zero_stage, "overlap_comm": True, "contiguous_gradients": True},
    }
    if plan.precision == "fp16":
        config["fp16"] = {"enabled": True}
    else:
        config["bf16"] = {"enabled": True}
    if plan.precision == "fp8":
        notes.append("DeepSpeed has no FP8 GEMM path of its own: wrap linears with Transformer Engine for fp8")
    if plan.recompute != "none":
        config["activation_checkpointing"] = {"partition_activations": plan.tp > 1, "contiguous_memory_optimization": False}
    if plan.pp > 1 and plan.zero_stage > 1:
        notes.append("DeepSpeed pipeline parallelism supports ZeRO stage 0-1 only")
    if plan.cp > 1:
        notes.append("context parallelism (ring attention) is not in Megatron-DeepSpeed; its Ulysses "
                     f"--ds-sequence-parallel-size {plan.cp} is the closest equivalent")
    if plan.ep > 1:
        notes.append("set --expert-model-parallel-size / DeepSpeed-MoE ep_size to " + str(plan.ep))
    if plan.vpp > 1:
        notes.append("Megatron-DeepSpeed has no interleaved schedule: vpp is dropped")
    a = ["deepspeed", "--num_nodes", str(max(1, cluster.n_devices // max(1, min(cluster.domain_size, 8)))),
         "--num_gpus", str(max(1, min(cluster.domain_size, 8, cluster.n_devices))), "pretrain_gpt.py",
         "--deepspeed", "--deepspeed_config", "ds_config.json",
         "--tensor-model-parallel-size", str(plan.tp), "--pipeline-model-parallel-size", str(plan.pp),
         "--micro-batch-size", str(plan.micro_batch), "--global-batch-size", str(plan.global_batch_seqs),
         "--seq-length", str(job.seq_len)]
    if plan.sp:
        a += ["--sequence-parallel"]
    if plan.recompute == "full":
        a += ["--checkpoint-activations", "--deepspeed-activation-checkpointing"]
    elif plan.recompute == "selective":
        a += ["--recompute-granularity", "selective"]
    a += [f"--{'fp16' if plan.precision == 'fp16' else 'bf16'}"]
    if job.method != "full":
        notes.append(f"{job.method}: for adapters use Hugging Face PEFT with the same ds_config.json (accelerate launch)")
    return LaunchCommand("deepspeed", tuple(a), config_name="ds_config.json", config=config, notes=tuple(notes))


_EMITTERS = {"megatron": _megatron, "torchtitan": _torchtitan, "deepspeed": _deepspeed}


def emit_launch(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob, framework: str) -> LaunchCommand:
    """The launch arguments of ``plan`` for ``framework`` (megatron, torchtitan, deepspeed)."""
    try:
        emitter = _EMITTERS[framework]
    except KeyError:
        raise UserInputError(f"unknown framework {framework!r}; choose {', '.join(FRAMEWORKS)}", field="emit") from None
    return emitter(plan, model, cluster, job)
