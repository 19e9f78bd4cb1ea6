"""Saved scenarios: inputs checked at save, listed, fetched by id or name, run as a job."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient


def test_save_list_get_and_run(client: TestClient) -> None:
    body = {"name": "lora 70b", "kind": "recommend", "inputs": {"preset": "finetuning-lora", "samples": 0},
            "note": "for the team"}
    r = client.post("/api/v1/scenarios", json=body)
    assert r.status_code == 201, r.text
    saved = r.json()
    assert saved["inputs"] == body["inputs"] and saved["kind"] == "recommend" and not saved["has_result"]
    assert [s["name"] for s in client.get("/api/v1/scenarios").json()] == ["lora 70b"]
    assert client.get("/api/v1/scenarios", params={"kind": "simulate"}).json() == []
    assert client.get(f"/api/v1/scenarios/{saved['id']}").json() == saved
    assert client.get("/api/v1/scenarios/lora 70b").json() == saved
    job = client.post(f"/api/v1/scenarios/{saved['id']}/run")
    assert job.status_code == 202
    deadline = time.monotonic() + 60
    while client.get(job.json()["status_url"]).json()["status"] in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.05)
    res = client.get(job.json()["result_url"])
    assert res.status_code == 200 and res.json()["scenario"] == "finetuning-lora"


def test_inputs_are_checked_when_saved(client: TestClient) -> None:
    r = client.post("/api/v1/scenarios", json={"name": "x", "kind": "train.estimate",
                                               "inputs": {"model": "llama3-8b", "devices": 0}})
    assert r.status_code == 422 and r.json()["field"] == "inputs.devices"
    r = client.post("/api/v1/scenarios", json={"name": "x", "kind": "simulate",
                                               "inputs": {"scenario": {"classes": [{"trace": "/etc/passwd"}]}}})
    assert r.status_code == 422 and r.json()["field"] == "inputs.scenario.classes[0].trace"
    r = client.post("/api/v1/scenarios", json={"name": "", "kind": "recommend", "inputs": {}})
    assert r.status_code == 422 and r.json()["field"] == "name"


def test_unknown_scenario_is_404_with_did_you_mean(client: TestClient) -> None:
    client.post("/api/v1/scenarios", json={"name": "pretraining plan", "kind": "recommend", "inputs": {}})
    r = client.get("/api/v1/scenarios/pretraining plam")
    assert r.status_code == 404 and "pretraining plan" in r.json()["hint"]
    assert client.post("/api/v1/scenarios/999/run").status_code == 404
