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

The latency term across scale-up domains is the cheapest algorithm the collective library offers
(:func:`inter_latency_steps`, the libraries are data: ``catalog/data/collective_libraries.yaml``):
NCCL and RCCL have a tree for all-reduce only, so all-gather and reduce-scatter pay the ring's n-1
steps; HCCL offers recursive halving-doubling. Inside a scale-up domain every library runs rings
(NCCL's tree is a chain within a node), which :func:`time_hierarchical_s` and :func:`time_group_s`
follow. The bandwidth term stays the ring's.

Hierarchical collectives (a group that spans ``nodes`` scale-up domains with ``local`` ranks in
each): the intra-domain phase moves the whole buffer over the scale-up link, the inter-domain phase
moves 1/local of it over each rank's own scale-out NIC (rail-optimised networks; NCCL runs one
ring per NIC). The phases are pipelined chunk by chunk, so the bandwidth term is the slower of the
two, and the latency terms add.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, Final, Literal, Protocol

import numpy as np

from xpuplan.catalog.assumptions import LazyMapping, LinkType, default_assumptions

ArrayLike = float | np.ndarray


#: Named assumptions, one per link type: large-message bus bandwidth over the per-direction link
#: peak, from public collective benchmarks, and small-message per-step latency. The table is data
#: (``catalog/data/link_types.yaml``, each entry with its source); this is a read-only view of the
#: built-in values. Planners take the link types of an ``Assumptions`` bundle instead.
LINK_TYPES: Final[Mapping[str, LinkType]] = LazyMapping(lambda: default_assumptions().link_types)


def link_type(name: str) -> LinkType:
    """The built-in :class:`LinkType` named ``name``; ``ValueError`` lists the known names."""
    return default_assumptions().link_type(name)


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


class LibraryLike(Protocol):
    """What the latency model needs of a collective library (``catalog.stacks.CollectiveLibrary``)."""

    @property
    def tree_all_reduce(self) -> bool: ...

    @property
    def log_all_reduce(self) -> bool: ...

    @property
    def log_all_gather(self) -> bool: ...


def inter_latency_steps(kind: str, nodes: ArrayLike, library: LibraryLike | None = None) -> ArrayLike:
    """Latency steps of the inter-domain phase of a collective over ``nodes`` domains, with the
    cheapest algorithm the library offers (its tuner picks it when latency dominates):

    * all-reduce: ring 2·(n-1); tree (NCCL/RCCL double binary tree) 2·2·ceil(log2 n); recursive
      halving-doubling (HCCL RHD) 2·ceil(log2 n);
    * all-gather / reduce-scatter: ring n-1 (NCCL and RCCL have no tree for them); halving-doubling
      ceil(log2 n) where the library offers it (HCCL).

    ``library`` None means NCCL (ring or tree for all-reduce, ring otherwise)."""
    n = np.maximum(np.asarray(nodes, dtype=float), 1.0)
    log = np.ceil(np.log2(n))
    if kind == "all_reduce":
        out = 2.0 * (n - 1.0)
        if library is None or library.tree_all_reduce:
            out = np.minimum(out, 4.0 * log)
        if library is not None and library.log_all_reduce:
            out = np.minimum(out, 2.0 * log)
    else:
        out = n - 1.0
        if library is not None and library.log_all_gather:
            out = np.minimum(out, log)
    return float(out) if np.ndim(out) == 0 else out


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
    library: LibraryLike | None = None,
) -> ArrayLike:
    """A ring-type collective (``all_reduce``, ``all_gather``, ``reduce_scatter``) over ``local`` ranks
    in each of ``nodes`` domains (group size local·nodes).

    Intra phase: the full buffer over ``local`` ranks on the scale-up link, a ring (local-1 latency
    steps). Inter phase: 1/local of the buffer over ``nodes`` ranks, each rank on its own NIC, with
    the cheapest algorithm the collective ``library`` offers (:func:`inter_latency_steps`; NCCL when
    None: ring or tree for all-reduce, ring only for all-gather and reduce-scatter). Bandwidth terms are pipelined (max), latency terms add. With
    nodes = 1 this is a ring on the scale-up link; with local = 1 the flat collective on the
    scale-out link.
    """
    f = _BW_FACTOR[kind]
    local_a = np.asarray(local, dtype=float)
    nodes_a = np.asarray(nodes, dtype=float)
    t_intra_bw = f * _ring_fraction(local_a) * n_bytes / intra_bw
    t_inter_bw = f * _ring_fraction(nodes_a) * (n_bytes / np.maximum(local_a, 1.0)) / inter_bw
    # NCCL runs rings inside a node (its tree is an inter-node algorithm: within a node it is a chain),
    # so the intra-domain phase pays the ring's local-1 steps; across domains the cheaper of ring and tree
    lat = (f * (np.maximum(local_a, 1.0) - 1.0) * intra_latency_s
           + np.asarray(inter_latency_steps(kind, nodes_a, library)) * inter_latency_s)
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


# ---------------------------------------------------------------------------------------
# Process groups on a network: the one model both planners call
# ---------------------------------------------------------------------------------------
#: Collectives a planner asks for by name.
CollectiveKind = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]

#: All-reduce algorithms, as a collective library picks them (``time_group_s(algorithm=...)``):
#:
#: * ``nccl``: NCCL's choice: rings inside a scale-up domain (2·(n-1) steps; NCCL's tree is an
#:   inter-node algorithm, a chain within a node), and across domains the cheaper of ring and tree
#:   (2·2·ceil(log2 n) steps) for the inter-domain phase; the ring's bandwidth term throughout. For a
#:   flat group counted as one level, :func:`all_reduce_latency_steps` gives min(ring, tree);
#: * ``ring``: always the ring, 2·(n-1) latency steps;
#: * ``two_shot``: the custom all-reduce serving engines ship for small messages on a single-hop
#:   domain (TensorRT-LLM and vLLM custom all-reduce: reduce-scatter then all-gather through peer
#:   memory), 2 latency steps whatever the group size; the bandwidth term stays the ring's;
#: * ``one_shot``: every rank reads all peers' buffers at once, 1 latency step.
#:
#: ``two_shot``/``one_shot`` need every peer one hop away (switch or torus slice inside one
#: domain); elsewhere the library falls back to ``nccl``.
AllReduceAlgorithm = Literal["nccl", "ring", "two_shot", "one_shot"]

#: All-to-all algorithms: ``pairwise`` (NCCL grouped send/recv, counted like an all-gather's
#: latency steps) or ``direct`` (all peers' sends issued at once: one latency step on a
#: single-hop domain, as serving engines' expert dispatch kernels do; ``pairwise`` elsewhere).
AllToAllAlgorithm = Literal["pairwise", "direct"]

ALL_REDUCE_ALGORITHMS: Final = ("nccl", "ring", "two_shot", "one_shot")
ALL_TO_ALL_ALGORITHMS: Final = ("pairwise", "direct")


class LinkLike(Protocol):
    """What the group model needs of a link: achievable bus bandwidth (bytes/s) and latency (s)."""

    @property
    def bus_bw(self) -> float: ...

    @property
    def latency_s(self) -> float: ...


class Network(Protocol):
    """What the group model needs of the hardware: both links, the scale-up domain size and how it
    is wired (``perf.links.DeviceLinks`` and ``train.cluster.Cluster`` both qualify)."""

    @property
    def scale_up(self) -> LinkLike: ...

    @property
    def scale_out(self) -> LinkLike: ...

    @property
    def domain_size(self) -> int: ...

    @property
    def topology(self) -> str: ...


def single_hop(topology: str, full_mesh: bool = False) -> bool:
    """Every device reaches every other in one hop inside the domain (switch, torus slice, or a
    ``mesh`` that is a full mesh: every device wired directly to every other)."""
    return topology in ("switch", "torus") or (topology == "mesh" and full_mesh)


def scale_up_share(local: ArrayLike, domain_size: int, topology: str) -> ArrayLike:
    """Fraction of the scale-up bus bandwidth a group with ``local`` members in one domain gets:
    1 on a switch, torus or PCIe; (local-1)/(domain-1) on a point-to-point mesh (a member uses
    only the links to the other members)."""
    local_a = np.asarray(local, dtype=float)
    if topology == "mesh" and domain_size > 1:
        out = np.minimum(np.maximum(local_a - 1.0, 1.0) / (domain_size - 1), 1.0)
    else:
        out = np.ones_like(local_a)
    return float(out) if np.ndim(out) == 0 else out


# ---------------------------------------------------------------------------------------
# Torus domains (TPU ICI)
# ---------------------------------------------------------------------------------------
def torus_slice_shape(chips: int, dims: int) -> tuple[int, ...]:
    """Axis lengths (ascending) of a slice of ``chips`` chips on a ``dims``-dimensional torus: powers of
    two, as balanced as they go (``chips`` rounded up to a power of two), which are the slice shapes
    Google Cloud offers: v5p 4x4x4, 4x4x8, 4x8x8, 8x8x8, 8x8x16, 8x16x16; v5e/v6e 2x4, 4x4, 8x8, 8x16, 16x16."""
    if dims < 1:
        raise ValueError("a torus has at least one dimension")
    target = 1 << max(int(chips) - 1, 0).bit_length()
    shape = [1] * dims
    while math.prod(shape) < target:
        i = min(range(dims), key=lambda k: (shape[k], -k))
        shape[i] *= 2
    return tuple(sorted(shape))


def _place(block: int, free: list[tuple[int, bool]]) -> tuple[list[tuple[int, bool]], list[tuple[int, bool]]]:
    """Put a logical mesh axis of ``block`` chips on the free physical axes ``(length, intact)`` as
    jax's ``mesh_utils.create_device_mesh`` does on a TPU torus: whole physical axes whose lengths
    multiply to ``block``, as many as possible (more axes, more links); else whole axes, shortest
    first, and a segment of the next one (which is left to later blocks as a strided, non-intact
    axis). Returns (the axes used as ``(chips on it, a whole intact axis)``, the axes still free)."""
    if block <= 1:
        return [], free
    for k in range(len(free), 0, -1):
        for combo in itertools.combinations(range(len(free)), k):
            if math.prod(free[i][0] for i in combo) == block:
                return ([(free[i][0], free[i][1]) for i in combo],
                        [a for i, a in enumerate(free) if i not in combo])
    used: list[tuple[int, bool]] = []
    rest = sorted(free)
    left = block
    while rest and left > 1:
        length, intact = rest.pop(0)
        if left % length == 0:  # the whole axis
            used.append((length, intact))
            left //= length
            continue
        part = math.gcd(left, length)  # a segment of the axis; the rest of it stays free, strided
        part = part if part > 1 else min(left, length)
        used.append((part, False))
        if length // part > 1:
            rest.insert(0, (length // part, False))
        left = max(left // part, 1)
    return used, rest


@lru_cache(maxsize=4096)
def torus_group_share(local: int, stride: int, slice_chips: int, dims: int, wrap_axis: int) -> float:
    """Fraction of a chip's ICI bandwidth (the sum over its 2·``dims`` links) that a ring collective
    of a group of ``local`` chips, ``stride`` apart, gets on a torus slice of ``slice_chips`` chips
    (:func:`torus_slice_shape`).

    The inner ``stride`` chips (the more communication-intensive logical axes: tensor parallelism is
    innermost) are placed first, then the group (:func:`_place`). A ring along one whole axis with
    wraparound runs both directions over the axis's two links: 2 of the 2·dims links, so each axis the
    group spans adds 1/dims (the scaling book: an all-gather over k axes takes V / (k · W_bidi));
    an axis without wraparound (shorter than ``wrap_axis``, or a segment of one) is an open line on
    which a bidirectional ring reaches half of that. Capped at 1."""
    if local <= 1 or dims < 1:
        return 1.0
    free = [(a, a >= wrap_axis) for a in torus_slice_shape(max(slice_chips, local * max(stride, 1)), dims)]
    _, free = _place(max(stride, 1), free)
    used, _ = _place(local, free)
    share = sum((1.0 if intact else 0.5) for length, intact in used if length > 1) / dims
    return min(max(share, 0.5 / dims), 1.0)


def torus_share(local: ArrayLike, stride: ArrayLike, slice_chips: int, dims: int, wrap_axis: int) -> ArrayLike:
    """:func:`torus_group_share` over arrays of group sizes and strides (floats or arrays alike)."""
    loc = np.asarray(local, dtype=np.int64)
    strd = np.broadcast_to(np.asarray(stride, dtype=np.int64), loc.shape)
    if loc.ndim == 0:
        return torus_group_share(int(loc), int(strd), slice_chips, dims, wrap_axis)
    key = loc.ravel() * (1 << 32) + strd.ravel()  # group sizes and strides are far below 2**32
    keys, inverse = np.unique(key, return_inverse=True)
    vals = np.asarray([torus_group_share(int(k >> 32), int(k & 0xFFFFFFFF), slice_chips, dims, wrap_axis)
                       for k in keys])
    return vals[np.asarray(inverse).ravel()].reshape(loc.shape)


def all_reduce_latency_steps(n_ranks: ArrayLike, algorithm: AllReduceAlgorithm = "nccl") -> ArrayLike:
    """Latency steps (alphas) of an all-reduce over ``n_ranks`` (see :data:`AllReduceAlgorithm`)."""
    n = np.maximum(np.asarray(n_ranks, dtype=float), 1.0)
    if algorithm == "nccl":
        out = 2.0 * np.asarray(latency_steps(n))
    elif algorithm == "ring":
        out = 2.0 * (n - 1.0)
    elif algorithm == "two_shot":
        out = np.where(n > 1.0, 2.0, 0.0)
    elif algorithm == "one_shot":
        out = np.where(n > 1.0, 1.0, 0.0)
    else:
        raise ValueError(f"unknown all-reduce algorithm {algorithm!r}; known: {', '.join(ALL_REDUCE_ALGORITHMS)}")
    return float(out) if np.ndim(out) == 0 else out


def time_group_s(
    kind: CollectiveKind,
    n_bytes: ArrayLike,
    size: ArrayLike,
    stride: ArrayLike,
    net: Network,
    *,
    all_reduce: AllReduceAlgorithm = "nccl",
    all_to_all: AllToAllAlgorithm = "pairwise",
) -> ArrayLike:
    """Seconds of one collective of a process group of ``size`` ranks spaced ``stride`` apart on
    ``net`` (0 when size = 1); floats or arrays alike.

    The group's layout (:func:`group_layout`) decides which part runs on the scale-up link (with a
    mesh's share, :func:`scale_up_share`) and which crosses the scale-out network
    (:func:`time_hierarchical_s`, :func:`time_hierarchical_all_to_all_s`). ``p2p`` is one send
    between neighbours of the group: over the scale-out link when the group spans domains (its
    slowest hop), else over the scale-up link. ``all_reduce``/``all_to_all`` name the library's
    algorithm; the single-hop ones (``two_shot``, ``one_shot``, ``direct``) apply only to groups
    inside one switched (or torus) domain and replace the intra-domain latency term.
    """
    local, nodes = group_layout(size, stride, net.domain_size)
    local_f = np.asarray(local, dtype=float)
    nodes_f = np.asarray(nodes, dtype=float)
    ib = net.scale_up.bus_bw * np.asarray(scale_up_share(local_f, net.domain_size, net.topology))
    dims = int(getattr(net, "torus_dims", 0) or 0)
    ib_p2p: Any = ib
    if net.topology == "torus" and dims > 0:
        # a torus: ring collectives use the links of the axes the group spans, a send to a neighbour one link
        chips = getattr(net, "n_devices", None)
        slice_chips = min(int(chips), net.domain_size) if chips else 0
        stride_in = np.minimum(np.asarray(stride, dtype=np.int64), net.domain_size)
        ib = ib * np.asarray(torus_share(local, stride_in, slice_chips, dims,
                                         int(getattr(net, "torus_wrap_axis", 0) or 0)))
        ib_p2p = net.scale_up.bus_bw / (2.0 * dims)
    il, ob, ol = net.scale_up.latency_s, net.scale_out.bus_bw, net.scale_out.latency_s
    # A full mesh (``perf.links.DeviceLinks.full_mesh``; a training Cluster has none) is single-hop:
    # HCCL's intra-server Mesh algorithm and the engines' custom all-reduce on xGMI run one step per phase.
    inside_hop = (nodes_f <= 1.0) & single_hop(net.topology, bool(getattr(net, "full_mesh", False)))
    if kind == "p2p":
        t = np.where(nodes_f > 1.0, time_p2p_s(n_bytes, ob, ol), time_p2p_s(n_bytes, ib_p2p, il))
    elif kind == "all_to_all":
        # on a torus the all-to-all keeps the whole-chip figure (bisection-bound, not a ring: the scaling
        # book prices it at a quarter of an all-gather on a bidirectional ring; not modelled further)
        ib_a2a = net.scale_up.bus_bw * np.asarray(scale_up_share(local_f, net.domain_size, net.topology))
        t = np.asarray(time_hierarchical_all_to_all_s(n_bytes, local_f, nodes_f, ib_a2a, il, ob, ol))
        if all_to_all == "direct":
            direct = (local_f - 1.0) / local_f * n_bytes / ib_a2a + il
            t = np.where(inside_hop, direct, t)
        elif all_to_all != "pairwise":
            raise ValueError(f"unknown all-to-all algorithm {all_to_all!r}; known: {', '.join(ALL_TO_ALL_ALGORITHMS)}")
    elif kind in _BW_FACTOR:
        t = np.asarray(time_hierarchical_s(kind, n_bytes, local_f, nodes_f, ib, il, ob, ol,
                                           getattr(net, "library", None)))
        if kind == "all_reduce" and all_reduce != "nccl":
            bw_term = 2.0 * np.asarray(_ring_fraction(local_f)) * n_bytes / ib
            alt = bw_term + all_reduce_latency_steps(local_f, all_reduce) * il
            usable = inside_hop if all_reduce in ("two_shot", "one_shot") else nodes_f <= 1.0
            t = np.where(usable, alt, t)
    else:
        raise ValueError(f"unknown collective {kind!r}")
    out = np.where(np.asarray(size) > 1, t, 0.0)
    return float(out) if np.ndim(out) == 0 else out
