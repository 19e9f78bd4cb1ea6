"""Importers for the formats users have: SGLang JSONL, trtllm-bench reports, MLPerf Inference and
Training results, hccl_test and rccl-tests logs, Megatron-LM and torchtitan training logs. The
fixtures (tests/fixtures/bench) follow each tool's layout with made-up numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.benchfixtures import (
    HCCL,
    MEGATRON,
    MEGATRON_YAML,
    MLPERF_OFFLINE,
    MLPERF_SERVER,
    MLPERF_TRAIN,
    RCCL,
    SGLANG,
    TITAN,
    TITAN_TOML,
    TRTLLM,
)
from xpuplan.bench.imports import (
    parse_hccl_test,
    parse_megatron_log,
    parse_mlperf_inference,
    parse_mlperf_training,
    parse_nccl_tests,
    parse_sglang_jsonl,
    parse_torchtitan_log,
    parse_trtllm_report,
)
from xpuplan.cli.main import app
from xpuplan.errors import UserInputError

runner = CliRunner()


def _rows(parsed) -> dict[str, object]:  # noqa: ANN001
    return {r.name: r for r in parsed.records if r.kind == "validation_row"}


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# -- SGLang -------------------------------------------------------------------------------------
def test_sglang_one_row_set_per_line() -> None:
    p = parse_sglang_jsonl(SGLANG, device_id="H100", model="qwen2.5-7b")
    rows = _rows(p)
    assert p.info.kind == "import-sglang" and len(p.info.config["points"]) == 3
    assert len(rows) == 18  # 3 load points x 6 metrics
    r = rows["sglang_qwen2.5-7b_h100:L2:tpot_ms"]
    assert r.value == pytest.approx(11.8)
    row = r.params["row"]
    assert row["concurrency"] == 16 and row["scenario"] == "server" and row["input_len"] == 1024
    assert row["output_len"] == 256 and row["model"] == "qwen2.5-7b" and row["engine"] == "sglang"
    # no total_throughput key in this bench_serving version: (input + output tokens) / duration
    line1 = json.loads(SGLANG.read_text().splitlines()[0])
    expect = (line1["total_input_tokens"] + line1["total_output_tokens"]) / line1["duration"]
    assert rows["sglang_qwen2.5-7b_h100:L1:total_tokens_per_s"].value == pytest.approx(expect)
    assert any(r.name == "L3:p99_ttft_ms" for r in p.records if r.kind == "serving")


def test_sglang_errors_name_line_and_field(tmp_path: Path) -> None:
    lines = SGLANG.read_text().splitlines()
    bad = _write(tmp_path, "r.jsonl", lines[0] + "\n" + lines[1][:-10] + "\n")
    with pytest.raises(UserInputError) as ei:
        parse_sglang_jsonl(bad, device_id="H100")
    assert ei.value.line == 2 and ei.value.file == str(bad)
    wrong = _write(tmp_path, "w.jsonl", lines[0] + "\n" + lines[1].replace('"mean_ttft_ms": 95.4', '"mean_ttft_ms": "fast"'))
    with pytest.raises(UserInputError) as ei:
        parse_sglang_jsonl(wrong, device_id="H100")
    assert ei.value.line == 2 and ei.value.field == "mean_ttft_ms"
    with pytest.raises(UserInputError, match="--device-id"):
        parse_sglang_jsonl(SGLANG, device_id=None)
    assert parse_sglang_jsonl(SGLANG, device_id="H100").warnings  # no model named: rows cannot be predicted


def test_import_sglang_then_validate_local(db_url: str) -> None:
    res = runner.invoke(app, ["import", "sglang", str(SGLANG), "--device-id", "H100", "--model", "qwen2.5-7b"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["validate", "--local", "latest", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert len(rows) == 18 and all(r["predicted"] is not None for r in rows)


# -- TensorRT-LLM -------------------------------------------------------------------------------
def test_trtllm_report_layout_and_metrics() -> None:
    p = parse_trtllm_report(TRTLLM, device_id="H100")
    rows = _rows(p)
    stem = TRTLLM.stem
    assert rows[f"{stem}:output_tokens_per_s"].value == pytest.approx(16132.69)
    assert rows[f"{stem}:ttft_ms"].value == pytest.approx(4981.6)
    assert rows[f"{stem}:tpot_ms"].value == pytest.approx(28.26)
    row = rows[f"{stem}:e2e_latency_ms"].params["row"]
    assert row["model"] == "llama3.1-8b" and row["tp"] == 1 and row["n_devices"] == 1
    assert row["input_len"] == 1024 and row["output_len"] == 512 and row["precision"] == "bf16"
    assert row["scenario"] == "offline" and row["concurrency"] == 613
    assert {r.name for r in p.records if r.kind == "serving"} >= {"ttft_percentiles:p99", "tpot_percentiles:p50"}


def test_trtllm_errors(tmp_path: Path) -> None:
    data = json.loads(TRTLLM.read_text())
    del data["performance"]
    with pytest.raises(UserInputError, match="performance") as ei:
        parse_trtllm_report(_write(tmp_path, "a.json", json.dumps(data, indent=2)), device_id="H100")
    assert ei.value.field == "performance"
    data = json.loads(TRTLLM.read_text())
    data["streaming_metrics"]["avg_ttft_ms"] = "n/a"
    f = _write(tmp_path, "b.json", json.dumps(data, indent=2))
    with pytest.raises(UserInputError) as ei:
        parse_trtllm_report(f, device_id="H100")
    assert ei.value.field == "streaming_metrics.avg_ttft_ms" and ei.value.line is not None
    with pytest.raises(UserInputError, match="malformed JSON") as ei:
        parse_trtllm_report(_write(tmp_path, "c.json", "{\n  \"engine\": {,\n}"), device_id="H100")
    assert ei.value.line == 2


# -- MLPerf Inference ---------------------------------------------------------------------------
def test_mlperf_server_summary() -> None:
    p = parse_mlperf_inference(MLPERF_SERVER, device_id="H100", n_devices=8, tp=2, model="llama2-70b",
                               input_len=294, output_len=294)
    rows = {r.metric: r for r in p.records if r.kind == "validation_row"}
    assert rows["output_tokens_per_s"].value == pytest.approx(20415.62)
    assert rows["ttft_ms"].value == pytest.approx(522.81194)  # ns -> ms
    assert rows["tpot_ms"].value == pytest.approx(71.246605)
    row = rows["ttft_ms"].params["row"]
    assert row["trust"] == "A" and row["scenario"] == "server" and row["n_devices"] == 8 and row["tp"] == 2
    assert not p.warnings
    pct = {r.name: r.value for r in p.records if r.kind == "serving"}
    assert pct["99.00 percentile first token latency (ns)"] == pytest.approx(1310.441281)


def test_mlperf_offline_and_bad_summaries(tmp_path: Path) -> None:
    p = parse_mlperf_inference(MLPERF_OFFLINE, device_id="H100", model="llama2-70b")
    assert {r.metric for r in p.records if r.kind == "validation_row"} == {"output_tokens_per_s", "requests_per_s"}
    assert any("--input-len" in w for w in p.warnings)
    text = MLPERF_OFFLINE.read_text()
    invalid = parse_mlperf_inference(_write(tmp_path, "i.txt", text.replace("Result is : VALID", "Result is : INVALID")),
                                     device_id="H100")
    assert next(r for r in invalid.records if r.kind == "validation_row").params["row"]["trust"] == "C"
    acc = _write(tmp_path, "a.txt", text.replace("Mode     : PerformanceOnly", "Mode     : AccuracyOnly"))
    with pytest.raises(UserInputError) as ei:
        parse_mlperf_inference(acc, device_id="H100")
    assert ei.value.field == "Mode" and ei.value.line == 6
    broken = _write(tmp_path, "b.txt", text.replace("Tokens per second: 23716.3", "Tokens per second: lots"))
    with pytest.raises(UserInputError) as ei:
        parse_mlperf_inference(broken, device_id="H100")
    assert ei.value.field == "Tokens per second" and ei.value.line == 8
    with pytest.raises(UserInputError, match="MLPerf Results Summary"):
        parse_mlperf_inference(_write(tmp_path, "n.txt", "hello\n"), device_id="H100")


def test_import_mlperf_and_validate_in_one_command(db_url: str) -> None:
    res = runner.invoke(app, ["import", "mlperf-inference", str(MLPERF_SERVER), "--device-id", "H100", "--n-devices",
                              "8", "--tp", "2", "--model", "llama2-70b", "--input-len", "294", "--output-len", "294",
                              "--validate", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    rows = out[0]["validation"]["rows"]
    assert len(rows) == 5 and all(r["predicted"] is not None for r in rows)


# -- MLPerf Training ----------------------------------------------------------------------------
def test_mlperf_training_time_to_train(tmp_path: Path) -> None:
    p = parse_mlperf_training(MLPERF_TRAIN, device_id="H100", n_devices=8)
    assert p.records[0].value == pytest.approx(1200.5)  # run_start -> run_stop, ms -> s
    assert p.info.config["benchmark"] == "llama2_70b_lora" and p.info.config["status"] == "success"
    lines = MLPERF_TRAIN.read_text().splitlines()
    no_stop = _write(tmp_path, "r.txt", "\n".join(x for x in lines if "run_stop" not in x))
    with pytest.raises(UserInputError, match="run_stop"):
        parse_mlperf_training(no_stop, device_id=None)
    lines[5] = lines[5][:-5]
    with pytest.raises(UserInputError) as ei:
        parse_mlperf_training(_write(tmp_path, "m.txt", "\n".join(lines)), device_id=None)
    assert ei.value.line == 6


# -- collectives --------------------------------------------------------------------------------
def test_hccl_test_log() -> None:
    p = parse_hccl_test(HCCL, n_ranks=8, device_id="910B")
    assert p.info.device_id == "huawei-ascend-910b" and p.info.config["scope"] == "scale_up"
    last = p.records[-1]
    assert last.params["op"] == "all_reduce" and last.params["size_bytes"] == 536870912
    assert last.time_s == pytest.approx(6322.29e-6)
    assert last.value == pytest.approx(536870912 / 6322.29e-6 * 2 * 7 / 8 / 1e9)  # busbw, nccl-tests definition


def test_hccl_test_errors(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="--n-ranks"):
        parse_hccl_test(HCCL, n_ranks=None, device_id="910B")
    with pytest.raises(UserInputError, match="--device-id"):
        parse_hccl_test(HCCL, n_ranks=8, device_id=None)
    text = HCCL.read_text()
    failed = parse_hccl_test(_write(tmp_path, "all_reduce_test.log", text.replace("success", "failed", 1)), n_ranks=8,
                             device_id="910B")
    assert len(failed.records) == len(parse_hccl_test(HCCL, n_ranks=8, device_id="910B").records) - 1
    assert "check_result failed" in failed.warnings[0]
    lines = text.splitlines()
    lines[7] = lines[7].replace("| success", "")
    lines[7] = lines[7].split("|")[0] + "| oops | 1.0"
    with pytest.raises(UserInputError) as ei:
        parse_hccl_test(_write(tmp_path, "all_reduce_test.log", "\n".join(lines)), n_ranks=8, device_id="910B")
    assert ei.value.line == 8 and ei.value.field == "aveg_time(us)"
    with pytest.raises(UserInputError, match="--op"):
        parse_hccl_test(_write(tmp_path, "run.log", text), n_ranks=8, device_id="910B")


def test_import_hccl_then_calibrate(db_url: str) -> None:
    res = runner.invoke(app, ["import", "hccl-test", str(HCCL), "--n-ranks", "8", "--device-id", "910B"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["calibrate", "--from", "latest", "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    eff = json.loads(res.stdout)["efficiency"]
    # the synthetic log has 150 GB/s bus bandwidth over the 910B's 196 GB/s HCCS per direction
    assert eff["scale_up_bw_fraction"] == pytest.approx(150 / 196, rel=0.03)
    assert 3e-6 < eff["scale_up_latency_s"] < 7e-6


def test_rccl_tests_log() -> None:
    p = parse_nccl_tests(RCCL)
    assert p.info.device_id == "amd-mi300x-192gb" and p.info.config["ops"] == ["all_gather"]


# -- Megatron-LM --------------------------------------------------------------------------------
def test_megatron_log_plan_and_step_time() -> None:
    p = parse_megatron_log(MEGATRON, device_id="H100")
    rows = _rows(p)
    step = rows[f"{MEGATRON.stem}:step_time_s"]
    assert step.value == pytest.approx(15.357, rel=1e-3)  # median after dropping the first (warm-up) interval
    row = step.params["row"]
    assert (row["tp"], row["pp"], row["dp"], row["cp"], row["n_devices"]) == (1, 1, 8, 1, 8)
    assert row["seq_len"] == 8192 and row["global_batch_tokens"] == 128 * 8192 and row["zero_stage"] == 1
    assert row["precision"] == "bf16" and row["recompute"] == "none" and row["framework"] == "Megatron-LM"
    # no preset named: the shape comes from the arguments dump and the padded-vocab line
    assert (row["layers"], row["d_model"], row["heads"], row["kv_heads"], row["ffn"], row["vocab"], row["gated_mlp"]) == (
        32, 4096, 32, 8, 14336, 128256, 1)
    tps = rows[f"{MEGATRON.stem}:tokens_per_s_per_device"]
    assert tps.value == pytest.approx(128 * 8192 / step.value / 8)
    assert "global_batch_size 128" in tps.params["row"]["derived"]
    assert parse_megatron_log(MEGATRON, device_id="H100", skip=0).info.config["kept"] == 10


def test_megatron_config_overrides(tmp_path: Path) -> None:
    p = parse_megatron_log(MEGATRON, device_id="H100", config=MEGATRON_YAML, model="llama3.1-8b")
    row = next(iter(_rows(p).values())).params["row"]
    assert (row["tp"], row["dp"], row["sp"], row["model"]) == (2, 4, 1, "llama3.1-8b")
    bare = _write(tmp_path, "train.log", "\n".join(x for x in MEGATRON.read_text().splitlines()
                                                    if "iteration  " in x or "using world size" in x))
    with pytest.raises(UserInputError, match="--config") as ei:
        parse_megatron_log(bare, device_id="H100")
    assert ei.value.field == "seq_length"
    cfg = _write(tmp_path, "args.yaml", "seq_length: 4096\nglobal_batch_size: 64\n")
    with pytest.raises(UserInputError, match="--model") as ei:
        parse_megatron_log(bare, device_id="H100", config=cfg)
    assert parse_megatron_log(bare, device_id="H100", config=cfg, model="llama3.1-8b").info.n_devices == 8
    text = MEGATRON.read_text().replace("elapsed time per iteration (ms): 15375.6", "elapsed time per iteration (ms): x")
    with pytest.raises(UserInputError) as ei:
        parse_megatron_log(_write(tmp_path, "m.log", text), device_id="H100")
    assert ei.value.field == "elapsed time per iteration (ms)" and ei.value.line is not None


def test_megatron_rank_prefixes_and_long_argument_names(tmp_path: Path) -> None:
    lines = MEGATRON.read_text().splitlines()
    lines.insert(5, "  a_very_long_megatron_argument_name_without_any_dots_x True")
    prefixed = _write(tmp_path, "p.log", "\n".join("[default0]:" + x for x in lines))
    a, b = parse_megatron_log(prefixed, device_id="H100"), parse_megatron_log(MEGATRON, device_id="H100")
    assert a.info.config == {**b.info.config} and len(a.records) == len(b.records)


def test_validate_megatron_run_in_one_command(db_url: str) -> None:
    res = runner.invoke(app, ["import", "megatron", str(MEGATRON), "--device-id", "H100", "--validate"])
    assert res.exit_code == 0, res.output
    assert "step_time_s" in res.output and "tokens_per_s_per_device" in res.output and "median" in res.output


# -- torchtitan ---------------------------------------------------------------------------------
def test_torchtitan_log() -> None:
    p = parse_torchtitan_log(TITAN, device_id="H100", config=TITAN_TOML)
    (row_rec,) = _rows(p).values()
    assert row_rec.value == pytest.approx(7064)  # median tps after the first (compile) step, ANSI codes stripped
    row = row_rec.params["row"]
    assert row["model"] == "llama3.1-8b" and row["n_devices"] == 8 and row["dp"] == 8 and row["zero_stage"] == 3
    assert row["seq_len"] == 8192 and row["global_batch_tokens"] == 8 * 8192 and row["recompute"] == "selective"
    assert p.info.config["logged_mfu"] == pytest.approx(0.41355)


def test_torchtitan_config_keys_by_section(tmp_path: Path) -> None:
    # [optimizer] name = "AdamW" before [model] name = "llama3": keys are read by section
    toml = '[optimizer]\nname = "AdamW"\n\n' + TITAN_TOML.read_text().replace("[optimizer]\nname = \"AdamW\"\n", "")
    p = parse_torchtitan_log(TITAN, device_id="H100", config=_write(tmp_path, "c.toml", toml))
    assert p.info.config["preset"] == "llama3.1-8b"


def test_torchtitan_errors(tmp_path: Path, db_url: str) -> None:
    with pytest.raises(UserInputError, match="--config"):
        parse_torchtitan_log(TITAN, device_id="H100", config=None)
    cfg = _write(tmp_path, "c.toml", TITAN_TOML.read_text().replace("seq_len = 8192", ""))
    with pytest.raises(UserInputError) as ei:
        parse_torchtitan_log(TITAN, device_id="H100", config=cfg)
    assert ei.value.field == "training.seq_len"
    no_mesh = _write(tmp_path, "t.log", "\n".join(x for x in TITAN.read_text().splitlines() if "mesh" not in x))
    with pytest.raises(UserInputError, match="--n-devices"):
        parse_torchtitan_log(no_mesh, device_id="H100", config=TITAN_TOML)
    res = runner.invoke(app, ["import", "torchtitan", str(TITAN), "--config", str(TITAN_TOML), "--device-id", "H100",
                              "--validate", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["validation"]["rows"][0]["predicted"] is not None


def test_model_may_be_a_config_json(db_url: str) -> None:
    cfg = Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "families" / "gpt-oss-20b"
    p = parse_trtllm_report(TRTLLM, device_id="H100", model=str(cfg))
    row = next(iter(_rows(p).values())).params["row"]
    assert row["model"] == str(cfg.resolve()) and row["moe_experts"] == 32 and not p.warnings
    res = runner.invoke(app, ["import", "trtllm-bench", str(TRTLLM), "--device-id", "H100", "--model", str(cfg),
                              "--validate", "--json"])
    assert res.exit_code == 0, res.output
    assert all(r["predicted"] is not None for r in json.loads(res.stdout)[0]["validation"]["rows"])
