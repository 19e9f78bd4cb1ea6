"""Communication inside a serving replica: tensor-parallel all-reduce, pipeline hand-off, MoE all-to-all.

Alpha-beta model (Hockney): ``time = steps · alpha + volume / bus bandwidth``. Links, their
achievable bus bandwidth and latency are the same as the training planner's (``perf.links``: link
type defaults, or the device's calibration): the scale-up link inside the domain (a subgroup of a
point-to-point mesh such as HCCS gets (g-1)/(domain-1) of it), PCIe inside a server of PCIe-only
cards, the scale-out NIC beyond. Inside a single-hop domain (NVSwitch, torus slice) small
all-reduces use the two-shot algorithm serving engines ship (TensorRT-LLM/vLLM custom all-reduce):
two latency steps whatever the group size; otherwise NCCL's ring takes 2·(n-1) steps. The bandwidth
term is the ring's 2·(n-1)/n · bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xpuplan.catalog.device import Device
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.links import device_links


@dataclass(frozen=True)
class Link:
    """The link a collective over ``n`` devices uses: bandwidth (bytes/s per direction, achievable),
    per-step latency (s), and whether it is single-hop (any two devices one hop apart)."""

    name: str
    bandwidth_bytes_per_s: float
    latency_s: float
    switched: bool


def link_for(device: Device, eff: Efficiency, n: int) -> Link:
    """Scale-up link when the group fits the domain (PCIe for PCIe-only cards), else scale-out."""
    links = device_links(device, eff)
    if n <= links.domain_size:
        up = links.scale_up
        name = device.scale_up_name if links.topology != "pcie" and device.scale_up_name else up.kind
        return Link(name, links.scale_up_bus_bw(n), up.latency_s, links.single_hop)
    out = links.scale_out
    return Link("scale-out", out.bus_bw, out.latency_s, False)


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
