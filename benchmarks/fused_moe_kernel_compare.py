"""Published fused-MoE kernel timings against the planner's expert GEMM law (no GPU needed).

Serving engines run an MoE layer's routed experts as one fused kernel call (vLLM's Triton ``fused_moe``,
DeepGEMM's grouped GEMM). Their developers publish the call's time per token count when they tune it
(``benchmarks/kernels/benchmark_moe.py``). ``benchmarks/data/fused_moe_kernel_timings.json`` holds such timings
with their sources; this script times the same call as the planners do (``perf.ops.routed_expert_ops``: each
touched expert one GEMM of its rows, up/gate + activation + down with its short-K factor, at the device
family's built-in efficiency) and prints measured / modelled per point and per source, kernel and precision.
Above 1: the kernel is slower than the planner's law.

    python benchmarks/fused_moe_kernel_compare.py
    python benchmarks/fused_moe_kernel_compare.py --data OTHER.json --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "fused_moe_kernel_timings.json"
FIELDS = ("device", "kernel", "experts", "expert_width", "hidden", "top_k", "dtype", "tokens", "time_us", "source")


def modelled_us(p: dict[str, Any]) -> float:
    """The planner's time of one fused MoE call of point ``p`` (microseconds)."""
    from xpuplan.catalog import get_device
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.perf.ops import routed_expert_ops
    from xpuplan.perf.roofline import op_seconds

    dev = get_device(p["device"])
    eff = default_assumptions().efficiency(dev)
    ops = routed_expert_ops(int(p["experts"]), int(p["top_k"]), int(p["tokens"]) * int(p["top_k"]), int(p["hidden"]),
                            int(p["expert_width"]), dtype=p["dtype"])
    return 1e6 * sum(float(op_seconds(o, dev, p["dtype"] if o.op_class == "gemm" else "bf16", eff)[2]) for o in ops)


def load(path: Path) -> list[dict[str, Any]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SystemExit(f"--data {path}: not a readable JSON file ({exc})") from None
    points = doc.get("points") if isinstance(doc, dict) else None
    if not isinstance(points, list) or not points:
        raise SystemExit(f"--data {path}: field 'points' must be a non-empty list")
    for i, p in enumerate(points):
        missing = [f for f in FIELDS if not isinstance(p, dict) or f not in p]
        if missing:
            raise SystemExit(f"--data {path}: field 'points[{i}].{missing[0]}' is missing")
        if p["dtype"] not in ("bf16", "fp8"):
            raise SystemExit(f"--data {path}: field 'points[{i}].dtype' must be bf16 or fp8 (got {p['dtype']!r})")
        for f in ("experts", "expert_width", "hidden", "top_k", "tokens", "time_us"):
            if not isinstance(p[f], (int, float)) or p[f] <= 0:
                raise SystemExit(f"--data {path}: field 'points[{i}].{f}' must be a positive number")
    return points


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="timings file (default: benchmarks/data/...)")
    ap.add_argument("--json", type=Path, default=None, help="write every point with its ratio here")
    args = ap.parse_args(argv)
    try:
        points = load(args.data)
        from xpuplan.errors import XpuplanError
        try:
            rows = [{**p, "modelled_us": modelled_us(p)} for p in points]
        except XpuplanError as exc:
            raise SystemExit(f"--data {args.data}: {exc}") from None
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    groups: dict[tuple[str, str, str, str], list[float]] = {}
    print(f"{'device':<22} {'kernel':<26} {'dtype':<5} {'E':>4} {'width':>5} {'hidden':>6} {'k':>2} {'tokens':>6}"
          f" {'meas us':>9} {'model us':>9} {'ratio':>6}")
    for r in rows:
        r["ratio"] = r["time_us"] / r["modelled_us"]
        print(f"{r['device']:<22} {r['kernel'][:26]:<26} {r['dtype']:<5} {r['experts']:>4} {r['expert_width']:>5}"
              f" {r['hidden']:>6} {r['top_k']:>2} {r['tokens']:>6} {r['time_us']:>9.1f} {r['modelled_us']:>9.1f}"
              f" {r['ratio']:>6.2f}")
        key = (r["source"].rsplit("/", 2)[-2] + "#" + r["source"].rsplit("/", 1)[-1], r["device"],
               r["kernel"].split(" (")[0], r["dtype"])
        groups.setdefault(key, []).append(r["ratio"])
    print("\nper source, device, kernel and precision: measured / modelled, median (range)")
    for (src, dev, kern, dt), v in sorted(groups.items()):
        print(f"  {src:<10} {dev:<22} {kern[:28]:<28} {dt:<5} {statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f}),"
              f" {len(v)} points")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
