"""Timing helper shared by the benchmarks: warm up, pick an iteration count, time several repeats.

The figure used downstream is the *best* repeat (as STREAM and ``timeit`` report): on a shared or
virtualised machine other work only ever slows a repeat down, so the minimum is the steadiest
estimate of what the hardware does. The median is kept alongside it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TimingPlan:
    """How long to time one case.

    ``target_s`` is the wall time of one repeat (iterations are chosen to fill it); the best of
    ``repeats`` repeats is reported, the median kept as well.
    """

    target_s: float
    repeats: int
    warmup: int
    max_iters: int = 100_000


#: ``--quick``: enough for a 2-core CI machine to finish in seconds; noisier figures.
QUICK = TimingPlan(target_s=0.01, repeats=5, warmup=1)
#: Default: steadier figures.
FULL = TimingPlan(target_s=0.1, repeats=5, warmup=3)
#: The model steps are what ``validate --local`` compares with: more repeats, even when quick.
MODEL_QUICK = TimingPlan(target_s=0.05, repeats=7, warmup=1)
MODEL_FULL = TimingPlan(target_s=0.2, repeats=9, warmup=2)


@dataclass(frozen=True)
class Timing:
    median_s: float
    min_s: float
    iters: int
    repeats: int

    @property
    def best_s(self) -> float:
        """Seconds per call used as the measurement (the best repeat)."""
        return self.min_s

    def to_dict(self) -> dict[str, float | int]:
        return {"time_median_s": self.median_s, "time_min_s": self.min_s, "iters": self.iters, "repeats": self.repeats}


def time_fn(fn: Callable[[], object], sync: Callable[[], None], plan: TimingPlan) -> Timing:
    """Seconds per call of ``fn`` (device work included through ``sync``)."""
    for _ in range(plan.warmup):
        fn()
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    first = max(time.perf_counter() - t0, 1e-9)
    iters = int(min(plan.max_iters, max(1, plan.target_s // first)))
    samples = []
    for _ in range(plan.repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - t0) / iters)
    return Timing(statistics.median(samples), min(samples), iters, plan.repeats)
