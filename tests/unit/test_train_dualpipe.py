"""DualPipe's pipeline bubble (DeepSeek-V3, arXiv 2412.19437 Table 2; deepseek-ai/DualPipe README):
(PP/2 - 1)(F&B + B - 3W) against 1F1B's (PP - 1)(F + B)."""

from __future__ import annotations

import numpy as np
import pytest

from xpuplan.catalog.stacks import training_stack
from xpuplan.models import get_model
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.train.phases import dualpipe_bubble_s
from xpuplan.workload.training import TrainingJob


def test_the_formula():
    # F = 1, B = 2 (full backward), W = 1 (its weight half): (16/2 - 1) * ((1 + 2) + 2 - 3) = 14
    assert float(dualpipe_bubble_s(np.array([16.0]), np.array([1.0]), np.array([2.0]), np.array([1.0]))[0]) == 14.0
    # two stages: none; 1F1B would idle (2 - 1)(1 + 2) = 3
    assert float(dualpipe_bubble_s(np.array([2.0]), np.array([1.0]), np.array([2.0]), np.array([1.0]))[0]) == 0.0


@pytest.mark.parametrize("pp", [2, 16])
def test_the_dualpipe_stack_idles_less_than_1f1b(pp: int):
    m = get_model("deepseek-v3")
    c = Cluster.from_catalog("nvidia-h800-sxm-80gb", 2048)
    job = TrainingJob(seq_len=4096, global_batch_tokens=15360 * 4096)
    plan = make_plan(n_devices=2048, global_batch_seqs=15360, pp=pp, ep=64, zero_stage=1, precision="fp8",
                     recompute="selective", model=m, uneven_pipeline=True)
    dual = training_stack("deepseek-dualpipe")
    one = dual.model_copy(update={"pipeline_schedule": "1f1b"})
    d = estimate(m, c, plan, job, stack=dual, uneven_pipeline=True)
    o = estimate(m, c, plan, job, stack=one, uneven_pipeline=True)
    assert d.step.compute_s == pytest.approx(o.step.compute_s)  # only the bubble differs
    assert o.step.bubble_s > 0
    if pp == 2:
        assert d.step.bubble_s == 0.0
    else:  # (pp/2 - 1)(F + 2B - 3W) against (pp - 1)(F + B): well under half
        assert d.step.bubble_s < 0.5 * o.step.bubble_s
    assert d.memory.total_bytes == pytest.approx(o.memory.total_bytes)  # its memory is not charged (docs)
