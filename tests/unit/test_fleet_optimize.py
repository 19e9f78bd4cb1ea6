"""optimize_mix: the MILP over real catalog devices, with capacities given (hand-checkable) or from
the inference planner; constraints, best_single, determinism and bad input."""

from __future__ import annotations

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.fleet import FleetConstraints, HardwareOption, RequestClass, optimize_mix
from xpuplan.fleet.optimize import ClassCapacity
from xpuplan.models import get_model
from xpuplan.serve import SLO

H100 = "nvidia-h100-sxm-80gb"
NPU = "huawei-ascend-910b"


def _setup(rate: float = 10.0):
    cat = load_catalog()
    model = get_model("llama3-8b")
    cls = RequestClass(name="chat", model=model, rate_per_s=rate, input_len=512, output_len=128,
                       slo=SLO(ttft_s=2.0, tpot_s=0.05))
    a = HardwareOption(device=cat.get(H100), tp=1, dtype="bf16", usd_per_device_hour=3.0, power_w_per_device=100.0)
    b = HardwareOption(device=cat.get(NPU), tp=1, dtype="bf16", usd_per_device_hour=2.0, power_w_per_device=300.0)
    # capacities injected through the cache: A serves 4 req/s per replica, B 3 req/s (test_fleet_milp's instance)
    cache = {("chat", a.key): ClassCapacity(request_class="chat", option=a.key, max_requests_per_s_per_replica=4.0),
             ("chat", b.key): ClassCapacity(request_class="chat", option=b.key, max_requests_per_s_per_replica=3.0)}
    return cls, [a, b], cache


def test_mix_cost_binding_and_best_single():
    cls, opts, cache = _setup()
    plan = optimize_mix([cls], opts, FleetConstraints(), horizon_hours=10.0, capacity_cache=dict(cache))
    got = {(r.hardware, r.replicas) for r in plan.mix}
    assert got == {(H100, 1), (NPU, 2)}
    assert plan.usd_per_hour == 7.0 and plan.total_cost == 70.0
    assert plan.best_single is not None and plan.best_single.hardware == NPU and plan.best_single.total_cost == 80.0
    assert plan.best_single.total_cost >= plan.total_cost
    assert plan.savings_vs_best_single == pytest.approx(1 - 7 / 8)
    assert plan.classes[0].capacity_per_s == 10.0 and plan.classes[0].headroom_per_s == 0.0
    d = plan.to_dict()
    assert {"hardware", "replicas", "tp", "dtype", "request_class"} <= set(d["mix"][0])

    tight = optimize_mix([cls], opts, FleetConstraints(max_power_w=500.0), horizon_hours=10.0,
                         capacity_cache=dict(cache))
    assert {(r.hardware, r.replicas) for r in tight.mix} == {(H100, 2), (NPU, 1)}
    (power,) = tight.constraints
    assert power.binding and power.slack == 0.0 and power.used == 500.0

    loose = optimize_mix([cls], opts, FleetConstraints(max_power_w=1e5, max_devices=((NPU, 100),)),
                         capacity_cache=dict(cache))
    assert not any(c.binding for c in loose.constraints)
    assert {c.name for c in loose.constraints} == {"power", f"devices:{NPU}"}


def test_device_cap_and_budget_bind():
    cls, opts, cache = _setup()
    capped = optimize_mix([cls], opts, FleetConstraints(max_devices=((NPU, 1),)), capacity_cache=dict(cache))
    # with one NPU at most: A x2 + B x1 (11 req/s, 8 USD/h) beats A x3 (9 USD/h)
    assert {(r.hardware, r.replicas) for r in capped.mix} == {(H100, 2), (NPU, 1)}
    assert capped.constraints[0].binding
    with pytest.raises(InfeasibleError) as exc:
        optimize_mix([cls], opts, FleetConstraints(max_usd_per_hour=6.5), capacity_cache=dict(cache))
    msg = str(exc.value)
    assert "'chat'" in msg and "budget" in msg and "needs at least 7 USD/hour" in msg


def test_infeasible_power_names_class_and_constraint():
    cls, opts, cache = _setup()
    with pytest.raises(InfeasibleError) as exc:
        optimize_mix([cls], opts, FleetConstraints(max_power_w=200.0), capacity_cache=dict(cache))
    assert "class 'chat'" in str(exc.value) and "total power <= 0.2 kW" in str(exc.value)
    assert "300" in str(exc.value)  # the least power that serves it (A x3)


def test_vendor_and_country_pruning():
    cls, opts, cache = _setup()
    plan = optimize_mix([cls], opts, FleetConstraints(allowed_countries=("CN",)), capacity_cache=dict(cache))
    assert {r.hardware for r in plan.mix} == {NPU}
    assert plan.pruned and "origin US" in plan.pruned[0]
    with pytest.raises(InfeasibleError, match="allowed_vendors"):
        optimize_mix([cls], opts, FleetConstraints(allowed_vendors=("AMD",)), capacity_cache=dict(cache))


def test_deterministic():
    cls, opts, cache = _setup()
    a = optimize_mix([cls], opts, FleetConstraints(max_power_w=500.0), capacity_cache=dict(cache))
    b = optimize_mix([cls], opts, FleetConstraints(max_power_w=500.0), capacity_cache=dict(cache))
    assert a.to_dict() == b.to_dict()


def test_capacity_from_the_planner_and_slo_below_unloaded_latency():
    cat = load_catalog()
    model = get_model("llama3-8b")
    opt = HardwareOption(device=cat.get(H100), tp=1, dtype="bf16", usd_per_device_hour=2.0, power_w_per_device=700.0)
    ok = RequestClass(name="ok", model=model, rate_per_s=3.0, input_len=512, output_len=128,
                      slo=SLO(ttft_s=2.0, tpot_s=0.05))
    plan = optimize_mix([ok], [opt])
    (row,) = plan.mix
    cap = row.max_requests_per_s_per_replica
    assert cap > 0 and row.replicas * cap >= 3.0 and (row.replicas - 1) * cap < 3.0
    impossible = RequestClass(name="instant", model=model, rate_per_s=1.0, input_len=512, output_len=128,
                              slo=SLO(tpot_s=1e-4))
    with pytest.raises(InfeasibleError) as exc:
        optimize_mix([impossible], [opt])
    assert "class 'instant'" in str(exc.value) and "unloaded latency" in str(exc.value)
    assert any("TPOT of a single request" in r for r in exc.value.reasons)


def test_negative_rate_refused():
    with pytest.raises(UserInputError, match="rate"):
        RequestClass(name="x", model=get_model("llama3-8b"), rate_per_s=-1.0, input_len=1, output_len=1, slo=SLO(1.0))
