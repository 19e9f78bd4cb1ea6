"""Fit the planner's efficiency parameters to measurements (numpy only; no torch).

The fitted model is perf's roofline (``perf.roofline.op_time``)::

    t = max(FLOP / (peak(dtype) * fraction), bytes / (memory_bw * memory_bw_fraction)) + kernel_overhead_s
    GEMM fraction      = gemm_peak_fraction / (1 + gemm_half_dim / min(m, n, k))   (x low_precision_factor for fp8/int8)
    attention fraction = attention_peak_fraction

Parameters are fitted one family at a time, each from the measurements that isolate it:

1. ``kernel_overhead_s``: what one kernel costs the device beyond its work. On GPUs: the decode step of a
   tiny model (no work) replayed as a CUDA/HIP graph, per operation of the planner's op list. Its eager
   decode step measures the host's issue time per operation instead (PyTorch dispatch + launch, ~15 µs on
   an H200 host where the graph gives a few µs): what serving engines with graphs and kernels queued ahead
   of the device do not pay, so on an accelerator it is not fitted as ``kernel_overhead_s`` (a run without
   the graph measurement keeps the family value). On a CPU, where execution is synchronous, the eager
   figure is the per-operation cost (else the median time of tiny single operations). The eager figure
   stays the overhead of the fits below, whose points were timed eagerly. ``host_sync_s`` (the MoE
   dispatcher's per-layer sync): the measured host-device round trip plus ``MOE_POST_SYNC_OPS`` tiny operations;
2. ``memory_bw_fraction``: geometric mean of the median STREAM bandwidth (copy/scale/add/triad at
   the largest size) and the median decode-attention bandwidth (KV-cache reads);
3. ``gemm_peak_fraction`` and ``gemm_half_dim``: least absolute log error over every GEMM of
   the run's main precision (squares and real-model shapes, compute- and memory-bound alike);
4. ``low_precision_factor``: the same, over the fp8 GEMMs with 3. fixed (int8 where no fp8 was measured; the
   other format is checked against the fit and a disagreement over 2x is a warning);
5. ``attention_peak_fraction`` / ``attention_fa2_peak_fraction``: least absolute log error over causal prefill
   attention timed with the native fused kernel (cuDNN) / FlashAttention-2's code (SDPA's flash backend), each
   run tagged by ``xpuplan bench`` (``params.kernel``; an untagged run is SDPA's own choice, read as native);
6. scale-up / scale-out ``*_bw_fraction`` and ``*_latency_s``: perf's alpha-beta collective model
   (``perf.collectives``, nccl-tests' bus-bandwidth convention) with bus bandwidth = catalog link
   peak x fraction, over every message size of every collective measured.

Fits minimise the sum of absolute log errors (robust to a timing disturbed by other work).
Fractions are relative to the catalog device's peaks and capped at 1; a measured rate above
the catalog peak is reported as a warning (the catalog figure is then too low). Parameters
without measurements keep the device's defaults. Fits use a bounded grid search refined by
zooming, which is robust and fast for one or two parameters.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xpuplan import units
from xpuplan.catalog.assumptions import Assumptions, default_assumptions
from xpuplan.catalog.device import Device
from xpuplan.catalog.efficiency import MOE_POST_SYNC_OPS, Efficiency
from xpuplan.perf.links import device_links
from xpuplan.perf.roofline import LOW_PRECISION, OpCost, attention_head_dim_factor, compute_peak, op_time

#: Prefill attention measurements per fitted fraction: (parameter, the ``kernel`` tags of the records it is
#: fitted on, what they are). ``sdpa``: a record of SDPA's own kernel choice (runs before kernels were pinned,
#: CPUs, ROCm), read as the device's native kernel as before.
ATTENTION_FITS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("attention_peak_fraction", ("native", "sdpa"), "native fused kernel: cuDNN, vendor kernels"),
    ("attention_fa2_peak_fraction", ("fa2",), "FlashAttention-2's code: PyTorch SDPA's flash backend"),
)
#: Architectures on which PyTorch SDPA's default (flash) backend is FlashAttention-2's code rather than the
#: device's best kernel (PyTorch PR #138522 kept FA2 as the H100 default from 2.5.1; Blackwell likewise).
SDPA_FLASH_DEFAULT_ARCHITECTURES: frozenset[str] = frozenset({"Hopper", "Blackwell", "Blackwell Ultra"})

#: Bounds of the fitted parameters.
FRACTION_BOUNDS = (1e-5, 1.0)
HALF_DIM_BOUNDS = (0.0, 16384.0)
LATENCY_BOUNDS = (1e-8, 1e-2)
#: Grid points per parameter and zoom rounds of the grid search.
GRID_POINTS = 48
ZOOM_ROUNDS = 12
#: Collective messages at or above this size define the bus-bandwidth fraction reported
#: alongside the fit (nccl-tests' "large message" regime).
LARGE_MESSAGE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Point:
    """One measured operation in the form the fit needs (from a stored measurement)."""

    kind: str  # gemm, attention, membw, overhead, collective
    name: str
    dtype: str
    time_s: float
    flops: float = 0.0
    bytes: float = 0.0
    min_dim: float = math.inf
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class ParamFit:
    value: float
    default: float
    points: int
    rms_log_error: float | None
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "default": self.default, "points": self.points,
                "rms_log_error": self.rms_log_error, "basis": self.basis}


@dataclass
class CalibrationFit:
    """Fitted profile plus the evidence for each parameter."""

    device_id: str
    efficiency: Efficiency
    params: dict[str, ParamFit]
    warnings: list[str]
    skipped: dict[str, str]
    checks: list[dict[str, Any]]

    def report(self) -> dict[str, Any]:
        return {"device_id": self.device_id, "fitted": {k: v.to_dict() for k, v in self.params.items()},
                "not_fitted": self.skipped, "warnings": self.warnings, "checks": self.checks}


# -- a small bounded minimiser ------------------------------------------------------------------
def grid_minimise(loss: Callable[..., np.ndarray], bounds: Sequence[tuple[float, float, bool]],
                  points: int = GRID_POINTS, rounds: int = ZOOM_ROUNDS) -> tuple[list[float], float]:
    """Minimise ``loss(*params)`` (vectorised over broadcast parameter arrays) within ``bounds``.

    ``bounds`` holds (low, high, log_scale) per parameter; log-scaled parameters are searched on
    a log grid (a low bound of 0 is searched as log(1 + x)). Each round zooms to the four grid
    cells around the best point, or slides the window when the best point lies on its edge.
    """
    def to_u(v: float, lo: float, log: bool) -> float:
        if not log:
            return v
        return math.log(v) if lo > 0 else math.log1p(v)

    def from_u(u: np.ndarray, lo: float, log: bool) -> np.ndarray:
        if not log:
            return u
        return np.exp(u) if lo > 0 else np.expm1(u)

    spans = [(to_u(lo, lo, log), to_u(hi, lo, log)) for lo, hi, log in bounds]
    limits = list(spans)
    best_u = [0.5 * (a + b) for a, b in spans]
    best_loss = math.inf
    for _ in range(rounds):
        axes = [np.linspace(a, b, points) for a, b in spans]
        grids = np.meshgrid(*axes, indexing="ij")
        vals = [from_u(g, lo, log) for g, (lo, _hi, log) in zip(grids, bounds, strict=True)]
        total = np.asarray(loss(*vals), dtype=float)
        idx = np.unravel_index(int(np.nanargmin(total)), total.shape)
        if total[idx] <= best_loss:
            best_loss = float(total[idx])
            best_u = [float(g[idx]) for g in grids]
        new_spans = []
        for axis, ((a, b), u, (lo_u, hi_u)) in enumerate(zip(spans, best_u, limits, strict=True)):
            width = b - a
            at_edge = idx[axis] in (0, points - 1) and not (u <= lo_u or u >= hi_u)
            # shrink around the best point, or slide the window along when the best lies on its
            # edge (a long valley, e.g. fraction and half-dimension trading off)
            half = width / 2 if at_edge else 4 * width / (points - 1)
            new_spans.append((max(lo_u, u - half), min(hi_u, u + half)))
        spans = new_spans
    values = [float(from_u(np.asarray(u), lo, log)) for u, (lo, _hi, log) in zip(best_u, bounds, strict=True)]
    return values, best_loss


# -- vectorised roofline (the same formula as perf.roofline.op_time) ----------------------------
def roofline_time(flops: np.ndarray, nbytes: np.ndarray, peak: np.ndarray, fraction: Any, bw: float,
                  overhead: float) -> np.ndarray:
    return np.maximum(flops / (peak * fraction), nbytes / bw) + overhead


def _rms(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.sqrt(np.mean((np.log(pred) - np.log(meas)) ** 2)))


def _log_loss(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    """Sum of absolute log errors: a timing disturbed by other work on the machine (a repeat
    several times too slow) moves an L1 fit far less than a least-squares one."""
    return np.sum(np.abs(np.log(pred) - np.log(meas)), axis=-1)


# -- the fit ------------------------------------------------------------------------------------
def fit_efficiency(device: Device, points: Sequence[Point], *, main_dtype: str, base: Efficiency | None = None,
                   assumptions: Assumptions | None = None) -> CalibrationFit:
    """Fit every parameter the points allow; the rest keep ``base`` (default: the device's
    efficiency under ``assumptions`` without calibration, built-in when None)."""
    uncalibrated = (assumptions or default_assumptions()).without_calibration()
    base = base or uncalibrated.efficiency(device)
    fitted: dict[str, ParamFit] = {}
    skipped: dict[str, str] = {}
    warnings: list[str] = []
    values: dict[str, float] = {}

    by_kind: dict[str, list[Point]] = {}
    for p in points:
        if p.time_s > 0 and math.isfinite(p.time_s):
            by_kind.setdefault(p.kind, []).append(p)

    # 1. per-operation overhead. ``eager``: the host's issue time per planner operation (the tiny model's eager
    # decode step, else tiny single operations), the overhead of every eagerly timed point below; on a CPU
    # (synchronous) also the planners' per-kernel cost. ``graph``: the same step replayed as a device graph,
    # what each kernel costs the device itself: the planners' ``kernel_overhead_s`` on accelerators.
    dispatch = by_kind.get("dispatch", [])
    over = by_kind.get("overhead", [])
    graph = by_kind.get("dispatch_graph", [])
    eager = statistics.median(p.time_s for p in (dispatch or over)) if (dispatch or over) else None
    eager_basis = "tiny-model decode step per planner operation" if dispatch else "median time of tiny operations"
    if graph:
        values["kernel_overhead_s"] = statistics.median(p.time_s for p in graph)
        fitted["kernel_overhead_s"] = ParamFit(
            values["kernel_overhead_s"], base.kernel_overhead_s, len(graph), None,
            "tiny-model decode step replayed as a device graph, per planner operation"
            + (f" (eager: {eager / units.US:.1f} µs, the host's issue time)" if eager is not None else ""))
    elif eager is not None and device.kind.upper() != "CPU":
        skipped["kernel_overhead_s"] = (f"the eager {eager_basis} ({eager / units.US:.1f} µs) is the host's issue time, "
                                        "not the device's per-kernel overhead; no graph-replay measurement in these runs")
    elif eager is not None:
        values["kernel_overhead_s"] = eager
        fitted["kernel_overhead_s"] = ParamFit(eager, base.kernel_overhead_s, len(dispatch or over), None, eager_basis)
    else:
        skipped["kernel_overhead_s"] = "no overhead measurements"
    overhead = eager if eager is not None else values.get("kernel_overhead_s", base.kernel_overhead_s)

    # 1b. MoE dispatcher sync: the measured round trip (a tiny reduction read by the host) plus the eager
    # operations the host issues after it, each at the measured time of a tiny single operation (what the
    # host spends to issue one; the per-planner-op figure above when none was timed)
    syncs = by_kind.get("host_sync", [])
    if syncs:
        per_op = statistics.median(p.time_s for p in over) if over else overhead
        values["host_sync_s"] = statistics.median(p.time_s for p in syncs) + MOE_POST_SYNC_OPS * per_op
        fitted["host_sync_s"] = ParamFit(values["host_sync_s"], base.host_sync_s, len(syncs), None,
                                         f"host-device round trip + {MOE_POST_SYNC_OPS} eager operations")
    else:
        skipped["host_sync_s"] = "no host_sync measurement (bench runs before 0.4.6)"

    # 2. memory bandwidth: STREAM kernels and decode attention (reading the KV cache) are the two
    # kinds of memory-bound work the planner times with memory_bw_fraction. Each family gives the
    # median of its achieved bandwidths; the fraction is their geometric mean (the least-squares
    # fit on log time with both families weighted equally) over the catalog peak.
    stream = by_kind.get("membw", [])
    if stream:
        largest = max(p.bytes for p in stream)
        big = [p for p in stream if p.bytes >= 0.5 * largest]
        decode_attn = [p for p in by_kind.get("attention", []) if p.params.get("phase") == "decode"]
        stream_bw = statistics.median(p.bytes / p.time_s for p in big)
        family_bw = [stream_bw]
        if decode_attn:
            family_bw.append(statistics.median(p.bytes / max(p.time_s - overhead, 0.5 * p.time_s) for p in decode_attn))
        achieved = math.exp(statistics.mean(math.log(b) for b in family_bw))
        peak_bw = device.memory_bandwidth
        if achieved > peak_bw:
            warnings.append(f"measured memory bandwidth {achieved / 1e9:.1f} GB/s exceeds the catalog peak "
                            f"{peak_bw / 1e9:.1f} GB/s of {device.id}; fraction capped at 1")
        frac = min(1.0, achieved / peak_bw)
        fam_points = big + decode_attn
        pred = np.array([p.bytes / (peak_bw * frac) + overhead for p in fam_points])
        meas = np.array([p.time_s for p in fam_points])
        values["memory_bw_fraction"] = frac
        basis = (f"{achieved / 1e9:.1f} GB/s achievable: STREAM median {stream_bw / 1e9:.1f} GB/s"
                 + (f", decode attention median {family_bw[1] / 1e9:.1f} GB/s" if decode_attn else ""))
        fitted["memory_bw_fraction"] = ParamFit(frac, base.memory_bw_fraction, len(fam_points), _rms(pred, meas), basis)
    else:
        skipped["memory_bw_fraction"] = "no STREAM measurements"
    bw = device.memory_bandwidth * values.get("memory_bw_fraction", base.memory_bw_fraction)

    # 3. GEMM efficiency of the main precision
    gemms = [p for p in by_kind.get("gemm", []) if p.dtype == main_dtype]
    if len(gemms) >= 2:
        F = np.array([p.flops for p in gemms])
        B = np.array([p.bytes for p in gemms])
        D = np.array([p.min_dim for p in gemms])
        T = np.array([p.time_s for p in gemms])
        P = np.array([compute_peak(device, p.dtype) for p in gemms])

        def gemm_loss(f: np.ndarray, h: np.ndarray) -> np.ndarray:
            frac = f[..., None] / (1.0 + h[..., None] / D)
            return _log_loss(roofline_time(F, B, P, frac, bw, overhead), T)

        (f, h), _ = grid_minimise(gemm_loss, [(*FRACTION_BOUNDS, True), (*HALF_DIM_BOUNDS, True)])
        best_rate = max(p.flops / p.time_s for p in gemms)
        if best_rate > compute_peak(device, main_dtype):
            warnings.append(f"measured {main_dtype} GEMM rate {best_rate / 1e12:.2f} TFLOP/s exceeds the catalog peak of "
                            f"{device.id}; gemm_peak_fraction capped at 1")
        pred = roofline_time(F, B, P, f / (1.0 + h / D), bw, overhead)
        values["gemm_peak_fraction"], values["gemm_half_dim"] = f, h
        basis = f"{len(gemms)} {main_dtype} GEMMs, best {best_rate / 1e12:.3g} TFLOP/s"
        fitted["gemm_peak_fraction"] = ParamFit(f, base.gemm_peak_fraction, len(gemms), _rms(pred, T), basis)
        fitted["gemm_half_dim"] = ParamFit(h, base.gemm_half_dim, len(gemms), _rms(pred, T), basis)
    else:
        skipped["gemm_peak_fraction"] = skipped["gemm_half_dim"] = f"fewer than 2 {main_dtype} GEMM measurements"
    f = values.get("gemm_peak_fraction", base.gemm_peak_fraction)
    h = values.get("gemm_half_dim", base.gemm_half_dim)

    # 4. low-precision GEMMs: FP8 where measured (what FP8 training and serving run), else INT8. One format's
    # library path can be far slower than the tensor cores allow (PyTorch's torch._int_mm on Hopper reached 6%
    # of the INT8 peak where torch._scaled_mm reached 72% of FP8's, H200 run of 2026-11-27): pooled, it would drag
    # the fraction of the other down, so the second format is checked against the fit instead.
    all_low = [p for p in by_kind.get("gemm", []) if p.dtype in LOW_PRECISION]
    low_dtype = "fp8" if any(p.dtype == "fp8" for p in all_low) else "int8"
    low = [p for p in all_low if p.dtype == low_dtype]
    other_low = [p for p in all_low if p.dtype != low_dtype]
    if low:
        F = np.array([p.flops for p in low])
        B = np.array([p.bytes for p in low])
        D = np.array([p.min_dim for p in low])
        T = np.array([p.time_s for p in low])
        P = np.array([compute_peak(device, p.dtype) for p in low])

        def low_loss(c: np.ndarray) -> np.ndarray:
            frac = c[..., None] * f / (1.0 + h / D)
            return _log_loss(roofline_time(F, B, P, frac, bw, overhead), T)

        (c,), _ = grid_minimise(low_loss, [(*FRACTION_BOUNDS, True)])
        pred = roofline_time(F, B, P, c * f / (1.0 + h / D), bw, overhead)
        values["low_precision_factor"] = c
        fitted["low_precision_factor"] = ParamFit(c, base.low_precision_factor, len(low), _rms(pred, T),
                                                  f"{len(low)} GEMMs in {low_dtype}")
        if other_low:
            big = [p for p in other_low if p.flops and p.min_dim >= 1024] or other_low
            ratio = statistics.median(
                p.time_s / float(roofline_time(np.array([p.flops]), np.array([p.bytes]),
                                               np.array([compute_peak(device, p.dtype)]), c * f / (1.0 + h / p.min_dim),
                                               bw, overhead)[0]) for p in big)
            if ratio > 2.0 or ratio < 0.5:
                other = other_low[0].dtype
                warnings.append(f"{other} GEMMs ran {ratio:.1f}x the time the {low_dtype}-fitted low_precision_factor "
                                f"predicts (median of {len(big)}): {other}'s library path on this machine is not "
                                f"{low_dtype}'s; the factor is fitted on {low_dtype} only")
    else:
        skipped["low_precision_factor"] = "no fp8/int8 GEMM measurements"
    skipped["fp4_factor"] = "the bench times no FP4 GEMM: the family value stays"
    skipped["fa1_factor"] = "the bench times no FlashAttention-1-generation kernel: the default stays"

    # 5. attention (causal prefill: the compute-bound case), one fraction per fused-attention kernel
    prefill = [p for p in by_kind.get("attention", []) if p.params.get("phase") == "prefill"]
    lpf = values.get("low_precision_factor", base.low_precision_factor)
    for param, kernels, what in ATTENTION_FITS:
        attn = [p for p in prefill if p.params.get("kernel", "sdpa") in kernels]
        if not attn:
            skipped[param] = f"no prefill attention measurements ({what})"
            continue
        F = np.array([p.flops for p in attn])
        B = np.array([p.bytes for p in attn])
        T = np.array([p.time_s for p in attn])
        P = np.array([compute_peak(device, p.dtype) * (lpf if p.dtype in LOW_PRECISION else 1.0)
                      * attention_head_dim_factor(float(p.params.get("head_dim", 128)), p.dtype) for p in attn])

        def attn_loss(a: np.ndarray, F: np.ndarray = F, B: np.ndarray = B, P: np.ndarray = P,
                      T: np.ndarray = T) -> np.ndarray:
            return _log_loss(roofline_time(F, B, P, a[..., None], bw, overhead), T)

        (a,), _ = grid_minimise(attn_loss, [(*FRACTION_BOUNDS, True)])
        pred = roofline_time(F, B, P, a, bw, overhead)
        values[param] = a
        default = getattr(base, param)
        fitted[param] = ParamFit(a, default if default is not None else base.attention_peak_fraction, len(attn),
                                 _rms(pred, T), f"{len(attn)} causal prefill attention shapes ({what})")
    if any(p.params.get("kernel", "sdpa") == "sdpa" for p in prefill) and device.vendor == "NVIDIA" and \
            device.architecture in SDPA_FLASH_DEFAULT_ARCHITECTURES:
        warnings.append(f"prefill attention on {device.architecture} measured with PyTorch SDPA's own kernel choice "
                        "(its flash backend, FlashAttention-2's code, from PyTorch 2.5.1 on) was fitted as the native "
                        "attention fraction; `xpuplan bench` of this version times cuDNN's and FlashAttention-2's "
                        "kernels apart (attention_peak_fraction, attention_fa2_peak_fraction)")

    # 6. collectives
    _fit_collectives(device, by_kind.get("collective", []), base, values, fitted, skipped, warnings,
                     uncalibrated)

    eff = base.merged(values, f"calibration fit for {device.id}")
    checks = [_check(p, device, eff) for p in points if p.kind in ("gemm", "attention", "membw")]
    return CalibrationFit(device.id, eff, fitted, warnings, skipped, checks)


#: nccl-tests bus-bandwidth factor per collective for n ranks (busbw = algbw x factor).
def bus_factor(op: str, n: int) -> float:
    if op == "all_reduce":
        return 2.0 * (n - 1) / n
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0  # send_recv, broadcast, reduce


def collective_time(op: str, n_bytes: Any, n_ranks: Any, bus_bw: Any, latency_s: Any) -> Any:
    """Perf's alpha-beta time of one flat collective (``perf.collectives``), vectorised."""
    from xpuplan.perf import collectives as pc

    if op == "all_reduce":
        return pc.time_all_reduce_s(n_bytes, n_ranks, bus_bw, latency_s)
    if op == "all_gather":
        return pc.time_all_gather_s(n_bytes, n_ranks, bus_bw, latency_s)
    if op == "reduce_scatter":
        return pc.time_reduce_scatter_s(n_bytes, n_ranks, bus_bw, latency_s)
    if op == "all_to_all":
        return pc.time_all_to_all_s(n_bytes, n_ranks, bus_bw, latency_s)
    return pc.time_p2p_s(n_bytes, bus_bw, latency_s)


def collective_time_multinode(op: str, n_bytes: Any, local: Any, nodes: Any, intra_bw: float, intra_lat: float,
                              inter_bw: Any, inter_lat: Any) -> Any:
    """Perf's hierarchical time of a collective spanning ``nodes`` scale-up domains of ``local`` ranks;
    send/recv between nodes is one flat transfer over the scale-out link."""
    from xpuplan.perf import collectives as pc

    if op in ("all_reduce", "all_gather", "reduce_scatter"):
        return pc.time_hierarchical_s(op, n_bytes, local, nodes, intra_bw, intra_lat, inter_bw, inter_lat)
    if op == "all_to_all":
        return pc.time_hierarchical_all_to_all_s(n_bytes, local, nodes, intra_bw, intra_lat, inter_bw, inter_lat)
    return pc.time_p2p_s(n_bytes, inter_bw, inter_lat)


#: Collectives the fit understands (others, e.g. broadcast, are stored but not fitted).
FITTED_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")


def _predict_collectives(fr: Any, lat: Any, *, groups: list[Any], n_points: int, link: float, scope: str,
                         intra_bw: float, intra_lat: float) -> np.ndarray:
    fr_a, lat_a = np.asarray(fr, dtype=float), np.asarray(lat, dtype=float)
    out = np.zeros(fr_a.shape + (n_points,))
    bw_a, l_a = link * fr_a[..., None], lat_a[..., None]
    for op, idx, S, N, local, nodes in groups:
        if scope == "scale_up":
            out[..., idx] = collective_time(op, S, N, bw_a, l_a)
        else:
            out[..., idx] = collective_time_multinode(op, S, local, nodes, intra_bw, intra_lat, bw_a, l_a)
    return out


def _fit_collectives(device: Device, points: list[Point], base: Efficiency, values: dict[str, float],
                     fitted: dict[str, ParamFit], skipped: dict[str, str], warnings: list[str],
                     assumptions: Assumptions) -> None:
    """Scale-up parameters from single-node runs (flat collectives), then scale-out parameters from
    multi-node runs (perf's hierarchical model with the scale-up parameters just fitted)."""
    up_link = device.scale_up_bandwidth or device.pcie_bandwidth
    for scope, link, frac_key, lat_key in (
        ("scale_up", up_link, "scale_up_bw_fraction", "scale_up_latency_s"),
        ("scale_out", device.scale_out_bandwidth, "scale_out_bw_fraction", "scale_out_latency_s"),
    ):
        label = scope.replace("_", "-")
        pts = [p for p in points if p.params.get("scope") == scope and int(p.params.get("n_ranks", 0)) > 1
               and p.params.get("op") in FITTED_COLLECTIVES]
        if not pts:
            skipped[frac_key] = skipped[lat_key] = f"no {label} collective measurements"
            continue
        if not link:
            skipped[frac_key] = skipped[lat_key] = f"{device.id} has no {label} link bandwidth in the catalog"
            continue
        T = np.array([p.time_s for p in pts])
        ops = sorted({p.params["op"] for p in pts})
        groups = []
        for op in ops:
            idx = np.array([i for i, p in enumerate(pts) if p.params["op"] == op])
            S = np.array([float(pts[i].params["size_bytes"]) for i in idx])
            N = np.array([float(pts[i].params["n_ranks"]) for i in idx])
            local = np.array([float(pts[i].params.get("local_ranks") or pts[i].params["n_ranks"]) for i in idx])
            nodes = np.array([float(pts[i].params.get("nodes") or 1) for i in idx])
            groups.append((op, idx, S, N, local, nodes))
        defaults = device_links(device, base, assumptions=assumptions).scale_up
        intra_bw = (up_link or link) * values.get("scale_up_bw_fraction", defaults.bus_bw_fraction)
        intra_lat = values.get("scale_up_latency_s", defaults.latency_s)

        predict = functools.partial(_predict_collectives, groups=groups, n_points=len(pts), link=link, scope=scope,
                                    intra_bw=intra_bw, intra_lat=intra_lat)
        (fr, lat), _ = grid_minimise(lambda f_, l_, _p=predict, _t=T: _log_loss(_p(f_, l_), _t),
                                     [(*FRACTION_BOUNDS, True), (*LATENCY_BOUNDS, True)])
        pred = predict(fr, lat)
        large = [float(p.params["size_bytes"]) * bus_factor(p.params["op"], int(p.params["n_ranks"])) / p.time_s
                 for p in pts if float(p.params["size_bytes"]) >= LARGE_MESSAGE_BYTES]
        if large and max(large) > link:
            warnings.append(f"{label} bus bandwidth {max(large) / 1e9:.0f} GB/s exceeds the catalog link "
                            f"{link / 1e9:.0f} GB/s (in-network reduction such as NVLS?); fraction capped at 1")
        basis = f"{len(pts)} collective timings ({', '.join(ops)})"
        values[frac_key], values[lat_key] = fr, lat
        fitted[frac_key] = ParamFit(fr, getattr(base, frac_key), len(pts), _rms(pred, T), basis)
        fitted[lat_key] = ParamFit(lat, getattr(base, lat_key), len(pts), _rms(pred, T), basis)


def _check(p: Point, device: Device, eff: Efficiency) -> dict[str, Any]:
    """Measured vs the planner's own ``op_time`` with the fitted profile."""
    op_class = {"gemm": "gemm", "attention": "attention", "membw": "elementwise"}[p.kind]
    flops = p.flops if p.kind != "membw" else 0.0
    if p.kind == "attention" and p.params.get("kernel") == "fa2":
        eff = eff.for_attention_kernel("fa2")  # FlashAttention-2's code: its own fraction where the device sets one
    t = op_time(OpCost(p.name, op_class, flops, p.bytes, p.min_dim, float(p.params.get("head_dim", 128))),  # type: ignore[arg-type]
                device, p.dtype, eff)
    return {"name": p.name, "measured_s": p.time_s, "predicted_s": t.time_s, "error": t.time_s / p.time_s - 1.0}


def point_from_measurement(m: Any) -> Point | None:
    """A fit point from a stored :class:`~xpuplan.store.models.Measurement` (None if not usable)."""
    params = dict(m.params or {})
    if m.kind in ("gemm", "attention", "membw", "overhead", "dispatch", "dispatch_graph", "host_sync"):
        if not m.time_s:
            return None
        min_dim = math.inf
        if m.kind == "gemm":
            min_dim = float(min(params["m"], params["n"], params["k"]))
        elif m.kind == "attention":
            min_dim = float(min(params.get("q_len", 1), params.get("kv_len", 1)))
        return Point(m.kind, m.name, m.dtype or "fp32", float(m.time_s), float(m.flops or 0.0), float(m.bytes or 0.0),
                     min_dim, params)
    if m.kind == "collective" and m.time_s and "size_bytes" in params and "op" in params:
        return Point("collective", m.name, m.dtype or "fp32", float(m.time_s), 0.0, float(params["size_bytes"]),
                     math.inf, params)
    return None


# -- from the store -----------------------------------------------------------------------------
@dataclass
class CalibrationResult:
    calibration_id: int
    device_id: str
    run_ids: list[int]
    fit: CalibrationFit


#: Run kinds whose measurements calibrate fits.
BENCH_KINDS = ("bench",)
COLLECTIVE_KINDS = ("collectives", "import-nccl-tests", "import-hccl-test")


def select_runs(store: Any, device_id: str | None, refs: Sequence[str]) -> tuple[str, list[Any]]:
    """The runs to fit: those named (``--from``), else the newest benchmark run and the newest
    collectives run stored for the device. Returns the device id and the runs."""
    from xpuplan.catalog import load_catalog
    from xpuplan.errors import UserInputError
    from xpuplan.store.records import count_measurements, list_runs, resolve_run

    cat = load_catalog()
    dev = cat.resolve(device_id) if device_id else None
    if refs:
        runs = [resolve_run(store, r) for r in refs]
        for run in runs:
            if run.kind not in BENCH_KINDS + COLLECTIVE_KINDS:
                raise UserInputError(f"run {run.id} is a {run.kind} run; calibrate fits benchmark and collective runs",
                                     field="from")
            if run.device_id is None:
                raise UserInputError(f"run {run.id} has no catalog device ({run.device_name!r}); re-run it with --device-id",
                                     field="from")
            dev = dev or run.device_id
            if run.device_id != dev:
                raise UserInputError(f"run {run.id} measured {run.device_id}, not {dev}", field="from")
        assert dev is not None
        return dev, runs
    if dev is None:
        raise UserInputError("give --device ID or --from RUN", field="device")
    chosen = []
    for kinds in (BENCH_KINDS, COLLECTIVE_KINDS):
        candidates = [r for k in kinds for r in list_runs(store, kind=k, device_id=dev)]
        candidates.sort(key=lambda r: (r.started_at, r.id), reverse=True)
        counts = count_measurements(store, [r.id for r in candidates])
        usable = [r for r in candidates if counts.get(r.id, 0) > 0]
        if usable:
            chosen.append(usable[0])
    if not chosen:
        raise UserInputError(f"no stored measurements for {dev}; run `xpuplan bench run` (or import nccl-tests logs) first",
                             field="device")
    return dev, chosen


def calibrate_from_store(store: Any, device_id: str | None, refs: Sequence[str] = (), *, save: bool = True,
                         assumptions: Assumptions | None = None) -> CalibrationResult:
    """Fit a profile from stored runs and (unless ``save`` is False) store it. Parameters without
    measurements keep the device's values under ``assumptions`` (built-in when None)."""
    from xpuplan.catalog import load_catalog
    from xpuplan.errors import UserInputError
    from xpuplan.store.calibrations import save_calibration
    from xpuplan.store.records import run_measurements

    dev_id, runs = select_runs(store, device_id, refs)
    device = load_catalog().get(dev_id)
    points: list[Point] = []
    main_dtype = "bf16"
    for run in runs:
        if run.kind == "bench":
            main_dtype = str((run.config or {}).get("dtype") or main_dtype)
        for m in run_measurements(store, run.id):
            p = point_from_measurement(m)
            if p is not None:
                points.append(p)
    if not points:
        raise UserInputError(f"runs {', '.join(str(r.id) for r in runs)} hold no measurements calibrate can use",
                             field="from")
    fit = fit_efficiency(device, points, main_dtype=main_dtype, assumptions=assumptions)
    run_ids = [r.id for r in runs]
    if not save:
        return CalibrationResult(0, dev_id, run_ids, fit)
    cal_id, eff = save_calibration(store, dev_id, fit.efficiency, run_ids=run_ids, report=fit.report())
    fit.efficiency = eff
    return CalibrationResult(cal_id, dev_id, run_ids, fit)
