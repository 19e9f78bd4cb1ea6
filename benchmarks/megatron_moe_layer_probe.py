"""Where one Megatron-Core MoE layer's time goes on this GPU: device busy time, host issue time per stage, and the
fixed cost per layer and micro-batch that the training planner does not model (docs/training.md, *Scope and
limitations*: fine-grained MoE runs with Megatron's alltoall dispatcher sit 1.4-2.5x below the prediction).

It builds Megatron-Core's own ``MoELayer`` (pip package ``megatron-core``; its local backend: the alltoall token
dispatcher, a top-k router with an auxiliary load-balancing loss, ``SequentialMLP`` experts, BF16) on one GPU
with expert parallelism 1, and times the layer's forward + backward eagerly for several token counts. A rank of
an EP group is emulated by its local experts: 16 experts with top-8 routing give each expert T/2 rows, what a
rank of Qwen3-30B-A3B at EP8 (128 experts, top-8) receives for T tokens per rank. For each case it reports

* the wall time of forward + backward between device events (host gaps included),
* the device busy time (union of the kernels' intervals, torch.profiler) and so the device idle time,
* the host time spent in each stage's Python call (router, dispatch, experts, combine; forward only),

and fits wall = fixed + per-token x T over the token counts. Needs a CUDA GPU, PyTorch and megatron-core (pure
Python apart from optional kernels; no Transformer Engine or Apex). Usage:

    python benchmarks/megatron_moe_layer_probe.py [--json OUT.json] [--experts 16 --top-k 8]

Not a test: it prints figures; docs/training.md records what a run gave.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

#: Qwen3-30B-A3B (hidden 2048, expert width 768); token counts per rank and micro-batch.
HIDDEN, EXPERT_WIDTH, HEADS = 2048, 768, 32
TOKENS = (1024, 4096, 16384, 32768)


def build_layer(torch: Any, experts: int, top_k: int) -> Any:
    from megatron.core import parallel_state
    from megatron.core.models.gpt.moe_module_specs import get_moe_module_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    if not torch.distributed.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=0, world_size=1)
        parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=1)
        if torch.cuda.is_available():
            from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

            model_parallel_cuda_manual_seed(1234)
    cfg = TransformerConfig(
        num_layers=1, hidden_size=HIDDEN, num_attention_heads=HEADS, ffn_hidden_size=4 * HIDDEN,
        moe_ffn_hidden_size=EXPERT_WIDTH, num_moe_experts=experts, moe_router_topk=top_k,
        moe_token_dispatcher_type="alltoall", moe_grouped_gemm=False, moe_router_load_balancing_type="aux_loss",
        moe_aux_loss_coeff=1e-3, moe_router_dtype="fp32", bf16=True, params_dtype=torch.bfloat16,
        gated_linear_unit=True, activation_func=torch.nn.functional.silu, add_bias_linear=False,
        gradient_accumulation_fusion=False, use_cpu_initialization=not torch.cuda.is_available())
    spec = get_moe_module_spec(use_te=False, num_experts=experts, moe_grouped_gemm=False)
    return spec(config=cfg, layer_number=1)


class StageTimer:
    """Host seconds spent inside selected bound methods (Python call to return, no device sync added)."""

    def __init__(self) -> None:
        self.acc: dict[str, float] = {}
        self.on = False

    def wrap(self, obj: Any, attr: str, stage: str) -> None:
        fn = getattr(obj, attr)

        def timed(*a: Any, **k: Any) -> Any:
            if not self.on:
                return fn(*a, **k)
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.acc[stage] = self.acc.get(stage, 0.0) + time.perf_counter() - t0

        setattr(obj, attr, timed)


def device_spans(prof: Any) -> list[tuple[float, float]]:
    """(start, end) in microseconds of every device activity (kernels, copies) in a torch.profiler trace."""
    return sorted((e.time_range.start, e.time_range.end) for e in prof.events()
                  if getattr(e, "device_type", None) is not None and str(e.device_type).endswith("CUDA"))


def busy_seconds(prof: Any) -> float:
    """Union of the device activities' intervals in a torch.profiler trace (seconds)."""
    spans = device_spans(prof)
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy / 1e6  # the profiler's times are in microseconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=None)
    ap.add_argument("--experts", type=int, nargs="+", default=[16, 128], help="local experts (one run each)")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--tokens", type=int, nargs="+", default=list(TOKENS))
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()

    bad = [e for e in args.experts if e < args.top_k]
    if bad:
        print(f"--experts: {bad[0]} local experts cannot each take a distinct one of --top-k {args.top_k}",
              file=sys.stderr)
        return 2
    if min(args.tokens) < 1:
        print("--tokens: every token count must be at least 1", file=sys.stderr)
        return 2
    import torch

    try:
        import megatron.core
    except ImportError:
        print("needs the megatron-core package (pip install megatron-core)", file=sys.stderr)
        return 2
    cuda = torch.cuda.is_available()
    if not cuda:
        print("needs a CUDA GPU (Megatron-Core's MoE dispatcher uses CUDA streams)", file=sys.stderr)
        return 2
    dev = torch.device("cuda")

    out: dict[str, Any] = {"device": torch.cuda.get_device_name() if cuda else "cpu", "torch": torch.__version__,
                           "megatron_core": getattr(megatron.core, "__version__", "?"), "cases": []}
    print(out, flush=True)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    for n_exp in args.experts:
        layer = build_layer(torch, n_exp, args.top_k).to(dev)
        timer = StageTimer()
        timer.wrap(layer.router, "forward", "router")
        for name in ("dispatch_preprocess", "token_dispatch", "dispatch_postprocess"):
            timer.wrap(layer.token_dispatcher, name, "dispatch")
        timer.wrap(layer.experts, "forward", "experts")
        for name in ("combine_preprocess", "token_combine", "combine_postprocess"):
            timer.wrap(layer.token_dispatcher, name, "combine")
        for tokens in args.tokens:
            x = torch.randn(tokens, 1, HIDDEN, dtype=torch.bfloat16, device=dev, requires_grad=True)
            gy = torch.randn(tokens, 1, HIDDEN, dtype=torch.bfloat16, device=dev)

            def step(x: Any = x, gy: Any = gy, layer: Any = layer) -> None:
                y = layer(x)
                y = y[0] if isinstance(y, tuple) else y
                y.backward(gy)

            def fwd_only(x: Any = x, layer: Any = layer) -> None:  # a training forward; its graph is dropped
                layer(x)

            for _ in range(3):
                step()
            sync()
            walls, fwd_walls, host_fwd = [], [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                step()
                sync()
                walls.append(time.perf_counter() - t0)
            for _ in range(args.repeats):
                timer.acc, timer.on = {}, True
                t0 = time.perf_counter()
                fwd_only()
                host = time.perf_counter() - t0
                sync()
                fwd_walls.append(time.perf_counter() - t0)
                timer.on = False
                host_fwd.append((host, dict(timer.acc)))
            busy = fwd_busy = fwd_kernels = bwd_kernels = None
            if cuda:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    step()
                    sync()
                busy = busy_seconds(prof)
                all_kernels = len(device_spans(prof))
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    fwd_only()
                    sync()
                fwd_busy = busy_seconds(prof)
                fwd_kernels = len(device_spans(prof))
                bwd_kernels = all_kernels - fwd_kernels  # the training forward also saves for the backward
            med_host = sorted(host_fwd, key=lambda h: h[0])[len(host_fwd) // 2]
            case = {"experts": n_exp, "top_k": args.top_k, "tokens": tokens,
                    "rows_per_expert": tokens * args.top_k // n_exp,
                    "fwd_bwd_wall_s": statistics.median(walls), "fwd_bwd_busy_s": busy,
                    "fwd_wall_s": statistics.median(fwd_walls), "fwd_busy_s": fwd_busy,
                    "fwd_host_s": med_host[0], "fwd_host_stage_s": med_host[1],
                    "fwd_device_ops": fwd_kernels, "bwd_device_ops": bwd_kernels}
            out["cases"].append(case)
            if args.json:
                with open(args.json, "w", encoding="utf-8") as fh:
                    json.dump(out, fh, indent=1)
            stages = " ".join(f"{k}={v * 1e3:.2f}" for k, v in med_host[1].items())
            print(f"E={n_exp:<4} T={tokens:<6} fwd+bwd wall {case['fwd_bwd_wall_s'] * 1e3:7.2f} ms busy "
                  f"{(busy or 0) * 1e3:7.2f} | fwd wall {case['fwd_wall_s'] * 1e3:6.2f} busy {(fwd_busy or 0) * 1e3:6.2f}"
                  f" host {med_host[0] * 1e3:6.2f} ms ({stages}) device ops fwd {fwd_kernels} bwd {bwd_kernels}", flush=True)
            del x, gy
        cases = [c for c in out["cases"] if c["experts"] == n_exp]
        if len(cases) >= 2:
            ts = [c["tokens"] for c in cases]
            for key in ("fwd_bwd_wall_s", "fwd_bwd_busy_s"):
                ys = [c[key] for c in cases]
                if None in ys:
                    continue
                slope, icpt = _fit_line(ts, ys)
                out.setdefault("fits", []).append({"experts": n_exp, "metric": key, "fixed_s": icpt,
                                                   "per_4096_tokens_s": slope * 4096})
                print(f"E={n_exp}: {key} = {icpt * 1e3:.2f} ms + {slope * 4096 * 1e3:.2f} ms per 4,096 tokens")
        del layer
        if cuda:
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1)
    return 0


def _fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (slope, intercept)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return slope, my - slope * mx


if __name__ == "__main__":
    sys.exit(main())
