"""Where the bench's small-transformer training step spends its GPU time, by kernel category.

`xpuplan validate --local` compares the measured training step of `xpuplan bench run` with a prediction
from the planner's op costs. This script runs the same model and step under torch.profiler and sums the
device time of its kernels per category (GEMM, attention, elementwise/norm/activation, dtype casts,
optimizer, loss, other), so a prediction error can be traced to the ops that cause it.

Needs a CUDA GPU. Usage:

    python benchmarks/bench_step_profile.py [--quick] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import defaultdict

CATEGORIES = (
    ("attention", re.compile(r"flash|fmha|cudnn|attention|sdpa", re.I)),
    ("optimizer", re.compile(r"adam|multi_tensor|foreach", re.I)),
    ("gemm", re.compile(r"gemm|cutlass|xmma|nvjet|sm90_|cublas|matmul|splitk", re.I)),
    ("loss/softmax", re.compile(r"softmax|nll|cross_entropy|log_softmax", re.I)),
    ("norm", re.compile(r"rms|norm", re.I)),
    ("cast/copy", re.compile(r"copy|cast|to_copy|convert", re.I)),
    ("reduce", re.compile(r"reduce", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|silu|mul|add|fill", re.I)),
)


def category(name: str) -> str:
    for cat, pat in CATEGORIES:
        if pat.search(name):
            return cat
    return "other"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the bench's --quick model")
    ap.add_argument("--json", default=None)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from xpuplan.bench.detect import detect_backend
    from xpuplan.bench.model import ACCEL_MODEL, ACCEL_MODEL_QUICK, build_train_step

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 2
    cfg = ACCEL_MODEL_QUICK if args.quick else ACCEL_MODEL
    step, _ = build_train_step(detect_backend("cuda"), cfg, "bf16")  # the step `xpuplan bench run` times

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / args.steps

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    by_cat: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    top: dict[str, float] = defaultdict(float)
    for ev in prof.key_averages():
        t = getattr(ev, "device_time_total", None) or getattr(ev, "cuda_time_total", 0.0)
        if not t or ev.key.startswith("cuda"):  # runtime calls (cudaLaunchKernel ...) carry no device time
            continue
        cat = category(ev.key)
        by_cat[cat] += t / 1e6 / args.steps
        count[cat] += ev.count // args.steps
        top[ev.key[:90]] += t / 1e6 / args.steps
    total = sum(by_cat.values())
    print(f"model {cfg.layers}x{cfg.d_model} ffn {cfg.ffn} vocab {cfg.vocab} b{cfg.train_batch} s{cfg.train_seq}")
    print(f"wall step {wall * 1e3:.2f} ms, kernel time {total * 1e3:.2f} ms")
    for cat, t in sorted(by_cat.items(), key=lambda kv: -kv[1]):
        print(f"  {cat:14s} {t * 1e3:8.2f} ms  {count[cat]:5d} kernels")
    print("top kernels:")
    for name, t in sorted(top.items(), key=lambda kv: -kv[1])[:25]:
        print(f"  {t * 1e3:8.3f} ms  [{category(name)}] {name}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"wall_s": wall, "kernel_s": total, "by_category_s": by_cat, "kernels": count,
                       "top_s": dict(sorted(top.items(), key=lambda kv: -kv[1])[:60])}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
