"""Imports: nccl-tests logs, vLLM benchmark_serving JSON and validation CSVs into the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xpuplan.bench.imports import parse_nccl_tests, parse_validation_csv, parse_vllm_json
from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.store.engine import open_store
from xpuplan.store.records import list_runs, run_measurements

runner = CliRunner()
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
NCCL_LOG = FIXTURES / "all_reduce_perf_8xh100.log"
VLLM_JSON = FIXTURES / "vllm_llama3-8b_h100_c32.json"


def test_parse_nccl_tests_log() -> None:
    p = parse_nccl_tests(NCCL_LOG)
    assert p.info.kind == "import-nccl-tests"
    assert p.info.device_id == "nvidia-h100-sxm-80gb" and p.info.device_name == "NVIDIA H100 80GB HBM3"
    assert p.info.n_devices == 8 and p.info.config["nodes"] == 1 and p.info.config["scope"] == "scale_up"
    assert len(p.records) == 11
    last = p.records[-1]
    assert last.params["op"] == "all_reduce" and last.params["size_bytes"] == 2**30
    assert last.time_s == pytest.approx(5222.92e-6)
    assert last.value == pytest.approx(359.77)  # out-of-place busbw as printed
    assert last.params["source_line"] == 28


def test_nccl_op_from_option_or_file_name(tmp_path: Path) -> None:
    renamed = tmp_path / "run3.txt"
    renamed.write_text(NCCL_LOG.read_text())
    with pytest.raises(UserInputError, match="--op"):
        parse_nccl_tests(renamed)
    assert parse_nccl_tests(renamed, op="all_reduce").records[0].params["op"] == "all_reduce"
    with pytest.raises(UserInputError, match="unknown collective"):
        parse_nccl_tests(renamed, op="allsum")


def test_malformed_nccl_log_names_file_and_line(tmp_path: Path) -> None:
    lines = NCCL_LOG.read_text().splitlines()
    lines[20] = lines[20] + " 7"  # an extra column on line 21
    bad = tmp_path / "all_reduce_perf.log"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserInputError) as exc:
        parse_nccl_tests(bad)
    assert exc.value.file == str(bad) and exc.value.line == 21
    empty = tmp_path / "all_gather_perf.log"
    empty.write_text("# nothing here\n")
    with pytest.raises(UserInputError, match="no result rows"):
        parse_nccl_tests(empty)
    res = runner.invoke(app, ["import", "nccl-tests", str(bad)])
    assert res.exit_code == 2 and f"{bad}:21" in res.output and "Traceback" not in res.output


def test_unknown_device_needs_device_id(tmp_path: Path) -> None:
    log = tmp_path / "all_reduce_perf.log"
    log.write_text(NCCL_LOG.read_text().replace("NVIDIA H100 80GB HBM3", "Mystery Accelerator 9000"))
    with pytest.raises(UserInputError, match="not in the catalog; pass --device-id"):
        parse_nccl_tests(log)
    assert parse_nccl_tests(log, device_id="H800").info.device_id == "nvidia-h800-sxm-80gb"


def test_import_nccl_then_calibrate(db_url: str) -> None:
    res = runner.invoke(app, ["import", "nccl-tests", str(NCCL_LOG), "--json"])
    assert res.exit_code == 0, res.output
    run_id = json.loads(res.stdout)[0]["run_id"]
    res = runner.invoke(app, ["calibrate", "--from", str(run_id), "--json", "--dry-run"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # the synthetic log has ~370 GB/s bus bandwidth over H100's 450 GB/s NVLink per direction
    assert out["efficiency"]["scale_up_bw_fraction"] == pytest.approx(370 / 450, rel=0.03)
    assert 2e-6 < out["efficiency"]["scale_up_latency_s"] < 5e-6
    assert "gemm_peak_fraction" in out["not_fitted"]
    res = runner.invoke(app, ["validate", "--local", str(run_id)])
    assert res.exit_code == 2 and "use it with `xpuplan calibrate`" in res.output


def test_parse_vllm_result() -> None:
    p = parse_vllm_json(VLLM_JSON, device_id="H100", tp=1)
    assert p.info.kind == "import-vllm" and p.info.device_id == "nvidia-h100-sxm-80gb"
    rows = {r.metric: r for r in p.records if r.kind == "validation_row"}
    assert set(rows) == {"output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "ttft_ms", "tpot_ms",
                         "e2e_latency_ms"}
    row = rows["tpot_ms"].params["row"]
    assert row["model"] == "llama3-8b" and row["input_len"] == 1024 and row["output_len"] == 128
    assert row["concurrency"] == 32 and row["scenario"] == "server" and row["hardware"] == "nvidia-h100-sxm-80gb"
    assert any(r.name == "p99_ttft_ms" for r in p.records if r.kind == "serving")


def test_vllm_errors(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="pass --device-id"):
        parse_vllm_json(VLLM_JSON, device_id=None)
    broken = tmp_path / "r.json"
    broken.write_text('{\n  "completed": 3,\n  "duration": oops\n}\n')
    with pytest.raises(UserInputError) as exc:
        parse_vllm_json(broken, device_id="H100")
    assert exc.value.line == 3
    wrong = tmp_path / "w.json"
    wrong.write_text(VLLM_JSON.read_text().replace('"completed": 320', '"completed": "many"'))
    with pytest.raises(UserInputError) as exc:
        parse_vllm_json(wrong, device_id="H100")
    assert exc.value.field == "completed" and exc.value.line is not None
    res = runner.invoke(app, ["import", "vllm", str(VLLM_JSON)])
    assert res.exit_code == 2 and "--device-id" in res.output


def test_import_vllm_then_validate_local(db_url: str) -> None:
    res = runner.invoke(app, ["import", "vllm", str(VLLM_JSON), "--device-id", "H100", "--json"])
    assert res.exit_code == 0, res.output
    run_id = json.loads(res.stdout)[0]["run_id"]
    res = runner.invoke(app, ["validate", "--local", str(run_id), "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert len(rows) == 6 and {r["hardware"] for r in rows} == {"nvidia-h100-sxm-80gb"}
    assert all(r["predicted"] is not None or r["reason"] for r in rows)


CSV_HEADER = ("id,kind,source,trust,model,params_b,layers,d_model,heads,kv_heads,head_dim,ffn,vocab,gated_mlp,hardware,"
              "n_devices,precision,metric,value,derived,printed,notes,engine,weight_dtype,kv_dtype,tp,pp,input_len,"
              "output_len,batch,concurrency,scenario")


def _csv(tmp_path: Path) -> Path:
    f = tmp_path / "mine.csv"
    f.write_text(CSV_HEADER + "\n"
                 "own-1,infer,our lab 2025-06,A,llama3-8b,8,,,,,,,,,nvidia-h100-sxm-80gb,1,bf16,tpot_ms,12.5,,12.5 ms,,"
                 "vLLM 0.6,bf16,bf16,1,1,1024,128,8,,latency\n"
                 "own-2,infer,our lab 2025-06,A,llama3-8b,8,,,,,,,,,nvidia-h100-sxm-80gb,1,bf16,output_tokens_per_s,600,,"
                 "600 tok/s,,vLLM 0.6,bf16,bf16,1,1,1024,128,8,,latency\n")
    return f


def test_import_csv_matches_validate_file(db_url: str, tmp_path: Path) -> None:
    f = _csv(tmp_path)
    assert len(parse_validation_csv(f).records) == 2
    res = runner.invoke(app, ["import", "csv", str(f), "--json"])
    assert res.exit_code == 0, res.output
    run_id = json.loads(res.stdout)[0]["run_id"]
    direct = json.loads(runner.invoke(app, ["validate", str(f), "--json"]).stdout)
    local = json.loads(runner.invoke(app, ["validate", "--local", str(run_id), "--json"]).stdout)
    assert local["rows"] == direct["rows"]
    assert local["summary"] == direct["summary"]


def test_malformed_csv_import_is_atomic(db_url: str, tmp_path: Path) -> None:
    good = _csv(tmp_path)
    bad = tmp_path / "bad.csv"
    bad.write_text(good.read_text().replace(",12.5,,12.5 ms", ",twelve,,12.5 ms"))
    res = runner.invoke(app, ["import", "csv", str(good), str(bad)])
    assert res.exit_code == 2 and f"{bad}:2" in res.output and "value" in res.output
    assert list_runs(open_store()) == []  # nothing stored when any file is bad


def test_import_stores_every_row(db_url: str) -> None:
    res = runner.invoke(app, ["import", "nccl-tests", str(NCCL_LOG)])
    assert res.exit_code == 0, res.output
    store = open_store()
    run = list_runs(store)[0]
    assert run.kind == "import-nccl-tests" and run.status == "completed"
    assert len(run_measurements(store, run.id, kind="collective")) == 11


def test_validate_local_argument_errors(db_url: str, tmp_path: Path) -> None:
    res = runner.invoke(app, ["validate", str(_csv(tmp_path)), "--local", "latest"])
    assert res.exit_code == 2 and "not both" in res.output
    res = runner.invoke(app, ["validate", "--local", "latest"])
    assert res.exit_code == 2 and "no runs" in res.output
    res = runner.invoke(app, ["validate", "--public", "--local", "latest"])  # no file: the packaged public files
    assert res.exit_code == 2 and "not both" in res.output


def test_a_weight_only_precision_leaves_the_kv_dtype_to_the_engine(tmp_path: Path) -> None:
    """--precision int4-wo names the weights, not the KV cache: the row's kv_dtype is blank (the engine's default),
    not 'int4-wo', which no row could be predicted with."""
    import csv

    from xpuplan.validate.rows import read_rows
    from xpuplan.validate.serve_predictor import predict

    for precision, kv in (("int4-wo", ""), ("fp8", "fp8"), ("bf16", "bf16")):
        p = parse_vllm_json(VLLM_JSON, device_id="H100", tp=1, precision=precision)
        row = next(r.params["row"] for r in p.records if r.kind == "validation_row" and r.metric == "tpot_ms")
        assert row["kv_dtype"] == kv
    p = parse_vllm_json(VLLM_JSON, device_id="H100", tp=1, precision="int4-wo")
    row = next(r.params["row"] for r in p.records if r.kind == "validation_row" and r.metric == "tpot_ms")
    fields = {k: "" if v is None else str(v) for k, v in row.items()} | {"id": "t1", "value": "10", "metric": "tpot_ms"}
    f = tmp_path / "rows.csv"
    with f.open("w", newline="", encoding="utf-8") as out:
        w = csv.DictWriter(out, fieldnames=list(fields))
        w.writeheader()
        w.writerow(fields)
    assert predict(read_rows(f)[0]).value > 0
