"""Bad input to `xpuplan cost` and `xpuplan recommend` (and their HTTP endpoints): a clear error naming the flag
or field, exit 2 / HTTP 422 (3 / 409 for a valid job that cannot complete), never an overflow, an ignored value or
a number printed as inf."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest

from tests.unit.clicheck import assert_user_error, run
from xpuplan.cost import expected_wall_time_s, reliability
from xpuplan.decide.weights import make_weights, parse_weight_flags
from xpuplan.errors import InfeasibleError, UserInputError

TCO = ("cost", "tco", "--hw", "H100", "--devices", "8")
TRAIN = ("cost", "train", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--tokens", "1e12")


@pytest.fixture
def client(api_client: Any) -> Any:
    return api_client


# -- 1. reliability: huge checkpoint / restart times against the MTBF -----------------------------
def test_expected_wall_time_does_not_overflow():
    assert math.isinf(expected_wall_time_s(1e6, 1e4, 1e3, 1e7, 4500.0))


@pytest.mark.parametrize("kw", [{"restart_s": 1e7, "failures_per_device_hour": 0.1},
                                {"storage_bytes_per_s": 1.0}])
def test_reliability_that_never_completes_is_infeasible(kw):
    with pytest.raises(InfeasibleError) as exc:
        reliability(devices=8, failure_free_time_s=1e7, checkpoint_bytes=1e11, **kw)
    assert "never completes" in str(exc.value) and exc.value.reasons


def test_no_failures_and_slow_storage_still_completes():
    res = reliability(devices=8, failure_free_time_s=1e5, checkpoint_bytes=1e9, storage_bytes_per_s=1e3,
                      failures_per_device_hour=0.0)
    assert res.job_mtbf_s is None and math.isfinite(res.effective_time_s)


def test_train_cost_with_restart_beyond_the_mtbf_is_infeasible_not_an_overflow():
    r = run(*TRAIN, "--restart-s", "1e7", "--failures-per-device-hour", "0.1")
    assert r.exit_code == 3, r.output
    assert "OverflowError" not in r.output and "never completes" in r.output
    r = run(*TRAIN, "--restart-s", "1e7", "--failures-per-device-hour", "0.1", "--json")
    assert r.exit_code == 3, r.output
    d = json.loads(r.stdout)
    assert "never completes" in d["error"] and d["reasons"]


def test_train_cost_api_is_409_not_500(client):
    r = client.post("/api/v1/cost/train", json={"model": "llama3-8b", "hw": "H100", "devices": 8, "tokens": 1e12,
                                                "storage_gb_per_s": 1e-9})
    assert r.status_code == 409, r.text
    assert "never completes" in r.json()["error"]


def test_cost_errors_are_json_under_json():
    r = run("cost", "tco", "--hw", "NOPE", "--devices", "8", "--json")
    assert r.exit_code == 2
    assert json.loads(r.stdout)["field"] == "--hw"


# -- 2. recommend: unknown regions ------------------------------------------------------------------
@pytest.mark.parametrize("section, field", [("constraints", "constraints.region"), ("cost", "cost.region")])
def test_recommend_unknown_region(tmp_path, section, field):
    f = tmp_path / "s.yaml"
    f.write_text(f"scenario: pretraining\n{section}:\n  region: mars\n", encoding="utf-8")
    r = run("recommend", str(f))
    assert_user_error(r, field)
    assert "unknown region 'mars'" in r.output and "us" in r.output


def test_recommend_api_unknown_region_and_team(client):
    r = client.post("/api/v1/recommend", json={"scenario": {"scenario": "pretraining",
                                                            "constraints": {"region": "mars"}}, "samples": 0})
    assert r.status_code == 422 and r.json()["field"] == "constraints.region", r.text
    r = client.post("/api/v1/recommend", json={"scenario": {"scenario": "pretraining",
                                                            "cost": {"team_stacks": ["NOPE"]}}, "samples": 0})
    assert r.status_code == 422 and r.json()["field"] == "cost.team_stacks", r.text


# -- 3. --team ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("team", ["NOPE", ""])
def test_unknown_or_empty_team(team):
    for cmd in (TCO, TRAIN):
        r = run(*cmd, "--team", team)
        assert_user_error(r, "--team")
        assert "CUDA" in r.output


def test_known_team_in_any_case_is_accepted():
    r = run(*TCO, "--team", "cuda, ROCm", "--json")
    assert r.exit_code == 0, r.output


def test_team_api_names_the_field(client):
    for team in (["NOPE"], []):
        r = client.post("/api/v1/cost/tco", json={"hw": "H100", "devices": 8, "team_stacks": team})
        assert r.status_code == 422 and r.json()["field"] == "team_stacks", r.text


# -- 4. --devices-per-node -------------------------------------------------------------------------
def test_devices_per_node_must_match_the_priced_server():
    r = run(*TCO, "--devices-per-node", "3")
    assert_user_error(r, "--devices-per-node")
    assert "8 devices" in r.output and "--node-system-price-usd" in r.output


def test_devices_per_node_above_any_server():
    r = run(*TCO, "--devices-per-node", "1000")
    assert_user_error(r, "--devices-per-node")
    assert "at most 16" in r.output


def test_devices_per_node_with_own_prices_is_accepted():
    r = run(*TCO, "--devices-per-node", "4", "--device-price-usd", "30000", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["lines_usd"]["hardware_usd"] == pytest.approx(8 * 30000)
    r = run(*TCO, "--devices-per-node", "8", "--json")
    assert r.exit_code == 0, r.output


def test_devices_per_node_api(client):
    r = client.post("/api/v1/cost/tco", json={"hw": "H100", "devices": 8, "devices_per_node": 3})
    assert r.status_code == 422 and r.json()["field"] == "devices_per_node", r.text


# -- 5. --owned with --cloud -----------------------------------------------------------------------
def test_owned_and_cloud_contradict():
    r = run(*TCO, "--owned", "--cloud", "aws")
    assert_user_error(r, "--owned/--cloud")
    r = run(*TCO, "--owned", "--cloud", "any", "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["field"] == "--owned/--cloud"


def test_owned_and_provider_contradict_in_the_api(client):
    r = client.post("/api/v1/cost/tco", json={"hw": "H100", "devices": 8, "mode": "owned", "provider": "aws"})
    assert r.status_code == 422 and r.json()["field"] == "mode", r.text


# -- 6. recommend --top ------------------------------------------------------------------------------
@pytest.mark.parametrize("top", ["0", "-1"])
def test_top_must_be_positive(top):
    assert_user_error(run("recommend", "--preset", "pretraining", "--top", top), "--top")


# -- 7. powercap --idle-fraction --------------------------------------------------------------------
def test_idle_fraction_above_the_busy_draw_names_the_flag():
    r = run("cost", "powercap", "--hw", "H100", "--power-cap-w", "500", "--idle-fraction", "0.99")
    assert_user_error(r, "--idle-fraction")
    assert "memory_bound_draw_fraction" not in r.output and "0.31" in r.output


def test_idle_fraction_api(client):
    r = client.post("/api/v1/cost/powercap", json={"hw": "H100", "power_cap_w": 500, "idle_fraction": 0.99})
    assert r.status_code == 422 and r.json()["field"] == "idle_fraction", r.text


# -- 8. no failures ---------------------------------------------------------------------------------
def test_zero_failure_rate_is_not_printed_as_inf():
    r = run(*TRAIN, "--failures-per-device-hour", "0")
    assert r.exit_code == 0, r.output
    assert "no failures" in r.output and not re.search(r"\binf\b", r.output)


# -- 9. --weight names -----------------------------------------------------------------------------
def test_unknown_criterion_lists_the_valid_names():
    with pytest.raises(UserInputError) as exc:
        parse_weight_flags(["perf=50"])
    assert exc.value.field == "--weight.perf"
    assert "compute_fit" in exc.value.message and "performance" in exc.value.message


def test_group_weights_split_over_their_leaves():
    w = make_weights({"performance": 50, "development": 20})
    assert w.group_totals() == pytest.approx({"performance": 50, "development": 20, "economics": 20, "risk": 10})
    assert w["compute_fit"] == pytest.approx(50 * 15 / 40)
    with pytest.raises(UserInputError) as exc:
        make_weights({"performance": 40, "latency": 10})
    assert exc.value.field == "weights.performance"


def test_weight_group_on_the_command_line():
    r = run("recommend", "--preset", "pretraining", "--weight", "performance=50", "--samples", "0")
    assert_user_error(r, "--weight")
    assert "performance 50" in r.output
