"""Predictor for ``kind = infer`` validation rows (``xpuplan validate``).

For each row: the model is the preset named in ``model`` (else built from the architecture
columns, :func:`~xpuplan.validate.rows.model_from_row`); the replica is ``hardware`` with
``tp``/``pp``/``ep``, the row's ``weight_dtype`` (else ``precision``), ``kv_dtype`` (blank: the
scheme's default) and ``engine`` (name and version as printed); ``n_devices`` beyond one replica are
data-parallel copies. The workload:

* ``batch`` given: the requests start together with equal lengths, i.e. a static batch (what
  static-batching benchmarks measure, and what continuous batching degenerates to when every
  request arrives at once with the same lengths);
* only ``concurrency`` given: the continuous-batching steady state at that concurrency;
* neither: the engine's maximum-throughput point (largest concurrency the KV cache holds);
  with ``num_prompts`` (an offline run of that many prompts sent at once), the request-level
  simulation of that finite run, whose rates are over its makespan (``serve.sim.validation``); the
  steady-state figure is then in the details.

A missing ``output_len`` is 1 for ``ttft_ms`` (the prefill alone) and, for decode-rate metrics of a
``latency`` row, the steady decode rate at the prompt's context (batch / TPOT). Rows whose lengths
are not fixed (dataset-driven) take the mean lengths of their benchmark dataset for the model's
tokenizer (``workload/data/datasets.yaml``): the dataset the ``dataset`` column names, else one the
row's notes, source or printed text name, else the engine's own benchmark default (LMDeploy's
profile_throughput samples ShareGPT); the details say which and how it was found. A dataset-driven
row with none of these cannot be predicted and says so, before anything else is checked.

A row without ``tp`` is predicted with one device per replica (tp = 1, the rest data-parallel), and
the details give the prediction for the conventional layout too (TP over one server).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Final

from xpuplan.catalog import load_catalog
from xpuplan.catalog.assumptions import Assumptions, default_assumptions
from xpuplan.errors import UserInputError
from xpuplan.serve.estimate import estimate_continuous, estimate_static, max_throughput
from xpuplan.serve.replica import Replica, make_replica, step_time
from xpuplan.validate.core import Prediction
from xpuplan.validate.rows import ValidationRow, model_from_row
from xpuplan.workload.datasets import DatasetLengths, dataset_lengths, find_dataset, load_datasets
from xpuplan.workload.serving import dataset_request_lengths

METRICS: Final = ("output_tokens_per_s", "output_tokens_per_s_per_device", "total_tokens_per_s", "requests_per_s",
                  "ttft_ms", "tpot_ms", "e2e_latency_ms")

#: Metrics summed over every device of the row (data-parallel replicas add up).
_FLEET_METRICS: Final = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s")

#: Decode-rate metrics a ``latency`` row without ``output_len`` still defines (batch / TPOT).
_DECODE_RATE_METRICS: Final = ("output_tokens_per_s", "tpot_ms", "output_tokens_per_s_per_device")

#: Latency metrics of an offline run that include the wait behind the other prompts: undefined without
#: the run's size (num_prompts) or the load generator's concurrency.
_QUEUE_METRICS: Final = ("ttft_ms", "e2e_latency_ms")

#: Largest tensor-parallel degree of the conventional layout (one server; see the training predictor).
CONVENTIONAL_TP_MAX: Final = 8


def row_dataset(row: ValidationRow, assumptions: Assumptions | None = None) -> tuple[str, str] | None:
    """(dataset id, how it was found) for a row: its ``dataset`` column, else a known dataset named in
    its notes, source or printed text, else its engine's benchmark default; None when nothing names one."""
    named = row.get("dataset")
    if named is not None:
        ds_id = find_dataset(str(named))
        if ds_id is None:
            raise UserInputError(f"unknown dataset {named!r}; known: {', '.join(sorted(load_datasets().datasets))}",
                                 field="dataset")
        return ds_id, "the row's dataset column"
    text = " ".join(row.raw.get(c) or "" for c in ("notes", "source", "printed"))
    for ds_id, ds in load_datasets().datasets.items():
        for name in (ds_id, *ds.aliases):
            if re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", text, re.IGNORECASE):
                return ds_id, "named in the row's text"
    try:
        eng = (assumptions or default_assumptions()).engine(row.get("engine"))
    except UserInputError:
        return None
    if eng.benchmark_dataset:
        return eng.benchmark_dataset, f"{eng.name}'s own benchmark samples it by default (engines.yaml)"
    return None


def with_dataset_lengths(row: ValidationRow, assumptions: Assumptions | None = None
                         ) -> tuple[ValidationRow, DatasetLengths | None, str]:
    """The row with blank lengths filled from its dataset's means for the model's tokenizer (rounded to
    whole tokens), the dataset's lengths and how the dataset was found; the row unchanged (None, "")
    when its lengths are given or no dataset is found."""
    missing_in = row.get("input_len") is None
    missing_out = row.get("output_len") is None and (missing_in or not _output_len_optional(row))
    if not (missing_in or missing_out) or row.metric not in METRICS:
        return row, None, ""
    found = row_dataset(row, assumptions)
    if found is None:
        return row, None, ""
    ds = dataset_lengths(found[0], model_from_row(row).vocab_size, field="dataset")
    raw = dict(row.raw)
    if missing_in:
        raw["input_len"] = str(round(ds.input_mean))
    if missing_out:
        raw["output_len"] = str(round(ds.output_mean))
    how = found[1]
    prompts = _prompts_in_notes(row, assumptions)
    if prompts is not None:
        raw["num_prompts"] = str(prompts)
        how += f"; {prompts} prompts sent at once, as the notes say"
    return replace(row, raw=raw), ds, how


#: "max batch N" in a row's notes: the engine's cap on running sequences (LMDeploy's table column "batch:
#: the max batch size during inference").
_MAX_BATCH_RE: Final = re.compile(r"\bmax(?:imum)?\s+batch(?:\s+size)?\s*[:=]?\s*(\d+)\b", re.IGNORECASE)


def with_notes_batch_cap(row: ValidationRow) -> ValidationRow:
    """The row with ``max_num_seqs`` (the engine's running-sequence cap) read from its notes ("max batch
    N") where the file has no such column and the row gives neither a batch nor a concurrency (a run
    at the engine's own limit); the row unchanged otherwise."""
    if row.get("max_num_seqs") is not None or row.get("batch") or row.get("concurrency") or row.kind != "infer":
        return row
    caps = {int(m.group(1)) for m in _MAX_BATCH_RE.finditer(row.raw.get("notes") or "")}
    if len(caps) != 1:
        return row
    return replace(row, raw={**row.raw, "max_num_seqs": str(caps.pop())})


#: "N prompts" / "N sampled prompts" in a row's notes: the size of a dataset-driven run.
_PROMPTS_RE: Final = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)\s+(?:sampled\s+)?prompts\b", re.IGNORECASE)


def _prompts_in_notes(row: ValidationRow, assumptions: Assumptions | None) -> int | None:
    """The number of prompts a dataset-driven offline run sent at once, read from its notes where the
    file has no ``num_prompts`` column; None where the row gives a batch, a concurrency or num_prompts,
    where the notes give no single count, or where its engine's own benchmark keeps a fixed number in
    flight (a closed loop, whose size the notes do not say)."""
    if (row.get("num_prompts") is not None or row.get("batch") or row.get("concurrency")
            or row.get("scenario") != "offline"):
        return None
    try:
        if (assumptions or default_assumptions()).engine(row.get("engine")).benchmark_closed_loop:
            return None
    except UserInputError:
        return None
    counts = {int(m.group(1).replace(",", "")) for m in _PROMPTS_RE.finditer(row.raw.get("notes") or "")}
    return counts.pop() if len(counts) == 1 else None


def check_row(row: ValidationRow) -> None:
    """What the row must give before a replica is built, first cause first: a metric the planner
    predicts, then fixed lengths (a dataset-driven row without a dataset the planner knows cannot be
    predicted whatever its precision)."""
    if row.metric not in METRICS:
        raise UserInputError(f"metric {row.metric!r} is not an inference metric the planner predicts", field="metric")
    if row.get("input_len") is None:
        raise UserInputError("input length not fixed (dataset-driven) and no dataset the planner knows is named "
                             "(a dataset column, or e.g. ShareGPT in the notes); the planner needs lengths",
                             field="input_len")
    if row.get("output_len") is None and not _output_len_optional(row):
        raise UserInputError("output length not fixed (dataset-driven) and no dataset the planner knows is named; "
                             "the planner needs lengths", field="output_len")
    if row.get("num_prompts") is not None and row.get("num_prompts") < 1:
        raise UserInputError(f"must be at least 1 (the prompts the run sent), got {row.get('num_prompts')}",
                             field="num_prompts")


def _output_len_optional(row: ValidationRow) -> bool:
    return row.metric == "ttft_ms" or (row.get("scenario") == "latency" and row.metric in _DECODE_RATE_METRICS
                                       and bool(row.get("batch")))


def predict(row: ValidationRow, assumptions: Assumptions | None = None) -> Prediction:
    """Predict the row's metric (see module docstring); the planner's errors propagate (the harness
    turns them into the row's reason). ``assumptions``: None means the built-in defaults."""
    row = with_notes_batch_cap(row)
    row, ds, found = with_dataset_lengths(row, assumptions)
    check_row(row)
    pred = _predict(row, assumptions, ds)
    if ds is not None:
        pred.details["dataset"] = {**ds.to_dict(), "found": found}
    return pred


def _predict(row: ValidationRow, assumptions: Assumptions | None, ds: DatasetLengths | None = None) -> Prediction:
    tp = row.get("tp")
    if _server_row(row):
        # Closed-loop load (a fixed number of clients, or a server scenario): the request-level
        # simulator, which sees queueing for prefill and the running-sequence limit.
        from xpuplan.serve.sim.validation import simulate_row

        value = simulate_row(row, assumptions, model=model_from_row(row),
                             lengths=dataset_request_lengths(ds) if ds else None)
        return Prediction(value, details={"method": "request-level simulation (closed loop)"})
    if _offline_queue_row(row) and not _finite_run_row(row) and row.metric in _QUEUE_METRICS:
        raise UserInputError(f"{row.metric} of an offline run depends on how many prompts wait: give num_prompts "
                             "(prompts sent at once) or concurrency (the load generator's clients)",
                             field="num_prompts")
    value, details = _predict_at(row, tp or 1, assumptions)
    if _finite_run_row(row):
        from xpuplan.serve.sim.validation import simulate_row

        details.update(steady_state=value, method=f"request-level simulation of the finite run "
                       f"({row.get('num_prompts')} prompts at t = 0; rates over the makespan)")
        value = simulate_row(row, assumptions, model=model_from_row(row),
                             lengths=dataset_request_lengths(ds, int(row.get("num_prompts"))) if ds else None)
    elif _offline_queue_row(row):
        # Reported beside the analytic figure: the simulator with a prompt queue that never empties.
        from xpuplan.serve.sim.validation import simulate_row

        details["simulated"] = simulate_row(row, assumptions, model=model_from_row(row))
    if tp is None:
        details["layout"] = "tp not given: one device per replica (tp=1), the rest data-parallel"
        details["conventional"] = _conventional(row, assumptions)
    return Prediction(value, details=details)


def _server_row(row: ValidationRow) -> bool:
    from xpuplan.serve.sim.validation import is_simulated_row

    return is_simulated_row(row) and (bool(row.get("concurrency")) or row.get("scenario") == "server")


def _offline_queue_row(row: ValidationRow) -> bool:
    from xpuplan.serve.sim.validation import is_simulated_row

    return is_simulated_row(row) and not _server_row(row)


def _finite_run_row(row: ValidationRow) -> bool:
    from xpuplan.serve.sim.validation import is_finite_run

    return is_finite_run(row) and _offline_queue_row(row)


def _replica(row: ValidationRow, tp: int, assumptions: Assumptions | None) -> Replica:
    model = model_from_row(row)
    device = load_catalog().get(row.hardware)
    return make_replica(model, device, tp=tp, pp=row.get("pp") or 1, ep=row.get("ep") or 1, etp=row.get("etp"),
                        max_num_seqs=row.get("max_num_seqs"),
                        dtype=row.get("weight_dtype") or row.precision, kv_dtype=row.get("kv_dtype"),
                        engine=row.get("engine"), assumptions=assumptions)


def _predict_at(row: ValidationRow, tp: int, assumptions: Assumptions | None) -> tuple[float, dict[str, Any]]:
    rep = _replica(row, tp, assumptions)
    if row.n_devices % rep.n_devices:
        raise UserInputError(f"n_devices ({row.n_devices}) is not a multiple of tp·pp·ep ({rep.n_devices})",
                             field="n_devices")
    replicas = row.n_devices // rep.n_devices
    in_len, out_len = row.get("input_len"), row.get("output_len")
    batch, conc = row.get("batch"), row.get("concurrency")
    details: dict[str, Any] = {"replica": rep.key, "replicas": replicas, "efficiency_source": rep.eff.source}
    if out_len is None:
        if row.metric == "ttft_ms":
            out_len = 1
            details["assumed"] = "output_len blank: TTFT is the prefill alone"
        else:  # a latency row's decode rate (check_row admits no other case)
            st = step_time(rep, decode_seqs=batch, decode_context=in_len)
            details.update(assumed="output_len blank: steady decode rate at the prompt's context", mode="decode-step",
                           tpot_ms=st.total_s * 1e3, bound=st.bound)
            per_replica = batch / st.total_s
            value = {"output_tokens_per_s": per_replica * replicas, "tpot_ms": st.total_s * 1e3,
                     "output_tokens_per_s_per_device": per_replica / rep.n_devices}[row.metric]
            return value, details
    if batch:
        est = estimate_static(rep, in_len, out_len, batch, check_memory=False)
    elif conc:
        est = estimate_continuous(rep, in_len, out_len, conc, check_memory=False)
    else:
        est = max_throughput(rep, in_len, out_len)
    value = est.metric(row.metric) * (replicas if row.metric in _FLEET_METRICS else 1)
    details.update(mode=est.mode, batch=est.batch, ttft_ms=est.ttft_s * 1e3, tpot_ms=est.tpot_s * 1e3,
                   prefill_bound=est.prefill.bound, decode_bound=est.decode.bound, fits=est.fits,
                   kv_dtype=rep.precision.kv_dtype)
    if est.notes:
        details["notes"] = est.notes
    if not est.fits:
        # The published run held this batch: a misfit is the memory model's error, reported with the row.
        details["memory_check"] = next((n for n in est.notes if n.startswith("memory check")),
                                       "the published batch does not fit the memory model")
    return value, details


def _conventional(row: ValidationRow, assumptions: Assumptions | None) -> dict[str, Any]:
    """The prediction with TP over one server: the largest divisor of the heads and of the device
    count up to the scale-up domain (at most :data:`CONVENTIONAL_TP_MAX`)."""
    try:
        model = model_from_row(row)
        device = load_catalog().get(row.hardware)
        limit = max(1, min(device.scale_up_domain, CONVENTIONAL_TP_MAX))
        tp = max(t for t in range(1, limit + 1) if model.n_heads % t == 0 and row.n_devices % t == 0)
        value, details = _predict_at(row, tp, assumptions)
    except UserInputError as exc:
        return {"reason": exc.render()}
    return {"layout": f"tp{tp} (TP over a server)", "replica": details["replica"], "predicted": value,
            "error": value / row.value - 1.0}
