"""Bad input to the workload's lengths and SLOs, to overview's flags and to fleet candidates' lists: a length
distribution whose cut contradicts its mean, a percentile typed as a fraction, an empty list of tps or dtypes are the
user's mistakes (exit 2 / HTTP 422 naming the flag or the file's field), never silently read another way."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from tests.unit.clicheck import assert_user_error, run
from tests.unit.test_badinput_serve_fleet import FLEET, SIM, scenario
from xpuplan.errors import UserInputError
from xpuplan.jobs.overview import overview
from xpuplan.workload.datasets import dataset_lengths
from xpuplan.workload.lengths import LengthDist
from xpuplan.workload.serving import capped_exponential_scale, dataset_length_dists

#: A serving scenario of ``infer estimate`` / ``infer capacity --scenario``.
SERVING: dict[str, Any] = {
    "model": "llama3-8b", "hardware": ["nvidia-h100-sxm-80gb"],
    "traffic": {"qps": 5, "batch": 8, "input_len": {"dist": "lognormal", "mean": 1000, "cv": 0.5, "max": 4000},
                "output_len": 200},
    "slo": {"ttft_ms": 2000, "tpot_ms": 50},
}

#: A ``recommend`` scenario serving one pool.
RECOMMEND: dict[str, Any] = {
    "scenario": "online-inference",
    "workload": {"routing": None, "serving": {"input_len": {"dist": "lognormal", "mean": 1800, "cv": 0.8,
                                                            "max": 6000}, "output_len": 300}},
}

#: Distributions whose cut contradicts their mean: (change to the lognormal input length, words of the message).
BAD_CUTS = [
    ({"max": 10}, "is below the mean"),
    ({"min": 100000, "max": 200000}, "is above the mean"),
    ({"dist": "normal", "cv": None, "std": 100, "min": 5000, "max": None}, "is above the mean"),
    ({"dist": "fixed", "cv": None, "max": 10}, "is below the mean"),
    ({"dist": "uniform", "cv": None, "mean": None, "min": 0.2, "max": 0.5}, "below one token"),
]


def cut(d: dict[str, Any], change: dict[str, Any]) -> None:
    d.update(change)
    for k in [k for k, v in d.items() if v is None]:
        del d[k]


@pytest.fixture
def client(api_client: Any) -> Any:
    return api_client


# -- 1. a length distribution's cut against its mean, in LengthDist itself --------------------------------------------
@pytest.mark.parametrize(("kwargs", "words"), [
    ({"dist": "lognormal", "mean": 3000, "cv": 0.5, "max": 10}, "max (10) is below the mean (3000)"),
    ({"dist": "fixed", "mean": 3000, "max": 10}, "max (10) is below the mean (3000)"),
    ({"dist": "exponential", "mean": 300, "min": 900}, "min (900) is above the mean (300)"),
    ({"dist": "normal", "mean": 300, "std": 50, "min": 400, "max": 500}, "min (400) is above the mean (300)"),
    ({"dist": "uniform", "min": 0.2, "max": 0.5}, "max (0.5) is below one token"),
])
def test_length_dist_refuses_a_cut_that_contradicts_its_mean(kwargs, words):
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        LengthDist(**kwargs)


def test_length_dist_keeps_cuts_around_the_mean():
    assert LengthDist(dist="fixed", mean=500, min=500, max=500).average == 500
    assert LengthDist(dist="lognormal", mean=3000, cv=0.5, min=64, max=3000).high == 3000


def test_dataset_exponential_with_a_scale_beyond_its_cap_is_still_built():
    """The solved scale of a capped exponential exceeds the cap where the mean is near it: not a user's mistake."""
    scale = capped_exponential_scale(900, 1000)
    assert scale > 1000
    d_in, _ = dataset_length_dists(dataset_lengths("sharegpt", 128256))
    assert d_in.max is not None and d_in.average == pytest.approx(d_in.mean, rel=0.05)


@pytest.mark.parametrize(("change", "words"), BAD_CUTS)
def test_simulate_refuses_a_cut_against_the_mean(tmp_path, change, words):
    path = scenario(tmp_path, SIM, lambda d: cut(d["classes"][0]["input_len"], change))
    r = run("simulate", path)
    assert_user_error(r, "classes[0].input_len")
    assert words in r.output


@pytest.mark.parametrize(("change", "words"), BAD_CUTS)
def test_fleet_refuses_a_cut_against_the_mean(tmp_path, change, words):
    def edit(d: dict[str, Any]) -> None:
        d["classes"][0]["input_len"] = {"dist": "lognormal", "mean": 1000, "cv": 0.5, "max": 4000}
        cut(d["classes"][0]["input_len"], change)

    r = run("fleet", "optimize", scenario(tmp_path, FLEET, edit))
    assert_user_error(r, "classes[0].input_len")
    assert words in r.output


@pytest.mark.parametrize(("change", "words"), BAD_CUTS)
@pytest.mark.parametrize("command", [("infer", "estimate"), ("infer", "capacity")])
def test_serving_scenario_refuses_a_cut_against_the_mean(tmp_path, command, change, words):
    r = run(*command, "--scenario", scenario(tmp_path, SERVING, lambda d: cut(d["traffic"]["input_len"], change)))
    assert_user_error(r, "traffic.input_len")
    assert words in r.output


@pytest.mark.parametrize(("change", "words"), BAD_CUTS[:2])
def test_recommend_refuses_a_cut_against_the_mean(tmp_path, change, words):
    r = run("recommend", scenario(tmp_path, RECOMMEND, lambda d: cut(d["workload"]["serving"]["input_len"], change)))
    assert_user_error(r, "workload.serving.input_len")
    assert words in r.output


def test_simulate_cut_against_the_mean_is_422_naming_the_distribution(client):
    body = copy.deepcopy(SIM)
    body["classes"][0]["output_len"]["min"] = 1000
    r = client.post("/api/v1/simulate", json={"scenario": body})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "scenario.classes[0].output_len"
    assert "is above the mean" in r.json()["error"]


def test_fleet_cut_against_the_mean_is_422_naming_the_distribution(client):
    body = copy.deepcopy(FLEET)
    body["classes"][0]["output_len"] = {"dist": "exponential", "mean": 200, "max": 50}
    r = client.post("/api/v1/fleet/optimize", json={"scenario": body})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "scenario.classes[0].output_len"


# -- 2. the serving scenario's percentile typed as a fraction --------------------------------------------------------
@pytest.mark.parametrize("command", [("infer", "estimate"), ("infer", "capacity")])
def test_serving_scenario_percentile_as_a_fraction_is_refused_suggesting_99(tmp_path, command):
    path = scenario(tmp_path, SERVING, lambda d: d["slo"].update(percentile=0.99))
    r = run(*command, "--scenario", path)
    assert_user_error(r, "slo.percentile")
    assert "did you mean 99?" in r.output


def test_serving_scenario_percentile_of_one_or_more_is_kept(tmp_path):
    r = run("infer", "estimate", "--scenario", scenario(tmp_path, SERVING, lambda d: d["slo"].update(percentile=95)),
            "--json")
    assert r.exit_code == 0, r.output


# -- 3. overview names the flags typed ------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "flag"), [
    (("--in", "100000"), "--in"),
    (("--in", "0"), "--in"),
    (("--out", "200000"), "--out"),
    (("--out", "0"), "--out"),
    (("--qps", "nan"), "--qps"),
    (("--ttft-ms", "-1"), "--ttft-ms"),
    (("--tpot-ms", "0"), "--tpot-ms"),
    (("--train-tokens", "0"), "--train-tokens"),
    (("--train-devices", "0"), "--train-devices"),
    (("--model", "nope"), "--model"),
    (("--hw", ","), "--hw"),
])
def test_overview_errors_name_the_flag(args, flag):
    hw = () if "--hw" in args else ("--hw", "H100")
    r = run("overview", *hw, *args)
    assert_user_error(r, flag)
    r = run("overview", *hw, *args, "--json")
    assert r.exit_code == 2, r.output
    assert json.loads(r.stdout)["field"] == flag


def test_overview_python_api_names_its_arguments():
    with pytest.raises(UserInputError) as exc:
        overview(hardware=["H100"], input_len=100000)
    assert exc.value.field == "input_len"


# -- 4. a fleet candidate's empty list ------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["tp", "dtype"])
@pytest.mark.parametrize("command", ["optimize", "sweep"])
def test_fleet_candidate_empty_list_is_refused(tmp_path, key, command):
    path = scenario(tmp_path, FLEET, lambda d: d["candidates"][0].update({key: []}))
    r = run("fleet", command, path)
    assert_user_error(r, f"candidates[0].{key}")
    assert f"leave {key} out for the default" in r.output


def test_fleet_second_candidate_with_no_dtype_is_refused_not_dropped(tmp_path):
    path = scenario(tmp_path, FLEET, lambda d: d["candidates"].append({"hardware": "nvidia-a100-sxm-80gb",
                                                                     "dtype": []}))
    assert_user_error(run("fleet", "optimize", path), "candidates[1].dtype")


def test_fleet_candidate_empty_list_is_422_naming_the_field(client):
    body = copy.deepcopy(FLEET)
    body["candidates"][0]["tp"] = []
    r = client.post("/api/v1/fleet/optimize", json={"scenario": body})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "scenario.candidates[0].tp"


def test_fleet_candidate_without_lists_keeps_the_defaults(tmp_path):
    path = scenario(tmp_path, FLEET, lambda d: d["candidates"][0].pop("tp"))
    r = run("fleet", "optimize", path, "--json")
    assert r.exit_code == 0, r.output
    assert {m["dtype"] for m in json.loads(r.stdout)["mix"]} == {"bf16"}
