"""Issue 14 §3: every chip the seed guides name can be planned; a missing figure is named once and
can be supplied in one line (--hw-figure, a flag or a YAML file); the catalog review fixes hold."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from xpuplan.catalog import load_catalog
from xpuplan.cli.main import app, take_hw_figures

runner = CliRunner()

#: Every chip the seed guides (/work/shared/seeds) name, by catalog id.
GUIDE_CHIPS = (
    "enflame-dtu", "enflame-t10", "enflame-t20", "enflame-i10", "enflame-i20", "enflame-s60", "enflame-l600",
    "huawei-ascend-310", "huawei-ascend-310p", "huawei-ascend-910", "huawei-ascend-910b", "huawei-ascend-910b3",
    "huawei-ascend-910c", "cambricon-mlu370-x4", "cambricon-mlu370-x8", "cambricon-mlu370-s4", "cambricon-mlu370-s8",
    "cambricon-mlu590", "hygon-dcu-z100", "hygon-dcu-k100", "hygon-dcu-bw1000", "google-tpu-v4",
    "nvidia-a100-sxm-80gb", "nvidia-h100-sxm-80gb", "nvidia-h200-sxm-141gb", "nvidia-b100", "nvidia-b200-180gb",
    "nvidia-rtx-4090-24gb",
)

_INFER = ["infer", "estimate", "--model", "gpt2", "--in", "512", "--out", "128", "--batch", "1", "--json"]
_TRAIN = ["train", "estimate", "--model", "gpt2", "--devices", "8", "--json"]


@pytest.fixture(autouse=True)
def _no_user_figures(monkeypatch):
    """--hw-figure writes $XPUPLAN_HW_FIGURES for the process; monkeypatch restores it after each test."""
    monkeypatch.setenv("XPUPLAN_HW_FIGURES", "")


@pytest.mark.parametrize("chip", GUIDE_CHIPS)
def test_every_guide_chip_can_be_planned_for_inference(chip):
    r = runner.invoke(app, [*_INFER, "--hw", chip])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["results"], res["infeasible"]
    assert res["results"][0]["ttft_s"] > 0


@pytest.mark.parametrize("chip", GUIDE_CHIPS)
def test_every_guide_chip_can_be_planned_for_training(chip):
    r = runner.invoke(app, [*_TRAIN, "--hw", chip])
    # 0: the plan fits; 3: a plan that does not fit, with advice (the planner ran to the end)
    assert r.exit_code in (0, 3), r.output
    if r.exit_code == 0:
        assert json.loads(r.stdout)["tokens_per_s"] > 0


def test_trust_d_figures_mark_the_result():
    r = runner.invoke(app, [*_INFER, "--hw", "enflame-s60"])
    caveats = json.loads(r.stdout)["used"]["caveats"]
    assert any("enflame-s60" in c and "trust-D" in c and "dense_tflops.bf16" in c for c in caveats), caveats
    text = runner.invoke(app, [*_INFER[:-1], "--hw", "enflame-s60"]).stdout
    assert "caveat:" in text and "trust-D" in text


def test_fp16_only_chip_runs_bf16_at_its_fp16_rate_and_says_so():
    dev = load_catalog().get("huawei-ascend-310p")
    assert not dev.supports("bf16") and dev.peak_flops("bf16") == dev.peak_flops("fp16") == 70e12
    assert dev.summary()["dense_bf16_flops_per_s"] is None and dev.summary()["dense_16bit_format"] == "fp16"
    res = json.loads(runner.invoke(app, [*_INFER, "--hw", "310P"]).stdout)
    assert any("fp16 rate" in c for c in res["used"]["caveats"])
    assert res["results"][0]["replica"]["precision"]["gemm_dtype"] == "fp16"
    train = json.loads(runner.invoke(app, [*_TRAIN, "--hw", "310P"]).stdout)
    assert any("fp16 rate" in n for n in train["notes"])
    assert "(fp16)" in runner.invoke(app, ["hw", "list", "--vendor", "Huawei"]).stdout


# --------------------------------------------------------------------------------------------
# one message naming the missing figure, no loop of contradicting hints
# --------------------------------------------------------------------------------------------
_FILE = """schema_version: 1
vendor: Test
sources:
  s: {{title: "test", date: "2026", kind: estimate}}
devices:
  - id: test-chip
    name: "test chip"
    kind: NPU
    origin_country: CN
    dense_tflops: {{{compute}}}
    memory:
      capacity_gb: {{value: 64, source: s, trust: C}}
      bandwidth_gb_per_s: {{value: 1000, source: s, trust: C}}
    ecosystem: {{software_stack: x, pytorch: none, maturity: 1}}
"""


@pytest.fixture
def chip_file(tmp_path, monkeypatch):
    def make(compute: str) -> None:
        (tmp_path / "chip.yaml").write_text(_FILE.format(compute=compute), encoding="utf-8")
        monkeypatch.setenv("XPUPLAN_HARDWARE_PATH", str(tmp_path / "chip.yaml"))
    return make


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp8", "int8", "int8-wo", "int4-wo"])
def test_a_chip_without_compute_figures_gets_one_message_naming_the_figure(chip_file, dtype):
    chip_file("")
    r = runner.invoke(app, [*_INFER[:-1], "--hw", "test-chip", "--dtype", dtype])
    assert r.exit_code == 2
    assert "dense_tflops." in r.output and "--hw-figure test-chip:dense_tflops." in r.output
    assert "--dtype" not in r.output.split("error:", 1)[1].replace("field '--dtype'", "")  # no other scheme offered


def test_an_int8_only_chip_is_offered_only_a_scheme_that_runs(chip_file):
    chip_file("int8: {value: 100, source: s, trust: C}")
    for dtype in ("bf16", "int8-wo", "int4-wo", "fp8"):
        r = runner.invoke(app, [*_INFER[:-1], "--hw", "test-chip", "--dtype", dtype])
        assert r.exit_code == 2 and "dense_tflops." in r.output and "--dtype int8 (W8A8)" in r.output, r.output
    assert runner.invoke(app, [*_INFER[:-1], "--hw", "test-chip", "--dtype", "int8"]).exit_code == 0


def test_a_16bit_only_chip_asked_for_int8_is_offered_int8_wo_which_runs(chip_file):
    chip_file("fp16: {value: 100, source: s, trust: C}")
    r = runner.invoke(app, [*_INFER[:-1], "--hw", "test-chip", "--dtype", "int8"])
    assert r.exit_code == 2 and "dense_tflops.int8" in r.output and "int8-wo" in r.output
    assert runner.invoke(app, [*_INFER[:-1], "--hw", "test-chip", "--dtype", "int8-wo"]).exit_code == 0


def test_train_names_the_missing_figure(chip_file):
    chip_file("")
    r = runner.invoke(app, [*_TRAIN[:-1], "--hw", "test-chip"])
    assert r.exit_code == 2 and "dense_tflops.bf16" in r.output and "--hw-figure test-chip:" in r.output


# --------------------------------------------------------------------------------------------
# --hw-figure: a flag or a file, anywhere on the command line
# --------------------------------------------------------------------------------------------
_BIG = ["infer", "estimate", "--model", "llama3-8b", "--in", "512", "--out", "128", "--batch", "1", "--json"]


def _tokens_per_s(args: list[str]) -> float:
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["results"][0]["output_tokens_per_s"]


def test_hw_figure_flag_overrides_a_figure_and_marks_the_result():
    base = _tokens_per_s([*_BIG, "--hw", "S60"])
    faster = _tokens_per_s(["--hw-figure", "enflame-s60:memory.bandwidth_gb_per_s=2000", *_BIG, "--hw", "S60"])
    assert faster > 1.5 * base  # decode at batch 1 is memory-bound
    r = runner.invoke(app, ["--hw-figure", "S60:compute.bf16_tflops=150[100..200]@B", *_INFER, "--hw", "S60"])
    res = json.loads(r.stdout)
    fig = [f for f in res["used"]["figures"] if f["path"] == "dense_tflops.bf16"][0]
    assert fig["value"] == 150e12 and fig["trust"] == "B" and fig["source"].startswith("user-supplied")
    assert any("user-supplied" in c for c in res["used"]["caveats"])


def test_hw_figure_file_one_line_yaml(tmp_path):
    f = tmp_path / "figs.yaml"
    f.write_text("enflame-s60: {memory.bandwidth_gb_per_s: 2000}\n", encoding="utf-8")
    base = _tokens_per_s([*_BIG, "--hw", "S60"])
    assert _tokens_per_s(["--hw-figure", str(f), *_BIG, "--hw", "S60"]) > 1.5 * base


def test_hw_figure_works_after_the_command_words():
    words, figs = take_hw_figures(["infer", "estimate", "--hw-figure", "a:b=1", "--hw", "S60", "--hw-figure=c:d=2"])
    assert words == ["infer", "estimate", "--hw", "S60"] and figs == ["a:b=1", "c:d=2"]


@pytest.mark.parametrize(("spec", "words"), [
    ("enflame-s6:dense_tflops.bf16=1", "unknown hardware"),
    ("enflame-s60:memory.speed=1", "no unit suffix"),
    ("enflame-s60:speed.x_gb=1", "unknown figure path"),
    ("enflame-s60:dense_tflops.bf17=1", "unknown precision"),
    ("enflame-s60:dense_tflops.bf16", "not-a-file"),
    ("enflame-s60:dense_tflops.bf16=-3", "finite number >= 0"),
    ("enflame-s60:dense_tflops.bf16=0", "must be > 0"),  # was a ZeroDivisionError (exit 1) in the planners
    ("enflame-s60:memory.capacity_gb=0", "must be > 0"),
    ("enflame-s60:dense_tflops.bf16=5[6..9]", "range"),
])
def test_hw_figure_errors_name_the_flag(spec, words):
    r = runner.invoke(app, ["--hw-figure", spec, "hw", "list"])
    assert r.exit_code == 2
    assert "--hw-figure" in r.output and (words in r.output or words == "not-a-file" and "not found" in r.output), r.output


def test_a_zero_figure_in_a_file_is_bad_input(tmp_path):
    f = tmp_path / "figs.yaml"
    f.write_text("enflame-s60:\n  dense_tflops.bf16: 0\n", encoding="utf-8")
    r = runner.invoke(app, ["--hw-figure", str(f), "hw", "list"])
    assert r.exit_code == 2 and "must be > 0" in r.output and "dense_tflops.bf16" in r.output, r.output


def test_hw_figure_error_under_json_is_a_json_object(monkeypatch, capsys):
    """The ``xpuplan`` script reads --hw-figure before the command; under --json its error is JSON too."""
    from xpuplan.cli.main import run

    monkeypatch.setattr("sys.argv", ["xpuplan", "hw", "list", "--json", "--hw-figure", "enflame-s60:dense_tflops.bf16=0"])
    with pytest.raises(SystemExit) as exc:
        run()
    assert exc.value.code == 2
    d = json.loads(capsys.readouterr().out)
    assert d["field"] == "--hw-figure" and "> 0" in d["error"]


# --------------------------------------------------------------------------------------------
# review fixes
# --------------------------------------------------------------------------------------------
def test_review_hygon_z100_link_stored_per_direction():
    f = load_catalog().get("hygon-dcu-z100").figure("scale_up.bandwidth_gb_per_s_per_direction")
    assert f.printed_value == 92 and f.high == 184e9 and "both directions" in f.note


def test_review_hygon_table_figures_are_trust_d():
    for dev in ("hygon-dcu-k100", "hygon-dcu-bw1000"):
        figs = load_catalog().get(dev).figures.values()
        table = [f for f in figs if f.source.key == "hblas-bench"]
        assert table and all(f.trust == "D" for f in table)


def test_review_tpu_ici_notes_quote_the_scaling_book_correctly():
    cat = load_catalog()
    for dev, per_link in (("google-tpu-v5e", "4 x 45 = 180"), ("google-tpu-v5p", "6 x 90 = 540"),
                          ("google-tpu-v6e", "4 x 90 = 360")):
        note = cat.get(dev).figure("scale_up.bandwidth_gb_per_s_per_direction").note
        assert per_link in note and "agrees" not in note


def test_review_gaudi2_fp8_is_twice_bf16_with_the_press_figure_in_range():
    d = load_catalog().get("intel-gaudi2")
    f = d.figure("dense_tflops.fp8")
    assert f.printed_value == 865 and f.low == 835e12 and abs(f.value - 2 * d.peak_flops("bf16")) < 2e12


def test_review_310p_fp16_and_b100_int8():
    cat = load_catalog()
    assert cat.get("huawei-ascend-310p").figure("dense_tflops.fp16").printed_value == 70
    assert cat.get("nvidia-b100").figure("dense_tflops.int8").printed_value == 3500


def test_review_pcie_nvlink_bridges_are_optional_pairs():
    from xpuplan.train import Cluster

    for dev_id in ("nvidia-a100-pcie-80gb", "nvidia-a100-pcie-40gb", "nvidia-h100-pcie-80gb"):
        dev = load_catalog().get(dev_id)
        assert dev.scale_up_bandwidth is None and dev.optional_scale_up_bandwidth == 300e9
        plain = Cluster.from_catalog(dev, 8)
        assert plain.topology == "pcie"
        bridged = Cluster.from_catalog(dev, 8, scale_up_kind="nvlink-bridge")
        assert bridged.domain_size == 2 and bridged.scale_up.bandwidth == 300e9
