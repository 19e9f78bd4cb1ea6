"""Predicting a validation row by simulation: a closed loop of ``concurrency`` clients.

For ``kind = infer`` rows measured by a serving benchmark at a fixed concurrency (``scenario =
server``, or a ``concurrency`` column): the row's replica (hardware, tp/pp/ep, precision, KV dtype,
engine as printed) serves a closed loop of ``concurrency`` clients (split evenly over the row's
data-parallel replicas), each sending a request of the row's fixed lengths as soon as its previous
one has finished — what ``benchmark_serving.py --max-concurrency`` and similar tools do. The run
lasts ``ROUNDS`` request lifetimes (from the analytic estimate) and rates are measured over its
last ``1 - WARMUP_SHARE`` so the ramp-up is left out; latencies are means over the requests
completed in that window. :func:`simulate_row` returns the row's metric, in the row's unit.

A row that gives ``num_prompts`` (an offline run of that many prompts, all sent at once: ``vllm bench
serve`` without a request rate, ``trtllm-bench throughput``) is simulated as that finite run instead: the
prompts arrive at t = 0 (split evenly over the data-parallel replicas), the engine admits them under its
own limits, and rates are the run's tokens or requests over its makespan, from the first arrival to the
last completion (what those tools print), latencies the means over all requests. The ramp-up (every
slot prefilling at once) and the tail (the last requests decoding at a shrinking batch) are then in the
figure, as they are in the measurement; a steady state overstates a finite run's throughput.
"""

from __future__ import annotations

import math
from typing import Any, Final

from xpuplan.catalog import load_catalog
from xpuplan.catalog.assumptions import Assumptions
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.models.arch import ModelArch
from xpuplan.serve.estimate import estimate_continuous
from xpuplan.serve.replica import make_replica
from xpuplan.serve.sim.config import SimConfig
from xpuplan.serve.sim.engine import Simulation

#: Request lifetimes a closed-loop validation run lasts (enough that ramp-up and tail are small).
ROUNDS: Final = 12
#: Share of the run left out at the start (ramp-up: all clients start at once).
WARMUP_SHARE: Final = 0.25
#: Clients per sequence slot (``max_num_seqs``) that model an offline run's full prompt queue: with
#: twice as many clients as the engine runs, a request is always waiting (vLLM's offline benchmark
#: submits every prompt at once; only the engine's limits and the KV cache bound the batch).
OFFLINE_CLIENTS_PER_SEQ: Final = 2
#: Arrival window of a finite run's trace (s): every prompt is sent at t = 0, so any positive window holds them.
FINITE_ARRIVAL_WINDOW_S: Final = 1.0
#: How long a finite run may take to drain (s): far beyond any benchmark's makespan (a day).
FINITE_DRAIN_S: Final = 86_400.0
#: Metrics a closed loop predicts (the validation files' names; latencies in ms).
METRICS: Final = ("output_tokens_per_s", "output_tokens_per_s_per_device", "total_tokens_per_s", "requests_per_s",
                  "ttft_ms", "tpot_ms", "e2e_latency_ms")


def _offline_queue(row: Any) -> bool:
    return row.get("scenario") == "offline" and not row.get("batch") and not row.get("concurrency")


def engine_name(row: Any, rep: Any) -> str:
    """The engine as the row prints it (its version selects kernels and defaults), else the replica's family."""
    return str(row.get("engine") or rep.engine.id)


def is_finite_run(row: Any) -> bool:
    """True for an offline row that gives the number of prompts its run sent (module doc)."""
    return _offline_queue(row) and bool(row.get("num_prompts"))


def is_simulated_row(row: Any) -> bool:
    """True for rows this module predicts: fixed lengths and a concurrency (or ``scenario = server``
    with a batch taken as the concurrency), or an offline throughput run without a batch (a
    prompt queue that never empties: ``OFFLINE_CLIENTS_PER_SEQ`` clients per sequence slot)."""
    if row.get("input_len") is None or row.get("output_len") is None or row.metric not in METRICS:
        return False
    return (bool(row.get("concurrency")) or (row.get("scenario") == "server" and bool(row.get("batch")))
            or _offline_queue(row))


def simulate_row(row: Any, assumptions: Assumptions | None = None, *, model: ModelArch | None = None,
                 seed: int = 0, lengths: tuple[list[int], list[int]] | None = None) -> float:
    """The row's metric predicted by a closed-loop simulation (module doc). UserInputError when the
    row lacks what is needed (lengths, a concurrency, a metric this predicts).

    ``row`` is a ``validate.rows.ValidationRow`` (duck-typed: ``get``, ``metric``, ``hardware``,
    ``n_devices``, ``precision``). ``model``: the row's architecture; None looks the ``model``
    column up among the presets. The validation harness (a higher layer) passes
    ``validate.rows.model_from_row(row)`` so rows that describe their architecture work too.
    ``lengths``: (prompt, output) tokens of each request of a finite run whose lengths vary (a
    dataset-driven run), one pair per prompt in the order sent; None: the row's fixed lengths.
    """
    if row.metric not in METRICS:
        raise UserInputError(f"metric {row.metric!r} is not one the simulator predicts", field="metric")
    in_len, out_len = row.get("input_len"), row.get("output_len")
    if in_len is None or out_len is None:
        raise UserInputError("the simulator needs fixed input and output lengths", field="input_len")
    conc = row.get("concurrency") or (row.get("batch") if row.get("scenario") == "server" else None)
    if not conc and not _offline_queue(row):
        raise UserInputError("no concurrency: the closed loop needs the number of clients", field="concurrency")
    if model is None:
        model = get_model(str(row.get("model")))
    device = load_catalog().get(row.hardware)
    tp, pp, ep = row.get("tp") or 1, row.get("pp") or 1, row.get("ep") or 1
    rep = make_replica(model, device, tp=tp, pp=pp, ep=ep, etp=row.get("etp"), max_num_seqs=row.get("max_num_seqs"),
                       dtype=row.get("weight_dtype") or row.precision,
                       kv_dtype=row.get("kv_dtype"), engine=row.get("engine"), assumptions=assumptions)
    if row.n_devices % rep.n_devices:
        raise UserInputError(f"n_devices ({row.n_devices}) is not a multiple of tp·pp·ep ({rep.n_devices})",
                             field="n_devices")
    replicas = row.n_devices // rep.n_devices
    if is_finite_run(row):
        return _simulate_finite_run(row, rep, model, device.id, replicas, seed, assumptions, lengths)
    if conc:
        per_replica = max(1, math.ceil(conc / replicas))
    else:
        per_replica = OFFLINE_CLIENTS_PER_SEQ * rep.max_num_seqs
    est = estimate_continuous(rep, in_len, out_len, min(per_replica, rep.max_num_seqs), check_memory=False)
    duration = max(ROUNDS * est.e2e_latency_s, 1e-3)
    cfg = SimConfig.model_validate({
        "model": model.id,
        "pools": [{"name": "row", "hardware": device.id, "tp": tp, "pp": pp, "ep": ep, "etp": rep.etp, "replicas": 1,
                   "dtype": rep.precision.scheme, "kv_dtype": rep.precision.kv_dtype, "engine": engine_name(row, rep),
                   "batching": "continuous",
                   "max_num_seqs": rep.max_num_seqs if not conc else max(rep.max_num_seqs, per_replica)}],
        "classes": [{"name": "bench", "arrival": "closed", "clients": per_replica, "input_len": in_len,
                     "output_len": out_len,
                     **({"lengths": {"input_len": lengths[0], "output_len": lengths[1], "source": "dataset lengths"}}
                        if lengths is not None else {})}],
        "duration_s": duration, "drain_s": 0.0,
    })
    sim = Simulation(cfg, seed=seed, assumptions=assumptions, models={model.id: model})
    sim.run()
    t0 = WARMUP_SHARE * duration
    return _metric(sim, row.metric, t0, duration - t0, replicas, rep.n_devices)


def _simulate_finite_run(row: Any, rep: Any, model: ModelArch, device_id: str, replicas: int, seed: int,
                         assumptions: Assumptions | None, lengths: tuple[list[int], list[int]] | None = None) -> float:
    """``num_prompts`` prompts at t = 0 on the row's replicas, served to the end (module doc); with
    ``lengths``, every ``replicas``-th request of the list goes to the simulated replica."""
    n = math.ceil(int(row.get("num_prompts")) / replicas)
    in_len, out_len = int(row.get("input_len")), int(row.get("output_len"))
    if lengths is not None:
        ins, outs = lengths[0][::replicas][:n], lengths[1][::replicas][:n]
        bench: dict[str, Any] = {"name": "bench", "arrival": "trace", "trace": {
            "times_s": [0.0] * len(ins), "input_len": ins, "output_len": outs, "source": "dataset lengths"}}
        n = len(ins)
    else:
        bench = {"name": "bench", "arrival": "burst", "requests": n, "input_len": in_len, "output_len": out_len}
    cfg = SimConfig.model_validate({
        "model": model.id,
        "pools": [{"name": "row", "hardware": device_id, "tp": rep.tp, "pp": rep.pp, "ep": rep.ep, "etp": rep.etp,
                   "replicas": 1,
                   "dtype": rep.precision.scheme, "kv_dtype": rep.precision.kv_dtype, "engine": engine_name(row, rep),
                   "batching": "continuous", "max_num_seqs": rep.max_num_seqs}],
        "classes": [bench],
        # arrivals end at once; the run is served to its last completion (drain far beyond any makespan)
        "duration_s": FINITE_ARRIVAL_WINDOW_S, "drain_s": FINITE_DRAIN_S,
    })
    sim = Simulation(cfg, seed=seed, assumptions=assumptions, models={model.id: model})
    sim.run()
    if len(sim.rec_finish) < n:
        raise UserInputError(f"{n - len(sim.rec_finish)} of the run's {n} prompts could not be served "
                             f"(longer than the KV cache holds)", field="num_prompts")
    # every request counts, and rates are over the makespan (the prompts all left at t = 0)
    return _metric(sim, row.metric, 0.0, max(sim.rec_finish), replicas, rep.n_devices)


def _metric(sim: Simulation, metric: str, t0: float, window: float, replicas: int, devices: int) -> float:
    """The row's metric over the requests completed from ``t0`` on, rates per second of ``window``."""
    done = [i for i, e2e in enumerate(sim.rec_e2e) if sim.rec_finish[i] >= t0]
    if not done:
        raise UserInputError("no request completed in the measurement window", field="concurrency")
    out_tok = sum(sim.rec_out[i] for i in done)
    if metric == "output_tokens_per_s":
        return out_tok / window * replicas
    if metric == "output_tokens_per_s_per_device":
        return out_tok / window / devices
    if metric == "total_tokens_per_s":
        return (out_tok + sum(sim.rec_in[i] for i in done)) / window * replicas
    if metric == "requests_per_s":
        return len(done) / window * replicas
    series = {"ttft_ms": sim.rec_ttft, "tpot_ms": sim.rec_tpot, "e2e_latency_ms": sim.rec_e2e}[metric]
    vals = [series[i] for i in done if not math.isnan(series[i])]
    return 1e3 * sum(vals) / len(vals)
