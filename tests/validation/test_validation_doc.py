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
        ("second set, training, all rows", "training_public_2.csv", "train", "ABCD", None),
        ("second set, inference, all rows", "inference_public_2.csv", "infer", "ABCD", None),
    ],
)
def test_summary_table_is_current(validation_dir, label, file, kind, trust, metric):
    rows = [r for r in read_rows(validation_dir / file)
            if r.kind == kind and r.trust in trust and (metric is None or r.metric == metric)]
    report = validate_rows(rows)
    stats = error_stats(report.rows)
    predicted, total, median, p90 = _doc_row(label)
    assert (predicted, total) == (stats.n, len(rows))
    assert median == pytest.approx(stats.median_abs_pct, abs=0.06)
    assert p90 == pytest.approx(stats.p90_abs_pct, abs=0.06)


@pytest.mark.parametrize("file", ["training_public_2.csv", "inference_public_2.csv"])
def test_every_row_of_the_second_set_is_listed_with_its_current_error(validation_dir, file):
    """The per-row tables of the second public set: every row, its error as predicted today."""
    text = DOC.read_text(encoding="utf-8")
    report = validate_rows(read_rows(validation_dir / file))
    for r in report.rows:
        m = re.search(rf"^\| {re.escape(r.id)} \|.*$", text, re.M)
        assert m, f"row {r.id} of {file} is missing from {DOC.name}"
        errors = [c.strip() for c in m.group(0).split("|") if re.fullmatch(r"[+-]\d+\.\d%", c.strip())]
        if r.error is None:
            assert not errors and r.reason and r.reason[:30] in m.group(0), r.id
        else:
            err = errors[0]  # the row's error (a conventional layout's error, if any, comes later)
            assert float(err.rstrip("%")) == pytest.approx(r.error * 100, abs=0.051), (
                f"{r.id}: doc says {err}, the planner now predicts {r.error * 100:+.1f}% "
                "(python benchmarks/infer_validation_report.py --public-2)")
