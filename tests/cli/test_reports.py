"""`--report out.html|out.md` of the five commands that write reports, invoked as a user would.

Each HTML report is well-formed (every element closed in order), loads nothing from the network
(no script, no external style, image or font; links to figure sources are plain ``<a>``), and shows
the headline numbers of ``--json`` formatted as the renderer formats them; the Markdown report shows
the same numbers. A bad suffix or a missing directory exits 2 naming ``--report``.
"""

from __future__ import annotations

import json
import re
from html import escape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.report import render_html, render_markdown, write_report

runner = CliRunner()
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

#: Elements HTML never closes.
VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr", "source", "area", "base", "embed"}
#: Elements (and attributes) that would make a browser fetch something.
LOADERS = {"script", "link", "img", "iframe", "source", "object", "embed", "image", "use", "audio", "video"}


class _Checker(HTMLParser):
    """Tags opened and closed in order; any fetching element or remote URL in a loading attribute."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.loads: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check(tag, attrs)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1] if self.stack else 'nothing'}")
            return
        self.stack.pop()

    def _check(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in LOADERS:
            self.loads.append(tag)
        for name, value in attrs:
            v = (value or "").strip().lower()
            if name in ("src", "srcset", "xlink:href", "poster", "data") and v.startswith(("http:", "https:", "//")):
                self.loads.append(f"{tag} {name}={value}")
            if name == "href" and v.startswith(("http:", "https:", "//")):
                (self.links if tag == "a" else self.loads).append(f"{tag} href={value}")
            if name == "style" and "url(" in v:
                self.loads.append(f"{tag} style url()")


def check_html(page: str) -> _Checker:
    assert page.startswith("<!DOCTYPE html>")
    c = _Checker()
    c.feed(page)
    c.close()
    assert not c.errors, c.errors[:5]
    assert not c.stack, f"unclosed: {c.stack}"
    assert not c.loads, c.loads
    assert "<script" not in page.lower() and "@import" not in page and not re.search(r"url\(\s*['\"]?https?:", page)
    return c


def run(tmp_path: Path, args: list[str], name: str) -> tuple[dict, str, str]:
    """``--json`` with an HTML report, then the Markdown report: (json, html, markdown)."""
    html, md = tmp_path / f"{name}.html", tmp_path / f"{name}.md"
    r = runner.invoke(app, [*args, "--json", "--report", str(html)])
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    r = runner.invoke(app, [*args, "--report", str(md)])
    assert r.exit_code == 0, r.output
    return data, html.read_text(encoding="utf-8"), md.read_text(encoding="utf-8")


def both(needle: str, page: str, text: str) -> None:
    assert needle in page, f"{needle!r} not in the HTML report"
    assert needle in text, f"{needle!r} not in the Markdown report"


TRAIN = ["train", "search", "--model", "llama-3-8b", "--hw", "h100", "--devices-range", "8,16", "--tokens", "1e11",
         "--top", "3"]
CAPACITY = ["infer", "capacity", "--model", "llama-3-8b", "--hw", "h100,mi300x", "--qps", "20", "--ttft-ms", "500",
            "--tpot-ms", "50"]
RECOMMEND = ["recommend", "--preset", "finetuning-qlora", "--samples", "50", "--seed", "1"]
SIMULATE = ["simulate", str(EXAMPLES / "simulate-hybrid-online.yaml"), "--duration", "5"]
FLEET = ["fleet", "optimize", str(EXAMPLES / "fleet-hybrid-online.yaml")]


def test_train_search_report(tmp_path):
    d, page, md = run(tmp_path, TRAIN, "train")
    c = check_html(page)
    best = d["plans"][0]
    both(f"{best['tokens_per_s']:,.0f}", page, md)
    both(best["key"], page, md)
    both(f"{best['mfu']:.1%}", page, md)
    both(f"{best['memory']['total_bytes'] / 1e9:,.1f} GB", page, md)
    assert page.count("<svg") >= 3  # Pareto front, step time, memory
    assert "Pareto front" in page and "Step time of the best plan" in page and "Memory per device" in page
    assert "Figures used, with trust" in page and "dense_tflops.bf16" in page and c.links  # sources linked
    assert f"schema_version {d['schema_version']}" in page and f"schema_version {d['schema_version']}" in md


def test_infer_capacity_report(tmp_path):
    d, page, md = run(tmp_path, CAPACITY, "capacity")
    check_html(page)
    best = d["options"][0]
    both(best["hardware"], page, md)
    both(f"{best['at_target']['ttft_p_s'] * 1e3:,.1f} ms", page, md)
    both(f"{best['at_target']['tpot_s'] * 1e3:,.1f} ms", page, md)
    assert f"{best['devices']:,} devices ({best['replicas']:,} replicas)" in page  # the bar chart's label
    assert f"| {best['devices']:,} |" in md and best["limited_by"] in md
    assert "Devices per option" in page and "<svg" in page and "memory.bandwidth_gb_per_s" in md
    # the "limited by" words wrap in a left-aligned cell; a right-aligned (nowrap) one pushed the table off the page
    assert f"<td class=l>{best['limited_by']}</td>" in page


def test_recommend_report(tmp_path):
    d, page, md = run(tmp_path, RECOMMEND, "recommend")
    check_html(page)
    o = d["options"][0]
    both(o["label"], page, md)
    both(f"{o['score']:.1f}", page, md)
    assert "Figures used" not in md or o["figures"]  # the winner's figures close the report
    both(o["figures"][0]["path"], page, md)


def test_simulate_report(tmp_path):
    d, page, md = run(tmp_path, SIMULATE, "simulate")
    check_html(page)
    both(f"{d['output_tokens_per_s']:,.0f}", page, md)
    both(f"{d['completed']:,} completed", page, md)
    g = d["classes"][0]
    both(f"{g['ttft']['p50_s'] * 1e3:,.1f}", page, md)
    assert page.count("<svg") >= 5
    both("KV dtype", page, md)  # the pool's KV-cache dtype is the engine's default unless given
    assert all(p["kv_dtype"] in ("bf16", "fp16", "fp8", "int8") for p in d["pools"])


def test_fleet_optimize_report(tmp_path):
    d, page, md = run(tmp_path, FLEET, "fleet")
    check_html(page)
    both(f"${d['total_cost']:,.0f}", page, md)
    both(f"{d['devices']:,} devices", page, md)
    for row in d["mix"]:
        both(row["hardware"], page, md)
    both(d["prices"][0]["source"], page, md)


@pytest.mark.parametrize("args", [TRAIN, CAPACITY, RECOMMEND, SIMULATE, FLEET], ids=lambda a: a[0] + "-" + a[1])
def test_bad_suffix_and_missing_directory_exit_2(tmp_path, args):
    r = runner.invoke(app, [*args, "--report", str(tmp_path / "out.pdf")])
    assert r.exit_code == 2 and "--report" in r.output and "Traceback" not in r.output
    r = runner.invoke(app, [*args, "--report", str(tmp_path / "no-such-dir" / "out.html")])
    assert r.exit_code == 2 and "--report" in r.output and "does not exist" in r.output
    assert not (tmp_path / "out.pdf").exists()


def _capacity_result():
    from xpuplan.jobs.serve import CapacityRequest, infer_capacity

    return infer_capacity(CapacityRequest(model="llama-3-8b", hw="h100", qps=5, ttft_ms=1000, tpot_ms=100))


def _md_tables(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    prev = False
    for ln in text.splitlines():
        is_row = ln.startswith("|")
        if is_row and not prev:
            blocks.append([])
        if is_row:
            blocks[-1].append(ln)
        prev = is_row
    return blocks


def test_user_strings_are_escaped():
    res = _capacity_result()
    evil = "<script>alert('x')</script> | col"
    opts = [res.options[0].model_copy(update={"hardware": evil}), *res.options[1:]]
    res = res.model_copy(update={"model": evil, "options": opts})
    page = render_html(res)
    check_html(page)
    assert evil not in page and "&lt;script&gt;" in page
    tables = _md_tables(render_markdown(res))
    assert tables
    for t in tables:  # a '|' in a user string does not add a column
        assert len({ln.count("|") for ln in t}) == 1, t


def test_write_is_atomic_and_keeps_the_old_report_on_failure(tmp_path, monkeypatch):
    res = _capacity_result()
    out = tmp_path / "r.html"
    out.write_text("previous report", encoding="utf-8")
    import xpuplan.report.capacity as cap

    def boom(_res):
        raise RuntimeError("renderer crashed")

    monkeypatch.setattr(cap, "render_html", boom)
    with pytest.raises(RuntimeError):
        write_report(res, out)
    assert out.read_text(encoding="utf-8") == "previous report"
    monkeypatch.undo()
    write_report(res, out)
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]  # no temporary file left behind


def test_unknown_suffix_is_a_user_error_naming_the_flag(tmp_path):
    with pytest.raises(UserInputError) as e:
        write_report(_capacity_result(), tmp_path / "r.txt")
    assert e.value.field == "--report"


def test_infeasible_search_still_writes_its_report(tmp_path):
    out = tmp_path / "nothing-fits.md"
    r = runner.invoke(app, ["train", "search", "--model", "llama-3-70b", "--hw", "h100", "--devices", "1",
                            "--report", str(out)])
    assert r.exit_code == 3, r.output
    text = out.read_text(encoding="utf-8")
    assert "| plans that fit | 0 |" in text and "## Advice" in text and "16 x nvidia-h100-sxm-80gb" in text


def test_train_report_carries_the_launch_command(tmp_path):
    out = tmp_path / "t.html"
    r = runner.invoke(app, ["train", "search", "--model", "llama-3-8b", "--hw", "h100", "--devices", "16", "--top", "2",
                            "--emit", "megatron", "--json", "--report", str(out)])
    assert r.exit_code == 0, r.output
    launch = json.loads(r.stdout)["launch"]["text"]
    page = out.read_text(encoding="utf-8")
    check_html(page)
    assert "Launch command of the best plan" in page and escape(launch.splitlines()[-1]) in page


def test_report_assumptions_show_floats_readably():
    from xpuplan.report.page import assumption_rows

    rows = assumption_rows({"training_stack": {"ep_overlap_sm_share": {"value": 20 / 132, "source": "s"},
                                               "grad_reduce_bytes": {"value": 2.0, "source": "t"},
                                               "ep_overlap_schedule": {"value": "combined_1f1b", "source": "u"}}})
    assert ("training_stack.ep_overlap_sm_share", "0.151515", "s") in rows
    assert ("training_stack.grad_reduce_bytes", "2", "t") in rows
    assert ("training_stack.ep_overlap_schedule", "combined_1f1b", "u") in rows


def test_infer_capacity_report_in_chinese(tmp_path):
    d, page, md = run(tmp_path, [*CAPACITY, "--lang", "zh"], "capacity")
    check_html(page)
    for words in ("推理服务容量", "可选方案", "各方案所需设备数", "最少设备数", "所用数据及可信等级", "可信等级：A"):
        assert words in page, words
    assert "推理服务容量" in md and "| 设备 | 指标 | 数值 | 可信等级 | 来源 |" in md
    # the English headings are gone; the figures are the same as in English
    assert "Devices per option" not in page and "Figures used, with trust" not in page
    best = d["options"][0]
    both(f"{best['at_target']['tpot_s'] * 1e3:,.1f} ms", page, md)


def test_an_unknown_report_language_names_the_flag(tmp_path):
    r = runner.invoke(app, [*CAPACITY[:-2], "--lang", "fr", "--report", str(tmp_path / "r.html")])
    assert r.exit_code == 2 and "--lang" in r.output and not (tmp_path / "r.html").exists()


def test_the_recommend_report_page_speaks_its_language():
    from xpuplan.report.page import html_page, md_page

    zh = html_page("t", "s", schema_version="2.0", sections=[], lang="zh", caveats=["c"])
    assert "注意事项" in zh and "可信等级：A" in zh and "Generated by xpuplan" not in zh
    assert "Caveats" in html_page("t", "s", schema_version="2.0", sections=[], caveats=["c"])
    assert "此结果未使用目录中的指标" in md_page("t", "s", schema_version="2.0", body=[], lang="zh")


def test_a_dimensionless_figure_shows_no_unit():
    from xpuplan.report.format import fmt_figure

    assert fmt_figure(1.1, "1") == "1.1" and fmt_figure(989.4e12, "FLOP/s") == "989.4 TFLOP/s"


def test_capacity_report_says_why_a_band_is_widened(tmp_path):
    """The MI300X's serving rows are all one other model (Llama 3.1 405B FP8): its option's band is widened, and the
    report says so beside the table, in either language; the H100's band is its own and gets no such note."""
    d, page, md = run(tmp_path, CAPACITY, "capacity")
    mi = next(o for o in d["options"] if o["hardware"] == "amd-mi300x-192gb")
    h100 = next(o for o in d["options"] if o["hardware"] == "nvidia-h100-sxm-80gb")
    assert mi["uncertainty"]["extrapolation"] and not h100["uncertainty"]["extrapolation"]
    lo, hi = mi["uncertainty"]["ranges"]["devices"]
    note = f"amd-mi300x-192gb: its 80% band ({lo:,.0f} - {hi:,.0f} devices) is widened"
    both(note, page, md)
    assert "nvidia-h100-sxm-80gb: its 80% band" not in page
    assert "(the rows are all llama3.1-405b)" in page
    _, zh, zh_md = run(tmp_path, [*CAPACITY, "--lang", "zh"], "capacity")
    both("amd-mi300x-192gb：80% 区间", zh, zh_md)
    assert "已放宽" in zh


@pytest.fixture(scope="module")
def overlapped_train_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The training report (HTML), in English and in Chinese, of a search whose best plan ends in -epo (the MoE
    all-to-all overlap)."""
    out_dir = tmp_path_factory.mktemp("train_reports")
    pages = {}
    for lang in ("en", "zh"):
        out = out_dir / f"train_{lang}.html"
        r = runner.invoke(app, ["train", "search", "--model", "qwen3-30b-a3b", "--hw", "H100", "--devices", "16",
                                "--seq-len", "4096", "--stack", "nemo", "--top", "3", "--lang", lang,
                                "--report", str(out)])
        assert r.exit_code == 0, r.output
        pages[lang] = out.read_text(encoding="utf-8")
    return pages


def test_train_report_says_what_an_overlapped_plan_is_in_either_language(overlapped_train_reports):
    """A best plan whose key ends in -epo (the MoE all-to-all overlap) gets a row saying so in the reader's language."""
    rows = {"en": "MoE all-to-all overlap", "zh": "MoE 全对全通信重叠"}
    for lang, label in rows.items():
        html = overlapped_train_reports[lang]
        assert "-epo" in html and label in html


def test_train_report_labels_the_planners_english_notes_in_chinese(overlapped_train_reports):
    """The best plan's notes are the planner's own words (English): the Chinese report says so above them."""
    labels = {"en": "Notes on this plan", "zh": "本方案的说明（规划器原文，英文）"}
    for lang, label in labels.items():
        html = overlapped_train_reports[lang]
        assert label in html and html.index(label) < html.index("<li>-epo:")


def test_train_report_says_what_partial_recomputation_and_lora_are_in_either_language(tmp_path):
    """A partial-recomputation best plan (key part rpart) and a LoRA job get rows in the reader's language."""
    cases = {
        "partial": (["--model", "mixtral-8x22b", "--devices", "32", "--offload-modules", "none",
                     "--recompute-modules", "core_attn"], {"en": "Partial recomputation", "zh": "部分重计算"}),
        "lora": (["--model", "llama3-70b", "--devices", "8", "--method", "lora", "--lora-targets", "q,k,v"],
                 {"en": "LoRA: rank-16 adapters on q, k, v", "zh": "LoRA：秩 16 的适配器，作用于 q, k, v"}),
    }
    for name, (args, labels) in cases.items():
        for lang, label in labels.items():
            out = tmp_path / f"{name}_{lang}.html"
            r = runner.invoke(app, ["train", "search", "--hw", "H100", *args, "--top", "2", "--lang", lang,
                                    "--report", str(out)])
            assert r.exit_code == 0, r.output
            html = out.read_text(encoding="utf-8")
            assert label in html, (name, lang)
            if name == "partial":
                assert "-rpart-" in html
