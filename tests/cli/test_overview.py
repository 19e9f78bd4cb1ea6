import json

from typer.testing import CliRunner

from xpuplan.cli.main import app
from xpuplan.jobs.overview import DEFAULT_HARDWARE, overview

runner = CliRunner()


def test_overview_defaults_cover_gpus_and_npus():
    ov = overview()
    assert ov.model_id == "llama3-70b"
    assert [d.device_id for d in ov.devices] == list(DEFAULT_HARDWARE)
    assert {d.kind for d in ov.devices} >= {"GPU", "NPU", "TPU"}
    for d in ov.devices:
        assert d.serving is not None and d.serving.devices >= 1, d.reasons
        assert d.training is not None and 0 < d.training.mfu < 1, d.reasons
    h100 = ov.devices[0]
    # 141 GB of weights cannot be served by one 80 GB card
    assert h100.serving.tp >= 2


def test_overview_cli_json_and_errors():
    r = runner.invoke(app, ["overview", "--hw", "H100,910B", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert [x["device_id"] for x in d["devices"]] == ["nvidia-h100-sxm-80gb", "huawei-ascend-910b"]
    r = runner.invoke(app, ["overview", "--hw", "H1OO"])
    assert r.exit_code == 2 and "did you mean" in r.output
    r = runner.invoke(app, ["overview", "--train-devices", "0"])
    assert r.exit_code == 2 and "--train-devices" in r.output


_BARE = """schema_version: 1
vendor: Test
sources:
  s: {title: "test", date: "2026", kind: estimate}
devices:
  - id: test-bare
    name: "a device with memory but no compute figure"
    kind: NPU
    origin_country: CN
    memory:
      capacity_gb: {value: 64, source: s, trust: D}
      bandwidth_gb_per_s: {value: 1000, source: s, trust: D}
    ecosystem: {software_stack: x, pytorch: none, maturity: 1}
"""


def test_overview_reports_missing_figures_as_reasons(tmp_path, monkeypatch):
    (tmp_path / "bare.yaml").write_text(_BARE, encoding="utf-8")
    monkeypatch.setenv("XPUPLAN_HARDWARE_PATH", str(tmp_path / "bare.yaml"))
    ov = overview(hardware=["test-bare"])
    d = ov.devices[0]
    assert d.serving is None and d.training is None
    assert any("dense_tflops" in r and "--hw-figure" in r for r in d.reasons), d.reasons


def test_search_hints_uneven_pipeline_when_layers_restrict_pp():
    r = runner.invoke(app, ["train", "search", "--model", "llama3.1-405b", "--hw", "H100", "--devices", "16384",
                            "--top", "1", "--no-uneven-pipeline"])
    assert r.exit_code == 0, r.output
    assert "--uneven-pipeline" in r.stdout and "pp16" in r.stdout


def test_search_tries_uneven_pipelines_by_default():
    r = runner.invoke(app, ["train", "search", "--model", "llama3.1-405b", "--hw", "H100", "--devices", "16384",
                            "--top", "1", "--json"])
    assert r.exit_code == 0, r.output
    assert "pp16" in r.stdout
