"""``xpuplan bench run``: detect the device, run every case, store each result as it completes.

The run row is written first (status ``running``); each measurement is committed in its own
transaction the moment it is measured; the run is marked ``completed`` (or ``interrupted`` /
``failed``) at the end. A run killed half-way therefore keeps every finished measurement, has
no half-written row, and shows as ``aborted`` in ``bench list``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from xpuplan.bench.detect import Backend, detect_backend
from xpuplan.bench.micro import BenchCase, default_sweep, micro_cases
from xpuplan.bench.model import SmallTransformerConfig, default_config, linear_shapes, model_cases
from xpuplan.bench.timing import FULL, MODEL_FULL, MODEL_QUICK, QUICK
from xpuplan.errors import UnknownIdError, UserInputError
from xpuplan.store.engine import Store
from xpuplan.store.records import Record, RunInfo, add_measurement, finish_run, start_run

#: Benchmark families ``--only`` accepts.
FAMILIES = ("overhead", "gemm", "membw", "attention", "model")


@dataclass(frozen=True)
class BenchOptions:
    device: str = "auto"
    quick: bool = False
    device_id: str | None = None
    dtype: str | None = None
    only: frozenset[str] | None = None
    model: SmallTransformerConfig | None = None
    note: str | None = None


@dataclass
class BenchResult:
    run_id: int
    backend: Backend
    device_id: str | None
    records: list[Record] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    status: str = "completed"


def primary_dtype(backend: Backend, requested: str | None) -> str:
    """Compute precision of the model steps: bf16 on accelerators, fp32 on CPUs, unless asked."""
    if requested is not None:
        if requested not in ("fp32", "bf16", "fp16"):
            raise UserInputError(f"expected fp32, bf16 or fp16, got {requested!r}", field="--dtype")
        return requested
    return "bf16" if backend.is_accelerator else "fp32"


def resolve_device_id(backend: Backend, override: str | None) -> str | None:
    """The catalog id of the device measured: ``override`` (``--device-id``, an id or alias), else the detected one."""
    from xpuplan.catalog import load_catalog

    if override:
        try:
            return load_catalog().resolve(override)
        except UnknownIdError as exc:
            raise UserInputError(exc.message, field="--device-id", hint=exc.hint) from None
    return backend.catalog_id


def plan_cases(backend: Backend, opts: BenchOptions, dtype: str) -> tuple[list[BenchCase], SmallTransformerConfig]:
    only = set(opts.only) if opts.only else None
    if only:
        bad = sorted(only - set(FAMILIES))
        if bad:
            raise UserInputError(f"unknown benchmark(s) {', '.join(bad)}; expected {', '.join(FAMILIES)}",
                                 field="--only")
    plan = QUICK if opts.quick else FULL
    cfg = opts.model or default_config(backend, opts.quick)
    shapes = linear_shapes(cfg, cfg.train_batch * cfg.train_seq) + linear_shapes(cfg, cfg.decode_batch)
    attention = ((cfg.train_batch, cfg.heads, cfg.train_seq, cfg.head_dim),
                 (cfg.decode_batch, cfg.heads, cfg.decode_context + 1, cfg.head_dim))
    sweep = default_sweep(backend, quick=opts.quick, bench_model_gemms=shapes, bench_model_attention=attention)
    cases = micro_cases(backend, sweep, plan, primary_dtype=dtype, only=only)
    if only is None or "model" in only:
        cases += model_cases(backend, cfg, dtype, MODEL_QUICK if opts.quick else MODEL_FULL)
    return cases, cfg


def run_bench(store: Store, opts: BenchOptions, *, on_case: Callable[[int, int, str], None] | None = None,
              backend: Backend | None = None) -> BenchResult:
    """Run the benchmarks and store them; ``on_case(i, total, name)`` reports progress."""
    backend = backend or detect_backend(opts.device)
    device_id = resolve_device_id(backend, opts.device_id)
    dtype = primary_dtype(backend, opts.dtype)
    cases, cfg = plan_cases(backend, opts, dtype)
    config: dict[str, Any] = {"quick": opts.quick, "dtype": dtype, "model": cfg.to_dict(),
                              "only": sorted(opts.only) if opts.only else None, "cases": len(cases)}
    run_id = start_run(store, RunInfo(kind="bench", device_id=device_id, device_name=backend.name, backend=backend.kind,
                                      environment=backend.environment, config=config, note=opts.note))
    result = BenchResult(run_id=run_id, backend=backend, device_id=device_id)
    try:
        for i, case in enumerate(cases):
            if on_case:
                on_case(i, len(cases), case.name)
            rec = case.run()
            if rec is None:
                result.skipped.append(case.name)
                continue
            add_measurement(store, run_id, rec)
            result.records.append(rec)
    except KeyboardInterrupt:
        finish_run(store, run_id, "interrupted", note=f"stopped after {len(result.records)} measurements")
        result.status = "interrupted"
        raise
    except BaseException as exc:
        finish_run(store, run_id, "failed", note=f"{type(exc).__name__}: {exc}"[:500])
        result.status = "failed"
        raise
    note = f"skipped (not supported here): {', '.join(result.skipped)}" if result.skipped else None
    finish_run(store, run_id, "completed", note=note)
    if on_case:
        on_case(len(cases), len(cases), "done")
    return result


def headline(measurements: list[Any]) -> dict[str, Any]:
    """The figures a person looks at first, from a run's measurements (stored or fresh records)."""
    out: dict[str, Any] = {}
    best: dict[str, float] = {}
    for m in measurements:
        if m.kind == "gemm" and m.dtype:
            best[m.dtype] = max(best.get(m.dtype, 0.0), m.value)
    if best:
        out["gemm_best_tflops"] = best
    stream = {m.params.get("kernel"): m.value for m in measurements if m.kind == "membw"}
    if stream:
        out["stream_gb_per_s"] = stream
    attn = {m.params.get("phase"): max(x.value for x in measurements
                                       if x.kind == "attention" and x.params.get("phase") == m.params.get("phase"))
            for m in measurements if m.kind == "attention"}
    if attn:
        out["attention_best_tflops"] = attn
    disp = [m.value for m in measurements if m.kind == "dispatch"]
    if disp:
        out["dispatch_us_per_op"] = disp[0]
    graph = [m.value for m in measurements if m.kind == "dispatch_graph"]
    if graph:
        out["graph_dispatch_us_per_op"] = graph[0]
    for m in measurements:
        if m.kind == "model_step":
            out[f"model_{m.params.get('phase')}_step_s"] = m.value
    coll: dict[str, float] = {}
    for m in measurements:
        if m.kind == "collective":
            op = str(m.params.get("op"))
            coll[op] = max(coll.get(op, 0.0), m.value)
    if coll:
        out["collective_best_busbw_gb_per_s"] = coll
    return out
