"""``xpuplan bench``, ``calibrate``, ``import`` and ``db``: measure this machine, fit the planner
to it, bring in measurements from other tools. Thin: the work is in ``xpuplan.jobs.bench``."""

from __future__ import annotations

import os
import subprocess
from typing import Annotated, Any

import typer

from xpuplan import units
from xpuplan.cli.common import cli_command, console, err_console, print_json, table

DbOption = Annotated[str | None, typer.Option("--db", help="SQLAlchemy URL or SQLite file of the store "
                                                         "(default: $XPUPLAN_DB_URL or the user's data directory)")]
JsonOption = Annotated[bool, typer.Option("--json", help="machine-readable output")]

bench_app = typer.Typer(help="Benchmark this machine and browse stored runs.", no_args_is_help=True)
import_app = typer.Typer(help="Import other tools' results into the store: collective tests (nccl/rccl-tests, "
                              "hccl_test), serving benchmarks (vLLM, SGLang, trtllm-bench, MLPerf Inference), "
                              "training logs (Megatron-LM, torchtitan, MLPerf Training) and validation CSVs.",
                         no_args_is_help=True)
db_app = typer.Typer(help="The measurement store: location, schema migrations.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add the measurement commands to the main ``xpuplan`` app."""
    app.add_typer(bench_app, name="bench")
    app.command("calibrate")(calibrate)
    app.add_typer(import_app, name="import")
    app.add_typer(db_app, name="db")


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < units.MS:
        return f"{seconds / units.US:,.1f} µs"
    if seconds < 1:
        return f"{seconds / units.MS:,.2f} ms"
    return f"{seconds:,.3f} s"


# -- bench run ----------------------------------------------------------------------------------
@bench_app.command("run")
@cli_command
def bench_run(
    device: Annotated[str, typer.Option(help="auto | cuda (CUDA and ROCm) | npu (Ascend) | mlu (Cambricon) | cpu")] = "auto",
    quick: Annotated[bool, typer.Option("--quick", help="fewer sizes and repeats (seconds on a CPU)")] = False,
    device_id: Annotated[str | None, typer.Option(help="catalog id of this device (default: detected)")] = None,
    dtype: Annotated[str | None, typer.Option(help="precision of the model steps: fp32, bf16, fp16 "
                                                   "(default bf16 on accelerators, fp32 on CPUs)")] = None,
    only: Annotated[str | None, typer.Option(help="comma-separated subset: overhead, gemm, membw, attention, model")] = None,
    note: Annotated[str | None, typer.Option(help="free text stored with the run")] = None,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Measure GEMM, memory bandwidth, attention, dispatch overhead and a small transformer's training and decode steps.

    Every measurement is stored as soon as it is made; a run stopped half-way keeps what it measured."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from xpuplan.jobs.bench import run_benchmarks

    progress = Progress(TextColumn("[bold]bench[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.description}"), console=err_console, transient=True,
                        disable=json_ or not err_console.is_terminal)
    with progress:
        task = progress.add_task("starting", total=None)

        def on_case(i: int, total: int, name: str) -> None:
            progress.update(task, total=total, completed=i, description=name)

        done = run_benchmarks(device=device, quick=quick, device_id=device_id, dtype=dtype, only=only, note=note,
                              db=db, on_case=on_case)
    result, backend = done.result, done.backend
    info = {"run_id": result.run_id, "status": result.status, "device_id": result.device_id,
            "device_name": backend.name, "backend": backend.kind, "measurements": len(result.records),
            "skipped": result.skipped, "headline": done.headline, "notes": list(done.notes)}
    if json_:
        info["environment"] = backend.environment
        info["records"] = [{"kind": r.kind, "name": r.name, "dtype": r.dtype, "metric": r.metric, "value": r.value,
                            "unit": r.unit, "time_s": r.time_s, "flops": r.flops, "bytes": r.bytes, "params": r.params}
                           for r in result.records]
        print_json(info)
        return
    _print_records(f"run {result.run_id}: {backend.name} ({backend.kind}) -> {result.device_id or 'no catalog id'}",
                   result.records)
    if result.skipped:
        console.print(f"skipped (not supported here): {', '.join(result.skipped)}")
    for n in done.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    if result.device_id is None:
        console.print("[yellow]this device is not in the catalog: pass --device-id to calibrate with these figures[/]")
    console.print(f"stored as run {result.run_id} in {done.store_url}; next: "
                  f"`xpuplan calibrate --from {result.run_id}` then `xpuplan validate --local {result.run_id}`")


def _print_records(title: str, records: list[Any]) -> None:
    rows = []
    for r in records:
        rows.append([r.kind, r.name, r.dtype or "", f"{r.value:,.4g} {r.unit}", _fmt_time(r.time_s)])
    console.print(table(title, ["kind", "measurement", "dtype", "value", "time"], rows))


# -- bench list / show --------------------------------------------------------------------------
@bench_app.command("list")
@cli_command
def bench_list(
    kind: Annotated[str | None, typer.Option(help="bench, collectives, import-nccl-tests, import-hccl-test, import-vllm, "
                                                  "import-sglang, import-trtllm, import-mlperf-inference, "
                                                  "import-mlperf-training, import-megatron, import-torchtitan, "
                                                  "import-csv")] = None,
    device_id: Annotated[str | None, typer.Option(help="only runs of this catalog device")] = None,
    limit: Annotated[int, typer.Option(help="newest N runs")] = 50,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Stored runs, newest first (a killed run shows as ``aborted``)."""
    from xpuplan.jobs.bench import list_stored_runs

    out, store_url = list_stored_runs(kind=kind, device_id=device_id, limit=limit, db=db)
    if json_:
        print_json(out)
        return
    rows = [[o["id"], o["kind"], o["status"], (o["started_at"] or "")[:19], o["device_id"] or "-", o["device_name"] or "-",
             o["measurements"], o["source"] or o["note"] or ""] for o in out]
    console.print(table(f"{len(out)} run(s) in {store_url}",
                        ["run", "kind", "status", "started (UTC)", "device id", "device", "measurements", "source / note"],
                        rows))


@bench_app.command("show")
@cli_command
def bench_show(
    run: Annotated[str, typer.Argument(metavar="RUN", help="run id or 'latest'")],
    kind: Annotated[str | None, typer.Option(help="only measurements of this kind (gemm, membw, attention, ...)")] = None,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """One run: device, software, configuration and every measurement."""
    from xpuplan.jobs.bench import show_stored_run

    shown = show_stored_run(run, kind=kind, db=db)
    r, meas = shown.run, shown.measurements
    if json_:
        print_json(r.summary() | {"status": shown.status, "environment": r.environment, "config": r.config,
                                  "headline": shown.headline, "measurements": [m.to_dict() for m in meas]})
        return
    console.print(f"[bold]run {r.id}[/] ({r.kind}, {shown.status}) {r.device_name or ''} -> {r.device_id or 'no catalog id'}")
    console.print(f"started {r.started_at:%Y-%m-%d %H:%M:%S} on {r.host or '?'}" + (f"; source {r.source}" if r.source else ""))
    env = {k: v for k, v in (r.environment or {}).items() if not isinstance(v, str) or len(v) < 120}
    if env:
        console.print(table("environment", ["key", "value"], [[k, str(v)] for k, v in env.items()]))
    _print_records(f"{len(meas)} measurement(s)", meas)


@bench_app.command("collectives")
@cli_command
def bench_collectives(
    nproc_per_node: Annotated[int, typer.Option("--nproc-per-node", help="processes (devices) on this node")] = 2,
    quick: Annotated[bool, typer.Option("--quick")] = False,
    backend: Annotated[str, typer.Option(help="torch.distributed backend: auto, nccl, gloo, hccl, cncl")] = "auto",
    device_id: Annotated[str | None, typer.Option(help="catalog id of the devices")] = None,
    db: DbOption = None,
) -> None:
    """Collective bandwidth on this node: runs `torchrun --nproc-per-node N -m xpuplan.bench.collectives`.

    For several nodes run torchrun yourself with a rendezvous endpoint (see docs/measurement.md)."""
    from xpuplan.jobs.bench import collectives_command

    cmd = collectives_command(nproc_per_node=nproc_per_node, quick=quick, backend=backend, device_id=device_id, db=db)
    rc = subprocess.call(cmd, env=os.environ.copy())
    if rc:
        raise typer.Exit(rc)


# -- calibrate ----------------------------------------------------------------------------------
@cli_command
def calibrate(
    device: Annotated[str | None, typer.Option(help="catalog device id or alias (default: the --from run's)")] = None,
    from_: Annotated[list[str] | None, typer.Option("--from", metavar="RUN",
                                                    help="run id or 'latest' (repeatable); default: the newest "
                                                         "benchmark and collectives runs of the device")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="fit and show, do not store the profile")] = False,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Fit the planner's efficiency parameters for a device to stored measurements and save a calibration profile.

    The planners use the newest profile of a device (and say so in their results)."""
    from xpuplan.jobs.bench import calibrate_device

    res = calibrate_device(device=device, runs=from_ or [], dry_run=dry_run, db=db)
    fit = res.fit
    out = {"calibration_id": res.calibration_id or None, "device_id": res.device_id, "runs": res.run_ids,
           "saved": not dry_run, "efficiency": fit.efficiency.model_dump(), **fit.report()}
    if json_:
        print_json(out)
        return
    rows = [[k, v.default, v.value, v.points, v.rms_log_error, v.basis] for k, v in fit.params.items()]
    rows += [[k, getattr(fit.efficiency, k), "-", 0, None, f"not fitted: {why}"] for k, why in fit.skipped.items()]
    console.print(table(f"calibration of {res.device_id} from run(s) {', '.join(map(str, res.run_ids))}",
                        ["parameter", "before", "fitted", "points", "rms log err", "basis"], rows))
    for w in fit.warnings:
        console.print(f"[yellow]warning:[/] {w}")
    if dry_run:
        console.print("dry run: nothing stored")
    else:
        console.print(f"saved as calibration #{res.calibration_id}; planners now use it for {res.device_id} "
                      f"(XPUPLAN_USE_CALIBRATION=0 turns it off)")


# -- import -------------------------------------------------------------------------------------
ValidateOption = Annotated[bool, typer.Option("--validate", help="then compare the planner's predictions with the "
                                                                 "imported rows (as `validate --local RUN`)")]
DeviceIdOption = Annotated[str | None, typer.Option(help="catalog id or alias of the accelerators that ran it "
                                                         "(required: the file does not say)")]
ModelOption = Annotated[str | None, typer.Option(help="preset id or a config.json path, when the file's model is "
                                                      "not a preset")]


def _finish(imported: list[tuple[Any, int]], json_: bool, *, validate_: bool = False, db: str | None = None) -> None:
    """Report each imported file; with ``validate_``, the predictions for each run as `validate --local` shows them."""
    out = [_report_import(p, run_id, json_) for p, run_id in imported]
    if validate_:
        from xpuplan.cli.validate import render_rows, render_summary
        from xpuplan.jobs.requests import parse_request
        from xpuplan.jobs.validate import ValidateRequest
        from xpuplan.jobs.validate import validate as run_validation

        for item, (_, run_id) in zip(out, imported, strict=True):
            result = run_validation(parse_request(ValidateRequest, {"local": str(run_id), "db": db}))
            if json_:
                item["validation"] = result.to_dict()
            else:
                render_rows(result.rows, result.title)
                render_summary(result.summary)
    if json_:
        print_json(out)

def _report_import(parsed: Any, run_id: int, json_: bool) -> dict[str, Any]:
    out = {"run_id": run_id, "kind": parsed.info.kind, "device_id": parsed.info.device_id, "source": parsed.info.source,
           "measurements": len(parsed.records), "config": parsed.info.config, "warnings": parsed.warnings}
    if not json_:
        console.print(f"imported {parsed.info.source} as run {run_id} ({parsed.info.kind}, {len(parsed.records)} "
                      f"measurements, device {parsed.info.device_id or '-'})")
        for w in parsed.warnings:
            console.print(f"[yellow]warning:[/] {w}")
    return out


@import_app.command("nccl-tests")
@cli_command
def import_nccl(
    files: Annotated[list[str], typer.Argument(metavar="LOG...", help="nccl-tests / rccl-tests output files")],
    op: Annotated[str | None, typer.Option(help="collective, when neither the log nor its file name says")] = None,
    device_id: Annotated[str | None, typer.Option(help="catalog id (default: from the log's device lines)")] = None,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Bus bandwidth and latency per message size, for `calibrate` (one run per file)."""
    from xpuplan.jobs.bench import import_files

    out = [_report_import(p, run_id, json_) for p, run_id in import_files("nccl-tests", files, db=db, op=op,
                                                                          device_id=device_id)]
    if json_:
        print_json(out)


@import_app.command("vllm")
@cli_command
def import_vllm(
    files: Annotated[list[str], typer.Argument(metavar="RESULT.json...", help="benchmark_serving --save-result files")],
    device_id: Annotated[str | None, typer.Option(help="catalog id of the GPUs that served (required)")] = None,
    tp: Annotated[int, typer.Option(help="tensor-parallel size of the served model")] = 1,
    n_devices: Annotated[int | None, typer.Option(help="devices in the run (default: tp)")] = None,
    precision: Annotated[str, typer.Option(help="weight/compute precision")] = "bf16",
    model: Annotated[str | None, typer.Option(help="preset id when the file's model_id is not one")] = None,
    validate_: ValidateOption = False,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Serving throughput and latency, for `validate --local RUN` (also `vllm bench serve --save-result`)."""
    from xpuplan.jobs.bench import import_files

    imported = import_files("vllm", files, db=db, device_id=device_id, n_devices=n_devices, tp=tp,
                            precision=precision, model=model)
    _finish(imported, json_, validate_=validate_, db=db)


import_app.command("rccl-tests", help="rccl-tests logs: the nccl-tests layout (same as `import nccl-tests`).")(
    import_nccl)


@import_app.command("hccl-test")
@cli_command
def import_hccl(
    files: Annotated[list[str], typer.Argument(metavar="LOG...", help="Ascend hccl_test output (all_reduce_test ...)")],
    n_ranks: Annotated[int | None, typer.Option(help="ranks of the run (mpirun -np); the log does not say")] = None,
    nodes: Annotated[int, typer.Option(help="servers the ranks spanned")] = 1,
    op: Annotated[str | None, typer.Option(help="collective, when the file name does not say")] = None,
    device_id: DeviceIdOption = None,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Ascend HCCL bus bandwidth and latency per message size, for `calibrate`."""
    from xpuplan.jobs.bench import import_files

    _finish(import_files("hccl-test", files, db=db, n_ranks=n_ranks, nodes=nodes, op=op, device_id=device_id), json_)


@import_app.command("sglang")
@cli_command
def import_sglang(
    files: Annotated[list[str], typer.Argument(metavar="RESULT.jsonl...", help="bench_serving --output-file files")],
    device_id: DeviceIdOption = None,
    tp: Annotated[int, typer.Option(help="tensor-parallel size of the served model")] = 1,
    pp: Annotated[int, typer.Option(help="pipeline-parallel size")] = 1,
    n_devices: Annotated[int | None, typer.Option(help="devices in the run (default: tp x pp)")] = None,
    precision: Annotated[str, typer.Option(help="weight/compute precision")] = "bf16",
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache precision (default: precision)")] = None,
    model: ModelOption = None,
    validate_: ValidateOption = False,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """SGLang serving results, one set of validation rows per line (load point)."""
    from xpuplan.jobs.bench import import_files

    _finish(import_files("sglang", files, db=db, device_id=device_id, tp=tp, pp=pp, n_devices=n_devices,
                         precision=precision, kv_dtype=kv_dtype, model=model), json_, validate_=validate_, db=db)


@import_app.command("trtllm-bench")
@cli_command
def import_trtllm(
    files: Annotated[list[str], typer.Argument(metavar="REPORT.json...", help="trtllm-bench --report_json files")],
    device_id: DeviceIdOption = None,
    model: ModelOption = None,
    scenario: Annotated[str | None, typer.Option(help="offline, server or latency (default: from the report's "
                                                      "average concurrency)")] = None,
    validate_: ValidateOption = False,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """TensorRT-LLM throughput/latency reports: layout, dtypes and lengths come from the report."""
    from xpuplan.jobs.bench import import_files

    _finish(import_files("trtllm-bench", files, db=db, device_id=device_id, model=model, scenario=scenario), json_,
            validate_=validate_, db=db)


@import_app.command("mlperf-inference")
@cli_command
def import_mlperf_inference(
    files: Annotated[list[str], typer.Argument(metavar="mlperf_log_summary.txt...", help="LoadGen summaries")],
    device_id: DeviceIdOption = None,
    n_devices: Annotated[int | None, typer.Option(help="accelerators of the system (default: tp x pp)")] = None,
    tp: Annotated[int, typer.Option(help="tensor-parallel size per replica")] = 1,
    pp: Annotated[int, typer.Option(help="pipeline-parallel size per replica")] = 1,
    precision: Annotated[str, typer.Option(help="precision of the submission")] = "fp8",
    model: ModelOption = None,
    input_len: Annotated[int | None, typer.Option("--input-len", help="the dataset's mean prompt tokens")] = None,
    output_len: Annotated[int | None, typer.Option("--output-len", help="the dataset's mean output tokens")] = None,
    engine: Annotated[str, typer.Option(help="serving engine of the SUT (vllm, sglang, trtllm ...)")] = "trtllm",
    validate_: ValidateOption = False,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """MLPerf Inference performance summaries (Offline, Server, Interactive, SingleStream)."""
    from xpuplan.jobs.bench import import_files

    _finish(import_files("mlperf-inference", files, db=db, device_id=device_id, n_devices=n_devices, tp=tp, pp=pp,
                         precision=precision, model=model, input_len=input_len, output_len=output_len,
                         engine=engine), json_,
            validate_=validate_, db=db)


@import_app.command("mlperf-training")
@cli_command
def import_mlperf_training(
    files: Annotated[list[str], typer.Argument(metavar="result_N.txt...", help="MLPerf Training MLLOG results")],
    device_id: Annotated[str | None, typer.Option(help="catalog id of the accelerators (optional)")] = None,
    n_devices: Annotated[int | None, typer.Option(help="accelerators in the run")] = None,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Time to train (run_start to run_stop), benchmark and status of MLPerf Training runs."""
    from xpuplan.jobs.bench import import_files

    _finish(import_files("mlperf-training", files, db=db, device_id=device_id, n_devices=n_devices), json_)


@import_app.command("megatron")
@cli_command
def import_megatron(
    files: Annotated[list[str], typer.Argument(metavar="LOG...", help="Megatron-LM training logs (rank 0 / last rank)")],
    device_id: DeviceIdOption = None,
    config: Annotated[str | None, typer.Option(help="YAML of Megatron arguments; fills or overrides the log's "
                                                    "arguments dump")] = None,
    model: ModelOption = None,
    skip: Annotated[int, typer.Option(help="logged intervals to drop first (warm-up)")] = 1,
    validate_: ValidateOption = False,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Plan and measured step time of a Megatron-LM run, as training validation rows."""
    from xpuplan.jobs.bench import import_files

    _finish(import_files("megatron", files, db=db, device_id=device_id, config=config, model=model, skip=skip), json_,
            validate_=validate_, db=db)


@import_app.command("torchtitan")
@cli_command
def import_torchtitan(
    files: Annotated[list[str], typer.Argument(metavar="LOG...", help="torchtitan training logs")],
    config: Annotated[str | None, typer.Option(help="the job's .toml config (required)")] = None,
    device_id: DeviceIdOption = None,
    model: ModelOption = None,
    n_devices: Annotated[int | None, typer.Option(help="devices (default: from the log's device-mesh line)")] = None,
    skip: Annotated[int, typer.Option(help="logged steps to drop first (warm-up)")] = 1,
    validate_: ValidateOption = False,
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Plan and measured tokens/s per device of a torchtitan run, as training validation rows."""
    from xpuplan.jobs.bench import import_files

    _finish(import_files("torchtitan", files, db=db, device_id=device_id, config=config, model=model,
                         n_devices=n_devices, skip=skip), json_, validate_=validate_, db=db)


@import_app.command("csv")
@cli_command
def import_csv(
    files: Annotated[list[str], typer.Argument(metavar="FILE.csv...", help="validation CSVs (shared/validation format)")],
    db: DbOption = None,
    json_: JsonOption = False,
) -> None:
    """Published or own measurements in the validation CSV format, for `validate --local RUN`."""
    from xpuplan.jobs.bench import import_files

    out = [_report_import(p, run_id, json_) for p, run_id in import_files("csv", files, db=db)]
    if json_:
        print_json(out)


# -- db -----------------------------------------------------------------------------------------
@db_app.command("info")
@cli_command
def db_info(db: DbOption = None, json_: JsonOption = False) -> None:
    """Where the store is, its schema revision and what it holds."""
    from xpuplan.jobs.bench import store_info

    out = store_info(db)
    if json_:
        print_json(out)
        return
    console.print(table("measurement store", ["", "value"], [[k, str(v)] for k, v in out.items()]))


@db_app.command("upgrade")
@cli_command
def db_upgrade(db: DbOption = None) -> None:
    """Create the store or migrate it to the newest schema (also done on first use)."""
    from xpuplan.jobs.bench import upgrade_store

    url, revision = upgrade_store(db)
    console.print(f"{url}: schema at revision {revision}")
