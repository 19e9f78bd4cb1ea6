"""Launch commands that realise a training plan in Megatron-LM, Megatron-Bridge, torchtitan, DeepSpeed or Intel's
Megatron-DeepSpeed for Gaudi.

``emit_launch(plan, model, cluster, job, framework)`` returns a :class:`LaunchPlan` for the release
pinned in ``catalog/data/launch_targets.yaml``: the ``torchrun`` (or ``deepspeed``) launcher for the
plan's device count, then the framework's arguments for everything the estimate assumed: TP, PP
(with virtual stages and uneven first/last stages), CP, EP with expert-TP, sequence parallelism,
ZeRO stage / distributed optimizer, micro- and global batch, sequence length, recomputation,
precision, TP-communication overlap, and the model's shape (layers, hidden, heads, KV groups, FFN,
vocabulary, MoE and MLA sizes). Anything a framework cannot express is a note, never silently
dropped. Every command is checked against the pinned release's flags by the tests
(``LaunchPlan.problems``).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Final

from xpuplan.catalog.launch_targets import Command, LaunchPlan, Segment, check_keys, target
from xpuplan.catalog.stacks import TrainingStack, default_training_stack, training_stack
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.memory import expert_tensor_parallel
from xpuplan.perf.recompute import ordered_offload_modules, ordered_selective_modules
from xpuplan.train import validity
from xpuplan.train.cluster import Cluster
from xpuplan.train.plan import ParallelPlan
from xpuplan.train.validity import EDGE_PIPELINE_SLOTS
from xpuplan.workload.training import TrainingJob

FRAMEWORKS: Final = ("megatron", "bridge", "torchtitan", "deepspeed", "gaudi")

#: The frameworks whose launch command can say fine-grained activation offloading (Megatron-Core
#: ``--offload-modules``): a search for another framework's command does not choose it.
MODULE_OFFLOAD_FRAMEWORKS: Final = ("megatron", "bridge")
#: The frameworks whose launch command can say what selective recomputation re-runs (Megatron-Core
#: ``--recompute-modules``, Megatron-Bridge ``model.recompute_modules``): a search for another framework's command
#: keeps the default set.
MODULE_RECOMPUTE_FRAMEWORKS: Final = ("megatron", "bridge")
#: The training-stack profile (catalog/data/training_stacks.yaml) of each framework ``--emit`` writes a command for:
#: a search for that command proposes only the parallelism, ZeRO stages and pipeline splits the framework can run
#: (``train.search.stack_space``), whatever stack the physics runs under.
FRAMEWORK_STACKS: Final = {"megatron": "megatron-core", "bridge": "nemo", "torchtitan": "torchtitan",
                           "deepspeed": "deepspeed", "gaudi": "megatron-deepspeed-gaudi"}
#: The recompute modes a framework's command can say, where it cannot say them all: Intel's run_llama.sh has
#: HL_CKP_ACT 0 (none), 1 (full, uniform) and 2 (selective) only. A search for its command proposes no other.
FRAMEWORK_RECOMPUTE: Final = {"gaudi": ("none", "full", "selective")}
#: Port the emitted multi-node rendezvous uses (torchrun's default master port).
RDZV_PORT: Final = 29500
#: Devices per node the launcher assumes when the scale-up domain is larger than a node (NVL72 racks).
MAX_PER_NODE: Final = 8
#: What an offloaded plan (recompute "offload") becomes in Megatron-LM and Megatron-Bridge: full recomputation;
#: their activation offloading (--cpu-offloading-num-layers) moves what each layer saves, not the inputs full
#: recomputation keeps, so the command's layer inputs stay on the device.
OFFLOAD_NOTE_MEGATRON: Final = ("recompute 'offload' runs here as full recomputation: Megatron's activation "
                                "offloading (--cpu-offloading-num-layers) offloads what a layer saves, not the layer "
                                "inputs full recomputation keeps, so this command keeps them on the device (one layer "
                                "input per layer and micro-batch in flight more than the estimate)")


def _etp(plan: ParallelPlan, stack: TrainingStack) -> int:
    """The expert tensor-parallel size the plan was costed with (``perf.memory.expert_tensor_parallel``)."""
    return int(expert_tensor_parallel(plan.tp, plan.dp * plan.cp, plan.ep, stack.expert_tp_one))


def hf_id(model: ModelArch) -> str | None:
    """The model's Hugging Face repository id when a preset alias gives one."""
    return next((a for a in model.aliases if "/" in a), None)


def _per_node(cluster: Cluster) -> int:
    return max(1, min(cluster.domain_size, MAX_PER_NODE, cluster.n_devices))


def _nodes(cluster: Cluster) -> int:
    return -(-cluster.n_devices // _per_node(cluster))


def _torchrun(cluster: Cluster) -> Segment:
    args = ["--nnodes", str(_nodes(cluster)), "--nproc-per-node", str(_per_node(cluster))]
    if _nodes(cluster) == 1:
        args += ["--standalone"]
    else:
        args += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"$MASTER_ADDR:{RDZV_PORT}", "--rdzv-id", "xpuplan"]
    return Segment("torchrun", "torchrun", ("torchrun",), tuple(args))


def _uneven(model: ModelArch, plan: ParallelPlan) -> tuple[int, int] | None:
    """(first, last) stage layers when pp does not divide the layers: middle stages hold ceil(L/pp)."""
    L, pp = model.n_layers, plan.pp
    if pp < 2 or L % (pp * plan.vpp) == 0:
        return None
    mid = -(-L // pp)
    rest = L - mid * (pp - 2)
    first = rest // 2
    return first, rest - first


def stage_layers(model: ModelArch, plan: ParallelPlan) -> int:
    """Layers of the busiest pipeline stage, ceil(L/pp) (all of them without a pipeline)."""
    return -(-model.n_layers // plan.pp)


def partial_layers_per_chunk(recompute_layers: int, vpp: int) -> int:
    """Megatron-Core's ``--recompute-num-layers`` for a partial plan recomputing ``recompute_layers`` of a stage:
    the block method counts per model chunk (each chunk is one TransformerBlock), vpp chunks per stage."""
    return max(1, -(-recompute_layers // max(1, vpp)))


def _edge_slots(model: ModelArch, plan: ParallelPlan) -> bool:
    """The uneven split is Megatron-Core's embedding/loss accounting: L + 2 slots divide evenly over
    pp·vpp virtual stages (the first holds the embedding in place of a layer, the last the loss), the
    split :func:`_uneven` describes (validity.EDGE_PIPELINE_SLOTS)."""
    k = plan.pp * plan.vpp
    return plan.pp > 1 and model.n_layers % k != 0 and (model.n_layers + EDGE_PIPELINE_SLOTS) % k == 0


def _train_iters(job: TrainingJob, plan: ParallelPlan) -> int:
    if job.train_tokens:
        return max(1, int(job.train_tokens // (plan.global_batch_seqs * job.seq_len)))
    return 1000


# =================================================================================================
# Megatron-LM
# =================================================================================================
def _megatron_model(model: ModelArch, job: TrainingJob) -> tuple[list[str], list[str]]:
    """Model-shape arguments of ``pretrain_gpt.py`` and notes."""
    a: list[str] = ["--num-layers", str(model.n_layers), "--hidden-size", str(model.d_model),
                    "--ffn-hidden-size", str(model.ffn_dim), "--num-attention-heads", str(model.n_heads)]
    notes: list[str] = []
    kv = model.n_kv_heads or model.n_heads
    if kv != model.n_heads:
        a += ["--group-query-attention", "--num-query-groups", str(kv)]
    if model.head_dim and model.head_dim * model.n_heads != model.d_model:
        a += ["--kv-channels", str(model.head_dim)]
    a += ["--seq-length", str(job.seq_len), "--max-position-embeddings", str(max(model.max_seq_len, job.seq_len))]
    a += ["--position-embedding-type", {"rope": "rope", "learned": "learned_absolute"}.get(model.position, "none")]
    if model.position == "alibi":
        notes.append("ALiBi is not in Megatron-Core: position embeddings are off (none)")
    a += ["--normalization", "RMSNorm" if model.norm == "rmsnorm" else "LayerNorm"]
    if model.mlp == "gated":
        if model.activation not in ("silu", "swish"):
            notes.append(f"gated {model.activation} MLP: Megatron's --swiglu is SiLU-gated")
        a += ["--swiglu"]
    elif model.activation in ("gelu", "gelu_new", "gelu_pytorch_tanh"):
        a += ["--openai-gelu"] if model.activation == "gelu_new" else []
    if not (model.qkv_bias or model.out_bias or model.mlp_bias):
        a += ["--disable-bias-linear"]
    elif model.qkv_bias and not (model.out_bias or model.mlp_bias):
        a += ["--disable-bias-linear", "--add-qkv-bias"]
    if model.qk_norm:
        a += ["--qk-layernorm"]
    if not model.tied_embeddings:
        a += ["--untie-embeddings-and-output-weights"]
    if model.parallel_attn_mlp:
        notes.append("parallel attention/MLP blocks (GPT-J, Falcon) are not a Megatron-Core GPT option")
    if model.mla is not None:
        m = model.mla
        a += ["--multi-latent-attention", "--kv-lora-rank", str(m.kv_lora_rank), "--qk-head-dim", str(m.qk_nope_head_dim),
              "--qk-pos-emb-head-dim", str(m.qk_rope_head_dim), "--v-head-dim", str(m.v_head_dim)]
        if m.q_lora_rank:
            a += ["--q-lora-rank", str(m.q_lora_rank)]
    if model.moe is not None:
        e = model.moe
        a += ["--num-experts", str(e.n_routed_experts), "--moe-router-topk", str(e.top_k),
              "--moe-ffn-hidden-size", str(e.expert_ffn_dim), "--moe-grouped-gemm",
              "--moe-token-dispatcher-type", "alltoall", "--moe-router-load-balancing-type", "aux_loss"]
        if e.n_shared_experts:
            a += ["--moe-shared-expert-intermediate-size", str(e.n_shared_experts * e.shared_ffn)]
        if e.n_dense_layers:
            a += ["--moe-layer-freq", f"([0]*{e.n_dense_layers}+[1]*{model.n_layers - e.n_dense_layers})"]
        if e.router_bias:
            a += ["--moe-router-enable-expert-bias", "--moe-router-score-function", "sigmoid"]
    if model.mtp_layers:
        a += ["--mtp-num-layers", str(model.mtp_layers)]
    hf = hf_id(model)
    if hf:
        a += ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", hf]
    else:
        a += ["--tokenizer-type", "NullTokenizer", "--vocab-size", str(model.vocab_size)]
    return a, notes


def _overlaps(job: TrainingJob, stack: TrainingStack, plan: ParallelPlan) -> tuple[bool, bool]:
    """(TP-communication overlap on, MoE all-to-all overlap on) as the estimate assumed them: the
    job's fractions when given, else the training stack's defaults (so a plan estimated under a
    stack that overlaps TP collectives is launched with that overlap switched on); the all-to-all overlap
    also when the plan turns the stack's opt-in one on (``ParallelPlan.ep_overlap``)."""
    tp_on = job.tp_overlap > 0 if job.tp_overlap is not None else stack.tp_comm_overlap
    ep_on = job.ep_overlap > 0 if job.ep_overlap is not None else stack.ep_overlap > 0
    return tp_on, ep_on or plan.ep_overlap


def _megatron_parallel(plan: ParallelPlan, model: ModelArch, job: TrainingJob,
                       stack: TrainingStack, offload_layers: int = 0,
                       recompute_layers: int = 0) -> tuple[list[str], list[str]]:
    a = ["--tensor-model-parallel-size", str(plan.tp), "--pipeline-model-parallel-size", str(plan.pp),
         "--context-parallel-size", str(plan.cp)]
    notes: list[str] = []
    if plan.vpp > 1:
        a += ["--num-virtual-stages-per-pipeline-rank", str(plan.vpp)]
    un = _uneven(model, plan)
    if un and _edge_slots(model, plan):
        a += ["--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    elif un:
        a += ["--decoder-first-pipeline-num-layers", str(un[0]), "--decoder-last-pipeline-num-layers", str(un[1])]
        if plan.vpp > 1:
            notes.append("uneven stages with virtual pipelining: check the layer split with --pipeline-model-parallel-layout")
    if model.moe is not None:
        a += ["--expert-model-parallel-size", str(plan.ep), "--expert-tensor-parallel-size", str(_etp(plan, stack))]
    if plan.sp and plan.tp > 1:
        a += ["--sequence-parallel"]
    if plan.zero_stage == 1:
        a += ["--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
    elif plan.zero_stage in (2, 3):
        strategy = "optim_grads" if plan.zero_stage == 2 else "optim_grads_params"
        a += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy, "--use-distributed-optimizer",
              "--no-gradient-accumulation-fusion", "--ckpt-format", "fsdp_dtensor"]
    else:
        a += ["--overlap-grad-reduce"]
    tp_on, ep_on = _overlaps(job, stack, plan)
    if tp_on and plan.tp > 1 and plan.sp:
        a += ["--tp-comm-overlap"]
    elif tp_on and plan.tp > 1:
        notes.append("--tp-comm-overlap needs sequence parallelism; the estimate's TP overlap is not reachable without it")
    if ep_on and plan.ep > 1:
        a += ["--overlap-moe-expert-parallel-comm"]
        if plan.pp > 1 and plan.vpp == 1:
            notes.append("--overlap-moe-expert-parallel-comm needs a virtual pipeline when pp > 1 (Megatron-Core "
                         "asserts it): choose vpp > 1 or drop the overlap")
        if plan.recompute in ("full", "offload"):
            notes.append("--overlap-moe-expert-parallel-comm refuses full recomputation (Megatron-Core asserts it): "
                         "use selective recomputation or drop the overlap")
    a += ["--micro-batch-size", str(plan.micro_batch), "--global-batch-size", str(plan.global_batch_seqs)]
    if plan.recompute == "selective":
        # the modules the estimate re-runs, named: Megatron-Core's default is core_attn alone, while the planner's
        # selective also re-runs MLA's up-projections (perf.recompute.default_selective_modules)
        a += ["--recompute-granularity", "selective",
              "--recompute-modules", *ordered_selective_modules(model, job.recompute_modules)]
    elif plan.recompute in ("full", "offload"):
        a += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
        if plan.recompute == "offload":
            notes.append(OFFLOAD_NOTE_MEGATRON)
    elif plan.recompute == "layer_offload" and offload_layers > 0:
        # Megatron-Core's activation offloading: whole layers' activations to the host, no recomputation
        a += ["--cpu-offloading-num-layers", str(offload_layers)]
    elif plan.recompute == "partial" and recompute_layers > 0:
        # the block method: the first N layers of each model chunk recomputed in full, the others keep everything
        a += ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers",
              str(partial_layers_per_chunk(recompute_layers, plan.vpp))]
    if job.offload_modules is not None:  # fine-grained activation offloading of the modules' inputs
        a += ["--fine-grained-activation-offloading", "--offload-modules", *ordered_offload_modules(job.offload_modules)]
    if plan.precision == "fp8":
        a += ["--bf16", "--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"]
    elif plan.precision == "fp4":
        a += ["--bf16", "--fp4-format", "e2m1", "--fp4-recipe", "nvfp4"]
        notes.append("NVFP4 training: keep about 15% of the layers (the last blocks) in bf16 as NVIDIA's recipe does "
                     "(the estimate assumes it); the pinned release sets this through its FP4 quantizer options")
    else:
        a += [f"--{plan.precision}"]
    return a, notes


def _megatron(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob,
              stack: TrainingStack, offload_layers: int = 0, recompute_layers: int = 0) -> LaunchPlan:
    shape, notes = _megatron_model(model, job)
    par, pnotes = _megatron_parallel(plan, model, job, stack, offload_layers, recompute_layers)
    run = ["--train-iters", str(_train_iters(job, plan)), "--lr", "3.0e-4", "--min-lr", "3.0e-5",
           "--lr-decay-style", "cosine", "--weight-decay", "0.1", "--clip-grad", "1.0", "--mock-data"]
    notes = pnotes + notes + ["--mock-data and the optimizer settings make the command run as printed; "
                              "give --data-path, --split and your schedule for a real run"]
    if job.method != "full":
        raise UserInputError(f"{job.method}: Megatron-LM's pretrain_gpt.py trains full models; "
                             "use --emit bridge (Megatron-Bridge --mode lora)", field="emit")
    seg = Segment("megatron", "pretrain_gpt.py", ("pretrain_gpt.py",), tuple(par + shape + run))
    return LaunchPlan("megatron", (Command("train", (_torchrun(cluster), seg)),), notes=tuple(notes),
                      title=f"run from a Megatron-LM checkout; {cluster.n_devices} devices, {_nodes(cluster)} node(s)")


# =================================================================================================
# Megatron-Bridge
# =================================================================================================
def _bridge_recipe(model: ModelArch, plan: ParallelPlan, task: str = "pretrain") -> str | None:
    """The pinned Megatron-Bridge recipe for ``model`` (``task`` pretrain or peft), bf16 or fp8 when offered."""
    stem = model.id.replace("llama3.1", "llama31").replace("llama3.3", "llama33").replace(".", "p").replace("-", "_")
    recipes: list[str] = target("bridge").extra("recipes") or []
    cands = [r for r in recipes if r.startswith(f"{stem}_{task}_") and "mock" not in r and "deterministic" not in r
             and "k_config" not in r and "functional" not in r]
    want = {"fp8": "fp8cs", "fp4": "nvfp4"}.get(plan.precision, "bf16")
    for r in cands:
        if f"_{want}_" in r or r.endswith(f"_{want}_config"):
            return r
    return cands[0] if cands else None


def _bridge(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob,
            stack: TrainingStack, offload_layers: int = 0, recompute_layers: int = 0) -> LaunchPlan:
    notes: list[str] = []
    task = "pretrain" if job.method == "full" else "peft"
    recipe = _bridge_recipe(model, plan, task)
    if recipe is None and task == "peft":
        raise UserInputError(f"Megatron-Bridge {target('bridge').version} has no PEFT recipe for {model.id}",
                             field="emit")
    over: list[str] = []
    if recipe is None:
        recipe = "vanilla_gpt_pretrain_1gpu_h100_bf16_config"
        notes.append(f"Megatron-Bridge has no {model.id} recipe: the vanilla GPT recipe with {model.id}'s shape")
        kv = model.n_kv_heads or model.n_heads
        over += [f"model.num_layers={model.n_layers}", f"model.hidden_size={model.d_model}",
                 f"model.ffn_hidden_size={model.ffn_dim}", f"model.num_attention_heads={model.n_heads}",
                 f"model.num_query_groups={kv}", f"model.vocab_size={model.vocab_size}",
                 f"model.gated_linear_unit={str(model.mlp == 'gated').lower()}",
                 f"model.share_embeddings_and_output_weights={str(model.tied_embeddings).lower()}",
                 f"model.normalization={'RMSNorm' if model.norm == 'rmsnorm' else 'LayerNorm'}"]
        if model.moe is not None:
            e = model.moe
            over += [f"model.num_moe_experts={e.n_routed_experts}", f"model.moe_router_topk={e.top_k}",
                     f"model.moe_ffn_hidden_size={e.expert_ffn_dim}"]
    mode = "pretrain" if job.method == "full" else "lora"
    if job.method == "qlora":
        notes.append("Megatron-Bridge has LoRA, not QLoRA: the base model stays in bf16")
    dataset = "mock" if mode == "pretrain" else "squad"
    a = ["--recipe", recipe, "--mode", mode, "--dataset", dataset,
         "--tensor_model_parallel_size", str(plan.tp), "--pipeline_model_parallel_size", str(plan.pp),
         "--context_parallel_size", str(plan.cp), "--expert_model_parallel_size", str(plan.ep),
         "--expert_tensor_parallel_size", str(_etp(plan, stack)),
         "--global_batch_size", str(plan.global_batch_seqs), "--micro_batch_size", str(plan.micro_batch),
         "--seq_length", str(job.seq_len), "--max_steps", str(_train_iters(job, plan))]
    if plan.vpp > 1:
        a += ["--virtual_pipeline_model_parallel_size", str(plan.vpp)]
    if _uneven(model, plan) and _edge_slots(model, plan):
        over += ["model.account_for_embedding_in_pipeline_split=true", "model.account_for_loss_in_pipeline_split=true"]
    elif _uneven(model, plan):
        first, last = _uneven(model, plan) or (0, 0)
        over += [f"model.num_layers_in_first_pipeline_stage={first}", f"model.num_layers_in_last_pipeline_stage={last}"]
    over += [f"model.sequence_parallel={str(plan.sp and plan.tp > 1).lower()}"]
    if plan.recompute == "partial" and recompute_layers > 0:
        over += ["model.recompute_granularity=full", "model.recompute_method=block",
                 f"model.recompute_num_layers={partial_layers_per_chunk(recompute_layers, plan.vpp)}"]
    elif plan.recompute in ("none", "layer_offload", "partial"):
        over += ["model.recompute_granularity=null"]
        if plan.recompute == "layer_offload" and offload_layers > 0:
            over += ["model.cpu_offloading=true", f"model.cpu_offloading_num_layers={offload_layers}",
                     "model.cpu_offloading_weights=false"]
    else:
        over += [f"model.recompute_granularity={'full' if plan.recompute == 'offload' else plan.recompute}"]
        if plan.recompute == "selective":
            mods = ",".join(ordered_selective_modules(model, job.recompute_modules))
            over += [f"model.recompute_modules=[{mods}]"]
        if plan.recompute in ("full", "offload"):
            over += ["model.recompute_method=uniform", "model.recompute_num_layers=1"]
        if plan.recompute == "offload":
            notes.append(OFFLOAD_NOTE_MEGATRON)
    if job.offload_modules is not None:  # fine-grained activation offloading of the modules' inputs
        over += ["model.fine_grained_activation_offloading=true",
                 f"model.offload_modules=[{','.join(ordered_offload_modules(job.offload_modules))}]"]
    mp = {"bf16": "bf16_mixed", "fp16": "fp16_mixed", "fp8": "bf16_with_fp8_current_scaling_mixed",
          "fp4": "bf16_with_nvfp4_mixed"}[plan.precision]
    over += [f"mixed_precision={mp}"]
    if plan.zero_stage == 0:
        over += ["ddp.use_distributed_optimizer=false", "ddp.overlap_grad_reduce=true"]
    elif plan.zero_stage == 1:
        over += ["ddp.use_distributed_optimizer=true", "ddp.overlap_grad_reduce=true", "ddp.overlap_param_gather=true"]
    else:
        strategy = "optim_grads" if plan.zero_stage == 2 else "optim_grads_params"
        over += ["ddp.use_megatron_fsdp=true", f"ddp.data_parallel_sharding_strategy={strategy}",
                 "ddp.use_distributed_optimizer=true"]
    tp_on, ep_on = _overlaps(job, stack, plan)
    if tp_on and plan.tp > 1 and plan.sp:
        over += ["model.tp_comm_overlap=true"]
    if ep_on and plan.ep > 1:
        # what Megatron-Bridge's moe_a2a_overlap switch sets (scripts/performance/utils/overrides.py)
        over += ["model.overlap_moe_expert_parallel_comm=true", "model.delay_wgrad_compute=true",
                 "model.moe_shared_expert_overlap=false"]
    seg = Segment("bridge", "scripts/training/run_recipe.py", ("scripts/training/run_recipe.py",), tuple(a + over),
                  overrides=True)
    notes.append(f"--dataset {dataset} makes the command run as printed; give your dataset preset or dataset.* overrides")
    return LaunchPlan("bridge", (Command("train", (_torchrun(cluster), seg)),), notes=tuple(notes),
                      title=f"run from a Megatron-Bridge checkout; {cluster.n_devices} devices, {_nodes(cluster)} node(s)")


# =================================================================================================
# torchtitan
# =================================================================================================
#: xpuplan preset -> torchtitan 0.3.0 (module, config function); fp8 variants where the release has one.
_TITAN: Final = {
    "llama3-8b": ("llama3", "llama3_8b"), "llama3.1-8b": ("llama3", "llama3_8b"),
    "llama3-70b": ("llama3", "llama3_70b"), "llama3.1-70b": ("llama3", "llama3_70b"),
    "llama3.3-70b": ("llama3", "llama3_70b"), "llama3.1-405b": ("llama3", "llama3_405b"),
    "qwen3-32b": ("qwen3", "qwen3_32b"), "deepseek-v3": ("deepseek_v3", "deepseek_v3_671b"),
}
_TITAN_FP8: Final = {"llama3_8b": "llama3_8b_mxfp8", "deepseek_v3_671b": "deepseek_v3_671b_float8"}


def _torchtitan(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob,
                stack: TrainingStack, offload_layers: int = 0, recompute_layers: int = 0) -> LaunchPlan:
    if model.id not in _TITAN:
        configs = target("torchtitan").extra("configs") or {}
        raise UserInputError(f"torchtitan {target('torchtitan').version} ships no config function for {model.id} "
                             f"(modules: {', '.join(sorted(configs))}); use --emit megatron or bridge", field="emit")
    module, config = _TITAN[model.id]
    notes: list[str] = []
    if plan.precision == "fp4":
        raise UserInputError(f"torchtitan {target('torchtitan').version} has no NVFP4 training recipe; "
                             "use --emit megatron or bridge for fp4", field="emit")
    if plan.precision == "fp8":
        if config in _TITAN_FP8:
            config = _TITAN_FP8[config]
            notes.append(f"fp8 runs as torchtitan's {config} converter recipe")
        else:
            notes.append(f"torchtitan has no fp8 config for {model.id}: this trains in bf16")
    elif plan.precision == "fp16":
        notes.append("torchtitan trains in bf16 (training.dtype bfloat16 or float32); fp16 is not offered")
    if plan.recompute == "partial" and recompute_layers > 0:
        every = max(1, stage_layers(model, plan) // recompute_layers)
        notes.append(f"the plan recomputes {recompute_layers} of {stage_layers(model, plan)} layers per stage: in the "
                     f"config function set activation_checkpoint.mode = 'selective' and selective_ac_option = "
                     f"'{every}' (torchtitan's layer checkpointing of every {every}-th block, at least that many "
                     "layers)")
    elif plan.recompute != "selective" and not (plan.recompute == "partial" and recompute_layers == 0):
        notes.append(f"activation checkpointing is set by the config function (selective in {config}); "
                     f"the plan's '{plan.recompute}' needs an edited config function")
    dp = plan.dp
    shard, replicate = (dp, 1) if plan.zero_stage > 0 else (1, dp)
    a = ["--module", module, "--config", config,
         "--parallelism.data-parallel-shard-degree", str(shard),
         "--parallelism.data-parallel-replicate-degree", str(replicate),
         "--parallelism.tensor-parallel-degree", str(plan.tp),
         "--parallelism.pipeline-parallel-degree", str(plan.pp),
         "--parallelism.context-parallel-degree", str(plan.cp),
         "--parallelism.expert-parallel-degree", str(plan.ep)]
    if plan.zero_stage in (1, 2):
        a += ["--parallelism.fsdp-reshard-after-forward", "never"]
        notes.append(f"FSDP2 shards parameters too; ZeRO-{plan.zero_stage} is approached by keeping them gathered "
                     "between forward and backward (fsdp-reshard-after-forward never)")
    if plan.tp > 1:
        a += ["--parallelism.enable-sequence-parallel" if plan.sp else "--parallelism.no-enable-sequence-parallel"]
    if plan.pp > 1:
        a += ["--parallelism.pipeline-parallel-schedule", "Interleaved1F1B" if plan.vpp > 1 else "1F1B",
              "--parallelism.pipeline-parallel-microbatch-size", str(plan.micro_batch)]
        # torchtitan makes ceil((L + first + last) / layers_per_stage) virtual stages, the embedding and the output
        # weighing first/last-stage-less-layers (default 1 each; torchtitan/distributed/pipeline_parallel.py)
        # (an even plan sets both to 0: with the defaults the first and last stages of 32 layers on 4 would hold 8 and 7,
        # a middle one 9)
        k = plan.pp * plan.vpp
        if model.n_layers % k == 0:
            a += (["--parallelism.pipeline-parallel-layers-per-stage", str(model.n_layers // k)] if plan.vpp > 1 else [])
            a += ["--parallelism.pipeline-parallel-first-stage-less-layers", "0",
                  "--parallelism.pipeline-parallel-last-stage-less-layers", "0"]
        elif plan.vpp > 1 and _edge_slots(model, plan):
            a += ["--parallelism.pipeline-parallel-layers-per-stage", str((model.n_layers + EDGE_PIPELINE_SLOTS) // k)]
            notes.append("the embedding and the output each take one layer's slot (torchtitan's default "
                         "first/last-stage-less-layers 1)")
        elif plan.vpp > 1:
            notes.append(f"{model.n_layers} layers do not split into exactly {k} virtual stages with torchtitan's "
                         "layers-per-stage: it runs its default of 2 stages per rank unless you set "
                         "pipeline-parallel-layers-per-stage and first/last-stage-less-layers")
        if _uneven(model, plan):
            notes.append(f"{model.n_layers} layers over {plan.pp} stages: torchtitan splits them unevenly itself "
                         "(pipeline-parallel-first/last-stage-less-layers tune the split)")
        local = plan.micro_batch * plan.grad_accum
    else:
        local = plan.micro_batch
        if plan.grad_accum > 1:
            notes.append(f"global batch {plan.global_batch_seqs} = local {local} x dp {dp} x {plan.grad_accum} "
                         "accumulation steps (torchtitan derives the steps from the two batch sizes)")
    a += ["--training.local-batch-size", str(local), "--training.global-batch-size", str(plan.global_batch_seqs),
          "--training.seq-len", str(job.seq_len), "--training.steps", str(_train_iters(job, plan))]
    if job.method != "full":
        raise UserInputError(f"{job.method}: torchtitan trains full models; use --emit bridge (LoRA)", field="emit")
    head = ("-m", "torchtitan.train")
    seg = Segment("torchtitan", "torchtitan.train", head, tuple(a))
    return LaunchPlan("torchtitan", (Command("train", (_torchrun(cluster), seg)),), notes=tuple(notes),
                      title=f"{cluster.n_devices} devices, {_nodes(cluster)} node(s)")


# =================================================================================================
# DeepSpeed
# =================================================================================================
def deepspeed_config(plan: ParallelPlan, recompute_layers: int = 0) -> dict[str, Any]:
    """The ``ds_config.json`` of ``plan`` (batch, ZeRO, precision, checkpointing, AutoTP, Ulysses SP)."""
    cfg: dict[str, Any] = {
        "train_batch_size": plan.global_batch_seqs,
        "train_micro_batch_size_per_gpu": plan.micro_batch,
        "gradient_accumulation_steps": plan.grad_accum,
        "gradient_clipping": 1.0,
        "zero_optimization": {"stage": plan.zero_stage, "overlap_comm": True, "contiguous_gradients": True},
        ("fp16" if plan.precision == "fp16" else "bf16"): {"enabled": True},
    }
    if plan.recompute != "none" and not (plan.recompute == "partial" and recompute_layers == 0):
        cfg["activation_checkpointing"] = {"partition_activations": plan.tp > 1, "contiguous_memory_optimization": False}
        if plan.recompute == "offload":  # the checkpointed layer inputs go to host memory
            cfg["activation_checkpointing"].update(partition_activations=True, cpu_checkpointing=True)
    if plan.tp > 1:
        cfg["tensor_parallel"] = {"autotp_size": plan.tp}
    if plan.cp > 1:
        cfg["sequence_parallel_size"] = plan.cp
    return cfg


def deepspeed_config_problems(cfg: dict[str, Any]) -> list[str]:
    keys: dict[str, list[str]] = target("deepspeed").extra("config_keys") or {}
    out = check_keys(cfg, keys.get("top", []), "ds_config.json")
    for block in ("zero_optimization", "activation_checkpointing", "bf16", "fp16", "tensor_parallel"):
        if isinstance(cfg.get(block), dict):
            out += check_keys(cfg[block], keys.get(block, []), f"ds_config.json {block}")
    return out


def _deepspeed(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob,
               stack: TrainingStack, offload_layers: int = 0, recompute_layers: int = 0) -> LaunchPlan:
    notes = ["train.py is your script: it calls deepspeed.add_config_arguments(parser) and deepspeed.initialize(args=...)"]
    cfg = deepspeed_config(plan, recompute_layers)
    if plan.recompute == "partial" and recompute_layers > 0:
        notes.append(f"the plan recomputes {recompute_layers} of {stage_layers(model, plan)} layers per stage: wrap "
                     f"that many blocks with deepspeed.checkpointing.checkpoint in the model code, the others without")
    if plan.precision == "fp4":
        raise UserInputError("DeepSpeed has no FP4 training path; use --emit megatron or bridge for fp4", field="emit")
    if plan.precision == "fp8":
        notes.append("DeepSpeed has no FP8 GEMM path of its own: wrap linears with Transformer Engine for fp8")
    if plan.pp > 1:
        notes.append(f"pipeline parallelism: build the model as deepspeed.pipe.PipelineModule(num_stages={plan.pp})"
                     + ("; DeepSpeed pipelines support ZeRO stage 0-1 only" if plan.zero_stage > 1 else ""))
    if plan.vpp > 1:
        notes.append("DeepSpeed has no interleaved (virtual) pipeline schedule: vpp is dropped")
    if plan.cp > 1:
        notes.append(f"context parallelism runs as DeepSpeed-Ulysses (sequence_parallel_size {plan.cp}); "
                     "use UlyssesSPAttentionHF in the model")
    if plan.ep > 1:
        notes.append(f"MoE: build experts with deepspeed.moe.layer.MoE(ep_size={plan.ep})")
    if plan.tp > 1:
        notes.append(f"tensor parallelism is DeepSpeed AutoTP (tensor_parallel.autotp_size {plan.tp})")
    if job.method != "full":
        notes.append(f"{job.method}: wrap the model with Hugging Face PEFT before deepspeed.initialize")
    launcher = ["--num_nodes", str(_nodes(cluster)), "--num_gpus", str(_per_node(cluster))]
    if _nodes(cluster) > 1:
        launcher += ["--hostfile", "hostfile", "--master_addr", "$MASTER_ADDR", "--master_port", str(RDZV_PORT)]
    segs = (Segment("deepspeed", "deepspeed", ("deepspeed",), tuple(launcher)),
            Segment("deepspeed", "train.py", ("train.py",), ("--deepspeed", "--deepspeed_config", "ds_config.json")))
    return LaunchPlan("deepspeed", (Command("train", segs),), files=(("ds_config.json", json.dumps(cfg, indent=2)),),
                      file_problems=tuple(deepspeed_config_problems(cfg)), notes=tuple(notes),
                      title=f"{cluster.n_devices} devices, {_nodes(cluster)} node(s)")


# =================================================================================================
# Intel Gaudi: HabanaAI/Megatron-DeepSpeed scripts/run_llama.sh
# =================================================================================================
#: HL_CKP_ACT of each recompute mode run_llama.sh can say (1: --recompute-granularity=full --recompute-method
#: uniform; 2: --recompute-granularity=selective, Megatron's core-attention recomputation)
_GAUDI_CKP_ACT: Final = {"none": "0", "full": "1", "selective": "2"}


def gaudi_llama_shape(model: ModelArch) -> tuple[str, str] | None:
    """(HL_LLAMA_VER, HL_LLAMA_MODEL_SIZE) of the LLaMA shape run_llama.sh builds that ``model`` is (layers,
    hidden, heads, KV heads, FFN width and the version's tokenizer vocabulary all equal), None when none is; where
    two versions build the same shape (LLaMA 1 and 2 at 7B and 13B), the one the model's id names."""
    if model.moe is not None or model.mla is not None or model.mlp != "gated":
        return None
    t = target("gaudi")
    shapes: dict[str, dict[str, list[int]]] = t.extra("llama_shapes") or {}
    vocab: dict[str, int] = t.extra("llama_vocab") or {}
    want = [model.n_layers, model.d_model, model.n_heads, model.n_kv_heads or model.n_heads, model.ffn_dim]
    hits = [(ver, size) for ver, sizes in shapes.items() for size, shape in sizes.items()
            if shape == want and vocab.get(ver) == model.vocab_size]
    if not hits:
        return None
    named = model.id.replace("-", "").replace(".", "")
    for ver, size in hits:
        if f"llama{ver.replace('.', '')}" in named:
            return ver, size
    return hits[0]


def _gaudi(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob,
           stack: TrainingStack, offload_layers: int = 0, recompute_layers: int = 0) -> LaunchPlan:
    dev = cluster.device
    if dev.vendor != "Intel":
        raise UserInputError(f"--emit gaudi writes Intel's Megatron-DeepSpeed scripts for Gaudi; {dev.id} is not a "
                             "Gaudi: use --emit megatron, bridge, torchtitan or deepspeed", field="emit")
    shape = gaudi_llama_shape(model)
    if shape is None:
        raise UserInputError(f"--emit gaudi writes scripts/run_llama.sh, which builds the LLaMA 1, LLaMA 2 and Llama "
                             f"3.1 shapes only (7-405B); {model.id} is none of them (Mixtral is scripts/run_mixtral.sh, "
                             "not emitted)", field="emit")
    if job.method != "full":
        raise UserInputError(f"--emit gaudi: run_llama.sh pre-trains (full training); {job.method} is Optimum "
                             "Habana's (not emitted)", field="emit")
    # what Intel's stack runs (its profile: tp, pp, even stages, ZeRO 0/1), the rule every estimate applies
    issue = validity.rule_stack_parallelism(training_stack(FRAMEWORK_STACKS["gaudi"]), tp=plan.tp, pp=plan.pp,
                                            vpp=plan.vpp, cp=plan.cp, ep=plan.ep, zero_stage=plan.zero_stage,
                                            uneven=model.n_layers % (plan.pp * plan.vpp) != 0)
    if issue is not None:
        raise UserInputError(f"--emit gaudi: {issue.message}", field="emit")
    if plan.recompute not in _GAUDI_CKP_ACT:
        raise UserInputError(f"--emit gaudi: run_llama.sh recomputes none, full or selective (HL_CKP_ACT); the plan's "
                             f"recompute is {plan.recompute}: give --recompute none, full or selective", field="emit")
    if plan.precision not in ("bf16", "fp8"):
        raise UserInputError(f"--emit gaudi: run_llama.sh trains in bf16, or fp8 with Intel Gaudi's Transformer "
                             f"Engine; the plan's precision is {plan.precision}", field="emit")
    ver, size = shape
    nodes, per_node = _nodes(cluster), _per_node(cluster)
    if nodes * per_node != cluster.n_devices:  # the script exits unless HL_NUM_NODES * HL_DEVICES_PER_NODE == dp·tp·pp
        raise UserInputError(f"--emit gaudi: run_llama.sh runs whole {per_node}-card servers; {cluster.n_devices} "
                             f"devices is not a multiple of {per_node}", field="emit")
    env = [f"HL_NUM_NODES={nodes}", f"HL_DEVICES_PER_NODE={per_node}", f"HL_DP={plan.dp}", f"HL_TP={plan.tp}",
           f"HL_PP={plan.pp}", f"HL_LLAMA_VER={ver}", f"HL_LLAMA_MODEL_SIZE={size}", f"HL_SEQ_LEN={job.seq_len}",
           f"HL_MICRO_BATCH={plan.micro_batch}", f"HL_GBS={plan.global_batch_seqs}",
           f"HL_TRAIN_ITERS={_train_iters(job, plan)}", f"HL_ZERO_STAGE={plan.zero_stage}",
           f"HL_SEQ_PARALLEL={1 if plan.sp and plan.tp > 1 else 0}", f"HL_CKP_ACT={_GAUDI_CKP_ACT[plan.recompute]}",
           f"HL_USE_TRANSFORMER_ENGINE={1 if plan.precision == 'fp8' else 0}",
           f"HL_TOKENIZER_TYPE={(target('gaudi').extra('llama_tokenizer') or {})[ver]}"]
    notes = ["run from a clone of HabanaAI/Megatron-DeepSpeed at the pinned commit, in Intel's Gaudi PyTorch container "
             "of the same software release; the script reads the indexed dataset and tokenizer.model from "
             "HL_DATA_DIR_ROOT (default /data/datasets/red_pajama, prefix HL_DATA_FILE_PREFIX)"]
    if plan.precision == "fp8":
        notes.append("Intel's README adds HL_USE_CACHE_FP8_WEIGHT=1 and HL_USE_CACHE_FP8_WEIGHT_FWD=1 for speed when "
                     "memory allows: cached FP8 copies of the weights (about 1 byte per local parameter each) that "
                     "this estimate neither counts nor credits")
    if nodes > 1:
        env.append("HL_HOSTSFILE=hostsfile")
        notes.append(f"hostsfile: one line per node ('HOSTNAME slots={per_node}'), {nodes} nodes; the first is the "
                     "master (scripts/hostsfile is the template); HL_DATA_DIR_ROOT and HL_RESULTS_DIR must be shared "
                     "and writable on every node")
    if plan.pp > 1 and plan.grad_accum % plan.pp:
        notes.append(f"the script's comment asks for micro-batches per pipeline ({plan.grad_accum}) divisible by pp "
                     f"({plan.pp})")
    seg = Segment("gaudi", "run_llama.sh", ("env",), (*env, "bash", "scripts/run_llama.sh"), positionals=2,
                  overrides=True)
    return LaunchPlan("gaudi", (Command("train", (seg,)),), notes=tuple(notes),
                      title=f"{cluster.n_devices} devices, {nodes} node(s)")


_EMITTERS: Final = {"megatron": _megatron, "bridge": _bridge, "torchtitan": _torchtitan, "deepspeed": _deepspeed,
                    "gaudi": _gaudi}


def emit_launch(plan: ParallelPlan, model: ModelArch, cluster: Cluster, job: TrainingJob, framework: str,
                stack: TrainingStack | None = None, offload_layers: int = 0, recompute_layers: int = 0) -> LaunchPlan:
    """The launch command of ``plan`` for ``framework`` (megatron, bridge, torchtitan, deepspeed, gaudi).
    ``stack``: the training-stack profile the estimate ran under (default stack when None); the
    overlaps it assumed (TP communication, MoE all-to-all) are switched on in the command.
    ``offload_layers``: the layers a ``layer_offload`` plan offloads (``MemoryBreakdown.offload_layers``);
    ``recompute_layers``: the layers of a stage a ``partial`` plan recomputes (``MemoryBreakdown.recompute_layers``)."""
    if plan.ep_overlap and framework in ("torchtitan", "deepspeed"):
        raise UserInputError(f"--emit {framework}: the plan's MoE all-to-all overlap (-epo) is Megatron-Core's "
                             f"--overlap-moe-expert-parallel-comm ({framework} has none); use --emit megatron or "
                             "bridge, or a plan without it (--ep-overlap 0)", field="emit")
    if plan.recompute == "layer_offload" and framework in ("torchtitan", "deepspeed"):
        raise UserInputError(f"--emit {framework}: recompute layer_offload is Megatron-Core's activation offloading "
                             f"({framework} has none); use --emit megatron or bridge, or another --recompute",
                             field="emit")
    if job.offload_modules is not None and framework not in MODULE_OFFLOAD_FRAMEWORKS and framework in FRAMEWORKS:
        raise UserInputError(f"--emit {framework}: offloading the inputs of {', '.join(job.offload_modules)} is "
                             f"Megatron-Core's fine-grained activation offloading ({framework} has none); use --emit "
                             f"{' or '.join(MODULE_OFFLOAD_FRAMEWORKS)}, or no --offload-modules", field="emit")
    try:
        emitter = _EMITTERS[framework]
    except KeyError:
        raise UserInputError(f"unknown framework {framework!r}; choose {', '.join(FRAMEWORKS)}", field="emit") from None
    if cluster.device.kind.upper() == "TPU":  # all five are PyTorch-distributed launchers (NCCL, RCCL, HCCL)
        raise UserInputError(f"--emit {framework}: {framework} does not run on TPUs ({cluster.device.id}); "
                             "TPU training runs on JAX (MaxText) or PyTorch/XLA", field="--emit")
    st = stack or default_training_stack(cluster.device)
    launch = emitter(plan, model, cluster, job, st, offload_layers, recompute_layers=recompute_layers)
    if st.pipeline_schedule == "dualpipe" and plan.pp > 1:
        launch = dataclasses.replace(launch, notes=(
            *launch.notes, f"{framework} has no DualPipe: this command runs 1F1B over the same {plan.pp} stages (more "
            "bubble, one stage's parameters per rank) where the estimate ran DualPipe (deepseek-ai/DualPipe is a "
            "schedule to integrate yourself)"))
    return launch
