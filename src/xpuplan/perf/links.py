"""The links a device's collectives use: one derivation for every planner.

From the catalog: the scale-up link (NVLink/NVSwitch, HCCS, xGMI, ICI, MLU-Link ...), its bandwidth
per direction, domain size and wiring; the scale-out NIC; PCIe for cards without a peer link. The
achievable bus-bandwidth fraction and latency of each link come from its link type (the
``Assumptions``' link types, ``catalog/data/link_types.yaml``, each named and explained there)
unless a calibration profile measured this device's own links (``Efficiency.scale_up_bw_fraction``
etc. set), which wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from xpuplan import units
from xpuplan.catalog.assumptions import Assumptions, default_assumptions
from xpuplan.catalog.device import Device
from xpuplan.catalog.efficiency import Efficiency
from xpuplan.perf.collectives import torus_group_share

Topology = Literal["switch", "mesh", "torus", "pcie"]

#: Accelerators of one server: the 8-GPU baseboard (HGX/DGX, OAM) and the common 8-card PCIe server. A
#: scale-up domain larger than this spans servers (multi-node NVLink: GB200/GB300 NVL72).
SERVER_DEVICES: Final = 8

#: Cards per server when a device has no scale-up link (PCIe-only cards): the common 8-GPU
#: PCIe server (e.g. 8x L40S or 8x A100 PCIe). Their peer traffic goes through PCIe switches.
PCIE_SERVER_DEVICES: Final = SERVER_DEVICES

#: PCIe bandwidth per direction assumed when the catalog has no PCIe figure: Gen4 x16.
DEFAULT_PCIE_BYTES_PER_S: Final = 32.0 * units.GB_PER_S


def host_link_bytes_per_s(dev: Device) -> tuple[float, bool]:
    """(bandwidth per direction of the device's host link in bytes/s, whether it is the catalog's figure): the
    catalog's host link (NVLink-C2C on Grace superchips, else PCIe), else :data:`DEFAULT_PCIE_BYTES_PER_S`
    (activation offload copies; PCIe-only peers)."""
    bw = dev.host_link_bandwidth
    return (bw, True) if bw else (DEFAULT_PCIE_BYTES_PER_S, False)


#: Share of a PCIe link an accelerator's host copies get when every accelerator of the server copies at once
#: (activation offload): 8-GPU HGX/DGX boards hang two GPUs (and their NICs) off each PCIe switch, whose one
#: x16 uplink reaches the CPU (DGX A100/H100 system topology: four PCIe switches for eight GPUs), and a 2-GPU
#: workstation splits the CPU's lanes x8/x8. A catalog ``host_link`` (NVLink-C2C) is already the per-GPU figure.
PCIE_HOST_COPY_SHARE: Final = 0.5


def host_copy_bytes_per_s(dev: Device) -> float:
    """Bytes/s per direction one accelerator's activation-offload copies get while all of a server's copy at once:
    its catalog ``host_link`` figure (a per-GPU NVLink-C2C share), else its PCIe link (catalog figure or the Gen4
    x16 assumption) times :data:`PCIE_HOST_COPY_SHARE`."""
    if dev.figures.get("host_link.bandwidth_gb_per_s_per_direction") is not None:
        return host_link_bytes_per_s(dev)[0]
    return host_link_bytes_per_s(dev)[0] * PCIE_HOST_COPY_SHARE


#: Scale-out bandwidth per device assumed when the catalog lists no NIC: one 100 Gb/s RDMA port
#: per device. Many PCIe servers have less (1-2 NICs per 8 cards); override where you know better.
DEFAULT_SCALE_OUT_BYTES_PER_S: Final = 100.0 * units.GBIT

#: Link type assumed for the scale-out network when the catalog does not name it.
DEFAULT_SCALE_OUT_KIND: Final = "roce"


@dataclass(frozen=True)
class Link:
    """One level of the network as one device sees it.

    ``bandwidth``: peak bytes/s per direction per device; ``bus_bw_fraction``: achievable
    collective bus bandwidth over that peak; ``latency_s``: per-step latency (alpha).
    """

    kind: str
    bandwidth: float
    bus_bw_fraction: float
    latency_s: float

    @property
    def bus_bw(self) -> float:
        """Achievable collective bus bandwidth, bytes/s."""
        return self.bandwidth * self.bus_bw_fraction

    def to_dict(self) -> dict[str, float | str]:
        return {
            "kind": self.kind,
            "bandwidth_bytes_per_s": self.bandwidth,
            "bus_bw_fraction": self.bus_bw_fraction,
            "bus_bw_bytes_per_s": self.bus_bw,
            "latency_s": self.latency_s,
        }


@dataclass(frozen=True)
class DeviceLinks:
    """Scale-up and scale-out links of a device, its scale-up domain and how the domain is wired.

    ``topology``: ``switch`` (NVSwitch, UB Clos: any subgroup gets the full per-device bandwidth),
    ``mesh`` (HCCS, xGMI, Gaudi: point-to-point links, a subgroup of g devices gets (g-1)/(domain-1)
    of it), ``torus`` (TPU ICI: a group gets the links of the torus axes it spans, ``torus_dims``),
    ``pcie`` (no peer link).
    """

    scale_up: Link
    scale_out: Link
    domain_size: int
    topology: Topology
    full_mesh: bool = False
    """a ``mesh`` in which every device has a direct link to every other of its domain (910B HCCS,
    MI300X xGMI, Gaudi RoCE): one hop between any two, so single-hop collective algorithms apply"""
    torus_dims: int = 0
    """a ``torus`` domain's dimensions (TPU ICI: 2 on v5e/v6e, 3 on v4/v5p); 0 = not described, the
    whole per-chip figure for every group"""
    torus_wrap_axis: int = 0
    """the shortest slice axis of the torus with wraparound links (shorter axes are open lines)"""

    def scale_up_bus_bw(self, group_local: int) -> float:
        """Bus bandwidth (bytes/s) one device gets for a group with ``group_local`` members in its
        domain: full on a switch/PCIe, (g-1)/(domain-1) of it on a point-to-point mesh, and on a
        torus the links of the axes a slice of ``group_local`` chips spans
        (:func:`~xpuplan.perf.collectives.torus_group_share`)."""
        if self.topology == "mesh" and self.domain_size > 1:
            share = max(group_local - 1, 1) / (self.domain_size - 1)
            return self.scale_up.bus_bw * min(share, 1.0)
        if self.topology == "torus" and self.torus_dims > 0:
            return self.scale_up.bus_bw * torus_group_share(int(group_local), 1, int(group_local), self.torus_dims,
                                                            self.torus_wrap_axis)
        return self.scale_up.bus_bw

    @property
    def single_hop(self) -> bool:
        """Every device reaches every other in one hop inside the domain (switch, torus slice or
        full mesh)."""
        return self.topology in ("switch", "torus") or (self.topology == "mesh" and self.full_mesh)


def scale_up_kind(dev: Device) -> str:
    """Link type of the device's scale-up link, from its catalog name ("pcie" when it has none, or
    when its link is an optional add-on such as an NVLink bridge)."""
    if not dev.scale_up_bandwidth or not dev.scale_up_name:
        return "pcie"
    return scale_up_kind_of_name(dev.scale_up_name)


def scale_up_kind_of_name(scale_up_name: str | None) -> str:
    """Link type named by a catalog scale-up name ("pcie" when None)."""
    name = (scale_up_name or "").casefold()
    if not name:
        return "pcie"
    if "nvlink" in name:
        return "nvlink-bridge" if "bridge" in name else "nvlink"
    if "hccs" in name or "unified bus" in name or name.startswith("ub"):
        return "hccs"
    if "infinity fabric" in name or "xgmi" in name:
        return "xgmi"
    if "ici" in name:
        return "ici"
    if "ethernet" in name or "roce" in name:
        return "ethernet-scaleup"
    return "mlu-link"


def scale_out_kind(dev: Device) -> str:
    """Link type of the device's scale-out network, from its catalog name."""
    name = (dev.scale_out_name or "").casefold()
    if "infiniband" in name:
        return "infiniband"
    if "roce" in name or "spectrum" in name:
        return "roce"
    if "ethernet" in name or "dcn" in name or "data-center network" in name:
        return "ethernet"
    return DEFAULT_SCALE_OUT_KIND


def topology_of(dev: Device, kind: str) -> Topology:
    """How the scale-up domain is wired, from the catalog's topology text and the link type."""
    topo = (dev.scale_up_topology or "").casefold()
    if any(w in topo for w in ("no switch", "point-to-point", "full mesh", "fully connected", "cube-mesh")):
        return "mesh"
    if "torus" in topo or kind == "ici":
        return "torus"
    if any(w in topo for w in ("switch", "all-to-all", "clos")):
        return "switch"
    return "mesh" if kind in ("hccs", "xgmi", "ethernet-scaleup", "mlu-link") else "switch"


#: Catalog topology words that say every device of the domain links directly to every other, and
#: words that deny it (DGX-1's hybrid cube-mesh, MI250X's GCD mesh).
_FULL_MESH_WORDS = ("full mesh", "fully connected", "all-to-all")
_PARTIAL_MESH_WORDS = ("not all-to-all", "cube-mesh", "not fully", "partial")


def is_full_mesh(dev: Device, topology: str) -> bool:
    """A point-to-point ``mesh`` domain whose devices are all directly connected (from the catalog's
    topology text: "8-NPU full mesh", "8 OAMs fully connected", "all-to-all ... no switch")."""
    if topology != "mesh":
        return False
    topo = (dev.scale_up_topology or "").casefold()
    return any(w in topo for w in _FULL_MESH_WORDS) and not any(w in topo for w in _PARTIAL_MESH_WORDS)


def device_links(dev: Device, eff: Efficiency, *, up_kind: str | None = None, out_kind: str | None = None,
                 assumptions: Assumptions | None = None) -> DeviceLinks:
    """The device's links with achievable fractions and latencies (the link types of
    ``assumptions``, built-in when None, or the calibrated values when ``eff`` carries them)."""
    a = assumptions or default_assumptions()
    up_kind = up_kind or scale_up_kind(dev)
    out_kind = out_kind or scale_out_kind(dev)
    if dev.scale_up_bandwidth and up_kind != "pcie":
        up_bw, domain, topo = dev.scale_up_bandwidth, dev.scale_up_domain, topology_of(dev, up_kind)
    elif dev.optional_scale_up_bandwidth and up_kind == scale_up_kind_of_name(dev.scale_up_name):
        # an optional add-on link (NVLink bridge pairs) the run asked for by its kind
        up_bw, domain, topo = dev.optional_scale_up_bandwidth, dev.scale_up_optional_domain or 1, topology_of(dev, up_kind)
    else:
        up_bw = host_link_bytes_per_s(dev)[0]
        domain, topo = max(dev.scale_up_domain, PCIE_SERVER_DEVICES), "pcie"
    up_t, out_t = a.link_type(up_kind, field="scale_up_kind"), a.link_type(out_kind, field="scale_out_kind")
    up_frac, up_lat = up_t.bus_bw_fraction, up_t.latency_s
    if topo != "pcie":  # a calibration of the scale-up link says nothing about PCIe
        up_frac = eff.scale_up_bw_fraction if eff.scale_up_bw_fraction is not None else up_frac
        up_lat = eff.scale_up_latency_s if eff.scale_up_latency_s is not None else up_lat
    out_frac = eff.scale_out_bw_fraction if eff.scale_out_bw_fraction is not None else out_t.bus_bw_fraction
    out_lat = eff.scale_out_latency_s if eff.scale_out_latency_s is not None else out_t.latency_s
    return DeviceLinks(
        scale_up=Link(up_kind, up_bw, up_frac, up_lat),
        scale_out=Link(out_kind, dev.scale_out_bandwidth or DEFAULT_SCALE_OUT_BYTES_PER_S, out_frac, out_lat),
        domain_size=domain,
        topology=topo,
        full_mesh=is_full_mesh(dev, topo),
        torus_dims=(dev.scale_up_torus_dims or 0) if topo == "torus" else 0,
        torus_wrap_axis=(dev.scale_up_torus_wrap_axis or 0) if topo == "torus" else 0,
    )
