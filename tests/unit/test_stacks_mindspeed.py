"""MindSpeed-LLM's two paths as training stacks: Legacy (``mindspeed``) and Mcore (``mindspeed-mcore``).

The README performance table of MindSpeed-LLM @4ebd4792 mixes rows run on the Legacy path and on the Mcore
path; their example scripts differ in MC2 (TP collectives fused with the matmuls) and in overlapping the
data-parallel gradient reduction (docs/training.md, training_stacks.yaml).
"""

from __future__ import annotations

import pytest

from xpuplan.catalog.stacks import stack_for_framework, training_stack
from xpuplan.models import get_model
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.workload.training import TrainingJob


@pytest.mark.parametrize(("framework", "stack"), [
    ("MindSpeed-LLM (Mcore, PyTorch + torch_npu)", "mindspeed-mcore"),
    ("MindSpeed-LLM Mcore", "mindspeed-mcore"),
    ("MindSpeed-LLM (Legacy, PyTorch + torch_npu)", "mindspeed"),
    ("ModelLink", "mindspeed"),
    ("MindSpeed", "mindspeed"),
])
def test_framework_names_map_to_the_path(framework, stack):
    assert stack_for_framework(framework, 2024).id == stack


def test_the_paths_differ_only_where_the_scripts_do():
    legacy, mcore = training_stack("mindspeed"), training_stack("mindspeed-mcore")
    assert mcore.tp_comm_overlap and mcore.tp_overlap_needs_sp and not legacy.tp_comm_overlap
    assert mcore.grad_reduce_overlap and not legacy.grad_reduce_overlap
    same = ("sequence_parallel", "p2p_overlap", "interleaved_pipeline", "zero3_granularity", "zero3_prefetch",
            "ep_overlap", "moe_host_sync", "cp_algorithm", "fp8_attention")
    assert all(getattr(legacy, f) == getattr(mcore, f) for f in same)


def _eval(stack: str, n: int, **plan_kw):
    m = get_model("llama2-13b")
    c = Cluster.from_catalog("huawei-ascend-910b", n)
    job = TrainingJob(seq_len=4096, global_batch_tokens=64 * n * 4096)
    plan = make_plan(n_devices=n, global_batch_seqs=job.global_batch_seqs, precision="bf16", **plan_kw)
    return estimate(m, c, plan, job, stack=training_stack(stack))


def test_mc2_hides_tp_collectives_under_the_matmuls():
    kw = dict(tp=8, pp=1, sp=True, zero_stage=0, micro_batch=4)
    legacy, mcore = _eval("mindspeed", 8, **kw), _eval("mindspeed-mcore", 8, **kw)
    assert legacy.step.tp_comm_s > 0
    assert mcore.step.tp_comm_s < 0.6 * legacy.step.tp_comm_s
    assert mcore.step.tp_comm_s >= legacy.step.tp_comm_s / 8 * 0.999  # one chunk stays exposed
    assert mcore.tokens_per_s > legacy.tokens_per_s
    # MC2 needs sequence parallelism: without it the TP all-reduces wait on both paths
    no_sp = dict(kw, sp=False)
    assert _eval("mindspeed-mcore", 8, **no_sp).step.tp_comm_s == pytest.approx(
        _eval("mindspeed", 8, **no_sp).step.tp_comm_s)


def test_the_legacy_gradient_reduction_waits_for_the_backward():
    kw = dict(tp=1, pp=2, zero_stage=1, micro_batch=1)
    legacy, mcore = _eval("mindspeed", 16, **kw), _eval("mindspeed-mcore", 16, **kw)
    assert legacy.step.tp_comm_s == mcore.step.tp_comm_s == 0
    assert legacy.step.dp_comm_s > mcore.step.dp_comm_s
    # no data parallelism, no TP: the two paths run the same step
    one = dict(tp=1, pp=8, zero_stage=0, micro_batch=1)
    assert _eval("mindspeed", 8, **one).step_time_s == pytest.approx(_eval("mindspeed-mcore", 8, **one).step_time_s)
