"""Hostile inputs to the cost jobs: a result with finite numbers, or one of xpuplan's errors."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

pytest.importorskip("hypothesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from xpuplan.errors import XpuplanError  # noqa: E402
from xpuplan.jobs.context import offline_context  # noqa: E402
from xpuplan.jobs.cost import PowerCapRequest, TcoRequest, run_power_cap, run_tco  # noqa: E402
from xpuplan.jobs.requests import parse_request  # noqa: E402

CTX = offline_context()
SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
hostile_float = st.one_of(st.just(float("nan")), st.just(float("inf")), st.just(-1.0), st.just(0.0), st.just(1e300),
                          st.floats(min_value=1e-6, max_value=1e6), st.text(max_size=4), st.none())


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(*([good] * 6), bad)


def _walk(obj: Any) -> None:
    if isinstance(obj, float):
        assert math.isfinite(obj)
    elif isinstance(obj, dict):
        for v in obj.values():
            _walk(v)
    elif isinstance(obj, list):
        for v in obj:
            _walk(v)


def _run(cls: type, job: Any, values: dict[str, Any]) -> None:
    values = {k: v for k, v in values.items() if v is not None}
    try:
        res = job(parse_request(cls, values), CTX)
    except XpuplanError:
        return
    data = res.to_dict()
    json.dumps(data, allow_nan=False)
    _walk(data)


@SETTINGS
@given(hw=mostly(st.sampled_from(["H100", "910B", "MI300X", "TPU v5p", "MLU590"]), st.sampled_from(["nope", "x" * 300])),
       devices=mostly(st.sampled_from([1, 8, 9, 1024]), st.sampled_from([0, -1, 1 << 40, "many"])),
       years=mostly(st.sampled_from([0.5, 3.0]), hostile_float),
       busy=mostly(st.sampled_from([0.0, 0.3, 1.0]), hostile_float),
       mode=st.sampled_from([None, "owned", "cloud", "leased"]),
       region=mostly(st.sampled_from(["us", "cn", "eu", "us-tx"]), st.sampled_from(["mars", ""])),
       cooling=mostly(st.sampled_from(["air", "liquid", "immersion"]), st.just("boiling")),
       price=st.one_of(st.none(), hostile_float), elec=st.one_of(st.none(), hostile_float),
       team=st.one_of(st.none(), st.just(("CUDA",)), st.just(("",))))
def test_tco_hostile(hw, devices, years, busy, mode, region, cooling, price, elec, team):
    _run(TcoRequest, run_tco, dict(hw=hw, devices=devices, years=years, busy_fraction=busy, mode=mode, region=region,
                                   cooling=cooling, device_price_usd=price, electricity_usd_per_kwh=elec,
                                   team_stacks=team))


@SETTINGS
@given(hw=st.sampled_from(["H100", "910B", "TPU v5p", "nope"]), cap=hostile_float, share=hostile_float,
       k=st.one_of(st.none(), hostile_float))
def test_powercap_hostile(hw, cap, share, k):
    _run(PowerCapRequest, run_power_cap, dict(hw=hw, power_cap_w=cap, compute_bound_fraction=share, dvfs_exponent=k))
