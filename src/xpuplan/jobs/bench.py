"""Measurement jobs: benchmark this machine, browse stored runs, calibrate, import other tools' logs,
inspect the store. The only layer that reaches ``xpuplan.bench`` (torch, an optional extra) and the
store for these commands; front ends render what these return."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from xpuplan.errors import UserInputError, echo

#: Import formats ``xpuplan import`` understands -> parser in ``xpuplan.bench.imports``.
IMPORT_PARSERS = {"nccl-tests": "parse_nccl_tests", "hccl-test": "parse_hccl_test", "vllm": "parse_vllm_json",
                  "sglang": "parse_sglang_jsonl", "trtllm-bench": "parse_trtllm_report",
                  "mlperf-inference": "parse_mlperf_inference", "mlperf-training": "parse_mlperf_training",
                  "megatron": "parse_megatron_log", "torchtitan": "parse_torchtitan_log",
                  "csv": "parse_validation_csv"}
#: Serving imports whose layout and precision are the flags ``--tp``, ``--pp``, ``--precision`` (a
#: trtllm-bench report states its own).
FLAG_LAYOUT_IMPORTS = ("vllm", "sglang", "mlperf-inference")


def open_store(db: str | None) -> Any:
    """The measurement store at ``db`` (SQLAlchemy URL or SQLite file), else $XPUPLAN_DB_URL or the
    user's data directory."""
    from xpuplan.store.engine import open_store as _open

    return _open(db)


@dataclass
class BenchRun:
    """A finished (or interrupted) ``bench run``: the runner's result, the backend and the store URL."""

    result: Any
    backend: Any
    store_url: str
    headline: dict[str, Any]
    notes: tuple[str, ...] = ()


#: Said by ``bench run`` when the CPU path is the only one that ran.
CPU_ONLY_NOTE = ("only the CPU path ran: no CUDA/ROCm, Ascend (torch_npu) or Cambricon (torch_mlu) device is visible to "
                 "this PyTorch. Those paths are written to their vendors' APIs but were not exercised on this machine; "
                 "these measurements describe this CPU, not an accelerator.")


def bench_notes(backend_kind: str, requested: str) -> tuple[str, ...]:
    """Notes a ``bench run`` prints with its results (the CPU-only note when ``auto`` fell back to the CPU)."""
    if backend_kind == "cpu":
        return (CPU_ONLY_NOTE if requested == "auto" else
                "--device cpu: only the CPU path ran; the accelerator paths were not exercised",)
    return ()


def run_benchmarks(*, device: str, quick: bool, device_id: str | None, dtype: str | None, only: str | None,
                   note: str | None, db: str | None,
                   on_case: Callable[[int, int, str], None] | None = None) -> BenchRun:
    """Run the microbenchmarks; every measurement is stored as soon as it is made."""
    from xpuplan.bench.detect import detect_backend
    from xpuplan.bench.runner import BenchOptions, headline, run_bench

    only_set = frozenset(x.strip() for x in only.split(",") if x.strip()) if only else None
    opts = BenchOptions(device=device, quick=quick, device_id=device_id, dtype=dtype, only=only_set, note=note)
    backend = detect_backend(device)
    store = open_store(db)
    result = run_bench(store, opts, on_case=on_case, backend=backend)
    return BenchRun(result=result, backend=backend, store_url=store.display_url, headline=headline(result.records),
                    notes=bench_notes(backend.kind, device))


def list_stored_runs(*, kind: str | None, device_id: str | None, limit: int, db: str | None) -> tuple[list[dict[str, Any]], str]:
    """Stored runs, newest first, each with its effective status and measurement count; and the store URL."""
    from xpuplan.store.models import RUN_KINDS
    from xpuplan.store.records import count_measurements, effective_status, list_runs

    _check_kind(kind, RUN_KINDS)
    if limit <= 0:
        raise UserInputError(f"must be positive (got {limit})", field="--limit")
    store = open_store(db)
    runs = list_runs(store, kind=kind, device_id=device_id, limit=limit)
    counts = count_measurements(store, [r.id for r in runs])
    out = [r.summary() | {"status": effective_status(r), "measurements": counts.get(r.id, 0)} for r in runs]
    return out, store.display_url


#: Kinds of measurement ``bench`` and ``import`` store (``bench show --kind``).
MEASUREMENT_KINDS = ("gemm", "membw", "attention", "overhead", "host_sync", "dispatch", "dispatch_graph", "model_step",
                     "collective", "serving", "training", "validation_row")


def _check_kind(kind: str | None, known: Iterable[str]) -> None:
    """``--kind``: none, or one of ``known``."""
    known = tuple(known)
    if kind and kind not in known:
        raise UserInputError(f"expected one of {', '.join(known)}, got {echo(kind)}", field="--kind")


@dataclass
class StoredRun:
    """One stored run with its measurements."""

    run: Any
    status: str
    measurements: list[Any]
    headline: dict[str, Any]


def show_stored_run(run: str, *, kind: str | None, db: str | None) -> StoredRun:
    """Run ``run`` (an id or 'latest') and its measurements (of ``kind`` only, when given)."""
    from xpuplan.bench.runner import headline
    from xpuplan.store.records import effective_status, resolve_run, run_measurements

    store = open_store(db)
    r = resolve_run(store, run)
    meas = run_measurements(store, r.id)
    if kind:  # a kind this version does not list is accepted when the run holds it
        _check_kind(kind, dict.fromkeys([*MEASUREMENT_KINDS, *(m.kind for m in meas)]))
        meas = [m for m in meas if m.kind == kind]
    return StoredRun(run=r, status=effective_status(r), measurements=meas, headline=headline(meas))


def collectives_command(*, nproc_per_node: int, quick: bool, backend: str, device_id: str | None,
                        db: str | None) -> list[str]:
    """The ``torchrun`` command line that measures collectives on this node (checked before anything is
    launched: torch present, a backend this machine can run, at least two processes and no more than
    its devices, a catalog device id)."""
    from xpuplan.bench import require_torch
    from xpuplan.bench.collectives import catalog_device_id, device_kind

    torch = require_torch()
    kind = device_kind(backend, torch)
    if nproc_per_node < 2:
        raise UserInputError(f"collectives need at least 2 processes (got {nproc_per_node})",
                             field="--nproc-per-node")
    if kind != "cpu":
        available = int(getattr(torch, kind).device_count())
        if nproc_per_node > available:
            raise UserInputError(f"{nproc_per_node} processes but {available} {kind} device(s) on this node: each "
                                 "process needs its own", field="--nproc-per-node")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc_per_node}",
           "-m", "xpuplan.bench.collectives", "--backend", backend]
    if quick:
        cmd.append("--quick")
    if device_id:
        cmd += ["--device-id", catalog_device_id(device_id)]
    if db:
        cmd += ["--db", db]
    return cmd


def calibrate_device(*, device: str | None, runs: list[str], dry_run: bool, db: str | None) -> Any:
    """Fit the efficiency parameters of ``device`` to stored runs; save the profile unless ``dry_run``."""
    from xpuplan.calibrate.fit import calibrate_from_store

    return calibrate_from_store(open_store(db), device, runs, save=not dry_run)


def import_files(fmt: str, files: list[str], *, db: str | None, **options: Any) -> list[tuple[Any, int]]:
    """Parse every file first (nothing is stored when one is malformed), then store each as a run.
    Returns (parsed, run id) per file."""
    from xpuplan.bench import imports

    if fmt not in IMPORT_PARSERS:
        raise UserInputError(f"expected one of {', '.join(IMPORT_PARSERS)}, got {fmt!r}", field="format")
    parse = getattr(imports, IMPORT_PARSERS[fmt])
    if fmt in FLAG_LAYOUT_IMPORTS:
        _check_precision(options.get("precision"))
        _check_kv_dtype(options.get("kv_dtype"))
    parsed = [parse(f, **options) for f in files]
    if fmt in FLAG_LAYOUT_IMPORTS:
        for p in parsed:
            _check_model_layout(p)
    store = open_store(db)
    return [(p, imports.store_import(store, p)) for p in parsed]


def _check_precision(precision: str | None) -> None:
    """``--precision``: a serving precision scheme (bf16, fp8, int4-wo ...) or one of its aliases."""
    from xpuplan.serve.precision import normalise_scheme

    if precision is not None:
        normalise_scheme(precision, field="--precision")


def _check_kv_dtype(kv_dtype: str | None) -> None:
    """``--kv-dtype``: a KV-cache dtype the planner knows (bf16, fp16, fp8, int8; auto and bfloat16 as the
    replica's precision resolves them, ``serve.precision.resolve_precision``)."""
    from xpuplan.serve.precision import KV_DTYPES

    if kv_dtype is not None and kv_dtype.strip().casefold() not in (*KV_DTYPES, "auto", "bfloat16"):
        raise UserInputError(f"unknown KV-cache dtype {echo(kv_dtype)}; choose one of {', '.join(KV_DTYPES)}",
                             field="--kv-dtype")


def _check_model_layout(parsed: Any) -> None:
    """``--tp``/``--pp`` suit the model of each imported row (tp divides its heads ...), where the row
    names a model the planner knows; a row without one is checked only when it is predicted."""
    from xpuplan.models import get_model
    from xpuplan.serve.validity import layout_issues

    seen: set[tuple[str, int, int]] = set()
    for r in parsed.records:
        row = r.params.get("row") if r.kind == "validation_row" else None
        if not row or not row.get("model"):
            continue
        key = (str(row["model"]), int(row["tp"]), int(row["pp"]))
        if key in seen:
            continue
        seen.add(key)
        issues = layout_issues(get_model(key[0]), key[1], key[2], 1)
        if issues:
            raise UserInputError(f"{issues[0].message} of model {key[0]}", field=f"--{issues[0].field}")


def validate_imported(run_id: int, db: str | None) -> Any:
    """``validate --local RUN`` on a run just imported: (run, ValidationReport)."""
    from xpuplan.bench.local_validation import validate_run

    return validate_run(open_store(db), str(run_id))


def store_info(db: str | None) -> dict[str, Any]:
    """Where the store is, its schema revision and how many rows each table holds."""
    from sqlalchemy import func, select

    from xpuplan.store.engine import current_revision, head_revision
    from xpuplan.store.models import Calibration, Measurement, Run, Scenario

    store = open_store(db)
    with store.session() as s:
        counts = {name: int(s.scalar(select(func.count()).select_from(model)) or 0)
                  for name, model in (("runs", Run), ("measurements", Measurement), ("calibrations", Calibration),
                                      ("scenarios", Scenario))}
    return {"url": store.display_url, "revision": current_revision(store.engine), "head": head_revision(), **counts}


def upgrade_store(db: str | None) -> tuple[str, str | None]:
    """Create or migrate the store (opening it does); its URL and schema revision."""
    from xpuplan.store.engine import current_revision

    store = open_store(db)
    return store.display_url, current_revision(store.engine)
