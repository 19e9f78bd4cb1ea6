"""The web page in a real browser (Debian's Chromium via Playwright): fill the form, rank, see the
table and charts, switch language, share the scenario, open a catalog figure's source.

Each test saves a screenshot of its page under its tmp dir (``page.png``) for a human to look at.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from xpuplan.i18n import catalogue

pytestmark = pytest.mark.browser

EN, ZH = catalogue("en"), catalogue("zh")


def _open(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    page.click(".lang button[data-lang='en']")
    page.wait_for_function("document.documentElement.lang === 'en'")


def _run(page: Any) -> None:
    page.click("#run")
    page.wait_for_selector("#ranking tbody tr")
    page.wait_for_selector("#progress", state="hidden")


def test_recommend_fills_form_ranks_and_draws_charts(page: Any, server: str, tmp_path: Path) -> None:
    _open(page, server + "/")
    page.select_option("#f-preset", "pretraining")
    page.fill("#f-devices", "512")
    page.fill("#f-tokens", "1e12")
    page.fill("#f-samples", "100")
    page.fill("#f-deadline", "")
    page.click("#run")
    page.wait_for_selector("#progress", state="visible")  # a progress indicator while the request runs
    page.wait_for_selector("#ranking tbody tr")
    rows = page.locator("#ranking tbody tr")
    assert rows.count() >= 2
    first = rows.nth(0).inner_text()
    assert first.strip().startswith("1")
    assert "512" in page.locator("#ranking").inner_text()  # the devices typed in the form reached the ranking
    # charts are drawn by Plotly from the installed package (no CDN)
    for chart in ("ch-contrib", "ch-pareto", "ch-tco", "ch-fleet"):
        page.wait_for_selector(f"#{chart}[data-rendered='1'] .main-svg")
    page.wait_for_selector("#ch-memory[data-rendered='1'] .main-svg")
    page.wait_for_selector("#ch-roofline[data-rendered='1'] .main-svg")
    assert "Time vs cost" in page.inner_text("#out")
    # uncertainty as ranges: the P10-P90 line under time and cost
    assert page.locator("#ranking .range").count() > rows.count()
    # the winner's figures link their sources
    assert page.locator("#figures a[href^='http']").count() >= 1
    # the same report as `xpuplan recommend --report out.html`
    with page.expect_download() as dl:
        page.click("#download-report")
    report = tmp_path / "report.html"
    dl.value.save_as(report)
    assert "<style>" in report.read_text(encoding="utf-8") and "nvidia" in report.read_text(encoding="utf-8")
    # the scenario is in the URL
    assert re.search(r"#s=[A-Za-z0-9_-]+$", page.url)
    assert not page.js_errors
    assert not [u for u in page.outside_requests if not u.startswith("http://127.0.0.1")]  # offline
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)


def test_language_toggle_translates_labels_and_results(page: Any, server: str, tmp_path: Path) -> None:
    _open(page, server + "/")
    page.select_option("#f-preset", "online-inference")
    page.fill("#f-samples", "50")
    _run(page)
    # the winner's serving deployment is simulated: latency CDFs per request class
    page.wait_for_selector("#cdf-panel:not([hidden]) #ch-cdf[data-rendered='1'] .main-svg")
    assert page.locator("#ch-cdf .scatterlayer .trace").count() >= 2  # TTFT and TPOT curves
    assert page.inner_text("#run") == EN["web.form.run"]
    page.click(".lang button[data-lang='zh']")
    page.wait_for_function("document.documentElement.lang === 'zh-CN'")
    assert page.inner_text("#run") == ZH["web.form.run"]
    assert page.inner_text("nav.top a.active") == ZH["web.nav.recommend"]
    # the result is fetched again in Chinese: the summary is the zh catalogue's sentence
    page.wait_for_function("/[\\u4e00-\\u9fff]/.test(document.getElementById('res-summary').textContent)")
    page.wait_for_selector("#progress", state="hidden")
    assert ZH["report.ranking"] in page.inner_text("#out")
    page.wait_for_selector("#ch-contrib[data-rendered='1'] .main-svg")
    assert not page.js_errors
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)


def test_shared_link_restores_and_runs_the_scenario(page: Any, server: str, tmp_path: Path) -> None:
    _open(page, server + "/")
    page.select_option("#f-preset", "batch-inference")
    page.fill("#f-samples", "0")
    page.fill("#f-out", "300")
    _run(page)
    url = page.url
    assert "#s=" in url
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector("#ranking tbody tr")
    assert page.input_value("#f-preset") == "batch-inference"
    assert page.input_value("#f-out") == "300"
    # downloadable as the YAML the CLI takes
    with page.expect_download() as dl:
        page.click("#download-yaml")
    path = tmp_path / "scenario.yaml"
    dl.value.save_as(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert data["scenario"] == "batch-inference"
    assert data["workload"]["serving"]["output_len"] == 300
    from xpuplan.decide.scenario import load_scenario

    s = load_scenario(path)
    assert s.workload.serving is not None and s.workload.serving.output_len == 300
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)


def test_a_dataset_gives_the_request_lengths(page: Any, server: str, tmp_path: Path) -> None:
    """The lengths select: ShareGPT's lengths replace the fixed token counts (their inputs are disabled), the run and
    the shared link carry the dataset, and the routed preset, whose pools carry their own lengths, does not offer it."""
    _open(page, server + "/")
    page.select_option("#f-preset", "online-inference")
    assert page.locator("#f-lengths option[value='sharegpt']").is_disabled()
    page.select_option("#f-preset", "batch-inference")
    page.fill("#f-samples", "0")
    page.select_option("#f-lengths", "sharegpt")
    assert page.locator("#f-in").is_disabled() and page.locator("#f-out").is_disabled()
    _run(page)
    url = page.url
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector("#ranking tbody tr")
    assert page.input_value("#f-lengths") == "sharegpt"
    with page.expect_download() as dl:
        page.click("#download-yaml")
    path = tmp_path / "scenario.yaml"
    dl.value.save_as(path)
    serving = yaml.safe_load(path.read_text(encoding="utf-8"))["workload"]["serving"]
    assert serving["dataset"] == "sharegpt" and "input_len" not in serving and "output_len" not in serving
    page.select_option("#f-lengths", "")
    assert not page.locator("#f-in").is_disabled()
    assert not page.js_errors
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)


def test_bad_input_names_the_field(page: Any, server: str) -> None:
    _open(page, server + "/")
    page.select_option("#f-preset", "pretraining")
    page.fill("#f-devices", "0")
    page.click("#run")
    page.wait_for_selector("#error:not([hidden])")
    text = page.inner_text("#error")
    assert "devices" in text
    assert page.locator("#f-devices.invalid").count() == 1


def test_catalog_opens_a_figure_source_and_compares(page: Any, server: str, tmp_path: Path) -> None:
    _open(page, server + "/catalog")
    page.fill("#filter", "H100")
    page.wait_for_selector("#devices tbody tr")
    page.click("#devices a.dev >> nth=0")
    page.wait_for_selector("#detail:not([hidden]) table.figures")
    link = page.locator("#detail table.figures a[href^='http']").first
    href = link.get_attribute("href")
    assert href and href.startswith("http")
    with page.expect_popup() as pop:
        link.click()
    popup = pop.value
    popup.wait_for_load_state()
    assert popup.url == href  # the figure's source, as the catalog gives it
    assert page.locator("#detail .tag").count() >= 1  # trust grades shown
    # side-by-side comparison
    page.fill("#filter", "")
    page.check("#devices input[data-id='nvidia-h100-sxm-80gb']")
    page.check("#devices input[data-id='huawei-ascend-910b']")
    page.click("#compare-btn")
    page.wait_for_selector("#compare:not([hidden]) table")
    heads = page.locator("#compare thead th").all_inner_texts()
    assert len(heads) == 3
    assert not page.js_errors
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)


def test_uploaded_config_json_is_ranked(page: Any, server: str, tmp_path: Path) -> None:
    _open(page, server + "/")
    page.select_option("#f-preset", "finetuning-lora")
    page.fill("#f-samples", "0")
    page.set_input_files("#f-config", str(Path(__file__).parents[1] / "fixtures" / "hf" / "qwen2.5-7b" / "config.json"))
    page.wait_for_function("document.getElementById('f-model').value.startsWith('upload:')")
    assert "qwen" in page.inner_text("#config-status").lower()
    _run(page)
    assert "qwen" in page.inner_text("#res-title").lower()
    page.wait_for_selector("#ch-memory[data-rendered='1'] .main-svg")
    assert "/tmp" not in page.inner_text("#out")
    assert not page.js_errors
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
