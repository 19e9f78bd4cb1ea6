"""docs/validation.md's summary table must match what `xpuplan validate` computes today."""

import re
from pathlib import Path

import pytest

from xpuplan.validate import error_stats, read_rows, validate_rows

DOC = Path(__file__).resolve().parents[2] / "docs" / "validation.md"
pytestmark = pytest.mark.validation


def _doc_row(label: str) -> tuple[int, int, float, float]:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(rf"^\| {re.escape(label)} \| (\d+) / (\d+)[^|]*\| ([\d.]+)% \| ([\d.]+)% \|", text, re.M)
    assert m, f"summary row {label!r} not found in {DOC}"
    return int(m.group(1)), int(m.group(2)), float(m.group(3)), float(m.group(4))


@pytest.mark.parametrize(
    "label, file, kind, trust, metric",
    [
        ("training, trust A/B, `tokens_per_s_per_device`", "training_public.csv", "train", "AB", "tokens_per_s_per_device"),
        ("training, all rows", "training_public.csv", "train", "ABCD", None),
        ("inference, trust A/B", "inference_public.csv", "infer", "AB", None),
        ("inference, all rows", "inference_public.csv", "infer", "ABCD", None),
    ],
)
def test_summary_table_is_current(validation_dir, monkeypatch, label, file, kind, trust, metric):
    monkeypatch.setenv("XPUPLAN_USE_CALIBRATION", "0")
    rows = [r for r in read_rows(validation_dir / file)
            if r.kind == kind and r.trust in trust and (metric is None or r.metric == metric)]
    report = validate_rows(rows)
    stats = error_stats(report.rows)
    predicted, total, median, p90 = _doc_row(label)
    assert (predicted, total) == (stats.n, len(rows))
    assert median == pytest.approx(stats.median_abs_pct, abs=0.06)
    assert p90 == pytest.approx(stats.p90_abs_pct, abs=0.06)
