"""Communication inside a serving replica: tensor-parallel all-reduce, pipeline hand-off, MoE all-to-all.

Alpha-beta model (Hockney): ``time = steps · alpha + volume / bus bandwidth``. Link bandwidth and
latency come from the catalog (scale-up link, else PCIe, else the scale-out NIC) and the device's
efficiency parameters (``scale_up_bw_fraction``, ``scale_up_latency_s``...). Inside a switched
scale-up domain (NVSwitch, full mesh) small all-reduces use the two-shot algorithm serving engines
ship (TensorRT-LLM/vLLM custom all-reduce): two latency steps whatever the group size; on a ring
(PCIe) they take 2·(n-1) steps. The bandwidth term is the ring's 2·(n-1)/n · bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpuplan.catalog.device import Device
from xpuplan.perf.efficiency import Efficiency

#: Words in a scale-up topology description that mean every device reaches every other in one hop.
_SWITCHED_WORDS = ("switch", "all-to-all", "full mesh", "fully connected", "crossbar")


@dataclass(frozen=True)
class Link:
    """The link a collective over ``n`` devices uses: bandwidth (bytes/s per direction, achievable),
    per-step latency (s), and whether it is switched (one hop between any two devices)."""

    name: str
    bandwidth_bytes_per_s: float
    latency_s: float
    switched: bool


def link_for(device: Device, eff: Efficiency, n: int) -> Link:
    """Scale-up link when the group fits the scale-up domain, else PCIe (single node), else scale-out."""
    topo = (device.scale_up_topology or "").casefold()
    if device.scale_up_bandwidth and n <= device.scale_up_domain:
        return Link(device.scale_up_name or "scale-up", device.scale_up_bandwidth * eff.scale_up_bw_fraction,
                    eff.scale_up_latency_s, any(w in topo for w in _SWITCHED_WORDS))
    if n > max(device.scale_up_domain, 1) and device.scale_out_bandwidth:
        return Link("scale-out", device.scale_out_bandwidth * eff.scale_out_bw_fraction, eff.scale_out_latency_s, False)
    if device.pcie_bandwidth:
        return Link("PCIe", device.pcie_bandwidth * eff.scale_up_bw_fraction, eff.scale_up_latency_s, False)
    if device.scale_out_bandwidth:
        return Link("scale-out", device.scale_out_bandwidth * eff.scale_out_bw_fraction, eff.scale_out_latency_s, False)
    # no link figure in the catalog: assume PCIe Gen4 x16 (32 GB/s per direction)
    return Link("PCIe (assumed 32 GB/s)", 32e9 * eff.scale_up_bw_fraction, eff.scale_up_latency_s, False)


def time_allreduce_s(message_bytes: float, n: int, device: Device, eff: Efficiency, *, two_shot: bool = True) -> float:
    """Seconds for an all-reduce of ``message_bytes`` over ``n`` devices (0 when n = 1).

    ``two_shot``: the engine's custom all-reduce on a switched link (2 latency steps); otherwise, or
    on a ring, NCCL's ring pays 2·(n-1) steps."""
    if n <= 1 or message_bytes <= 0:
        return 0.0
    link = link_for(device, eff, n)
    steps = 2 if (link.switched and two_shot) else 2 * (n - 1)
    return steps * link.latency_s + 2.0 * (n - 1) / n * message_bytes / link.bandwidth_bytes_per_s


def time_alltoall_s(bytes_per_device: float, n: int, device: Device, eff: Efficiency) -> float:
    """Seconds for an all-to-all where each of ``n`` devices sends ``bytes_per_device`` in total
    ((n-1)/n of it leaves the device)."""
    if n <= 1 or bytes_per_device <= 0:
        return 0.0
    link = link_for(device, eff, n)
    steps = 1 if link.switched else n - 1
    return steps * link.latency_s + (n - 1) / n * bytes_per_device / link.bandwidth_bytes_per_s


def time_p2p_s(message_bytes: float, device: Device, eff: Efficiency, n_group: int) -> float:
    """Seconds to send ``message_bytes`` to the next pipeline stage (groups beyond the scale-up
    domain cross the scale-out network)."""
    if message_bytes <= 0:
        return 0.0
    link = link_for(device, eff, n_group)
    return link.latency_s + message_bytes / link.bandwidth_bytes_per_s
