"""Background jobs: submit -> 202 with URLs, progress, result, cancel (queued and running),
failed jobs keep their error, a restart loses no finished result."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml
from fastapi.testclient import TestClient

from xpuplan.api.app import create_app
from xpuplan.jobs.saved import Saved

ROOT = Path(__file__).resolve().parents[2]
#: Longest wait for a job in these tests, s (the jobs below take about a second).
WAIT_S = 60.0


def _wait(client: TestClient, job_id: str, until: tuple[str, ...] = ("succeeded", "failed", "cancelled")) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        st = client.get(f"/api/v1/jobs/{job_id}").json()
        if st["status"] in until or time.monotonic() > deadline:
            return st
        time.sleep(0.05)


def _long_simulation() -> dict[str, Any]:
    """A simulation of one day of traffic: minutes of work, reporting progress as it goes."""
    scenario = yaml.safe_load((ROOT / "examples" / "simulate-hybrid-online.yaml").read_text(encoding="utf-8"))
    return {"scenario": scenario, "duration": 86_400}


def test_submit_poll_and_result_equal_the_direct_call(client: TestClient) -> None:
    req = {"model": "llama3-8b", "hw": "H100", "devices_range": "8:32"}
    r = client.post("/api/v1/jobs", json={"kind": "train.search", "request": req})
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["status"] in ("queued", "running") and job["result_url"] == f"/api/v1/jobs/{job['id']}/result"
    assert r.headers["location"] == job["status_url"]
    done = _wait(client, job["id"])
    assert done["status"] == "succeeded" and done["progress"] == 1.0 and done["finished_at"]
    result = client.get(job["result_url"])
    assert result.status_code == 200
    direct = client.post("/api/v1/train/search", json=req).json()
    for d in (result.json(), direct):
        d.pop("elapsed_s", None)
    assert result.json()["plans"] == direct["plans"]
    assert client.get(f"/api/v1/results/{job['id']}").status_code == 200
    assert job["id"] in [x["id"] for x in client.get("/api/v1/results").json()]


def test_bad_request_is_refused_at_submit_with_the_field_path(client: TestClient) -> None:
    r = client.post("/api/v1/jobs", json={"kind": "train.search", "request": {"model": "llama3-8b", "tp": "x"}})
    assert r.status_code == 422 and r.json()["field"] == "request.tp"
    r = client.post("/api/v1/jobs", json={"kind": "train.search", "request": {"modle": "llama3-8b"}})
    assert r.status_code == 422 and r.json()["field"] == "request.modle"
    r = client.post("/api/v1/jobs", json={"kind": "nonsense", "request": {}})
    assert r.status_code == 422 and r.json()["field"] == "kind"


def test_a_failed_job_keeps_its_error(client: TestClient) -> None:
    r = client.post("/api/v1/jobs", json={"kind": "train.estimate",
                                          "request": {"model": "llama3-70b", "hw": "H100", "devices": 1, "tp": 1}})
    job = r.json()
    assert _wait(client, job["id"])["status"] == "failed"
    res = client.get(job["result_url"])
    assert res.status_code == 409 and res.json()["reasons"]  # infeasible, as the direct call says
    unknown_hw = client.post("/api/v1/jobs", json={"kind": "memory.train", "request": {"model": "llama3-8b",
                                                                                        "hw": "H1000"}}).json()
    _wait(client, unknown_hw["id"])
    res = client.get(unknown_hw["result_url"])
    assert res.status_code == 422 and res.json()["field"] == "hw"
    assert client.get(f"/api/v1/results/{unknown_hw['id']}").status_code == 404


def test_unknown_job_is_404_with_did_you_mean(client: TestClient) -> None:
    job = client.post("/api/v1/jobs", json={"kind": "memory.infer", "request": {"model": "llama3-8b"}}).json()
    _wait(client, job["id"])
    typo = job["id"][:-1] + ("0" if job["id"][-1] != "0" else "1")
    r = client.get(f"/api/v1/jobs/{typo}")
    assert r.status_code == 404 and job["id"] in r.json()["hint"]
    assert client.delete(f"/api/v1/jobs/{typo}").status_code == 404
    assert client.get(f"/api/v1/jobs/{typo}/result").status_code == 404


def test_cancel_a_running_and_a_queued_job(store_url: str) -> None:
    with TestClient(create_app(store_url=store_url, use_calibration=False, workers=1)) as client:
        running = client.post("/api/v1/jobs", json={"kind": "simulate", "request": _long_simulation()}).json()
        queued = client.post("/api/v1/jobs", json={"kind": "memory.infer", "request": {"model": "llama3-8b"}}).json()
        st = _wait(client, running["id"], until=("running",))
        assert st["status"] == "running"
        # the one worker is busy: the second job waits, and cancelling it removes it from the queue
        assert client.get(f"/api/v1/jobs/{queued['id']}").json()["status"] == "queued"
        assert client.delete(f"/api/v1/jobs/{queued['id']}").json()["status"] == "cancelled"
        r = client.delete(f"/api/v1/jobs/{running['id']}")
        assert r.status_code == 200 and r.json()["cancel_requested"] in (True, False)
        assert _wait(client, running["id"])["status"] == "cancelled"
        res = client.get(running["result_url"])
        assert res.status_code == 409 and "cancelled" in res.json()["error"]
        statuses = {j["id"]: j["status"] for j in client.get("/api/v1/jobs").json()}
        assert statuses[queued["id"]] == "cancelled"


def test_progress_is_reported_while_running(store_url: str) -> None:
    with TestClient(create_app(store_url=store_url, use_calibration=False, workers=1)) as client:
        job = client.post("/api/v1/jobs", json={"kind": "simulate", "request": _long_simulation()}).json()
        deadline = time.monotonic() + WAIT_S
        seen = 0.0
        while time.monotonic() < deadline and seen == 0.0:
            seen = client.get(f"/api/v1/jobs/{job['id']}").json()["progress"]
            time.sleep(0.05)
        assert 0.0 < seen < 1.0
        client.delete(f"/api/v1/jobs/{job['id']}")
        assert _wait(client, job["id"])["status"] == "cancelled"


def test_a_restart_loses_no_finished_result(store_url: str) -> None:
    with TestClient(create_app(store_url=store_url, use_calibration=False)) as client:
        job = client.post("/api/v1/jobs", json={"kind": "cost.tco", "request": {"hw": "H100", "devices": 8}}).json()
        assert _wait(client, job["id"])["status"] == "succeeded"
        before = client.get(job["result_url"]).json()
    # a job the previous server was running when it died
    Saved(store_url).create_job("f" * 32, "simulate", {})
    with TestClient(create_app(store_url=store_url, use_calibration=False)) as client:
        assert client.get(job["result_url"]).json() == before
        assert client.get(f"/api/v1/results/{job['id']}").json() == before
        st = client.get(f"/api/v1/jobs/{'f' * 32}").json()
        assert st["status"] == "interrupted"
        res = client.get(f"/api/v1/jobs/{'f' * 32}/result")
        assert res.status_code == 409 and "submit it again" in res.json()["error"]
