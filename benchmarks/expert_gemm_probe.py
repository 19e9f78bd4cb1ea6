"""GEMM rate by shape on this GPU: the short-K and small-M laws, and fine-grained MoE expert GEMMs (forward,
input gradient, weight gradient) as the training planner times them.

The planner charges a GEMM max(FLOP / (peak x fraction), bytes / bandwidth) + a kernel overhead, where the
fraction falls with the smallest dimension (``gemm_peak_fraction / (1 + gemm_half_dim / min(m, n, k))``), and
an expert down projection pays a short-K factor (``perf.ops.short_k_factor``: (1 + K0/k) / (1 + K0/hidden) from
K = 768 up, K0 = GEMM_K_TILE_OVERHEAD by precision, measured with this probe; below 768 the probe's own rates). Its backward is twice its forward. This script measures what those laws
stand for, on the GPU it runs on, with the host out of the way (each case is captured once as a CUDA graph and
replayed):

* ``k_sweep``: M = N = 4096, K from 256 to 16384 (the short-K law), BF16 and FP8;
* ``m_sweep``: N = K = 4096, M from 64 to 8192 (the small-dimension law), BF16 and FP8;
* ``experts``: for MoE presets at a few expert-parallel sizes and tokens per rank, the L local experts'
  forward (up/gate, down), input-gradient and weight-gradient GEMMs (r token rows per expert, balanced), as a
  loop of one GEMM per expert (what Transformer Engine's GroupedLinear runs) and, where this PyTorch has it,
  one ``torch._grouped_mm`` over the experts (forward, and forward + backward through autograd).
* ``fp8_experts``: FP8 training of the same expert GEMMs as Transformer Engine runs them on Hopper: the six GEMMs
  of each local expert in FP8 (one ``torch._scaled_mm`` per expert, graph-replayed, operands already quantized),
  and the quantization a per-tensor current-scaling recipe adds per expert (``Float8CurrentScalingQuantizer``:
  an amax pass over the 16-bit tensor, then the cast; Hopper's FP8 GEMMs take K-major operands only, so the weight
  gradient needs a column-wise (transposed) FP8 copy too): the forward's two inputs and the backward's two output
  gradients, each an amax reduction and a row-wise and a column-wise copy, timed three ways: ``quant_s`` with
  PyTorch's eager kernels per expert (amax by ``vector_norm``, the column-wise copy transposed from the FP8 one: an
  upper bound), ``quant_fused_s`` per expert with ``torch.compile`` (one reduction and one pass writing both
  copies, as Transformer Engine's per-split path does) and ``quant_grouped_s`` the same over all local experts at
  once (as its grouped quantization of 2026 does). Weights are cast once per step
  (Transformer Engine caches them over the micro-batches) and are left out. Device time only (graph-replayed): what
  the device does, not what the host adds. ``--only-fp8-experts`` measures this section alone (with the 8192^3
  references).
* ``serving``: the routed experts of one MoE layer as a serving engine runs them under tensor parallelism
  (every expert local, its width split by TP), forward only, for T tokens per engine step from decode-sized
  (16) to prefill-sized (8192): one grouped kernel for the up/gate projection and one for the down
  projection (``torch._grouped_mm`` in BF16; ``torch._scaled_grouped_mm`` with row-wise scales in FP8), each
  expert's rows padded to the kernel's 16-row alignment. A fused-MoE kernel of an engine (vLLM's Triton
  ``fused_moe``) is a different kernel; this is what a grouped GEMM library does at the same shapes.

Needs a CUDA GPU and PyTorch 2.5+ (``torch._grouped_mm``: 2.8+, Hopper or later). Usage:

    python benchmarks/expert_gemm_probe.py --json OUT.json          # measure (about a minute on an H100)
    python benchmarks/expert_gemm_probe.py --compare OUT.json        # planner's laws against a measurement

``--compare`` needs xpuplan (no GPU). Not a test: it prints figures; docs/measurement.md records what a run
gave and benchmarks/data/device_runs/ keeps the raw file.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpu_timing import event_seconds, graph_seconds

#: MoE presets as the catalog holds them (id, hidden, expert width, routed experts, top-k): the probe runs
#: where xpuplan is not installed; ``--compare`` checks these against the catalog.
MOE_SHAPES = (
    ("qwen3-30b-a3b", 2048, 768, 128, 8),
    ("qwen3-235b-a22b", 4096, 1536, 128, 8),
    ("deepseek-v3", 7168, 2048, 256, 8),
    ("gpt-oss-120b", 2880, 2880, 128, 4),
    ("mixtral-8x7b", 4096, 14336, 8, 2),
)
#: (model, expert-parallel size, tokens per rank): local experts L = E / ep; each receives r = T·k·ep / E rows.
EXPERT_CASES = (
    ("qwen3-30b-a3b", 1, 4096), ("qwen3-30b-a3b", 8, 4096), ("qwen3-30b-a3b", 8, 16384),
    ("qwen3-235b-a22b", 8, 4096), ("qwen3-235b-a22b", 32, 4096),
    ("deepseek-v3", 8, 4096), ("deepseek-v3", 64, 4096),
    ("gpt-oss-120b", 1, 4096), ("gpt-oss-120b", 8, 4096),
    ("mixtral-8x7b", 1, 4096), ("mixtral-8x7b", 8, 4096),
)
MOE_TOP_K = {m[0]: m[4] for m in MOE_SHAPES}
#: (model, expert-parallel size, tokens per rank) of the ``fp8_experts`` section: the fine-grained layouts of the
#: FP8 MoE training runs (Qwen3-30B-A3B at EP8 and EP16 on 16 H100, Qwen3-235B-A22B at EP8/EP32, DeepSeek-V3 at
#: EP64) and a wide-expert contrast (Mixtral 8x7B at EP8: one expert of 14,336 per rank).
FP8_EXPERT_CASES = (
    ("qwen3-30b-a3b", 8, 4096), ("qwen3-30b-a3b", 16, 4096), ("qwen3-30b-a3b", 16, 8192),
    ("qwen3-235b-a22b", 8, 4096), ("qwen3-235b-a22b", 32, 4096), ("deepseek-v3", 64, 4096),
    ("mixtral-8x7b", 8, 4096),
)
#: The tensors one expert quantizes per micro-batch under FP8 current scaling, as (name, rows, columns) in terms of
#: rows r, hidden d and width f: the forward's GEMM inputs and the backward's output gradients.
def quantized_tensors(r: int, d: int, f: int) -> dict[str, tuple[int, int]]:
    """(rows, columns) of the four tensors one gated expert quantizes per micro-batch (see ``fp8_experts``)."""
    return {"x_up": (r, d), "x_down": (r, f), "dy_down": (r, d), "dy_up": (r, 2 * f)}


#: (model, tensor-parallel size): serving layouts whose expert GEMMs the ``serving`` section times.
SERVE_CASES = (("qwen3-235b-a22b", 8), ("qwen3-235b-a22b", 4), ("deepseek-v3", 8), ("qwen3-30b-a3b", 1),
               ("gpt-oss-120b", 2), ("mixtral-8x7b", 8))
#: Tokens per engine step (decode batch, or prefill chunk) of the ``serving`` section.
SERVE_TOKENS = (16, 64, 256, 1024, 4096, 8192)
#: Row alignment of a group in ``torch._grouped_mm`` (torchtitan pads expert groups to 16 rows).
GROUP_ALIGN = 16
K_SWEEP = (256, 512, 768, 1024, 1536, 2048, 2880, 4096, 7168, 16384)
M_SWEEP = (64, 128, 256, 512, 1024, 2048, 4096, 8192)
#: The six GEMMs of one gated expert MLP as (name, M, N, K) in terms of rows r, hidden d and width f.
EXPERT_GEMMS = ("fwd_up", "fwd_down", "dgrad_up", "dgrad_down", "wgrad_up", "wgrad_down")


def expert_gemm_shapes(r: int, d: int, f: int) -> dict[str, tuple[int, int, int]]:
    """(M, N, K) of the six GEMMs of one gated expert with r token rows (gate and up fused: 2f columns)."""
    return {"fwd_up": (r, 2 * f, d), "fwd_down": (r, d, f),
            "dgrad_up": (r, d, 2 * f), "dgrad_down": (r, f, d),
            "wgrad_up": (d, 2 * f, r), "wgrad_down": (f, d, r)}


def serve_groups(n_experts: int, top_k: int, tokens: int) -> tuple[int, int]:
    """(experts touched, token rows per touched expert, padded to ``GROUP_ALIGN``) when ``tokens`` tokens each
    pick ``top_k`` of ``n_experts`` experts, spread evenly (the planner's expected count of touched experts is
    compared in ``--compare``)."""
    copies = tokens * top_k
    touched = min(n_experts, copies)
    rows = -(-copies // touched)
    return touched, -(-rows // GROUP_ALIGN) * GROUP_ALIGN


def rows_per_expert(n_experts: int, top_k: int, ep: int, tokens: int) -> tuple[int, int]:
    """(local experts, token rows per local expert) with balanced routing."""
    local = n_experts // ep
    return local, tokens * top_k * ep // n_experts


# ---------------------------------------------------------------------------------------------- measurement

class _Gemms:
    """Random operands for ``copies`` GEMMs of one shape and precision, each in the layout cuBLAS wants."""

    def __init__(self, torch: Any, m: int, n: int, k: int, dtype: str, copies: int) -> None:
        dev = torch.device("cuda")
        self.torch, self.dtype = torch, dtype
        self.a = [torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        self.b = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(copies)]  # (N, K): K-major
        self.out = [torch.empty(m, n, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
        if dtype == "fp8":
            f8 = torch.float8_e4m3fn
            self.a = [x.to(f8) for x in self.a]
            self.b = [x.to(f8) for x in self.b]
            self.one = torch.ones((), device=dev, dtype=torch.float32)

    def run(self) -> None:
        t = self.torch
        if self.dtype == "fp8":
            for a, b in zip(self.a, self.b, strict=True):
                t._scaled_mm(a, b.t(), scale_a=self.one, scale_b=self.one, out_dtype=t.bfloat16)
        else:
            for a, b, o in zip(self.a, self.b, self.out, strict=True):
                t.mm(a, b.t(), out=o)


def _rate(seconds: float, m: int, n: int, k: int, count: int = 1) -> float:
    return 2.0 * m * n * k * count / seconds / 1e12


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("needs a CUDA GPU")
    props = torch.cuda.get_device_properties(0)
    out: dict[str, Any] = {"device": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
                           "cuda": torch.version.cuda, "k_sweep": [], "m_sweep": [], "experts": [],
                           "reference": []}
    print(out["device"], out["torch"], flush=True)
    reps = args.repeats
    dtypes = ["bf16"] + (["fp8"] if hasattr(torch, "_scaled_mm") and props.major >= 9 else [])

    def timed_gemm(m: int, n: int, k: int, dtype: str) -> float:
        copies = 4  # rotate operands so the last-level cache does not hold them between calls
        g = _Gemms(torch, m, n, k, dtype, copies)
        return graph_seconds(torch, g.run, reps) / copies

    def save() -> None:  # after every section: a run stopped half-way keeps what it measured
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump(out, fh, indent=1)

    out["errors"] = []
    for dtype in dtypes:
        try:
            s = timed_gemm(8192, 8192, 8192, dtype)
            out["reference"].append({"dtype": dtype, "m": 8192, "n": 8192, "k": 8192, "s": s,
                                     "tflops": _rate(s, 8192, 8192, 8192)})
            if args.only_serving or args.only_fp8_experts:
                print(f"{dtype}: 8192^3 {out['reference'][-1]['tflops']:.0f} TFLOP/s", flush=True)
                continue
            for k in K_SWEEP:
                s = timed_gemm(4096, 4096, k, dtype)
                out["k_sweep"].append({"dtype": dtype, "m": 4096, "n": 4096, "k": k, "s": s,
                                       "tflops": _rate(s, 4096, 4096, k)})
            for m in M_SWEEP:
                s = timed_gemm(m, 4096, 4096, dtype)
                out["m_sweep"].append({"dtype": dtype, "m": m, "n": 4096, "k": 4096, "s": s,
                                       "tflops": _rate(s, m, 4096, 4096)})
            print(f"{dtype}: 8192^3 {out['reference'][-1]['tflops']:.0f} TFLOP/s; "
                  f"K=256 {out['k_sweep'][-len(K_SWEEP)]['tflops']:.0f}, M=64 {out['m_sweep'][-len(M_SWEEP)]['tflops']:.0f}",
                  flush=True)

        except (RuntimeError, TypeError) as exc:  # a kernel this build or device does not have
            out["errors"].append(f"{dtype} sweeps: {str(exc).splitlines()[0][:200]}")
        save()

    shapes = {m[0]: m[1:] for m in MOE_SHAPES}
    dev = torch.device("cuda")
    for model, ep, tokens in () if args.only_serving or args.only_fp8_experts else EXPERT_CASES:
        d, f, n_exp, top_k = shapes[model]
        local, r = rows_per_expert(n_exp, top_k, ep, tokens)
        row: dict[str, Any] = {"model": model, "ep": ep, "tokens": tokens, "local_experts": local, "rows": r,
                               "loop_graph_s": {}, "loop_eager_s": {}}
        try:
            for name, (m, n, k) in expert_gemm_shapes(r, d, f).items():
                g = _Gemms(torch, m, n, k, "bf16", local)
                row["loop_graph_s"][name] = graph_seconds(torch, g.run, reps)
                if name.startswith("fwd"):
                    row["loop_eager_s"][name] = event_seconds(torch, g.run, reps)
                del g
        except (RuntimeError, TypeError) as exc:  # out of memory, or a kernel this build lacks
            out["errors"].append(f"{model} ep{ep} T{tokens}: {str(exc).splitlines()[0][:200]}")
            torch.cuda.empty_cache()
            continue
        torch.cuda.empty_cache()
        if hasattr(torch, "_grouped_mm"):
            try:
                x = torch.randn(local * r, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                # (L, 2f, d) stored K-major, used as (L, d, 2f): the layout the grouped kernel wants for B
                w = torch.randn(local, 2 * f, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                offs = (torch.arange(1, local + 1, device=dev, dtype=torch.int32) * r)
                gy = torch.randn(local * r, 2 * f, device=dev, dtype=torch.bfloat16)

                def fwd(x=x, w=w, offs=offs) -> Any:
                    return torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)

                def fwd_bwd(x=x, w=w, offs=offs, gy=gy) -> None:
                    y = torch._grouped_mm(x, w.transpose(-2, -1), offs=offs)
                    torch.autograd.grad(y, (x, w), gy)

                with torch.no_grad():
                    row["grouped_fwd_up_s"] = graph_seconds(torch, fwd, reps)
                row["grouped_fwd_bwd_up_s"] = event_seconds(torch, fwd_bwd, reps)
            except (RuntimeError, TypeError) as exc:  # a kernel this build or device does not have
                row["grouped_error"] = str(exc).splitlines()[0][:200]
        out["experts"].append(row)
        save()
        lg = row["loop_graph_s"]
        print(f"{model:>16} ep{ep:<3} T{tokens:<6} L={local:<4} r={r:<6} "
              + " ".join(f"{k}={v * 1e3:.3f}ms" for k, v in lg.items()), flush=True)
    out["fp8_experts"] = (_measure_fp8_experts(torch, reps, out["errors"])
                          if "fp8" in dtypes and not args.only_serving else [])
    save()
    out["serving"] = ([] if args.skip_serving or args.only_fp8_experts
                      else _measure_serving(torch, reps, out["errors"]))
    save()
    return out


def _measure_fp8_experts(torch: Any, reps: int, errors: list[str]) -> list[dict[str, Any]]:
    """The ``fp8_experts`` section (module doc): per case, the six expert GEMMs in BF16 and FP8 and the FP8
    quantization of the four per-expert tensors, each as a graph-replayed loop over the local experts."""
    shapes = {m[0]: m[1:] for m in MOE_SHAPES}
    dev = torch.device("cuda")
    f8 = torch.float8_e4m3fn
    rows_out: list[dict[str, Any]] = []
    try:  # amax, then one fused pass writing the row-wise and the column-wise copies (what TE's kernels do)
        @torch.compile(fullgraph=True)
        def quant(x: Any) -> Any:
            y = x.float() * (448.0 / x.abs().amax().float())
            return y.to(f8), y.t().contiguous().to(f8)
    except Exception as exc:  # noqa: BLE001 - a build without the compiler: the eager figures only
        errors.append(f"fp8 experts: torch.compile unavailable ({str(exc).splitlines()[0][:120]})")
        quant = None
    for model, ep, tokens in FP8_EXPERT_CASES:
        d, f, n_exp, top_k = shapes[model]
        local, r = rows_per_expert(n_exp, top_k, ep, tokens)
        row: dict[str, Any] = {"model": model, "ep": ep, "tokens": tokens, "local_experts": local, "rows": r,
                               "bf16_s": {}, "fp8_s": {}, "quant_s": {}}
        try:
            for name, (m, n, k) in expert_gemm_shapes(r, d, f).items():
                for dtype in ("bf16", "fp8"):
                    g = _Gemms(torch, m, n, k, dtype, local)
                    row[f"{dtype}_s"][name] = graph_seconds(torch, g.run, reps)
                    del g
            for name, (rr, cc) in quantized_tensors(r, d, f).items():
                xs = [torch.randn(rr, cc, device=dev, dtype=torch.bfloat16) for _ in range(local)]
                whole = torch.randn(local * rr, cc, device=dev, dtype=torch.bfloat16)

                def eager(xs: list[Any] = xs) -> None:
                    for x in xs:
                        torch.linalg.vector_norm(x, float("inf"))  # the amax pass
                        x.to(f8).t().contiguous()  # row-wise copy, then the column-wise one from it

                def fused(xs: list[Any] = xs) -> None:
                    for x in xs:
                        quant(x)

                row["quant_s"][name] = graph_seconds(torch, eager, reps)
                if quant is not None:
                    row.setdefault("quant_fused_s", {})[name] = graph_seconds(torch, fused, reps)
                    row.setdefault("quant_grouped_s", {})[name] = graph_seconds(torch, lambda w=whole: quant(w), reps)
                del xs, whole
        except (RuntimeError, TypeError) as exc:  # out of memory, or a kernel this build lacks
            errors.append(f"fp8 experts {model} ep{ep} T{tokens}: {str(exc).splitlines()[0][:200]}")
            torch.cuda.empty_cache()
            continue
        torch.cuda.empty_cache()
        rows_out.append(row)
        b, q8, qq = (sum(row[k].values()) for k in ("bf16_s", "fp8_s", "quant_s"))
        qf = sum(row.get("quant_fused_s", {}).values())
        qg = sum(row.get("quant_grouped_s", {}).values())
        print(f"fp8 experts {model:>16} ep{ep:<3} T{tokens:<6} L={local:<4} r={r:<6} bf16 {b * 1e3:.3f}ms "
              f"fp8 {q8 * 1e3:.3f}ms quant eager/fused/grouped {qq * 1e3:.3f}/{qf * 1e3:.3f}/{qg * 1e3:.3f}ms",
              flush=True)
    return rows_out


def _measure_serving(torch: Any, reps: int, errors: list[str]) -> list[dict[str, Any]]:
    """The ``serving`` section (module doc): grouped up/gate and down GEMMs of every (model, tp, tokens)."""
    shapes = {m[0]: m[1:] for m in MOE_SHAPES}
    dev = torch.device("cuda")
    rows_out: list[dict[str, Any]] = []
    fp8 = hasattr(torch, "_scaled_grouped_mm") and torch.cuda.get_device_properties(0).major >= 9
    for model, tp in SERVE_CASES:
        d, f_full, n_exp, top_k = shapes[model]
        f = f_full // tp
        for tokens in SERVE_TOKENS:
            touched, r = serve_groups(n_exp, top_k, tokens)
            row: dict[str, Any] = {"model": model, "tp": tp, "tokens": tokens, "experts": touched, "rows": r,
                                   "width": f, "hidden": d, "s": {}}
            offs = torch.arange(1, touched + 1, device=dev, dtype=torch.int32) * r
            for name, (k_in, n_out) in (("up", (d, 2 * f)), ("down", (f, d))):
                try:
                    x = torch.randn(touched * r, k_in, device=dev, dtype=torch.bfloat16)
                    w = torch.randn(touched, n_out, k_in, device=dev, dtype=torch.bfloat16)
                    with torch.no_grad():
                        row["s"][f"bf16_{name}"] = graph_seconds(
                            torch, lambda x=x, w=w, o=offs: torch._grouped_mm(x, w.transpose(-2, -1), offs=o), reps)
                    if fp8:
                        xq = x.to(torch.float8_e4m3fn)
                        wq = w.to(torch.float8_e4m3fn)
                        sa = torch.ones(touched * r, device=dev, dtype=torch.float32)
                        sb = torch.ones(touched, n_out, device=dev, dtype=torch.float32)
                        row["s"][f"fp8_{name}"] = graph_seconds(
                            torch, lambda xq=xq, wq=wq, sa=sa, sb=sb, o=offs: torch._scaled_grouped_mm(
                                xq, wq.transpose(-2, -1), sa, sb, offs=o, out_dtype=torch.bfloat16), reps)
                    del x, w
                except (RuntimeError, TypeError, ValueError) as exc:  # a kernel this build lacks, or memory
                    row.setdefault("error", f"{name}: {str(exc).splitlines()[0][:200]}")
                    errors.append(f"serving {model} tp{tp} T{tokens} {name}: {str(exc).splitlines()[0][:200]}")
                torch.cuda.empty_cache()
            rows_out.append(row)
            print(f"serving {model:>16} tp{tp} T{tokens:<5} experts={touched:<4} rows={r:<5} "
                  + " ".join(f"{k}={v * 1e6:.1f}us" for k, v in row["s"].items()), flush=True)
    return rows_out


# ---------------------------------------------------------------------------------------------- comparison

def compare(path: str) -> int:
    """The planner's GEMM laws against a measurement. Every time is put in units of the same FLOPs at the
    8192^3 GEMM's rate, measured for the measurement and modelled for the model, so the family's absolute
    fraction drops out and only the shape laws are compared (1.00: the law is right; above 1: the GPU is
    slower at that shape than the planner says)."""
    from xpuplan.catalog import get_device
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.models import list_models
    from xpuplan.perf.ops import GEMM_K_TILE_OVERHEAD

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        print(f"--compare {path}: not a readable JSON file ({exc})", file=sys.stderr)
        return 2
    missing = [k for k in ("device", "torch", "reference", "k_sweep", "m_sweep", "experts")
               if not isinstance(data, dict) or k not in data]
    if missing:
        print(f"--compare {path}: not a measurement of this probe (missing field {missing[0]!r}); "
              f"write one with --json", file=sys.stderr)
        return 2
    if not any(r.get("dtype") == "bf16" for r in data["reference"]):
        print(f"--compare {path}: field 'reference' has no bf16 8192^3 GEMM", file=sys.stderr)
        return 2
    catalog = {m.id: m for m in list_models() if m.moe}
    for mid, d, f, e, k in MOE_SHAPES:
        moe = catalog[mid].moe
        got = (catalog[mid].d_model, moe.expert_ffn_dim, moe.n_routed_experts, moe.top_k)
        if got != (d, f, e, k):
            print(f"MOE_SHAPES[{mid}] = {(d, f, e, k)} but the catalog holds {got}", file=sys.stderr)
            return 1
    bad = _malformed_rows(data, catalog)
    if bad:
        print(f"--compare {path}: {bad}", file=sys.stderr)
        return 2
    dev_id = "H200" if "H200" in data["device"] else "H100"
    device = get_device(dev_id)
    eff = default_assumptions().efficiency(device)

    def rel(seconds: float, flops: float, ref_s: float) -> float:
        """``seconds`` in units of ``flops`` at the rate of the 8192^3 GEMM that took ``ref_s``."""
        return seconds / (flops * ref_s / (2.0 * 8192**3))

    def model_s(m: int, n: int, k: int, dtype: str, hidden: int | None = None) -> float:
        return planner_gemm_s(m, n, k, dtype, device, eff, hidden)

    print(f"{data['device']} (torch {data['torch']}); modelled as catalog {dev_id} with its family's efficiency "
          f"(gemm_peak_fraction {eff.gemm_peak_fraction}, gemm_half_dim {eff.gemm_half_dim}, "
          f"kernel_overhead_s {eff.kernel_overhead_s}; K0 {GEMM_K_TILE_OVERHEAD})")
    ref = {r["dtype"]: r for r in data["reference"]}
    for sweep, var in (("k_sweep", "k"), ("m_sweep", "m")):
        law = "min-dim law x short-K law" if var == "k" else "min-dim law"
        print(f"\n{sweep}: time relative to the 8192^3 rate, measured / modelled ({law})")
        for dtype, r0 in ref.items():
            mod_ref = model_s(8192, 8192, 8192, dtype)
            cells = []
            for row in (x for x in data[sweep] if x["dtype"] == dtype):
                flops = 2.0 * row["m"] * row["n"] * row["k"]
                meas = rel(row["s"], flops, r0["s"])
                mod = rel(model_s(row["m"], row["n"], row["k"], dtype, hidden=8192 if var == "k" else None), flops,
                          mod_ref)
                cells.append(f"{row[var]}:{meas:.2f}/{mod:.2f}")
            print(f"  {dtype:>4} (8192^3: {r0['tflops']:.0f} TFLOP/s): " + "  ".join(cells))
    print("\nexperts, bf16, graph-replayed loop of one GEMM per local expert: measured / modelled time of each GEMM"
          " kind (modelled: L GEMMs by the min-dim law, the forward down projection x the short-K factor);"
          " fwd+bwd: the six against what the training planner charges (3 x the forward)")
    print(f"{'model':>16} {'ep':>3} {'T':>6} {'L':>4} {'r':>6} " + " ".join(f"{g:>10}" for g in EXPERT_GEMMS)
          + f" {'fwd+bwd':>8}")
    r0, mod_ref = ref["bf16"], model_s(8192, 8192, 8192, "bf16")
    for row in data["experts"]:
        m = catalog[row["model"]]
        d, f, L, r = m.d_model, m.moe.expert_ffn_dim, row["local_experts"], row["rows"]
        cells, meas_tot, mod = [], 0.0, {}
        for name, (mm, nn, kk) in expert_gemm_shapes(r, d, f).items():
            flops = 2.0 * mm * nn * kk * L
            t_mod = L * model_s(mm, nn, kk, "bf16", hidden=d if name == "fwd_down" else None)
            mod[name] = rel(t_mod, flops, mod_ref)
            meas = rel(row["loop_graph_s"][name], flops, r0["s"])
            cells.append(f"{meas / mod[name]:>10.2f}")
            meas_tot += row["loop_graph_s"][name] / r0["s"]
        planner = 3.0 * (L * model_s(r, 2 * f, d, "bf16") + L * model_s(r, d, f, "bf16", hidden=d))
        print(f"{row['model']:>16} {row['ep']:>3} {row['tokens']:>6} {L:>4} {r:>6} " + " ".join(cells)
              + f" {meas_tot / (planner / mod_ref):>8.2f}")
        if "grouped_fwd_up_s" in row:
            lg = row["loop_graph_s"]
            print(f"{'':>38} grouped kernel: forward up {row['grouped_fwd_up_s'] / lg['fwd_up']:.2f}x the loop;"
                  f" forward+backward (eager) {row['grouped_fwd_bwd_up_s'] / (lg['fwd_up'] + lg['dgrad_up'] + lg['wgrad_up']):.2f}x")
        elif "grouped_error" in row:
            print(f"{'':>38} grouped kernel: {row['grouped_error']}")
    if data.get("fp8_experts"):
        _compare_fp8_experts(data["fp8_experts"], ref, device, eff, catalog)
    if data.get("serving"):
        _compare_serving(data["serving"], ref, device, eff)
    return 0


def planner_gemm_s(m: int, n: int, k: int, dtype: str, device: Any, eff: Any, hidden: int | None = None) -> float:
    """The planner's time for one GEMM on ``device`` under ``eff``. ``hidden``: time its short K as the planner does
    an expert down projection (perf.ops.layer_ops): the short-K factor relative to K = hidden, the size law on M and
    N."""
    from xpuplan.perf.ops import short_k_factor
    from xpuplan.perf.roofline import OpCost, cost_gemm, op_seconds

    g = cost_gemm(m, n, k, dtype)
    if hidden is not None:
        g = OpCost(g.name, g.op_class, g.flops, g.bytes, float(min(m, n)), k_factor=short_k_factor(k, hidden, dtype))
    return float(op_seconds(g, device, dtype, eff)[2])


#: Fields every row of a measured section must carry for ``--compare`` (the ones it reads).
ROW_FIELDS: dict[str, tuple[str, ...]] = {
    "experts": ("model", "ep", "tokens", "local_experts", "rows", "loop_graph_s"),
    "fp8_experts": ("model", "ep", "tokens", "local_experts", "rows", "bf16_s", "fp8_s", "quant_s"),
    "serving": ("model", "tp", "tokens", "experts", "rows", "width", "hidden", "s"),
}


def _malformed_rows(data: dict[str, Any], catalog: dict[str, Any]) -> str | None:
    """Why a measurement's section rows cannot be compared (the first missing field or unknown model, named as
    ``section[i].field``), or None."""
    for section, fields in ROW_FIELDS.items():
        rows = data.get(section) or []
        if not isinstance(rows, list):
            return f"field {section!r} is not a list of rows"
        for i, row in enumerate(rows):
            missing = [f for f in fields if not isinstance(row, dict) or f not in row]
            if missing:
                return f"field '{section}[{i}].{missing[0]}' is missing"
            if row["model"] not in catalog:
                return f"field '{section}[{i}].model': {row['model']!r} is not a MoE preset of the catalog"
    return None


def _compare_fp8_experts(rows: list[dict[str, Any]], ref: dict[str, Any], device: Any, eff: Any,
                         catalog: dict[str, Any]) -> None:
    """The ``fp8_experts`` section against the training planner, in absolute time with the family's GEMM fraction
    scaled so that the planner's BF16 8192^3 GEMM takes the measured time (the FP8 rate then follows from the
    family's low_precision_factor and the FP8 short-K law, as in a prediction). Per case: the six expert GEMMs in
    BF16 and FP8 (planner: 3 x the forward pair, as the training planner charges them), the quantization of the
    experts' operands (planner: ``train.compute.expert_quant_ops``, forward inputs and backward output gradients),
    and FP8 + quantization over BF16, measured and modelled."""
    from xpuplan.perf.roofline import cost_gemm, op_seconds
    from xpuplan.train.compute import expert_quant_ops

    r0 = ref["bf16"]
    mod0 = float(op_seconds(cost_gemm(8192, 8192, 8192, "bf16"), device, "bf16", eff)[2])
    e = eff.model_copy(update={"gemm_peak_fraction": eff.gemm_peak_fraction * mod0 / r0["s"]})

    def gemm_s(m: int, n: int, k: int, dtype: str, hidden: int | None = None) -> float:
        return planner_gemm_s(m, n, k, dtype, device, e, hidden)

    print("\nfp8_experts: expert GEMMs of one MoE layer, forward + backward, graph-replayed loops over the local "
          "experts; measured (planner), ms; GEMM fraction scaled to the measured bf16 8192^3 rate; fp8 quant: the "
          "grouped measurement where there is one (else per expert fused, else eager)")
    print(f"{'model':>16} {'ep':>3} {'T':>6} {'L':>4} {'r':>6} {'bf16 GEMMs':>17} {'fp8 GEMMs':>17} {'fp8 quant':>17}"
          f" {'(fp8+quant)/bf16':>18}")
    for row in rows:
        m = catalog[row["model"]]
        d, f, L, r = m.d_model, m.moe.expert_ffn_dim, row["local_experts"], row["rows"]
        meas = {k: sum(row[f"{k}_s"].values()) for k in ("bf16", "fp8", "quant")}
        for k in ("quant_fused", "quant_grouped"):
            if row.get(f"{k}_s"):
                meas["quant"] = sum(row[f"{k}_s"].values())  # the closest to Transformer Engine measured
        mod = {dt: 3.0 * L * (gemm_s(r, 2 * f, d, dt) + gemm_s(r, d, f, dt, hidden=d)) for dt in ("bf16", "fp8")}
        q_fwd, q_bwd = expert_quant_ops(m, float(L * r), 1, "fp8")
        mod["quant"] = sum(float(op_seconds(op, device, "bf16", e)[2]) for op in (q_fwd, q_bwd))
        cells = [f"{meas[k] * 1e3:7.2f} ({mod[k] * 1e3:6.2f})" for k in ("bf16", "fp8", "quant")]
        ratio = f"{(meas['fp8'] + meas['quant']) / meas['bf16']:.2f} ({(mod['fp8'] + mod['quant']) / mod['bf16']:.2f})"
        print(f"{row['model']:>16} {row['ep']:>3} {row['tokens']:>6} {L:>4} {r:>6} "
              + " ".join(f"{c:>17}" for c in cells) + f" {ratio:>18}")


def _compare_serving(rows: list[dict[str, Any]], ref: dict[str, Any], device: Any, eff: Any) -> None:
    """Measured grouped expert GEMMs of the ``serving`` section against the serving planner's op costs for the
    same groups (``perf.ops.routed_expert_ops`` with the probe's experts and unpadded rows), in absolute time.
    The family's GEMM fraction is scaled so that its 8192^3 GEMM takes the measured time, precision by
    precision (the shape laws and the memory roofline are what is compared); the HBM fraction is the family's."""

    from xpuplan.perf.ops import routed_expert_ops
    from xpuplan.perf.roofline import cost_gemm, op_seconds

    print("\nserving: routed experts of one MoE layer per engine step (all experts local, width / TP), grouped "
          "kernels; measured / modelled time (modelled: the serving planner's experts up/gate and down ops, "
          "GEMM fraction scaled to the measured 8192^3 rate)")
    effs = {}
    for dtype, r0 in ref.items():
        mod0 = float(op_seconds(cost_gemm(8192, 8192, 8192, dtype), device, dtype, eff)[2])
        effs[dtype] = eff.model_copy(update={"gemm_peak_fraction": eff.gemm_peak_fraction * mod0 / r0["s"]})
    print(f"{'model':>16} {'tp':>3} {'T':>5} {'experts':>7} {'rows':>5} "
          + " ".join(f"{c:>16}" for c in ("bf16 up", "bf16 down", "fp8 up", "fp8 down")))
    for row in rows:
        copies = row["tokens"] * MOE_TOP_K[row["model"]]
        cells = []
        for dtype in ("bf16", "fp8"):
            if dtype not in effs:
                cells += ["-", "-"]
                continue
            ops = routed_expert_ops(row["experts"], MOE_TOP_K[row["model"]], copies, row["hidden"], row["width"],
                                    dtype=dtype, groups=(row["experts"], copies / row["experts"]))
            model_s = {o.name: float(op_seconds(o, device, dtype, effs[dtype])[2]) for o in ops}
            for name, op in (("up", "experts up/gate"), ("down", "experts down")):
                meas = row["s"].get(f"{dtype}_{name}")
                cells.append("-" if meas is None else f"{meas * 1e6:7.0f}us {meas / model_s[op]:5.2f}")
        print(f"{row['model']:>16} {row['tp']:>3} {row['tokens']:>5} {row['experts']:>7} {row['rows']:>5} "
              + " ".join(f"{c:>16}" for c in cells))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the measurements here")
    ap.add_argument("--compare", default=None, metavar="JSON", help="compare a measurement with the planner's laws")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--skip-serving", action="store_true", help="leave out the serving section")
    ap.add_argument("--only-serving", action="store_true", help="measure the serving section alone")
    ap.add_argument("--only-fp8-experts", action="store_true",
                    help="measure the fp8_experts section alone (with the 8192^3 references)")
    args = ap.parse_args()
    if args.compare:
        return compare(args.compare)
    measure(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
