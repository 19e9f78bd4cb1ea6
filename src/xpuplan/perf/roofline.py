"""Roofline time of one operation: max(compute time, memory time) plus a fixed overhead.

Each ``cost_*`` function returns the FLOP and bytes an operation moves (pure arithmetic); the
``op_time`` function turns a cost into seconds on a device with its achievable efficiencies and
reports the arithmetic intensity and which bound applies (Williams et al. 2009).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from xpuplan.catalog.assumptions import Assumptions, default_assumptions
from xpuplan.catalog.device import Device
from xpuplan.catalog.efficiency import Efficiency
from xpuplan.units import bytes_per_element

OpClass = Literal["gemm", "attention", "elementwise", "optimizer"]

LOW_PRECISION = ("fp8", "int8", "fp6", "fp4", "int4")


@dataclass(frozen=True)
class OpCost:
    """Work of one operation: FLOP and bytes read + written (device memory)."""

    name: str
    op_class: OpClass
    flops: float
    bytes: float
    min_dim: float = float("inf")  # smallest GEMM dimension (tile fill), inf when not a GEMM
    head_dim: float = 128.0  # attention: the query/key head dimension (attention_head_dim_factor); unused otherwise
    #: GEMMs: factor (>= 1) on the compute time for a short reduction dimension (perf.ops.short_k_factor: the
    #: expert down projection of fine-grained MoE layers); 1 for every other op
    k_factor: float = 1.0

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte."""
        return self.flops / self.bytes if self.bytes else float("inf")


def cost_gemm(m: int, n: int, k: int, dtype: str = "bf16", out_dtype: str | None = None, name: str = "gemm") -> OpCost:
    """C[m,n] = A[m,k]·B[k,n]: 2·m·n·k FLOP; reads A and B, writes C once (ideal reuse)."""
    for field, v in (("m", m), ("n", n), ("k", k)):
        if v <= 0:
            raise ValueError(f"GEMM dimension {field} must be positive (got {v})")
    b_in = bytes_per_element(dtype)
    b_out = bytes_per_element(out_dtype or ("bf16" if dtype in LOW_PRECISION else dtype))
    return OpCost(name, "gemm", 2.0 * m * n * k, (m * k + k * n) * b_in + m * n * b_out, float(min(m, n, k)))


def cost_linear(tokens: int, d_in: int, d_out: int, dtype: str = "bf16", weight_dtype: str | None = None) -> OpCost:
    """A linear layer over ``tokens`` rows: weights may be stored narrower than activations.
    ``tokens`` may be an array (many batch sizes at once): the cost's fields are then arrays."""
    if (np.any(tokens <= 0) if isinstance(tokens, np.ndarray) else tokens <= 0) or d_in <= 0 or d_out <= 0:
        raise ValueError("tokens, d_in and d_out must be positive")
    b_act = bytes_per_element(dtype if dtype not in LOW_PRECISION else "bf16")
    b_w = bytes_per_element(weight_dtype or dtype)
    flops = 2.0 * tokens * d_in * d_out
    bytes_ = tokens * d_in * b_act + d_in * d_out * b_w + tokens * d_out * b_act
    return OpCost(f"linear {d_in}x{d_out}", "gemm", flops, bytes_, _min_dim(tokens, d_in, d_out))


def cost_attention(
    batch: int, heads: int, q_len: int, kv_len: int, head_dim: int, *, causal: bool = True, dtype: str = "bf16",
    kv_heads: int | None = None, v_head_dim: int | None = None,
) -> OpCost:
    """Fused (flash) attention: 2·b·h·q·kv·(d_qk + d_v) FLOP (halved when causal over a square
    block); bytes = Q, K, V read once and O written once (no s² matrix in memory). ``batch``,
    ``q_len`` and ``kv_len`` may be arrays."""
    kvh = kv_heads or heads
    dv = v_head_dim or head_dim
    frac: Any
    if isinstance(q_len, np.ndarray) or isinstance(kv_len, np.ndarray):
        frac = np.where(causal & (np.asarray(q_len) == kv_len) & (np.asarray(q_len) > 1), 0.5, 1.0)
    else:
        frac = 0.5 if causal and q_len == kv_len and q_len > 1 else 1.0
    flops = 2.0 * batch * heads * q_len * kv_len * (head_dim + dv) * frac
    e = bytes_per_element(dtype)
    bytes_ = e * batch * (heads * q_len * (head_dim + dv) + kvh * kv_len * (head_dim + dv))
    return OpCost("attention", "attention", flops, bytes_, _min_dim(q_len, kv_len),  # arrays when given arrays
                  float(head_dim))


#: A fused attention kernel's softmax exponentials, in head dimensions: the forward does 4·d matmul FLOP per
#: score and one exponential on the special-function units, so its rate is R / (1 + K/d) with K = R_matmul /
#: (4·R_exp). FlashAttention-3 on an H100 SXM5 in BF16 (Shah et al. 2024, arXiv 2407.08608, Fig. 5, forward,
#: 16K tokens) runs 497 / 648 / 756 TFLOP/s at head dimensions 64 / 128 / 256: the first two give K = 56 and
#: R = 931 TFLOP/s, which predicts 764 at 256; 4·56 FLOP / 931 TFLOP/s is one exponential per score at
#: 4.2e12 per second, the H100's 132 SMs x 16 MUFU ex2 per clock x 1.83 GHz = 3.9e12. FP8 doubles the matmul
#: rate and not the exponentials' (K = 112): that predicts FA3's FP8 forward ratio at 64 / 256 as 0.523, measured
#: 613 / 1,171 = 0.523. The backward runs 10·d matmul FLOP per score against one recomputed exponential: K x 4/10.
ATTENTION_EXP_HEAD_DIM: float = 56.0
#: The head dimension the attention fractions were calibrated at (every calibration model has 128).
ATTENTION_REFERENCE_HEAD_DIM: float = 128.0


def attention_head_dim_factor(head_dim: float, dtype: str = "bf16", *, backward: bool = False) -> float:
    """Share of the attention fraction (calibrated at head dimension 128) a fused attention kernel keeps at
    ``head_dim``: (1 + K/128) / (1 + K/d) with K = :data:`ATTENTION_EXP_HEAD_DIM` (doubled for 8-bit and narrower
    inputs, x 0.4 for the backward), at most 1 (wider heads are not credited beyond the calibration: cuDNN's
    forward stays at 581-595 TFLOP/s from 128 to 256)."""
    k = ATTENTION_EXP_HEAD_DIM * (2.0 if dtype in LOW_PRECISION else 1.0) * (0.4 if backward else 1.0)
    return min(1.0, (1.0 + k / ATTENTION_REFERENCE_HEAD_DIM) / (1.0 + k / max(float(head_dim), 1.0)))


def _min_dim(*dims: float) -> float:
    """Smallest dimension (a float; an array when any dimension is one)."""
    if any(isinstance(d, np.ndarray) for d in dims):
        out = np.asarray(dims[0], dtype=float)
        for d in dims[1:]:
            out = np.minimum(out, d)
        return out  # type: ignore[return-value]
    return float(min(dims))


def cost_elementwise(n_elements: float, *, flops_per_element: float = 1.0, reads: int = 1, writes: int = 1,
                     dtype: str = "bf16", name: str = "elementwise") -> OpCost:
    """Pointwise ops (ReLU, GeLU, residual add, norms): few FLOP per element, bytes dominate."""
    e = bytes_per_element(dtype)
    return OpCost(name, "elementwise", flops_per_element * n_elements, (reads + writes) * n_elements * e)


#: Adam step traffic per parameter: read fp32 master, m, v and the gradient (4 B each for fp32
#: grads, 2 for bf16), write master, m, v and the bf16 working copy: 16 + g read, 12 + 2 written.
ADAM_FLOPS_PER_PARAM = 12.0


def cost_adam_step(n_params: float, grad_bytes: float = 4.0) -> OpCost:
    """Fused Adam(W) over ``n_params`` parameters (memory-bound)."""
    bytes_ = n_params * (12.0 + grad_bytes + 12.0 + 2.0)
    return OpCost("adam", "optimizer", ADAM_FLOPS_PER_PARAM * n_params, bytes_)


@dataclass(frozen=True)
class OpTime:
    """Roofline result for one operation on one device."""

    name: str
    compute_s: float
    memory_s: float
    overhead_s: float
    time_s: float
    bound: Literal["compute", "memory"]
    intensity_flop_per_byte: float
    ridge_flop_per_byte: float
    achieved_flops: float
    efficiency_used: float

    def to_dict(self) -> dict[str, float | str]:
        return asdict(self)


def gemm_efficiency(eff: Efficiency, min_dim: float, dtype: str) -> float:
    """Fraction of dense peak a GEMM whose smallest dimension is ``min_dim`` reaches: the bf16 fraction, times
    ``low_precision_factor`` for FP8/INT8/FP4, times ``fp4_factor`` more for block-scaled FP4."""
    floor = np.maximum(min_dim, 1e-9) if isinstance(min_dim, np.ndarray) else max(min_dim, 1e-9)
    frac = eff.gemm_peak_fraction / (1.0 + eff.gemm_half_dim / floor)
    if dtype in LOW_PRECISION:
        frac *= eff.low_precision_factor
    if dtype == "fp4":
        frac *= eff.fp4_factor
    return frac


def compute_peak(device: Device, dtype: str) -> float:
    """Dense peak for the compute dtype; precisions the device lacks run at its bf16 rate (e.g.
    fp8 on A100 or Ascend runs as bf16/fp16 GEMMs)."""
    if device.supports(dtype) or dtype in ("bf16", "fp16"):
        return device.peak_flops(dtype)
    if dtype in ("fp4", "fp6") and device.supports("fp8"):
        return device.peak_flops("fp8")
    if dtype == "int4" and device.supports("int8"):
        return device.peak_flops("int8")
    if dtype == "tf32" and device.supports("fp32"):
        return device.peak_flops("fp32")
    return device.peak_flops("bf16")


def op_seconds(op: OpCost, device: Device, dtype: str, eff: Any) -> tuple[Any, Any, Any, Any]:
    """The roofline of one op, over arrays alike: (compute s, memory s, time s incl. the kernel
    overhead, fraction of peak used). ``op``'s FLOP/bytes/min_dim and ``eff``'s fields
    (:class:`~xpuplan.catalog.efficiency.Efficiency`, or any object with the same attributes holding
    arrays, e.g. Monte Carlo samples) broadcast together. :func:`op_time` is this for one op."""
    peak = compute_peak(device, dtype)
    if op.op_class == "gemm":
        frac = gemm_efficiency(eff, op.min_dim, dtype)
    elif op.op_class == "attention":
        frac = (eff.attention_peak_fraction * (eff.low_precision_factor if dtype in LOW_PRECISION else 1.0)
                * attention_head_dim_factor(op.head_dim, dtype))
    else:
        frac = eff.gemm_peak_fraction
    t_c = op.flops / (peak * frac) * op.k_factor
    t_m = op.bytes / (device.memory_bandwidth * eff.memory_bw_fraction)
    arrays = isinstance(t_c, np.ndarray) or isinstance(t_m, np.ndarray)
    return t_c, t_m, (np.maximum(t_c, t_m) if arrays else max(t_c, t_m)) + eff.kernel_overhead_s, frac


def op_time(op: OpCost, device: Device, dtype: str = "bf16", eff: Efficiency | None = None, *,
            assumptions: Assumptions | None = None) -> OpTime:
    """Seconds for ``op`` on ``device``: max(FLOP / achievable FLOP/s, bytes / achievable B/s) +
    fixed kernel overhead. Reports which bound applies and the arithmetic intensity.

    Efficiencies: ``eff`` when given, else what ``assumptions`` (built-in when None) resolve for
    the device."""
    e = eff or (assumptions or default_assumptions()).efficiency(device)
    t_c, t_m, t, frac = op_seconds(op, device, dtype, e)
    t_c, t_m, t, frac = float(t_c), float(t_m), float(t), float(frac)
    achievable = compute_peak(device, dtype) * frac
    bw = device.memory_bandwidth * e.memory_bw_fraction
    return OpTime(
        name=op.name,
        compute_s=t_c,
        memory_s=t_m,
        overhead_s=e.kernel_overhead_s,
        time_s=t,
        bound="compute" if t_c >= t_m else "memory",
        intensity_flop_per_byte=op.intensity,
        ridge_flop_per_byte=achievable / bw,
        achieved_flops=op.flops / t if t > 0 else 0.0,
        efficiency_used=frac,
    )
