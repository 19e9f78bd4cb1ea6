"""Communication inside a serving replica: tensor-parallel all-reduce, pipeline hand-off, MoE all-to-all.

No model of its own: every collective is :func:`xpuplan.perf.collectives.time_group_s`, the one
alpha-beta model the training planner uses too, over the device's links (``perf.links``: link-type
defaults, or the device's calibration; a point-to-point mesh such as HCCS gives a subgroup
(g-1)/(domain-1) of the scale-up link; PCIe inside a server of PCIe-only cards; groups beyond the
scale-up domain are hierarchical, their outer phase on the scale-out NIC).

What differs between planners is only the collective library's algorithm, an explicit argument:
an engine with a custom all-reduce (TensorRT-LLM, vLLM, SGLang) uses the two-shot algorithm on a
single-hop domain (:func:`serving_all_reduce_algorithm`); otherwise NCCL's ring/tree choice, as in
training. Expert dispatch/combine kernels issue all peers' sends at once (``direct`` all-to-all).
"""

from __future__ import annotations

from dataclasses import dataclass

from xpuplan.catalog.device import Device
from xpuplan.perf import collectives as coll
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.links import DeviceLinks, device_links

#: All-to-all algorithm of serving engines' expert dispatch/combine (DeepEP, SGLang/vLLM MoE
#: kernels): every peer's send issued at once.
SERVING_ALL_TO_ALL: coll.AllToAllAlgorithm = "direct"


def serving_all_reduce_algorithm(custom_allreduce: bool) -> coll.AllReduceAlgorithm:
    """The engine's all-reduce: its custom two-shot kernel, or NCCL (``perf.collectives``)."""
    return "two_shot" if custom_allreduce else "nccl"


@dataclass(frozen=True)
class Link:
    """The link a flat collective over ``n`` devices would use (for reports): bandwidth (bytes/s per
    direction, achievable), per-step latency (s), and whether it is single-hop."""

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


def _links(device: Device, eff: Efficiency, links: DeviceLinks | None) -> DeviceLinks:
    return links if links is not None else device_links(device, eff)


def time_allreduce_s(message_bytes: float, n: int, device: Device, eff: Efficiency, *, two_shot: bool = True,
                     links: DeviceLinks | None = None) -> float:
    """Seconds for an all-reduce of ``message_bytes`` over ``n`` adjacent devices (0 when n = 1);
    ``two_shot``: the engine has a custom all-reduce (:func:`serving_all_reduce_algorithm`)."""
    if n <= 1 or message_bytes <= 0:
        return 0.0
    return float(coll.time_group_s("all_reduce", message_bytes, n, 1, _links(device, eff, links),
                                   all_reduce=serving_all_reduce_algorithm(two_shot)))


def time_alltoall_s(bytes_per_device: float, n: int, device: Device, eff: Efficiency, *, stride: int = 1,
                    links: DeviceLinks | None = None) -> float:
    """Seconds for an all-to-all where each of ``n`` devices (``stride`` apart) sends
    ``bytes_per_device`` in total ((n-1)/n of it leaves the device)."""
    if n <= 1 or bytes_per_device <= 0:
        return 0.0
    return float(coll.time_group_s("all_to_all", bytes_per_device, n, stride, _links(device, eff, links),
                                   all_to_all=SERVING_ALL_TO_ALL))


def time_p2p_s(message_bytes: float, device: Device, eff: Efficiency, n_group: int, *, stride: int = 1,
               links: DeviceLinks | None = None) -> float:
    """Seconds to send ``message_bytes`` to the next pipeline stage of a group of ``n_group`` stages
    ``stride`` devices apart (a group spanning domains crosses the scale-out network)."""
    if message_bytes <= 0 or n_group <= 1:
        return 0.0
    return float(coll.time_group_s("p2p", message_bytes, n_group, stride, _links(device, eff, links)))
