"""Server/closed-loop validation rows are predicted by the request-level simulator; offline rows
without a batch keep the analytic figure and report the simulated one beside it."""

from __future__ import annotations

import csv
import io
from importlib.resources import files

from xpuplan.validate.core import predict_row
from xpuplan.validate.rows import parse_rows


def _row(row_id: str, **changes: str):
    text = files("xpuplan.validate.data").joinpath("inference_public_2.csv").read_text(encoding="utf-8")
    reader = csv.DictReader(io.StringIO(text))
    raw = next(r for r in reader if r["id"] == row_id)
    raw.update(changes)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(raw))
    writer.writeheader()
    writer.writerow(raw)
    return parse_rows(out.getvalue(), "test.csv")[0]


def test_a_row_with_a_concurrency_is_simulated() -> None:
    row = _row("P2I-032", concurrency="16", scenario="server", batch="")
    pred = predict_row(row)
    assert pred.details.get("method") == "request-level simulation (closed loop)"
    assert pred.value > 0


def test_an_offline_row_without_batch_reports_the_simulation_beside_the_analytic_figure() -> None:
    pred = predict_row(_row("P2I-032"))
    assert "method" not in pred.details
    assert pred.details["simulated"] > 0
    assert abs(pred.details["simulated"] / pred.value - 1) < 0.2
