"""Speed of ``recommend`` over every catalog accelerator that can run the workload.

Targets (issue 10, section 4): without Monte Carlo < 3 s on one core; with 1,000 samples < 15 s.
Run on one core for a fair figure:

    taskset -c 0 python benchmarks/recommend_speed.py            # training and serving workloads
    taskset -c 0 python benchmarks/recommend_speed.py --only training

It prints, per workload: devices compared, options ranked, rejected, seconds without Monte Carlo,
seconds with 1,000 samples, and the Monte Carlo share (the planners' time is the rest).
"""

from __future__ import annotations

import argparse
import time

from xpuplan.decide import preset
from xpuplan.decide.engine import evaluate

#: Workloads timed: the pre-training preset and the batch-inference preset over the whole catalog.
WORKLOADS = {
    "training": ("pretraining", {"hardware": "all", "mixes": False}),
    "serving": ("batch-inference", {"hardware": "all", "mixes": False}),
}


def run(name: str, base: str, over: dict[str, object], samples: int) -> None:
    from xpuplan.decide.montecarlo import run_monte_carlo

    s = preset(base, over)
    t0 = time.perf_counter()
    ev = evaluate(s, samples=0)
    t_plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    mc = run_monte_carlo(ev.candidates, s, ev.role_share, ev.weights.to_dict(), samples, 0)
    t_mc = time.perf_counter() - t0
    print(f"{name:9s} {len(ev.candidates) + len(ev.rejected):3d} devices {len(ev.candidates):3d} ranked "
          f"{len(ev.rejected):3d} rejected | no MC {t_plain:6.2f} s (target < 3 s) | "
          f"{samples} samples {t_plain + t_mc:6.2f} s (target < 15 s; Monte Carlo itself {t_mc:5.2f} s) | "
          f"winner {ev.candidates[0].key}, P(first) {mc['p_rank_first'][0]:.0%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=sorted(WORKLOADS))
    ap.add_argument("--samples", type=int, default=1000)
    a = ap.parse_args()
    for name, (base, over) in WORKLOADS.items():
        if a.only and name != a.only:
            continue
        run(name, base, over, a.samples)


if __name__ == "__main__":
    main()
