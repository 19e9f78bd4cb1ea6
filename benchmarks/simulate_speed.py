"""Simulator speed: simulated requests per wall-second on a 16-replica mixed fleet.

Target (issue 12): one hour of 100 requests/s on a 16-replica mixed fleet in < 60 s on one core.
Fleet: Llama-2-70B on 8 x H100 TP4 fp8 (vLLM) + 8 x Ascend 910B TP8 int8 (MindIE), least
outstanding tokens routing, lognormal lengths (input mean 512, output mean 256, cv 1).

    python benchmarks/simulate_speed.py [--duration 3600] [--rate 100]
"""

from __future__ import annotations

import argparse
import time

from xpuplan.serve.sim import SimConfig, simulate


def fleet(duration_s: float, rate: float) -> SimConfig:
    return SimConfig.model_validate({
        "model": "llama2-70b",
        "pools": [
            {"name": "h100", "hardware": "nvidia-h100-sxm-80gb", "tp": 4, "dtype": "fp8", "engine": "vllm",
             "replicas": 8},
            {"name": "910b", "hardware": "huawei-ascend-910b", "tp": 8, "dtype": "int8", "engine": "mindie",
             "replicas": 8},
        ],
        "classes": [{"name": "chat", "rate_rps": rate,
                     "input_len": {"dist": "lognormal", "mean": 512, "cv": 1.0, "max": 4096},
                     "output_len": {"dist": "lognormal", "mean": 256, "cv": 1.0, "max": 2048},
                     "slo": {"ttft_ms": 2000, "tpot_ms": 100}}],
        "routing": {"policy": "least_outstanding"},
        "duration_s": duration_s,
    })


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=3600.0, help="simulated seconds of arrivals")
    ap.add_argument("--rate", type=float, default=100.0, help="requests/s")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = fleet(args.duration, args.rate)
    t0, c0 = time.perf_counter(), time.process_time()
    res = simulate(cfg, seed=args.seed)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"simulated {args.duration:g} s at {args.rate:g} req/s on 16 replicas (8x H100 TP4 + 8x 910B TP8)")
    print(f"  requests: {res.arrived:,} arrived, {res.completed:,} completed; events: {res.events:,}")
    print(f"  wall time: {wall:.1f} s  ->  {res.arrived / wall:,.0f} simulated requests per wall-second, "
          f"{res.events / wall:,.0f} events/s")
    print(f"  CPU time of this process: {cpu:.1f} s ({res.arrived / cpu:,.0f} requests per CPU-second; the figure "
          "that counts on a shared machine)")
    print("  step-table entries: " + ", ".join(f"{p.name} {p.step_cache_entries}" for p in res.pools))
    for p in res.pools:
        print(f"  pool {p.name}: utilisation {p.utilisation:.0%}, TTFT p99 {p.requests.ttft.p99_s or 0:.3f} s, "
              f"TPOT p50 {(p.requests.tpot.p50_s or 0) * 1e3:.1f} ms, preemptions {p.preemptions}")
    print(f"  target: one hour of 100 req/s in < 60 s on one core -> {'met' if args.duration >= 3600 and args.rate >= 100 and cpu < 60 else 'see figures'}")


if __name__ == "__main__":
    main()
