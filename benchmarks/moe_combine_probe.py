"""The MoE combine on this GPU: the top-k expert outputs of each token read back and summed into one row, as the
serving planner charges it (``perf.ops.MOE_COMBINE_OP``: (top-k + 1) · tokens · hidden · 2 B, memory-bound).

    python benchmarks/moe_combine_probe.py --json OUT.json     # measure (needs PyTorch with CUDA; seconds)
    python benchmarks/moe_combine_probe.py --compare OUT.json  # the planner's time for the same shapes (no GPU)

Two forms are timed, each captured as a CUDA graph and replayed: the plain sum over the k copies
(``out.view(T, k, d).sum(1)``, what vLLM's ``moe_sum`` does after a down projection that applied the routing
weights) and the weighted sum (``(out.view(T, k, d) * w[..., None]).sum(1)``, the routing weights applied in the
same pass). Not a test: it prints figures; docs/measurement.md records what a run gave.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from gpu_timing import cuda_torch, graph_seconds

#: (model, hidden, top-k) of the MoE presets the probe covers (checked against the catalog by --compare).
SHAPES = (("qwen3-235b-a22b", 4096, 8), ("deepseek-v3", 7168, 8), ("mixtral-8x7b", 4096, 2))
TOKENS = (256, 2048, 8192, 32768)


def measure(path: str | None, repeats: int) -> int:
    torch = cuda_torch()
    if torch is None:
        return 0
    dev = torch.device("cuda")
    out: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    print(out["device"], out["torch"], flush=True)
    for model, d, k in SHAPES:
        for t in TOKENS:
            x = torch.randn(t * k, d, device=dev, dtype=torch.bfloat16)
            w = torch.rand(t, k, device=dev, dtype=torch.float32)
            plain = graph_seconds(torch, lambda x=x, k=k, d=d: x.view(-1, k, d).sum(1), repeats)
            weighted = graph_seconds(torch, lambda x=x, w=w, k=k, d=d: (x.view(-1, k, d) * w[..., None]).sum(1), repeats)
            out["rows"].append({"model": model, "hidden": d, "top_k": k, "tokens": t, "sum_s": plain,
                                "weighted_s": weighted})
            gb = (k + 1) * t * d * 2 / 1e9
            print(f"{model:>16} T={t:<6} {gb:6.3f} GB  sum {plain * 1e6:8.1f} us ({gb / plain:6.0f} GB/s)"
                  f"  weighted {weighted * 1e6:8.1f} us", flush=True)
            del x, w
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0


def compare(path: str) -> int:
    from xpuplan.catalog import get_device
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.models import get_model
    from xpuplan.perf.ops import MOE_COMBINE_OP, layer_ops
    from xpuplan.perf.roofline import op_seconds

    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        rows = data["rows"]
        name = data["device"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        print(f"--compare {path}: not a measurement of this probe ({exc})", file=sys.stderr)
        return 2
    device = get_device("H200" if "H200" in name else "H100")
    eff = default_assumptions().efficiency(device)
    print(f"{name}: measured / modelled time of the combine (modelled: {device.id}, memory_bw_fraction "
          f"{eff.memory_bw_fraction}, kernel_overhead_s {eff.kernel_overhead_s})")
    for r in rows:
        m = get_model(r["model"])
        assert m.moe is not None and (m.d_model, m.moe.top_k) == (r["hidden"], r["top_k"]), r["model"]
        op = next(o for o in layer_ops(m, batch=1, q_len=r["tokens"], kv_len=r["tokens"]) if o.name == MOE_COMBINE_OP)
        model_s = float(op_seconds(op, device, "bf16", eff)[2])
        print(f"{r['model']:>16} T={r['tokens']:<6} sum {r['sum_s'] / model_s:5.2f}  weighted "
              f"{r['weighted_s'] / model_s:5.2f}   (modelled {model_s * 1e6:8.1f} us)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None, help="write the measurements here")
    ap.add_argument("--compare", default=None, metavar="JSON", help="the planner's time for a measurement")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    return compare(args.compare) if args.compare else measure(args.json, args.repeats)


if __name__ == "__main__":
    sys.exit(main())
