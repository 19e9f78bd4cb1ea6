"""Catalog and analytic jobs: ``hw list|show|compare``, ``model list|show``, ``flops``, ``roofline``."""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import Field, model_validator

from xpuplan.errors import UserInputError
from xpuplan.jobs.context import RunContext, default_context
from xpuplan.jobs.requests import Id, ModelRef, Request, SeqLen, Tokens, flag_error, names_flags
from xpuplan.jobs.results import Detail, Result, clean, used

KINDS: Final = ("GPU", "NPU", "TPU", "CPU")
DTYPES: Final = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")
#: Largest GEMM dimension / element count accepted by ``roofline`` (2**40).
MAX_DIM: Final = 1 << 40


# --------------------------------------------------------------------------------------------- hw
class HwListRequest(Request):
    """``xpuplan hw list`` filters."""

    vendor: Id | None = None
    kind: str | None = Field(default=None, max_length=10)
    origin: Id | None = None

    @model_validator(mode="after")
    def _kind(self) -> HwListRequest:
        if self.kind and self.kind.upper() not in KINDS:
            raise flag_error(type(self), "kind", f"expected GPU, NPU, TPU or CPU, got {self.kind!r}")
        return self


class HwListResult(Result):
    """Result of ``hw list``: headline dense figures of each device."""

    NAME: ClassVar[str] = "hw.list"
    devices: list[dict[str, Any]] = Field(description="Device.summary() of each device: headline dense figures")


class HwShowResult(Result):
    """Result of ``hw show``: every figure of one device with range, source, date and trust."""

    NAME: ClassVar[str] = "hw.show"
    device: dict[str, Any] = Field(description="every figure with range, source, date and trust")


class HwCompareResult(Result):
    """Result of ``hw compare``: the full records of the devices compared."""

    NAME: ClassVar[str] = "hw.compare"
    devices: list[dict[str, Any]]


def hw_list(req: HwListRequest, ctx: RunContext | None = None) -> HwListResult:
    cat = (ctx or default_context()).catalog
    if req.vendor and req.vendor.casefold() not in {v.casefold() for v in cat.vendors}:
        raise UserInputError(f"unknown vendor {req.vendor!r}; known: {', '.join(cat.vendors)}", field="--vendor")
    return HwListResult(devices=[clean(d.summary()) for d in cat.filter(vendor=req.vendor, kind=req.kind,
                                                                          origin=req.origin)])


def hw_show(device_id: str, ctx: RunContext | None = None) -> HwShowResult:
    ctx = ctx or default_context()
    d = ctx.device(_id_arg(device_id, "ID"), field="ID")
    return HwShowResult(device=clean(d.to_dict()))


def hw_compare(ids: list[str], ctx: RunContext | None = None) -> HwCompareResult:
    if len(ids) < 2:
        raise UserInputError("give at least two devices to compare", field="ID")
    if len(ids) > 64:
        raise UserInputError(f"{len(ids)} devices; at most 64 in one comparison", field="ID")
    ctx = ctx or default_context()
    return HwCompareResult(devices=[clean(ctx.device(_id_arg(i, "ID"), field="ID").to_dict()) for i in ids])


def _id_arg(value: str, field: str) -> str:
    """An id given as an argument, checked as ids are."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(Id).validate_python(value)
    except ValidationError as exc:
        from xpuplan.errors import echo

        raise UserInputError(f"{exc.errors()[0]['msg'].removeprefix('Value error, ')} (got {echo(value)})",
                             field=field) from None


# ------------------------------------------------------------------------------------------ model
class ModelListResult(Result):
    """Result of ``model list``: preset models with parameter counts."""

    NAME: ClassVar[str] = "model.list"
    models: list[dict[str, Any]]


class ModelShowResult(Result, Detail):
    """Result of ``model show``: architecture and parameter breakdown of one model."""

    NAME: ClassVar[str] = "model.show"
    id: str
    total_params: int
    active_params: int


def model_list(ctx: RunContext | None = None) -> ModelListResult:
    from xpuplan.models import list_models
    from xpuplan.perf.params import param_breakdown

    out = []
    for m in list_models():
        b = param_breakdown(m)
        out.append({"id": m.id, "name": m.name, "family": m.family, "type": m.type, "attention": m.attention_kind,
                    "moe": m.is_moe, "total_params": b.total, "active_params": b.active, "n_layers": m.n_layers,
                    "d_model": m.d_model})
    return ModelListResult(models=out)


def model_show(name: str, ctx: RunContext | None = None) -> ModelShowResult:
    from pydantic import TypeAdapter, ValidationError

    from xpuplan.perf.memory import kv_cache_bytes_per_token
    from xpuplan.perf.params import param_breakdown

    ctx = ctx or default_context()
    try:
        name = TypeAdapter(ModelRef).validate_python(name)
    except ValidationError as exc:
        from xpuplan.errors import echo

        raise UserInputError(f"{exc.errors()[0]['msg'].removeprefix('Value error, ')} (got {echo(name)})",
                             field="ID|PATH") from None
    m = ctx.model(name, field="ID|PATH")
    b = param_breakdown(m)
    d = m.model_dump(mode="json")
    d.update({"total_params": b.total, "active_params": b.active, "params": b.to_dict(),
              "attention_kind": m.attention_kind, "attention_pattern": m.attention_pattern,
              "n_local_layers": m.n_local_layers, "n_moe_layers": m.n_moe_layers,
              "kv_cache_bytes_per_token_bf16": kv_cache_bytes_per_token(m)})
    if m.published:
        d["published_total_params"] = m.published.total_params.value_b * 1e9
    return ModelShowResult(**clean(d))


# ------------------------------------------------------------------------------------------ flops
class FlopsRequest(Request):
    """``xpuplan flops``."""

    model: ModelRef
    seq: SeqLen = 2048
    tokens: Tokens | None = None
    hw: Id | None = None
    mfu: float = Field(default=0.4, gt=0, le=1, allow_inf_nan=False)


class FlopsResult(Result, Detail):
    """Result of ``flops``: FLOP per token, per prompt, per decode step, and training totals."""

    NAME: ClassVar[str] = "flops"
    model: str
    seq_len: int
    training_tokens: float | None = None
    training_flops_total: float | None = None
    hardware: str | None = None
    device_time_s_at_mfu: float | None = None


@names_flags
def flops(req: FlopsRequest, ctx: RunContext | None = None) -> FlopsResult:
    from xpuplan.perf.flops import flops_summary, flops_training_total

    ctx = ctx or default_context()
    m = ctx.model(req.model)
    s = flops_summary(m, req.seq)
    out: dict[str, Any] = dict(s.to_dict())
    out.setdefault("model", m.id)
    out["seq_len"] = req.seq
    dev = None
    if req.tokens:
        total = flops_training_total(m, req.tokens, req.seq)
        out.update(training_tokens=req.tokens, training_flops_total=total,
                   training_flops_6nd=6.0 * s.params_active * req.tokens)  # 6 = 2 (fwd) + 4 (bwd) FLOP per param-token
        if req.hw:
            dev = ctx.device(req.hw)
            out.update(hardware=dev.id, device_time_s_at_mfu=total / (dev.peak_flops("bf16") * req.mfu))
    return FlopsResult(**clean(out), used=used(None, [dev] if dev else [], ()))


# --------------------------------------------------------------------------------------- roofline
class RooflineRequest(Request):
    """``xpuplan roofline``."""

    hw: Id
    model: ModelRef | None = None
    batch: int = Field(default=1, ge=1, le=1 << 20)
    q_len: SeqLen = 1
    kv_len: SeqLen = 2048
    m: int | None = Field(default=None, ge=1, le=MAX_DIM)
    n: int | None = Field(default=None, ge=1, le=MAX_DIM)
    k: int | None = Field(default=None, ge=1, le=MAX_DIM)
    elements: int | None = Field(default=None, ge=1, le=MAX_DIM)
    adam_params: float | None = Field(default=None, gt=0, le=1e15, allow_inf_nan=False)
    dtype: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"] = "bf16"
    tp: int = Field(default=1, ge=1, le=1 << 20)

    @model_validator(mode="after")
    def _one_op(self) -> RooflineRequest:
        """One kind of op per run (a model's layer, a GEMM, an elementwise op or an optimizer step): a second one
        given would be ignored; --tp splits a model's layer only."""
        given = [f for f, on in (("--model", self.model is not None),
                                 ("--m/--n/--k", any(v is not None for v in (self.m, self.n, self.k))),
                                 ("--elements", self.elements is not None),
                                 ("--adam-params", self.adam_params is not None)) if on]
        if len(given) > 1:
            raise UserInputError(f"give one of --model, --m/--n/--k, --elements or --adam-params (got {' and '.join(given)})",
                                 field="--model" if self.model is not None else given[0].split("/")[0])
        if self.tp > 1 and self.model is None:
            raise flag_error(type(self), "tp", "--tp splits a model's layer: give it with --model")
        return self


class RooflineResult(Result):
    """Result of ``roofline``: compute- vs memory-bound time of each op."""

    NAME: ClassVar[str] = "roofline"
    hardware: str
    dtype: str
    title: str
    efficiency: dict[str, Any]
    ops: list[dict[str, Any]]
    total_time_s: float


@names_flags
def roofline(req: RooflineRequest, ctx: RunContext | None = None) -> RooflineResult:
    from xpuplan.perf.ops import head_ops, layer_ops
    from xpuplan.perf.roofline import cost_adam_step, cost_elementwise, cost_gemm, op_time
    from xpuplan.serve.validity import rule_tp_divides_heads

    ctx = ctx or default_context()
    dev = ctx.device(req.hw)
    eff = ctx.efficiency(dev)
    if req.model:
        mm = ctx.model(req.model)
        issue = rule_tp_divides_heads(req.tp, mm)  # the rule memory, train and infer apply
        if issue is not None:
            raise flag_error(type(req), "tp", issue.message)
        ops = layer_ops(mm, batch=req.batch, q_len=req.q_len, kv_len=req.kv_len, tp=req.tp, dtype=req.dtype)
        if req.q_len == 1 or req.q_len == req.kv_len:
            ops += head_ops(mm, rows=req.batch, tp=req.tp, dtype=req.dtype)
        title = (f"one layer of {mm.id} on {dev.id}: batch {req.batch}, {req.q_len} new token(s), {req.kv_len} keys, "
                 f"{req.dtype}, tp{req.tp}")
    elif req.elements is not None:
        ops = [cost_elementwise(req.elements, dtype=req.dtype, name="elementwise (e.g. ReLU)")]
        title = f"elementwise op on {dev.id}"
    elif req.adam_params is not None:
        ops = [cost_adam_step(req.adam_params)]
        title = f"optimizer step on {dev.id} (fp32 master, moments and gradients)"
    elif req.m and req.n and req.k:
        ops = [cost_gemm(req.m, req.n, req.k, req.dtype, name=f"GEMM {req.m}x{req.k} @ {req.k}x{req.n}")]
        title = f"GEMM on {dev.id}, {req.dtype}"
    else:
        raise UserInputError("give --model, or --m/--n/--k for a GEMM, --elements for an elementwise op, "
                             "or --adam-params", field="--model")
    times = [op_time(op, dev, req.dtype, eff) for op in ops]
    return RooflineResult(
        hardware=dev.id, dtype=req.dtype, title=title, efficiency=clean(eff.model_dump()),
        ops=[clean(t.to_dict() | {"flops": o.flops, "bytes": o.bytes, "name": o.name}) for o, t in zip(ops, times, strict=True)],
        total_time_s=sum(t.time_s for t in times),
        used=used(ctx.assumptions([dev]), [dev], ("memory.bandwidth_gb_per_s",), precisions=[req.dtype]),
    )
