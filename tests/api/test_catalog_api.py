"""Catalog endpoints: the same JSON as the CLI's --json, 404 with 'did you mean' for unknown ids."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from xpuplan.cli.main import app as cli_app


def _cli_json(*args: str) -> object:
    res = CliRunner().invoke(cli_app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_hardware_list_is_the_cli_json(client: TestClient) -> None:
    r = client.get("/api/v1/hardware")
    assert r.status_code == 200
    assert r.json() == _cli_json("hw", "list")


def test_hardware_list_filters_and_bad_kind(client: TestClient) -> None:
    r = client.get("/api/v1/hardware", params={"origin": "CN"})
    assert r.status_code == 200
    assert r.json()["devices"] and all(d["origin_country"] == "CN" for d in r.json()["devices"])
    bad = client.get("/api/v1/hardware", params={"kind": "FPGA"})
    assert bad.status_code == 422
    assert bad.json()["field"] == "kind"


def test_hardware_show_has_sources_and_trust(client: TestClient) -> None:
    r = client.get("/api/v1/hardware/H100")
    assert r.status_code == 200
    dev = r.json()["device"]
    assert dev["id"] == "nvidia-h100-sxm-80gb"
    assert r.json() == _cli_json("hw", "show", "H100")


def test_unknown_hardware_is_404_with_did_you_mean(client: TestClient) -> None:
    r = client.get("/api/v1/hardware/nvidia-h100-sxm-80g")
    assert r.status_code == 404
    body = r.json()
    assert body["field"] == "id"
    assert "did you mean" in body["hint"] and "nvidia-h100-sxm-80gb" in body["hint"]


def test_hardware_compare(client: TestClient) -> None:
    r = client.get("/api/v1/hardware/compare", params={"ids": "H100,910B"})
    assert r.status_code == 200
    assert [d["id"] for d in r.json()["devices"]] == ["nvidia-h100-sxm-80gb", "huawei-ascend-910b"]
    assert client.get("/api/v1/hardware/compare", params={"ids": "H100"}).status_code == 422
    missing = client.get("/api/v1/hardware/compare", params={"ids": "H100,H1OO"})
    assert missing.status_code == 404


def test_models(client: TestClient) -> None:
    r = client.get("/api/v1/models")
    assert r.status_code == 200 and r.json() == _cli_json("model", "list")
    show = client.get("/api/v1/models/llama3-70b")
    assert show.status_code == 200 and show.json()["id"] == "llama3-70b"
    unknown = client.get("/api/v1/models/llama3-7b")
    assert unknown.status_code == 404 and "llama3-70b" in unknown.json()["hint"]


def test_model_paths_are_never_read(client: TestClient) -> None:
    # a directory holding a config.json on the server is still only an (unknown) name over HTTP
    for name in ("tests/fixtures/hf/llama3-8b", "../../etc/passwd", "/tmp/config.json"):
        r = client.post("/api/v1/recommend", json={"scenario": {"scenario": "pretraining", "model": name}})
        assert r.status_code == 422, name
        assert r.json()["field"] == "scenario.model"


def test_presets(client: TestClient) -> None:
    r = client.get("/api/v1/presets")
    assert r.status_code == 200
    ids = [p["id"] for p in r.json()]
    assert "pretraining" in ids
    assert all(p["scenario"]["scenario"] == p["id"] for p in r.json())


def test_healthz(client: TestClient) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json()["status"] == "ok"
