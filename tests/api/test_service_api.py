"""Service behaviour: bearer token, body size limit, /metrics, /healthz, `xpuplan serve` refusing to
bind beyond loopback without a token, and the core importing without FastAPI."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from xpuplan.api.app import create_app
from xpuplan.cli.main import app as cli_app
from xpuplan.cli.serve import is_loopback

TOKEN = "t0k3n-for-the-tests-only"


def test_token_is_required_when_set(store_url: str) -> None:
    with TestClient(create_app(store_url=store_url, token=TOKEN, use_calibration=False)) as c:
        r = c.get("/api/v1/hardware")
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert c.get("/api/v1/hardware", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/metrics").status_code == 401
        assert c.get("/api/v1/hardware", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
        assert c.get("/healthz").status_code == 200  # liveness probes need no token


def test_web_page_shell_is_public_but_its_data_routes_need_the_token(store_url: str) -> None:
    from xpuplan.web.app import create_app as create_web_app

    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(create_web_app(store_url=store_url, token=TOKEN, use_calibration=False)) as c:
        # the page shells and their assets hold no data: served without a token
        for path in ("/", "/catalog", "/favicon.ico", "/static/common.js", "/static/recommend.js",
                     "/static/web.css", "/static/report.css", "/ui/i18n/en.json", "/ui/i18n/zh.json"):
            assert c.get(path).status_code == 200, path
        # every data route: 401 without the token (or with a wrong one), 200 with it
        gets = ("/api/v1/hardware", "/api/v1/models", "/ui/meta", "/api/v1/openapi.json", "/metrics",
                "/ui/roofline?hw=H100&model=llama3-8b")
        for path in gets:
            assert c.get(path).status_code == 401, path
            assert c.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
            assert c.get(path, headers=auth).status_code == 200, path
        body = {"model": "llama3-8b", "hw": "H100"}
        for path in ("/ui/memory/infer", "/ui/scenario.yaml", "/ui/models", "/ui/recommend", "/ui/report.html"):
            assert c.post(path, json=body).status_code == 401, path
        assert c.post("/ui/memory/infer", json=body, headers=auth).status_code == 200
        # a path that only looks like an asset does not open a data route
        assert c.get("/static/../api/v1/hardware").status_code in (401, 404)
        assert c.get("/static/%2e%2e/api/v1/hardware").status_code in (401, 404)


def test_body_size_limit(store_url: str) -> None:
    with TestClient(create_app(store_url=store_url, max_body_bytes=1000, use_calibration=False)) as c:
        big = {"scenario": {"scenario": "pretraining", "title": "x" * 5000}}
        r = c.post("/api/v1/recommend", json=big)
        assert r.status_code == 413 and "1,000 bytes" in r.json()["error"]

        def chunks():  # no Content-Length: counted while streaming
            for _ in range(10):
                yield b"x" * 500

        r = c.post("/api/v1/recommend", content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        assert c.post("/api/v1/cost/tco", json={"hw": "H100", "devices": 8}).status_code == 200


def test_malformed_json_is_a_client_error(client: TestClient) -> None:
    r = client.post("/api/v1/cost/tco", content=b"{not json", headers={"Content-Type": "application/json"})
    assert 400 <= r.status_code < 500 and "error" in r.json()


def test_metrics_count_requests_latencies_and_jobs(client: TestClient) -> None:
    client.get("/api/v1/hardware/H100")
    client.get("/api/v1/hardware/H1000")
    text = client.get("/metrics").text
    assert 'xpuplan_http_requests_total{method="GET",route="/api/v1/hardware/{id}",status="200"} 1' in text
    assert 'xpuplan_http_requests_total{method="GET",route="/api/v1/hardware/{id}",status="404"} 1' in text
    assert 'xpuplan_http_request_duration_seconds_count{method="GET",route="/api/v1/hardware/{id}"} 2' in text
    assert "# TYPE xpuplan_jobs gauge" in text and 'xpuplan_jobs{status="running"}' in text
    # random paths do not grow the label set
    client.get("/nowhere/123")
    assert "nowhere" not in client.get("/metrics").text


@pytest.mark.parametrize("host, loop", [("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True),
                                        ("::1", True), ("0.0.0.0", False), ("192.168.1.5", False),
                                        ("example.com", False), ("::", False)])
def test_is_loopback(host: str, loop: bool) -> None:
    assert is_loopback(host) is loop


def test_serve_refuses_other_addresses_without_a_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XPUPLAN_TOKEN", raising=False)
    res = CliRunner().invoke(cli_app, ["serve", "--host", "0.0.0.0"])
    assert res.exit_code == 2 and "XPUPLAN_TOKEN" in res.output
    monkeypatch.setenv("XPUPLAN_TOKEN", "short")
    res = CliRunner().invoke(cli_app, ["serve", "--host", "0.0.0.0"])
    assert res.exit_code == 2 and "at least" in res.output


def test_the_core_imports_without_fastapi() -> None:
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('fastapi', 'starlette', 'uvicorn'):\n"
            "            raise ImportError(name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "import xpuplan, xpuplan.jobs, xpuplan.jobs.train, xpuplan.jobs.saved, xpuplan.cli.main\n"
            "from xpuplan.cli.main import app\n"
            "import typer.main; typer.main.get_command(app)\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_serve_names_the_extra_when_fastapi_is_missing() -> None:
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('fastapi', 'uvicorn'):\n"
            "            return None\n"
            "import importlib.util\n"
            "real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda n, *a: None if n in ('fastapi', 'uvicorn') else real(n, *a)\n"
            "sys.argv = ['xpuplan', 'serve']\n"
            "from xpuplan.cli.main import run\n"
            "run()\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 2 and "xpuplan[api]" in out.stderr


def test_openapi_lists_the_contract(client: TestClient) -> None:
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    for p in ("/api/v1/hardware", "/api/v1/hardware/{id}", "/api/v1/hardware/compare", "/api/v1/models",
              "/api/v1/models/{id}", "/api/v1/memory/train", "/api/v1/memory/infer", "/api/v1/train/estimate",
              "/api/v1/train/search", "/api/v1/infer/estimate", "/api/v1/infer/capacity", "/api/v1/recommend",
              "/api/v1/presets", "/api/v1/cost/tco", "/api/v1/simulate", "/api/v1/fleet/optimize",
              "/api/v1/validate", "/api/v1/jobs", "/api/v1/jobs/{id}", "/api/v1/jobs/{id}/result",
              "/api/v1/scenarios", "/api/v1/scenarios/{id}", "/api/v1/results/{id}", "/metrics", "/healthz"):
        assert p in paths, p
