"""Communication inside a serving replica: tensor-parallel all-reduce, pipeline hand-off, MoE all-to-all.

No model of its own: every collective is :func:`xpuplan.perf.collectives.time_group_s`, the one
alpha-beta model the training planner uses too, over the device's links (``perf.links``: link-type
defaults, or the device's calibration; a point-to-point mesh such as HCCS gives a subgroup
(g-1)/(domain-1) of the scale-up link; PCIe inside a server of PCIe-only cards; groups beyond the
scale-up domain are hierarchical, their outer phase on the scale-out NIC).

What differs between planners is only the collective library's algorithm, an explicit argument:
an engine with a custom all-reduce (TensorRT-LLM, vLLM, SGLang) uses the two-shot algorithm on a
single-hop domain (:func:`serving_all_reduce_algorithm`); otherwise NCCL's ring/tree choice, as in
training. An expert-parallel MoE layer exchanges tokens the engine's way (:func:`moe_exchange_s`): an
all-gather of every rank's tokens and a reduce-scatter of the partial outputs (the default of TensorRT-LLM's
attention-DP outside multi-node NVLink and of vLLM), or a de-duplicated all-to-all whose kernels issue all
peers' sends at once (``direct``: DeepEP, TensorRT-LLM's MNNVL path).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from xpuplan.catalog.device import Device
from xpuplan.perf import collectives as coll
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.links import SERVER_DEVICES, DeviceLinks, device_links
from xpuplan.perf.ops import expected_groups_hit
from xpuplan.perf.roofline import LOW_PRECISION
from xpuplan.serve.constants import ACTIVATION_BYTES
from xpuplan.serve.precision import FP4_SCHEMES, Precision
from xpuplan.units import bytes_per_element

if TYPE_CHECKING:
    from xpuplan.catalog.assumptions import EngineProfile
    from xpuplan.models.arch import ModelArch

#: All-to-all algorithm of serving engines' expert dispatch/combine (DeepEP, SGLang/vLLM MoE
#: kernels): every peer's send issued at once.
SERVING_ALL_TO_ALL: coll.AllToAllAlgorithm = "direct"


def moe_dispatch_bytes(engine: EngineProfile, precision: Precision) -> float:
    """Bytes per element of the activations an EP layer dispatches: the GEMMs' FP8/FP4 format (scales included)
    where the engine quantises before the exchange (TensorRT-LLM: "AllGather ALWAYS supports post-quant
    dispatch", fused_moe/communication/allgather_reducescatter.py), else 16-bit."""
    if engine.moe_dispatch_quantized and not precision.weight_only and precision.gemm_dtype in LOW_PRECISION:
        return bytes_per_element(FP4_SCHEMES.get(precision.scheme, precision.gemm_dtype))
    return ACTIVATION_BYTES


def moe_uses_alltoall(engine: EngineProfile, model: ModelArch, ep: int, links: DeviceLinks) -> bool:
    """Whether the engine's EP exchange is a de-duplicated all-to-all rather than all-gather + reduce-scatter:
    its profile says so, or (TensorRT-LLM) the EP group is larger than top-k inside a switched scale-up domain
    that spans servers (multi-node NVLink; its MNNVL all-to-all needs both)."""
    if engine.moe_ep_exchange == "alltoall":
        return True
    top_k = model.moe.top_k if model.moe is not None else 0
    return bool(engine.moe_nvlink_alltoall and ep > top_k and links.domain_size > SERVER_DEVICES
                and links.single_hop)


def moe_exchange_s(engine: EngineProfile, model: ModelArch, precision: Precision, tp: int, ep: int,
                   links: DeviceLinks, group_tokens: Any) -> Any:
    """Seconds of one MoE layer's expert-parallel exchange, dispatch and combine, for ``group_tokens`` tokens
    per attention-DP group (``ep`` groups of ``tp`` devices; each TP rank exchanges 1/tp of its group's
    tokens, ``tp`` ranks apart). Numbers or arrays; 0 without EP.

    * all-gather + reduce-scatter (the default): every rank gathers all ranks' tokens (ep x tokens x hidden in
      the dispatch format, :func:`moe_dispatch_bytes`), runs its experts on those routed to them, and the
      partial outputs (16-bit) are reduce-scattered back: (ep-1) x tokens x hidden each way per rank, whatever
      top-k is.
    * all-to-all (:func:`moe_uses_alltoall`): a token goes once to each rank holding one of its experts (the
      ranks it hits, :func:`~xpuplan.perf.ops.expected_groups_hit`: 1.99 of 2 ranks, 5.34 of 8 for top-8 of
      128), its top-k experts there served from that copy, and comes back once from each.
    """
    if ep <= 1 or model.moe is None:
        return np.zeros_like(np.asarray(group_tokens, dtype=float)) if np.ndim(group_tokens) else 0.0
    tokens = np.asarray(group_tokens, dtype=float) / tp
    d = model.d_model
    dispatch = moe_dispatch_bytes(engine, precision)
    if moe_uses_alltoall(engine, model, ep, links):
        copies = tokens * expected_groups_hit(model.moe.n_routed_experts, model.moe.top_k, ep) * d
        out = (coll.time_group_s("all_to_all", copies * dispatch, ep, tp, links, all_to_all=SERVING_ALL_TO_ALL)
               + coll.time_group_s("all_to_all", copies * ACTIVATION_BYTES, ep, tp, links,
                                   all_to_all=SERVING_ALL_TO_ALL))
    else:
        gathered = ep * tokens * d
        out = (coll.time_group_s("all_gather", gathered * dispatch, ep, tp, links)
               + coll.time_group_s("reduce_scatter", gathered * ACTIVATION_BYTES, ep, tp, links))
    return float(out) if np.ndim(out) == 0 else out


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
