"""One collective model for every planner: training, serving and disaggregation price the same
collective on the same links identically; only the library's algorithm (an argument) differs."""

from __future__ import annotations

import numpy as np
import pytest

from xpuplan.catalog import load_catalog
from xpuplan.perf import collectives as c
from xpuplan.perf.efficiency import efficiency_for
from xpuplan.perf.links import device_links
from xpuplan.serve.comm import time_allreduce_s, time_alltoall_s, time_p2p_s
from xpuplan.train.cluster import Cluster
from xpuplan.train.step import StepModel


@pytest.mark.parametrize("hw", ["H100", "910B", "MI300X", "L40S"])
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_serving_nccl_all_reduce_equals_training(hw, n):
    d = load_catalog().get(hw)
    eff = efficiency_for(d)
    cl = Cluster.from_catalog(d, 64, efficiency=eff)
    msg = 3.0e6
    train = float(StepModel._hier("all_reduce", np.asarray([msg]), cl, np.asarray([n]), np.asarray([1]))[0])
    serve = time_allreduce_s(msg, n, d, eff, two_shot=False)
    assert serve == pytest.approx(train, rel=1e-12)


def test_two_shot_only_inside_a_switched_domain():
    d = load_catalog().get("H100")
    links = device_links(d, efficiency_for(d))
    assert links.topology == "switch"
    msg = 64e3
    two = c.time_group_s("all_reduce", msg, 8, 1, links, all_reduce="two_shot")
    nccl = c.time_group_s("all_reduce", msg, 8, 1, links)
    bw = 2 * 7 / 8 * msg / links.scale_up.bus_bw
    assert two == pytest.approx(bw + 2 * links.scale_up.latency_s)
    assert nccl == pytest.approx(bw + 2 * 7 * links.scale_up.latency_s)  # NCCL rings inside a node
    # beyond the domain the engine falls back to the library's hierarchical algorithm
    assert c.time_group_s("all_reduce", msg, 16, 1, links, all_reduce="two_shot") == pytest.approx(
        c.time_group_s("all_reduce", msg, 16, 1, links))
    # a partial mesh (V100 hybrid cube-mesh) is not single-hop: two-shot does not apply
    v = load_catalog().get("nvidia-v100-sxm-32gb")
    vl = device_links(v, efficiency_for(v))
    assert vl.topology == "mesh" and not vl.full_mesh and not vl.single_hop
    assert c.time_group_s("all_reduce", msg, 8, 1, vl, all_reduce="two_shot") == pytest.approx(
        c.time_group_s("all_reduce", msg, 8, 1, vl))


@pytest.mark.parametrize("hw", ["MI300X", "910B", "intel-gaudi3"])
def test_full_mesh_is_single_hop(hw):
    """Every device of a full mesh (xGMI, HCCS, Gaudi RoCE) has a direct link to every other: the
    engines' two-shot all-reduce and HCCL's intra-server Mesh algorithm take two latency steps, not
    a ring's 2(n-1); the bandwidth term is the same."""
    d = load_catalog().get(hw)
    links = device_links(d, efficiency_for(d))
    assert links.topology == "mesh" and links.full_mesh and links.single_hop
    msg = 64e3
    two = c.time_group_s("all_reduce", msg, 8, 1, links, all_reduce="two_shot")
    bw = 2 * 7 / 8 * msg / links.scale_up_bus_bw(8)
    assert two == pytest.approx(bw + 2 * links.scale_up.latency_s)
    assert c.time_group_s("all_reduce", msg, 8, 1, links) > two  # the library's ring pays 2(n-1) steps


def test_group_time_is_vectorised_and_matches_scalars():
    d = load_catalog().get("H100")
    links = device_links(d, efficiency_for(d))
    sizes = np.asarray([1, 2, 8, 16, 64])
    strides = np.asarray([1, 1, 1, 4, 8])
    for kind in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"):
        vec = c.time_group_s(kind, 1e7, sizes, strides, links)
        for i in range(len(sizes)):
            assert vec[i] == c.time_group_s(kind, 1e7, int(sizes[i]), int(strides[i]), links)
    assert c.time_group_s("all_reduce", 1e7, 1, 1, links) == 0.0


def test_serving_all_to_all_and_p2p_use_the_group_model():
    d = load_catalog().get("H100")
    eff = efficiency_for(d)
    links = device_links(d, eff)
    # inside the switched domain: direct all-to-all, one latency step
    assert time_alltoall_s(1e6, 8, d, eff) == pytest.approx(7 / 8 * 1e6 / links.scale_up.bus_bw + links.scale_up.latency_s)
    # EP groups of tp=8 ranks apart cross the network: hierarchical (equals training's)
    cl = Cluster.from_catalog(d, 64, efficiency=eff)
    train = float(StepModel._a2a(np.asarray([1e6]), cl, np.asarray([4]), np.asarray([8]))[0])
    assert time_alltoall_s(1e6, 4, d, eff, stride=8) == pytest.approx(train)
    # pipeline hand-off between stages in different domains goes over the scale-out link
    assert time_p2p_s(1e6, d, eff, 2, stride=8) == pytest.approx(links.scale_out.latency_s + 1e6 / links.scale_out.bus_bw)
    assert time_p2p_s(1e6, d, eff, 2, stride=1) == pytest.approx(links.scale_up.latency_s + 1e6 / links.scale_up.bus_bw)


def test_all_reduce_latency_steps_by_algorithm():
    assert c.all_reduce_latency_steps(8, "ring") == 14
    assert c.all_reduce_latency_steps(8, "nccl") == 12  # tree: 2·2·ceil(log2 8)
    assert c.all_reduce_latency_steps(8, "two_shot") == 2
    assert c.all_reduce_latency_steps(1, "two_shot") == 0
    with pytest.raises(ValueError):
        c.all_reduce_latency_steps(8, "bogus")  # type: ignore[arg-type]


def test_serving_collectives_use_the_replicas_assumptions():
    """Link types overridden in the Assumptions reach the serving step (through ``Replica.links``)."""
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.models import get_model
    from xpuplan.serve.replica import make_replica, step_time

    a = default_assumptions()
    slow = a.with_overrides({"link_types": {"nvlink": {"bus_bw_fraction": 0.1, "latency_us": 50.0,
                                                        "description": "test: a slow NVLink"}}})
    m, d = get_model("llama3-70b"), load_catalog().get("H100")
    fast_rep = make_replica(m, d, tp=8, dtype="fp8", engine="vllm", assumptions=a)
    slow_rep = make_replica(m, d, tp=8, dtype="fp8", engine="vllm", assumptions=slow)
    assert slow_rep.device_links.scale_up.latency_s == pytest.approx(50e-6)
    fast = step_time(fast_rep, decode_seqs=8, decode_context=1024)
    slow_st = step_time(slow_rep, decode_seqs=8, decode_context=1024)
    assert slow_st.comm_s > 5 * fast.comm_s
    assert slow_st.ops_s == pytest.approx(fast.ops_s)
