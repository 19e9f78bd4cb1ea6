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
are not fixed (dataset-driven) cannot be predicted and say so, before anything else is checked.

A row without ``tp`` is predicted with one device per replica (tp = 1, the rest data-parallel), and
the details give the prediction for the conventional layout too (TP over one server).
"""

from __future__ import annotations

from typing import Any, Final

from xpuplan.catalog import load_catalog
from xpuplan.catalog.assumptions import Assumptions
from xpuplan.errors import UserInputError
from xpuplan.serve.estimate import estimate_continuous, estimate_static, max_throughput
from xpuplan.serve.replica import Replica, make_replica, step_time
from xpuplan.validate.core import Prediction
from xpuplan.validate.rows import ValidationRow, model_from_row

METRICS: Final = ("output_tokens_per_s", "output_tokens_per_s_per_device", "total_tokens_per_s", "requests_per_s",
                  "ttft_ms", "tpot_ms", "e2e_latency_ms")

#: Metrics summed over every device of the row (data-parallel replicas add up).
_FLEET_METRICS: Final = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s")

#: Decode-rate metrics a ``latency`` row without ``output_len`` still defines (batch / TPOT).
_DECODE_RATE_METRICS: Final = ("output_tokens_per_s", "tpot_ms", "output_tokens_per_s_per_device")

#: Largest tensor-parallel degree of the conventional layout (one server; see the training predictor).
CONVENTIONAL_TP_MAX: Final = 8


def check_row(row: ValidationRow) -> None:
    """What the row must give before a replica is built, first cause first: a metric the planner
    predicts, then fixed lengths (a dataset-driven row cannot be predicted whatever its precision)."""
    if row.metric not in METRICS:
        raise UserInputError(f"metric {row.metric!r} is not an inference metric the planner predicts", field="metric")
    if row.get("input_len") is None:
        raise UserInputError("input length not fixed (dataset-driven) in the source; the planner needs lengths",
                             field="input_len")
    if row.get("output_len") is None and not _output_len_optional(row):
        raise UserInputError("output length not fixed (dataset-driven) in the source; the planner needs lengths",
                             field="output_len")
    if row.get("num_prompts") is not None and row.get("num_prompts") < 1:
        raise UserInputError(f"must be at least 1 (the prompts the run sent), got {row.get('num_prompts')}",
                             field="num_prompts")


def _output_len_optional(row: ValidationRow) -> bool:
    return row.metric == "ttft_ms" or (row.get("scenario") == "latency" and row.metric in _DECODE_RATE_METRICS
                                       and bool(row.get("batch")))


def predict(row: ValidationRow, assumptions: Assumptions | None = None) -> Prediction:
    """Predict the row's metric (see module docstring); the planner's errors propagate (the harness
    turns them into the row's reason). ``assumptions``: None means the built-in defaults."""
    check_row(row)
    tp = row.get("tp")
    if _server_row(row):
        # Closed-loop load (a fixed number of clients, or a server scenario): the request-level
        # simulator, which sees queueing for prefill and the running-sequence limit.
        from xpuplan.serve.sim.validation import simulate_row

        value = simulate_row(row, assumptions, model=model_from_row(row))
        return Prediction(value, details={"method": "request-level simulation (closed loop)"})
    value, details = _predict_at(row, tp or 1, assumptions)
    if _finite_run_row(row):
        from xpuplan.serve.sim.validation import simulate_row

        details.update(steady_state=value, method=f"request-level simulation of the finite run "
                       f"({row.get('num_prompts')} prompts at t = 0; rates over the makespan)")
        value = simulate_row(row, assumptions, model=model_from_row(row))
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
    return make_replica(model, device, tp=tp, pp=row.get("pp") or 1, ep=row.get("ep") or 1,
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
