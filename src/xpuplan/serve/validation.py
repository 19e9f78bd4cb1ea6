"""Predictor for ``kind = infer`` validation rows (``xpuplan validate``).

For each row: the model is the preset named in ``model`` (else built from the architecture
columns); the replica is ``hardware`` with ``tp``/``pp``/``ep``, the row's ``weight_dtype`` (else
``precision``), ``kv_dtype`` (blank: the scheme's default) and ``engine`` (name and version as
printed); ``n_devices`` beyond one replica are data-parallel copies. The workload:

* ``batch`` given: the requests start together with equal lengths, i.e. a static batch (what
  static-batching benchmarks measure, and what continuous batching degenerates to when every
  request arrives at once with the same lengths);
* only ``concurrency`` given: the continuous-batching steady state at that concurrency;
* neither: the engine's maximum-throughput point (largest concurrency the KV cache holds).

A missing ``output_len`` is 1 for ``ttft_ms`` (the prefill alone) and, for decode-rate metrics of a
``latency`` row, the steady decode rate at the prompt's context (batch / TPOT). Rows whose lengths
are not fixed (dataset-driven) cannot be predicted and say so.
"""

from __future__ import annotations

from typing import Any

from xpuplan.catalog import load_catalog
from xpuplan.catalog.assumptions import Assumptions
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.models.arch import ModelArch, MoEConfig
from xpuplan.serve.estimate import estimate_continuous, estimate_static, max_throughput
from xpuplan.serve.replica import make_replica, step_time
from xpuplan.validate.core import Prediction, ValidationRow, register_predictor

METRICS = ("output_tokens_per_s", "output_tokens_per_s_per_device", "total_tokens_per_s", "requests_per_s",
           "ttft_ms", "tpot_ms", "e2e_latency_ms")

#: Metrics summed over every device of the row (data-parallel replicas add up).
_FLEET_METRICS = ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s")


def model_from_row(row: ValidationRow) -> ModelArch:
    """The preset named in ``model``, else a ModelArch from the architecture columns."""
    name = row.get("model")
    if name:
        return get_model(name)
    need = ("layers", "d_model", "heads", "ffn", "vocab")
    missing = [c for c in need if row.get(c) is None]
    if missing:
        raise UserInputError(f"no preset and missing architecture column(s) {', '.join(missing)}", field=missing[0])
    moe = None
    if row.get("moe_experts"):
        moe = MoEConfig(n_routed_experts=row.get("moe_experts"), top_k=row.get("moe_top_k") or 1,
                        expert_ffn_dim=row.get("moe_ffn") or row.get("ffn"),
                        n_shared_experts=row.get("moe_shared_experts") or 0,
                        n_dense_layers=row.get("moe_dense_layers") or 0)
    return ModelArch(
        id=f"row-{row.id.lower()}", name=f"architecture of row {row.id}", n_layers=row.get("layers"),
        d_model=row.get("d_model"), n_heads=row.get("heads"), n_kv_heads=row.get("kv_heads"),
        head_dim=row.get("head_dim"), ffn_dim=row.get("ffn"), vocab_size=row.get("vocab"),
        mlp="gated" if row.get("gated_mlp") in (None, 1) else "classic", moe=moe,
    )


def predict(row: ValidationRow, assumptions: Assumptions | None = None) -> Prediction:
    """Predict the row's metric (see module docstring); ``Prediction.cannot`` with the reason otherwise.
    ``assumptions``: the bundle the replica is built with (None: the built-in defaults)."""
    if row.metric not in METRICS:
        return Prediction.cannot(f"metric {row.metric!r} is not an inference metric the planner predicts")
    model = model_from_row(row)
    device = load_catalog().get(row.hardware)
    tp, pp, ep = row.get("tp") or 1, row.get("pp") or 1, row.get("ep") or 1
    rep = make_replica(model, device, tp=tp, pp=pp, ep=ep, dtype=row.get("weight_dtype") or row.precision,
                       kv_dtype=row.get("kv_dtype"), engine=row.get("engine"), assumptions=assumptions)
    if row.n_devices % rep.n_devices:
        return Prediction.cannot(f"n_devices ({row.n_devices}) is not a multiple of tp·pp·ep ({rep.n_devices})")
    replicas = row.n_devices // rep.n_devices
    in_len, out_len = row.get("input_len"), row.get("output_len")
    batch, conc = row.get("batch"), row.get("concurrency")
    if in_len is None:
        return Prediction.cannot("input length not fixed (dataset-driven) in the source; the planner needs lengths")
    details: dict[str, Any] = {"replica": rep.key, "replicas": replicas, "efficiency_source": rep.eff.source}
    value: float
    if out_len is None:
        if row.metric == "ttft_ms":
            out_len = 1
            details["assumed"] = "output_len blank: TTFT is the prefill alone"
        elif row.get("scenario") == "latency" and row.metric in ("output_tokens_per_s", "tpot_ms",
                                                                   "output_tokens_per_s_per_device") and batch:
            st = step_time(rep, decode_seqs=batch, decode_context=in_len)
            details.update(assumed="output_len blank: steady decode rate at the prompt's context", mode="decode-step",
                           tpot_ms=st.total_s * 1e3, bound=st.bound)
            per_replica = batch / st.total_s
            value = {"output_tokens_per_s": per_replica * replicas, "tpot_ms": st.total_s * 1e3,
                     "output_tokens_per_s_per_device": per_replica / rep.n_devices}[row.metric]
            return Prediction(value, details=details)
        else:
            return Prediction.cannot("output length not fixed (dataset-driven) in the source; the planner needs lengths")
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
    return Prediction(value, details=details)


register_predictor("infer", predict)
