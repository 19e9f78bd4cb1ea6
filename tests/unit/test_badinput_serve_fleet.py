"""Bad input to the serving, memory, roofline, simulate and fleet commands: an unknown name, a layout the model
cannot take, a length beyond its context, an engine of another vendor's stack are the user's mistakes (exit 2 /
HTTP 422 naming the flag or the file's field), never an infeasible plan (exit 3), a silently dropped value or a
"None" in the output."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.clicheck import assert_user_error, run
from xpuplan.catalog import load_catalog
from xpuplan.serve.constants import engine_profile
from xpuplan.serve.replica import engine_stack_issue

ESTIMATE = ("infer", "estimate", "--model", "llama3-8b", "--hw", "H100", "--in", "1024", "--out", "128")
CAPACITY = ("infer", "capacity", "--model", "llama3-8b", "--hw", "H100", "--qps", "10", "--tpot-ms", "50")

#: One class, one candidate: enough for every candidate check (they run before any capacity is evaluated).
FLEET: dict[str, Any] = {
    "model": "llama3-8b",
    "classes": [{"name": "chat", "rate_per_s": 5, "input_len": 1000, "output_len": 200,
                 "slo": {"ttft_ms": 2000, "tpot_ms": 50}}],
    "candidates": [{"hardware": "nvidia-h100-sxm-80gb", "tp": [1]}],
}

#: One pool, one class.
SIM: dict[str, Any] = {
    "model": "qwen2.5-72b", "duration_s": 5,
    "pools": [{"name": "gpu", "hardware": "nvidia-h100-sxm-80gb", "tp": 4, "dtype": "fp8", "engine": "vllm"}],
    "classes": [{"name": "chat", "rate_rps": 1,
                 "input_len": {"dist": "lognormal", "mean": 3000, "cv": 0.6, "max": 16000},
                 "output_len": {"dist": "lognormal", "mean": 600, "cv": 0.8, "max": 4096}}],
}


def scenario(tmp_path: Path, base: dict[str, Any], change: Any) -> str:
    data = copy.deepcopy(base)
    change(data)
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


@pytest.fixture
def client(api_client: Any) -> Any:
    return api_client


# -- 1. fleet candidates ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("key", "value", "field"), [
    ("engine", "zz", "candidates[0].engine"),
    ("dtype", ["fp9"], "candidates[0].dtype[0]"),
    ("tp", [3], "candidates[0].tp[0]"),
    ("engine", "mindie", "candidates[0].engine"),  # MindIE is built for Ascend, not an H100
])
def test_fleet_candidate_mistakes_are_input_errors_not_dropped_candidates(tmp_path, key, value, field):
    path = scenario(tmp_path, FLEET, lambda d: d["candidates"][0].update({key: value}))
    assert_user_error(run("fleet", "optimize", path), field)
    assert_user_error(run("fleet", "sweep", path), field)


def test_fleet_candidate_mistake_is_422_naming_the_field(client):
    body = copy.deepcopy(FLEET)
    body["candidates"][0]["dtype"] = ["bf16", "fp9"]
    r = client.post("/api/v1/fleet/optimize", json={"scenario": body})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "scenario.candidates[0].dtype[1]"


def test_fleet_option_that_cannot_fit_is_left_out_with_a_note(tmp_path):
    def change(d: dict[str, Any]) -> None:
        d["model"] = "llama3-70b"
        d["candidates"][0]["tp"] = [1, 4]  # 141 GB of weights cannot fit one H100: tp 1 is left out

    r = run("fleet", "optimize", scenario(tmp_path, FLEET, change), "--json")
    assert r.exit_code == 0, r.output
    plan = json.loads(r.stdout)
    assert {m["tp"] for m in plan["mix"]} == {4}
    assert any(n.startswith("nvidia-h100-sxm-80gb/tp1/bf16 left out for every class") for n in plan["notes"])


# -- 2. infer capacity: names and layouts --------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "flag"), [
    (("--dtype", "bf16,zz"), "--dtype"),
    (("--dtype", "zz"), "--dtype"),
    (("--engine", "nope"), "--engine"),
    (("--kv-dtype", "zz"), "--kv-dtype"),
    (("--tp", "3"), "--tp"),
    (("--ep", "2"), "--ep"),
])
def test_capacity_bad_names_and_layouts_are_input_errors(args, flag):
    assert_user_error(run(*CAPACITY, *args), flag)


def test_capacity_unknown_dtype_is_422_not_409(client):
    r = client.post("/api/v1/infer/capacity", json={"model": "llama3-8b", "hw": "H100", "qps": 10, "tpot_ms": 50,
                                                     "dtype": "bf16,zz"})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "dtype"


# -- 3. infer estimate: expert flags on a dense model ---------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--etp", "--ep"])
def test_estimate_refuses_expert_parallel_flags_on_a_dense_model(flag):
    r = run(*ESTIMATE, flag, "2")
    assert_user_error(r, flag)
    assert "dense" in r.output


# -- 4. lengths beyond the model's context --------------------------------------------------------------------------
def test_memory_infer_context_beyond_the_model_is_refused():
    assert_user_error(run("memory", "infer", "--model", "llama3-8b", "--context", "1000000"), "--context")


def test_memory_infer_default_context_stays_within_a_short_model():
    r = run("memory", "infer", "--model", "llama-7b", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["context"] == 2048


def test_overview_prompt_beyond_the_model_is_refused():
    assert_user_error(run("overview", "--in", "100000", "--hw", "H100"), "--in")


def test_simulate_length_cap_beyond_the_pool_model_is_refused(tmp_path):
    path = scenario(tmp_path, SIM, lambda d: d["classes"][0]["input_len"].update(mean=100000, max=200000))
    assert_user_error(run("simulate", path), "classes[0].input_len.max")


def test_fleet_length_cap_beyond_the_model_is_refused(tmp_path):
    path = scenario(tmp_path, FLEET, lambda d: d["classes"][0].update(
        input_len={"dist": "lognormal", "mean": 4000, "cv": 0.4, "max": 200000}))
    assert_user_error(run("fleet", "optimize", path), "classes[0].input_len.max")


# -- 5. roofline ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tp", ["3", "1024"])
def test_roofline_refuses_a_tp_that_does_not_divide_the_heads(tp):
    r = run("roofline", "--hw", "H100", "--model", "llama3-8b", "--tp", tp)
    assert_user_error(r, "--tp")
    assert f"tp ({tp}) must divide n_heads (32)" in r.output


def test_roofline_refuses_a_model_and_a_gemm_together():
    r = run("roofline", "--hw", "H100", "--model", "llama3-8b", "--m", "5", "--n", "5", "--k", "5")
    assert_user_error(r, "--model")
    assert "--m/--n/--k" in r.output


# -- 6. simulate: lengths and booleans -------------------------------------------------------------------------------
def test_simulate_refuses_a_max_below_the_mean(tmp_path):
    path = scenario(tmp_path, SIM, lambda d: d["classes"][0]["input_len"].update(max=10))
    r = run("simulate", path)
    assert_user_error(r, "classes[0].input_len")
    assert "below the mean" in r.output


def test_simulate_refuses_a_boolean_rate(tmp_path):
    r = run("simulate", scenario(tmp_path, SIM, lambda d: d["classes"][0].update(rate_rps=True)))
    assert_user_error(r, "classes[0].rate_rps")


def test_simulate_boolean_rate_is_422_naming_the_field(client):
    body = copy.deepcopy(SIM)
    body["classes"][0]["rate_rps"] = True
    r = client.post("/api/v1/simulate", json={"scenario": body})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "scenario.classes[0].rate_rps"


def test_fleet_refuses_a_boolean_rate(tmp_path):
    path = scenario(tmp_path, FLEET, lambda d: d["classes"][0].update(rate_per_s=True))
    assert_user_error(run("fleet", "optimize", path), "classes[0].rate_per_s")


# -- 7. an engine of another vendor's stack ---------------------------------------------------------------------------
@pytest.mark.parametrize("args", [
    ("infer", "estimate", "--model", "llama3-8b", "--hw", "H100", "--in", "1024", "--out", "128", "--engine", "mindie"),
    ("infer", "estimate", "--model", "llama3-8b", "--hw", "910B", "--in", "1024", "--out", "128", "--engine", "trtllm"),
    ("infer", "capacity", "--model", "llama3-8b", "--hw", "H100", "--qps", "10", "--tpot-ms", "50", "--engine", "mindie"),
    ("memory", "infer", "--model", "llama3-8b", "--hw", "H100", "--engine", "mindie"),
])
def test_engine_of_another_stack_is_refused(args):
    r = run(*args)
    assert_user_error(r, "--engine")
    assert "does not run on" in r.output


def test_engine_stack_follows_the_catalog():
    catalog = list(load_catalog())
    by_id = {d.id: d for d in catalog}
    h100, ascend = by_id["nvidia-h100-sxm-80gb"], by_id["huawei-ascend-910b"]
    assert engine_stack_issue(engine_profile("vllm"), h100, catalog) is None
    assert engine_stack_issue(engine_profile("vllm"), ascend, catalog) is None
    assert engine_stack_issue(engine_profile("pytorch"), ascend, catalog) is None  # no device lists it: no data
    assert "Huawei" in (engine_stack_issue(engine_profile("mindie"), h100, catalog) or "")
    assert "NVIDIA" in (engine_stack_issue(engine_profile("TensorRT-LLM v0.9"), ascend, catalog) or "")


# -- 8. only the SLOs given are printed ---------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "shown", "absent"), [
    (("--ttft-ms", "500"), "TTFT P99 <= 500 ms", "TPOT <="),
    (("--tpot-ms", "50"), "TPOT <= 50 ms", "TTFT P99 <="),
])
def test_estimate_prints_only_the_slos_given(args, shown, absent):
    r = run(*ESTIMATE, *args)
    assert r.exit_code == 0, r.output
    assert shown in r.output and absent not in r.output and "None" not in r.output


# -- 9. fleet --duration is named as typed -------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["optimize", "sweep"])
def test_fleet_duration_names_the_flag(tmp_path, command):
    r = run("fleet", command, scenario(tmp_path, FLEET, lambda d: None), "--duration", "-1")
    assert_user_error(r, "--duration")
    assert "--duration-s" not in r.output


# -- 10. a percentile typed as a fraction ---------------------------------------------------------------------------
@pytest.mark.parametrize("args", [(*ESTIMATE, "--ttft-ms", "500"), CAPACITY])
def test_percentile_as_a_fraction_is_refused_suggesting_99(args):
    r = run(*args, "--percentile", "0.99")
    assert_user_error(r, "--percentile")
    assert "did you mean 99?" in r.output


def test_fleet_percentile_as_a_fraction_is_refused(tmp_path):
    path = scenario(tmp_path, FLEET, lambda d: d["classes"][0]["slo"].update(percentile=0.99))
    r = run("fleet", "optimize", path)
    assert_user_error(r, "classes[0].slo.percentile")
    assert "did you mean 99?" in r.output
