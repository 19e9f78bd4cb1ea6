"""Import measurements people already have into the store (docs/measurement.md).

Collectives, for ``xpuplan calibrate`` (one ``collective`` measurement per message size):

- nccl-tests and rccl-tests logs (``all_reduce_perf``, ``all_gather_perf`` ...), with the devices,
  hosts and ranks the log lists;
- Ascend ``hccl_test`` logs (``all_reduce_test`` ...: ``data_size(Bytes)``, ``aveg_time(us)``,
  ``alg_bandwidth(GB/s)``, ``check_result`` columns).

Serving benchmarks, as validation rows (throughput, mean TTFT/TPOT/E2E latency) that
``xpuplan validate --local RUN`` predicts, plus their percentiles:

- vLLM ``benchmark_serving`` / ``vllm bench serve --save-result`` JSON;
- SGLang ``bench_serving --output-file`` JSONL (one JSON object per line, one row set per line);
- TensorRT-LLM ``trtllm-bench throughput|latency --report_json`` reports;
- MLPerf Inference LoadGen ``mlperf_log_summary.txt`` (Offline, Server, SingleStream).

Training runs, as validation rows (step time, tokens/s per device) with the plan they ran:

- Megatron-LM logs (the ``arguments`` dump and the ``iteration ... | elapsed time per iteration``
  lines), optionally with a YAML of Megatron arguments;
- torchtitan logs (``step: ... tps: ...``) with the job's TOML config;
- MLPerf Training ``result_*.txt`` (``:::MLLOG`` lines): time to train, stored as a measurement.

And validation CSVs in the format of ``shared/validation/README.md``: every row, so
``validate --local RUN`` reproduces ``validate FILE.csv`` from the store.

Parsing is pure (no database): each ``parse_*`` returns a :class:`ParsedImport`;
:func:`store_import` writes one, all or nothing. A malformed file raises
:class:`~xpuplan.errors.UserInputError` naming file, line and field.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpuplan import units
from xpuplan.calibrate.fit import bus_factor
from xpuplan.errors import UnknownIdError, UserInputError, echo
from xpuplan.store.records import Record, RunInfo

#: nccl-tests binary / op names -> the collective names xpuplan uses.
NCCL_OPS = {
    "all_reduce": "all_reduce", "allreduce": "all_reduce",
    "all_gather": "all_gather", "allgather": "all_gather",
    "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all", "all_to_all": "all_to_all",
    "sendrecv": "send_recv", "send_recv": "send_recv",
    "broadcast": "broadcast", "reduce": "reduce", "gather": "gather", "scatter": "scatter", "hypercube": "hypercube",
}

_RANK_LINE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(?P<host>\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(?P<name>.+?)\s*$"
)
_TEST_START = re.compile(r"Collective test starting:\s*(?P<op>\w+?)(?:_perf)?\b")
_HEADER_OPTS = re.compile(r"^#\s*nThread\s+(?P<nthread>\d+)\s+nGpus\s+(?P<ngpus>\d+)")
_AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<v>[\d.]+)")


@dataclass
class ParsedImport:
    """What one imported file holds: the run's description and its measurements."""

    info: RunInfo
    records: list[Record] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _op_from_name(text: str) -> str | None:
    stem = Path(text).name.lower()
    for key in sorted(NCCL_OPS, key=len, reverse=True):
        if re.search(rf"(^|[^a-z]){key}([^a-z]|$)", stem):
            return NCCL_OPS[key]
    return None


def _device_id(name: str | None, override: str | None, kind: str, file: str) -> str:
    from xpuplan.bench.detect import catalog_id_for
    from xpuplan.catalog import load_catalog

    if override:
        try:
            return load_catalog().resolve(override)
        except UnknownIdError as exc:
            raise UserInputError(exc.message, field="--device-id", hint=exc.hint) from None
    dev = catalog_id_for(name, kind) if name else None
    if dev is None:
        what = f"device {name!r} is not in the catalog" if name else "the file does not name its device"
        raise UserInputError(f"{what}; pass --device-id", file=file, field="device_id")
    return dev


def parse_nccl_tests(path: str | Path, *, op: str | None = None, device_id: str | None = None) -> ParsedImport:
    """Parse an nccl-tests (or rccl-tests) log; the collective comes from ``op``, a
    ``Collective test starting`` line, or the file name."""
    file = str(path)
    text = _read(path)
    current_op = NCCL_OPS.get(op.lower(), None) if op else None
    if op and current_op is None:
        raise UserInputError(f"unknown collective {op!r}; expected one of {', '.join(sorted(set(NCCL_OPS)))}",
                             field="op")
    current_op = current_op or _op_from_name(file)
    columns: list[str] | None = None
    ranks: dict[int, tuple[str, str]] = {}
    rows: list[tuple[int, str, dict[str, str]]] = []
    avg_busbw: float | None = None
    nthread_ngpus: tuple[int, int] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if m := _RANK_LINE.match(line):
                ranks[int(m["rank"])] = (m["host"], m["name"])
            elif m := _TEST_START.search(line):
                current_op = NCCL_OPS.get(m["op"].lower(), current_op)
            elif m := _HEADER_OPTS.match(line):
                nthread_ngpus = (int(m["nthread"]), int(m["ngpus"]))
            elif m := _AVG_BUSBW.match(line):
                avg_busbw = float(m["v"])
            else:
                tokens = line.lstrip("#").split()
                if tokens[:2] == ["size", "count"]:
                    columns = tokens
            continue
        if not line[0].isdigit():
            continue  # NCCL INFO/WARN lines and other chatter
        if columns is None:
            raise UserInputError("result row before the column header ('#  size  count  type ...')",
                                 file=file, line=lineno)
        tokens = line.split()
        if len(tokens) != len(columns):
            raise UserInputError(f"expected {len(columns)} columns ({' '.join(columns)}), found {len(tokens)}",
                                 file=file, line=lineno)
        if current_op is None:
            raise UserInputError("cannot tell which collective this log measured; pass --op (e.g. all_reduce)",
                                 file=file, field="op")
        values: dict[str, str] = {}
        for name, tok in zip(columns, tokens, strict=True):
            values.setdefault(name, tok)  # first occurrence: the out-of-place figures
        rows.append((lineno, current_op, values))
    if not rows:
        raise UserInputError("no result rows found (is this an nccl-tests log?)", file=file)
    n_ranks = len(ranks) or (nthread_ngpus[0] * nthread_ngpus[1] if nthread_ngpus else 0)
    if n_ranks < 2:
        raise UserInputError("cannot tell the number of ranks (no '#  Rank N ... device' lines)", file=file)
    hosts = sorted({h for h, _ in ranks.values()}) or ["?"]
    nodes = len(hosts)
    local = max(1, n_ranks // nodes)
    names = sorted({n for _, n in ranks.values()})
    dev = _device_id(names[0] if names else None, device_id, "GPU", file)
    scope = "scale_up" if nodes == 1 else "scale_out"
    records = []
    for lineno, op_name, v in rows:
        try:
            size = float(v["size"])
            time_us = float(v["time"])
        except (KeyError, ValueError):
            raise UserInputError(f"not a number: size {v.get('size')!r}, time {v.get('time')!r}",
                                 file=file, line=lineno, field="time") from None
        for key in ("size", "time", "algbw", "busbw"):
            if _is_number(v.get(key)):
                _measured(float(v[key]), v[key], file=file, line=lineno, field=key, zero_ok=True)
        if time_us <= 0 or size <= 0:
            continue  # nccl-tests prints 0 B rows for some ops; nothing to fit
        t = time_us * units.US
        busbw = float(v["busbw"]) if _is_number(v.get("busbw")) else size / t * bus_factor(op_name, n_ranks) / units.GB_PER_S
        params = {"op": op_name, "size_bytes": size, "n_ranks": n_ranks, "local_ranks": local, "nodes": nodes,
                  "scope": scope, "dtype": v.get("type"), "redop": v.get("redop"),
                  "algbw_gb_per_s": float(v["algbw"]) if _is_number(v.get("algbw")) else None,
                  "busbw_gb_per_s": busbw, "source_line": lineno}
        records.append(Record(kind="collective", name=f"{op_name} {int(size)} B", dtype=_nccl_dtype(v.get("type")),
                              metric="busbw_gb_per_s", value=busbw, unit="GB/s", time_s=t, bytes=size, params=params))
    info = RunInfo(kind="import-nccl-tests", device_id=dev, device_name=names[0] if names else None, backend="nccl",
                   n_devices=n_ranks, source=str(Path(file).resolve()),
                   config={"ops": sorted({r.params["op"] for r in records}), "n_ranks": n_ranks, "hosts": hosts,
                           "nodes": nodes, "local_ranks": local, "scope": scope, "avg_busbw_gb_per_s": avg_busbw})
    return ParsedImport(info, records)


def _measured(value: float, given: object, *, file: str, line: int | None, field: str,
              zero_ok: bool = False) -> float:
    """``value``, a figure read from ``file``: finite and positive (or 0 with ``zero_ok``), else
    UserInputError naming the file, line and field and showing the value ``given`` as the file has it."""
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        what = "a finite number, 0 or more" if zero_ok else "a positive finite number"
        raise UserInputError(f"must be {what}, got {echo(given)}", file=file, line=line, field=field)
    return value


def _is_number(text: str | None) -> bool:
    if text is None:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def _nccl_dtype(name: str | None) -> str | None:
    return {"float": "fp32", "half": "fp16", "bfloat16": "bf16", "double": "fp64", "int8": "int8",
            "uint8": "int8", "int32": "int32", "float8e4m3": "fp8"}.get((name or "").lower(), name)


def _read(path: str | Path) -> str:
    from xpuplan.datafile import read_text

    return read_text(path)


# -- vLLM benchmark_serving ---------------------------------------------------------------------
#: vLLM result keys -> (validation metric, unit). Means only: the validation metrics are means.
VLLM_VALIDATION_METRICS: dict[str, tuple[str, str]] = {
    "output_throughput": ("output_tokens_per_s", "tok/s"),
    "total_token_throughput": ("total_tokens_per_s", "tok/s"),
    "request_throughput": ("requests_per_s", "req/s"),
    "mean_ttft_ms": ("ttft_ms", "ms"),
    "mean_tpot_ms": ("tpot_ms", "ms"),
    "mean_e2el_ms": ("e2e_latency_ms", "ms"),
}
_VLLM_PERCENTILE = re.compile(r"^(?P<stat>median|std|p\d+(?:\.\d+)?)_(?P<metric>ttft|tpot|itl|e2el)_ms$")
VLLM_REQUIRED = ("completed", "duration", "output_throughput")
#: Numbers of a vLLM result that must be positive; the other counts and the mean latencies may be 0
#: (vLLM writes 0 for a latency it did not measure, e.g. TPOT when every request made one token).
VLLM_POSITIVE = ("duration", "output_throughput", "total_token_throughput", "request_throughput")


def parse_vllm_json(path: str | Path, *, device_id: str | None, n_devices: int | None = None, tp: int = 1,
                    precision: str = "bf16", model: str | None = None) -> ParsedImport:
    """Parse a ``benchmark_serving.py --save-result`` JSON (vLLM, or the same format from SGLang's
    ``bench_serving``). The hardware is not in the file: ``device_id`` is required."""
    file = str(path)
    text = _read(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserInputError(f"malformed JSON: {exc.msg}", file=file, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise UserInputError("expected a JSON object (benchmark_serving --save-result output)", file=file)
    missing = [k for k in VLLM_REQUIRED if k not in data]
    if missing:
        raise UserInputError(f"missing key(s) {', '.join(missing)}: not a benchmark_serving result", file=file,
                             field=missing[0])
    if not device_id:
        raise UserInputError("the result file does not say which hardware ran it; pass --device-id", file=file,
                             field="device_id")
    dev = _device_id(None, device_id, "GPU", file)
    n_dev = _check_layout(tp, 1, n_devices)
    for key in (*VLLM_VALIDATION_METRICS, "completed", "duration", "total_input_tokens", "total_output_tokens",
                "max_concurrency"):
        _number(data, key, file, text=text, positive=key in VLLM_POSITIVE)
    completed = int(data["completed"])
    if completed <= 0:
        raise UserInputError("no completed requests", file=file, field="completed", line=_json_line(text, "completed"))
    model_id = str(model or data.get("model_id") or "")
    preset, model_ref = _resolve_model(model_id)
    rate = data.get("request_rate", "inf")
    if rate not in (None, "inf"):
        _number(data, "request_rate", file, text=text, positive=True, infinite_ok=True)
    concurrency = data.get("max_concurrency")
    finite_rate = rate not in (None, "inf") and float(rate) != float("inf")
    # all requests at once: offline; one at a time: latency; an arrival process or a bounded number
    # in flight: server (the concurrency column says which)
    if finite_rate or (concurrency is not None and concurrency > 1):
        scenario = "server"
    else:
        scenario = "latency" if concurrency == 1 else "offline"
    input_len = round(float(data.get("total_input_tokens", 0)) / completed) if data.get("total_input_tokens") else ""
    output_len = round(float(data.get("total_output_tokens", 0)) / completed) if data.get("total_output_tokens") else ""
    stem = Path(file).stem
    base_row: dict[str, Any] = {
        "kind": "infer", "source": f"vLLM benchmark_serving result {Path(file).name} ({data.get('date', 'undated')})",
        "trust": "B", "model": model_ref, "hardware": dev, "n_devices": n_dev,
        "precision": precision, "engine": f"{data.get('backend') or 'vllm'}", "weight_dtype": precision,
        "kv_dtype": _kv_from_precision(precision), "tp": tp, "pp": 1, "input_len": input_len, "output_len": output_len,
        "concurrency": concurrency if concurrency is not None else "", "scenario": scenario,
        "derived": "", "notes": "imported; input/output lengths are means over the completed requests",
    }
    if preset is not None:
        base_row.update(_arch_columns(preset))
    records: list[Record] = []
    for key, (metric, unit) in VLLM_VALIDATION_METRICS.items():
        value = data.get(key)
        if value is None or value == 0:
            continue  # not in the file, or not measured (0)
        row = dict(base_row, id=f"{stem}:{metric}", metric=metric, value=value, printed=f"{key} = {value}")
        records.append(Record(kind="validation_row", name=f"{metric}", metric=metric, value=float(value), unit=unit,
                              params={"row": row, "vllm_key": key}))
    for key, value in data.items():
        m = _VLLM_PERCENTILE.match(key)
        if m and isinstance(value, int | float) and not isinstance(value, bool):
            _measured(float(value), value, file=file, line=_json_line(text, key), field=key, zero_ok=True)
            records.append(Record(kind="serving", name=key, metric=key, value=float(value), unit="ms",
                                  params={"statistic": m["stat"], "metric": m["metric"]}))
    info = RunInfo(kind="import-vllm", device_id=dev, backend=str(data.get("backend") or "vllm"), n_devices=n_dev,
                   source=str(Path(file).resolve()),
                   config={"model_id": model_id, "preset": preset.id if preset else None, "tp": tp,
                           "precision": precision, "num_prompts": data.get("num_prompts"), "completed": completed,
                           "request_rate": rate, "max_concurrency": concurrency, "duration_s": data.get("duration"),
                           "scenario": scenario})
    warnings = [] if preset else [f"model {model_id!r} is not a preset: rows cannot be predicted until --model names one"]
    return ParsedImport(info, records, warnings)


def _json_line(text: str, key: str) -> int | None:
    m = re.search(rf'"{re.escape(key)}"\s*:', text)
    return text.count("\n", 0, m.start()) + 1 if m else None


def _preset_for(model_id: str) -> Any:
    from xpuplan.models import get_model

    for candidate in (model_id, model_id.split("/")[-1]):
        if not candidate:
            continue
        try:
            return get_model(candidate)
        except (UserInputError, KeyError, ValueError):
            continue
    return None


def _arch_columns(m: Any) -> dict[str, Any]:
    cols: dict[str, Any] = {"layers": m.n_layers, "d_model": m.d_model, "heads": m.n_heads, "kv_heads": m.kv_heads,
                            "head_dim": m.hdim, "ffn": m.ffn_dim, "vocab": m.vocab_size,
                            "gated_mlp": 1 if m.mlp == "gated" else 0}
    if m.moe is not None:
        cols.update({"moe_experts": m.moe.n_routed_experts, "moe_top_k": m.moe.top_k, "moe_ffn": m.moe.expert_ffn_dim,
                     "moe_shared_experts": m.moe.n_shared_experts, "moe_dense_layers": m.moe.n_dense_layers})
    return cols



def _resolve_model(model_id: str) -> tuple[Any, str]:
    """(ModelArch or None, what a validation row's ``model`` column should hold): a preset's id, or
    the absolute path of a local config.json / model directory."""
    arch = _preset_for(model_id)
    if arch is None:
        return None, ""
    p = Path(model_id)
    if model_id and (p.is_dir() or p.suffix in (".json", ".yaml", ".yml")) and p.exists():
        return arch, str(p.resolve())
    return arch, arch.id


def _load_json(text: str, file: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserInputError(f"malformed JSON: {exc.msg}", file=file, line=exc.lineno) from None
    if not isinstance(data, dict):
        raise UserInputError(f"expected a JSON object ({what})", file=file, line=1)
    return data


def _number(data: dict[str, Any], key: str, file: str, *, line: int | None = None, text: str | None = None,
            required: bool = False, path: str | None = None, positive: bool = False,
            infinite_ok: bool = False) -> float | None:
    """``data[key]`` as a finite float, 0 or more (above 0 when ``positive``; infinity allowed with
    ``infinite_ok``), None when absent/null unless ``required``; errors name the key (``path``: its
    dotted path) and its line."""
    shown = path or key
    value = data.get(key)
    where = line if line is not None else (_json_line(text, key) if text else None)
    if value is None:
        if required:
            raise UserInputError(f"missing key {shown!r}", file=file, field=shown, line=where)
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserInputError(f"not a number: {value!r}", file=file, field=shown, line=where)
    if infinite_ok and value == math.inf:
        return math.inf
    return _measured(float(value), value, file=file, line=where, field=shown, zero_ok=not positive)


def _require_device(device_id: str | None, file: str, kind: str = "GPU") -> str:
    if not device_id:
        raise UserInputError("the file does not say which hardware ran it; pass --device-id", file=file,
                             field="device_id")
    return _device_id(None, device_id, kind, file)


def _check_layout(tp: int, pp: int, n_devices: int | None) -> int:
    """The devices of a serving run (``--n-devices``, default tp·pp): whole replicas of tp·pp devices."""
    for name, v in (("--tp", tp), ("--pp", pp), ("--n-devices", n_devices)):
        if v is not None and v < 1:
            raise UserInputError(f"must be a positive integer (got {v})", field=name)
    n_dev = n_devices or tp * pp
    if n_dev % (tp * pp):
        replica = f"tp·pp = {tp}·{pp} = {tp * pp}" if pp > 1 else f"tp = {tp}"
        raise UserInputError(f"{n_dev} device(s) are not a whole number of replicas of {replica} devices",
                             field="--n-devices")
    return n_dev


def _scenario(rate: Any, concurrency: float | None) -> str:
    """All requests at once: offline; one at a time: latency; an arrival process or a bounded number
    in flight: server."""
    finite_rate = rate not in (None, "inf") and isinstance(rate, int | float) and rate != float("inf")
    if finite_rate or (concurrency is not None and concurrency > 1):
        return "server"
    return "latency" if concurrency == 1 else "offline"


#: KV-cache dtypes a serving row can name; a weight-only or 4-bit precision (int4-wo, awq, nvfp4...) says nothing
#: about the cache, so an import whose --kv-dtype is not given leaves the column blank (the engine's own default).
_KV_DTYPES: frozenset[str] = frozenset({"bf16", "fp16", "fp8", "int8"})


def _kv_from_precision(precision: str) -> str:
    """The KV dtype an import assumes from its ``--precision`` when no ``--kv-dtype`` is given ('' = the engine's)."""
    return precision if precision.lower() in _KV_DTYPES else ""


def _serving_base_row(*, source: str, trust: str, arch: Any, model_ref: str, dev: str, n_dev: int, precision: str,
                      kv_dtype: str, engine: str, tp: int, pp: int, input_len: Any, output_len: Any,
                      concurrency: Any, scenario: str, notes: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "kind": "infer", "source": source, "trust": trust, "model": model_ref, "hardware": dev, "n_devices": n_dev,
        "precision": precision, "engine": engine, "weight_dtype": precision, "kv_dtype": kv_dtype, "tp": tp, "pp": pp,
        "input_len": "" if input_len is None else round(float(input_len)),
        "output_len": "" if output_len is None else round(float(output_len)),
        "concurrency": "" if concurrency is None else round(float(concurrency)), "scenario": scenario,
        "derived": "", "notes": notes,
    }
    if arch is not None:
        row.update(_arch_columns(arch))
    return row


def _row_records(base_row: dict[str, Any], prefix: str, values: dict[str, tuple[float, str]],
                 extra: dict[str, Any] | None = None) -> list[Record]:
    """One ``validation_row`` record per measured metric: ``values`` maps the validation metric to
    (value, the tool's key it came from)."""
    units_of = {"output_tokens_per_s": "tok/s", "total_tokens_per_s": "tok/s", "requests_per_s": "req/s",
                "ttft_ms": "ms", "tpot_ms": "ms", "e2e_latency_ms": "ms", "step_time_s": "s",
                "tokens_per_s_per_device": "tok/s", "output_tokens_per_s_per_device": "tok/s"}
    out = []
    for metric, (value, key) in values.items():
        if value <= 0:
            continue
        row = dict(base_row, id=f"{prefix}:{metric}", metric=metric, value=value, printed=f"{key} = {value:g}")
        out.append(Record(kind="validation_row", name=f"{prefix}:{metric}", metric=metric, value=float(value),
                          unit=units_of.get(metric, ""), params={"row": row, "source_key": key, **(extra or {})}))
    return out


def _model_warning(arch: Any, model_id: str) -> list[str]:
    if arch is not None:
        return []
    shown = repr(model_id) if model_id else "(not named in the file)"
    return [f"model {shown} is not a preset or a config.json: rows cannot be predicted until --model names one"]


# -- SGLang bench_serving -----------------------------------------------------------------------
#: SGLang result keys -> validation metric (means; the validation metrics are means).
SGLANG_VALIDATION_METRICS: dict[str, str] = {
    "output_throughput": "output_tokens_per_s",
    "total_throughput": "total_tokens_per_s",
    "request_throughput": "requests_per_s",
    "mean_ttft_ms": "ttft_ms",
    "mean_tpot_ms": "tpot_ms",
    "mean_e2e_latency_ms": "e2e_latency_ms",
}
SGLANG_REQUIRED = ("completed", "duration", "output_throughput")
_SGLANG_PERCENTILE = re.compile(r"^(?P<stat>median|std|p\d+(?:\.\d+)?)_(?P<metric>ttft|tpot|itl|e2e_latency)_ms$")


def parse_sglang_jsonl(path: str | Path, *, device_id: str | None, n_devices: int | None = None, tp: int = 1,
                       pp: int = 1, precision: str = "bf16", kv_dtype: str | None = None,
                       model: str | None = None) -> ParsedImport:
    """Parse an SGLang ``bench_serving --output-file`` JSONL: one JSON object per line, each a load
    point (a run appends a line), each giving its own set of validation rows. The hardware is not in
    the file: ``device_id`` is required."""
    file = str(path)
    text = _read(path)
    dev = _require_device(device_id, file)
    n_dev = _check_layout(tp, pp, n_devices)
    records: list[Record] = []
    points: list[dict[str, Any]] = []
    models: set[str] = set()
    stem = Path(file).stem
    arch = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise UserInputError(f"malformed JSON on this line: {exc.msg} (column {exc.colno})", file=file,
                                 line=lineno) from None
        if not isinstance(data, dict):
            raise UserInputError("expected one JSON object per line (bench_serving --output-file)", file=file,
                                 line=lineno)
        missing = [k for k in SGLANG_REQUIRED if k not in data]
        if missing:
            raise UserInputError(f"missing key {missing[0]!r}: not a bench_serving result", file=file, line=lineno,
                                 field=missing[0])
        nums = {k: _number(data, k, file, line=lineno) for k in (*SGLANG_VALIDATION_METRICS, "completed", "duration",
                                                                 "total_input_tokens", "total_output_tokens",
                                                                 "max_concurrency", "concurrency")}
        completed = nums["completed"] or 0
        if completed <= 0:
            raise UserInputError("no completed requests", file=file, line=lineno, field="completed")
        if nums["total_throughput"] is None and nums["total_input_tokens"] and nums["duration"]:
            # older bench_serving lines have no total_throughput: input plus output tokens over the duration
            nums["total_throughput"] = (nums["total_input_tokens"] + (nums["total_output_tokens"] or 0)) / nums["duration"]
        model_id = str(model or data.get("model_id") or data.get("model") or "")
        models.add(model_id)
        arch, model_ref = _resolve_model(model_id)
        concurrency = nums["max_concurrency"]
        scenario = _scenario(data.get("request_rate", "inf"), concurrency)
        in_len = nums["total_input_tokens"] / completed if nums["total_input_tokens"] else None
        out_len = nums["total_output_tokens"] / completed if nums["total_output_tokens"] else None
        base = _serving_base_row(
            source=f"SGLang bench_serving result {Path(file).name} line {lineno}", trust="B", arch=arch,
            model_ref=model_ref, dev=dev, n_dev=n_dev, precision=precision, kv_dtype=kv_dtype or _kv_from_precision(precision),
            engine=str(data.get("backend") or "sglang"), tp=tp, pp=pp, input_len=in_len, output_len=out_len,
            concurrency=concurrency, scenario=scenario,
            notes=f"imported; dataset {data.get('dataset_name', '?')}; lengths are means over the completed requests")
        values = {metric: (float(v), key) for key, metric in SGLANG_VALIDATION_METRICS.items()
                  if (v := nums[key]) is not None}
        records += _row_records(base, f"{stem}:L{lineno}", values, {"source_line": lineno})
        for key, value in data.items():
            m = _SGLANG_PERCENTILE.match(key)
            if m and isinstance(value, int | float) and not isinstance(value, bool):
                _measured(float(value), value, file=file, line=lineno, field=key, zero_ok=True)
                records.append(Record(kind="serving", name=f"L{lineno}:{key}", metric=key, value=float(value),
                                      unit="ms", params={"statistic": m["stat"], "metric": m["metric"],
                                                         "source_line": lineno}))
        points.append({"line": lineno, "request_rate": data.get("request_rate"), "max_concurrency": concurrency,
                       "completed": int(completed), "scenario": scenario})
    if not points:
        raise UserInputError("no results (expected one JSON object per line)", file=file)
    info = RunInfo(kind="import-sglang", device_id=dev, backend="sglang", n_devices=n_dev,
                   source=str(Path(file).resolve()),
                   config={"model_id": sorted(models), "tp": tp, "pp": pp, "precision": precision,
                           "points": points})
    return ParsedImport(info, records, _model_warning(arch, ", ".join(sorted(models))))


# -- TensorRT-LLM trtllm-bench ------------------------------------------------------------------
#: trtllm-bench report (section, key) -> validation metric
TRTLLM_VALIDATION_METRICS: dict[tuple[str, str], str] = {
    ("performance", "system_output_throughput_tok_s"): "output_tokens_per_s",
    ("performance", "system_total_throughput_tok_s"): "total_tokens_per_s",
    ("performance", "request_throughput_req_s"): "requests_per_s",
    ("performance", "avg_request_latency_ms"): "e2e_latency_ms",
    ("streaming_metrics", "avg_ttft_ms"): "ttft_ms",
    ("streaming_metrics", "avg_tpot_ms"): "tpot_ms",
}
_TRT_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "fp8": "fp8", "float8": "fp8",
               "nvfp4": "fp4", "fp4": "fp4", "int8": "int8", "w8a8_sq_per_channel": "int8", "w4a16_awq": "int4",
               "w4a8_awq": "int4", "fp8_block_scales": "fp8", "w4a16": "int4"}


def _trt_dtype(value: Any, default: str) -> str:
    if value in (None, "", "None", "auto"):
        return default
    return _TRT_DTYPES.get(str(value).lower(), default)


def parse_trtllm_report(path: str | Path, *, device_id: str | None, model: str | None = None,
                        scenario: str | None = None) -> ParsedImport:
    """Parse a ``trtllm-bench ... --report_json`` report (sections ``engine``, ``world_info``,
    ``request_info``, ``performance``, ``streaming_metrics``). The layout (tp, pp, ep, world size),
    dtypes and mean lengths come from the report; the hardware does not: ``device_id`` is required."""
    file = str(path)
    text = _read(path)
    data = _load_json(text, file, "trtllm-bench --report_json output")
    for section in ("world_info", "request_info", "performance"):
        if not isinstance(data.get(section), dict):
            raise UserInputError(f"missing section {section!r}: not a trtllm-bench report", file=file, field=section,
                                 line=_json_line(text, section))
    dev = _require_device(device_id, file)
    world, req, perf = data["world_info"], data["request_info"], data["performance"]
    engine: dict[str, Any] = data["engine"] if isinstance(data.get("engine"), dict) else {}
    stream = data.get("streaming_metrics") if isinstance(data.get("streaming_metrics"), dict) else {}
    sections = {"performance": perf, "streaming_metrics": stream}
    tp = int(_number(world, "tp_size", file, text=text, path="world_info.tp_size") or 1)
    pp = int(_number(world, "pp_size", file, text=text, path="world_info.pp_size") or 1)
    ep = int(_number(world, "ep_size", file, text=text, path="world_info.ep_size") or 1)
    n_dev = int(_number(world, "world_size", file, text=text, path="world_info.world_size") or tp * pp)
    n_req = _number(req, "num_requests", file, text=text, required=True, path="request_info.num_requests")
    if not n_req or n_req <= 0:
        raise UserInputError("no requests", file=file, field="request_info.num_requests",
                             line=_json_line(text, "num_requests"))
    in_len = _number(req, "avg_input_length", file, text=text, path="request_info.avg_input_length")
    out_len = _number(req, "avg_output_length", file, text=text, path="request_info.avg_output_length")
    conc = _number(req, "avg_num_concurrent_requests", file, text=text, path="request_info.avg_num_concurrent_requests")
    scen = scenario or ("latency" if conc is not None and conc <= 1.05 else "offline")
    if scen not in ("offline", "server", "latency"):
        raise UserInputError(f"expected offline, server or latency, got {scen!r}", field="scenario")
    precision = _trt_dtype(engine.get("quantization"), _trt_dtype(engine.get("dtype"), "bf16"))
    kv_dtype = _trt_dtype(engine.get("kv_cache_dtype"), _trt_dtype(engine.get("dtype"), "bf16"))
    model_id = str(model or engine.get("model") or "")
    arch, model_ref = _resolve_model(model_id)
    version = engine.get("version") or "?"
    base = _serving_base_row(
        source=f"trtllm-bench report {Path(file).name} (TensorRT-LLM {version})", trust="B", arch=arch,
        model_ref=model_ref, dev=dev, n_dev=n_dev, precision=precision, kv_dtype=kv_dtype,
        engine=f"TensorRT-LLM {version} ({engine.get('backend') or '?'} backend)", tp=tp, pp=pp, input_len=in_len,
        output_len=out_len, concurrency=conc, scenario=scen,
        notes="imported; lengths are the report's means; concurrency is its average number of concurrent requests")
    if ep > 1:
        base["ep"] = ep
    values: dict[str, tuple[float, str]] = {}
    for (section, key), metric in TRTLLM_VALIDATION_METRICS.items():
        v = _number(sections[section], key, file, text=text, path=f"{section}.{key}")
        if v is not None:
            values[metric] = (v, f"{section}.{key}")
    if "output_tokens_per_s" not in values:
        raise UserInputError("missing performance.system_output_throughput_tok_s", file=file,
                             field="performance.system_output_throughput_tok_s", line=_json_line(text, "performance"))
    records = _row_records(base, Path(file).stem, values)
    for section, key in (("performance", "request_latency_percentiles_ms"), ("streaming_metrics", "ttft_percentiles"),
                         ("streaming_metrics", "tpot_percentiles")):
        pct = sections[section].get(key)
        if isinstance(pct, dict):
            for stat, v in pct.items():
                if isinstance(v, int | float) and not isinstance(v, bool):
                    _measured(float(v), v, file=file, line=_json_line(text, key), field=f"{section}.{key}.{stat}",
                              zero_ok=True)
                    records.append(Record(kind="serving", name=f"{key}:{stat}", metric=f"{key}.{stat}",
                                          value=float(v), unit="ms", params={"statistic": stat, "metric": key}))
    info = RunInfo(kind="import-trtllm", device_id=dev, backend="tensorrt-llm", n_devices=n_dev,
                   source=str(Path(file).resolve()),
                   config={"model_id": model_id, "tp": tp, "pp": pp, "ep": ep, "world_size": n_dev,
                           "precision": precision, "kv_dtype": kv_dtype, "num_requests": int(n_req),
                           "max_batch_size": world.get("max_batch_size"), "max_num_tokens": world.get("max_num_tokens"),
                           "scenario": scen, "version": version})
    return ParsedImport(info, records, _model_warning(arch, model_id))


# -- MLPerf Inference LoadGen summary ------------------------------------------------------------
_MLPERF_KV = re.compile(r"^(?P<key>[^:=]+?)\s*:\s*(?P<value>.*?)\s*$")
#: LoadGen summary key -> (validation metric, factor to the metric's unit); ns latencies -> ms
MLPERF_INFERENCE_METRICS: dict[str, dict[str, tuple[str, float]]] = {
    "Offline": {"Tokens per second": ("output_tokens_per_s", 1.0), "Samples per second": ("requests_per_s", 1.0)},
    "Server": {"Completed tokens per second": ("output_tokens_per_s", 1.0),
               "Completed samples per second": ("requests_per_s", 1.0),
               "Mean First Token latency (ns)": ("ttft_ms", 1e-6),
               "Mean Time to Output Token (ns)": ("tpot_ms", 1e-6),
               "Mean latency (ns)": ("e2e_latency_ms", 1e-6)},
    "Interactive": {"Completed tokens per second": ("output_tokens_per_s", 1.0),
                    "Completed samples per second": ("requests_per_s", 1.0),
                    "Mean First Token latency (ns)": ("ttft_ms", 1e-6),
                    "Mean Time to Output Token (ns)": ("tpot_ms", 1e-6),
                    "Mean latency (ns)": ("e2e_latency_ms", 1e-6)},
    "SingleStream": {"Mean latency (ns)": ("e2e_latency_ms", 1e-6)},
}


def _key_values(text: str) -> dict[str, tuple[str, int]]:
    """``key : value`` lines of a LoadGen summary -> {key: (value, line)} (first occurrence)."""
    out: dict[str, tuple[str, int]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("=") or ":" not in line:
            continue
        if m := _MLPERF_KV.match(line):
            out.setdefault(m["key"].strip(), (m["value"], lineno))
    return out


def parse_mlperf_inference(path: str | Path, *, device_id: str | None, n_devices: int | None = None, tp: int = 1,
                           pp: int = 1, precision: str = "fp8", model: str | None = None,
                           input_len: int | None = None, output_len: int | None = None,
                           engine: str = "trtllm") -> ParsedImport:
    """Parse an MLPerf Inference ``mlperf_log_summary.txt`` (LoadGen). The summary names the scenario
    and the measured rates and latencies; the system, model and the dataset's mean lengths are not in
    it: ``device_id``, ``model`` and ``input_len``/``output_len`` come from the submission."""
    file = str(path)
    text = _read(path)
    if "MLPerf Results Summary" not in text:
        raise UserInputError("no 'MLPerf Results Summary' header: not a LoadGen mlperf_log_summary.txt", file=file,
                             line=1)
    kv = _key_values(text)
    if "Scenario" not in kv:
        raise UserInputError("missing 'Scenario :' line", file=file, field="Scenario")
    scen_name, scen_line = kv["Scenario"]
    if scen_name not in MLPERF_INFERENCE_METRICS:
        raise UserInputError(f"unsupported scenario {scen_name!r}; expected {', '.join(MLPERF_INFERENCE_METRICS)}",
                             file=file, line=scen_line, field="Scenario")
    mode = kv.get("Mode", ("?", 0))[0]
    if mode != "PerformanceOnly":
        raise UserInputError(f"mode {mode!r}: only PerformanceOnly summaries carry performance", file=file,
                             line=kv.get("Mode", ("", None))[1], field="Mode")
    dev = _require_device(device_id, file, "GPU")
    n_dev = _check_layout(tp, pp, n_devices)
    values: dict[str, tuple[float, str]] = {}
    for key, (metric, factor) in MLPERF_INFERENCE_METRICS[scen_name].items():
        if key not in kv:
            continue
        raw, lineno = kv[key]
        try:
            number = float(raw)
        except ValueError:
            raise UserInputError(f"not a number: {raw!r}", file=file, line=lineno, field=key) from None
        values[metric] = (_measured(number, raw, file=file, line=lineno, field=key, zero_ok=True) * factor, key)
    if not values:
        raise UserInputError(f"no {scen_name} result line ({', '.join(MLPERF_INFERENCE_METRICS[scen_name])})",
                             file=file, field="Scenario", line=scen_line)
    valid = kv.get("Result is", ("?", 0))[0]
    model_id = str(model or "")
    arch, model_ref = _resolve_model(model_id)
    scenario = {"Offline": "offline", "SingleStream": "latency"}.get(scen_name, "server")
    target = kv.get("target_qps", ("", 0))[0]
    base = _serving_base_row(
        source=f"MLPerf Inference LoadGen summary {Path(file).name} ({kv.get('SUT name', ('?', 0))[0]}, {scen_name})",
        trust="A" if valid == "VALID" else "C", arch=arch, model_ref=model_ref, dev=dev, n_dev=n_dev,
        precision=precision, kv_dtype=_kv_from_precision(precision), engine=engine, tp=tp, pp=pp,
        input_len=input_len, output_len=output_len, concurrency=None, scenario=scenario,
        notes=f"imported; result {valid}; target_qps {target or '-'}; SUT {kv.get('SUT name', ('?', 0))[0]}; "
              f"lengths from the dataset, as given")
    records = _row_records(base, "/".join(Path(file).resolve().parts[-3:-1]), values)
    for key, (raw, lineno) in kv.items():
        if "percentile" in key and key.endswith("(ns)"):
            try:
                number = float(raw)
            except ValueError:
                raise UserInputError(f"not a number: {raw!r}", file=file, line=lineno, field=key) from None
            _measured(number, raw, file=file, line=lineno, field=key, zero_ok=True)
            records.append(Record(kind="serving", name=key, metric=key, value=number * 1e-6, unit="ms",
                                  params={"source_line": lineno}))
    warnings = _model_warning(arch, model_id)
    if valid != "VALID":
        warnings.append(f"LoadGen says 'Result is : {valid}': rows are graded trust C")
    if input_len is None or output_len is None:
        warnings.append("no --input-len/--output-len: the summary has no request lengths, so rows cannot be predicted")
    info = RunInfo(kind="import-mlperf-inference", device_id=dev, backend="mlperf-loadgen", n_devices=n_dev,
                   source=str(Path(file).resolve()),
                   config={"scenario": scen_name, "result": valid, "model_id": model_id, "tp": tp, "pp": pp,
                           "precision": precision, "target_qps": target,
                           "sut": kv.get("SUT name", ("", 0))[0]})
    return ParsedImport(info, records, warnings)


# -- MLPerf Training result (MLLOG) --------------------------------------------------------------
_MLLOG = re.compile(r":::MLLOG\s+(?P<json>.*?)\s*$")


def parse_mlperf_training(path: str | Path, *, device_id: str | None, n_devices: int | None = None) -> ParsedImport:
    """Parse an MLPerf Training ``result_N.txt`` (``:::MLLOG {...}`` lines): time to train from
    ``run_start`` to ``run_stop``, the benchmark, global batch size and status. Stored as a
    measurement; the planner does not predict time-to-quality, so it adds no validation rows."""
    file = str(path)
    text = _read(path)
    events: dict[str, tuple[dict[str, Any], int]] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        m = _MLLOG.search(raw)
        if not m:
            continue
        try:
            ev = json.loads(m["json"])
        except json.JSONDecodeError as exc:
            raise UserInputError(f"malformed MLLOG JSON: {exc.msg}", file=file, line=lineno) from None
        if not isinstance(ev, dict) or "key" not in ev or "time_ms" not in ev:
            raise UserInputError("MLLOG record without 'key' or 'time_ms'", file=file, line=lineno, field="key")
        events.setdefault(str(ev["key"]), (ev, lineno))
        if ev["key"] == "run_stop":
            events["run_stop"] = (ev, lineno)
    if not events:
        raise UserInputError("no ':::MLLOG' lines: not an MLPerf Training result", file=file)
    for key in ("run_start", "run_stop"):
        if key not in events:
            raise UserInputError(f"no {key} event (an unfinished run?)", file=file, field=key)
    (start, start_line), (stop, stop_line) = events["run_start"], events["run_stop"]
    for ev, ev_line in ((start, start_line), (stop, stop_line)):
        t = ev["time_ms"]
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            raise UserInputError(f"must be a finite number, got {echo(t)}", file=file, line=ev_line, field="time_ms")
    seconds = (float(stop["time_ms"]) - float(start["time_ms"])) / 1e3
    if seconds <= 0:
        raise UserInputError("run_stop is not after run_start", file=file, line=stop_line, field="time_ms")
    status = (stop.get("metadata") or {}).get("status", "?")

    def value(key: str) -> Any:
        return events[key][0].get("value") if key in events else None

    bench = value("submission_benchmark")
    platform = value("submission_platform")
    dev = _device_id(None, device_id, "GPU", file) if device_id else None
    records = [Record(kind="training", name="time_to_train", metric="time_to_train_s", value=seconds, unit="s",
                      time_s=seconds, params={"benchmark": bench, "status": status,
                                              "global_batch_size": value("global_batch_size")})]
    warnings = [] if status == "success" else [f"run_stop status {status!r}: the run did not reach its target"]
    info = RunInfo(kind="import-mlperf-training", device_id=dev, backend="mlperf", n_devices=n_devices or 1,
                   source=str(Path(file).resolve()),
                   config={"benchmark": bench, "org": value("submission_org"), "platform": platform,
                           "division": value("submission_division"), "status": status,
                           "global_batch_size": value("global_batch_size"), "time_to_train_min": seconds / 60.0})
    return ParsedImport(info, records, warnings)


# -- Ascend hccl_test -----------------------------------------------------------------------------
HCCL_COLUMNS = ("data_size(Bytes)", "aveg_time(us)", "alg_bandwidth(GB/s)", "check_result")


def parse_hccl_test(path: str | Path, *, n_ranks: int | None, nodes: int = 1, op: str | None = None,
                    device_id: str | None = None) -> ParsedImport:
    """Parse an Ascend ``hccl_test`` log (``all_reduce_test``, ``all_gather_test`` ...): rows under the
    ``data_size(Bytes): aveg_time(us): alg_bandwidth(GB/s): check_result:`` header, columns split by
    spaces or ``|``. The log names neither the ranks nor the device: ``n_ranks`` (mpirun -np) and
    ``device_id`` are required. Rows whose check failed are skipped with a warning.

    hccl_test's data size is each rank's buffer; for all-gather and reduce-scatter the total is that
    times the ranks (nccl-tests prints the total), so bus bandwidth follows nccl-tests' definition."""
    file = str(path)
    text = _read(path)
    current_op = NCCL_OPS.get(op.lower().removesuffix("_test"), None) if op else None
    if op and current_op is None:
        raise UserInputError(f"unknown collective {op!r}; expected one of {', '.join(sorted(set(NCCL_OPS)))}",
                             field="op")
    current_op = current_op or _op_from_name(Path(file).name.replace("_test", ""))
    if current_op is None:
        raise UserInputError("cannot tell which collective this log measured; pass --op (e.g. all_reduce)",
                             file=file, field="op")
    if not n_ranks or n_ranks < 2:
        raise UserInputError("hccl_test logs do not list their ranks; pass --n-ranks (mpirun -np), at least 2",
                             file=file, field="n_ranks")
    if nodes < 1 or n_ranks % nodes:
        raise UserInputError(f"nodes ({nodes}) must divide n_ranks ({n_ranks})", field="nodes")
    dev = _require_device(device_id, file, "NPU")
    header_seen = False
    records: list[Record] = []
    warnings: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        tokens = [t for t in re.split(r"[\s|]+", raw.strip()) if t]
        if not tokens:
            continue
        if tokens[0].startswith("data_size"):
            names = [t.rstrip(":") for t in tokens]
            if names[:3] != list(HCCL_COLUMNS[:3]):
                raise UserInputError(f"unexpected columns {' '.join(names)}; expected {' '.join(HCCL_COLUMNS)}",
                                     file=file, line=lineno)
            header_seen = True
            continue
        if not header_seen or not tokens[0].isdigit():
            continue  # command echo, [info] lines
        if len(tokens) < 3:
            raise UserInputError(f"expected {len(HCCL_COLUMNS)} columns ({' '.join(HCCL_COLUMNS)}), found {len(tokens)}",
                                 file=file, line=lineno)
        try:
            size, time_us = float(tokens[0]), float(tokens[1])
        except ValueError:
            raise UserInputError(f"not a number: aveg_time {tokens[1]!r}", file=file, line=lineno,
                                 field="aveg_time(us)") from None
        _measured(time_us, tokens[1], file=file, line=lineno, field="aveg_time(us)", zero_ok=True)
        if _is_number(tokens[2]):
            _measured(float(tokens[2]), tokens[2], file=file, line=lineno, field="alg_bandwidth(GB/s)", zero_ok=True)
        check = tokens[3] if len(tokens) > 3 else "NULL"
        if check.lower() == "failed":
            warnings.append(f"line {lineno}: check_result failed (wrong results); row skipped")
            continue
        if size <= 0 or time_us <= 0:
            continue
        total = size * n_ranks if current_op in ("all_gather", "reduce_scatter") else size
        t = time_us * units.US
        busbw = total / t * bus_factor(current_op, n_ranks) / units.GB_PER_S
        scope = "scale_up" if nodes == 1 else "scale_out"
        params = {"op": current_op, "size_bytes": total, "n_ranks": n_ranks, "local_ranks": n_ranks // nodes,
                  "nodes": nodes, "scope": scope, "busbw_gb_per_s": busbw, "check_result": check,
                  "algbw_gb_per_s": float(tokens[2]) if _is_number(tokens[2]) else None, "source_line": lineno}
        records.append(Record(kind="collective", name=f"{current_op} {int(total)} B", metric="busbw_gb_per_s",
                              value=busbw, unit="GB/s", time_s=t, bytes=total, params=params))
    if not header_seen:
        raise UserInputError("no 'data_size(Bytes): aveg_time(us): ...' header (is this an hccl_test log?)", file=file)
    if not records:
        raise UserInputError("no result rows found under the header", file=file)
    info = RunInfo(kind="import-hccl-test", device_id=dev, backend="hccl", n_devices=n_ranks,
                   source=str(Path(file).resolve()),
                   config={"ops": [current_op], "n_ranks": n_ranks, "nodes": nodes, "local_ranks": n_ranks // nodes,
                           "scope": "scale_up" if nodes == 1 else "scale_out"})
    return ParsedImport(info, records, warnings)



# -- training runs: Megatron-LM, torchtitan ------------------------------------------------------
def _median(xs: list[float]) -> float:
    ys = sorted(xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2.0


def _train_base_row(*, source: str, arch: Any, model_ref: str, dev: str, n_dev: int, precision: str, seq_len: int,
                    global_batch_tokens: float, micro_batch: Any, tp: int, pp: int, vpp: Any, dp: int, cp: int,
                    ep: int, sp: int, zero_stage: int, recompute: str, framework: str, notes: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "kind": "train", "source": source, "trust": "A", "model": model_ref, "hardware": dev, "n_devices": n_dev,
        "precision": precision, "seq_len": seq_len, "global_batch_tokens": global_batch_tokens,
        "micro_batch": "" if micro_batch is None else micro_batch, "tp": tp, "pp": pp,
        "vpp": "" if vpp in (None, 1) else vpp, "dp": dp, "cp": cp, "ep": ep, "sp": sp, "zero_stage": zero_stage,
        "recompute": recompute, "framework": framework, "derived": "", "notes": notes,
    }
    if arch is not None:
        row.update(_arch_columns(arch))
    return row


#: Megatron's ``arguments`` dump: ``  name ........ value``
_MEG_ARG = re.compile(r"^\s*(?P<key>[a-z_][a-z0-9_]*)\s+\.*\s*(?P<value>.*?)\s*$")
#: a launcher's per-rank prefix (torchrun --tee: ``[default0]:``, ``[rank0]:``)
_RANK_PREFIX = re.compile(r"^\[[^\]]*\]:")
_MEG_ITER = re.compile(r"iteration\s+(?P<it>\d+)\s*/\s*(?P<total>\d+|infinity)\s*\|(?P<rest>.*)$")
_MEG_FIELD = re.compile(r"\s*(?P<key>[^|:]+?)\s*:\s*(?P<value>[^|]+?)\s*\|")
_MEG_WORLD = re.compile(r"using world size:\s*(?P<world>\d+)")
_MEG_VOCAB = re.compile(r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (?P<v>\d+)\)")


def _arg_value(text: str) -> Any:
    t = text.strip()
    if t in ("None", "null", ""):
        return None
    if t in ("True", "true"):
        return True
    if t in ("False", "false"):
        return False
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def _flatten_config(data: Any, out: dict[str, tuple[Any, str]] | None = None, prefix: str = "") -> dict[str, Any]:
    """Every leaf of a nested YAML/TOML mapping by its last key (the first one met wins) and by its
    dotted path (dashes as underscores); the dotted path is kept for messages."""
    out = {} if out is None else out
    if isinstance(data, dict):
        for k, v in data.items():
            path = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict):
                _flatten_config(v, out, path)
            else:
                out.setdefault(str(k).replace("-", "_"), (v, path))
                if prefix:
                    out[path.replace("-", "_")] = (v, path)
    return out


def _read_config(path: str | Path) -> tuple[dict[str, Any], str]:
    """A YAML or TOML config file as a flat {key: (value, dotted path)} map."""
    file = str(path)
    text = _read(path)
    if Path(file).suffix == ".toml":
        import tomllib

        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UserInputError(f"malformed TOML: {exc}", file=file) from None
    else:
        from xpuplan.datafile import parse_text

        data, _ = parse_text(text, file)
    if not isinstance(data, dict):
        raise UserInputError("expected a mapping of settings", file=file, line=1)
    return _flatten_config(data), file


def _int_arg(args: dict[str, Any], key: str, default: Any, where: str) -> Any:
    v = args.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            return int(str(v))
        except ValueError:
            raise UserInputError(f"expected an integer, got {v!r}", file=where, field=key) from None
    return v


def _megatron_arch(args: dict[str, Any], where: str) -> dict[str, Any]:
    """Validation-row architecture columns from Megatron arguments (blank when missing)."""
    layers = args.get("num_layers")
    hidden = args.get("hidden_size")
    heads = args.get("num_attention_heads")
    if layers is None or hidden is None or heads is None:
        return {}
    vocab = args.get("padded_vocab_size") or args.get("vocab_size")
    gated = bool(args.get("swiglu"))
    ffn = args.get("ffn_hidden_size") or (int(8 * hidden / 3) if gated else 4 * hidden)
    cols: dict[str, Any] = {"layers": _int_arg(args, "num_layers", None, where), "d_model": hidden, "heads": heads,
                            "ffn": ffn, "vocab": vocab or "", "gated_mlp": 1 if gated else 0,
                            "kv_heads": args.get("num_query_groups") if args.get("group_query_attention") else heads}
    kv_channels = args.get("kv_channels")
    if kv_channels and kv_channels != hidden // heads:
        cols["head_dim"] = kv_channels
    if args.get("num_experts"):
        cols.update({"moe_experts": args["num_experts"], "moe_top_k": args.get("moe_router_topk") or 2,
                     "moe_ffn": args.get("moe_ffn_hidden_size") or ffn,
                     "moe_shared_experts": 1 if args.get("moe_shared_expert_intermediate_size") else 0})
    return cols


def parse_megatron_log(path: str | Path, *, device_id: str | None, config: str | Path | None = None,
                       model: str | None = None, skip: int = 1) -> ParsedImport:
    """Parse a Megatron-LM training log: the plan and shape from its ``arguments`` dump (and/or a YAML
    of Megatron arguments, ``config``, which wins), the measured step times from its ``iteration N/M |
    ... | elapsed time per iteration (ms): X |`` lines. The first ``skip`` logged intervals (warm-up,
    compilation) are dropped; the median of the rest is the step time. Gives validation rows
    ``step_time_s`` and ``tokens_per_s_per_device`` (derived: global batch · seq length / step / devices)."""
    file = str(path)
    text = _read(path)
    dev = _require_device(device_id, file)
    args: dict[str, Any] = {}
    arg_lines: dict[str, int] = {}
    steps: list[tuple[int, float, int]] = []
    tflops: list[float] = []
    world = None
    in_args = False
    for lineno, line in enumerate(text.splitlines(), start=1):
        raw = _RANK_PREFIX.sub("", line)
        if "arguments" in raw and raw.strip().startswith("---"):
            in_args = "end of arguments" not in raw
            continue
        if in_args and (m := _MEG_ARG.match(raw)):
            args[m["key"]] = _arg_value(m["value"])
            arg_lines[m["key"]] = lineno
            continue
        if m := _MEG_WORLD.search(raw):
            world = int(m["world"])
        if m := _MEG_VOCAB.search(raw):
            args["padded_vocab_size"] = int(m["v"])
        if m := _MEG_ITER.search(raw):
            fields = {f["key"].strip(): f["value"] for f in _MEG_FIELD.finditer("|" + m["rest"])}
            ms = fields.get("elapsed time per iteration (ms)")
            if ms is None:
                continue
            try:
                elapsed_ms = float(ms)
            except ValueError:
                raise UserInputError(f"not a number: {ms!r}", file=file, line=lineno,
                                     field="elapsed time per iteration (ms)") from None
            _measured(elapsed_ms, ms, file=file, line=lineno, field="elapsed time per iteration (ms)")
            steps.append((int(m["it"]), elapsed_ms * units.MS, lineno))
            tf = fields.get("throughput per GPU (TFLOP/s/GPU)")
            if tf is not None and _is_number(tf):
                tflops.append(_measured(float(tf), tf, file=file, line=lineno,
                                        field="throughput per GPU (TFLOP/s/GPU)", zero_ok=True))
    where = file
    if config is not None:
        cfg, where = _read_config(config)
        args.update({k: v for k, (v, _) in cfg.items()})
    if not steps:
        raise UserInputError("no 'iteration N/M | ... | elapsed time per iteration (ms): X |' lines (is this a "
                             "Megatron-LM log?)", file=file)
    if skip < 0:
        raise UserInputError("skip must be 0 or more", field="skip")
    kept = steps[skip:] if len(steps) > skip else steps[-1:]
    step_s = _median([t for _, t, _ in kept])  # every interval was checked positive and finite
    required = ("seq_length", "global_batch_size")
    missing = [k for k in required if args.get(k) is None]
    if missing:
        raise UserInputError(f"Megatron argument {missing[0]!r} not found in the log's arguments dump or the config; "
                             f"pass --config with it", file=where, field=missing[0])
    tp = _int_arg(args, "tensor_model_parallel_size", 1, where)
    pp = _int_arg(args, "pipeline_model_parallel_size", 1, where)
    cp = _int_arg(args, "context_parallel_size", 1, where)
    ep = _int_arg(args, "expert_model_parallel_size", 1, where)
    n_dev = _int_arg(args, "world_size", world, where)
    if not n_dev:
        raise UserInputError("world size not found ('using world size:' line or world_size argument); pass --config "
                             "with world_size", file=where, field="world_size")
    dp = _int_arg(args, "data_parallel_size", n_dev // (tp * pp * cp) if n_dev % (tp * pp * cp) == 0 else None, where)
    if not dp or dp * tp * pp * cp != n_dev:
        raise UserInputError(f"world size {n_dev} is not tp·pp·cp·dp ({tp}·{pp}·{cp}·{dp})", file=where,
                             field="world_size")
    seq = _int_arg(args, "seq_length", None, where)
    gbs = _int_arg(args, "global_batch_size", None, where)
    precision = "fp8" if args.get("fp8") else ("bf16" if args.get("bf16") else ("fp16" if args.get("fp16") else "fp32"))
    recompute = str(args.get("recompute_granularity") or "none")
    vpp = args.get("virtual_pipeline_model_parallel_size")
    if vpp is None and args.get("num_layers_per_virtual_pipeline_stage") and args.get("num_layers") and pp > 1:
        vpp = args["num_layers"] // (pp * args["num_layers_per_virtual_pipeline_stage"])
    zero = 1 if args.get("use_distributed_optimizer") else 0
    arch, model_ref = _resolve_model(model or "")
    base = _train_base_row(
        source=f"Megatron-LM log {Path(file).name}", arch=arch, model_ref=model_ref, dev=dev, n_dev=n_dev,
        precision=precision, seq_len=seq, global_batch_tokens=float(gbs * seq), micro_batch=args.get("micro_batch_size"),
        tp=tp, pp=pp, vpp=vpp, dp=dp, cp=cp, ep=ep, sp=1 if args.get("sequence_parallel") else 0, zero_stage=zero,
        recompute=recompute, framework="Megatron-LM",
        notes=f"imported; median of {len(kept)} logged intervals after skipping {min(skip, len(steps) - 1)}")
    if arch is None:
        base.update(_megatron_arch(args, where))
        if not base.get("layers"):
            raise UserInputError("no model: the arguments give no num_layers/hidden_size/num_attention_heads; pass "
                                 "--model (a preset or a config.json) or --config", file=where, field="num_layers")
    tokens_per_dev = gbs * seq / step_s / n_dev
    values = {"step_time_s": (step_s, "elapsed time per iteration (ms)"),
              "tokens_per_s_per_device": (tokens_per_dev, "global_batch_size*seq_length/step/world_size")}
    records = _row_records(base, Path(file).stem, values)
    for r in records:
        if r.metric == "tokens_per_s_per_device":
            r.params["row"]["derived"] = (f"tokens/s/device = global_batch_size {gbs} x seq_length {seq} / "
                                          f"{step_s:.4g} s / {n_dev} devices")
    records += [Record(kind="training", name=f"iteration {it}", metric="step_time_s", value=t, unit="s", time_s=t,
                       params={"iteration": it, "source_line": ln, "kept": (it, t, ln) in kept})
                for it, t, ln in steps]
    info = RunInfo(kind="import-megatron", device_id=dev, backend="megatron-lm", n_devices=n_dev,
                   source=str(Path(file).resolve()),
                   config={"tp": tp, "pp": pp, "cp": cp, "ep": ep, "dp": dp, "vpp": vpp, "seq_length": seq,
                           "global_batch_size": gbs, "micro_batch_size": args.get("micro_batch_size"),
                           "precision": precision, "recompute": recompute, "step_time_s": step_s,
                           "logged_tflops_per_gpu": _median(tflops) if tflops else None,
                           "intervals": len(steps), "kept": len(kept), "config": str(config) if config else None})
    return ParsedImport(info, records, [] if arch is not None or base.get("vocab") else
                        ["no vocabulary size in the log ('padded vocab' line or padded_vocab_size): rows cannot be "
                         "predicted until --config gives vocab_size or --model names the model"])


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TITAN_STEP = re.compile(r"step:\s*(?P<step>\d+)\b(?P<rest>.*)$")
_TITAN_TPS = re.compile(r"\btps:\s*(?P<v>[\d,]+(?:\.\d+)?)")
_TITAN_MFU = re.compile(r"\bmfu:\s*(?P<v>[\d.]+)%")
_TITAN_MESH = re.compile(r"Building (?P<n>\d+)-D device mesh with \[(?P<names>[^\]]*)\], \[(?P<sizes>[^\]]*)\]")
#: torchtitan model name + flavor -> preset id
TORCHTITAN_PRESETS = {("llama3", "8b"): "llama3.1-8b", ("llama3", "70b"): "llama3.1-70b",
                      ("llama3", "405b"): "llama3.1-405b", ("llama2", "7b"): "llama2-7b", ("llama2", "13b"): "llama2-13b",
                      ("llama2", "70b"): "llama2-70b", ("deepseek_v3", "671b"): "deepseek-v3"}


def parse_torchtitan_log(path: str | Path, *, device_id: str | None, config: str | Path | None,
                         model: str | None = None, n_devices: int | None = None, skip: int = 1) -> ParsedImport:
    """Parse a torchtitan training log (``step: N  loss: ...  tps: X  tflops: ...  mfu: ...%``: tps is
    tokens per second per device) with the job's TOML ``config`` ([model] name/flavor, [training]
    local_batch_size/seq_len, [parallelism] degrees, [activation_checkpoint] mode). The first ``skip``
    logged steps are dropped; the median tps of the rest is the ``tokens_per_s_per_device`` row."""
    file = str(path)
    text = _read(path)
    dev = _require_device(device_id, file)
    if config is None:
        raise UserInputError("torchtitan logs do not print the plan; pass --config (the job's .toml)", field="config")
    cfg_flat, where = _read_config(config)
    cfg = {k: v for k, (v, _) in cfg_flat.items()}
    tps: list[tuple[int, float, int]] = []
    mfu: list[float] = []
    mesh_devices = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = _ANSI.sub("", raw)
        if m := _TITAN_MESH.search(line):
            sizes = [int(x) for x in re.findall(r"\d+", m["sizes"])]
            mesh_devices = 1
            for x in sizes:
                mesh_devices *= x
        if not (m := _TITAN_STEP.search(line)):
            continue
        if t := _TITAN_TPS.search(m["rest"]):
            tps.append((int(m["step"]), float(t["v"].replace(",", "")), lineno))
        if u := _TITAN_MFU.search(m["rest"]):
            mfu.append(float(u["v"]) / 100.0)
    if not tps:
        raise UserInputError("no 'step: N ... tps: X' lines (is this a torchtitan log?)", file=file)
    kept = tps[skip:] if len(tps) > skip else tps[-1:]
    tokens_per_dev = _median([v for _, v, _ in kept])
    n_dev = n_devices or mesh_devices
    if not n_dev:
        raise UserInputError("the log has no 'Building N-D device mesh' line; pass --n-devices", file=file,
                             field="n_devices")
    seq = _int_arg(cfg, "training.seq_len", None, where)
    local_batch = _int_arg(cfg, "training.local_batch_size", _int_arg(cfg, "training.batch_size", None, where), where)
    if seq is None or local_batch is None:
        raise UserInputError("the config has no [training] seq_len / local_batch_size", file=where,
                             field="training.seq_len" if seq is None else "training.local_batch_size")
    tp = _int_arg(cfg, "parallelism.tensor_parallel_degree", 1, where)
    pp = _int_arg(cfg, "parallelism.pipeline_parallel_degree", 1, where)
    cp = _int_arg(cfg, "parallelism.context_parallel_degree", 1, where)
    ep = _int_arg(cfg, "parallelism.expert_parallel_degree", 1, where)
    replicate = _int_arg(cfg, "parallelism.data_parallel_replicate_degree", 1, where)
    shard = _int_arg(cfg, "parallelism.data_parallel_shard_degree", -1, where)
    if shard == -1:
        shard = n_dev // (tp * pp * cp * replicate)
    dp = replicate * shard
    if dp * tp * pp * cp != n_dev:
        raise UserInputError(f"{n_dev} devices are not dp·tp·pp·cp ({dp}·{tp}·{pp}·{cp})", file=where,
                             field="parallelism")
    ac = str(cfg.get("activation_checkpoint.mode", "selective"))
    recompute = {"none": "none", "selective": "selective", "full": "full"}.get(ac, "selective")
    # [model] converters = ["float8"] (or ["mx"]) swaps the linear layers for fp8 / MX ones
    converters = str(cfg.get("model.converters", ""))
    mixed = cfg.get("parallelism.mixed_precision_param", cfg.get("training.mixed_precision_param"))
    precision = "fp8" if ("float8" in converters or "mx" in converters) else ("fp32" if mixed == "float32" else "bf16")
    name, flavor = str(cfg.get("model.name", "")), str(cfg.get("model.flavor", ""))
    model_id = model or TORCHTITAN_PRESETS.get((name.lower(), flavor.lower()), f"{name}-{flavor}".lower())
    arch, model_ref = _resolve_model(model_id)
    base = _train_base_row(
        source=f"torchtitan log {Path(file).name}", arch=arch, model_ref=model_ref, dev=dev, n_dev=n_dev,
        precision=precision, seq_len=seq, global_batch_tokens=float(local_batch * seq * dp), micro_batch=local_batch,
        tp=tp, pp=pp, vpp=None, dp=dp, cp=cp, ep=ep, sp=1 if tp > 1 else 0, zero_stage=3 if shard > 1 else 0,
        recompute=recompute, framework="torchtitan",
        notes=f"imported; median tps of {len(kept)} logged steps after skipping {min(skip, len(tps) - 1)}; "
              f"model {name} {flavor}")
    records = _row_records(base, Path(file).stem, {"tokens_per_s_per_device": (tokens_per_dev, "tps")})
    records += [Record(kind="training", name=f"step {st}", metric="tokens_per_s_per_device", value=v, unit="tok/s",
                       params={"step": st, "source_line": ln}) for st, v, ln in tps]
    info = RunInfo(kind="import-torchtitan", device_id=dev, backend="torchtitan", n_devices=n_dev,
                   source=str(Path(file).resolve()),
                   config={"model": f"{name} {flavor}", "preset": model_ref or None, "tp": tp, "pp": pp, "cp": cp,
                           "ep": ep, "dp": dp, "seq_len": seq, "local_batch_size": local_batch,
                           "tokens_per_s_per_device": tokens_per_dev, "logged_mfu": _median(mfu) if mfu else None,
                           "config": str(config)})
    return ParsedImport(info, records, _model_warning(arch, model_id))


# -- validation CSV -----------------------------------------------------------------------------
def parse_validation_csv(path: str | Path) -> ParsedImport:
    """Every row of a validation CSV (checked as ``xpuplan validate`` checks it)."""
    from xpuplan.validate.core import read_rows

    rows = read_rows(path)
    if not rows:
        raise UserInputError("no rows", file=str(path))
    _check_hardware(rows, str(path))
    records = [Record(kind="validation_row", name=r.id, metric=r.metric, value=r.value, unit=r.metric.rsplit("_", 1)[-1],
                      params={"row": dict(r.raw)}) for r in rows]
    hardware = sorted({r.hardware for r in rows})
    info = RunInfo(kind="import-csv", device_id=hardware[0] if len(hardware) == 1 else None, n_devices=1,
                   source=str(Path(path).resolve()),
                   config={"rows": len(rows), "hardware": hardware, "kinds": sorted({r.kind for r in rows})})
    return ParsedImport(info, records)


def _check_hardware(rows: list[Any], file: str) -> None:
    """Every row's ``hardware`` is a catalog id or alias (errors suggest close ids)."""
    from xpuplan.catalog import load_catalog

    catalog = load_catalog()
    for r in rows:
        try:
            catalog.resolve(r.hardware)
        except UnknownIdError as exc:
            raise UserInputError(exc.message, file=r.file or file, line=r.line, field="hardware",
                                 hint=exc.hint) from None


def store_import(store: Any, parsed: ParsedImport) -> int:
    """Write a parsed file as one completed run (one transaction); returns the run id. A value that is
    not a finite number is refused, naming the file (the parsers check each figure as they read it)."""
    from xpuplan.store.records import record_import

    for r in parsed.records:
        if not math.isfinite(r.value):
            raise UserInputError(f"must be a finite number, got {r.value!r}",
                                 file=parsed.info.source, line=r.params.get("source_line"),
                                 field=r.params.get("source_key") or r.params.get("vllm_key") or r.metric)
    return record_import(store, parsed.info, parsed.records)
