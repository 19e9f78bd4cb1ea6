"""`xpuplan simulate`, invoked as a user would: tables, JSON, reports, bad input (exit 2, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SMALL = """\
model: llama3-8b
duration_s: 5
pools:
  - name: a
    hardware: nvidia-h100-sxm-80gb
    replicas: 2
classes:
  - name: chat
    rate_rps: 4
    input_len: 256
    output_len: 32
    slo: {ttft_ms: 2000, tpot_ms: 100}
"""


def _write(tmp_path: Path, text: str, name: str = "s.yaml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_table_output(tmp_path):
    r = runner.invoke(app, ["simulate", _write(tmp_path, SMALL), "--seed", "1"])
    assert r.exit_code == 0, r.output
    assert "Traffic classes" in r.output and "chat" in r.output and "Pools" in r.output


def test_json_is_the_typed_result_and_seeded(tmp_path):
    path = _write(tmp_path, SMALL)
    r1 = runner.invoke(app, ["simulate", path, "--json", "--seed", "3", "--duration", "4"])
    r2 = runner.invoke(app, ["simulate", path, "--json", "--seed", "3", "--duration", "4"])
    assert r1.exit_code == 0, r1.output
    d = json.loads(r1.stdout)
    assert d == json.loads(r2.stdout)
    assert d["schema_version"] == "2" and d["seed"] == 3 and d["duration_s"] == 4
    assert {"ttft", "tpot", "e2e", "slo_attainment", "goodput_requests_per_s"} <= set(d["classes"][0])
    assert {"utilisation", "energy_j", "kv_peak_fraction"} <= set(d["pools"][0])
    assert set(d["series"]) == {"times_s", "queue_len", "kv_used_fraction", "utilisation"}


def test_price_override_gives_cost_per_million_tokens(tmp_path):
    r = runner.invoke(app, ["simulate", _write(tmp_path, SMALL), "--json", "--price-per-device-hour", "3"])
    d = json.loads(r.stdout)
    assert d["cost_usd"] > 0 and d["cost_per_million_output_tokens_usd"] > 0


@pytest.mark.parametrize("suffix", ["html", "md"])
def test_report_has_cdfs_and_series_inline(tmp_path, suffix):
    out = tmp_path / f"r.{suffix}"
    r = runner.invoke(app, ["simulate", _write(tmp_path, SMALL), "--report", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert text.count("<svg") >= 5  # TTFT/TPOT/E2E CDFs + queue, utilisation, KV over time
    assert "CDF per class" in text and "Waiting requests per pool" in text
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "<script" not in text


BURST = """\
model: llama3-8b
duration_s: 600
drain_s: 600
pools:
  - name: a
    hardware: nvidia-h100-sxm-80gb
classes:
  - name: bench
    arrival: burst
    requests: 32
    input_len: 256
    output_len: 32
"""


def test_a_burst_run_is_reported_over_its_makespan_not_the_arrival_window(tmp_path):
    """A run of bursts says its rates are over the makespan (seconds, not the 600 s duration_s it was given), in
    the table, the JSON and the report."""
    path = _write(tmp_path, BURST)
    r = runner.invoke(app, ["simulate", path])
    assert r.exit_code == 0, r.output
    assert "the makespan" in r.output and "s of arrivals" not in r.output
    d = json.loads(runner.invoke(app, ["simulate", path, "--json"]).stdout)
    assert d["rate_window"] == "makespan" and d["duration_s"] < 60
    out = tmp_path / "r.md"
    assert runner.invoke(app, ["simulate", path, "--report", str(out)]).exit_code == 0
    text = out.read_text()
    assert "makespan" in text and "simulated arrivals" not in text
    plain = json.loads(runner.invoke(app, ["simulate", _write(tmp_path, SMALL, "p.yaml"), "--json"]).stdout)
    assert plain["rate_window"] == "arrivals"


@pytest.mark.parametrize("name", ["simulate-hybrid-online.yaml", "simulate-domestic.yaml",
                                  "simulate-bursty-trace.yaml"])
def test_examples_run(name):
    r = runner.invoke(app, ["simulate", str(EXAMPLES / name), "--duration", "10", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["arrived"] > 0 and d["completed"] > 0
    assert len(d["pools"]) >= 2


def _bad(tmp_path: Path, text: str, *extra: str) -> str:
    r = runner.invoke(app, ["simulate", _write(tmp_path, text), *extra])
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output
    return r.output


def test_negative_rate(tmp_path):
    out = _bad(tmp_path, SMALL.replace("rate_rps: 4", "rate_rps: -4"))
    assert "classes[0].rate_rps" in out


def test_unknown_pool_in_routing(tmp_path):
    text = SMALL + "routing:\n  policy: class_based\n  rules: {chat: nowhere}\n"
    out = _bad(tmp_path, text)
    assert "routing.rules.chat" in out and "nowhere" in out


def test_slo_below_unloaded_latency(tmp_path):
    out = _bad(tmp_path, SMALL.replace("tpot_ms: 100", "tpot_ms: 0.1"))
    assert "classes[0].slo.tpot_ms" in out and "below the unloaded" in out


def test_malformed_trace_names_file_line_and_field(tmp_path):
    (tmp_path / "t.csv").write_text("timestamp,input_len,output_len\n0,10,5\n0.5,ten,5\n")
    text = SMALL.replace("    rate_rps: 4\n", "    trace: t.csv\n")
    out = _bad(tmp_path, text)
    assert "t.csv:3" in out and "input_len" in out


def test_missing_trace_file(tmp_path):
    out = _bad(tmp_path, SMALL.replace("    rate_rps: 4\n", "    trace: nope.csv\n"))
    assert "classes[0].trace" in out


def test_bad_flag_values(tmp_path):
    out = _bad(tmp_path, SMALL, "--duration", "-3")
    assert "--duration" in out


def test_json_error_form(tmp_path):
    r = runner.invoke(app, ["simulate", _write(tmp_path, SMALL.replace("rate_rps: 4", "rate_rps: -4")), "--json"])
    assert r.exit_code == 2
    assert json.loads(r.stdout)["field"] == "classes[0].rate_rps"
