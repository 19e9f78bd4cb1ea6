"""Markdown per-row table and summary of the inference validation (for docs/validation.md).

    python benchmarks/infer_validation_report.py [../shared/validation/inference_public.csv]

The same predictions as ``xpuplan validate FILE --kind infer``; calibration profiles are ignored so
the numbers depend only on the repository.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("XPUPLAN_USE_CALIBRATION", "0")

from xpuplan.validate.core import error_stats, read_rows, validate_rows  # noqa: E402

DEFAULT_CSV = Path(__file__).resolve().parents[1].parent / "shared" / "validation" / "inference_public.csv"


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def main(path: str) -> None:
    rows = [r for r in read_rows(path) if r.kind == "infer"]
    by_id = {r.id: r for r in rows}
    report = validate_rows(rows)
    print("| id | trust | model | hardware | tp | in/out | batch | metric | measured | predicted | error | replica / reason |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for res in report.rows:
        row = by_id[res.id]
        lens = f"{row.get('input_len') or '-'}/{row.get('output_len') or '-'}"
        err = f"{res.error * 100:+.1f}%" if res.error is not None else "-"
        what = res.details.get("replica", "") if res.predicted is not None else (res.reason or "")
        what = what.split("@", 1)[-1] if res.predicted is not None else what
        print(f"| {res.id} | {res.trust} | {row.get('model') or row.get('params_b')} | {res.hardware} | {row.get('tp') or 1} "
              f"| {lens} | {row.get('batch') or '-'} | {res.metric} | {_fmt(res.measured)} | {_fmt(res.predicted)} | {err} "
              f"| {what} |")
    print()
    print("| rows | n | coverage | median abs % | P90 abs % | mean signed % |")
    print("|---|---|---|---|---|---|")
    for name, grades in (("trust A/B", ("A", "B")), ("trust C", ("C",)), ("all", ("A", "B", "C", "D"))):
        sub = [r for r in report.rows if r.trust in grades]
        if not sub:
            continue
        s = error_stats(sub)
        cov = sum(r.predicted is not None for r in sub) / len(sub)
        print(f"| {name} | {s.n}/{len(sub)} | {cov:.0%} | {_fmt(s.median_abs_pct)} | {_fmt(s.p90_abs_pct)} "
              f"| {_fmt(s.mean_signed_pct)} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(DEFAULT_CSV))
