"""`xpuplan cost`, invoked as a user would: output, JSON form, exit statuses."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from xpuplan.cli.main import app

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, ["cost", *args])


def test_tco_owned_table_and_json():
    r = run("tco", "--hw", "H100", "--devices", "1024", "--years", "3", "--region", "us", "--owned", "--busy", "0.8")
    assert r.exit_code == 0, r.output
    assert "3-year TCO" in r.stdout and "hardware" in r.stdout and "not included" in r.stdout
    r = run("tco", "--hw", "H100", "--devices", "1024", "--busy", "0.8", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["kind"] == "tco" and d["schema_version"] == "2.0" and d["mode"] == "owned"
    assert d["total_usd"] == sum(d["lines_usd"].values())
    assert all(f["trust"] in "ABCD" and f["source"] for f in d["figures"])
    assert d["carbon_t_co2e"] > 0 and d["facility_energy_j"] > d["it_energy_j"]


def test_tco_cloud_and_user_override():
    r = run("tco", "--hw", "H100", "--devices", "8", "--cloud", "aws", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["mode"] == "cloud" and set(d["lines_usd"]) >= {"cloud_usd"}
    r = run("tco", "--hw", "H100", "--devices", "8", "--cloud", "any", "--cloud-usd-per-device-hour", "1.0", "--json")
    d = json.loads(r.stdout)
    assert d["usd_per_device_hour"] == 1.0


def test_bad_input_exit_2_naming_the_flag():
    r = run("tco", "--hw", "H100", "--devices", "8", "--busy", "2")
    assert r.exit_code == 2 and "--busy" in r.output and "Traceback" not in r.output
    r = run("tco", "--hw", "H1OO0", "--devices", "8")
    assert r.exit_code == 2 and "--hw" in r.output
    r = run("tco", "--hw", "MLU590", "--devices", "8")
    assert r.exit_code == 2 and "--device-price-usd" in r.output
    r = run("tco", "--hw", "H100", "--devices", "8", "--region", "eu")
    assert r.exit_code == 2 and "--usd-per-eur" in r.output
    r = run("tco", "--hw", "H100", "--devices", "8", "--region", "mars")
    assert r.exit_code == 2 and "--region" in r.output
    r = run("tco", "--hw", "H100", "--devices", "8", "--cooling", "liquidd")
    assert r.exit_code == 2 and "--cooling" in r.output and "did you mean liquid" in r.output
    r = run("tco", "--hw", "TPU v5p", "--devices", "8")
    assert r.exit_code == 2 and "--cloud" in r.output


def test_bad_price_file_exit_2_with_file_and_line(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("schema_version: 1\nsources: {}\ncooling:\n  - id: air\n    pue: {value: 1.2, trust: A}\n")
    r = run("tco", "--hw", "H100", "--devices", "8", "--prices", str(f))
    assert r.exit_code == 2 and f"{f}:5" in r.output and "source" in r.output


def test_train_cost_with_reliability_json():
    r = run("train", "--model", "llama3-8b", "--hw", "H100", "--devices", "64", "--tokens", "1e11", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    rel, cost = d["reliability"], d["cost"]
    assert rel["effective_time_s"] > d["failure_free_time_s"] and 0.9 < rel["goodput"] < 1
    assert cost["duration_s"] == rel["effective_time_s"]
    assert cost["usd_per_million_tokens"] > 0 and cost["carbon_t_co2e"] > 0


def test_train_cost_infeasible_exit_3():
    r = run("train", "--model", "gpt3-175b", "--hw", "H100", "--devices", "8", "--tokens", "1e9")
    assert r.exit_code == 3, r.output


def test_serve_cost_per_token_and_query():
    r = run("serve", "--model", "llama3-8b", "--hw", "H100", "--qps", "5", "--hours", "24", "--cloud", "lambda",
            "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    c = d["cost"]
    assert d["devices"] >= 1 and c["queries"] == 5 * 24 * 3600
    assert c["usd_per_query"] == c["total_usd"] / c["queries"]
    r = run("serve", "--model", "llama3-8b", "--hw", "H100", "--qps", "5", "--hours", "24")
    assert r.exit_code == 0 and "per million output tokens" in r.stdout


def test_powercap_what_if():
    r = run("powercap", "--hw", "H100", "--power-cap-w", "525", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert 0.15 <= d["energy_saving_fraction"] <= 0.20 and d["throughput_ratio"] < 1
    r = run("powercap", "--hw", "H100", "--power-cap-w", "400", "--compute-bound-fraction", "0")
    assert r.exit_code == 0 and "throughput x1.000" in r.stdout
    r = run("powercap", "--hw", "H100", "--power-cap-w", "50")
    assert r.exit_code == 2 and "--power-cap-w" in r.output and "idle" in r.output


def test_train_cost_under_power_cap_is_slower_and_uses_less_energy():
    base = json.loads(run("train", "--model", "llama3-8b", "--hw", "H100", "--devices", "64", "--tokens", "1e11",
                          "--json").stdout)
    capped = json.loads(run("train", "--model", "llama3-8b", "--hw", "H100", "--devices", "64", "--tokens", "1e11",
                            "--power-cap-w", "525", "--json").stdout)
    assert capped["failure_free_time_s"] > base["failure_free_time_s"]
    assert capped["cost"]["it_energy_j"] < base["cost"]["it_energy_j"]
    assert capped["power_cap"]["cap_w"] == 525


def test_fine_tuning_run_and_no_failures():
    r = run("train", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--tokens", "1e9", "--method", "lora",
            "--failures-per-device-hour", "0")
    assert r.exit_code == 0, r.output
    assert "no failures" in r.stdout and "inf h" not in r.stdout and "per million tokens" in r.stdout


def test_train_cost_under_a_power_cap_is_timed_by_the_planner():
    base = ("train", "--model", "llama3-8b", "--hw", "H100", "--devices", "64", "--tokens", "1e11", "--json")
    free = json.loads(run(*base).stdout)
    r = run(*base, "--power-cap-w", "500")
    assert r.exit_code == 0, r.output
    capped = json.loads(r.stdout)
    ratio = capped["failure_free_time_s"] / free["failure_free_time_s"]
    clock = capped["power_cap"]["clock_fraction_compute"]
    # slower than uncapped, but never more than all-compute-bound work would be (communication keeps its speed)
    assert 1.0 < ratio <= 1.0 / clock + 1e-9
    assert capped["plan"]["tokens_per_s"] < free["plan"]["tokens_per_s"]
    bad = run(*base, "--power-cap-w", "30")
    assert bad.exit_code == 2 and "--power-cap-w" in bad.output and "idle" in bad.output
