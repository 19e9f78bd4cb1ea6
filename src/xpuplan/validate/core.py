"""Predictions vs published measurements: the harness.

Reads CSV files in the format of ``validate/data/README.md`` (one measured figure per row; see
:mod:`xpuplan.validate.rows`), asks the predictor of the row's ``kind`` (``train``:
:mod:`~xpuplan.validate.train_predictor`, ``infer``: :mod:`~xpuplan.validate.serve_predictor`) for
the same figure, and reports signed errors with median and P90 absolute percentage errors by trust
grade, metric, hardware and hardware family. **A file is never aborted by a row**: whatever a
planner raises for a row (bad input, infeasible, a data file that fails to load, or an internal
error) becomes that row's "cannot predict" with the reason; rows are kept, never dropped.
"""

from __future__ import annotations

import statistics
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from xpuplan.errors import InfeasibleError, UserInputError, XpuplanError
from xpuplan.validate.rows import REQUIRED_COLUMNS, TRUST_GRADES, ValidationRow, read_rows

if TYPE_CHECKING:
    from xpuplan.catalog.assumptions import Assumptions

__all__ = ["REQUIRED_COLUMNS", "TRUST_GRADES", "ErrorStats", "Prediction", "RowResult", "ValidationReport",
           "ValidationRow", "error_stats", "percentile", "predict_row", "read_rows", "validate_file", "validate_rows"]


@dataclass(frozen=True)
class Prediction:
    """A predicted figure in the row's metric unit, or None with the reason it cannot be predicted."""

    value: float | None
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def cannot(reason: str) -> Prediction:
        return Prediction(None, reason)


Predictor = Callable[[ValidationRow, "Assumptions | None"], Prediction]


@dataclass(frozen=True)
class RowResult:
    id: str
    kind: str
    metric: str
    hardware: str
    trust: str
    source: str
    measured: float
    predicted: float | None
    error: float | None  # signed relative error (predicted / measured - 1)
    reason: str | None
    details: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ErrorStats:
    n: int
    median_abs_pct: float | None
    p90_abs_pct: float | None
    mean_signed_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100])."""
    s = sorted(values)
    if not s:
        raise ValueError("no values")
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def error_stats(results: Iterable[RowResult]) -> ErrorStats:
    errs = [r.error for r in results if r.error is not None]
    if not errs:
        return ErrorStats(0, None, None, None)
    abs_pct = [abs(e) * 100 for e in errs]
    return ErrorStats(len(errs), statistics.median(abs_pct), percentile(abs_pct, 90), statistics.mean(errs) * 100)


@dataclass(frozen=True)
class ValidationReport:
    rows: list[RowResult]

    def subset(self, **match: str) -> list[RowResult]:
        return [r for r in self.rows if all(getattr(r, k) == v for k, v in match.items())]

    def coverage(self, rows: list[RowResult] | None = None) -> float:
        rs = self.rows if rows is None else rows
        return sum(r.predicted is not None for r in rs) / len(rs) if rs else 0.0

    def summary(self) -> dict[str, Any]:
        def group(key: str) -> dict[str, Any]:
            keys = sorted({getattr(r, key) for r in self.rows})
            return {k: error_stats([r for r in self.rows if getattr(r, key) == k]).to_dict() for k in keys}

        from xpuplan.validate.band import hardware_family

        fams = {r.hardware: hardware_family(r.hardware) for r in self.rows}
        by_family = {f: error_stats([r for r in self.rows if fams[r.hardware] == f]).to_dict()
                     for f in sorted(set(fams.values()))}
        by_metric = group("metric")
        return {
            "rows": len(self.rows),
            "predicted": sum(r.predicted is not None for r in self.rows),
            "coverage": self.coverage(),
            "overall": error_stats(self.rows).to_dict(),
            "by_trust": group("trust"),
            "by_metric": by_metric,
            "by_hardware": group("hardware"),
            "by_family": by_family,
            "by_source": {k[:80]: v for k, v in group("source").items()},
        }

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "summary": self.summary()}


def _predictor(kind: str) -> Predictor | None:
    # The two predictors live in this package; imported on use (they pull in the planners).
    if kind == "train":
        from xpuplan.validate import train_predictor

        return train_predictor.predict
    if kind == "infer":
        from xpuplan.validate import serve_predictor

        return serve_predictor.predict
    return None


def predict_row(row: ValidationRow, assumptions: Assumptions | None = None) -> Prediction:
    """The row's prediction, or "cannot predict" with the first cause; never raises for a row."""
    predictor = _predictor(row.kind)
    if predictor is None:
        return Prediction.cannot(f"field 'kind': no predictor for kind {row.kind!r} (train or infer)")
    try:
        return predictor(row, assumptions)
    except UserInputError as exc:
        return Prediction.cannot(exc.render())
    except InfeasibleError as exc:
        why = "; ".join(exc.reasons)
        return Prediction.cannot(f"infeasible: {exc}" + (f" ({why})" if why and why not in str(exc) else ""))
    except ValidationError as exc:  # a model or data file the row names failed to validate
        e = exc.errors()[0]
        return Prediction.cannot(f"data error while building the prediction: {e['msg']} "
                                 f"({'.'.join(map(str, e['loc']))})")
    except XpuplanError as exc:
        return Prediction.cannot(str(exc))
    except Exception as exc:  # a planner bug must not abort the file: the row says so, loudly
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return Prediction(None, f"internal error (a bug, please report it): {type(exc).__name__}: {exc}",
                          {"internal_error": True, "at": f"{Path(where.filename).name}:{where.lineno}"})


def validate_rows(rows: Iterable[ValidationRow], assumptions: Assumptions | None = None) -> ValidationReport:
    """Every row predicted (or explained) under ``assumptions`` (None: the built-in defaults)."""
    results = []
    for row in rows:
        pred = predict_row(row, assumptions)
        err = None
        if pred.value is not None and row.value:
            err = pred.value / row.value - 1.0
        results.append(RowResult(
            id=row.id, kind=row.kind, metric=row.metric, hardware=row.hardware, trust=row.trust, source=row.source,
            measured=row.value, predicted=pred.value, error=err, reason=pred.reason, details=pred.details,
        ))
    return ValidationReport(results)


def validate_file(path: str | Path, assumptions: Assumptions | None = None) -> ValidationReport:
    """Every row of one validation CSV (:func:`~xpuplan.validate.rows.read_rows` checks the file)."""
    return validate_rows(read_rows(path), assumptions)
