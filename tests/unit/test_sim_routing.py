"""Routing policies: one registry; each policy sends requests where it says."""

from __future__ import annotations

import pytest

from xpuplan.errors import UserInputError
from xpuplan.serve.sim import ROUTERS, SimConfig, simulate
from xpuplan.serve.sim.engine import Simulation
from xpuplan.serve.sim.routing import Router, register_router

H100 = {"hardware": "nvidia-h100-sxm-80gb", "engine": "vllm"}
CLS = {"input_len": 256, "output_len": 32}


def _cfg(pools: list[dict], classes: list[dict], routing: dict, duration: float = 10) -> dict:
    return {"model": "llama3-8b", "pools": pools, "classes": classes, "routing": routing, "duration_s": duration}


def _pool_counts(raw: dict, seed: int = 0) -> dict[str, int]:
    sim = Simulation(SimConfig.model_validate(raw), seed=seed)
    sim.run()
    return {p.name: sim.arrived_pool[i] for i, p in enumerate(sim.pools)}


def test_registry_has_the_four_policies_and_refuses_duplicates():
    assert {"round_robin", "least_outstanding", "class_based", "spill_over"} <= set(ROUTERS)

    class Dup(Router):
        name = "round_robin"

    with pytest.raises(ValueError, match="twice"):
        register_router(Dup)


def test_round_robin_cycles_over_replicas():
    raw = _cfg([{"name": "a", **H100, "replicas": 2}, {"name": "b", **H100, "replicas": 1}],
               [{"name": "c", "rate_rps": 30, **CLS}], {"policy": "round_robin"})
    sim = Simulation(SimConfig.model_validate(raw), seed=0)
    sim.run()
    n = sim.n_arrivals
    per_replica = [r.scheduler.steps > 0 for p in sim.pools for r in p.replicas]
    assert all(per_replica)
    assert sim.arrived_pool[0] in (2 * (n // 3), 2 * (n // 3) + 1, 2 * (n // 3) + 2)


def test_class_based_routes_each_class_to_its_pool():
    raw = _cfg([{"name": "gpu", **H100}, {"name": "npu", "hardware": "huawei-ascend-910b", "tp": 2}],
               [{"name": "complex", "rate_rps": 3, **CLS}, {"name": "standard", "rate_rps": 5, **CLS}],
               {"policy": "class_based", "rules": {"complex": "gpu", "standard": "npu"}})
    sim = Simulation(SimConfig.model_validate(raw), seed=0)
    sim.run()
    for cls, pool in zip(sim.rec_cls, sim.rec_pool, strict=True):
        assert pool == cls  # class 0 -> pool 0 (gpu), class 1 -> pool 1 (npu)


def test_spill_over_only_past_the_queue_bound():
    pools = [{"name": "small", **H100, "max_num_seqs": 2}, {"name": "big", **H100}]
    heavy = [{"name": "c", "rate_rps": 40, **CLS}]
    spill = _pool_counts(_cfg(pools, heavy, {"policy": "spill_over", "primary": "small", "secondary": "big",
                                             "max_queue": 4}))
    assert spill["big"] > 0 and spill["small"] > 0
    never = _pool_counts(_cfg(pools, heavy, {"policy": "spill_over", "primary": "small", "secondary": "big",
                                             "max_queue": 10**9}))
    assert never["big"] == 0


def test_least_outstanding_prefers_the_faster_pool():
    pools = [{"name": "fast", **H100, "tp": 2}, {"name": "slow", "hardware": "nvidia-a100-sxm-80gb",
                                                 "engine": "vllm"}]
    counts = _pool_counts(_cfg(pools, [{"name": "c", "rate_rps": 40, "input_len": 512, "output_len": 256}],
                               {"policy": "least_outstanding"}, duration=20))
    assert counts["fast"] > counts["slow"] > 0


@pytest.mark.parametrize(("routing", "field"), [
    ({"policy": "class_based", "rules": {"c": "nowhere"}}, "routing.rules.c"),
    ({"policy": "class_based", "rules": {"zzz": "a"}}, "routing.rules.zzz"),
    ({"policy": "spill_over", "primary": "a", "secondary": "ghost"}, "routing.secondary"),
    ({"policy": "spill_over", "primary": "a"}, "routing.secondary"),
    ({"policy": "teleport"}, "routing.policy"),
])
def test_unknown_pools_and_policies_name_the_field(routing, field):
    from xpuplan.jobs.simulate import validate_config

    raw = _cfg([{"name": "a", **H100}, {"name": "b", **H100}], [{"name": "c", "rate_rps": 1, **CLS}], routing)
    with pytest.raises(UserInputError) as e:
        simulate(validate_config(raw), seed=0)
    assert e.value.field == field
