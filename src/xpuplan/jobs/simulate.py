"""Simulate job: a scenario file (pools, routing, traffic classes) + CLI overrides -> a simulation.

The scenario is YAML (or JSON) with the fields of :class:`xpuplan.serve.sim.SimConfig`; a class's
``trace`` and ``lengths`` are file paths (relative to the scenario file) that are read here, once,
so the simulator itself reads no file; a class's ``dataset`` (a benchmark dataset, e.g. ``sharegpt``) becomes
its ``lengths``, pairs representing the dataset for the scenario model's tokenizer. ``seed`` may be given in the file; ``--seed`` wins. Errors
name the file, the line and the field; no traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from xpuplan.datafile import format_loc, line_for, parse_text, read_text
from xpuplan.errors import UserInputError
from xpuplan.jobs.requests import PositiveFloat, Request
from xpuplan.serve.sim import SimConfig, SimulationResult, simulate
from xpuplan.serve.sim.config import EmpiricalLengths, PoolConfig, TraceData
from xpuplan.serve.sim.engine import Progress
from xpuplan.serve.sim.traces import parse_lengths, parse_trace

#: Longest simulated duration accepted from the command line (s): one week.
MAX_DURATION_S = 7 * 86_400.0
#: Largest trace or length file read (bytes).
MAX_FILE_BYTES = 512 * 1024 * 1024


def _read_text(path: str | Path, field: str) -> str:
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise UserInputError(f"file is larger than {MAX_FILE_BYTES:,} bytes", field=field, file=str(p))
        return p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise UserInputError(f"no such file: {path}", field=field) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserInputError(f"cannot read {path}: {exc}", field=field) from None


def load_trace(path: str | Path, *, field: str = "trace") -> TraceData:
    """Read a trace file: CSV with a header or JSONL (``serve.sim.traces.parse_trace``)."""
    return parse_trace(_read_text(path, field), str(path))


def load_lengths(path: str | Path, *, field: str = "lengths") -> EmpiricalLengths:
    """Read an empirical length file (``serve.sim.traces.parse_lengths``)."""
    return parse_lengths(_read_text(path, field), str(path))


class SimulateRequest(Request):
    """Inputs of ``xpuplan simulate``: the scenario file and the overrides."""

    scenario: Annotated[str, Field(min_length=1, max_length=4096)] | dict[str, Any] = Field(
        description="scenario file, or its content as a mapping (no file is read then)")
    duration: Annotated[float, Field(gt=0, le=MAX_DURATION_S, allow_inf_nan=False)] | None = None
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] | None = None
    drain: Annotated[float, Field(ge=0, le=MAX_DURATION_S, allow_inf_nan=False)] | None = None
    price_per_device_hour: PositiveFloat | None = None


def _dataset_lengths(c: dict[str, Any], model: Any, field: str, file: str, lines: dict[Any, int],
                     loc: tuple[Any, ...]) -> None:
    """A class's ``dataset: NAME`` as its ``lengths``: pairs representing the dataset's distributions for the
    scenario model's tokenizer (``workload.serving.dataset_request_lengths``); refused beside ``lengths``,
    ``input_len`` or ``output_len``."""
    from xpuplan.models import get_model
    from xpuplan.workload.datasets import dataset_lengths
    from xpuplan.workload.serving import dataset_request_lengths

    name = c.pop("dataset")
    clash = [k for k in ("lengths", "input_len", "output_len", "trace") if k in c]
    if not isinstance(name, str) or not name.strip():
        raise UserInputError("expected a dataset name (sharegpt)", field=field, file=file, line=line_for(loc, lines))
    if clash:
        raise UserInputError(f"give either dataset or {', '.join(clash)}, not both", field=field, file=file,
                             line=line_for(loc, lines))
    try:
        vocab = get_model(str(model)).vocab_size
    except UserInputError:
        vocab = None  # the model's own error comes from the config's validation
    try:
        ds = dataset_lengths(name, vocab, field=field)
    except UserInputError as exc:
        raise UserInputError(exc.message, field=field, file=file, line=line_for(loc, lines)) from None
    ins, outs = dataset_request_lengths(ds)
    c["lengths"] = {"input_len": ins, "output_len": outs, "source": ds.describe()}


def _resolve_files(data: dict[str, Any], base: Path | None, file: str, lines: dict[Any, int]) -> None:
    classes = data.get("classes")
    if not isinstance(classes, list):
        return
    for i, c in enumerate(classes):
        if not isinstance(c, dict):
            continue
        if "dataset" in c:
            _dataset_lengths(c, data.get("model"), f"classes[{i}].dataset", file, lines, ("classes", i, "dataset"))
        for key, loader in (("trace", load_trace), ("lengths", load_lengths)):
            value = c.get(key)
            if value is None or isinstance(value, dict):
                continue
            if not isinstance(value, str):
                raise UserInputError("expected a file path", field=f"classes[{i}].{key}", file=file,
                                     line=line_for(("classes", i, key), lines))
            if base is None:  # a scenario given as data reads no file
                raise UserInputError("give the content inline (an object), not a file name", field=f"classes[{i}].{key}",
                                     file=file)
            p = Path(value)
            if not p.is_absolute():
                p = base / p
            c[key] = loader(p, field=f"classes[{i}].{key}").model_dump()
            if key == "trace" and "arrival" not in c:
                c["arrival"] = "trace"


def load_scenario(path: str | Path | Mapping[str, Any]) -> tuple[SimConfig, int | None]:
    """The scenario file as a :class:`SimConfig` (trace and length files loaded) and its ``seed``.

    A mapping (the HTTP API's JSON body) is the file's content: no file is read, so its traces and
    length distributions must be given inline (objects), not as file names."""
    if isinstance(path, Mapping):
        return _config(dict(path), "<scenario>", {}, None)
    file = str(path)
    data, lines = parse_text(read_text(path), file)
    if not isinstance(data, dict):
        raise UserInputError("expected a mapping with pools, classes and routing", file=file, line=1)
    return _config(dict(data), file, lines, Path(path).parent)


def _config(data: dict[str, Any], file: str, lines: dict[Any, int], base: Path | None) -> tuple[SimConfig, int | None]:
    seed = data.pop("seed", None)
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise UserInputError(f"seed must be a non-negative integer (got {seed!r})", field="seed", file=file,
                             line=line_for(("seed",), lines))
    _resolve_files(data, base, file, lines)
    cfg = validate_config(data, file, lines)
    _check_length_caps(cfg, file, lines)
    _check_engines(cfg, file, lines)
    return cfg, seed


def _check_engines(cfg: SimConfig, file: str, lines: dict[Any, int]) -> None:
    """Each pool's engine against its hardware's software stack (``serve.replica.engine_stack_issue``, as ``infer
    estimate --engine`` is checked). An unknown engine or hardware is left to the simulator's own error."""
    from xpuplan.catalog import load_catalog
    from xpuplan.serve.constants import engine_profile
    from xpuplan.serve.replica import engine_stack_issue

    catalog = load_catalog()
    for i, p in enumerate(cfg.pools):
        if p.engine is None or not p.engine.strip():
            continue
        try:
            dev, prof = catalog.get(p.hardware), engine_profile(p.engine)
        except UserInputError:
            continue
        why = engine_stack_issue(prof, dev, catalog)
        if why is not None:
            loc = ("pools", i, "engine")
            raise UserInputError(why, field=format_loc(loc), file=file, line=line_for(loc, lines))


def _class_pools(cfg: SimConfig, i: int) -> list[PoolConfig]:
    """Pools requests of class ``i`` may reach (``serve.sim.routing``): its rule's pool, else the default, under
    ``class_based`` routing; primary and secondary under ``spill_over``; every entry pool otherwise; with the decode
    pools those hand their requests to."""
    by_name = {p.name: p for p in cfg.pools}
    r = cfg.routing
    if r.policy == "class_based":
        names = [r.rules.get(cfg.classes[i].name, r.default)]
    elif r.policy == "spill_over":
        names = [r.primary, r.secondary]
    else:
        decode = {p.decode_pool for p in cfg.pools}
        names = [p.name for p in cfg.pools if p.name not in decode]
    pools = [by_name[n] for n in names if n in by_name]
    return pools + [by_name[p.decode_pool] for p in pools if p.decode_pool in by_name]


def _check_length_caps(cfg: SimConfig, file: str, lines: dict[Any, int]) -> None:
    """Each class's length caps (``max``) against the context of the model of every pool it may reach, as ``infer
    estimate`` checks ``--in``/``--out`` (``jobs.serve.length_cap_issue``; the simulator itself refuses a class whose
    median request exceeds it). An unknown model is left to the simulator's own error."""
    from xpuplan.jobs.serve import length_cap_issue
    from xpuplan.models import get_model

    for i, c in enumerate(cfg.classes):
        for p in _class_pools(cfg, i):
            try:
                m = get_model(str(p.model or cfg.model))
            except UserInputError:
                continue
            issue = length_cap_issue(m, c.input_len, c.output_len)
            if issue is not None:
                loc = ("classes", i, *issue[0])
                raise UserInputError(f"{issue[1]} (pool {p.name!r})", field=format_loc(loc), file=file,
                                     line=line_for(loc, lines))


def validate_config(data: Any, file: str | None = None, lines: dict[Any, int] | None = None) -> SimConfig:
    """``data`` as a :class:`SimConfig`; the first problem -> UserInputError (file, line, field)."""
    try:
        return SimConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, UserInputError):
            if cause.file is None and file is not None:
                cause.file = file
            raise UserInputError(cause.message, field=cause.field, file=cause.file, hint=cause.hint) from None
        loc = tuple(err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        value = err.get("input")
        if err["type"] not in ("missing", "extra_forbidden") and not isinstance(value, dict | list):
            msg += f" (got {value!r})"
        raise UserInputError(msg, field=format_loc(loc) or None, file=file,
                             line=line_for(loc, lines) if lines else None) from None


def run_simulate(req: SimulateRequest, *, progress: Progress | None = None) -> SimulationResult:
    """Load the scenario, apply the overrides, simulate."""
    cfg, file_seed = load_scenario(req.scenario)
    changes: dict[str, Any] = {}
    if req.duration is not None:
        changes["duration_s"] = req.duration
    if req.drain is not None:
        changes["drain_s"] = req.drain
    if req.price_per_device_hour is not None:
        changes["pools"] = [p.model_copy(update={"price_per_device_hour": req.price_per_device_hour})
                            for p in cfg.pools]
    if changes:
        cfg = validate_config({**cfg.model_dump(), **{k: v if k != "pools" else [p.model_dump() for p in v]
                                                      for k, v in changes.items()}})
    seed = req.seed if req.seed is not None else (file_seed or 0)
    return simulate(cfg, seed=seed, progress=progress)
