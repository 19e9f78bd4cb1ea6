"""``xpuplan infer`` invoked as a user would: output, JSON, exit codes; serving scenario files."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.workload.serving import LengthDist, load_serving_scenario

runner = CliRunner()
H100 = "nvidia-h100-sxm-80gb"


def run(*args: str):
    return runner.invoke(app, list(args))


def test_estimate_table():
    r = run("infer", "estimate", "--model", "llama2-70b", "--hw", H100, "--tp", "4", "--batch", "1,64", "--in", "512",
            "--out", "256", "--dtype", "fp8")
    assert r.exit_code == 0, r.output
    assert "TTFT ms" in r.output and "TPOT ms" in r.output and "out tok/s" in r.output
    assert "llama2-70b" in r.output and "KV bf16" in r.output  # vLLM's --kv-cache-dtype auto: the model dtype
    r8 = run("infer", "estimate", "--model", "llama2-70b", "--hw", H100, "--tp", "4", "--batch", "1", "--in", "512",
             "--out", "256", "--dtype", "fp8", "--kv-dtype", "fp8")
    assert r8.exit_code == 0 and "KV fp8" in r8.output, r8.output


def test_estimate_json_and_max_batch():
    r = run("infer", "estimate", "--model", "llama2-7b", "--hw", "H100", "--batch", "max", "--in", "1024", "--out", "256",
            "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    (res,) = data["results"]
    assert res["batch"] >= 64 and res["fits"]
    assert res["output_tokens_per_s"] > 1000 and res["ttft_s"] > 0 and res["tpot_s"] > 0
    assert res["replica"]["efficiency_source"]


def test_estimate_with_slo_and_disagg():
    r = run("infer", "estimate", "--model", "llama2-70b", "--hw", H100, "--tp", "4", "--batch", "64", "--in", "1024",
            "--out", "256", "--dtype", "fp8", "--ttft-ms", "1000", "--tpot-ms", "50", "--disagg", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["results"][0]
    assert res["at_slo"]["max_requests_per_s"] > 0
    assert res["at_slo"]["point"]["ttft_p_s"] <= 1.0 and res["at_slo"]["point"]["tpot_s"] <= 0.05
    assert res["disaggregated"]["requests_per_s_per_device"] > 0


def test_estimate_does_not_fit_exits_3():
    r = run("infer", "estimate", "--model", "llama2-70b", "--hw", H100, "--tp", "1", "--in", "512", "--out", "128")
    assert r.exit_code == 3, r.output
    assert "weights 138" in r.output and "85.9 GB" in r.output and "tp>=" in r.output
    assert "Traceback" not in r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--tp", "3"), "tp (3) must divide n_heads (64)"),
        (("--in", "0"), "--in must be positive"),
        (("--dtype", "fp7"), "unknown precision"),
        (("--hw", "H1000"), "unknown hardware"),
        (("--batch", "x"), "batch"),
    ],
)
def test_estimate_bad_input_exits_2(args, message):
    base = {"--model": "llama2-70b", "--hw": H100, "--tp": "4", "--in": "512", "--out": "128", "--batch": "1"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    r = run("infer", "estimate", *[x for kv in base.items() for x in kv])
    assert r.exit_code == 2, r.output
    assert message in r.output and "Traceback" not in r.output


def test_estimate_encoder():
    r = run("infer", "estimate", "--model", "bert-base", "--hw", H100, "--batch", "1,64", "--in", "128", "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["results"]
    assert res[0]["latency_s"] < res[1]["latency_s"] and res[0]["qps"] < res[1]["qps"]


def test_emit_prints_serve_command():
    r = run("infer", "estimate", "--model", "llama2-70b", "--hw", H100, "--tp", "4", "--batch", "128", "--in", "1024",
            "--out", "512", "--dtype", "fp8", "--emit", "vllm")
    assert r.exit_code == 0, r.output
    assert "vllm serve meta-llama/Llama-2-70b-hf" in r.output
    assert "--tensor-parallel-size 4" in r.output and "--max-num-seqs 128" in r.output
    assert "--max-model-len 1536" in r.output
    r = run("infer", "estimate", "--model", "llama2-70b", "--hw", H100, "--tp", "4", "--in", "128", "--out", "8",
            "--emit", "ollama")
    assert r.exit_code == 2 and "--emit must be one of" in r.output


def test_capacity_json():
    r = run("infer", "capacity", "--model", "llama3-8b", "--hw", "H100,A100", "--qps", "20", "--in", "1024", "--out",
            "256", "--ttft-ms", "1000", "--tpot-ms", "50", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    assert {o["hardware"] for o in data["options"]} == {H100, "nvidia-a100-sxm-80gb"}
    for o in data["options"]:
        assert o["devices"] == o["replicas"] * o["replica"]["n_devices"]
        assert o["at_target"]["ttft_p_s"] <= 1.0 and o["at_target"]["tpot_s"] <= 0.05
    h100 = next(o for o in data["options"] if o["hardware"] == H100)
    a100 = next(o for o in data["options"] if o["hardware"] != H100)
    assert h100["devices"] <= a100["devices"]


def test_capacity_table_and_emit():
    r = run("infer", "capacity", "--model", "llama2-70b", "--hw", H100, "--qps", "10", "--in", "512", "--out", "256",
            "--ttft-ms", "2000", "--tpot-ms", "60", "--dtype", "bf16,fp8", "--emit", "sglang")
    assert r.exit_code == 0, r.output
    assert "devices" in r.output and "sglang.launch_server" in r.output and "disagg" in r.output


def test_capacity_infeasible_exits_3():
    r = run("infer", "capacity", "--model", "llama3-8b", "--hw", H100, "--qps", "5", "--in", "1024", "--out", "128",
            "--ttft-ms", "1")
    assert r.exit_code == 3, r.output
    assert "TTFT" in r.output


def test_capacity_needs_an_slo_and_qps():
    r = run("infer", "capacity", "--model", "llama3-8b", "--hw", H100, "--qps", "5", "--in", "1024", "--out", "128")
    assert r.exit_code == 2 and "--ttft-ms" in r.output
    r = run("infer", "capacity", "--model", "llama3-8b", "--hw", H100, "--in", "1024", "--out", "128", "--tpot-ms", "50")
    assert r.exit_code == 2 and "--qps" in r.output


SCENARIO = """\
model: llama2-70b
hardware: [nvidia-h100-sxm-80gb]
replica:
  tp: 4
  dtype: fp8
  engine: vllm
traffic:
  qps: 10
  batch: 32
  input_len: {dist: uniform, min: 256, max: 768}
  output_len: 256
slo:
  ttft_ms: 2000
  tpot_ms: 60
"""


def test_scenario_file_for_estimate_and_capacity(tmp_path):
    p = tmp_path / "serve.yaml"
    p.write_text(SCENARIO, encoding="utf-8")
    r = run("infer", "estimate", "--scenario", str(p), "--json")
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)["results"][0]
    assert res["batch"] == 32 and res["input_len"] == 512 and res["replica"]["tp"] == 4
    assert "at_slo" in res
    r = run("infer", "capacity", "--scenario", str(p), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["options"][0]["replica"]["tp"] == 4
    # flags override the file
    r = run("infer", "estimate", "--scenario", str(p), "--batch", "8", "--json")
    assert json.loads(r.stdout)["results"][0]["batch"] == 8


def test_bad_scenario_names_file_line_and_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text(SCENARIO.replace("  qps: 10", "  qps: -3"), encoding="utf-8")
    r = run("infer", "capacity", "--scenario", str(p))
    assert r.exit_code == 2
    assert "bad.yaml:8" in r.output and "traffic.qps" in r.output
    with pytest.raises(UserInputError) as e:
        load_serving_scenario(p)
    assert e.value.line == 8


def test_length_distributions():
    u = LengthDist(dist="uniform", min=100, max=300)
    assert u.average == 200 and u.quantile(99) == pytest.approx(298)
    x = LengthDist(dist="exponential", mean=200)
    assert x.quantile(99) == pytest.approx(200 * 4.60517, rel=1e-4)
    n = LengthDist(dist="normal", mean=500, std=100)
    assert n.quantile(50) == pytest.approx(500)
    with pytest.raises(ValueError):
        LengthDist(dist="uniform", min=300, max=100)


DOC = Path(__file__).resolve().parents[2] / "docs" / "inference.md"


def _doc_commands() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    block = text.split("## Commands", 1)[1].split("```", 2)[1]
    return [line for line in block.splitlines() if line.startswith("xpuplan infer ")]


@pytest.mark.parametrize("command", _doc_commands() if DOC.exists() else [])
def test_documented_commands_run(command):
    r = run(*shlex.split(command)[1:])
    assert r.exit_code == 0, r.output


def test_capacity_defaults_request_shape_as_in_the_issue():
    # `xpuplan infer capacity --model M --hw H --qps Q --ttft-ms X --tpot-ms Y` works without --in/--out
    from xpuplan.workload.serving import DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN

    r = runner.invoke(app, ["infer", "capacity", "--model", "llama3-8b", "--hw", "H100", "--qps", "5",
                            "--ttft-ms", "2000", "--tpot-ms", "50", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert (d["input_len"], d["output_len"]) == (DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN)


def test_disagg_emit_prints_both_pools_and_router_and_json_has_argv():
    args = ("infer", "estimate", "--model", "llama3-70b", "--hw", H100, "--tp", "4", "--in", "1000", "--out", "200",
            "--ttft-ms", "1000", "--tpot-ms", "50", "--disagg", "--emit", "sglang")
    r = run(*args)
    assert r.exit_code == 0, r.output
    assert "# prefill pool" in r.output and "# decode pool" in r.output and "sglang_router.launch_router" in r.output
    assert "SGLang 0.5.23 (pinned" in r.output
    r = run(*args, "--json")
    launches = json.loads(r.stdout)["launches"]
    assert [len(lp["commands"]) for lp in launches] == [1, 3]
    assert all(lp["version"] == "0.5.23" and lp["problems"] == [] for lp in launches)
    agg = launches[0]["commands"][0]["argv"]
    at_slo = json.loads(r.stdout)["results"][-1]["at_slo"]["point"]["concurrency"]
    assert agg[agg.index("--max-running-requests") + 1] == str(at_slo)  # the concurrency the SLO estimate used


def test_emit_for_an_engine_the_hardware_cannot_run():
    """One device: exit 2 naming --emit. Several: the command for the ones it runs on, a comment for the rest."""
    r = run("infer", "estimate", "--model", "llama3-8b", "--hw", "H100", "--in", "1024", "--out", "128", "--emit", "mindie")
    assert r.exit_code == 2 and "--emit" in r.output and "Ascend" in r.output, r.output
    r = run("infer", "capacity", "--model", "llama3-70b", "--hw", "H100,910B", "--qps", "20", "--ttft-ms", "2000",
            "--tpot-ms", "50", "--emit", "mindie", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert any(c.startswith("# --emit mindie") and "nvidia-h100" in c for c in d["commands"])
    assert [lp["target"] for lp in d["launches"]] and all(lp["target"] == "mindie" for lp in d["launches"])


def test_spec_accept_out_of_range_names_the_flag_once():
    r = run("infer", "estimate", "--model", "llama3-70b", "--hw", "H100", "--tp", "4", "--in", "1024", "--out", "128",
            "--spec-tokens", "3", "--spec-accept", "5")
    assert r.exit_code == 2 and "field '--spec-accept'" in r.output and "field 'spec_accept'" not in r.output, r.output
