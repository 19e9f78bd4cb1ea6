"""How long an eager PyTorch host takes to issue one local expert's work (a per-expert GEMM loop), on a CUDA GPU.

    python benchmarks/moe_host_probe.py            # needs PyTorch with CUDA; prints a table, exits 0 without one

Fine-grained MoE layers (Qwen3-30B-A3B: 128 experts, top-8, expert width 768) run one GEMM per local expert in
Transformer Engine's GroupedLinear (a C++ loop over cuBLAS calls), plus per-expert casts in FP8. When each GEMM
is short, the layer runs at the pace the host issues them (docs/training.md, *Scope and limitations*). This probe
times, for E local experts and T tokens per expert, the expert GEMMs of one projection three ways:

* ``loop``: one ``torch.mm`` per expert from Python (eager PyTorch: Python + dispatcher + launch per expert);
* ``loop fp8``: per expert, cast the input to FP8 and ``torch._scaled_mm`` (two launches per expert, like an FP8
  recipe's quantise + GEMM);
* ``grouped``: one ``torch._grouped_mm`` over all experts (a single grouped kernel), where this PyTorch has it.

and prints the wall time per expert of the eager loop next to the GPU time of the same work replayed as a CUDA
graph (no host in the way): where the wall time per expert exceeds the GPU time, the host is the bound and the
difference is the host's issue cost per expert. Figures, not a pass/fail test; the planner does not read them.
"""

from __future__ import annotations

import statistics
import sys
import time

from gpu_timing import cuda_torch, graph_seconds

D_MODEL = 2048  # Qwen3-30B-A3B hidden size
EXPERT_WIDTH = 1536  # gate + up of one expert (2 x 768)
EXPERTS = (4, 16, 64)
TOKENS = (128, 2048)
REPEATS = 20


def _timed(torch, fn, repeats: int = REPEATS) -> tuple[float, float]:
    """(median wall seconds of eager ``fn``, median GPU seconds of the same work replayed as a CUDA graph, which
    takes the host out) after two warm-ups."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - t0)
    return statistics.median(walls), graph_seconds(torch, fn, repeats)


def main() -> int:
    torch = cuda_torch()
    if torch is None:
        return 0
    dev = torch.device("cuda")
    print(f"{torch.cuda.get_device_name()} | torch {torch.__version__}")
    print(f"{'experts':>7} {'tokens/expert':>13} {'variant':>9} {'wall us/expert':>15} {'GPU us/expert':>14} "
          f"{'host-bound':>10}")
    fp8 = getattr(torch, "float8_e4m3fn", None)
    for n_exp in EXPERTS:
        w = [torch.randn(D_MODEL, EXPERT_WIDTH, device=dev, dtype=torch.bfloat16) for _ in range(n_exp)]
        wt8 = [x.t().contiguous().to(fp8).t() for x in w] if fp8 is not None else []
        one = torch.ones((), device=dev)
        for tokens in TOKENS:
            xs = [torch.randn(tokens, D_MODEL, device=dev, dtype=torch.bfloat16) for _ in range(n_exp)]
            variants = {"loop": lambda xs=xs, w=w: [torch.mm(x, wi) for x, wi in zip(xs, w, strict=True)]}
            if wt8 and hasattr(torch, "_scaled_mm"):
                variants["loop fp8"] = lambda xs=xs, wt8=wt8, one=one: [
                    torch._scaled_mm(x.to(fp8), wi, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                    for x, wi in zip(xs, wt8, strict=True)]
            if hasattr(torch, "_grouped_mm"):
                xcat = torch.cat(xs)
                wstack = torch.stack(w)
                offs = torch.arange(1, n_exp + 1, device=dev, dtype=torch.int32) * tokens
                variants["grouped"] = lambda xcat=xcat, wstack=wstack, offs=offs: torch._grouped_mm(
                    xcat, wstack, offs=offs)
            for name, fn in variants.items():
                try:
                    wall, gpu = _timed(torch, fn)
                except RuntimeError as exc:  # a kernel this build or device does not have
                    print(f"{n_exp:>7} {tokens:>13} {name:>9} {'-':>15} {'-':>14}  ({str(exc).splitlines()[0][:60]})")
                    continue
                print(f"{n_exp:>7} {tokens:>13} {name:>9} {wall / n_exp * 1e6:>15.1f} {gpu / n_exp * 1e6:>14.1f} "
                      f"{'yes' if wall > 1.2 * gpu else 'no':>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
