"""Collectives on a torus (TPU ICI): a group gets the links of the torus axes it spans, not the whole
chip's figure (``perf.collectives.torus_group_share``)."""

from __future__ import annotations

import numpy as np
import pytest

from xpuplan.catalog import load_catalog
from xpuplan.perf import collectives as c
from xpuplan.perf.efficiency import efficiency_for
from xpuplan.perf.links import device_links
from xpuplan.train.cluster import Cluster


@pytest.mark.parametrize(("chips", "dims", "shape"), [
    (64, 3, (4, 4, 4)), (128, 3, (4, 4, 8)), (256, 3, (4, 8, 8)), (512, 3, (8, 8, 8)), (1024, 3, (8, 8, 16)),
    (2048, 3, (8, 16, 16)), (8, 2, (2, 4)), (16, 2, (4, 4)), (128, 2, (8, 16)), (256, 2, (16, 16)),
    (100, 2, (8, 16)),  # rounded up to a power of two
])
def test_slice_shapes_are_googles(chips, dims, shape):
    assert c.torus_slice_shape(chips, dims) == shape


def test_a_ring_along_one_wrapped_axis_uses_two_of_the_chips_links():
    # v5p (3D torus, 6 links): TP8 on a 4x8x8 slice lies on one 8-chip ring: 2 of 6 links
    assert c.torus_group_share(8, 1, 256, 3, 4) == pytest.approx(1 / 3)
    # v5e (2D torus, 4 links): TP16 on the 16x16 pod: one wrapped axis, 2 of 4 links
    assert c.torus_group_share(16, 1, 256, 2, 16) == pytest.approx(1 / 2)


def test_a_group_over_several_axes_adds_their_links():
    # FSDP over the remaining 8x8 plane of a 4x8x8 slice, TP4 on the 4-axis: two wrapped axes
    assert c.torus_group_share(64, 4, 256, 3, 4) == pytest.approx(2 / 3)
    # every chip of the slice: all three axes, the whole chip figure
    assert c.torus_group_share(512, 1, 512, 3, 4) == pytest.approx(1.0)
    assert c.torus_group_share(256, 1, 256, 2, 16) == pytest.approx(1.0)


def test_an_axis_without_wraparound_is_an_open_line_at_half_the_links():
    # v6e-8 is a 2x4 slice, shorter than the 16-chip axes that wrap: both axes open
    assert c.torus_group_share(8, 1, 8, 2, 16) == pytest.approx(0.5)
    # TP16 on an 8x8x8 v5p slice: one whole 8-ring plus a 2-chip segment of another axis
    assert c.torus_group_share(16, 1, 512, 3, 4) == pytest.approx((1 + 0.5) / 3)
    # TP8 on a segment of the v5e pod's 16-chip axis
    assert c.torus_group_share(8, 1, 256, 2, 16) == pytest.approx(0.5 / 2)


def test_share_is_vectorised():
    out = c.torus_share(np.array([1, 8, 64]), np.array([1, 1, 4]), 256, 3, 4)
    assert out.tolist() == pytest.approx([1.0, 1 / 3, 2 / 3])
    assert c.torus_share(8, 1, 256, 3, 4) == pytest.approx(1 / 3)


def test_tp_all_gather_on_a_v5p_axis_is_the_ring_over_two_links():
    cl = Cluster.from_catalog("google-tpu-v5p", 256)
    assert cl.topology == "torus" and cl.torus_dims == 3
    n_bytes = 1.0e9
    t = c.time_group_s("all_gather", n_bytes, 8, 1, cl)
    axis_bw = cl.scale_up.bus_bw / 3  # 2 of the chip's 6 ICI links
    assert t == pytest.approx(7 / 8 * n_bytes / axis_bw + 7 * cl.scale_up.latency_s)
    # the same group without the torus description would get the whole chip figure: 3x faster bandwidth term
    flat = c.time_group_s("all_gather", n_bytes, 8, 1, Cluster.from_catalog("google-tpu-v5p", 256, topology="switch"))
    assert flat == pytest.approx(7 / 8 * n_bytes / cl.scale_up.bus_bw + 7 * cl.scale_up.latency_s)


def test_fsdp_over_two_axes_is_twice_as_fast_as_over_one():
    cl = Cluster.from_catalog("google-tpu-v5p", 256)
    n_bytes = 4.0e9
    one_axis = c.time_group_s("reduce_scatter", n_bytes, 8, 1, cl)  # an 8-ring
    two_axes = c.time_group_s("reduce_scatter", n_bytes, 64, 4, cl)  # the 8x8 plane beside TP4
    lat = cl.scale_up.latency_s
    assert (one_axis - 7 * lat) / (two_axes - 63 * lat) == pytest.approx(2 * (7 / 8) / (63 / 64))


def test_a_send_to_a_torus_neighbour_uses_one_link():
    cl = Cluster.from_catalog("google-tpu-v5e", 256)
    t = c.time_group_s("p2p", 1.0e8, 2, 16, cl)
    assert t == pytest.approx(1.0e8 / (cl.scale_up.bus_bw / 4) + cl.scale_up.latency_s)


def test_switched_domains_are_unchanged():
    cl = Cluster.from_catalog("H100", 64)
    assert cl.torus_dims == 0
    t = c.time_group_s("all_reduce", 1.0e9, 8, 1, cl)
    assert t == pytest.approx(2 * 7 / 8 * 1.0e9 / cl.scale_up.bus_bw + 2 * 7 * cl.scale_up.latency_s)


def test_serving_links_on_a_small_tpu_slice():
    d = load_catalog().get("google-tpu-v6e")
    links = device_links(d, efficiency_for(d))
    assert links.torus_dims == 2 and links.torus_wrap_axis == 16
    assert links.scale_up_bus_bw(8) == pytest.approx(links.scale_up.bus_bw * 0.5)  # 2x4, open
    assert links.scale_up_bus_bw(1) == pytest.approx(links.scale_up.bus_bw)


def test_every_torus_device_describes_its_torus():
    for d in load_catalog():
        if d.scale_up_bandwidth and "torus" in (d.scale_up_topology or "").casefold():
            assert d.scale_up_torus_dims in (2, 3), d.id
            assert d.scale_up_torus_wrap_axis, d.id
