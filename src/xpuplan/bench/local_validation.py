"""``xpuplan validate --local RUN``: the planner's predictions vs this machine's measurements.

For a benchmark run, the measured small-transformer steps are predicted with perf's functions
and the device's efficiency parameters (the stored calibration profile when there is one, laid over
the given assumptions, else those assumptions' values) - the same math the planners use:

- decode step = one forward pass at q_len 1 over ``decode_context + 1`` keys
  (``layer_ops`` per layer + ``head_ops``), or the host's eager issue time of those operations (the
  run's tiny-model dispatch figure) when that is longer;
- training step = the training planner's compute of one device and one micro-batch
  (:func:`xpuplan.train.compute.layer_compute` per layer and for the head and loss, with its backward
  factors: 2 x the GEMMs, 2.5 x the fused attention, 2 x the elementwise ops) + what the bench model's
  eager mixed-precision code moves besides (:func:`bench_code_extra_bytes`) + optimizer
  (``cost_adam_step`` over all parameters).

For imported runs with validation rows (CSV, serving benchmarks, training logs) the stored rows go through the registered predictors, exactly as
``xpuplan validate FILE.csv`` does. The result is a :class:`~xpuplan.validate.ValidationReport`
with the same ``rows`` as the CSV validation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

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
from xpuplan.perf.roofline import OpCost, cost_adam_step, op_time
from xpuplan.store.engine import Store
from xpuplan.store.models import VALIDATION_ROW_KINDS, Measurement, Run
from xpuplan.store.records import resolve_run, run_measurements
from xpuplan.train.compute import (
    EAGER_SWIGLU_EXTRA_BYTES,
    ELEMENTWISE_BACKWARD_FACTOR,
    GEMM_BACKWARD_FACTOR,
    layer_compute,
)
from xpuplan.validate.core import RowResult, ValidationReport, ValidationRow, validate_rows

#: Bytes per element of a dtype conversion (read one, write the other) between fp32 and a 16-bit type.
CAST_FP32_16_BYTES: Final = 4.0 + 2.0
#: Bytes per element a strided (layout) copy moves in 16 bits: read 2, write 2.
LAYOUT_COPY_BYTES: Final = 2.0 + 2.0


def bench_code_extra_bytes(cfg: SmallTransformerConfig, dtype: str) -> dict[str, float]:
    """Bytes one training step of the bench model moves beyond what the planner's fused-kernel layer counts,
    from the way :func:`xpuplan.bench.model.build_model` and its step are written (eager PyTorch; on
    accelerators fp32 parameters under ``torch.autocast``, as plain PyTorch AMP training runs):

    - ``autocast weight casts``: autocast casts every linear weight to 16 bits once per forward and the
      backward casts its 16-bit gradient back to fp32 (:data:`CAST_FP32_16_BYTES` each way). Training
      stacks that keep 16-bit working weights (Megatron, torchtitan, FSDP mixed precision) pay neither.
    - ``fp32 residual stream``: the fp32 embedding makes the residual stream fp32, and autocast runs the
      norms in fp32, so the three GEMMs fed by a norm (QKV, gate/up, head) cast their input (and the
      backward its gradient), and each norm and residual add moves 4 B instead of 2 per element it reads
      and writes.
    - ``logits upcast``: ``logits.float()`` before the loss (and the gradient's cast back).
    - ``layout copies``: eager layouts the fused stacks avoid: the attention output's transpose to
      (b, s, d) (forward and backward), the backward of ``unbind`` over the permuted Q/K/V (the three
      gradients stacked, then copied back to the projection's layout) and of ``chunk`` over gate/up (the
      two gradients concatenated), :data:`LAYOUT_COPY_BYTES` per element each; and SiLU·up as two kernels
      (:data:`xpuplan.train.compute.EAGER_SWIGLU_EXTRA_BYTES`, forward and backward).

    The profile of one H200 step (``benchmarks/bench_step_profile.py``) puts these kernels at 24% of the
    step; they run below the STREAM rate the roofline charges (docs/measurement.md)."""
    tokens = cfg.train_batch * cfg.train_seq
    d, f, v, L = cfg.d_model, cfg.ffn, cfg.vocab, cfg.layers
    passes = 1.0 + ELEMENTWISE_BACKWARD_FACTOR  # forward + backward
    out = {"layout copies": L * tokens * (
        (d + d) * LAYOUT_COPY_BYTES  # attention output transpose, forward and backward
        + 2 * 3 * d * LAYOUT_COPY_BYTES  # Q/K/V gradients: stacked, then copied to the projection's layout
        + 2 * f * LAYOUT_COPY_BYTES  # gate/up gradients concatenated
        + f * EAGER_SWIGLU_EXTRA_BYTES * passes)}
    if dtype in ("bf16", "fp16"):
        linear_params = L * (4 * d * d + 3 * d * f) + v * d
        out["autocast weight casts"] = 2 * linear_params * CAST_FP32_16_BYTES
        # per layer: two norms and two residual adds at 4 B instead of 2 (read and write: +4 B each), QKV's
        # and gate/up's input casts; the head: its norm and input cast
        per_token_fwd = L * d * (4 * 4.0 + 2 * CAST_FP32_16_BYTES) + d * (4.0 + CAST_FP32_16_BYTES)
        out["fp32 residual stream"] = tokens * per_token_fwd * passes
        out["logits upcast"] = 2 * tokens * v * CAST_FP32_16_BYTES
    return out


@dataclass(frozen=True)
class StepPrediction:
    time_s: float
    breakdown: dict[str, float]


def predict_decode_step(cfg: SmallTransformerConfig, device: Device, dtype: str, eff: Efficiency,
                        host_issue_s: float | None = None) -> StepPrediction:
    """The bench model's eager decode step: the device's time (``layer_ops`` per layer + ``head_ops``, each with
    the device's per-kernel overhead), or the host's time to issue the same operations eagerly when that is
    longer (``host_issue_s`` per planner operation: the run's eager tiny-model step; the host queues kernels
    ahead of the device, so the slower of the two sets the pace)."""
    arch = cfg.to_arch()
    kv_len = cfg.decode_context + 1
    ops = layer_ops(arch, batch=cfg.decode_batch, q_len=1, kv_len=kv_len, dtype=dtype, kv_dtype=dtype)
    layer = sum(op_time(o, device, dtype, eff).time_s for o in ops)
    hops = head_ops(arch, rows=cfg.decode_batch, dtype=dtype, weight_dtype=dtype)
    head = sum(op_time(o, device, dtype, eff).time_s for o in hops)
    device_s = cfg.layers * layer + head
    breakdown = {"layers_s": cfg.layers * layer, "head_s": head}
    if host_issue_s is None:
        return StepPrediction(device_s, breakdown)
    host_s = (cfg.layers * len(ops) + len(hops)) * host_issue_s
    breakdown["host_issue_s"] = host_s
    return StepPrediction(max(device_s, host_s), breakdown)


def predict_train_step(cfg: SmallTransformerConfig, device: Device, dtype: str, eff: Efficiency) -> StepPrediction:
    """The bench model's training step on one device: the training planner's layer and head compute
    (:func:`~xpuplan.train.compute.layer_compute`, forward and backward as the planner's stage model sums
    them for a plan without recomputation), the bench code's extra traffic (:func:`bench_code_extra_bytes`)
    and the AdamW step."""
    arch = cfg.to_arch()
    c = layer_compute(arch, device, eff, micro_batch=cfg.train_batch, seq_len=cfg.train_seq, tp=1, cp=1, ep=1,
                      sp=False, precision=dtype)
    layer_fwd = c.dense_gemm + c.attn_fwd + c.dense_elem
    layer_bwd = GEMM_BACKWARD_FACTOR * c.dense_gemm + c.attn_bwd + ELEMENTWISE_BACKWARD_FACTOR * c.dense_elem
    head_fwd = c.head_gemm + c.head_elem
    head_bwd = GEMM_BACKWARD_FACTOR * c.head_gemm + ELEMENTWISE_BACKWARD_FACTOR * c.head_elem
    extra = {name: op_time(OpCost(name, "elementwise", 0.0, b), device, "bf16", eff).time_s
             for name, b in bench_code_extra_bytes(cfg, dtype).items()}
    optimizer = op_time(cost_adam_step(params_total(arch), GRAD_BYTES), device, dtype, eff).time_s
    forward = cfg.layers * layer_fwd + head_fwd
    backward = cfg.layers * layer_bwd + head_bwd
    breakdown = {"forward_s": forward, "backward_s": backward, "optimizer_s": optimizer,
                 **{f"{name.replace(' ', '_')}_s": t for name, t in extra.items()}}
    return StepPrediction(forward + backward + optimizer + sum(extra.values()), breakdown)


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
    eager = [m.time_s for m in meas if m.kind == "dispatch" and m.time_s]
    host_issue_s = eager[0] if eager else None
    out = []
    for m in steps:
        cfg = SmallTransformerConfig.from_dict(m.params["model"])
        dtype = m.dtype or "fp32"
        phase = m.params.get("phase")
        if phase == "decode":
            pred = predict_decode_step(cfg, device, dtype, eff, host_issue_s)
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
