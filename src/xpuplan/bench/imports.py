"""Import measurements people already have into the store.

- nccl-tests logs (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
  ``alltoall_perf``, ``sendrecv_perf`` ...): one ``collective`` measurement per message size, with
  the devices, hosts and ranks the log lists, so ``xpuplan calibrate`` can fit the collective
  parameters from them.
- vLLM ``benchmark_serving`` result JSON (``--save-result``): serving metrics, plus validation rows
  (throughput, mean TTFT/TPOT/E2E latency) that ``xpuplan validate --local RUN`` predicts.
- Validation CSVs in the format of ``shared/validation/README.md``: every row, so
  ``validate --local RUN`` reproduces ``validate FILE.csv`` from the store.

Parsing is pure (no database): :func:`parse_nccl_tests`, :func:`parse_vllm_json` and
:func:`parse_validation_csv` return a :class:`ParsedImport`; :func:`store_import` writes one, all
or nothing. A malformed file raises :class:`~xpuplan.errors.UserInputError` naming file, line and
field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xpuplan import units
from xpuplan.calibrate.fit import bus_factor
from xpuplan.errors import UserInputError
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
        return load_catalog().resolve(override)
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
    if tp < 1 or (n_devices is not None and n_devices < 1):
        raise UserInputError("tp and n_devices must be positive", field="tp")
    n_dev = n_devices or tp
    for key in (*VLLM_VALIDATION_METRICS, "completed", "duration", "total_input_tokens", "total_output_tokens"):
        if key in data and data[key] is not None and not isinstance(data[key], int | float):
            raise UserInputError(f"not a number: {data[key]!r}", file=file, field=key, line=_json_line(text, key))
    completed = int(data["completed"])
    if completed <= 0:
        raise UserInputError("no completed requests", file=file, field="completed", line=_json_line(text, "completed"))
    model_id = str(model or data.get("model_id") or "")
    preset = _preset_for(model_id)
    rate = data.get("request_rate", "inf")
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
        "trust": "B", "model": preset.id if preset else "", "hardware": dev, "n_devices": n_dev,
        "precision": precision, "engine": f"{data.get('backend') or 'vllm'}", "weight_dtype": precision,
        "kv_dtype": precision, "tp": tp, "pp": 1, "input_len": input_len, "output_len": output_len,
        "concurrency": concurrency if concurrency is not None else "", "scenario": scenario,
        "derived": "", "notes": "imported; input/output lengths are means over the completed requests",
    }
    if preset is not None:
        base_row.update(_arch_columns(preset))
    records: list[Record] = []
    for key, (metric, unit) in VLLM_VALIDATION_METRICS.items():
        value = data.get(key)
        if value is None:
            continue
        row = dict(base_row, id=f"{stem}:{metric}", metric=metric, value=value, printed=f"{key} = {value}")
        records.append(Record(kind="validation_row", name=f"{metric}", metric=metric, value=float(value), unit=unit,
                              params={"row": row, "vllm_key": key}))
    for key, value in data.items():
        m = _VLLM_PERCENTILE.match(key)
        if m and isinstance(value, int | float):
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


# -- validation CSV -----------------------------------------------------------------------------
def parse_validation_csv(path: str | Path) -> ParsedImport:
    """Every row of a validation CSV (checked as ``xpuplan validate`` checks it)."""
    from xpuplan.validate.core import read_rows

    rows = read_rows(path)
    if not rows:
        raise UserInputError("no rows", file=str(path))
    records = [Record(kind="validation_row", name=r.id, metric=r.metric, value=r.value, unit=r.metric.rsplit("_", 1)[-1],
                      params={"row": dict(r.raw)}) for r in rows]
    hardware = sorted({r.hardware for r in rows})
    info = RunInfo(kind="import-csv", device_id=hardware[0] if len(hardware) == 1 else None, n_devices=1,
                   source=str(Path(path).resolve()),
                   config={"rows": len(rows), "hardware": hardware, "kinds": sorted({r.kind for r in rows})})
    return ParsedImport(info, records)


def store_import(store: Any, parsed: ParsedImport) -> int:
    """Write a parsed file as one completed run (one transaction); returns the run id."""
    from xpuplan.store.records import record_import

    return record_import(store, parsed.info, parsed.records)
