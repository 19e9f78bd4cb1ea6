"""Bad input to ``bench collectives``, ``bench show`` and ``import``: exit 2 with one line naming the flag
or the file, line and field; no torchrun launched, nothing half-written in the store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.unit.benchfixtures import HCCL, MEGATRON, MLPERF_SERVER, NCCL_LOG, SGLANG, TRTLLM, VLLM_JSON
from xpuplan.bench.imports import (
    ParsedImport,
    parse_hccl_test,
    parse_mlperf_inference,
    parse_nccl_tests,
    parse_sglang_jsonl,
    parse_trtllm_report,
    store_import,
)
from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.store.engine import open_store
from xpuplan.store.records import Record, RunInfo, list_runs

runner = CliRunner()
CSV_HEADER = ("id,kind,source,trust,model,params_b,layers,d_model,heads,kv_heads,head_dim,ffn,vocab,gated_mlp,hardware,"
              "n_devices,precision,metric,value,derived,printed,notes,engine,weight_dtype,kv_dtype,tp,pp,input_len,"
              "output_len,batch,concurrency,scenario")


@pytest.fixture
def no_torchrun(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench collectives`` must refuse before it launches anything."""
    import xpuplan.cli.bench as cli_bench

    def launched(*args: object, **kwargs: object) -> int:
        raise AssertionError(f"torchrun launched: {args}")

    monkeypatch.setattr(cli_bench.subprocess, "call", launched)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _fails(args: list[str], *needles: str) -> str:
    """Run the CLI; assert exit 2, one error line, no traceback, every needle in the message."""
    res = runner.invoke(app, args)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "internal error" not in res.output
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1, res.output
    for needle in needles:
        assert needle in res.output, (needle, res.output)
    return res.output


def _stored(db_url: str) -> int:
    return len(list_runs(open_store(db_url), limit=100))


def _vllm(tmp_path: Path, name: str = "r.json", **changes: object) -> Path:
    data = json.loads(VLLM_JSON.read_text())
    data.update(changes)
    return _write(tmp_path, name, json.dumps(data, indent=1))  # NaN / Infinity as Python's json writes them


# -- bench collectives: checked before torchrun is launched --------------------------------------
def test_collectives_unknown_backend(no_torchrun: None) -> None:
    pytest.importorskip("torch")
    _fails(["bench", "collectives", "--backend", "zz"], "field '--backend'", "'zz'", "gloo")


def test_collectives_backend_without_its_device(no_torchrun: None) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    _fails(["bench", "collectives", "--backend", "nccl"], "field '--backend'", "cuda")


def test_collectives_unknown_device_id(no_torchrun: None) -> None:
    pytest.importorskip("torch")
    _fails(["bench", "collectives", "--device-id", "NOPE", "--backend", "gloo"], "field '--device-id'", "'NOPE'")


def test_collectives_more_processes_than_devices(no_torchrun: None, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    from xpuplan.bench import detect

    monkeypatch.setitem(detect._PROBES, "cuda", lambda t: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    _fails(["bench", "collectives", "--nproc-per-node", "4"], "field '--nproc-per-node'", "2 cuda device(s)")
    _fails(["bench", "collectives", "--nproc-per-node", "1", "--backend", "gloo"], "field '--nproc-per-node'")


def test_collectives_module_refuses_before_the_process_group(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from xpuplan.bench import collectives

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(SystemExit) as exc:  # argparse: --backend has its choices
        collectives.main(["--backend", "zz"])
    assert exc.value.code == 2
    assert collectives.main(["--backend", "gloo", "--device-id", "NOPE", "--no-store"]) == 2
    assert "field '--device-id': unknown hardware 'NOPE'" in capsys.readouterr().err


# -- bench show / list --kind ------------------------------------------------------------------
def test_show_kind_is_checked_like_list(db_url: str) -> None:
    assert runner.invoke(app, ["import", "vllm", str(VLLM_JSON), "--device-id", "H100"]).exit_code == 0
    _fails(["bench", "show", "latest", "--kind", "zz"], "field '--kind'", "'zz'", "gemm")
    _fails(["bench", "list", "--kind", "zz"], "field '--kind'", "'zz'", "import-vllm")
    res = runner.invoke(app, ["bench", "show", "latest", "--kind", "serving", "--json"])
    assert res.exit_code == 0, res.output
    assert {m["kind"] for m in json.loads(res.stdout)["measurements"]} == {"serving"}
    res = runner.invoke(app, ["bench", "show", "latest", "--kind", "gemm", "--json"])  # known, none in this run
    assert res.exit_code == 0 and json.loads(res.stdout)["measurements"] == []


# -- import vllm ---------------------------------------------------------------------------------
@pytest.mark.parametrize("key, value, shown", [
    ("output_throughput", float("nan"), "got nan"),
    ("output_throughput", -100, "got -100"),
    ("request_throughput", -5, "got -5"),
    ("mean_ttft_ms", float("inf"), "got inf"),
    ("duration", 0, "got 0"),
    ("p99_ttft_ms", float("nan"), "got nan"),
    ("std_tpot_ms", -1.0, "got -1.0"),
    ("request_rate", float("nan"), "got nan"),
    ("request_rate", "soon", "not a number"),
])
def test_vllm_measured_values_must_be_finite_and_positive(tmp_path: Path, db_url: str, key: str, value: object,
                                                          shown: str) -> None:
    f = _vllm(tmp_path, **{key: value})
    line = next(i for i, x in enumerate(f.read_text().splitlines(), start=1) if f'"{key}"' in x)
    _fails(["import", "vllm", str(f), "--device-id", "H100"], f"{f}:{line}", f"field '{key}'", shown)
    assert _stored(db_url) == 0


def test_vllm_raw_nan_token(tmp_path: Path, db_url: str) -> None:
    f = _write(tmp_path, "nan.json", VLLM_JSON.read_text().replace('"output_throughput": 992.5',
                                                                    '"output_throughput": NaN'))
    assert "NaN" in f.read_text()
    _fails(["import", "vllm", str(f), "--device-id", "H100"], "field 'output_throughput'")
    assert _stored(db_url) == 0


def test_vllm_unmeasured_zero_latency_is_not_a_row(tmp_path: Path, db_url: str) -> None:
    f = _vllm(tmp_path, mean_tpot_ms=0)
    res = runner.invoke(app, ["import", "vllm", str(f), "--device-id", "H100", "--json"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["bench", "show", "latest", "--kind", "validation_row", "--json"])
    assert res.exit_code == 0, res.output
    metrics = {m["metric"] for m in json.loads(res.stdout)["measurements"]}
    assert "tpot_ms" not in metrics and "ttft_ms" in metrics


def test_a_bad_file_stores_nothing_of_the_others(tmp_path: Path, db_url: str) -> None:
    bad = _vllm(tmp_path, output_throughput=float("nan"))
    _fails(["import", "vllm", str(VLLM_JSON), str(bad), "--device-id", "H100"], str(bad))
    assert _stored(db_url) == 0


@pytest.mark.parametrize("args, needles", [
    (["--precision", "zz"], ("field '--precision'", "'zz'")),
    (["--tp", "3"], ("field '--tp'", "n_heads (32)", "llama3-8b")),
    (["--tp", "8", "--n-devices", "2"], ("field '--n-devices'", "tp = 8")),
    (["--tp", "2", "--n-devices", "3"], ("field '--n-devices'",)),
    (["--tp", "0"], ("field '--tp'",)),
    (["--n-devices", "0"], ("field '--n-devices'",)),
])
def test_vllm_flags(db_url: str, args: list[str], needles: tuple[str, ...]) -> None:
    _fails(["import", "vllm", str(VLLM_JSON), "--device-id", "H100", *args], *needles)
    assert _stored(db_url) == 0


def test_vllm_unknown_model_only_checks_what_it_can(tmp_path: Path, db_url: str) -> None:
    f = _vllm(tmp_path, model_id="someone/unknown-model")
    res = runner.invoke(app, ["import", "vllm", str(f), "--device-id", "H100", "--tp", "3"])
    assert res.exit_code == 0, res.output
    _fails(["import", "vllm", str(f), "--device-id", "H100", "--tp", "3", "--n-devices", "4"], "field '--n-devices'")


def test_vllm_unknown_device_names_the_flag(db_url: str) -> None:
    _fails(["import", "vllm", str(VLLM_JSON), "--device-id", "NOPE"], "field '--device-id'", "'NOPE'")


# -- import megatron -------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["nan", "-5.0", "inf", "0"])
def test_megatron_step_time_must_be_positive_and_finite(tmp_path: Path, db_url: str, value: str) -> None:
    text = MEGATRON.read_text().replace("elapsed time per iteration (ms): 15375.6",
                                        f"elapsed time per iteration (ms): {value}")
    line = next(i for i, x in enumerate(text.splitlines(), start=1) if f"(ms): {value} |" in x)
    f = _write(tmp_path, "m.log", text)
    out = _fails(["import", "megatron", str(f), "--device-id", "H100"], f"{f}:{line}",
                 "field 'elapsed time per iteration (ms)'", f"got '{value}'")
    assert "is 0" not in out
    assert _stored(db_url) == 0


def test_megatron_logged_tflops_must_be_finite(tmp_path: Path, db_url: str) -> None:
    text = MEGATRON.read_text().replace("(TFLOP/s/GPU): 410.7", "(TFLOP/s/GPU): nan")
    _fails(["import", "megatron", str(_write(tmp_path, "m.log", text)), "--device-id", "H100"],
           "field 'throughput per GPU (TFLOP/s/GPU)'")
    assert _stored(db_url) == 0


# -- import csv ------------------------------------------------------------------------------------
def test_csv_unknown_hardware(tmp_path: Path, db_url: str) -> None:
    ok = "ok-1,infer,src,B,llama3-8b,,,,,,,,,,nvidia-h100-sxm-80gb,1,bf16,output_tokens_per_s,1000,,,,vllm,,,1,1,1024,128,,32,server"
    bad = ok.replace("ok-1", "bad-1").replace("nvidia-h100-sxm-80gb", "nvidia-zzz")
    f = _write(tmp_path, "mine.csv", f"{CSV_HEADER}\n{ok}\n{bad}\n")
    _fails(["import", "csv", str(f)], f"{f}:3", "field 'hardware'", "'nvidia-zzz'", "did you mean")
    assert _stored(db_url) == 0
    alias = _write(tmp_path, "alias.csv", f"{CSV_HEADER}\n{ok.replace('nvidia-h100-sxm-80gb', 'H100')}\n")
    assert runner.invoke(app, ["import", "csv", str(alias)]).exit_code == 0


# -- the other importers: NaN, infinities and negative figures ----------------------------------
def _sub(tmp_path: Path, src: Path, old: str, new: str) -> Path:
    text = src.read_text()
    assert old in text
    return _write(tmp_path, src.name, text.replace(old, new, 1))


def test_other_formats_refuse_non_finite_or_negative(tmp_path: Path) -> None:
    cases = [
        (lambda: parse_nccl_tests(_sub(tmp_path, NCCL_LOG, "42.84    0.02    0.04", "-42.84    0.02    0.04")),
         "time", 18),
        (lambda: parse_nccl_tests(_sub(tmp_path, NCCL_LOG, "42.84    0.02    0.04", "42.84    0.02    nan")),
         "busbw", 18),
        (lambda: parse_hccl_test(_sub(tmp_path, HCCL, "| 58.90 ", "| nan   "), n_ranks=8, device_id="910B"),
         "aveg_time(us)", 6),
        (lambda: parse_sglang_jsonl(_sub(tmp_path, SGLANG, '"request_throughput": 1.1099', '"request_throughput": NaN'),
                                    device_id="H100"), "request_throughput", 1),
        (lambda: parse_sglang_jsonl(_sub(tmp_path, SGLANG, '"duration": 180.2', '"duration": -1'), device_id="H100"),
         "duration", 1),
        (lambda: parse_trtllm_report(_sub(tmp_path, TRTLLM, '"system_output_throughput_tok_s": 16132.69',
                                          '"system_output_throughput_tok_s": Infinity'), device_id="H100"),
         "performance.system_output_throughput_tok_s", None),
        (lambda: parse_mlperf_inference(_sub(tmp_path, MLPERF_SERVER, "Completed tokens per second: 20415.62",
                                             "Completed tokens per second: nan"), device_id="H100", model="llama2-70b",
                                        tp=2, n_devices=8), "Completed tokens per second", 8),
        (lambda: parse_mlperf_inference(_sub(tmp_path, MLPERF_SERVER, "Mean latency (ns)               : 2",
                                             "Mean latency (ns)               : -2"), device_id="H100"),
         "Mean latency (ns)", 25),
    ]
    for parse, field, line in cases:
        with pytest.raises(UserInputError) as exc:
            parse()
        assert exc.value.field == field, (field, exc.value)
        assert exc.value.file is not None
        if line is not None:
            assert exc.value.line == line, (field, exc.value)
        else:
            assert exc.value.line is not None


def test_serving_imports_check_flags_against_the_model(db_url: str) -> None:
    _fails(["import", "sglang", str(SGLANG), "--device-id", "H100", "--model", "qwen2.5-7b", "--tp", "5"],
           "field '--tp'", "n_heads")
    _fails(["import", "sglang", str(SGLANG), "--device-id", "H100", "--precision", "zz"], "field '--precision'")
    _fails(["import", "mlperf-inference", str(MLPERF_SERVER), "--device-id", "H100", "--tp", "4", "--n-devices", "6"],
           "field '--n-devices'")
    assert _stored(db_url) == 0


def test_store_refuses_a_non_finite_record(db_url: str) -> None:
    parsed = ParsedImport(RunInfo(kind="import-csv", source="/x/y.csv"),
                          [Record(kind="serving", name="p99", metric="p99_ttft_ms", value=float("nan"), unit="ms",
                                  params={"source_line": 7})])
    store = open_store(db_url)
    with pytest.raises(UserInputError) as exc:
        store_import(store, parsed)
    assert (exc.value.file, exc.value.line, exc.value.field) == ("/x/y.csv", 7, "p99_ttft_ms")
    assert _stored(db_url) == 0
