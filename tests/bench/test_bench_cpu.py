"""Benchmarks on the CPU (needs torch): the quick run, calibration and local validation within
25%, a run killed half-way, and the collectives under torchrun with 2 Gloo processes."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from xpuplan.bench.detect import GENERIC_CPU_ID, catalog_id_for, detect_backend  # noqa: E402
from xpuplan.bench.model import CPU_MODEL, SmallTransformerConfig, build_model, n_params, planner_op_count  # noqa: E402
from xpuplan.catalog import load_catalog  # noqa: E402
from xpuplan.cli.main import app  # noqa: E402
from xpuplan.errors import UserInputError  # noqa: E402
from xpuplan.perf.params import params_total  # noqa: E402
from xpuplan.store.engine import open_store  # noqa: E402
from xpuplan.store.records import effective_status, resolve_run, run_measurements  # noqa: E402

pytestmark = pytest.mark.bench
runner = CliRunner()

#: A timed run on a shared machine is noisy: the test checks behaviour (calibrated predictions land within
#: a factor of 3 of the measurement, which catches unit and wiring mistakes); the 25% accuracy target is
#: measured by benchmarks/bench_local_validation.py, not asserted here.
LOCAL_FACTOR = 3.0


def test_detect_cpu_and_name_mapping() -> None:
    b = detect_backend("cpu")
    assert b.kind == "cpu" and b.torch_device == "cpu"
    assert b.catalog_id == (GENERIC_CPU_ID if GENERIC_CPU_ID in load_catalog() else None)
    assert b.environment["torch"] == torch.__version__
    assert catalog_id_for("NVIDIA H100 80GB HBM3") == "nvidia-h100-sxm-80gb"
    assert catalog_id_for("NVIDIA H100 PCIe") == "nvidia-h100-pcie-80gb"
    assert catalog_id_for("NVIDIA A100-SXM4-80GB") == "nvidia-a100-sxm-80gb"
    assert catalog_id_for("NVIDIA A100-PCIE-40GB") == "nvidia-a100-pcie-40gb"
    assert catalog_id_for("AMD Instinct MI300X") == "amd-mi300x-192gb"
    assert catalog_id_for("Ascend910B3") in ("huawei-ascend-910b3", "huawei-ascend-910b")
    assert catalog_id_for("Some Future GPU") is None
    if not torch.cuda.is_available():
        with pytest.raises(UserInputError, match="no cuda device"):
            detect_backend("cuda")
    with pytest.raises(UserInputError):
        detect_backend("tpu")


def test_small_transformer_matches_the_planner_model() -> None:
    cfg = SmallTransformerConfig(layers=2, d_model=32, heads=4, ffn=48, vocab=64, train_batch=2, train_seq=8,
                                 decode_batch=2, decode_context=8)
    assert n_params(cfg) == params_total(cfg.to_arch())
    assert n_params(CPU_MODEL) == params_total(CPU_MODEL.to_arch())
    model = build_model(cfg, "cpu", torch.float32)
    assert sum(p.numel() for p in model.parameters()) == n_params(cfg)
    logits = model(torch.randint(0, cfg.vocab, (2, 8)))
    assert logits.shape == (2, 8, cfg.vocab)
    shape = (2, cfg.heads, 9, cfg.head_dim)
    caches = [(torch.zeros(shape), torch.zeros(shape)) for _ in range(cfg.layers)]
    with torch.inference_mode():
        assert model(torch.zeros(2, 1, dtype=torch.long), caches, 8).shape == (2, 1, cfg.vocab)
    assert planner_op_count(cfg, 1, 1, 9) == 2 * 10 + 2


def test_quick_run_calibrate_and_validate_within_tolerance(db_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    res = runner.invoke(app, ["bench", "run", "--device", "cpu", "--quick", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["status"] == "completed" and out["device_id"] == GENERIC_CPU_ID
    kinds = {r["kind"] for r in out["records"]}
    assert kinds >= {"overhead", "host_sync", "gemm", "membw", "attention", "dispatch", "model_step"}
    assert out["environment"]["torch"] == torch.__version__ and "cpu.cpu_count" in out["environment"]
    head = out["headline"]
    assert head["gemm_best_tflops"]["fp32"] > 0 and head["stream_gb_per_s"]["triad"] > 0

    res = runner.invoke(app, ["calibrate", "--from", "latest", "--json"])
    assert res.exit_code == 0, res.output
    cal = json.loads(res.stdout)
    assert {"gemm_peak_fraction", "gemm_half_dim", "memory_bw_fraction", "attention_peak_fraction",
            "kernel_overhead_s", "host_sync_s"} <= set(cal["fitted"])

    monkeypatch.setenv("XPUPLAN_USE_CALIBRATION", "1")
    res = runner.invoke(app, ["validate", "--local", "latest", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["id"].split(":")[1]: r for r in json.loads(res.stdout)["rows"]}
    assert set(rows) == {"train_step", "decode_step"}
    for name, row in rows.items():
        assert row["details"]["efficiency_source"].startswith("calibration:#"), row
        ratio = row["predicted"] / row["measured"]
        assert 1 / LOCAL_FACTOR < ratio < LOCAL_FACTOR, (name, row["measured"], row["predicted"], row["details"])
    # the same shape as `validate FILE.csv`
    assert set(rows["train_step"]) == {"id", "kind", "metric", "hardware", "trust", "source", "measured", "predicted",
                                       "error", "reason", "details"}


def test_only_and_bad_options(db_url: str) -> None:
    res = runner.invoke(app, ["bench", "run", "--device", "cpu", "--quick", "--only", "overhead", "--json"])
    assert res.exit_code == 0, res.output
    assert {r["kind"] for r in json.loads(res.stdout)["records"]} == {"overhead", "host_sync"}
    res = runner.invoke(app, ["validate", "--local", "latest"])
    assert res.exit_code == 2 and "no model-step measurements" in res.output
    for args, needle in ((["--only", "gpu-magic"], "unknown benchmark"), (["--dtype", "fp64"], "expected fp32"),
                         (["--device-id", "nope-9000"], "unknown hardware"), (["--device", "quantum"], "expected one of")):
        res = runner.invoke(app, ["bench", "run", "--device", "cpu", "--quick", *args] if "--device" not in args
                            else ["bench", "run", "--quick", *args])
        assert res.exit_code == 2, (args, res.output)
        assert needle in res.output and "Traceback" not in res.output


def _count(db: Path) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT count(*) FROM measurements").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_killed_run_keeps_completed_measurements(tmp_path: Path) -> None:
    db = tmp_path / "kill.db"
    url = f"sqlite:///{db}"
    env = dict(os.environ, XPUPLAN_DB_URL=url)
    proc = subprocess.Popen([sys.executable, "-m", "xpuplan", "bench", "run", "--device", "cpu", "--quick"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and _count(db) < 6:
            time.sleep(0.02)
        assert proc.poll() is None, f"run ended before it could be killed: {proc.stderr.read() if proc.stderr else ''}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
        runs = con.execute("SELECT id, status, finished_at FROM runs").fetchall()
        assert len(runs) == 1 and runs[0][1] == "running" and runs[0][2] is None
        rows = con.execute("SELECT seq, kind, name, metric, value, unit, time_s, params FROM measurements "
                           "WHERE run_id = ? ORDER BY seq", (runs[0][0],)).fetchall()
    finally:
        con.close()
    total_cases = json.loads(_run_config(db))["cases"]
    assert 6 <= len(rows) < total_cases
    assert [r[0] for r in rows] == list(range(len(rows)))  # no gap, no half-written row
    for seq, kind, name, metric, value, unit, time_s, params in rows:
        assert kind and name and metric and unit and value is not None and value > 0 and time_s and time_s > 0, seq
        json.loads(params)

    store = open_store(url)  # still opens (and migrates nothing)
    run = resolve_run(store, "latest")
    assert effective_status(run) == "aborted"
    assert len(run_measurements(store, run.id)) == len(rows)
    res = runner.invoke(app, ["bench", "list", "--db", url])
    assert res.exit_code == 0 and "aborted" in res.stdout


def _run_config(db: Path) -> str:
    con = sqlite3.connect(db)
    try:
        return str(con.execute("SELECT config FROM runs").fetchone()[0])
    finally:
        con.close()


def test_collectives_two_gloo_processes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'coll.db'}"
    out_json = tmp_path / "coll.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "-m",
           "xpuplan.bench.collectives", "--quick", "--backend", "gloo", "--max-bytes", str(2**20), "--db", url,
           "--json", str(out_json)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads(out_json.read_text())["results"]
    assert {r["op"] for r in results} == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"}
    assert all(r["time_s"] > 0 and r["busbw_gb_per_s"] > 0 and r["n_ranks"] == 2 for r in results)
    store = open_store(url)
    run = resolve_run(store, "latest")
    assert run.kind == "collectives" and run.status == "completed" and run.n_devices == 2
    assert len(run_measurements(store, run.id, kind="collective")) == len(results)
    res = runner.invoke(app, ["calibrate", "--from", str(run.id), "--db", url, "--json", "--dry-run"])
    assert res.exit_code == 0, res.output
    assert "scale_up_bw_fraction" in json.loads(res.stdout)["not_fitted"]  # the generic CPU has no link figure


def test_collectives_outside_torchrun_explains() -> None:
    proc = subprocess.run([sys.executable, "-m", "xpuplan.bench.collectives", "--quick"], capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")})
    assert proc.returncode == 2 and "torchrun" in proc.stderr
