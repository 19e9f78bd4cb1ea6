"""``?format=html|md`` on recommend, train search, infer capacity, simulate and fleet optimize: the
same report as the CLI's ``--report out.html|out.md``, whose headline numbers are those of the JSON
result of the same request."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from xpuplan.cli.main import app as cli_app

ROOT = Path(__file__).resolve().parents[2]


def _example(name: str) -> Any:
    return yaml.safe_load((ROOT / "examples" / name).read_text(encoding="utf-8"))


def _recommend(j: dict[str, Any]) -> list[str]:
    o = j["options"][0]
    return [f"| 1 | {o['label']} | {o['score']:.1f} |"]


def _train(j: dict[str, Any]) -> list[str]:
    return [f"| step time | {j['plans'][0]['step_time_s']:.3f} s |"]


def _capacity(j: dict[str, Any]) -> list[str]:
    o = j["options"][0]
    return [f"| fewest devices | {o['devices']} |", o["hardware"]]


def _simulate(j: dict[str, Any]) -> list[str]:
    return [f"**output tokens/s**: {j['output_tokens_per_s']:,.0f}", f"**SLO attainment**: {j['slo_attainment']:.1%}"]


def _fleet(j: dict[str, Any]) -> list[str]:
    return [f"| total cost | ${j['total_cost']:,.0f} |", f"| devices | {j['devices']} |"]


CASES: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], list[str]]]] = [
    ("recommend", {"preset": "finetuning-lora", "samples": 0}, _recommend),
    ("train/search", {"model": "llama3-8b", "hw": "H100", "devices": 8, "tokens": 1e11}, _train),
    ("infer/capacity", {"model": "llama3-8b", "hw": "H100", "qps": 20, "input_len": 1000, "output_len": 200,
                        "tpot_ms": 50}, _capacity),
    ("simulate", {"scenario": _example("simulate-hybrid-online.yaml"), "duration": 10}, _simulate),
    ("fleet/optimize", {"scenario": _example("fleet-domestic.yaml")}, _fleet),
]


@pytest.mark.parametrize(("path", "body", "headline"), CASES, ids=[c[0] for c in CASES])
def test_reports_match_the_json_result(client: TestClient, path: str, body: dict[str, Any],
                                       headline: Callable[[dict[str, Any]], list[str]]) -> None:
    j = client.post(f"/api/v1/{path}", json=body)
    assert j.status_code == 200 and j.headers["content-type"] == "application/json"
    md = client.post(f"/api/v1/{path}?format=md", json=body)
    assert md.status_code == 200 and md.headers["content-type"] == "text/markdown; charset=utf-8"
    assert md.text.startswith("# ")
    for text in headline(j.json()):
        assert text in md.text, text
    html = client.post(f"/api/v1/{path}", params={"format": "html"}, json=body)
    assert html.status_code == 200 and html.headers["content-type"] == "text/html; charset=utf-8"
    assert html.text.lstrip().lower().startswith("<!doctype html>") and "<style>" in html.text
    for text in headline(j.json()):
        number = text.strip("| ").split("|")[-1].strip().split(": ")[-1].removeprefix("**")
        assert number.replace("$", "") in html.text.replace("$", ""), number


def _stable(text: str) -> list[str]:
    """The report's lines but the date line."""
    return [ln for ln in text.splitlines() if " UTC_" not in ln]


def test_report_is_the_clis_report(client: TestClient, tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    res = CliRunner().invoke(cli_app, ["recommend", "--preset", "finetuning-lora", "--samples", "0",
                                       "--report", str(out)])
    assert res.exit_code == 0, res.output
    md = client.post("/api/v1/recommend?format=md", json={"preset": "finetuning-lora", "samples": 0}).text
    assert _stable(md) == _stable(out.read_text(encoding="utf-8"))


def test_bad_format_and_kinds_without_a_report(client: TestClient) -> None:
    r = client.post("/api/v1/recommend?format=pdf", json={"preset": "finetuning-lora", "samples": 0})
    assert r.status_code == 422 and r.json()["field"] == "format"
    # no report for a single estimate: the query is not part of that endpoint, JSON as always
    r = client.post("/api/v1/train/estimate?format=html",
                    json={"model": "llama3-8b", "hw": "H100", "devices": 8, "tp": 2})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"


def test_background_job_result_as_report(client: TestClient) -> None:
    import time

    body = {"model": "llama3-8b", "hw": "H100", "devices": 8, "tokens": 1e11}
    job = client.post("/api/v1/jobs", json={"kind": "train.search", "request": body}).json()
    for _ in range(300):
        if client.get(job["status_url"]).json()["status"] not in ("queued", "running"):
            break
        time.sleep(0.1)
    md = client.get(job["result_url"], params={"format": "md"})
    assert md.status_code == 200 and md.headers["content-type"] == "text/markdown; charset=utf-8"
    j = client.get(job["result_url"]).json()
    assert _train(j)[0] in md.text
    html = client.get(job["result_url"], params={"format": "html"})
    assert html.headers["content-type"] == "text/html; charset=utf-8" and "<style>" in html.text
    est = client.post("/api/v1/jobs", json={"kind": "train.estimate",
                                            "request": {"model": "llama3-8b", "hw": "H100", "devices": 8}}).json()
    r = client.get(est["result_url"], params={"format": "html"})
    assert r.status_code == 422 and r.json()["field"] == "format"
