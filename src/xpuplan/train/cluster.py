"""``Cluster``: the hardware a training job runs on (device, count, scale-up and scale-out links).

Defaults come from the catalog: the device's scale-up domain (NVLink/NVSwitch island, HCCS board,
xGMI mesh, NVL72 rack, TPU ICI slice), its scale-up bandwidth per direction, its scale-out NIC per
device, and the link types' achievable bus-bandwidth fractions and latencies
(:data:`xpuplan.perf.collectives.LINK_TYPES`). Every field can be overridden. PCIe-only cards get
a PCIe "scale-up" link inside a server of :data:`PCIE_SERVER_DEVICES` cards.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, Literal

from xpuplan import units
from xpuplan.calibration import resolve_efficiency
from xpuplan.catalog import Device, load_catalog
from xpuplan.errors import UserInputError
from xpuplan.perf.collectives import LINK_TYPES, link_type
from xpuplan.perf.efficiency import Efficiency

Topology = Literal["switch", "mesh", "torus", "pcie"]

#: Cards per server when a device has no scale-up link (PCIe-only cards): the common 8-GPU
#: PCIe server (e.g. 8x L40S or 8x A100 PCIe). Their peer traffic goes through PCIe switches.
PCIE_SERVER_DEVICES: Final = 8

#: PCIe bandwidth per direction assumed when the catalog has no PCIe figure: Gen4 x16.
DEFAULT_PCIE_BYTES_PER_S: Final = 32.0 * units.GB_PER_S

#: Scale-out bandwidth per device assumed when the catalog lists no NIC: one 100 Gb/s RDMA port
#: per device. Many PCIe servers have less (1-2 NICs per 8 cards); override with
#: ``scale_out_gbit_per_s``.
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
            "bandwidth_gb_per_s": self.bandwidth / units.GB_PER_S,
            "bus_bw_fraction": self.bus_bw_fraction,
            "bus_bw_gb_per_s": self.bus_bw / units.GB_PER_S,
            "latency_us": self.latency_s / units.US,
        }


@dataclass(frozen=True)
class Cluster:
    """``n_devices`` of one accelerator in scale-up domains of ``domain_size`` devices.

    ``topology`` says how a domain is wired: ``switch`` (NVSwitch, UB Clos: any subgroup gets the
    full per-device bandwidth), ``mesh`` (HCCS, xGMI, Gaudi: point-to-point links, a subgroup of g
    devices gets (g-1)/(domain-1) of it), ``torus`` (TPU ICI, treated like a switch at the
    per-chip figure), ``pcie`` (no peer link).
    """

    device: Device
    n_devices: int
    domain_size: int
    topology: Topology
    scale_up: Link
    scale_out: Link
    efficiency: Efficiency
    hint: str = ""

    def __post_init__(self) -> None:
        if self.n_devices < 1:
            raise UserInputError(f"devices must be a positive integer (got {self.n_devices})", field="devices")
        if self.domain_size < 1:
            raise UserInputError(f"devices per scale-up domain must be >= 1 (got {self.domain_size})", field="domain_size")
        for name, link in (("scale_up", self.scale_up), ("scale_out", self.scale_out)):
            if link.bandwidth <= 0:
                raise UserInputError(f"{name} bandwidth must be positive", field=f"{name}_gb_per_s")
            if not 0 < link.bus_bw_fraction <= 1:
                raise UserInputError(f"{name} bus-bandwidth fraction must be in (0, 1]", field=f"{name}_bus_bw_fraction")
            if link.latency_s < 0:
                raise UserInputError(f"{name} latency must be >= 0", field=f"{name}_latency_us")

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_catalog(
        cls,
        device: str | Device,
        n_devices: int,
        *,
        domain_size: int | None = None,
        scale_up_kind: str | None = None,
        scale_up_gb_per_s: float | None = None,
        scale_up_latency_us: float | None = None,
        scale_out_kind: str | None = None,
        scale_out_gbit_per_s: float | None = None,
        scale_out_latency_us: float | None = None,
        topology: Topology | None = None,
        efficiency: Efficiency | None = None,
    ) -> Cluster:
        """A cluster of ``n_devices`` catalog devices; any keyword overrides the catalog default.

        Bandwidths are per direction per device (scale-up in GB/s, scale-out in Gbit/s, as
        vendors print them); latencies in microseconds.
        """
        dev = load_catalog().get(device) if isinstance(device, str) else device
        eff = efficiency or resolve_efficiency(dev)
        up_kind = scale_up_kind or _scale_up_kind(dev)
        out_kind = scale_out_kind or _scale_out_kind(dev)
        for field, kind in (("scale_up_kind", up_kind), ("scale_out_kind", out_kind)):
            if kind not in LINK_TYPES:
                raise UserInputError(f"unknown link type {kind!r}; known: {', '.join(LINK_TYPES)}", field=field)
        if dev.scale_up_bandwidth and up_kind != "pcie":
            up_bw = dev.scale_up_bandwidth
            dom = dev.scale_up_domain
            topo: Topology = _topology(dev, up_kind)
        else:
            up_bw = dev.pcie_bandwidth or DEFAULT_PCIE_BYTES_PER_S
            dom = max(dev.scale_up_domain, PCIE_SERVER_DEVICES)
            topo = "pcie"
        if scale_up_gb_per_s is not None:
            up_bw = scale_up_gb_per_s * units.GB_PER_S
        out_bw = dev.scale_out_bandwidth or DEFAULT_SCALE_OUT_BYTES_PER_S
        if scale_out_gbit_per_s is not None:
            out_bw = scale_out_gbit_per_s * units.GBIT
        up_t, out_t = link_type(up_kind), link_type(out_kind)
        up_frac, up_lat = up_t.bus_bw_fraction, up_t.latency_s
        out_frac, out_lat = out_t.bus_bw_fraction, out_t.latency_s
        if is_calibrated(eff):
            # a calibration profile measured this device's own links: it wins over the link-type defaults
            if topo != "pcie":
                up_frac, up_lat = eff.scale_up_bw_fraction, eff.scale_up_latency_s
            out_frac, out_lat = eff.scale_out_bw_fraction, eff.scale_out_latency_s
        if scale_up_latency_us is not None:
            up_lat = scale_up_latency_us * units.US
        if scale_out_latency_us is not None:
            out_lat = scale_out_latency_us * units.US
        dom = domain_size or dom
        topo = topology or topo
        hint = _hint(dev, dom, topo, up_kind)
        return cls(
            device=dev,
            n_devices=n_devices,
            domain_size=dom,
            topology=topo,
            scale_up=Link(up_kind, up_bw, up_frac, up_lat),
            scale_out=Link(out_kind, out_bw, out_frac, out_lat),
            efficiency=eff,
            hint=hint,
        )

    def with_devices(self, n_devices: int) -> Cluster:
        """The same hardware with a different device count."""
        return replace(self, n_devices=n_devices)

    # -- derived ------------------------------------------------------------------------------
    @property
    def n_domains(self) -> int:
        return -(-self.n_devices // self.domain_size)

    def scale_up_bus_bw(self, group_local: int) -> float:
        """Bus bandwidth (bytes/s) one device gets for a group with ``group_local`` members in its
        domain: full on a switch/torus/PCIe, (g-1)/(domain-1) of it on a point-to-point mesh."""
        if self.topology == "mesh" and self.domain_size > 1:
            share = max(group_local - 1, 1) / (self.domain_size - 1)
            return self.scale_up.bus_bw * min(share, 1.0)
        return self.scale_up.bus_bw

    def to_dict(self) -> dict[str, object]:
        return {
            "device": self.device.id,
            "n_devices": self.n_devices,
            "domain_size": self.domain_size,
            "topology": self.topology,
            "hint": self.hint,
            "scale_up": self.scale_up.to_dict(),
            "scale_out": self.scale_out.to_dict(),
            "efficiency_source": self.efficiency.source,
        }


def is_calibrated(eff: Efficiency) -> bool:
    """True when ``eff`` is a stored calibration profile rather than the built-in defaults."""
    return not (eff.source == "defaults" or eff.source.startswith(("family:", "device:")))


def _scale_up_kind(dev: Device) -> str:
    name = (dev.scale_up_name or "").casefold()
    if not dev.scale_up_bandwidth or not name:
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


def _scale_out_kind(dev: Device) -> str:
    name = (dev.scale_out_name or "").casefold()
    if "infiniband" in name:
        return "infiniband"
    if "roce" in name or "spectrum" in name:
        return "roce"
    if "ethernet" in name or "dcn" in name or "data-center network" in name:
        return "ethernet"
    return DEFAULT_SCALE_OUT_KIND


def _topology(dev: Device, kind: str) -> Topology:
    topo = (dev.scale_up_topology or "").casefold()
    if any(w in topo for w in ("no switch", "point-to-point", "full mesh", "fully connected", "cube-mesh")):
        return "mesh"
    if "torus" in topo or kind == "ici":
        return "torus"
    if any(w in topo for w in ("switch", "all-to-all", "clos")):
        return "switch"
    return "mesh" if kind in ("hccs", "xgmi", "ethernet-scaleup", "mlu-link") else "switch"


def _hint(dev: Device, domain: int, topo: Topology, kind: str) -> str:
    if topo == "pcie":
        return f"PCIe-only cards: {domain} per server, peer traffic over PCIe, servers over the scale-out NIC"
    what = {"switch": "switched", "mesh": "point-to-point mesh", "torus": "torus"}[topo]
    return f"{dev.scale_up_name or kind} {what} domain of {domain} devices; larger groups cross the scale-out network"
