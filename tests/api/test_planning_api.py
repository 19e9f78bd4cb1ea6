"""Planning endpoints return the CLI's --json document; bad input is 422 naming the JSON field;
infeasible is 409 with the reasons; scenario bodies are JSON and read no file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from xpuplan.cli.main import app as cli_app

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> Any:
    res = CliRunner().invoke(cli_app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("path, body, argv", [
    ("/api/v1/train/estimate", {"model": "llama3-8b", "hw": "H100", "devices": 8, "tp": 2},
     ["train", "estimate", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--tp", "2"]),
    ("/api/v1/infer/estimate", {"model": "llama3-8b", "hw": "H100", "batch": "1,8", "input_len": 1000, "output_len": 200},
     ["infer", "estimate", "--model", "llama3-8b", "--hw", "H100", "--batch", "1,8", "--in", "1000", "--out", "200"]),
    ("/api/v1/memory/infer", {"model": "llama3-8b", "hw": "H100", "batch": 8},
     ["memory", "infer", "--model", "llama3-8b", "--hw", "H100", "--batch", "8"]),
    ("/api/v1/cost/tco", {"hw": "H100", "devices": 8}, ["cost", "tco", "--hw", "H100", "--devices", "8"]),
])
def test_same_json_as_the_cli(client: TestClient, path: str, body: dict[str, Any], argv: list[str]) -> None:
    r = client.post(path, json=body)
    assert r.status_code == 200, r.text
    assert r.json() == _cli(*argv)


def test_bad_input_is_422_with_the_json_field(client: TestClient) -> None:
    r = client.post("/api/v1/train/estimate", json={"model": "llama3-8b", "hw": "H100", "devices": 8,
                                                    "global_batch": 1000, "seq_len": 4096})
    assert r.status_code == 422 and r.json()["field"] == "global_batch"
    r = client.post("/api/v1/infer/estimate", json={"model": "llama3-8b", "hw": "H100", "input_len": 0})
    assert r.status_code == 422 and r.json()["field"] == "input_len"
    r = client.post("/api/v1/train/estimate", json={"model": "llama3-8b", "hw": "H1000", "devices": 8})
    assert r.status_code == 422 and r.json()["field"] == "hw"
    r = client.post("/api/v1/memory/train", json={"model": "llama3-7b"})
    assert r.status_code == 422 and r.json()["field"] == "model" and "llama3-70b" in r.json()["hint"]
    r = client.post("/api/v1/memory/train", json={"model": "llama3-70b", "stack": "nosuch"})
    assert r.status_code == 422 and r.json()["field"] == "stack"
    r = client.post("/api/v1/memory/train", json={"model": "llama3-70b", "pp": 5, "stack": "deepseek-dualpipe"})
    assert r.status_code == 422 and r.json()["field"] == "pp" and "DualPipe" in r.json()["error"]
    r = client.post("/api/v1/memory/train", json={"model": "llama3-70b", "method": "lora", "lora_targets": "q,x"})
    assert r.status_code == 422 and r.json()["field"] == "lora_targets"
    r = client.post("/api/v1/train/estimate", json={"model": "llama3-8b", "hw": "H100", "devices": 8,
                                                    "method": "lora", "lora_targets": "v,v"})
    assert r.status_code == 422 and r.json()["field"] == "lora_targets"
    r = client.post("/api/v1/train/estimate", json={"model": "llama3-70b", "hw": "H100", "devices": 32, "tp": 8, "pp": 4,
                                                    "recompute": "full", "recompute_layers": 4})
    assert r.status_code == 422 and r.json()["field"] == "recompute_layers"
    r = client.post("/api/v1/cost/tco", json={"hw": "H100", "devices": 8, "prices": ["/etc/passwd"]})
    assert r.status_code == 422 and r.json()["field"] == "prices"
    r = client.post("/api/v1/train/estimate", json={"model": "llama3-8b", "hw": "H100", "devices": 10**12})
    assert r.status_code == 422 and r.json()["field"] == "devices"


def test_infeasible_is_409_with_reasons(client: TestClient) -> None:
    r = client.post("/api/v1/train/estimate", json={"model": "llama3-70b", "hw": "H100", "devices": 1, "tp": 1})
    assert r.status_code == 409
    assert r.json()["reasons"] and r.json()["result"]["feasible"] is False


def test_training_scenario_body(client: TestClient) -> None:
    scenario = {"model": "llama3-8b", "hardware": "H100", "devices": 8}
    r = client.post("/api/v1/train/estimate", json={"scenario": scenario, "tp": 2})
    assert r.status_code == 200, r.text
    assert r.json()["n_devices"] == 8 and r.json()["plan"]["tp"] == 2
    r = client.post("/api/v1/train/estimate", json={"scenario": {**scenario, "devices": -1}})
    assert r.status_code == 422 and r.json()["field"].startswith("scenario.")


def test_simulate_and_fleet_take_the_example_files_as_json(client: TestClient) -> None:
    sim = yaml.safe_load((ROOT / "examples" / "simulate-hybrid-online.yaml").read_text(encoding="utf-8"))
    r = client.post("/api/v1/simulate", json={"scenario": sim, "duration": 10})
    assert r.status_code == 200, r.text
    assert r.json() == _cli("simulate", str(ROOT / "examples" / "simulate-hybrid-online.yaml"), "--duration", "10")
    fleet = yaml.safe_load((ROOT / "examples" / "fleet-domestic.yaml").read_text(encoding="utf-8"))
    r = client.post("/api/v1/fleet/optimize", json={"scenario": fleet})
    assert r.status_code == 200, r.text
    assert r.json()["mix"]


def test_traces_must_be_inline(client: TestClient) -> None:
    sim = yaml.safe_load((ROOT / "examples" / "simulate-bursty-trace.yaml").read_text(encoding="utf-8"))
    r = client.post("/api/v1/simulate", json={"scenario": sim})
    assert r.status_code == 422 and r.json()["field"] == "scenario.classes[0].trace"


def test_validate_upload(client: TestClient) -> None:
    lines = (ROOT / "src" / "xpuplan" / "validate" / "data" / "inference_public.csv").read_bytes().splitlines()
    csv = b"\n".join(lines[:6]) + b"\n"
    r = client.post("/api/v1/validate", files={"file": ("../../mine.csv", csv, "text/csv")})
    assert r.status_code == 200, r.text
    assert r.json()["files"] == ["mine.csv"] and len(r.json()["rows"]) == 5
    bad = csv.replace(b"gpt-j-6b", b"/srv/model/config.json", 1)
    r = client.post("/api/v1/validate", files={"file": ("mine.csv", bad, "text/csv")})
    assert r.status_code == 422 and r.json()["file"] == "mine.csv" and r.json()["line"] == 2
    r = client.post("/api/v1/validate", files={"file": ("mine.csv", csv, "text/csv")}, data={"trust": "Z"})
    assert r.status_code == 422 and r.json()["field"] == "trust"


def test_long_simulations_belong_in_the_background(client: TestClient) -> None:
    sim = yaml.safe_load((ROOT / "examples" / "simulate-hybrid-online.yaml").read_text(encoding="utf-8"))
    r = client.post("/api/v1/simulate", json={"scenario": sim, "duration": 86_400})
    assert r.status_code == 422 and r.json()["field"] == "duration" and "/api/v1/jobs" in r.json()["hint"]
    r = client.post("/api/v1/simulate", json={"scenario": {**sim, "duration_s": 86_400}})
    assert r.status_code == 422 and r.json()["field"] == "scenario.duration_s"


def test_gaudi_launch_over_http(client: TestClient) -> None:
    """``emit: gaudi`` returns the CLI's document (Intel's run_llama.sh command); a model the script does not build
    is 422 naming ``emit``."""
    body = {"model": "llama3.1-8b", "hw": "gaudi2", "devices": 8, "tp": 1, "emit": "gaudi"}
    r = client.post("/api/v1/train/estimate", json=body)
    assert r.status_code == 200, r.text
    assert r.json() == _cli("train", "estimate", "--model", "llama3.1-8b", "--hw", "gaudi2", "--devices", "8", "--tp",
                            "1", "--emit", "gaudi")
    assert r.json()["launch"]["target"] == "gaudi" and r.json()["launch"]["problems"] == []
    r = client.post("/api/v1/train/estimate", json={**body, "model": "qwen2.5-7b"})
    assert r.status_code == 422 and r.json()["field"] == "emit", r.text
