"""The reports of ``train search``, ``simulate`` and ``fleet optimize`` in English and Chinese (``--lang en|zh``).

Each is rendered from a real small result (the jobs the CLI calls): in Chinese its headings, table
headers and key-figure labels come from the ``train.*``, ``sim.*`` and ``fleet.*`` messages and no
English heading is left; in English (the default) it reads as before. The CLI refuses an unknown
language before the job runs (exit 2, naming ``--lang``) and writes a Chinese report with ``--lang zh``.
"""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.cli.test_fleet_cli import SMALL as FLEET_SMALL
from tests.cli.test_simulate_cli import SMALL as SIM_SMALL
from xpuplan.cli.main import app
from xpuplan.i18n import catalogue
from xpuplan.report import render_html, render_markdown

runner = CliRunner()
PREFIXES = ("train.", "sim.", "fleet.")

# the small scenarios of the simulate and fleet CLI tests; the fleet one with a constraint, so its report has one
SIM_SCENARIO = SIM_SMALL
FLEET_SCENARIO = FLEET_SMALL + "constraints: {max_power_kw: 100}\n"

#: Per report: (headings in Chinese, the same headings in English).
HEADINGS = {
    "train": (["训练并行方案搜索", "最优方案", "帕累托前沿：训练时长与设备数", "最优方案的单步时间",
               "最优方案的每设备显存", "每设备 tok/s", "训练时长", "所用数据及可信等级"],
              ["Training plan search", "Best plans", "Pareto front: time vs devices", "Step time of the best plan",
               "Memory per device of the best plan", "tok/s/device", "time to train", "Figures used, with trust"]),
    "simulate": (["请求级模拟", "流量类别", "资源池", "首 token 时延 p50/p90/p99 ms", "SLO 达成率", "有效吞吐 req/s",
                  "每百万输出 token"],
                 ["Request-level simulation", "Traffic classes", "Pools", "TTFT p50/p90/p99 ms", "SLO attainment",
                  "goodput req/s", "per million output tokens"]),
    "fleet": (["集群配置方案", "硬件配比", "需求与容量", "约束", "模拟的 SLO 达成率", "最优单一硬件",
               "每设备小时价格是本方案的假设"],
              ["Fleet plan", "Mix", "Demand and capacity", "Constraints", "Simulated SLO attainment",
               "Best single hardware", "Prices per device-hour are the assumptions of this plan."]),
}
#: Headings only the HTML page has (the charts).
HTML_HEADINGS = {
    "train": (["训练时长与设备数", "最优方案"], ["time to train vs devices", "best plan"]),
    "simulate": (["各类流量的首 token 时延 CDF", "各资源池排队请求数", "各资源池 KV 缓存占用"],
                 ["TTFT CDF per class", "Waiting requests per pool", "KV-cache use per pool"]),
    "fleet": (["各硬件每小时成本", "混合方案"], ["Cost per hour by hardware"]),
}


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    """Small real results of the three jobs, as the CLI gets them."""
    import yaml

    from xpuplan.jobs.fleet import FleetRequest, run_fleet_optimize
    from xpuplan.jobs.simulate import SimulateRequest, run_simulate
    from xpuplan.jobs.train import TrainSearchRequest, train_search

    return {
        "train": train_search(TrainSearchRequest(model="llama-3-8b", hw="h100", devices_range="8,16", tokens=1e11,
                                                 top=3)),
        "simulate": run_simulate(SimulateRequest(scenario=yaml.safe_load(SIM_SCENARIO), price_per_device_hour=3)),
        "fleet": run_fleet_optimize(FleetRequest(scenario=yaml.safe_load(FLEET_SCENARIO), verify=True)),
    }


def _english_only_words() -> set[str]:
    """English messages of the three reports whose Chinese differs (a heading showing one is untranslated)."""
    en, zh = catalogue("en"), catalogue("zh")
    return {en[k] for k in en if k.startswith(PREFIXES) and en[k].strip() and en[k] != zh[k] and "{" not in en[k]}


def _labels(page: str) -> list[str]:
    """Headings, table headers and key-figure labels of an HTML report."""
    pat = r"<h[1-3]>(.*?)</h[1-3]>|<th[^>]*>(.*?)</th>|<div class='kpi'><b>.*?</b><span>(.*?)</span>"
    return [next(g for g in m.groups() if g is not None) for m in re.finditer(pat, page)]


@pytest.mark.parametrize("name", list(HEADINGS))
def test_chinese_report_has_chinese_headings_and_no_english_ones(results, name):
    res = results[name]
    page, md = render_html(res, "zh"), render_markdown(res, "zh")
    zh_words, en_words = HEADINGS[name]
    for w in zh_words:
        assert w in page, f"{w!r} not in the Chinese HTML report"
        assert w in md, f"{w!r} not in the Chinese Markdown report"
    for w in en_words:
        assert w not in page, f"{w!r} left in the Chinese HTML report"
        assert w not in md, f"{w!r} left in the Chinese Markdown report"
    html_zh, html_en = HTML_HEADINGS[name]
    assert all(w in page for w in html_zh) and not any(w in page for w in html_en)
    assert page.startswith("<!DOCTYPE html><html lang='zh'>")
    assert "所用数据及可信等级" in page and "可信等级：A" in page  # the shared frame follows the language
    english = _english_only_words()
    left = [x for x in _labels(page) if x in english]
    assert not left, f"English labels in the Chinese page: {left}"


@pytest.mark.parametrize("name", list(HEADINGS))
def test_english_is_the_default_and_reads_as_before(results, name):
    from xpuplan.report import _renderer

    res = results[name]
    mod = _renderer(res)
    page, md = mod.render_html(res), mod.render_markdown(res)  # called without lang, as before
    assert page == mod.render_html(res, lang="en") == render_html(res) == render_html(res, "en")
    assert md == mod.render_markdown(res, lang="en") == render_markdown(res)
    zh_words, en_words = HEADINGS[name]
    for w in en_words:
        assert w in page and w in md, w
    assert not re.search(r"[\u4e00-\u9fff]", page + md), "Chinese in the English report"
    assert page.startswith("<!DOCTYPE html><html lang='en'>")


def test_the_numbers_are_the_same_in_both_languages(results):
    tr = results["train"].plans[0]
    sim = results["simulate"]
    fleet = results["fleet"]
    for res, needles in ((results["train"], [f"{tr.tokens_per_s:,.0f}", tr.key, f"{tr.mfu:.1%}"]),
                         (sim, [f"{sim.output_tokens_per_s:,.0f}", f"{sim.completed:,}"]),
                         (fleet, [f"${fleet.total_cost:,.2f}", *(r.hardware for r in fleet.mix)])):
        for lang in ("en", "zh"):
            page, md = render_html(res, lang), render_markdown(res, lang)
            for n in needles:
                assert n in page and n in md, (lang, n)


def test_step_parts_are_translated_and_an_unknown_part_keeps_its_id():
    from xpuplan.report.train import step_part_name

    assert step_part_name("dp_comm", "zh") == "DP 通信" and step_part_name("dp_comm") == "DP communication"
    assert step_part_name("bubble", "zh") == "流水线气泡"
    assert step_part_name("some_new_part", "zh") == "some_new_part"


def test_planner_words_stay_as_produced(results):
    """The planner's notes and reasons are data: not translated, and the heading says they are English."""
    fleet = results["fleet"].model_copy(update={"notes": ["a note from the optimiser"]})
    md = render_markdown(fleet, "zh")
    assert "- a note from the optimiser" in md and "## 说明（优化器给出的说明为英文）" in md
    assert "## Notes\n" in render_markdown(fleet)
    sim = results["simulate"].model_copy(update={"notes": ["a simulator note"]})
    page = render_html(sim, "zh")
    assert "（模拟器给出的说明为英文）" in page and "a simulator note" in page


def test_every_report_key_is_in_both_catalogues():
    en, zh = catalogue("en"), catalogue("zh")

    def fields(s: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(s) if f}

    for prefix in PREFIXES:
        keys_en = {k for k in en if k.startswith(prefix)}
        keys_zh = {k for k in zh if k.startswith(prefix)}
        assert len(keys_en) > 20, prefix
        assert keys_en == keys_zh, sorted(keys_en ^ keys_zh)
        for k in keys_en:
            assert zh[k].strip(), k
            assert fields(en[k]) == fields(zh[k]), k


# ---------------------------------------------------------------------------------------
# the CLI
# ---------------------------------------------------------------------------------------
def _commands(tmp_path: Path) -> dict[str, list[str]]:
    sim = tmp_path / "sim.yaml"
    sim.write_text(SIM_SCENARIO, encoding="utf-8")
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(FLEET_SCENARIO, encoding="utf-8")
    return {"train": ["train", "search", "--model", "llama-3-8b", "--hw", "h100", "--devices", "8", "--top", "2"],
            "simulate": ["simulate", str(sim), "--duration", "3"],
            "fleet": ["fleet", "optimize", str(fleet)]}


@pytest.mark.parametrize("name", list(HEADINGS))
def test_cli_refuses_an_unknown_language_before_the_job(tmp_path, name, monkeypatch):
    import xpuplan.jobs.fleet
    import xpuplan.jobs.simulate
    import xpuplan.jobs.train

    def ran(*_a: Any, **_k: Any) -> None:
        raise AssertionError("the job ran")

    for mod, fn in ((xpuplan.jobs.train, "train_search"), (xpuplan.jobs.simulate, "run_simulate"),
                    (xpuplan.jobs.fleet, "run_fleet_optimize")):
        monkeypatch.setattr(mod, fn, ran)
    out = tmp_path / "r.md"
    r = runner.invoke(app, [*_commands(tmp_path)[name], "--lang", "xx", "--report", str(out)])
    assert r.exit_code == 2, r.output
    assert "--lang" in r.output and "xx" in r.output and "Traceback" not in r.output
    assert not out.exists()


@pytest.mark.parametrize("name", list(HEADINGS))
def test_cli_writes_a_chinese_report(tmp_path, name):
    out = tmp_path / "r.md"
    r = runner.invoke(app, [*_commands(tmp_path)[name], "--lang", "zh", "--report", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text(encoding="utf-8")
    title = {"train": "训练并行方案搜索", "simulate": "请求级模拟", "fleet": "集群配置方案"}[name]
    assert text.startswith(f"# {title}: ") and "## 所用数据及可信等级" in text
    en_title = {"train": "Training plan search", "simulate": "Request-level simulation", "fleet": "Fleet plan"}[name]
    assert en_title not in text
    # the default is English
    r = runner.invoke(app, [*_commands(tmp_path)[name], "--report", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_text(encoding="utf-8").startswith(f"# {en_title}: ")


def test_lang_help_is_shown():
    for args in (["train", "search"], ["simulate"], ["fleet", "optimize"]):
        r = runner.invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
        assert r.exit_code == 0 and "--lang" in r.output and "language of the --report: en or zh" in r.output, args


def test_the_assumption_set_row_is_in_the_reports_language(results):
    page_zh, page_en = render_html(results["train"], "zh"), render_html(results["train"])
    assert "假设集" in page_zh and "指纹 " in page_zh and "assumption set" not in page_zh
    assert "assumption set" in page_en and "fingerprint " in page_en


def test_markdown_labels_take_the_languages_colon(results):
    assert "**：" in render_markdown(results["simulate"], "zh") and "**：" not in render_markdown(results["simulate"])
    assert "**: " in render_markdown(results["simulate"])
