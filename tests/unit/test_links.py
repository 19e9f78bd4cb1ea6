"""One link derivation for both planners (perf.links)."""

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.perf.collectives import LINK_TYPES
from xpuplan.perf.efficiency import efficiency_for
from xpuplan.perf.links import PCIE_SERVER_DEVICES, device_links
from xpuplan.serve.comm import link_for
from xpuplan.train import Cluster


def test_h100_nvlink_switch_defaults():
    d = load_catalog().get("H100")
    links = device_links(d, efficiency_for(d))
    assert (links.scale_up.kind, links.topology, links.domain_size) == ("nvlink", "switch", 8)
    assert links.scale_up.bus_bw_fraction == LINK_TYPES["nvlink"].bus_bw_fraction
    assert links.scale_up.bandwidth == pytest.approx(450e9)


def test_hccs_mesh_subgroups_get_a_share():
    d = load_catalog().get("910B")
    links = device_links(d, efficiency_for(d))
    assert links.topology == "mesh"
    assert links.scale_up_bus_bw(2) == pytest.approx(links.scale_up.bus_bw / (links.domain_size - 1))
    assert links.scale_up_bus_bw(links.domain_size) == pytest.approx(links.scale_up.bus_bw)


def test_pcie_only_cards():
    d = load_catalog().get("L40S")
    links = device_links(d, efficiency_for(d))
    assert links.topology == "pcie" and links.domain_size == PCIE_SERVER_DEVICES
    assert links.scale_up.bus_bw_fraction == LINK_TYPES["pcie"].bus_bw_fraction


def test_calibration_overrides_link_type_defaults():
    d = load_catalog().get("H100")
    cal = efficiency_for(d).merged({"scale_up_bw_fraction": 0.9, "scale_up_latency_s": 3e-6}, "calibration #1")
    links = device_links(d, cal)
    assert links.scale_up.bus_bw_fraction == 0.9 and links.scale_up.latency_s == 3e-6
    assert links.scale_out.bus_bw_fraction == LINK_TYPES[links.scale_out.kind].bus_bw_fraction


@pytest.mark.parametrize("hw", ["H100", "910B", "MI300X", "L40S"])
def test_training_and_serving_see_the_same_links(hw):
    d = load_catalog().get(hw)
    eff = efficiency_for(d)
    cl = Cluster.from_catalog(d, 64, efficiency=eff)
    n = min(8, cl.domain_size)
    serve_link = link_for(d, eff, n)
    assert serve_link.bandwidth_bytes_per_s == pytest.approx(cl.scale_up_bus_bw(n))
    assert serve_link.latency_s == pytest.approx(cl.scale_up.latency_s)
    far = link_for(d, eff, cl.domain_size + 1)
    assert far.bandwidth_bytes_per_s == pytest.approx(cl.scale_out.bus_bw)
