"""Fit the serving model's few free parameters against the published inference rows.

Sweeps each engine-family step overhead (host-side time per engine iteration) over a grid and
prints the mean, median and P90 absolute error over the trust A/B rows of that engine family; the
value with the least mean absolute error is chosen (one criterion balancing the median and the
tail), so the value in ``xpuplan/serve/constants.py`` can be checked and re-chosen when rows are added:

    python benchmarks/infer_fit.py [../shared/validation/inference_public.csv]

Nothing is written; the chosen values are copied into ``serve/constants.py`` by hand with the
grid printed here recorded in docs/validation.md.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("XPUPLAN_USE_CALIBRATION", "0")

from xpuplan.serve import constants  # noqa: E402
from xpuplan.serve import validation as serve_validation  # noqa: E402
from xpuplan.serve.constants import engine_profile  # noqa: E402
from xpuplan.units import MS  # noqa: E402
from xpuplan.validate.core import percentile, read_rows  # noqa: E402

DEFAULT_CSV = Path(__file__).resolve().parents[1].parent / "shared" / "validation" / "inference_public.csv"
GRID_MS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)


def errors_for(rows, family: str, overhead_s: float) -> list[float]:
    original = constants.ENGINES[family]
    constants.ENGINES[family] = dataclasses.replace(original, step_overhead_s=overhead_s)
    try:
        out = []
        for row in rows:
            if engine_profile(row.get("engine")).id != family:
                continue
            pred = serve_validation.predict(row)
            if pred.value is not None:
                out.append(abs(pred.value / row.value - 1.0) * 100)
        return out
    finally:
        constants.ENGINES[family] = original


def main(path: str) -> None:
    rows = [r for r in read_rows(path) if r.kind == "infer" and r.trust in ("A", "B")]
    families = sorted({engine_profile(r.get("engine")).id for r in rows})
    for family in families:
        print(f"engine family {family}: step overhead sweep over its trust A/B rows")
        best = None
        for ms in GRID_MS:
            errs = errors_for(rows, family, ms * MS)
            mean, med, p90 = statistics.mean(errs), statistics.median(errs), percentile(errs, 90)
            print(f"  {ms:4.1f} ms  n={len(errs):3d}  mean {mean:5.1f}%  median {med:5.1f}%  P90 {p90:5.1f}%")
            if best is None or mean < best[1]:
                best = (ms, mean, med, p90)
        assert best is not None
        print(f"  -> least mean |error|: {best[0]} ms (mean {best[1]:.1f}%, median {best[2]:.1f}%, P90 {best[3]:.1f}%)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(DEFAULT_CSV))
