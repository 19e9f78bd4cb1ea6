"""Reliability at scale: failure rate, checkpoint time, Young/Daly interval, goodput."""

from __future__ import annotations

import math

import pytest

from xpuplan import units
from xpuplan.cost import (
    FAILURES_PER_DEVICE_HOUR,
    checkpoint_write_s,
    daly_interval_s,
    expected_wall_time_s,
    job_mtbf_s,
    reliability,
    young_interval_s,
)
from xpuplan.errors import UserInputError


def test_llama3_default_failure_rate():
    # 419 unexpected interruptions in 54 days on 16,384 GPUs: one every ~3.1 hours
    assert FAILURES_PER_DEVICE_HOUR.value == pytest.approx(1.973e-5, rel=1e-3)
    assert job_mtbf_s(FAILURES_PER_DEVICE_HOUR.value, 16384) / units.HOUR == pytest.approx(54 * 24 / 419, rel=1e-9)
    assert math.isinf(job_mtbf_s(0.0, 8))


def test_intervals():
    assert checkpoint_write_s(1e12, 1e10) == pytest.approx(100.0)
    assert young_interval_s(100.0, 20_000.0) == pytest.approx(2000.0)
    d = daly_interval_s(100.0, 20_000.0)
    assert 1900 < d < 2100  # higher-order terms and -delta nearly cancel at delta << M
    assert daly_interval_s(50_000.0, 20_000.0) == 20_000.0  # delta >= 2M: checkpoint every M
    with pytest.raises(UserInputError):
        checkpoint_write_s(1.0, 0.0)


def test_daly_optimum_minimises_expected_time():
    delta, m, r, work = 60.0, 10_000.0, 300.0, 1e6
    best = daly_interval_s(delta, m)
    t_best = expected_wall_time_s(work, best, delta, r, m)
    for tau in (best / 3, best / 1.5, best * 1.5, best * 3):
        assert expected_wall_time_s(work, tau, delta, r, m) > t_best


def test_goodput_of_a_llama3_405b_like_run():
    res = reliability(devices=16384, failure_free_time_s=54 * units.DAY, checkpoint_bytes=405e9 * 14)
    assert res.job_mtbf_s / units.HOUR == pytest.approx(3.09, abs=0.01)
    assert res.checkpoint_write_s == pytest.approx(405e9 * 14 / 2e12, rel=1e-9)
    assert 0.95 < res.goodput < 0.99
    assert res.effective_time_s > res.failure_free_time_s
    assert res.expected_failures == pytest.approx(res.effective_time_s / res.job_mtbf_s)
    assert any(a["name"] == "failures_per_device_hour" for a in res.assumptions)


def test_no_failures_costs_only_checkpoints_and_more_restart_costs_more():
    ok = reliability(devices=8, failure_free_time_s=1e5, checkpoint_bytes=1e12, storage_bytes_per_s=1e10,
                     failures_per_device_hour=0.0, interval_s=1000.0)
    assert ok.effective_time_s == pytest.approx(1e5 * 1.1)
    a = reliability(devices=1024, failure_free_time_s=1e6, checkpoint_bytes=1e12, restart_s=60)
    b = reliability(devices=1024, failure_free_time_s=1e6, checkpoint_bytes=1e12, restart_s=1800)
    assert b.goodput < a.goodput


def test_bad_input_names_the_field():
    with pytest.raises(UserInputError) as exc:
        reliability(devices=0, failure_free_time_s=1.0, checkpoint_bytes=1.0)
    assert exc.value.field == "devices"
    with pytest.raises(UserInputError) as exc:
        reliability(devices=1, failure_free_time_s=1.0, checkpoint_bytes=1.0, rule="fastest")
    assert exc.value.field == "rule"
