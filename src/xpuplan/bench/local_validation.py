"""``xpuplan validate --local RUN``: the planner's predictions vs this machine's measurements.

For a benchmark run, the measured small-transformer steps are predicted with perf's functions
and the device's efficiency parameters (the stored calibration profile when there is one, laid over
the given assumptions, else those assumptions' values) - the same math the planners use:

- decode step = one forward pass at q_len 1 over ``decode_context + 1`` keys
  (``layer_ops`` per layer + ``head_ops``);
- training step = forward + backward (2 x forward: the two GEMMs per weight of the backward
  pass) + optimizer (``cost_adam_step`` over every parameter).

For imported runs with validation rows (CSV, serving benchmarks, training logs) the stored rows go through the registered predictors, exactly as
``xpuplan validate FILE.csv`` does. The result is a :class:`~xpuplan.validate.ValidationReport`
with the same ``rows`` as the CSV validation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xpuplan import units
from xpuplan.bench.model import GRAD_BYTES, SmallTransformerConfig
from xpuplan.calibrate.profile import assumptions_with_profiles
from xpuplan.catalog import load_catalog
from xpuplan.catalog.assumptions import Assumptions
from xpuplan.catalog.device import Device
from xpuplan.catalog.efficiency import Efficiency
from xpuplan.errors import UserInputError
from xpuplan.perf.ops import head_ops, layer_ops
from xpuplan.perf.params import params_total
from xpuplan.perf.roofline import cost_adam_step, op_time
from xpuplan.store.engine import Store
from xpuplan.store.models import VALIDATION_ROW_KINDS, Measurement, Run
from xpuplan.store.records import resolve_run, run_measurements
from xpuplan.validate.core import RowResult, ValidationReport, ValidationRow, validate_rows

#: Backward pass time relative to the forward pass: each weight GEMM has two backward GEMMs
#: (input gradient and weight gradient) of the forward's size; attention's backward is counted
#: the same way (a convention shared with the FLOP model's 3x forward).
BACKWARD_TO_FORWARD = 2.0


@dataclass(frozen=True)
class StepPrediction:
    time_s: float
    breakdown: dict[str, float]


def predict_decode_step(cfg: SmallTransformerConfig, device: Device, dtype: str, eff: Efficiency) -> StepPrediction:
    arch = cfg.to_arch()
    kv_len = cfg.decode_context + 1
    ops = layer_ops(arch, batch=cfg.decode_batch, q_len=1, kv_len=kv_len, dtype=dtype, kv_dtype=dtype)
    layer = sum(op_time(o, device, dtype, eff).time_s for o in ops)
    head = sum(op_time(o, device, dtype, eff).time_s for o in head_ops(arch, rows=cfg.decode_batch, dtype=dtype,
                                                                          weight_dtype=dtype))
    total = cfg.layers * layer + head
    return StepPrediction(total, {"layers_s": cfg.layers * layer, "head_s": head})


def predict_train_step(cfg: SmallTransformerConfig, device: Device, dtype: str, eff: Efficiency) -> StepPrediction:
    arch = cfg.to_arch()
    s = cfg.train_seq
    ops = layer_ops(arch, batch=cfg.train_batch, q_len=s, kv_len=s, dtype=dtype)
    layer = sum(op_time(o, device, dtype, eff).time_s for o in ops)
    head = sum(op_time(o, device, dtype, eff).time_s for o in head_ops(arch, rows=cfg.train_batch * s, dtype=dtype))
    forward = cfg.layers * layer + head
    backward = BACKWARD_TO_FORWARD * forward
    optimizer = op_time(cost_adam_step(params_total(arch), GRAD_BYTES), device, dtype, eff).time_s
    return StepPrediction(forward + backward + optimizer, {"forward_s": forward, "backward_s": backward, "optimizer_s": optimizer})


def efficiency_for_run(device: Device, db_url: str | None, assumptions: Assumptions | None = None) -> Efficiency:
    """What a job would hand the planners: the device's newest calibration profile in this store
    laid over ``assumptions`` (built-in when None), else those assumptions' values."""
    return assumptions_with_profiles(assumptions, [device], db_url).efficiency(device)


def _bench_rows(run: Run, meas: list[Measurement], db_url: str | None, eff: Efficiency | None,
                assumptions: Assumptions | None = None) -> list[RowResult]:
    steps = [m for m in meas if m.kind == "model_step"]
    if not steps:
        raise UserInputError(f"run {run.id} has no model-step measurements to validate (was it run with --only?)",
                             field="run")
    if not run.device_id:
        raise UserInputError(f"run {run.id} has no catalog device ({run.device_name!r}); re-run with --device-id",
                             field="run")
    device = load_catalog().get(run.device_id)
    eff = eff or efficiency_for_run(device, db_url, assumptions)
    source = f"xpuplan bench run {run.id} ({run.device_name}, {run.started_at:%Y-%m-%d})"
    out = []
    for m in steps:
        cfg = SmallTransformerConfig.from_dict(m.params["model"])
        dtype = m.dtype or "fp32"
        phase = m.params.get("phase")
        if phase == "decode":
            pred = predict_decode_step(cfg, device, dtype, eff)
            metric, measured, predicted = "tpot_ms", m.value / units.MS, pred.time_s / units.MS
            kind = "infer"
        else:
            pred = predict_train_step(cfg, device, dtype, eff)
            metric, measured, predicted = "step_time_s", m.value, pred.time_s
            kind = "train"
        details: dict[str, Any] = {"name": m.name, "dtype": dtype, "efficiency_source": eff.source,
                                   "breakdown_s": pred.breakdown, "model": cfg.to_dict()}
        out.append(RowResult(id=f"run{run.id}:{phase}_step", kind=kind, metric=metric, hardware=device.id, trust="A",
                             source=source, measured=measured, predicted=predicted, error=predicted / measured - 1.0,
                             reason=None, details=details))
    return out


def rows_from_run(run: Run, meas: list[Measurement]) -> list[ValidationRow]:
    """Validation rows stored by ``import csv``, ``import vllm``, ``import sglang`` ... (measurement kind
    ``validation_row``)."""
    rows = []
    for m in meas:
        if m.kind != "validation_row":
            continue
        raw = {k: ("" if v is None else str(v)) for k, v in (m.params.get("row") or {}).items()}
        rows.append(ValidationRow(
            id=raw.get("id", m.name), kind=raw.get("kind", ""), metric=m.metric, value=m.value,
            trust=raw.get("trust", "B"), source=raw.get("source", run.source or ""), hardware=raw.get("hardware", ""),
            n_devices=int(float(raw.get("n_devices") or 1)), precision=raw.get("precision", ""), raw=raw,
        ))
    return rows


def validate_run(store: Store, ref: str, *, eff: Efficiency | None = None,
                 assumptions: Assumptions | None = None) -> tuple[Run, ValidationReport]:
    """Predictions vs the measurements of stored run ``ref`` (an id or ``latest``); a benchmark run's
    device uses ``eff``, else its newest stored profile over ``assumptions`` (built-in when None)."""
    run = resolve_run(store, ref, kinds=("bench", *VALIDATION_ROW_KINDS))
    meas = run_measurements(store, run.id)
    if run.kind == "bench":
        return run, ValidationReport(_bench_rows(run, meas, store.url, eff, assumptions))
    if run.kind in VALIDATION_ROW_KINDS:
        rows = rows_from_run(run, meas)
        if not rows:
            raise UserInputError(f"run {run.id} holds no validation rows", field="run")
        return run, validate_rows(rows)
    raise UserInputError(f"run {run.id} is a {run.kind} run: nothing the planner predicts row by row; "
                         "use it with `xpuplan calibrate`", field="run")
