"""`xpuplan fleet`, invoked as a user would: output, JSON form, reports, exit statuses."""

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
horizon_hours: 100
classes:
  - name: chat
    rate_per_s: 5
    input_len: 512
    output_len: 128
    slo: {ttft_ms: 2000, tpot_ms: 50}
candidates:
  - hardware: nvidia-h100-sxm-80gb
    tp: 1
    usd_per_hour: 2.0
  - hardware: huawei-ascend-910b
    tp: 1
    usd_per_hour: 1.0
simulation: {duration_s: 20, seed: 3}
"""


def run(*args: str):
    return runner.invoke(app, ["fleet", *args])


@pytest.fixture
def small(tmp_path: Path) -> str:
    p = tmp_path / "fleet.yaml"
    p.write_text(SMALL, encoding="utf-8")
    return str(p)


def test_optimize_json_shape(small):
    r = run("optimize", small, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["kind"] == "fleet_plan" and d["mix"]
    for row in d["mix"]:
        assert {"hardware", "replicas", "tp", "dtype", "request_class"} <= set(row)
    assert d["total_cost"] == pytest.approx(sum(row["usd_per_hour"] for row in d["mix"]) * 100)
    assert d["best_single"]["hardware"] in ("nvidia-h100-sxm-80gb", "huawei-ascend-910b")
    assert d["best_single"]["total_cost"] >= d["total_cost"] - 1e-9
    assert d["verification"] is None


def test_optimize_table_and_reports(small, tmp_path):
    html, md = tmp_path / "plan.html", tmp_path / "plan.md"
    r = run("optimize", small, "--report", str(html))
    assert r.exit_code == 0, r.output
    assert "Fleet mix" in r.stdout and "best single hardware" in r.stdout
    page = html.read_text(encoding="utf-8")
    assert "<svg" in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "<script" not in page and "Fleet plan" in page
    r = run("optimize", small, "--report", str(md))
    assert r.exit_code == 0 and "| class | hardware |" in md.read_text(encoding="utf-8")
    r = run("optimize", small, "--report", str(tmp_path / "plan.pdf"))
    assert r.exit_code == 2 and "--report" in r.output


def test_optimize_verify_reports_attainment(small):
    r = run("optimize", small, "--verify", "--json")
    assert r.exit_code == 0, r.output
    v = json.loads(r.stdout)["verification"]
    assert v["seed"] == 3 and v["duration_s"] == 20
    (c,) = v["classes"]
    assert c["request_class"] == "chat" and 0.0 <= c["slo_attainment"] <= 1.0 and c["arrived"] > 0
    again = json.loads(run("optimize", small, "--verify", "--json").stdout)["verification"]
    assert again == v  # same seed, same simulation


def test_infeasible_exit_3_names_class_and_constraint(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text(SMALL.replace("rate_per_s: 5", "rate_per_s: 400") + "constraints: {max_power_kw: 1}\n",
                 encoding="utf-8")
    r = run("optimize", str(p))
    assert r.exit_code == 3
    assert "class 'chat'" in r.output and "total power <= 1 kW" in r.output and "Traceback" not in r.output
    r = run("optimize", str(p), "--json")
    assert r.exit_code == 3 and "total power" in json.loads(r.stdout)["error"]


def test_bad_input_exit_2(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text(SMALL.replace("rate_per_s: 5", "rate_per_s: -2"), encoding="utf-8")
    r = run("optimize", str(p))
    assert r.exit_code == 2 and f"{p}:5" in r.output and "classes[0].rate_per_s" in r.output
    p.write_text(SMALL.replace("huawei-ascend-910b", "huawei-ascend-91b"), encoding="utf-8")
    r = run("optimize", str(p))
    assert r.exit_code == 2 and "did you mean" in r.output and "candidates[1].hardware" in r.output
    r = run("optimize", str(tmp_path / "missing.yaml"))
    assert r.exit_code == 2 and "file not found" in r.output


def test_slo_below_unloaded_latency_exit_3(tmp_path):
    p = tmp_path / "f.yaml"
    p.write_text(SMALL.replace("tpot_ms: 50", "tpot_ms: 0.5"), encoding="utf-8")
    r = run("optimize", str(p))
    assert r.exit_code == 3 and "unloaded latency" in r.output


def test_sweep_local(small):
    r = run("sweep", small, "--rate-scale", "0.5,2", "--each-hardware", "--workers", "1", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["backend"] == "local" and d["tasks"] == 6 and d["failed"] == 0
    assert [x["key"] for x in d["results"]] == sorted([x["key"] for x in d["results"]], key=json.dumps)
    r = run("sweep", small, "--rate-scale", "0.5,x")
    assert r.exit_code == 2 and "--rate-scale" in r.output


def test_hybrid_example_runs_with_training():
    r = run("optimize", str(EXAMPLES / "fleet-hybrid-online.yaml"), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["training"]["hardware"] == "nvidia-h100-sxm-80gb" and d["training"]["total_cost"] > 0
    assert d["combined_total_cost"] == pytest.approx(d["training"]["total_cost"] + d["total_cost"])
    assert len({row["hardware"] for row in d["mix"]}) >= 2  # the example's A100 cap makes mixing pay
