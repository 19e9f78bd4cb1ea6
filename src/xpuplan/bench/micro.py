"""Microbenchmarks: GEMM by precision and shape, memory bandwidth (STREAM copy/scale/add/triad),
scaled-dot-product attention for prefill and decode shapes, per-operation dispatch overhead and the
host-device synchronisation round trip.

Each benchmark is a :class:`BenchCase` whose ``run`` builds its tensors, times the operation and
returns a :class:`~xpuplan.store.records.Record` with the achieved rate and the FLOP and bytes of
perf's cost model (``cost_gemm``, ``cost_attention``), so calibration compares like with like.
torch is imported inside the functions only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from xpuplan import units
from xpuplan.bench.detect import Backend
from xpuplan.bench.timing import Timing, TimingPlan, time_fn
from xpuplan.perf.roofline import cost_attention, cost_gemm
from xpuplan.store.records import Record

#: torch dtype names for the precisions the GEMM sweep knows.
TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16",
                "fp8": "float8_e4m3fn", "int8": "int8"}

#: Scalar used by STREAM's scale and triad kernels (the value is irrelevant to the timing).
STREAM_SCALAR = 3.0

#: Operands of one timed case are copied until the copies span this many times the last-level
#: cache, and the copies are used in turn: a model's weights and KV cache come from memory,
#: not from a cache warmed by the previous iteration.
COLD_CACHE_FACTOR = 4
#: Cache size assumed when the backend does not report one (bytes).
DEFAULT_CACHE_BYTES = 64 * 2**20
#: At most this many operand copies (bounds set-up time and memory for tiny operands).
MAX_COPIES = 64


@dataclass(frozen=True)
class BenchCase:
    """One measurement to make: ``run`` returns the record, or None when the device cannot do it."""

    kind: str
    name: str
    run: Callable[[], Record | None]


@dataclass(frozen=True)
class Sweep:
    """What to measure on one backend (sizes chosen so a quick CPU run takes seconds)."""

    gemm_dtypes: tuple[str, ...]
    gemm_squares: tuple[int, ...]
    #: (m, n, k, origin) GEMMs taken from real model layers
    gemm_model_shapes: tuple[tuple[int, int, int, str], ...]
    stream_elements: int
    #: (batch, heads, seq, head_dim) causal prefill
    attention_prefill: tuple[tuple[int, int, int, int], ...]
    #: (batch, heads, kv_len, head_dim) one query token
    attention_decode: tuple[tuple[int, int, int, int], ...]
    attention_dtype: str
    #: fused-attention kernels the causal prefill shapes are timed with, each pinned through PyTorch's
    #: ``sdpa_kernel``: ``native`` (cuDNN's fused attention, what Transformer Engine runs on Hopper and later:
    #: ``attention_peak_fraction``) and ``fa2`` (SDPA's flash backend, FlashAttention-2's code:
    #: ``attention_fa2_peak_fraction``). Empty: whatever SDPA picks (``sdpa``, calibrated as native).
    attention_kernels: tuple[str, ...] = ()


def model_gemm_shapes(model_id: str, tokens: int, tp: int = 1) -> list[tuple[int, int, int, str]]:
    """The four linear layers of one Transformer layer of a preset model as (m, n, k, origin).

    Column-parallel layers (QKV, gate/up) split n over ``tp``; row-parallel ones (output, down)
    split k, as in perf's ``layer_ops``.
    """
    from xpuplan.models import get_model

    try:
        m = get_model(model_id)
    except (KeyError, ValueError):
        return []
    d = m.d_model
    qkv = (m.n_heads * m.qk_head_dim + 2 * m.kv_heads * m.qk_head_dim) // tp
    n_in = 2 if m.mlp == "gated" else 1
    ffn = m.ffn_dim // tp
    tag = f"{model_id}" + (f" tp{tp}" if tp > 1 else "")
    return [
        (tokens, qkv, d, f"{tag} qkv"),
        (tokens, d, m.n_heads * m.v_head_dim // tp, f"{tag} attn out"),
        (tokens, n_in * ffn, d, f"{tag} mlp up/gate"),
        (tokens, d, ffn, f"{tag} mlp down"),
    ]


def default_sweep(backend: Backend, *, quick: bool, bench_model_gemms: list[tuple[int, int, int, str]],
                  bench_model_attention: tuple[tuple[int, int, int, int], tuple[int, int, int, int]]) -> Sweep:
    """Sizes for the backend. ``bench_model_gemms`` are the small transformer's own GEMMs and
    ``bench_model_attention`` its (prefill, decode) attention shapes, so every operation of the
    measured model steps is also measured on its own."""
    prefill, decode = bench_model_attention
    if backend.is_accelerator:
        dtypes = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8") if backend.kind == "cuda" else ("fp32", "bf16", "fp16")
        squares = (512, 2048, 8192) if quick else (256, 512, 1024, 2048, 4096, 8192, 16384)
        real: list[tuple[int, int, int, str]] = []
        for tokens in ((16, 4096) if quick else (16, 256, 4096)):
            real += model_gemm_shapes("llama3-8b", tokens) + ([] if quick else model_gemm_shapes("llama3-70b", tokens, tp=8))
        return Sweep(
            gemm_dtypes=dtypes, gemm_squares=squares, gemm_model_shapes=tuple(real + bench_model_gemms),
            # 64 Mi / 256 Mi fp32 elements: 256 MiB / 1 GiB per array, far beyond any on-chip cache
            stream_elements=(1 << 26) if quick else (1 << 28),
            attention_prefill=((1, 32, 2048, 128), (1, 32, 8192, 128), prefill) if quick
            else ((1, 32, 1024, 128), (1, 32, 2048, 128), (1, 32, 4096, 128), (1, 32, 8192, 128), (8, 32, 2048, 128), prefill),
            attention_decode=((32, 32, 4096, 128), decode) if quick
            else ((8, 32, 2048, 128), (64, 32, 2048, 128), (32, 32, 8192, 128), decode),
            attention_dtype="bf16",
            attention_kernels=ATTENTION_KERNELS if backend.kind == "cuda" else (),
        )
    real = list(bench_model_gemms)
    if not quick:
        real += model_gemm_shapes("llama3-8b", 16)
    return Sweep(
        gemm_dtypes=("fp32", "bf16"),
        gemm_squares=(64, 256, 1024) if quick else (64, 128, 256, 512, 1024, 2048),
        gemm_model_shapes=tuple(real),
        # 32 Mi fp32 elements = 128 MiB per array: far beyond any CPU cache.
        stream_elements=(1 << 25) if quick else (1 << 26),
        attention_prefill=((1, 8, 256, 64), prefill) if quick else ((1, 8, 256, 64), (1, 8, 1024, 64), prefill),
        attention_decode=(decode,) if quick else ((4, 8, 2048, 64), (16, 8, 1024, 64), decode),
        attention_dtype="fp32",
    )


# -- helpers ------------------------------------------------------------------------------------
def _tdtype(torch: Any, name: str) -> Any:
    return getattr(torch, TORCH_DTYPES.get(name, name))


@contextlib.contextmanager
def _tf32(torch: Any, enabled: bool) -> Iterator[None]:
    """tf32 GEMMs are fp32 tensors with TF32 tensor-core math allowed (CUDA only)."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def _timing_params(t: Timing) -> dict[str, Any]:
    return t.to_dict()


def cold_copies(backend: Backend, operand_bytes: float) -> int:
    """How many copies of ``operand_bytes`` of operands to rotate through (see COLD_CACHE_FACTOR)."""
    span = COLD_CACHE_FACTOR * (backend.cache_bytes or DEFAULT_CACHE_BYTES)
    if operand_bytes >= span:
        return 1
    return int(min(MAX_COPIES, -(-span // max(operand_bytes, 1.0))))


def _rotating(fn_of: Callable[[int], object], copies: int) -> Callable[[], object]:
    """A no-argument callable that calls ``fn_of(i)`` for i = 0, 1, ... copies-1, 0, ..."""
    state = {"i": 0}

    def call() -> object:
        i = state["i"]
        state["i"] = (i + 1) % copies
        return fn_of(i)

    return call


# -- GEMM ---------------------------------------------------------------------------------------
def _gemm_fn(torch: Any, backend: Backend, dtype: str, m: int, n: int, k: int) -> Callable[[], object] | None:
    dev = backend.torch_device
    if dtype == "fp8":
        if backend.kind != "cuda" or not hasattr(torch, "_scaled_mm") or torch.cuda.get_device_capability() < (8, 9):
            return None
        if m % 16 or n % 16 or k % 16:
            return None
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # column-major, as _scaled_mm wants
        one = torch.ones((), device=dev)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    if dtype == "int8":
        if backend.kind != "cuda" or not hasattr(torch, "_int_mm") or m <= 16 or k % 8 or n % 8:
            return None
        a = torch.randint(-8, 8, (m, k), device=dev, dtype=torch.int8)
        b = torch.randint(-8, 8, (k, n), device=dev, dtype=torch.int8)
        return lambda: torch._int_mm(a, b)
    import torch.nn.functional as F

    td = _tdtype(torch, dtype)
    a = torch.randn(m, k, device=dev, dtype=td)
    w = torch.randn(n, k, device=dev, dtype=td)  # (out, in): the layout of nn.Linear weights
    copies = cold_copies(backend, (a.numel() + w.numel()) * a.element_size())
    pairs = [(a, w)] + [(a.clone(), w.clone()) for _ in range(copies - 1)]
    # Timed as a linear layer (A @ W^T), the way models run their GEMMs; the output is allocated
    # by each call as in a model (on CPUs that includes first-touch page faults of large
    # outputs; GPU caching allocators make it free).
    return _rotating(lambda i: F.linear(pairs[i][0], pairs[i][1]), copies)


def gemm_case(backend: Backend, dtype: str, m: int, n: int, k: int, plan: TimingPlan, origin: str) -> BenchCase:
    name = f"gemm {dtype} {m}x{n}x{k}" + (f" ({origin})" if origin != "square" else "")

    def run() -> Record | None:
        import torch

        with _tf32(torch, dtype == "tf32") if backend.kind == "cuda" else contextlib.nullcontext():
            try:
                fn = _gemm_fn(torch, backend, dtype, m, n, k)
            except (RuntimeError, TypeError, AttributeError):
                return None
            if fn is None:
                return None
            try:
                t = time_fn(fn, backend.synchronize, plan)
            except RuntimeError:  # the kernel is not implemented for this dtype/shape on this device
                return None
        cost = cost_gemm(m, n, k, dtype)
        return Record(kind="gemm", name=name, dtype=dtype, metric="tflops", value=cost.flops / t.best_s / units.TFLOPS,
                      unit="TFLOP/s", time_s=t.best_s, flops=cost.flops, bytes=cost.bytes,
                      params={"m": m, "n": n, "k": k, "origin": origin,
                              "copies": cold_copies(backend, cost.bytes), **_timing_params(t)})

    return BenchCase("gemm", name, run)


# -- memory bandwidth ---------------------------------------------------------------------------
#: STREAM kernels: name -> (arrays read, arrays written). Bytes follow STREAM's convention
#: (no write-allocate traffic counted).
STREAM_KERNELS: dict[str, tuple[int, int]] = {"copy": (1, 1), "scale": (1, 1), "add": (2, 1), "triad": (2, 1)}


def stream_case(backend: Backend, kernel: str, n: int, plan: TimingPlan) -> BenchCase:
    name = f"stream {kernel} {n * 4 / units.MiB:.0f} MiB fp32"

    def run() -> Record | None:
        import torch

        dev = backend.torch_device
        a = torch.rand(n, device=dev)
        b = torch.rand(n, device=dev)
        c = torch.empty(n, device=dev)
        fns: dict[str, Callable[[], object]] = {
            "copy": lambda: c.copy_(a),
            "scale": lambda: torch.mul(a, STREAM_SCALAR, out=c),
            "add": lambda: torch.add(a, b, out=c),
            "triad": lambda: torch.add(a, b, alpha=STREAM_SCALAR, out=c),
        }
        t = time_fn(fns[kernel], backend.synchronize, plan)
        reads, writes = STREAM_KERNELS[kernel]
        nbytes = (reads + writes) * n * 4.0
        return Record(kind="membw", name=name, dtype="fp32", metric="gb_per_s", value=nbytes / t.best_s / units.GB_PER_S,
                      unit="GB/s", time_s=t.best_s, flops=float(n if kernel != "copy" else 0), bytes=nbytes,
                      params={"kernel": kernel, "elements": n, **_timing_params(t)})

    return BenchCase("membw", name, run)


# -- attention ----------------------------------------------------------------------------------
#: The fused-attention kernels a CUDA run times separately (``Sweep.attention_kernels``) and the
#: ``torch.nn.attention.SDPBackend`` each is pinned to.
ATTENTION_KERNELS: tuple[str, ...] = ("native", "fa2")
_SDPA_BACKENDS = {"native": "CUDNN_ATTENTION", "fa2": "FLASH_ATTENTION"}


def _pinned_sdpa(torch: Any, kernel: str | None) -> Any:
    """A context pinning SDPA to ``kernel``'s backend (None: SDPA's own choice); None when this PyTorch
    cannot pin it (no ``torch.nn.attention.sdpa_kernel`` or no such backend)."""
    if kernel is None:
        return contextlib.nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None
    backend = getattr(SDPBackend, _SDPA_BACKENDS[kernel], None)
    return sdpa_kernel(backend) if backend is not None else None


def attention_case(backend: Backend, dtype: str, batch: int, heads: int, q_len: int, kv_len: int, head_dim: int,
                   plan: TimingPlan, kernel: str | None = None) -> BenchCase:
    """One SDPA shape; ``kernel`` (``native`` / ``fa2``) pins the fused-attention backend (the case is skipped
    where the backend cannot run the shape or this PyTorch cannot pin it), None lets SDPA choose."""
    phase = "decode" if q_len == 1 else "prefill"
    name = f"sdpa {phase} {dtype} b{batch} h{heads} q{q_len} kv{kv_len} d{head_dim}" + (f" {kernel}" if kernel else "")
    causal = q_len == kv_len and q_len > 1

    def run() -> Record | None:
        import torch
        import torch.nn.functional as F

        pin = _pinned_sdpa(torch, kernel)
        if pin is None:
            return None
        with pin:
            try:
                return _attention_record(torch, F)
            except RuntimeError:  # "No available kernel": this backend cannot run the shape here
                if kernel is None:
                    raise
                return None

    def _attention_record(torch: Any, F: Any) -> Record | None:
        dev = backend.torch_device
        td = _tdtype(torch, dtype)
        q = torch.randn(batch, heads, q_len, head_dim, device=dev, dtype=td)
        k = torch.randn(batch, heads, kv_len, head_dim, device=dev, dtype=td)
        v = torch.randn(batch, heads, kv_len, head_dim, device=dev, dtype=td)
        copies = cold_copies(backend, (q.numel() + k.numel() + v.numel()) * q.element_size())
        qkv = [(q, k, v)] + [(q.clone(), k.clone(), v.clone()) for _ in range(copies - 1)]
        fn = _rotating(lambda i: F.scaled_dot_product_attention(*qkv[i], is_causal=causal), copies)
        with torch.no_grad():
            t = time_fn(fn, backend.synchronize, plan)
        cost = cost_attention(batch, heads, q_len, kv_len, head_dim, causal=causal, dtype=dtype)
        return Record(kind="attention", name=name, dtype=dtype, metric="tflops", value=cost.flops / t.best_s / units.TFLOPS,
                      unit="TFLOP/s", time_s=t.best_s, flops=cost.flops, bytes=cost.bytes,
                      params={"phase": phase, "batch": batch, "heads": heads, "q_len": q_len, "kv_len": kv_len,
                              "head_dim": head_dim, "causal": causal, "kernel": kernel or "sdpa",
                              **_timing_params(t)})

    return BenchCase("attention", name, run)


# -- dispatch overhead --------------------------------------------------------------------------
#: Tiny operations whose time is all launch/dispatch: name -> builder of a no-argument callable.
OVERHEAD_OPS = ("add", "linear", "rms_norm", "sdpa")


def overhead_case(backend: Backend, op: str, plan: TimingPlan) -> BenchCase:
    name = f"overhead {op}"

    def run() -> Record | None:
        import torch
        import torch.nn.functional as F

        dev = backend.torch_device
        x = torch.randn(1, 8, device=dev)
        w = torch.randn(8, 8, device=dev)
        q = torch.randn(1, 1, 1, 8, device=dev)
        fns: dict[str, Callable[[], object]] = {
            "add": lambda: torch.add(x, x),
            "linear": lambda: F.linear(x, w),
            "rms_norm": (lambda: F.rms_norm(x, (8,))) if hasattr(F, "rms_norm") else (lambda: x * x.pow(2).mean(-1, keepdim=True).rsqrt()),
            "sdpa": lambda: F.scaled_dot_product_attention(q, q, q),
        }
        with torch.no_grad():
            t = time_fn(fns[op], backend.synchronize, plan)
        return Record(kind="overhead", name=name, dtype="fp32", metric="time_us", value=t.best_s / units.US, unit="µs",
                      time_s=t.best_s, flops=None, bytes=None, params={"op": op, **_timing_params(t)})

    return BenchCase("overhead", name, run)


def host_sync_case(backend: Backend, plan: TimingPlan) -> BenchCase:
    """Host-device synchronisation round trip: a tiny reduction whose result the host reads (``.item()``), as a
    dropless MoE dispatcher reads its per-expert token counts every layer forward. Record kind ``host_sync``;
    calibration turns it into the efficiency parameter ``host_sync_s`` (with the per-operation overhead)."""
    name = "host_sync counts.sum().item()"

    def run() -> Record | None:
        import torch

        counts = torch.ones(128, device=backend.torch_device, dtype=torch.int32)
        t = time_fn(lambda: counts.sum().item(), backend.synchronize, plan)
        return Record(kind="host_sync", name=name, dtype="int32", metric="time_us", value=t.best_s / units.US,
                      unit="µs", time_s=t.best_s, flops=None, bytes=None, params={"op": "sum+item", **_timing_params(t)})

    return BenchCase("host_sync", name, run)


def micro_cases(backend: Backend, sweep: Sweep, plan: TimingPlan, *, primary_dtype: str,
                only: set[str] | None = None) -> list[BenchCase]:
    """All microbenchmark cases for one run, cheapest first within each family."""
    cases: list[BenchCase] = []

    def want(kind: str) -> bool:
        return only is None or kind in only

    if want("overhead"):
        cases += [overhead_case(backend, op, plan) for op in OVERHEAD_OPS]
        cases.append(host_sync_case(backend, plan))
    if want("gemm"):
        for dtype in sweep.gemm_dtypes:
            cases += [gemm_case(backend, dtype, s, s, s, plan, "square") for s in sweep.gemm_squares]
        for m, n, k, origin in sweep.gemm_model_shapes:
            cases.append(gemm_case(backend, primary_dtype, m, n, k, plan, origin))
    if want("membw"):
        cases += [stream_case(backend, kernel, sweep.stream_elements, plan) for kernel in STREAM_KERNELS]
    if want("attention"):
        for b, h, s, d in sweep.attention_prefill:
            for kernel in sweep.attention_kernels or (None,):
                cases.append(attention_case(backend, sweep.attention_dtype, b, h, s, s, d, plan, kernel))
        for b, h, kv, d in sweep.attention_decode:
            cases.append(attention_case(backend, sweep.attention_dtype, b, h, 1, kv, d, plan))
    return cases
