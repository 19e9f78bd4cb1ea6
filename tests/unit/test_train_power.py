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


def test_power_cap_slows_compute_by_the_dvfs_clock_and_clips_the_draw():
    from xpuplan.perf.power import compute_clock_fraction_at_cap

    dev = load_catalog().get("H100")
    plan = ParallelPlan(tp=8, pp=1, dp=8, micro_batch=1, grad_accum=4)
    base = dict(seq_len=4096, global_batch_tokens=4096 * 32, train_tokens=1e9)
    free = estimate(get_model("llama3-8b"), Cluster.from_catalog(dev, 64), plan, TrainingJob(**base))
    capped = estimate(get_model("llama3-8b"), Cluster.from_catalog(dev, 64), plan,
                      TrainingJob(**base, power_cap_w=500.0))
    r = compute_clock_fraction_at_cap(power_profile_for(dev), 500.0)
    assert 0.8 < r < 0.95  # 700 W -> 500 W: the clock falls by about the cube root of the dynamic-power ratio
    # compute-bound GEMMs and attention stretch by about 1/r; communication does not
    assert capped.step.compute_s / free.step.compute_s == pytest.approx(1.0 / r, rel=0.08)
    assert capped.step.tp_comm_s == pytest.approx(free.step.tp_comm_s, rel=0.05)
    assert capped.tokens_per_s < free.tokens_per_s
    assert capped.power_w_per_device <= 500.0 and capped.power_w_per_device < free.power_w_per_device
    assert any("power cap 500 W" in n for n in capped.notes)
    # a cap at or above the compute-bound draw changes nothing
    loose = estimate(get_model("llama3-8b"), Cluster.from_catalog(dev, 64), plan,
                     TrainingJob(**base, power_cap_w=800.0))
    assert loose.tokens_per_s == pytest.approx(free.tokens_per_s)


def test_power_cap_must_be_positive():
    with pytest.raises(ValueError, match="power_cap_w"):
        TrainingJob(power_cap_w=0)


def test_power_cap_below_idle_is_a_user_error():
    from xpuplan.errors import UserInputError

    dev = load_catalog().get("H100")
    job = TrainingJob(seq_len=4096, global_batch_tokens=4096 * 32, power_cap_w=30.0)
    with pytest.raises(UserInputError) as exc:
        estimate(get_model("llama3-8b"), Cluster.from_catalog(dev, 64),
                 ParallelPlan(tp=8, pp=1, dp=8, micro_batch=1, grad_accum=4), job)
    assert exc.value.field == "power_cap_w" and "idle" in exc.value.message
