"""`xpuplan recommend`: default scenario, JSON keys, Chinese, reports, bad input (exit 2), impossible (exit 3)."""

import json
from pathlib import Path

from typer.testing import CliRunner

from xpuplan.cli.main import app

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_default_scenario_runs():
    r = runner.invoke(app, ["recommend"])
    assert r.exit_code == 0, r.output
    assert "ranks first" in r.output and "Benchmark first" in r.output


def test_json_keys_and_same_numbers_in_reports(tmp_path):
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    r = runner.invoke(app, ["recommend", "--preset", "finetuning-qlora", "--json", "--samples", "200", "--seed", "3",
                            "--report", str(html)])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert {"schema_version", "options", "rejected", "assumptions", "weights", "sensitivity", "explanation"} <= set(d)
    o = d["options"][0]
    assert {"rank", "hardware", "mix", "score", "criteria", "time_s", "cost_usd", "energy_j", "devices",
            "uncertainty", "binding", "figures"} <= set(o)
    assert o["rank"] == 1 and set(o["uncertainty"]["time_s"]) == {"p10", "p50", "p90"}
    page = html.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "http://" not in page.replace(
        "http://www.w3.org/2000/svg", "")
    assert "<script" not in page and f"{o['score']:.1f}" in page and o["label"] in page
    r = runner.invoke(app, ["recommend", "--preset", "finetuning-qlora", "--samples", "200", "--seed", "3",
                            "--report", str(md)])
    assert r.exit_code == 0, r.output
    text = md.read_text(encoding="utf-8")
    assert f"| 1 | {o['label']} | {o['score']:.1f} |" in text


def test_chinese_output():
    r = runner.invoke(app, ["recommend", "--preset", "finetuning-qlora", "--lang", "zh"])
    assert r.exit_code == 0, r.output
    assert "排名第一" in r.output and "优先实测" in r.output


def test_example_file_runs():
    r = runner.invoke(app, ["recommend", str(EXAMPLES / "finetuning-qlora.yaml"), "--samples", "0", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["scenario"] == "finetuning-qlora"


def test_unknown_preset_exit_2_with_field():
    r = runner.invoke(app, ["recommend", "--preset", "pretrain"])
    assert r.exit_code == 2
    assert "--preset" in r.output and "pretraining" in r.output and "Traceback" not in r.output


def test_bad_input_exit_2(tmp_path):
    r = runner.invoke(app, ["recommend", "--preset", "finetuning-qlora", "--weight", "latency=-3"])
    assert r.exit_code == 2 and "latency" in r.output
    r = runner.invoke(app, ["recommend", "--preset", "finetuning-qlora", "--weight", "latency=30"])
    assert r.exit_code == 2 and "sum to 100" in r.output
    r = runner.invoke(app, ["recommend", "--lang", "fr"])
    assert r.exit_code == 2 and "--lang" in r.output
    r = runner.invoke(app, ["recommend", "--preset", "finetuning-qlora", "--report", str(tmp_path / "r.pdf")])
    assert r.exit_code == 2 and "--report" in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("scenario: finetuning-qlora\nconstraints:\n  domestic_only: perhaps\n", encoding="utf-8")
    r = runner.invoke(app, ["recommend", str(bad)])
    assert r.exit_code == 2 and "bad.yaml:3" in r.output and "constraints.domestic_only" in r.output
    bad.write_text("scenario: finetuning-qlora\nconstraints: {allowed_vendors: [NVIDIA]}\nhardware: [H1OO]\n",
                   encoding="utf-8")
    r = runner.invoke(app, ["recommend", str(bad)])
    assert r.exit_code == 2 and "hardware[0]" in r.output and "did you mean" in r.output


def test_impossible_constraint_exit_3_names_it(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("scenario: finetuning-qlora\nconstraints: {max_devices: 1}\n", encoding="utf-8")
    r = runner.invoke(app, ["recommend", str(f)])
    assert r.exit_code == 3, r.output
    assert "max_devices eliminated" in r.output and "nvidia-h100-sxm-80gb" in r.output
