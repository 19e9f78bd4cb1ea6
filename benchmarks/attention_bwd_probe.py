"""Attention backward vs forward rate on this GPU: FlashAttention-2 (PyTorch SDPA's flash backend) and cuDNN.

``--backends`` picks SDPA's kernels: ``fa2`` (its flash backend, FlashAttention-2's code), ``cudnn`` (cuDNN's fused
attention) and ``efficient`` (its memory-efficient backend, xFormers' CUTLASS kernel of 2022: a
FlashAttention-1-generation kernel, for the stacks with ``attention_kernel: fa1``).

The training planner times the fused attention backward as ATTENTION_BACKWARD_FACTOR x the forward's time
(FlashAttention-2's 5 matmuls against 2). If the backward kernel runs its FLOPs slower than the forward does,
the backward takes longer than that ratio says. This script measures both passes at the shapes training
runs use (causal, one sequence per 32K tokens; the off-diagonal blocks ring attention runs, non-causal) and
prints each pass's rate and the backward-over-forward rate ratio.

Needs a CUDA GPU and PyTorch with SDPA backends (2.5+). Usage:

    python benchmarks/attention_bwd_probe.py [--json OUT.json] [--heads 32] [--head-dim 128]

Not a test: it prints figures, and docs/training.md records what one run on one machine gave.
"""

from __future__ import annotations

import argparse
import json
import sys

from gpu_timing import event_seconds, output_problem

#: ``--backends`` names and the SDPA backend each pins.
BACKENDS = {"fa2": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the measurements here")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, nargs="+", default=[128])
    ap.add_argument("--tokens", type=int, default=32768, help="tokens per call (batch = tokens / seq)")
    ap.add_argument("--seqs", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384, 32768])
    ap.add_argument("--repeats", type=int, default=8)
    ap.add_argument("--backends", default="fa2,cudnn", help="comma-separated: fa2, cudnn, efficient")
    ap.add_argument("--causal-only", action="store_true", help="skip the non-causal shapes")
    args = ap.parse_args(argv)
    wanted = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not wanted or any(b not in BACKENDS for b in wanted):
        print(f"--backends: give some of {', '.join(BACKENDS)} (got {args.backends!r})", file=sys.stderr)
        return 2
    problem = output_problem(args.json)
    if problem:
        print(problem, file=sys.stderr)
        return 2

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    meta = {"device": props.name, "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "sms": props.multi_processor_count}
    print(meta)

    def timed(fn, repeats: int) -> float:
        return event_seconds(torch, fn, repeats)

    def time_passes(q, k, v, go, causal: bool, backend) -> tuple[float, float]:  # noqa: ANN001
        with sdpa_kernel(backend):
            def fwd() -> None:
                with torch.no_grad():
                    sdpa(q, k, v, is_causal=causal)

            def fwd_bwd() -> None:
                torch.autograd.grad(sdpa(q, k, v, is_causal=causal), (q, k, v), go)  # no .grad accumulation

            return timed(fwd, args.repeats), timed(fwd_bwd, args.repeats)

    backends = {b: getattr(SDPBackend, BACKENDS[b]) for b in wanted}
    rows = []
    for d in args.head_dim:
        for causal in ((True,) if args.causal_only else (True, False)):
            for s in args.seqs:
                b = max(1, args.tokens // s)
                q, k, v = (torch.randn(b, args.heads, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                go = torch.randn(b, args.heads, s, d, device=dev, dtype=torch.bfloat16)
                # causal: the kernel skips the masked half (s(s+1)/2 scores); non-causal: all s^2
                scores = b * args.heads * (s * (s + 1) / 2 if causal else s * s)
                fwd_flops = 4.0 * scores * d
                for name, be in backends.items():
                    try:
                        t_f, t_fb = time_passes(q, k, v, go, causal, be)
                    except RuntimeError as exc:  # backend refuses the shape
                        print(f"{name} d={d} s={s} causal={causal}: {str(exc).splitlines()[0][:100]}")
                        continue
                    t_b = max(t_fb - t_f, 1e-9)
                    row = {"kernel": name, "head_dim": d, "causal": causal, "seq": s, "batch": b,
                           "fwd_s": t_f, "bwd_s": t_b, "fwd_tflops": fwd_flops / t_f / 1e12,
                           "bwd_tflops": 2.5 * fwd_flops / t_b / 1e12}
                    row["bwd_over_fwd_rate"] = row["bwd_tflops"] / row["fwd_tflops"]
                    row["bwd_over_fwd_time"] = t_b / t_f
                    rows.append(row)
                    print(f"{name:5s} d={d:3d} causal={int(causal)} s={s:6d} b={b:3d}  fwd {row['fwd_tflops']:6.1f}  "
                          f"bwd {row['bwd_tflops']:6.1f} TFLOP/s  bwd/fwd rate {row['bwd_over_fwd_rate']:.2f}  "
                          f"time x{row['bwd_over_fwd_time']:.2f}", flush=True)
                del q, k, v, go
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
