"""``Cluster``: the hardware a training job runs on (device, count, scale-up and scale-out links).

Defaults come from the catalog: the device's scale-up domain (NVLink/NVSwitch island, HCCS board,
xGMI mesh, NVL72 rack, TPU ICI slice), its scale-up bandwidth per direction, its scale-out NIC per
device; efficiencies and the link types' achievable bus-bandwidth fractions and latencies come
from an explicit :class:`~xpuplan.catalog.assumptions.Assumptions` bundle (built-in when None;
never read from the environment or the calibration store here). Every field can be overridden.
PCIe-only cards get a PCIe "scale-up" link inside a server of :data:`PCIE_SERVER_DEVICES` cards.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from xpuplan import units
from xpuplan.catalog import Device, load_catalog
from xpuplan.catalog.assumptions import Assumptions, default_assumptions
from xpuplan.catalog.efficiency import Efficiency
from xpuplan.catalog.stacks import CollectiveLibrary, library_for_vendor
from xpuplan.errors import UserInputError
from xpuplan.perf.links import (
    DEFAULT_PCIE_BYTES_PER_S,
    DEFAULT_SCALE_OUT_BYTES_PER_S,
    DEFAULT_SCALE_OUT_KIND,
    PCIE_SERVER_DEVICES,
    DeviceLinks,
    Link,
    Topology,
    device_links,
    scale_out_kind,
    scale_up_kind,
)

__all__ = [
    "DEFAULT_PCIE_BYTES_PER_S",
    "DEFAULT_SCALE_OUT_BYTES_PER_S",
    "DEFAULT_SCALE_OUT_KIND",
    "PCIE_SERVER_DEVICES",
    "Cluster",
    "Link",
    "Topology",
]


@dataclass(frozen=True)
class Cluster:
    """``n_devices`` of one accelerator in scale-up domains of ``domain_size`` devices.

    ``topology`` says how a domain is wired: ``switch`` (NVSwitch, UB Clos: any subgroup gets the
    full per-device bandwidth), ``mesh`` (HCCS, xGMI, Gaudi: point-to-point links, a subgroup of g
    devices gets (g-1)/(domain-1) of it), ``torus`` (TPU ICI: a group's ring collectives get the
    links of the torus axes it spans, ``torus_dims``), ``pcie`` (no peer link).
    """

    device: Device
    n_devices: int
    domain_size: int
    topology: Topology
    scale_up: Link
    scale_out: Link
    efficiency: Efficiency
    hint: str = ""
    #: The collective library (NCCL, RCCL, HCCL, CNCL...) whose algorithms set the latency of
    #: collectives across scale-up domains (``perf.collectives.inter_latency_steps``); None = NCCL.
    library: CollectiveLibrary | None = None
    #: A torus domain's dimensions and shortest wrapped axis (TPU ICI; ``perf.links.DeviceLinks``):
    #: ring collectives get the links of the axes a group spans. 0: not a described torus.
    torus_dims: int = 0
    torus_wrap_axis: int = 0
    #: The bundle the cluster was built with (None: the built-in defaults); later stages (state
    #: recipes, power) read their assumptions from it. Not part of equality or hashing.
    assumptions: Assumptions | None = field(default=None, compare=False, repr=False)

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
        assumptions: Assumptions | None = None,
    ) -> Cluster:
        """A cluster of ``n_devices`` catalog devices; any keyword overrides the catalog default.

        Bandwidths are per direction per device (scale-up in GB/s, scale-out in Gbit/s, as
        vendors print them); latencies in microseconds. ``efficiency`` (else
        ``assumptions.training_efficiency(device)``) and the link types come from ``assumptions``
        (``None``: the built-in :func:`~xpuplan.catalog.assumptions.default_assumptions`).
        """
        a = assumptions or default_assumptions()
        dev = load_catalog().get(device) if isinstance(device, str) else device
        eff = efficiency or a.training_efficiency(dev)
        up_kind = scale_up_kind or _scale_up_kind(dev)
        out_kind = scale_out_kind or _scale_out_kind(dev)
        for name, kind in (("scale_up_kind", up_kind), ("scale_out_kind", out_kind)):
            a.link_type(kind, field=name)  # UserInputError naming the field for an unknown link type
        links = device_links(dev, eff, up_kind=up_kind, out_kind=out_kind, assumptions=a)
        up_kind = links.scale_up.kind
        up_bw, dom, topo = links.scale_up.bandwidth, links.domain_size, links.topology
        if scale_up_gb_per_s is not None:
            up_bw = scale_up_gb_per_s * units.GB_PER_S
        out_bw = links.scale_out.bandwidth
        if scale_out_gbit_per_s is not None:
            out_bw = scale_out_gbit_per_s * units.GBIT
        up_frac, up_lat = links.scale_up.bus_bw_fraction, links.scale_up.latency_s
        out_frac, out_lat = links.scale_out.bus_bw_fraction, links.scale_out.latency_s
        if scale_up_latency_us is not None:
            up_lat = scale_up_latency_us * units.US
        if scale_out_latency_us is not None:
            out_lat = scale_out_latency_us * units.US
        dom = domain_size or dom
        topo = topology or topo
        hint = _hint(dev, dom, topo, up_kind, links.torus_dims if topo == "torus" else 0)
        return cls(
            device=dev,
            n_devices=n_devices,
            domain_size=dom,
            topology=topo,
            scale_up=Link(up_kind, up_bw, up_frac, up_lat),
            scale_out=Link(out_kind, out_bw, out_frac, out_lat),
            efficiency=eff,
            hint=hint,
            library=library_for_vendor(dev.vendor),
            assumptions=a,
            torus_dims=links.torus_dims if topo == "torus" else 0,
            torus_wrap_axis=links.torus_wrap_axis if topo == "torus" else 0,
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
        domain (``perf.links.DeviceLinks.scale_up_bus_bw``: a share of it on a point-to-point mesh)."""
        return DeviceLinks(self.scale_up, self.scale_out, self.domain_size, self.topology,
                           torus_dims=self.torus_dims, torus_wrap_axis=self.torus_wrap_axis).scale_up_bus_bw(group_local)

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


_scale_up_kind = scale_up_kind
_scale_out_kind = scale_out_kind


def _hint(dev: Device, domain: int, topo: Topology, kind: str, torus_dims: int = 0) -> str:
    if topo == "pcie":
        return f"PCIe-only cards: {domain} per server, peer traffic over PCIe, servers over the scale-out NIC"
    what = {"switch": "switched", "mesh": "point-to-point mesh", "torus": "torus"}[topo]
    if topo == "torus" and torus_dims:
        what = (f"{torus_dims}D torus (a ring along one axis uses 2 of each chip's {2 * torus_dims} links)")
    return f"{dev.scale_up_name or kind} {what} domain of {domain} devices; larger groups cross the scale-out network"
