"""Training energy uses the one power model (``perf.power``)."""

from __future__ import annotations

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.models import get_model
from xpuplan.perf.power import power_profile_for, power_work_w
from xpuplan.train import Cluster, ParallelPlan, estimate
from xpuplan.units import KWH
from xpuplan.workload.training import TrainingJob


def test_training_power_and_energy_follow_perf_power():
    dev = load_catalog().get("H100")
    plan = ParallelPlan(tp=8, pp=1, dp=8, micro_batch=1, grad_accum=4)
    job = TrainingJob(seq_len=4096, global_batch_tokens=4096 * 32, train_tokens=1e9)
    est = estimate(get_model("llama3-8b"), Cluster.from_catalog(dev, 64), plan, job)
    s = est.step
    compute = (s.compute_s + s.recompute_s + s.optimizer_s) / s.step_s
    prof = power_profile_for(dev)
    expected = compute * power_work_w(prof, 1.0) + (1 - compute) * power_work_w(prof, 0.0)
    assert est.power_w_per_device == pytest.approx(expected, rel=1e-9)
    assert prof.idle_w < est.power_w_per_device <= dev.tdp_w
    assert est.energy_kwh == pytest.approx(expected * 64 * est.time_to_train_s / KWH, rel=1e-9)
