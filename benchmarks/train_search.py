"""Speed of the training-plan search (not a test): plans evaluated per second per core (dense and MoE
models, DeepSeek-V3 included), and the time of a complete search for a 405B dense model on 16,384 devices.

Targets (issue 3): >= 200,000 plans/s per core; the 405B @ 16,384 search in under 2 s.

    python benchmarks/train_search.py

NumPy's elementwise kernels are single-threaded, so one process is one core; BLAS threads are pinned
to 1 below to make that true.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XPUPLAN_USE_CALIBRATION", "0")

import time  # noqa: E402

from xpuplan.models import get_model  # noqa: E402
from xpuplan.train import Cluster, SearchSpace, search_plans  # noqa: E402
from xpuplan.workload.training import TrainingJob  # noqa: E402

TARGET_PLANS_PER_S = 200_000
TARGET_405B_S = 2.0


def timed_search(model_id: str, hw: str, counts: list[int], job: TrainingJob, space: SearchSpace) -> tuple[int, float]:
    model = get_model(model_id)
    cluster = Cluster.from_catalog(hw, counts[0])
    t0 = time.perf_counter()
    res = search_plans(model, cluster, job, device_counts=counts, space=space, top=10)
    return res.plans_evaluated, time.perf_counter() - t0


def main() -> None:
    job8k = TrainingJob(seq_len=8192, global_batch_tokens=16 * 1024 * 1024)
    counts = [64 * 2**k for k in range(9)]  # 64 .. 16,384
    timed_search("llama3-8b", "H100", [8], TrainingJob(seq_len=4096), SearchSpace())  # warm-up (imports, catalog)

    print("throughput (one process = one core):")
    total_plans = total_s = 0.0
    for model_id in ("llama3-70b", "mixtral-8x22b", "deepseek-v3", "llama3.1-405b"):
        n, dt = timed_search(model_id, "nvidia-h100-sxm-80gb", counts, job8k,
                             SearchSpace(uneven_pipeline=True, precision=("bf16", "fp8")))
        total_plans += n
        total_s += dt
        print(f"  {model_id:15s} 64..16384 devices: {n:>9,} plans in {dt:6.2f} s = {n / dt:>10,.0f} plans/s")
    rate = total_plans / total_s
    print(f"  overall: {rate:,.0f} plans/s per core (target >= {TARGET_PLANS_PER_S:,}) "
          f"{'OK' if rate >= TARGET_PLANS_PER_S else 'BELOW TARGET'}")

    print("complete search, llama3.1-405b on 16,384 x H100 (seq 8192, 16M-token batch), cold caches:")
    for label, space in (("layers divisible by pp (default rules)", SearchSpace()),
                         ("uneven pipelines allowed", SearchSpace(uneven_pipeline=True)),
                         ("uneven pipelines, bf16 + fp8", SearchSpace(uneven_pipeline=True, precision=("bf16", "fp8")))):
        n, dt = timed_search("llama3.1-405b", "nvidia-h100-sxm-80gb", [16384], job8k, space)
        print(f"  {label:40s} {n:>7,} plans in {dt:5.3f} s (target < {TARGET_405B_S} s) "
              f"{'OK' if dt < TARGET_405B_S else 'TOO SLOW'}")


if __name__ == "__main__":
    main()
