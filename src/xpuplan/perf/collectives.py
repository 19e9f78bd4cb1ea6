"""Collective-communication time: the alpha-beta (latency-bandwidth) model.

Every function is pure and works on floats or NumPy arrays alike (the training search evaluates
hundreds of thousands of plans at once). Conventions:

* ``n_bytes`` is the size of the *whole* buffer one rank contributes or receives (the size of
  the tensor being all-reduced, the gathered tensor of an all-gather, the input of a
  reduce-scatter, what one rank sends in total in an all-to-all).
* ``bus_bw`` is the *achievable bus bandwidth* in bytes/s: link peak per direction per device x
  the link type's achievable fraction (:data:`LINK_TYPES`). This is the ``busbw`` of nccl-tests,
  so the formulas are the ones nccl-tests uses to convert algorithm bandwidth into bus bandwidth
  (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md).
* ``latency_s`` is the per-step latency alpha.

Ring collectives (Patarasuk & Yuan 2009; Thakur et al. 2005):

* all-reduce:        2·(n-1)/n · B / bw + steps_ar(n) · alpha
* all-gather:          (n-1)/n · B / bw + steps(n) · alpha
* reduce-scatter:      (n-1)/n · B / bw + steps(n) · alpha
* all-to-all:          (n-1)/n · B / bw + steps(n) · alpha   (each rank keeps 1/n of its data)
* point-to-point:                B / bw + alpha

The latency term takes the cheaper of a ring (n-1 steps) and a tree (2·ceil(log2 n) steps),
as NCCL's tuner picks the tree algorithm when latency dominates; the bandwidth term stays the ring's.

Hierarchical collectives (a group that spans ``nodes`` scale-up domains with ``local`` ranks in
each): the intra-domain phase moves the whole buffer over the scale-up link, the inter-domain phase
moves 1/local of it over each rank's own scale-out NIC (rail-optimised networks; NCCL runs one
ring per NIC). The phases are pipelined chunk by chunk, so the bandwidth term is the slower of the
two, and the latency terms add.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from xpuplan import units

ArrayLike = float | np.ndarray


@dataclass(frozen=True)
class LinkType:
    """Achievable collective performance of one kind of link.

    ``bus_bw_fraction``: nccl-tests bus bandwidth for large messages over the link's peak per
    direction per device. ``latency_s``: per-step latency alpha (seconds).
    """

    name: str
    bus_bw_fraction: float
    latency_s: float
    description: str


#: Named assumptions, one per link type. Fractions are large-message bus bandwidth over the
#: per-direction link peak, from public collective benchmarks; latencies are small-message
#: per-step times.
LINK_TYPES: Final[dict[str, LinkType]] = {
    lt.name: lt
    for lt in (
        LinkType(
            "nvlink", 0.80, 5.0 * units.US,
            "NVLink through NVSwitch: nccl-tests all-reduce busbw ~230-240 GB/s on A100 (300 GB/s peak) "
            "and ~360-370 GB/s on H100 (450 GB/s peak)",
        ),
        LinkType(
            "nvlink-bridge", 0.80, 5.0 * units.US,
            "NVLink bridge between card pairs: same link protocol as NVSwitch systems",
        ),
        LinkType(
            "hccs", 0.70, 10.0 * units.US,
            "Huawei HCCS full mesh (Ascend 910B: 7 x 28 GB/s); HCCL reaches ~70% of the aggregate in "
            "public benchmarks; assumption pending calibration",
        ),
        LinkType(
            "xgmi", 0.70, 8.0 * units.US,
            "AMD Infinity Fabric (xGMI) full mesh: RCCL all-reduce busbw ~300-330 GB/s on 8x MI300X "
            "(448 GB/s aggregate peak)",
        ),
        LinkType(
            "ici", 0.80, 5.0 * units.US,
            "Google TPU ICI torus: XLA collectives reach ~80% of link bandwidth for large messages",
        ),
        LinkType(
            "ethernet-scaleup", 0.70, 10.0 * units.US,
            "on-die RoCE ports used as a scale-up mesh (Intel Gaudi): ~70% of line rate",
        ),
        LinkType(
            "mlu-link", 0.65, 10.0 * units.US,
            "Cambricon MLU-Link / Enflame GCU-LARE bridges: little public data; conservative assumption",
        ),
        LinkType(
            "pcie", 0.65, 10.0 * units.US,
            "PCIe through the host's switches (no peer link): ~65% of the per-direction PCIe peak for "
            "large peer-to-peer transfers",
        ),
        LinkType(
            "infiniband", 0.80, 15.0 * units.US,
            "InfiniBand HDR/NDR/XDR, rail-optimised: nccl-tests inter-node busbw ~80% of line rate",
        ),
        LinkType(
            "roce", 0.75, 20.0 * units.US,
            "RoCE v2 Ethernet fabric: slightly below InfiniBand because of congestion control",
        ),
        LinkType(
            "ethernet", 0.60, 30.0 * units.US,
            "TCP/generic Ethernet without RDMA (data-centre network, e.g. TPU DCN): ~60% of line rate",
        ),
    )
}


def link_type(name: str) -> LinkType:
    """The :class:`LinkType` named ``name``; ``ValueError`` lists the known names."""
    try:
        return LINK_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown link type {name!r}; known: {', '.join(LINK_TYPES)}") from None


# ---------------------------------------------------------------------------------------
# step counts
# ---------------------------------------------------------------------------------------
def latency_steps(n_ranks: ArrayLike) -> ArrayLike:
    """Latency steps of an all-gather/reduce-scatter over ``n_ranks``: min(ring n-1, tree 2·ceil(log2 n))."""
    n = np.maximum(np.asarray(n_ranks, dtype=float), 1.0)
    tree = 2.0 * np.ceil(np.log2(n))
    out = np.minimum(n - 1.0, tree)
    return float(out) if np.ndim(out) == 0 else out


def _ring_fraction(n_ranks: ArrayLike) -> ArrayLike:
    n = np.maximum(np.asarray(n_ranks, dtype=float), 1.0)
    out = (n - 1.0) / n
    return float(out) if np.ndim(out) == 0 else out


# ---------------------------------------------------------------------------------------
# flat collectives (one link type)
# ---------------------------------------------------------------------------------------
def time_all_reduce_s(n_bytes: ArrayLike, n_ranks: ArrayLike, bus_bw: ArrayLike, latency_s: ArrayLike) -> ArrayLike:
    """Ring all-reduce of an ``n_bytes`` buffer over ``n_ranks``: 2·(n-1)/n·B/bw + 2·steps·alpha (s)."""
    return 2.0 * _ring_fraction(n_ranks) * n_bytes / bus_bw + 2.0 * latency_steps(n_ranks) * latency_s


def time_all_gather_s(n_bytes: ArrayLike, n_ranks: ArrayLike, bus_bw: ArrayLike, latency_s: ArrayLike) -> ArrayLike:
    """All-gather producing an ``n_bytes`` buffer on every rank: (n-1)/n·B/bw + steps·alpha (s)."""
    return _ring_fraction(n_ranks) * n_bytes / bus_bw + latency_steps(n_ranks) * latency_s


def time_reduce_scatter_s(n_bytes: ArrayLike, n_ranks: ArrayLike, bus_bw: ArrayLike, latency_s: ArrayLike) -> ArrayLike:
    """Reduce-scatter of an ``n_bytes`` input per rank: (n-1)/n·B/bw + steps·alpha (s)."""
    return _ring_fraction(n_ranks) * n_bytes / bus_bw + latency_steps(n_ranks) * latency_s


def time_all_to_all_s(n_bytes: ArrayLike, n_ranks: ArrayLike, bus_bw: ArrayLike, latency_s: ArrayLike) -> ArrayLike:
    """All-to-all where each rank sends ``n_bytes`` in total, 1/n of it to itself: (n-1)/n·B/bw + steps·alpha."""
    return _ring_fraction(n_ranks) * n_bytes / bus_bw + latency_steps(n_ranks) * latency_s


def time_p2p_s(n_bytes: ArrayLike, bus_bw: ArrayLike, latency_s: ArrayLike) -> ArrayLike:
    """One point-to-point send of ``n_bytes``: alpha + B/bw (s)."""
    return latency_s + n_bytes / bus_bw


# ---------------------------------------------------------------------------------------
# hierarchical collectives (scale-up domain + scale-out network)
# ---------------------------------------------------------------------------------------
_BW_FACTOR = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0}


def time_hierarchical_s(
    kind: str,
    n_bytes: ArrayLike,
    local: ArrayLike,
    nodes: ArrayLike,
    intra_bw: ArrayLike,
    intra_latency_s: ArrayLike,
    inter_bw: ArrayLike,
    inter_latency_s: ArrayLike,
) -> ArrayLike:
    """A ring-type collective (``all_reduce``, ``all_gather``, ``reduce_scatter``) over ``local`` ranks
    in each of ``nodes`` domains (group size local·nodes).

    Intra phase: the full buffer over ``local`` ranks on the scale-up link. Inter phase: 1/local of
    the buffer over ``nodes`` ranks, each rank on its own NIC. Bandwidth terms are pipelined
    (max), latency terms add. With nodes = 1 this is the flat collective on the scale-up link;
    with local = 1 the flat collective on the scale-out link.
    """
    f = _BW_FACTOR[kind]
    local_a = np.asarray(local, dtype=float)
    nodes_a = np.asarray(nodes, dtype=float)
    t_intra_bw = f * _ring_fraction(local_a) * n_bytes / intra_bw
    t_inter_bw = f * _ring_fraction(nodes_a) * (n_bytes / np.maximum(local_a, 1.0)) / inter_bw
    lat = f * (latency_steps(local_a) * intra_latency_s + latency_steps(nodes_a) * inter_latency_s)
    out = np.maximum(t_intra_bw, t_inter_bw) + lat
    return float(out) if np.ndim(out) == 0 else out


def time_hierarchical_all_to_all_s(
    n_bytes: ArrayLike,
    local: ArrayLike,
    nodes: ArrayLike,
    intra_bw: ArrayLike,
    intra_latency_s: ArrayLike,
    inter_bw: ArrayLike,
    inter_latency_s: ArrayLike,
) -> ArrayLike:
    """All-to-all over local·nodes ranks: (local-1)/g of each rank's ``n_bytes`` stays in its domain
    (scale-up link), (g-local)/g crosses the network on its own NIC; both go at once (max)."""
    local_a = np.maximum(np.asarray(local, dtype=float), 1.0)
    g = local_a * np.maximum(np.asarray(nodes, dtype=float), 1.0)
    t_intra = (local_a - 1.0) / g * n_bytes / intra_bw
    t_inter = (g - local_a) / g * n_bytes / inter_bw
    lat = latency_steps(local_a) * intra_latency_s + latency_steps(g / local_a) * inter_latency_s
    out = np.maximum(t_intra, t_inter) + lat
    return float(out) if np.ndim(out) == 0 else out


def group_layout(size: ArrayLike, stride: ArrayLike, domain: ArrayLike) -> tuple[ArrayLike, ArrayLike]:
    """(ranks per scale-up domain, domains spanned) of a process group.

    Ranks are numbered so that consecutive ranks share a domain of ``domain`` devices; a group of
    ``size`` ranks spaced ``stride`` apart keeps ``min(size, domain // stride)`` ranks in one domain
    (at least 1) and spans ``ceil(size / local)`` domains.
    """
    size_a = np.asarray(size, dtype=np.int64)
    stride_a = np.maximum(np.asarray(stride, dtype=np.int64), 1)
    dom = np.maximum(np.asarray(domain, dtype=np.int64), 1)
    local = np.clip(dom // stride_a, 1, None)
    local = np.minimum(local, np.maximum(size_a, 1))
    nodes = -(-np.maximum(size_a, 1) // local)
    if np.ndim(local) == 0:
        return int(local), int(nodes)
    return local, nodes
