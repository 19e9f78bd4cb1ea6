"""Launch commands realise the plan and are accepted by the pinned release of each framework."""

from __future__ import annotations

import json

import pytest

from xpuplan.catalog.launch_targets import launch_targets
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.efficiency import default_efficiency
from xpuplan.train import FRAMEWORKS, Cluster, ParallelPlan, emit_launch
from xpuplan.workload.training import TrainingJob

MODEL = get_model("llama3-70b")
JOB = TrainingJob(seq_len=8192)


def _launch(plan: ParallelPlan, framework: str, model=MODEL, job=JOB):
    c = Cluster.from_catalog("H100", plan.n_devices, efficiency=default_efficiency())
    return emit_launch(plan, model, c, job, framework)


def _args(plan: ParallelPlan, framework: str, model=MODEL, job=JOB) -> tuple[str, ...]:
    return _launch(plan, framework, model, job).commands[0].argv


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


PLAN = ParallelPlan(tp=8, pp=4, vpp=5, dp=4, cp=2, sp=True, zero_stage=1, recompute="full", micro_batch=1,
                    grad_accum=16, precision="fp8")

#: Plans covering every branch of the emitters: dense/GQA, MoE with EP, MLA, ZeRO 0-3, uneven stages.
CASES = [
    ("llama3-70b", PLAN, JOB),
    ("llama3-8b", ParallelPlan(tp=1, pp=1, dp=8, zero_stage=0, recompute="none", micro_batch=2, grad_accum=4,
                               precision="bf16"), TrainingJob(seq_len=4096)),
    ("mixtral-8x7b", ParallelPlan(tp=2, pp=2, dp=16, ep=8, sp=True, zero_stage=3, recompute="selective",
                                  micro_batch=1, grad_accum=2, precision="fp16"), TrainingJob(seq_len=4096, tp_overlap=0.8)),
    ("deepseek-v3", ParallelPlan(tp=8, pp=16, dp=8, ep=8, sp=True, zero_stage=1, recompute="selective",
                                 micro_batch=1, grad_accum=128, precision="bf16"), TrainingJob(seq_len=4096)),
    ("qwen3-32b", ParallelPlan(tp=4, pp=2, dp=2, cp=2, sp=False, zero_stage=2, recompute="full",
                               micro_batch=1, grad_accum=8, precision="bf16"), TrainingJob(seq_len=32768)),
    ("gpt3-175b", ParallelPlan(tp=8, pp=8, dp=2, sp=True, zero_stage=1, micro_batch=1, grad_accum=64,
                               precision="bf16"), TrainingJob(seq_len=2048, ep_overlap=0.5)),
    ("llama3-8b", ParallelPlan(tp=2, pp=1, dp=4, sp=True, zero_stage=3, recompute="offload", micro_batch=2,
                               grad_accum=2, precision="bf16"), TrainingJob(seq_len=8192)),
]


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("model_id,plan,job", CASES, ids=[c[0] for c in CASES])
def test_every_emitted_command_is_accepted_by_the_pinned_release(framework, model_id, plan, job):
    try:
        launch = _launch(plan, framework, get_model(model_id), job)
    except UserInputError as exc:  # a framework that cannot train this model says so by name
        assert exc.field == "emit" and framework in ("torchtitan", "gaudi")  # gaudi: Gaudi devices only
        return
    assert launch.problems() == [], launch.to_text()
    assert launch.pinned.version in launch.to_text()


def test_megatron_arguments():
    a = _args(PLAN, "megatron")
    assert a[0] == "torchrun" and "pretrain_gpt.py" in a
    assert _value(a, "--tensor-model-parallel-size") == "8" and _value(a, "--pipeline-model-parallel-size") == "4"
    assert _value(a, "--num-virtual-stages-per-pipeline-rank") == "5" and _value(a, "--context-parallel-size") == "2"
    assert "--sequence-parallel" in a and "--use-distributed-optimizer" in a
    assert _value(a, "--recompute-granularity") == "full" and _value(a, "--fp8-format") == "hybrid"
    assert _value(a, "--micro-batch-size") == "1" and _value(a, "--global-batch-size") == str(PLAN.global_batch_seqs)
    assert _value(a, "--seq-length") == "8192"
    # full model shape: layers, hidden, heads, KV groups, FFN, tokenizer
    assert _value(a, "--num-layers") == "80" and _value(a, "--hidden-size") == "8192"
    assert _value(a, "--num-attention-heads") == "64" and _value(a, "--num-query-groups") == "8"
    assert "--group-query-attention" in a and _value(a, "--ffn-hidden-size") == "28672"
    assert _value(a, "--tokenizer-model") == "meta-llama/Meta-Llama-3-70B"
    assert _value(a, "--nnodes") == "32" and _value(a, "--nproc-per-node") == "8"


def test_megatron_moe_and_uneven_pipeline():
    plan = CASES[3][1]
    a = _args(plan, "megatron", get_model("deepseek-v3"), CASES[3][2])
    assert _value(a, "--expert-model-parallel-size") == "8" and _value(a, "--expert-tensor-parallel-size") == "8"
    assert _value(a, "--num-experts") == "256" and _value(a, "--moe-router-topk") == "8"
    assert _value(a, "--moe-layer-freq") == "([0]*3+[1]*58)" and "--multi-latent-attention" in a
    first, last = int(_value(a, "--decoder-first-pipeline-num-layers")), int(_value(a, "--decoder-last-pipeline-num-layers"))
    assert first + last + 14 * 4 == 61 and max(first, last) <= 4  # busiest stage holds ceil(61/16) = 4


def test_megatron_zero_stages():
    z3 = ParallelPlan(tp=8, pp=1, dp=16, zero_stage=3, micro_batch=1, grad_accum=1)
    a = _args(z3, "megatron")
    assert "--use-megatron-fsdp" in a and _value(a, "--data-parallel-sharding-strategy") == "optim_grads_params"
    z0 = ParallelPlan(tp=8, pp=1, dp=16, zero_stage=0, micro_batch=1, grad_accum=1)
    assert "--use-distributed-optimizer" not in _args(z0, "megatron")


def test_megatron_refuses_adapters():
    with pytest.raises(UserInputError) as e:
        _launch(PLAN, "megatron", job=TrainingJob(seq_len=8192, method="lora"))
    assert e.value.field == "emit" and "bridge" in str(e.value)


def test_bridge_recipe_and_overrides():
    lp = _launch(PLAN, "bridge")
    a = lp.commands[0].argv
    assert _value(a, "--recipe").startswith("llama3_70b_pretrain_")  # fp8 comes from the mixed_precision override
    assert _value(a, "--tensor_model_parallel_size") == "8" and _value(a, "--virtual_pipeline_model_parallel_size") == "5"
    assert "model.sequence_parallel=true" in a and "model.recompute_granularity=full" in a
    assert "mixed_precision=bf16_with_fp8_current_scaling_mixed" in a and "ddp.use_distributed_optimizer=true" in a
    # a model without a recipe gets the vanilla GPT recipe with its own shape
    b = _args(CASES[2][1], "bridge", get_model("mixtral-8x7b"), CASES[2][2])
    assert _value(b, "--recipe") == "vanilla_gpt_pretrain_1gpu_h100_bf16_config" and "model.num_moe_experts=8" in b
    lora = _launch(PLAN, "bridge", job=TrainingJob(seq_len=8192, method="lora"))
    assert lora.problems() == []
    la = lora.commands[0].argv
    assert _value(la, "--mode") == "lora" and "_peft_" in _value(la, "--recipe") and _value(la, "--dataset") == "squad"
    with pytest.raises(UserInputError):  # no PEFT recipe for this model in the pinned release
        _launch(CASES[2][1], "bridge", get_model("mixtral-8x7b"), TrainingJob(seq_len=4096, method="lora"))


def test_torchtitan_arguments():
    lp = _launch(PLAN, "torchtitan")
    a = lp.commands[0].argv
    assert _value(a, "--module") == "llama3" and _value(a, "--config") == "llama3_70b"
    assert _value(a, "--parallelism.tensor-parallel-degree") == "8"
    assert _value(a, "--parallelism.pipeline-parallel-schedule") == "Interleaved1F1B"
    assert _value(a, "--parallelism.data-parallel-shard-degree") == "4"
    assert _value(a, "--training.local-batch-size") == "16" and _value(a, "--training.seq-len") == "8192"
    assert any("fp8" in n for n in lp.notes) and any("activation checkpointing" in n for n in lp.notes)


def test_torchtitan_refuses_models_without_a_config():
    with pytest.raises(UserInputError) as e:
        _launch(CASES[2][1], "torchtitan", get_model("mixtral-8x7b"), CASES[2][2])
    assert e.value.field == "emit" and "mixtral-8x7b" in str(e.value)


def test_deepspeed_config_file():
    plan = ParallelPlan(tp=1, pp=1, dp=64, zero_stage=3, recompute="selective", micro_batch=2, grad_accum=4,
                        precision="bf16")
    lp = _launch(plan, "deepspeed")
    cfg = json.loads(dict(lp.files)["ds_config.json"])
    assert cfg["train_batch_size"] == 512 and cfg["train_micro_batch_size_per_gpu"] == 2
    assert cfg["gradient_accumulation_steps"] == 4 and cfg["zero_optimization"]["stage"] == 3 and cfg["bf16"]["enabled"]
    a = lp.commands[0].argv
    assert a[:5] == ("deepspeed", "--num_nodes", "8", "--num_gpus", "8") and "--deepspeed_config" in a
    assert "ds_config.json" in lp.to_text() and "0.19.8" in lp.to_text()
    tp = _launch(PLAN, "deepspeed")
    assert json.loads(dict(tp.files)["ds_config.json"])["tensor_parallel"]["autotp_size"] == 8
    assert any("PipelineModule" in n for n in tp.notes)


def test_text_is_one_flag_per_line():
    text = _launch(PLAN, "megatron").to_text()
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines[0] == "torchrun \\" and all(ln.endswith(" \\") for ln in lines[:-1])
    assert "  --tensor-model-parallel-size 8 \\" in lines
    assert '"$MASTER_ADDR:29500"' in text  # left for the shell to expand


def test_unknown_framework():
    with pytest.raises(UserInputError) as e:
        emit_launch(PLAN, MODEL, Cluster.from_catalog("H100", PLAN.n_devices, efficiency=default_efficiency()), JOB, "jax")
    assert e.value.field == "emit"


def test_jobs_frameworks_match():
    from xpuplan.jobs.train import FRAMEWORKS as JOB_FRAMEWORKS

    assert tuple(JOB_FRAMEWORKS) == tuple(FRAMEWORKS)
    assert set(FRAMEWORKS) <= set(launch_targets())


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_no_pytorch_launcher_for_a_tpu(framework):
    """Was: a torchrun/Megatron command printed for TPU v5p as if it would run."""
    cluster = Cluster.from_catalog("TPUv5p", 8)
    plan = ParallelPlan(tp=1, pp=1, dp=8)
    with pytest.raises(UserInputError) as e:
        emit_launch(plan, get_model("llama3-8b"), cluster, TrainingJob(), framework)
    assert e.value.field == "--emit" and "TPU" in str(e.value)


def test_the_stacks_overlaps_reach_the_command():
    """A plan estimated under a stack that overlaps TP collectives (NeMo) is launched with the overlap on;
    under the default Megatron-Core stack it is off unless the job asks for it."""
    from xpuplan.catalog.stacks import training_stack

    c = Cluster.from_catalog("H100", PLAN.n_devices, efficiency=default_efficiency())
    nemo = emit_launch(PLAN, MODEL, c, JOB, "megatron", training_stack("nemo")).commands[0].argv
    core = emit_launch(PLAN, MODEL, c, JOB, "megatron", training_stack("megatron-core")).commands[0].argv
    assert "--tp-comm-overlap" in nemo
    assert "--tp-comm-overlap" not in core
    # the job's explicit fraction wins over the stack
    off = emit_launch(PLAN, MODEL, c, TrainingJob(seq_len=8192, tp_overlap=0.0), "megatron",
                      training_stack("nemo")).commands[0].argv
    assert "--tp-comm-overlap" not in off
    bridge = emit_launch(PLAN, MODEL, c, JOB, "bridge", training_stack("nemo")).commands[0].argv
    assert "model.tp_comm_overlap=true" in bridge


def test_offloaded_plans_run_as_full_recomputation_and_say_what_is_not_offloaded():
    plan = ParallelPlan(tp=2, pp=1, dp=4, sp=True, zero_stage=1, recompute="offload", micro_batch=2, grad_accum=2,
                        precision="bf16")
    model, job = get_model("llama3-8b"), TrainingJob(seq_len=8192)
    for fw in ("megatron", "bridge"):
        launch = _launch(plan, fw, model, job)
        argv = launch.commands[0].argv
        assert ("--recompute-granularity" in argv and _value(argv, "--recompute-granularity") == "full") or \
            "model.recompute_granularity=full" in argv
        assert any("offload" in n and "full recomputation" in n for n in launch.notes), fw
    cfg = json.loads(dict(_launch(plan, "deepspeed", model, job).files)["ds_config.json"])
    assert cfg["activation_checkpointing"]["cpu_checkpointing"] is True
    assert cfg["activation_checkpointing"]["partition_activations"] is True


def test_megatron_ep_overlap_notes_what_megatron_core_refuses():
    moe = get_model("mixtral-8x7b")
    job = TrainingJob(seq_len=4096, ep_overlap=1.0)
    plain = ParallelPlan(tp=1, pp=2, dp=32, ep=8, zero_stage=1, recompute="full", micro_batch=1, grad_accum=4,
                         precision="bf16")
    text = _launch(plain, "megatron", moe, job).to_text()
    assert "--overlap-moe-expert-parallel-comm" in text
    assert "needs a virtual pipeline" in text and "refuses full recomputation" in text
    ok = ParallelPlan(tp=1, pp=2, vpp=2, dp=32, ep=8, zero_stage=1, recompute="selective", micro_batch=1,
                      grad_accum=4, precision="bf16")
    text = _launch(ok, "megatron", moe, job).to_text()
    assert "--overlap-moe-expert-parallel-comm" in text and "needs a virtual pipeline" not in text
    assert "refuses full recomputation" not in text
