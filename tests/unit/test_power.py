"""Power model: draw vs busy fraction, memory- vs compute-bound work, power-cap what-if."""

from __future__ import annotations

import pytest

import xpuplan as xp
from xpuplan.errors import UserInputError
from xpuplan.perf.power import (
    IDLE_FRACTION_OF_TDP,
    WORK_DRAW_FRACTION,
    clock_fraction_at_cap,
    energy_j,
    power_average_w,
    power_cap_what_if,
    power_profile,
    power_profile_for,
    power_work_w,
)


def _h100():
    return power_profile_for(xp.get_device("H100"))


def test_profile_from_catalog_tdp_and_kind():
    p = _h100()
    assert p.tdp_w == 700
    assert p.idle_w == pytest.approx(70.0)  # 10% of TDP, the GPU default
    names = {a.name for a in p.assumptions}
    assert {"idle_fraction_of_tdp", "compute_bound_draw_fraction", "memory_bound_draw_fraction",
            "dvfs_exponent", "min_clock_fraction"} <= names
    assert all(a.source and a.trust in "ABCD" for a in p.assumptions)


def test_every_default_assumption_has_a_source_and_range():
    for a in (*IDLE_FRACTION_OF_TDP.values(), *WORK_DRAW_FRACTION.values()):
        assert a.source and a.low <= a.value <= a.high
    # NPU/TPU idle reuse the GPU figure and say so with the lowest trust
    assert IDLE_FRACTION_OF_TDP["NPU"].trust == "D" and "no public" in IDLE_FRACTION_OF_TDP["NPU"].note


def test_average_power_is_linear_in_busy_fraction():
    p = _h100()
    assert power_average_w(p, 0.0) == pytest.approx(70.0)
    assert power_average_w(p, 1.0, compute_bound_fraction=1.0) == pytest.approx(700.0)
    assert power_average_w(p, 0.5) == pytest.approx((70 + 700) / 2)


def test_memory_bound_work_draws_less_than_compute_bound():
    p = _h100()
    assert power_work_w(p, 0.0) == pytest.approx(0.31 * 700)
    assert power_work_w(p, 0.0) < power_work_w(p, 0.5) < power_work_w(p, 1.0)


def test_user_overrides_are_recorded():
    p = power_profile("x", 400.0, "NPU", idle_fraction=0.2)
    assert p.idle_w == pytest.approx(80.0)
    idle = next(a for a in p.assumptions if a.name == "idle_fraction_of_tdp")
    assert idle.source == "user" and idle.value == 0.2


def test_missing_tdp_names_the_field():
    with pytest.raises(UserInputError) as exc:
        power_profile("mystery", None)
    assert exc.value.field == "power.tdp_w"


def test_bad_fractions_name_the_field():
    with pytest.raises(UserInputError) as exc:
        power_average_w(_h100(), 1.5)
    assert exc.value.field == "busy_fraction"
    with pytest.raises(UserInputError) as exc:
        power_profile("x", 700.0, idle_fraction=1.2)
    assert exc.value.field == "idle_fraction"
    with pytest.raises(UserInputError) as exc:
        power_cap_what_if(_h100(), 50.0)
    assert exc.value.field == "power_cap_w"


def test_clock_fraction_follows_the_cube_law():
    p = _h100()
    # (525 - 70) / (700 - 70) = 0.7222; cube root = 0.8972
    assert clock_fraction_at_cap(p, 700.0, 525.0) == pytest.approx(0.7222 ** (1 / 3), rel=1e-3)
    assert clock_fraction_at_cap(p, 400.0, 525.0) == 1.0
    # the clock floor holds however low the cap
    assert clock_fraction_at_cap(p, 700.0, 71.0) == p.min_clock_fraction


def test_cap_saves_energy_on_compute_bound_work_and_costs_throughput():
    res = power_cap_what_if(_h100(), 525.0, compute_bound_fraction=1.0)
    assert res.cap_met and res.capped_power_w == pytest.approx(525.0)
    assert res.throughput_ratio == pytest.approx(0.8972, rel=1e-3)
    # 525 W x 1.1146 / 700 W = 0.836 -> 16% saved: inside the guide's 15-20% claim
    assert 0.15 <= res.energy_saving_fraction <= 0.20


def test_memory_bound_work_is_less_affected_than_compute_bound():
    p = _h100()
    compute = power_cap_what_if(p, 420.0, 1.0)
    memory = power_cap_what_if(p, 420.0, 0.0)
    mixed = power_cap_what_if(p, 420.0, 0.3)
    assert memory.throughput_ratio == 1.0 and memory.energy_ratio == 1.0  # decode under the cap
    assert compute.throughput_ratio < mixed.throughput_ratio < memory.throughput_ratio
    # a cap below the memory-bound draw clips its power but not its time
    low = power_cap_what_if(p, 150.0, 0.0)
    assert low.throughput_ratio == 1.0 and low.energy_ratio == pytest.approx(150 / 217)


def test_energy_j():
    assert energy_j(700.0, 3600.0) == pytest.approx(2.52e6)
    with pytest.raises(UserInputError):
        energy_j(700.0, -1)
