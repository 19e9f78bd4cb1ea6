"""Roofline time of one operation: max(compute time, memory time) plus a fixed overhead.

Each ``cost_*`` function returns the FLOP and bytes an operation moves (pure arithmetic); the
``op_time`` function turns a cost into seconds on a device with its achievable efficiencies and
reports the arithmetic intensity and which bound applies (Williams et al. 2009).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from xpuplan.catalog.device import Device
from xpuplan.perf.efficiency import Efficiency, efficiency_for
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
    """A linear layer over ``tokens`` rows: weights may be stored narrower than activations."""
    if tokens <= 0 or d_in <= 0 or d_out <= 0:
        raise ValueError("tokens, d_in and d_out must be positive")
    b_act = bytes_per_element(dtype if dtype not in LOW_PRECISION else "bf16")
    b_w = bytes_per_element(weight_dtype or dtype)
    flops = 2.0 * tokens * d_in * d_out
    bytes_ = tokens * d_in * b_act + d_in * d_out * b_w + tokens * d_out * b_act
    return OpCost(f"linear {d_in}x{d_out}", "gemm", flops, bytes_, float(min(tokens, d_in, d_out)))


def cost_attention(
    batch: int, heads: int, q_len: int, kv_len: int, head_dim: int, *, causal: bool = True, dtype: str = "bf16",
    kv_heads: int | None = None, v_head_dim: int | None = None,
) -> OpCost:
    """Fused (flash) attention: 2·b·h·q·kv·(d_qk + d_v) FLOP (halved when causal over a square
    block); bytes = Q, K, V read once and O written once (no s² matrix in memory)."""
    kvh = kv_heads or heads
    dv = v_head_dim or head_dim
    frac = 0.5 if causal and q_len == kv_len and q_len > 1 else 1.0
    flops = 2.0 * batch * heads * q_len * kv_len * (head_dim + dv) * frac
    e = bytes_per_element(dtype)
    bytes_ = e * batch * (heads * q_len * (head_dim + dv) + kvh * kv_len * (head_dim + dv))
    return OpCost("attention", "attention", flops, bytes_, float(min(q_len, kv_len)))


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
    """Fraction of dense peak a GEMM whose smallest dimension is ``min_dim`` reaches."""
    frac = eff.gemm_peak_fraction / (1.0 + eff.gemm_half_dim / max(min_dim, 1e-9))
    if dtype in LOW_PRECISION:
        frac *= eff.low_precision_factor
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


def op_time(op: OpCost, device: Device, dtype: str = "bf16", eff: Efficiency | None = None) -> OpTime:
    """Seconds for ``op`` on ``device``: max(FLOP / achievable FLOP/s, bytes / achievable B/s) +
    fixed kernel overhead. Reports which bound applies and the arithmetic intensity."""
    e = eff or efficiency_for(device)
    peak = compute_peak(device, dtype)
    if op.op_class == "gemm":
        frac = gemm_efficiency(e, op.min_dim, dtype)
    elif op.op_class == "attention":
        frac = e.attention_peak_fraction * (e.low_precision_factor if dtype in LOW_PRECISION else 1.0)
    else:
        frac = e.gemm_peak_fraction
    achievable = peak * frac
    bw = device.memory_bandwidth * e.memory_bw_fraction
    t_c = op.flops / achievable
    t_m = op.bytes / bw
    t = max(t_c, t_m) + e.kernel_overhead_s
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
