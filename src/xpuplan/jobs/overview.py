"""The built-in main job (``xpuplan overview``): one model on several accelerators — memory, serving
and training at a glance.

``overview()`` composes the public planners (no model logic of its own): for each device it sizes a
serving deployment for a target load under latency SLOs (``serve.size_for_qps``) and searches the
best training plan at a device count (``train.search``), keeping per-device errors (missing catalog
figures, nothing fits) as reasons instead of failing the whole report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from pydantic import BaseModel, Field

from xpuplan.catalog.assumptions import default_assumptions
from xpuplan.errors import UserInputError, XpuplanError
from xpuplan.jobs.context import RunContext, default_context
from xpuplan.jobs.results import TRAIN_FIGURES, Result, used
from xpuplan.units import KWH
from xpuplan.workload.serving import DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN

if TYPE_CHECKING:
    from xpuplan.catalog import Device
    from xpuplan.models import ModelArch

#: Default comparison set: the guide's main GPU and NPU options, one per family and generation
#: (data: catalog/data/comparison_set.yaml, overridable through the assumptions file).
DEFAULT_HARDWARE: tuple[str, ...] = tuple(default_assumptions().comparison_set)
DEFAULT_MODEL = "llama3-70b"
#: Distinct reasons kept per device and part (the rest repeat the same cause).
MAX_REASONS = 3
#: The ``xpuplan overview`` flag of each field :func:`overview`'s errors name (the CLI names the flag typed).
FLAGS: Final = {"model": "--model", "hw": "--hw", "qps": "--qps", "input_len": "--in", "output_len": "--out",
                "ttft_ms": "--ttft-ms", "tpot_ms": "--tpot-ms", "train_tokens": "--train-tokens",
                "train_devices": "--train-devices"}


class ServingSummary(BaseModel):
    devices: int
    replicas: int
    tp: int
    dtype: str
    ttft_p_s: float | None
    tpot_s: float | None
    limited_by: str


class TrainingSummary(BaseModel):
    devices: int
    plan: str
    tokens_per_s: float
    mfu: float
    time_to_train_s: float | None
    energy_j: float | None
    memory_bytes_per_device: float


class DeviceOverview(BaseModel):
    device_id: str
    vendor: str
    kind: str
    memory_bytes: float | None
    bf16_flops_per_s: float | None = Field(default=None, description="dense 16-bit peak, FLOP/s: bf16, or fp16 on "
                                                                      "an fp16-only chip")
    min_trust: str
    serving: ServingSummary | None
    training: TrainingSummary | None
    reasons: list[str] = Field(default_factory=list)


class Overview(Result):
    """Result of ``xpuplan overview``."""

    NAME: ClassVar[str] = "overview"
    model_id: str
    total_params: int
    active_params: int
    weights_bytes_bf16: float
    kv_bytes_per_token_bf16: float
    qps: float
    input_len: int
    output_len: int
    ttft_s: float
    tpot_s: float
    train_tokens: float
    train_devices: int
    devices: list[DeviceOverview]


def _serving(ctx: RunContext, model: ModelArch, dev: Device, qps: float, input_len: int, output_len: int,
             ttft_ms: float, tpot_ms: float) -> tuple[ServingSummary | None, list[str]]:
    from xpuplan.jobs.serve import _assumptions_kw
    from xpuplan.serve import SLO, size_for_qps

    plan = size_for_qps(model, [dev], qps, input_len, output_len, SLO(ttft_s=ttft_ms / 1e3, tpot_s=tpot_ms / 1e3),
                        disagg=False, **_assumptions_kw(size_for_qps, ctx, [dev]))
    if not plan.options:
        reasons = plan.infeasible.get(dev.id, ["no configuration meets the SLO"])
        # the same cause repeats for every tp/pp tried: keep each distinct cause once
        causes = list(dict.fromkeys(r.split(": ", 1)[-1] for r in reasons))
        return None, [f"serving: {c}" for c in causes[:MAX_REASONS]]
    o = plan.options[0]
    at = o.at_target
    return ServingSummary(
        devices=o.devices, replicas=o.replicas, tp=o.replica_obj.tp if o.replica_obj else int(o.replica["tp"]),  # type: ignore[call-overload]
        dtype=o.replica_obj.precision.scheme if o.replica_obj else "",
        ttft_p_s=None if at is None else at.ttft_p_s, tpot_s=None if at is None else at.tpot_s,
        limited_by=o.limited_by,
    ), []


def _training(ctx: RunContext, model: ModelArch, dev: Device, tokens: float,
              n_devices: int) -> tuple[TrainingSummary | None, list[str]]:
    from xpuplan.train import Cluster
    from xpuplan.train import search_plans as search
    from xpuplan.workload import TrainingJob

    job = TrainingJob(train_tokens=tokens)
    res = search(model, Cluster.from_catalog(dev, n_devices, assumptions=ctx.assumptions([dev])), job, top=1)
    if not res.top:
        return None, [f"training: {r}" for r in res.reasons] or ["training: no plan fits"]
    e = res.top[0]
    return TrainingSummary(
        devices=e.n_devices, plan=e.key, tokens_per_s=e.tokens_per_s, mfu=e.mfu,
        time_to_train_s=e.time_to_train_s,
        energy_j=None if e.energy_kwh is None else e.energy_kwh * KWH,
        memory_bytes_per_device=e.memory.total_bytes,
    ), []


def overview(
    model: str | ModelArch = DEFAULT_MODEL,
    hardware: list[str] | tuple[str, ...] = DEFAULT_HARDWARE,
    *,
    qps: float = 10.0,
    input_len: int = DEFAULT_INPUT_LEN,
    output_len: int = DEFAULT_OUTPUT_LEN,
    ttft_ms: float = 2000.0,
    tpot_ms: float = 50.0,
    train_tokens: float = 1e12,
    train_devices: int = 1024,
    ctx: RunContext | None = None,
) -> Overview:
    """Serving and training summaries of ``model`` on each of ``hardware`` (ids or aliases)."""
    import math

    from xpuplan.perf.memory import inference_weight_bytes, kv_cache_bytes_per_token
    from xpuplan.perf.params import param_breakdown

    ctx = ctx or default_context()
    for name, v in (("qps", qps), ("ttft_ms", ttft_ms), ("tpot_ms", tpot_ms), ("train_tokens", train_tokens)):
        if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
            raise UserInputError(f"must be a finite positive number (got {v!r})", field=name)
    for name, n in (("input_len", input_len), ("output_len", output_len)):
        if not 0 < n <= 1 << 24:
            raise UserInputError(f"must be in 1..{1 << 24:,} (got {n!r})", field=name)
    if len(hardware) > 128:
        raise UserInputError(f"{len(hardware)} devices; at most 128", field="hw")
    m = ctx.model(model, field="model") if isinstance(model, str) else model
    if m.type != "encoder":  # as infer estimate checks --in/--out: a request beyond the context is the user's mistake
        m.check_context(input_len, "input_len")
        m.check_context(input_len + output_len, "output_len")
    if not hardware:
        raise UserInputError("give at least one device", field="hw")
    if not 1 <= train_devices <= 1 << 20:
        raise UserInputError(f"must be in 1..{1 << 20:,}", field="train_devices")
    if train_tokens <= 0:
        raise UserInputError("must be positive", field="train_tokens")
    devs = [ctx.device(h, field="hw") for h in hardware]
    b = param_breakdown(m)
    rows: list[DeviceOverview] = []
    for dev in devs:
        reasons: list[str] = []
        serving = training = None
        try:
            serving, r = _serving(ctx, m, dev, qps, input_len, output_len, ttft_ms, tpot_ms)
            reasons += r
        except XpuplanError as exc:
            reasons.append(f"serving: {exc}")
        try:
            training, r = _training(ctx, m, dev, train_tokens, train_devices)
            reasons += r
        except XpuplanError as exc:
            reasons.append(f"training: {exc}")
        mem = dev.figure("memory.capacity_gb")
        bf16 = dev.figure(f"dense_tflops.{dev.compute_dtype('bf16')}")  # fp16 on an fp16-only chip
        rows.append(DeviceOverview(
            device_id=dev.id, vendor=dev.vendor, kind=dev.kind, memory_bytes=None if mem is None else mem.value,
            bf16_flops_per_s=None if bf16 is None else bf16.value, min_trust=dev.min_trust(),
            serving=serving, training=training, reasons=reasons,
        ))
    return Overview(
        model_id=m.id, total_params=b.total, active_params=b.active,
        weights_bytes_bf16=inference_weight_bytes(m, "bf16"),
        kv_bytes_per_token_bf16=kv_cache_bytes_per_token(m, "bf16"),
        qps=qps, input_len=input_len, output_len=output_len, ttft_s=ttft_ms / 1e3, tpot_s=tpot_ms / 1e3,
        train_tokens=train_tokens, train_devices=train_devices, devices=rows,
        used=used(ctx.assumptions(devs), devs, TRAIN_FIGURES),
    )
