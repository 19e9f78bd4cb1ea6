"""Before/after guard: every public row's prediction saved, and compared with today's.

``tests/validation/snapshots/predictions.json`` maps file -> row id -> ``{"predicted": value}`` or
``{"reason": why}``. ``tests/validation/test_prediction_snapshot.py`` fails when a prediction moves by
more than :data:`REL_TOL` or a row changes between predicted and not predicted. A deliberate change
is re-baselined with ``scripts/update-validation-snapshot`` and listed in CHANGELOG.md with its effect
on the error.
"""

from __future__ import annotations

import math
from typing import Any, Final

from xpuplan.validate.core import RowResult, ValidationReport
from xpuplan.validate.rows import ValidationRow

#: Relative tolerance of the comparison (floating-point reordering only).
REL_TOL: Final = 1e-6


def snapshot_entries(report: ValidationReport) -> dict[str, dict[str, Any]]:
    """Row id -> {"predicted": value} or {"reason": why}, in file order."""
    return {r.id: ({"predicted": r.predicted} if r.predicted is not None else {"reason": r.reason})
            for r in report.rows}


def compare(saved: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]], *,
            rel_tol: float = REL_TOL) -> list[str]:
    """Differences between a saved and a current snapshot of one file, one line each."""
    out = []
    for rid in sorted(set(saved) | set(current)):
        a, b = saved.get(rid), current.get(rid)
        if a is None or b is None:
            out.append(f"{rid}: {'new row' if a is None else 'row gone'}")
            continue
        pa, pb = a.get("predicted"), b.get("predicted")
        if (pa is None) != (pb is None):
            out.append(f"{rid}: {pa if pa is not None else a.get('reason')!r} -> {pb if pb is not None else b.get('reason')!r}")
        elif pa is not None and pb is not None and not math.isclose(pa, pb, rel_tol=rel_tol):
            out.append(f"{rid}: {pa:.6g} -> {pb:.6g} ({(pb / pa - 1) * 100:+.4f}%)")
    return out


def results_from_snapshot(rows: list[ValidationRow], saved: dict[str, dict[str, Any]]) -> list[RowResult]:
    """Row results rebuilt from a saved snapshot of one file (the figures the bands are computed from)."""
    out = []
    for row in rows:
        entry = saved.get(row.id, {"reason": "not in the snapshot"})
        pred = entry.get("predicted")
        out.append(RowResult(id=row.id, kind=row.kind, metric=row.metric, hardware=row.hardware, trust=row.trust,
                             source=row.source, measured=row.value, predicted=pred,
                             error=None if pred is None else pred / row.value - 1.0, reason=entry.get("reason"),
                             details={}))
    return out
