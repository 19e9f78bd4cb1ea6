"""POST /api/v1/recommend: the CLI's recommend, with the scenario as a JSON body."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from xpuplan.cli.main import app as cli_app


def test_preset_matches_the_cli(client: TestClient) -> None:
    r = client.post("/api/v1/recommend", json={"preset": "finetuning-lora", "samples": 0})
    assert r.status_code == 200, r.text
    res = CliRunner().invoke(cli_app, ["recommend", "--preset", "finetuning-lora", "--samples", "0", "--json"])
    cli = json.loads(res.stdout)
    api = r.json()
    for d in (api, cli):
        d.pop("elapsed_s")
    assert api == cli


def test_scenario_body_like_an_example_file(client: TestClient) -> None:
    body = {"scenario": {"scenario": "finetuning-qlora", "constraints": {"max_budget_usd": 50000},
                         "monte_carlo": {"samples": 0}}, "lang": "zh"}
    r = client.post("/api/v1/recommend", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["scenario"] == "finetuning-qlora" and r.json()["options"]


def test_bad_input_names_the_field(client: TestClient) -> None:
    r = client.post("/api/v1/recommend", json={"preset": "pretrainin"})
    assert r.status_code == 422 and r.json()["field"] == "preset" and "pretraining" in r.json()["hint"]
    r = client.post("/api/v1/recommend", json={"scenario": {"scenario": "pretraining",
                                                            "workload": {"kind": "training", "tokens": -5}}})
    assert r.status_code == 422
    assert r.json()["field"] == "scenario.workload.tokens"
    r = client.post("/api/v1/recommend", json={"samples": -1})
    assert r.status_code == 422 and r.json()["field"] == "samples"
    r = client.post("/api/v1/recommend", json={"lang": "fr"})
    assert r.status_code == 422 and r.json()["field"] == "lang"
    r = client.post("/api/v1/recommend", json={"preset": "pretraining", "scenario": {"scenario": "pretraining"}})
    assert r.status_code == 422 and r.json()["field"] == "preset"
    r = client.post("/api/v1/recommend", json={"nonsense": 1})
    assert r.status_code == 422 and r.json()["field"] == "nonsense"


def test_serving_lengths_as_a_distribution_or_a_dataset(client: TestClient) -> None:
    one_pool = {"scenario": "online-inference", "hardware": ["nvidia-h100-sxm-80gb"], "mixes": False,
                "monte_carlo": {"samples": 0}}
    body = {"scenario": {**one_pool, "workload": {"routing": None, "serving": {
        "input_len": {"dist": "lognormal", "mean": 1800, "cv": 0.8, "max": 6000}, "output_len": 300}}}}
    r = client.post("/api/v1/recommend", json=body)
    assert r.status_code == 200, r.text
    plan = r.json()["options"][0]["parts"][0]["plan"]
    assert plan["input_dist"]["dist"] == "lognormal" and plan["input_len"] < 1800
    r = client.post("/api/v1/recommend", json={"scenario": {**one_pool, "workload": {
        "routing": None, "serving": {"dataset": "sharegpt"}}}})
    assert r.status_code == 200 and r.json()["options"][0]["parts"][0]["plan"]["dataset"] == "sharegpt"
    r = client.post("/api/v1/recommend", json={"scenario": {**one_pool, "workload": {
        "routing": None, "serving": {"input_len": {"dist": "normal", "mean": 100}}}}})
    assert r.status_code == 422 and r.json()["field"] == "scenario.workload.serving.input_len"
    assert "normal needs std" in r.json()["error"]
