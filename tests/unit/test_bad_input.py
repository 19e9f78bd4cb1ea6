"""Issue 9 §7: bad input as a new user types it — every case a clear error naming the flag, exit 2
(user error) or 3 (infeasible), never a traceback, a hang or a silent wrong answer."""

from __future__ import annotations

import json
import time

import pytest

from tests.unit.clicheck import assert_user_error, run
from xpuplan.errors import UserInputError
from xpuplan.jobs.requests import MAX_RANGE_POINTS, parse_request
from xpuplan.jobs.train import TrainSearchRequest

CAPACITY = ("infer", "capacity", "--model", "llama3-70b", "--hw", "H100")


def test_ttft_nan_is_refused_naming_the_flag():
    r = run(*CAPACITY, "--qps", "5", "--ttft-ms", "nan")
    assert_user_error(r, "--ttft-ms")
    assert "finite" in r.output and "20,000,000,004" not in r.output


def test_qps_inf_is_refused_not_an_overflow():
    r = run(*CAPACITY, "--qps", "inf", "--ttft-ms", "1000")
    assert_user_error(r, "--qps")
    assert "OverflowError" not in r.output


def test_qps_nan_is_refused_not_a_conversion_error():
    r = run(*CAPACITY, "--qps", "nan", "--ttft-ms", "1000")
    assert_user_error(r, "--qps")
    assert "cannot convert" not in r.output


@pytest.mark.parametrize("args", [
    ("train", "search", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--tokens", "inf"),
    ("flops", "--model", "llama3-8b", "--tokens", "inf"),
])
def test_tokens_inf_is_refused(args):
    r = run(*args)
    assert_user_error(r, "--tokens")
    assert "inf d" not in r.output


@pytest.mark.parametrize("tp", ["1024", "65"])
def test_memory_train_refuses_the_layouts_train_estimate_refuses(tp):
    r = run("memory", "train", "--model", "llama3-70b", "--hw", "H100", "--tp", tp)
    assert_user_error(r, "--tp")
    assert f"tp ({tp}) must divide n_heads (64)" in r.output
    est = run("train", "estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", tp, "--tp", tp)
    assert est.exit_code == 2 and f"tp ({tp}) must divide n_heads (64)" in est.output


def test_memory_infer_refuses_tp_3_like_infer_estimate():
    r = run("memory", "infer", "--model", "llama3-70b", "--hw", "910B", "--context", "8192", "--tp", "3")
    assert_user_error(r, "--tp")
    est = run("infer", "estimate", "--model", "llama3-70b", "--hw", "910B", "--in", "4096", "--out", "4096", "--tp", "3")
    assert est.exit_code == 2 and "tp (3)" in est.output


def test_memory_train_exits_3_when_it_does_not_fit():
    r = run("memory", "train", "--model", "llama3-70b", "--hw", "H100")
    assert r.exit_code == 3, r.output
    assert "does not fit" in r.output


def test_memory_infer_and_infer_estimate_agree_on_the_fit():
    # the same replica (tp 1, bf16, vLLM's memory fraction) is refused by both
    mem = run("memory", "infer", "--model", "llama3-70b", "--hw", "H100", "--tp", "1", "--batch", "1",
              "--context", "2048")
    est = run("infer", "estimate", "--model", "llama3-70b", "--hw", "H100", "--tp", "1", "--batch", "1",
              "--in", "1024", "--out", "1024")
    assert mem.exit_code == est.exit_code == 3, (mem.output, est.output)
    mem = run("memory", "infer", "--model", "llama3-70b", "--hw", "H100", "--tp", "4", "--batch", "1",
              "--context", "2048", "--json")
    est = run("infer", "estimate", "--model", "llama3-70b", "--hw", "H100", "--tp", "4", "--batch", "1",
              "--in", "1024", "--out", "1024", "--json")
    assert mem.exit_code == est.exit_code == 0
    assert json.loads(mem.stdout)["fits"] is True and json.loads(est.stdout)["results"][0]["fits"] is True


def test_huge_devices_range_is_refused_at_once_with_the_bound():
    t0 = time.perf_counter()
    r = run("train", "search", "--model", "llama3-70b", "--hw", "H100", "--devices-range", "1:100000000:1")
    elapsed = time.perf_counter() - t0
    assert_user_error(r, "--devices-range")
    assert f"at most {MAX_RANGE_POINTS}" in r.output and "100,000,000 values" in r.output
    assert elapsed < 30  # generous: the point is "no hang", not a timing


def test_range_is_counted_before_it_is_expanded():
    with pytest.raises(UserInputError) as exc:
        parse_request(TrainSearchRequest, {"devices_range": "1:1000000000000:1"})
    assert exc.value.field == "--devices-range" and "1,000,000,000,000 values" in exc.value.message


def test_devices_0_names_devices():
    r = run("train", "estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "0")
    assert_user_error(r, "--devices")
    assert "must be positive" in r.output and "give --devices" not in r.output


def test_huge_seq_len_names_seq_len():
    r = run("train", "estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "64", "--seq-len", "100000000")
    assert_user_error(r, "--seq-len")
    assert "micro_batch" not in r.output


def test_global_batch_1_names_global_batch():
    r = run("train", "estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "64", "--global-batch", "1")
    assert_user_error(r, "--global-batch")
    assert "field ''" not in r.output


def test_100k_character_model_name_is_refused_briefly():
    name = "m" * 100_000
    for args in (("train", "estimate", "--model", name, "--hw", "H100", "--devices", "8"),
                 ("memory", "infer", "--model", name), ("model", "show", name)):
        r = run(*args)
        assert r.exit_code == 2, r.output[:300]
        assert "File name too long" not in r.output
        assert len(r.output) < 400, len(r.output)
        assert "100,000 characters" in r.output


def test_unknown_long_hardware_name_is_cut_in_the_message():
    r = run("hw", "show", "h" * 150)
    assert r.exit_code == 2 and len(r.output) < 400


@pytest.mark.parametrize(("args", "code", "field"), [
    (("infer", "capacity", "--model", "llama3-70b", "--hw", "H100", "--qps", "nan", "--ttft-ms", "1000"), 2, "--qps"),
    (("train", "estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "64", "--global-batch", "1"), 2,
     "--global-batch"),
    (("train", "search", "--model", "llama3-70b", "--hw", "H100", "--devices-range", "1:100000000:1"), 2,
     "--devices-range"),
    (("hw", "list", "--kind", "FPGA"), 2, "--kind"),
    (("memory", "train", "--model", "llama3-70b", "--hw", "H100"), 3, None),
])
def test_json_errors_are_json_objects_on_stdout(args, code, field):
    r = run(*args, "--json")
    assert r.exit_code == code, r.output
    d = json.loads(r.stdout)
    assert {"error", "field", "hint"} <= set(d)
    assert d["field"] == field and d["error"]


def test_json_infeasible_error_carries_the_result():
    r = run("memory", "train", "--model", "llama3-70b", "--hw", "H100", "--json")
    d = json.loads(r.stdout)
    assert d["result"]["fits"] is False and d["result"]["schema_version"] and d["reasons"]
