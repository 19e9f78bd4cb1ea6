"""Alpha-beta collective times against hand calculations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xpuplan.perf import collectives as c

GB = 1e9
BW = 100e9  # bytes/s
ALPHA = 10e-6


def test_ring_all_reduce_matches_hand_calculation():
    # 8 ranks: bandwidth term 2·7/8·1 GB / 100 GB/s = 17.5 ms; latency min(7, 2·3) = 6 steps, x2
    t = c.time_all_reduce_s(1 * GB, 8, BW, ALPHA)
    assert t == pytest.approx(2 * 7 / 8 * GB / BW + 2 * 6 * ALPHA)


def test_all_gather_reduce_scatter_are_half_an_all_reduce():
    ag = c.time_all_gather_s(2 * GB, 4, BW, 0.0)
    rs = c.time_reduce_scatter_s(2 * GB, 4, BW, 0.0)
    ar = c.time_all_reduce_s(2 * GB, 4, BW, 0.0)
    assert ag == pytest.approx(3 / 4 * 2 * GB / BW)
    assert ag + rs == pytest.approx(ar)


def test_all_to_all_and_p2p():
    assert c.time_all_to_all_s(1 * GB, 2, BW, 0.0) == pytest.approx(0.5 * GB / BW)
    assert c.time_p2p_s(1 * GB, BW, ALPHA) == pytest.approx(ALPHA + GB / BW)


def test_single_rank_costs_nothing():
    assert c.time_all_reduce_s(1 * GB, 1, BW, ALPHA) == 0.0
    assert c.time_all_gather_s(1 * GB, 1, BW, ALPHA) == 0.0


def test_latency_steps_take_the_cheaper_of_ring_and_tree():
    assert c.latency_steps(2) == 1
    assert c.latency_steps(8) == 6  # ring 7, tree 2·3
    assert c.latency_steps(1024) == 20  # tree 2·10 beats ring 1023
    assert np.allclose(c.latency_steps(np.array([1, 2, 8])), [0, 1, 6])


def test_hierarchical_reduces_to_flat_collectives():
    # inside one domain: the flat bandwidth term, a ring's latency (NCCL rings within a node)
    flat_up = c.time_all_reduce_s(GB, 8, BW, 0.0) + 2 * 7 * ALPHA
    assert c.time_hierarchical_s("all_reduce", GB, 8, 1, BW, ALPHA, 10e9, 1e-3) == pytest.approx(flat_up)
    flat_out = c.time_all_reduce_s(GB, 16, 25e9, 20e-6)
    assert c.time_hierarchical_s("all_reduce", GB, 1, 16, BW, ALPHA, 25e9, 20e-6) == pytest.approx(flat_out)


def test_hierarchical_bandwidth_is_the_slower_phase_latencies_add():
    # 4 nodes x 8 local: intra 2·7/8·B/bw_up, inter 2·3/4·(B/8)/bw_out; pipelined -> max
    b, up, out = 8 * GB, 200e9, 20e9
    t = c.time_hierarchical_s("all_reduce", b, 8, 4, up, 0.0, out, 0.0)
    assert t == pytest.approx(max(2 * 7 / 8 * b / up, 2 * 3 / 4 * (b / 8) / out))
    lat = c.time_hierarchical_s("all_reduce", 0.0, 8, 4, up, 1e-6, out, 1e-5)
    assert lat == pytest.approx(2 * (7 * 1e-6 + 3 * 1e-5))  # ring inside (7), min(3, 4) across domains


def test_hierarchical_all_to_all_splits_traffic_by_destination():
    # 2 nodes x 4 local: 3/8 of the bytes stay in the node, 4/8 leave it
    t = c.time_hierarchical_all_to_all_s(8 * GB, 4, 2, 400e9, 0.0, 50e9, 0.0)
    assert t == pytest.approx(max(3 / 8 * 8 * GB / 400e9, 4 / 8 * 8 * GB / 50e9))


def test_group_layout_follows_rank_order():
    assert c.group_layout(8, 1, 8) == (8, 1)  # TP group inside one node
    assert c.group_layout(16, 1, 8) == (8, 2)
    assert c.group_layout(4, 8, 8) == (1, 4)  # DP group with stride tp = 8: one rank per node
    assert c.group_layout(4, 2, 8) == (4, 1)
    local, nodes = c.group_layout(np.array([2, 64]), np.array([4, 4]), 8)
    assert list(local) == [2, 2] and list(nodes) == [1, 32]


def test_functions_accept_arrays():
    n = np.array([2, 4, 8])
    t = c.time_all_reduce_s(GB, n, BW, 0.0)
    assert np.allclose(t, [2 * (k - 1) / k * GB / BW for k in (2, 4, 8)])


def test_link_types_are_documented_fractions():
    for lt in c.LINK_TYPES.values():
        assert 0 < lt.bus_bw_fraction <= 1 and lt.latency_s > 0 and lt.description
    with pytest.raises(ValueError, match="unknown link type"):
        c.link_type("carrier-pigeon")
    assert math.isclose(c.link_type("nvlink").bus_bw_fraction, 0.80)
