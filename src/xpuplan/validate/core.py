"""Predictions vs published measurements.

Reads CSV files in the format of ``shared/validation/README.md`` (one measured figure per row),
asks the predictor registered for the row's ``kind`` (``train`` / ``infer``) for the same figure,
and reports signed errors with median and P90 absolute percentage errors by trust grade, source
and hardware. A row that cannot be predicted is kept with its reason, never dropped.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xpuplan.errors import UserInputError

REQUIRED_COLUMNS = ("id", "kind", "source", "trust", "hardware", "n_devices", "precision", "metric", "value")

_INT_COLUMNS = {
    "layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "vocab", "gated_mlp", "moe_experts", "moe_top_k",
    "moe_ffn", "moe_shared_experts", "moe_dense_layers", "n_devices", "seq_len", "micro_batch", "tp", "pp", "vpp",
    "dp", "cp", "ep", "sp", "zero_stage", "input_len", "output_len", "batch", "concurrency",
}
_FLOAT_COLUMNS = {"params_b", "value", "global_batch_tokens", "train_tokens"}


@dataclass(frozen=True)
class ValidationRow:
    """One measurement row; numeric columns parsed, blanks as None. ``raw`` keeps every column."""

    id: str
    kind: str
    metric: str
    value: float
    trust: str
    source: str
    hardware: str
    n_devices: int
    precision: str
    raw: dict[str, str]

    def get(self, column: str) -> Any:
        """Typed value of any column (int/float for numeric columns, None when blank)."""
        text = (self.raw.get(column) or "").strip()
        if text == "":
            return None
        if column in _INT_COLUMNS:
            return int(float(text))
        if column in _FLOAT_COLUMNS:
            return float(text)
        return text


@dataclass(frozen=True)
class Prediction:
    """A predicted figure in the row's metric unit, or None with the reason it cannot be predicted."""

    value: float | None
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def cannot(reason: str) -> Prediction:
        return Prediction(None, reason)


Predictor = Callable[[ValidationRow], Prediction]
_PREDICTORS: dict[str, Predictor] = {}


def register_predictor(kind: str, predictor: Predictor) -> None:
    """One predictor per row kind (``train``, ``infer``); registering twice is a bug."""
    assert kind not in _PREDICTORS or _PREDICTORS[kind] is predictor, f"predictor for {kind!r} registered twice"
    _PREDICTORS[kind] = predictor


def _ensure_predictors() -> None:
    # Importing the planners registers their predictors (one registry, one import per family).
    import importlib

    for module in ("xpuplan.train.validation", "xpuplan.serve.validation"):
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


def read_rows(path: str | Path) -> list[ValidationRow]:
    """Parse a validation CSV; a missing column or a non-numeric value names the row and column."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserInputError("file not found", file=str(p)) from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise UserInputError(f"missing column(s) {', '.join(missing)}", file=str(p), line=1, field=missing[0])
    rows = []
    for i, raw in enumerate(reader, start=2):
        try:
            value = float(raw["value"])
            n = int(float(raw["n_devices"]))
        except (TypeError, ValueError):
            col = "value"
            try:
                float(raw["value"])
                col = "n_devices"
            except (TypeError, ValueError):
                pass
            raise UserInputError(f"not a number: {raw.get(col)!r}", file=str(p), line=i, field=col) from None
        row = ValidationRow(
            id=raw["id"], kind=raw["kind"].strip(), metric=raw["metric"].strip(), value=value,
            trust=raw["trust"].strip(), source=raw["source"], hardware=raw["hardware"].strip(), n_devices=n,
            precision=raw["precision"].strip(), raw={k: (v or "") for k, v in raw.items() if k is not None},
        )
        for col in _INT_COLUMNS | _FLOAT_COLUMNS:
            try:
                row.get(col)
            except ValueError:
                raise UserInputError(f"not a number: {raw.get(col)!r}", file=str(p), line=i, field=col) from None
        rows.append(row)
    return rows


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

        by_metric = group("metric")
        return {
            "rows": len(self.rows),
            "predicted": sum(r.predicted is not None for r in self.rows),
            "coverage": self.coverage(),
            "overall": error_stats(self.rows).to_dict(),
            "by_trust": group("trust"),
            "by_metric": by_metric,
            "by_hardware": group("hardware"),
            "by_source": {k[:80]: v for k, v in group("source").items()},
        }

    def to_dict(self) -> dict[str, Any]:
        return {"rows": [r.to_dict() for r in self.rows], "summary": self.summary()}


def predict_row(row: ValidationRow) -> Prediction:
    _ensure_predictors()
    predictor = _PREDICTORS.get(row.kind)
    if predictor is None:
        return Prediction.cannot(f"no predictor for kind {row.kind!r} yet")
    try:
        return predictor(row)
    except UserInputError as exc:
        return Prediction.cannot(exc.render())


def validate_rows(rows: Iterable[ValidationRow]) -> ValidationReport:
    results = []
    for row in rows:
        pred = predict_row(row)
        err = None
        if pred.value is not None and row.value:
            err = pred.value / row.value - 1.0
        results.append(RowResult(
            id=row.id, kind=row.kind, metric=row.metric, hardware=row.hardware, trust=row.trust, source=row.source,
            measured=row.value, predicted=pred.value, error=err, reason=pred.reason, details=pred.details,
        ))
    return ValidationReport(results)


def validate_file(path: str | Path) -> ValidationReport:
    return validate_rows(read_rows(path))
