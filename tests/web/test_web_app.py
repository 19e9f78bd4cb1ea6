"""The web app without a browser: pages, assets (offline, no CDN), page helpers, translations."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import yaml

from xpuplan.i18n import catalogue

STATIC = resources.files("xpuplan.web") / "static"


def _static_text() -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in STATIC.iterdir() if p.name.endswith((".html", ".js"))}


def test_pages_and_assets_are_served(client: Any) -> None:
    for path, kind in (("/", "text/html"), ("/catalog", "text/html"), ("/static/web.css", "text/css"),
                       ("/static/report.css", "text/css"), ("/static/common.js", "javascript"),
                       ("/static/recommend.js", "javascript"), ("/static/catalog.js", "javascript"),
                       ("/favicon.ico", "image/svg+xml")):
        r = client.get(path)
        assert r.status_code == 200, path
        assert kind in r.headers["content-type"], path
    assert "scenario-form" in client.get("/").text
    assert client.get("/api/v1/hardware").status_code == 200  # the API is part of the same app


def test_plotly_comes_from_the_installed_package(client: Any) -> None:
    from xpuplan.web.app import plotly_js

    path = plotly_js()
    assert path is not None and path.name == "plotly.min.js" and path.parent.parent.name == "plotly"
    r = client.get("/static/vendor/plotly.min.js")
    assert r.status_code == 200
    assert "javascript" in r.headers["content-type"]
    assert r.content == path.read_bytes()
    assert "plotly.js" in r.text[:500]


def test_no_external_resources_in_pages() -> None:
    for name, text in _static_text().items():
        refs = re.findall(r"""(?:src|href)\s*=\s*["'](https?:)?//""", text)
        assert not refs, f"{name} loads something from outside the package"


def test_asset_route_refuses_other_files(client: Any) -> None:
    for path in ("/static/app.py", "/static/..%2Fapp.py", "/static/.hidden.js", "/static/missing.js"):
        assert client.get(path).status_code == 404, path


def test_every_label_of_the_pages_is_in_both_catalogues() -> None:
    en, zh = catalogue("en"), catalogue("zh")
    keys: set[str] = set()
    for text in _static_text().values():
        keys |= set(re.findall(r'data-i18n(?:-title)?="([^"]+)"', text))
        keys |= set(re.findall(r'\bt\("([a-z_]+\.[a-z0-9_.-]*[a-z0-9])"', text))
    assert len(keys) > 80
    missing = sorted(k for k in keys if k not in en or k not in zh)
    assert not missing, f"labels missing from en.yaml/zh.yaml: {missing}"
    # keys built at run time: presets, trust grades, roofline bounds
    from xpuplan.decide.scenario import list_presets

    for p in list_presets():
        assert f"web.preset.{p}" in en and f"web.preset.{p}" in zh
    for g in "ABCD":
        assert f"web.trust.{g}" in zh


def test_i18n_route_returns_the_cli_catalogue(client: Any) -> None:
    assert client.get("/ui/i18n/zh.json").json() == catalogue("zh")
    r = client.get("/ui/i18n/fr.json")
    assert r.status_code == 422
    assert r.json()["field"] == "--lang"


def test_meta_lists_presets_with_weights_summing_to_100(client: Any) -> None:
    meta = client.get("/ui/meta").json()
    assert set(meta["groups"]) == {"performance", "development", "economics", "risk"}
    guide = {g: sum(meta["default_weights"][x] for x in leaves) for g, leaves in meta["groups"].items()}
    assert guide == {"performance": 40, "development": 30, "economics": 20, "risk": 10}
    for name, p in meta["presets"].items():
        assert abs(sum(p["weights"].values()) - 100) < 1e-6, name
        assert p["scenario"]["scenario"] == name
    assert set(meta["colours"]["criteria"]) == set(meta["default_weights"])


def test_roofline_and_memory_helpers_call_the_jobs(client: Any) -> None:
    r = client.get("/ui/roofline", params={"hw": "H100", "model": "llama3-8b", "batch": 1, "q_len": 1,
                                           "kv_len": 2048, "tp": 1})
    assert r.status_code == 200
    ops = r.json()["ops"]
    assert ops and all(o["bound"] in ("compute", "memory", "overhead") for o in ops)
    assert any(o["bound"] == "memory" for o in ops)  # decode at batch 1 is memory-bound
    bad = client.get("/ui/roofline", params={"hw": "no-such-chip", "model": "llama3-8b"})
    assert bad.status_code == 422 and bad.json()["field"]
    m = client.post("/ui/memory/train", json={"model": "llama3-8b", "hw": "H100", "tp": 2, "dp": 4})
    assert m.status_code == 200 and m.json()["fits"] is True
    big = client.post("/ui/memory/train", json={"model": "llama3-70b", "hw": "H100"})
    assert big.status_code == 409 and big.json()["result"]["fits"] is False
    neg = client.post("/ui/memory/train", json={"model": "llama3-8b", "tp": 0})
    assert neg.status_code == 422 and neg.json()["field"] == "tp"
    inf = client.post("/ui/memory/infer", json={"model": "llama3-8b", "hw": "H100", "tp": 1, "context": 4096})
    assert inf.status_code == 200 and inf.json()["serving_memory"]["kv_budget_bytes"] > 0


def test_scenario_yaml_is_what_the_cli_takes(client: Any, tmp_path: Any) -> None:
    from xpuplan.decide.scenario import load_scenario

    sc = {"scenario": "pretraining", "model": "llama3-70b", "workload": {"kind": "training",
          "training": {"train_tokens": 1e12, "devices": 256, "seq_len": 4096}},
          "constraints": {"region": "any", "deadline_days": 60, "max_budget_usd": None}}
    r = client.post("/ui/scenario.yaml", json=sc)
    assert r.status_code == 200
    assert "attachment" in r.headers["content-disposition"]
    assert yaml.safe_load(r.text) == sc
    f = tmp_path / "s.yaml"
    f.write_text(r.text, encoding="utf-8")
    s = load_scenario(f)
    assert s.workload.training is not None and s.workload.training.devices == 256
    assert s.constraints.deadline_days == 60
    assert client.post("/ui/scenario.yaml", json=[1, 2]).status_code == 422


def test_report_and_page_share_one_stylesheet(client: Any) -> None:
    from xpuplan.report import CSS

    served = client.get("/static/report.css").text
    assert served == CSS
    assert "--accent" in CSS


def test_html_report_of_a_recommendation_shares_the_renderer(client: Any) -> None:
    from xpuplan.decide.result import Recommendation
    from xpuplan.report import CSS, render_html

    rec = client.post("/api/v1/recommend", json={"preset": "pretraining", "samples": 20}).json()
    r = client.post("/ui/report.html", json=rec)
    assert r.status_code == 200
    assert "attachment" in r.headers["content-disposition"]
    assert r.text == render_html(Recommendation.model_validate(rec))
    assert CSS in r.text  # self-contained: the page's shared stylesheet inlined
    bad = client.post("/ui/report.html", json={"options": []})
    assert bad.status_code == 422 and bad.json()["error"].startswith("not a recommendation")
    junk = client.post("/ui/memory/train", content=b"{not json", headers={"content-type": "application/json"})
    assert junk.status_code == 400 and junk.json()["field"] == "body"  # as the API answers a body that is not JSON


FIXTURE_CONFIG = "tests/fixtures/hf/qwen2.5-7b/config.json"


def test_uploaded_config_json_is_ranked_without_exposing_a_path(client: Any) -> None:
    from pathlib import Path

    raw = Path(FIXTURE_CONFIG).read_bytes()
    up = client.post("/ui/models", content=raw, headers={"content-type": "application/json"})
    assert up.status_code == 200
    ref, model = up.json()["id"], up.json()["model"]
    assert ref.startswith("upload:") and "/" not in ref
    assert model["total_params"] > 7e9
    body = {"scenario": {"scenario": "finetuning-lora", "model": ref, "hardware": ["nvidia-h100-sxm-80gb",
                                                                                  "amd-mi300x-192gb"]},
            "samples": 0, "lang": "en"}
    r = client.post("/ui/recommend", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["model"] == model["id"]
    # the versioned API still takes catalog models only
    assert client.post("/api/v1/recommend", json=body).status_code == 422
    # the charts' helpers take the upload too
    assert client.get("/ui/roofline", params={"hw": "H100", "model": ref}).status_code == 200
    assert client.post("/ui/memory/infer", json={"model": ref, "hw": "H100", "tp": 1}).status_code == 200
    # a scenario YAML names the file, not the server's copy
    y = client.post("/ui/scenario.yaml", json=body["scenario"]).text
    assert "model: config.json" in y and "upload:" not in y


def test_upload_errors_are_clear(client: Any) -> None:
    bad = client.post("/ui/models", content=b'{"model_type": "no-such-arch"}', headers={"content-type": "application/json"})
    assert bad.status_code == 422 and bad.json()["error"]
    junk = client.post("/ui/models", content=b"\xff\xfe", headers={"content-type": "application/json"})
    assert junk.status_code == 422 and junk.json()["field"] == "config.json"
    gone = client.post("/ui/recommend", json={"scenario": {"scenario": "pretraining", "model": "upload:0123456789abcdef"}})
    assert gone.status_code == 422 and gone.json()["field"] == "scenario.model"
    catalog = client.post("/ui/recommend", json={"scenario": {"scenario": "pretraining", "model": "llama3-8b"}})
    assert catalog.status_code == 422
    traversal = client.post("/ui/recommend", json={"scenario": {"scenario": "pretraining", "model": "upload:../../etc"}})
    assert traversal.status_code == 422


def test_the_page_parses_every_training_plan_key_the_planner_writes() -> None:
    """recommend.js reads a plan's layout back from its key (for the memory chart): every recompute mode must parse."""
    from xpuplan.train.plan import ParallelPlan
    from xpuplan.workload.vocabulary import RECOMPUTE_MODES

    js = _static_text()["recommend.js"]
    pattern = re.search(r"const m = /(\^tp.*?\$)/\.exec\(key", js)
    assert pattern, "parseTrainKey's pattern moved"
    rx = re.compile(pattern.group(1).replace("\\\\", "\\"))
    for mode in RECOMPUTE_MODES:
        key = ParallelPlan(tp=2, pp=1, dp=4, sp=True, zero_stage=1, recompute=mode, micro_batch=1, grad_accum=2,
                           precision="bf16").key
        m = rx.match(key)
        assert m, key
        assert f'{m.group(9)}: "{mode}"' in js, mode
    # a plan with the MoE all-to-all overlap ends in -epo (0.4.24); its layout still parses, and the flag with it
    epo = ParallelPlan(tp=2, pp=1, dp=4, ep=8, sp=True, recompute="none", micro_batch=1, grad_accum=2,
                       precision="fp8", ep_overlap=True).key
    m = rx.match(epo)
    assert m and m.group(12) == "fp8" and m.group(13) == "-epo", epo
    assert "ep_overlap: k.ep_overlap" in js
    # a plan the search gave fine-grained offloading ends in -off:... (0.4.30); its layout still parses, and the page
    # asks the memory API with the plan's modules
    from xpuplan.train.estimate import OFFLOAD_KEY_NAMES, offload_key_suffix
    from xpuplan.workload.vocabulary import OFFLOAD_MODULES

    for mods in [(m,) for m in OFFLOAD_MODULES] + [tuple(OFFLOAD_MODULES)]:
        key = epo + offload_key_suffix(mods)
        m = rx.match(key)
        assert m and m.group(13) == "-epo" and m.group(15) == offload_key_suffix(mods), key
    assert set(OFFLOAD_KEY_NAMES) == set(OFFLOAD_MODULES)
    assert "offload_modules: p.plan.offload_modules" in js
    # a selective plan whose modules the search chose ends in -rm:... (0.4.31), before any -off:...; it parses too,
    # and the page asks the memory API with those modules
    from xpuplan.train.estimate import RECOMPUTE_KEY_NAMES, recompute_key_suffix
    from xpuplan.workload.vocabulary import RECOMPUTE_MODULES

    for mods in [(m,) for m in RECOMPUTE_MODULES] + [tuple(RECOMPUTE_MODULES)]:
        key = epo + recompute_key_suffix(mods) + offload_key_suffix(("expert_fc1",))
        m = rx.match(key)
        assert m and m.group(14) == recompute_key_suffix(mods) and m.group(15) == "-off:fc1", key
    assert set(RECOMPUTE_KEY_NAMES) == set(RECOMPUTE_MODULES)
    assert "recompute_modules: k.recompute === \"selective\" && p.plan.recompute_modules" in js
