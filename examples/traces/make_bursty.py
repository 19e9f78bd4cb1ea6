"""Regenerate ``bursty.csv``: a synthetic bursty trace (not a measurement).

Arrivals: gamma inter-arrival times at a mean 6 requests/s with coefficient of variation 3 (bursts
and lulls; cv = 1 would be Poisson) over 120 s. Lengths: lognormal, input mean 800 tokens (cv 1.2),
output mean 200 tokens (cv 1.0), cut to [16, 8192] and [4, 2048]. One request in four is class
``complex`` with 4x longer prompts. NumPy generator seeded with 2026: the file is reproducible.

    python examples/traces/make_bursty.py > examples/traces/bursty.csv
"""

from __future__ import annotations

import math
import sys

import numpy as np


def main() -> None:
    rng = np.random.default_rng(2026)
    rate, cv, duration = 6.0, 3.0, 120.0
    k = 1.0 / cv**2
    gaps = rng.gamma(k, 1.0 / (rate * k), int(rate * duration * 2))
    t = np.cumsum(gaps)
    t = t[t < duration]
    n = t.size

    def lognormal(mean: float, c: float, lo: int, hi: int) -> np.ndarray:
        s2 = math.log1p(c * c)
        x = rng.lognormal(math.log(mean) - s2 / 2, math.sqrt(s2), n)
        return np.clip(np.rint(x), lo, hi).astype(int)

    inp = lognormal(800, 1.2, 16, 8192)
    out = lognormal(200, 1.0, 4, 2048)
    complex_ = rng.random(n) < 0.25
    inp = np.where(complex_, np.minimum(inp * 4, 8192), inp)
    w = sys.stdout
    w.write("timestamp,input_len,output_len,class\n")
    for ti, a, b, c in zip(t, inp, out, complex_, strict=True):
        w.write(f"{ti:.4f},{a},{b},{'complex' if c else 'standard'}\n")


if __name__ == "__main__":
    main()
