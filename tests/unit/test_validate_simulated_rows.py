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


def test_an_offline_row_with_its_number_of_prompts_is_simulated_as_that_finite_run() -> None:
    """num_prompts: the run's prompts arrive at once and are served to the last one; rates are over the makespan,
    so the ramp-up and the tail count and a short run yields less than the steady state."""
    short = predict_row(_row("P2I-032", num_prompts="64"))
    assert short.details["method"].startswith("request-level simulation of the finite run (64 prompts")
    assert 0 < short.value < short.details["steady_state"]
    long = predict_row(_row("P2I-032", num_prompts="2000"))
    assert short.value < long.value  # the fixed ramp and tail weigh less in a longer run


def test_a_finite_run_predicts_its_mean_latencies_over_every_request() -> None:
    few = predict_row(_row("P2I-032", metric="ttft_ms", value="1", num_prompts="16"))
    many = predict_row(_row("P2I-032", metric="ttft_ms", value="1", num_prompts="4000"))
    assert many.value > 2 * few.value  # prompts beyond the running slots wait in the queue


def test_a_number_of_prompts_below_one_is_refused_naming_the_field() -> None:
    import pytest

    from xpuplan.errors import UserInputError
    from xpuplan.validate.serve_predictor import predict

    with pytest.raises(UserInputError) as err:
        predict(_row("P2I-032", num_prompts="0"))
    assert err.value.field == "num_prompts"
