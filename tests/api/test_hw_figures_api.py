"""Per-request user hardware figures (``hw_figures``, the API's ``--hw-figure``): applied to that
request only, checked with a 422 naming ``hw_figures[i]``, never leaking into another request, even
a concurrent one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

TRAIN = {"model": "llama3-8b", "hw": "H100", "devices": 8, "tp": 2}
SLOW = "H100:dense_tflops.bf16=100"  # a tenth of the catalog's dense BF16 figure
FAST = "H100:dense_tflops.bf16=1500"


def _step(c: TestClient, figures: list[str] | None) -> float:
    body = TRAIN if figures is None else TRAIN | {"hw_figures": figures}
    r = c.post("/api/v1/train/estimate", json=body)
    assert r.status_code == 200, r.text
    return float(r.json()["step_time_s"])


def test_figures_apply_to_that_request_only(client: TestClient) -> None:
    plain = _step(client, None)
    slow = _step(client, [SLOW])
    assert slow > 2 * plain  # a much lower compute figure: a much longer step
    assert _step(client, None) == plain  # the next request sees the catalog again
    # the result says which figures were user-supplied
    r = client.post("/api/v1/train/estimate", json=TRAIN | {"hw_figures": [SLOW]})
    assert "user-supplied" in r.text


def test_capacity_and_infer_estimate_take_figures(client: TestClient) -> None:
    body = {"model": "llama3-8b", "hw": "H100", "batch": "8", "input_len": 1000, "output_len": 200}
    a = client.post("/api/v1/infer/estimate", json=body)
    b = client.post("/api/v1/infer/estimate", json=body | {"hw_figures": ["H100:memory.bandwidth_gb_per_s=300"]})
    assert a.status_code == b.status_code == 200
    assert a.json() != b.json() and "user-supplied" in b.text and "user-supplied" not in a.text
    cap = {"model": "llama3-8b", "hw": "H100", "qps": 20, "input_len": 1000, "output_len": 200, "tpot_ms": 50}
    a = client.post("/api/v1/infer/capacity", json=cap)
    b = client.post("/api/v1/infer/capacity", json=cap | {"hw_figures": ["H100:memory.bandwidth_gb_per_s=300"]})
    assert a.status_code == 200 and b.status_code in (200, 409)
    assert "user-supplied" in b.text and "user-supplied" not in a.text


def test_recommend_takes_figures(client: TestClient) -> None:
    body: dict[str, Any] = {"preset": "finetuning-lora", "samples": 0}
    a = client.post("/api/v1/recommend", json=body)
    b = client.post("/api/v1/recommend", json=body | {"hw_figures": ["H100:dense_tflops.bf16=50"]})
    assert a.status_code == b.status_code == 200
    assert "user-supplied" in b.text and "user-supplied" not in a.text


@pytest.mark.parametrize(("figures", "field", "words"), [
    (["H100:dense_tflops.bf16"], "hw_figures[0]", "DEVICE:PATH=VALUE"),
    ([SLOW, "no-such-chip:dense_tflops.bf16=1"], "hw_figures[1]", "no-such-chip"),
    ([SLOW, "H100:no.such_path=1"], "hw_figures[1]", "unknown figure path"),
    (["figures.yaml"], "hw_figures[0]", "DEVICE:PATH=VALUE"),  # a file name is never read
    ([f"{SLOW};{FAST}"], "hw_figures[0]", "one figure"),
    (["H100:dense_tflops.bf16=-5"], "hw_figures[0]", ""),
])
def test_bad_figures_are_422_naming_the_entry(client: TestClient, figures: list[str], field: str, words: str) -> None:
    r = client.post("/api/v1/train/estimate", json=TRAIN | {"hw_figures": figures})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field and words in r.json()["error"]


def test_background_job_takes_figures(client: TestClient) -> None:
    import time

    r = client.post("/api/v1/jobs", json={"kind": "train.estimate", "request": TRAIN | {"hw_figures": [SLOW]}})
    assert r.status_code == 202, r.text
    url = r.json()["result_url"]
    for _ in range(300):
        res = client.get(url)
        if res.status_code == 200:
            break
        time.sleep(0.1)
    assert res.status_code == 200 and float(res.json()["step_time_s"]) == _step(client, [SLOW])
    r = client.post("/api/v1/jobs", json={"kind": "train.estimate", "request": TRAIN | {"hw_figures": ["x"]}})
    assert r.status_code == 422 and r.json()["field"] == "request.hw_figures[0]"


def test_concurrent_requests_never_see_each_others_figures(client: TestClient) -> None:
    cases: list[list[str] | None] = [None, [SLOW], [FAST]]
    expected = {i: _step(client, f) for i, f in enumerate(cases)}
    assert len(set(expected.values())) == 3
    order = [i % 3 for i in range(24)]
    with ThreadPoolExecutor(max_workers=6) as pool:
        got = list(pool.map(lambda i: _step(client, cases[i]), order))
    assert got == [expected[i] for i in order]
