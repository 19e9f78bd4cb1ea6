"""Speed of the serving model (not a test): estimates per second, scalar vs vectorised, and the
decision layer's Monte Carlo (1,000 efficiency samples over every catalog device).

    python benchmarks/serve_vectorised.py

A "serving estimate" is one static-batch estimate (TTFT, TPOT, throughput) at one point: one
efficiency sample x one (batch, prompt, output) combination. The scalar path is
``serve.estimate.estimate_static`` on a replica per sample (the step cache cannot help: every sample
is a new efficiency); the vectorised path is ``serve.vectorised.estimate_static_arrays`` with the
samples as a (n, 1) array against the points. Results are identical (tests/unit/test_serve_vectorised.py).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import time  # noqa: E402

import numpy as np  # noqa: E402

from xpuplan.catalog import load_catalog  # noqa: E402
from xpuplan.errors import XpuplanError  # noqa: E402
from xpuplan.models import get_model  # noqa: E402
from xpuplan.serve.estimate import estimate_static  # noqa: E402
from xpuplan.serve.replica import make_replica  # noqa: E402
from xpuplan.serve.step import EfficiencyArrays  # noqa: E402
from xpuplan.serve.vectorised import estimate_static_arrays  # noqa: E402

N_SAMPLES = 1000
SCALAR_SAMPLES = 40
POINTS = [(512, 128, 1), (512, 128, 32), (2048, 256, 8), (2048, 256, 64), (8000, 200, 4), (128, 512, 128)]
#: Relative spread of the benchmark's efficiency samples (uniform +-20%, capped at 1): an
#: illustration of a Monte Carlo, not a calibrated distribution.
SPREAD = 0.2


def samples(eff, n: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        upd = {f: min(1.0, getattr(eff, f) * rng.uniform(1 - SPREAD, 1 + SPREAD))
               for f in ("gemm_peak_fraction", "attention_peak_fraction", "memory_bw_fraction")}
        upd["kernel_overhead_s"] = eff.kernel_overhead_s * rng.uniform(1 - SPREAD, 1 + SPREAD)
        out.append(eff.model_copy(update=upd))
    return out


def main() -> None:
    model = get_model("llama3-70b")
    dev = load_catalog().get("H100")
    rep = make_replica(model, dev, tp=8, dtype="fp8", engine="vllm")
    effs = samples(rep.eff, N_SAMPLES)
    i, o, b = (np.asarray(v) for v in zip(*POINTS, strict=True))

    t0 = time.perf_counter()
    scalar = []
    for e in effs[:SCALAR_SAMPLES]:
        r = make_replica(model, dev, tp=8, dtype="fp8", engine="vllm", eff=e)
        scalar.append([estimate_static(r, int(a), int(c), int(d), check_memory=False).tpot_s for a, c, d in POINTS])
    dt_s = time.perf_counter() - t0
    n_s = SCALAR_SAMPLES * len(POINTS)

    t0 = time.perf_counter()
    res = estimate_static_arrays(rep, i, o, b, eff=EfficiencyArrays.of(effs).reshape((N_SAMPLES, 1)))
    dt_v = time.perf_counter() - t0
    n_v = N_SAMPLES * len(POINTS)
    same = np.allclose(res.tpot_s[:SCALAR_SAMPLES], np.asarray(scalar), rtol=1e-9, atol=0)
    print(f"llama3-70b on 8 x H100 (fp8, vLLM), {len(POINTS)} (prompt, output, batch) points:")
    print(f"  scalar     {n_s:>7,} estimates in {dt_s:6.2f} s = {n_s / dt_s:>10,.0f} estimates/s")
    print(f"  vectorised {n_v:>7,} estimates in {dt_v:6.2f} s = {n_v / dt_v:>10,.0f} estimates/s")
    print(f"  ratio {n_v / dt_v / (n_s / dt_s):,.0f}x; results identical to 1e-9: {same}")

    print(f"Monte Carlo: {N_SAMPLES} efficiency samples x every catalog device (llama3-8b, bf16, tp 1, "
          f"batch 32, 1024 in / 256 out):")
    small = get_model("llama3-8b")
    t0 = time.perf_counter()
    n_dev = skipped = 0
    for d in load_catalog():
        try:
            r = make_replica(small, d, tp=1, dtype="bf16")
            estimate_static_arrays(r, 1024, 256, 32, eff=EfficiencyArrays.of(samples(r.eff, N_SAMPLES)))
        except XpuplanError:  # no usable precision or a missing catalog figure
            skipped += 1
            continue
        n_dev += 1
    dt_mc = time.perf_counter() - t0
    per_est_scalar = dt_s / n_s
    print(f"  vectorised: {n_dev} devices ({skipped} skipped: no usable precision or figure) in {dt_mc:.2f} s; "
          f"scalar would take ~{per_est_scalar * n_dev * N_SAMPLES:,.0f} s")


if __name__ == "__main__":
    main()
