"""Launch arguments realise the plan: parallel sizes, micro-batch, recomputation, precision."""

from __future__ import annotations

import pytest

from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.efficiency import default_efficiency
from xpuplan.train import Cluster, ParallelPlan, emit_launch
from xpuplan.workload.training import TrainingJob

MODEL = get_model("llama3-70b")
JOB = TrainingJob(seq_len=8192)


def _args(plan: ParallelPlan, framework: str) -> tuple[str, ...]:
    c = Cluster.from_catalog("H100", plan.n_devices, efficiency=default_efficiency())
    return emit_launch(plan, MODEL, c, JOB, framework).argv


def _value(argv: tuple[str, ...], flag: str) -> str:
    return argv[argv.index(flag) + 1]


PLAN = ParallelPlan(tp=8, pp=4, vpp=5, dp=4, cp=2, sp=True, zero_stage=1, recompute="full", micro_batch=1,
                    grad_accum=16, precision="fp8")


def test_megatron_arguments():
    a = _args(PLAN, "megatron")
    assert _value(a, "--tensor-model-parallel-size") == "8" and _value(a, "--pipeline-model-parallel-size") == "4"
    assert _value(a, "--num-layers-per-virtual-pipeline-stage") == "4"  # 80 / (4 · 5)
    assert _value(a, "--context-parallel-size") == "2" and "--sequence-parallel" in a
    assert "--use-distributed-optimizer" in a and _value(a, "--recompute-granularity") == "full"
    assert _value(a, "--micro-batch-size") == "1" and _value(a, "--global-batch-size") == str(PLAN.global_batch_seqs)
    assert _value(a, "--fp8-format") == "hybrid" and _value(a, "--seq-length") == "8192"
    assert _value(a, "--nnodes") == str(PLAN.n_devices // 8)


def test_torchtitan_arguments():
    a = _args(PLAN, "torchtitan")
    assert _value(a, "--parallelism.tensor_parallel_degree") == "8"
    assert _value(a, "--parallelism.pipeline_parallel_schedule") == "Interleaved1F1B"
    assert _value(a, "--parallelism.context_parallel_degree") == "2"
    assert _value(a, "--activation_checkpoint.mode") == "full" and _value(a, "--model.converters") == "float8"
    assert _value(a, "--training.global_batch_size") == str(PLAN.global_batch_seqs)


def test_deepspeed_config_and_notes():
    c = Cluster.from_catalog("H100", PLAN.n_devices, efficiency=default_efficiency())
    cmd = emit_launch(PLAN, MODEL, c, JOB, "deepspeed")
    assert cmd.config["train_micro_batch_size_per_gpu"] == 1 and cmd.config["gradient_accumulation_steps"] == 16
    assert cmd.config["zero_optimization"]["stage"] == 1 and "activation_checkpointing" in cmd.config
    assert any("context parallelism" in n for n in cmd.notes) and any("interleaved" in n for n in cmd.notes)
    assert "ds_config.json" in cmd.to_text()


def test_unknown_framework():
    with pytest.raises(UserInputError) as exc:
        _args(PLAN, "jax")
    assert exc.value.field == "emit"
