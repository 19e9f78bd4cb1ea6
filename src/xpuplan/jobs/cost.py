"""Cost jobs: TCO of a fleet, cost of a training run, cost of serving a load.

Each job takes a typed request (validated once, errors name the flag), resolves the device, model
and price book (``load_prices`` reads ``$XPUPLAN_PRICES_PATH``; nothing below it does), runs the
planner through its public API (``search_training``, ``size_for_qps``) to get a usage record, and
hands that to the pure cost functions in :mod:`xpuplan.cost`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from xpuplan import units
from xpuplan.catalog.prices import PriceBook, load_prices
from xpuplan.cost import (
    CHECKPOINT_BYTES_PER_PARAM,
    CostOptions,
    JobCostResult,
    ReliabilityResult,
    TcoResult,
    Usage,
    check_team_stacks,
    job_cost,
    porting_for,
    reliability,
    resolve_inputs,
)
from xpuplan.cost import tco as tco_core
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.jobs.context import RunContext, default_context
from xpuplan.jobs.requests import (
    DeviceCount,
    Id,
    LatencyMs,
    ModelRef,
    PositiveFloat,
    Rate,
    Request,
    SeqLen,
    Share,
    Tokens,
    flag_error,
    parse_request,
)
from xpuplan.jobs.results import Result
from xpuplan.perf.power import WORK_DRAW_FRACTION, PowerCapResult, power_cap_what_if, power_profile_for

MAX_YEARS = 50.0
#: Fields that price bought hardware and its site: with mode 'cloud' nothing reads them (the per-device-hour
#: rate covers the hardware, its network and space, and electricity; ``cost.resolve_inputs``).
OWNED_ONLY: tuple[str, ...] = ("device_price_usd", "node_system_price_usd", "devices_per_node", "node_overhead_usd",
                               "network_usd_per_device", "fabric", "amortisation_years", "electricity_usd_per_kwh",
                               "usd_per_eur", "space_usd_per_kw_year")
#: The cloud term charged by default; another term only means something with mode 'cloud'.
DEFAULT_TERM = "on_demand"


class CostRequestBase(Request):
    """Price and site options shared by every cost command (``None``: the price book's figure).

    A figure only the other mode reads (``OWNED_ONLY`` with mode 'cloud'; a cloud rate or term with mode 'owned')
    is refused naming its flag, never ignored."""

    FLAGS = {"mode": "--owned/--cloud", "provider": "--cloud", "team_stacks": "--team"}

    mode: Literal["owned", "cloud"] = "owned"
    provider: Id | None = None
    term: Literal["on_demand", "reserved_1y", "reserved_3y", "spot", "capacity_block"] = "on_demand"
    region: Id = "us"
    cooling: Id = "air"
    fabric: Id | None = None
    usd_per_eur: PositiveFloat | None = None
    device_price_usd: PositiveFloat | None = None
    node_system_price_usd: PositiveFloat | None = None
    devices_per_node: DeviceCount | None = None
    node_overhead_usd: float | None = Field(default=None, ge=0, le=1e12, allow_inf_nan=False)
    network_usd_per_device: float | None = Field(default=None, ge=0, le=1e9, allow_inf_nan=False)
    amortisation_years: float | None = Field(default=None, gt=0, le=MAX_YEARS, allow_inf_nan=False)
    electricity_usd_per_kwh: float | None = Field(default=None, ge=0, le=100, allow_inf_nan=False)
    pue: float | None = Field(default=None, ge=1, le=10, allow_inf_nan=False)
    grid_kg_co2e_per_kwh: float | None = Field(default=None, ge=0, le=10, allow_inf_nan=False)
    space_usd_per_kw_year: float | None = Field(default=None, ge=0, le=1e7, allow_inf_nan=False)
    operations_usd_per_year: float | None = Field(default=None, ge=0, le=1e12, allow_inf_nan=False)
    development_usd: float | None = Field(default=None, ge=0, le=1e12, allow_inf_nan=False)
    team_stacks: tuple[Id, ...] | None = None
    porting_engineer_months: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    engineer_usd_per_year: PositiveFloat | None = None
    cloud_usd_per_device_hour: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    prices: tuple[str, ...] = Field(default=(), description="extra price files layered over the built-in ones")
    tdp_w: PositiveFloat | None = Field(default=None, description="device power, W, when the catalog has none")

    @model_validator(mode="after")
    def _cloud_provider(self) -> CostRequestBase:
        if self.provider is not None and self.mode == "owned" and "mode" in self.model_fields_set:
            raise flag_error(type(self), "mode", f"mode 'owned' (--owned: buy the hardware) contradicts provider "
                             f"{self.provider!r} (--cloud: rent it); give one of them")
        if self.provider is not None and self.mode != "cloud":
            object.__setattr__(self, "mode", "cloud")
        cls = type(self)
        if self.mode == "cloud":
            cloud = "--cloud" + (f" {self.provider}" if self.provider else "")
            for name in OWNED_ONLY:
                if getattr(self, name) is not None:
                    raise flag_error(cls, name, f"{cls.flag(name)} applies only to owned hardware; with {cloud} (mode "
                                     "'cloud': rent it) the per-device-hour rate covers hardware, network, space and "
                                     f"electricity, so it would be ignored: leave {cls.flag(name)} out, or buy the "
                                     "hardware (--owned) instead of --cloud")
        elif self.cloud_usd_per_device_hour is not None or self.term != DEFAULT_TERM:
            name = "cloud_usd_per_device_hour" if self.cloud_usd_per_device_hour is not None else "term"
            given = cls.flag(name) + (f" {self.term}" if name == "term" else "")
            raise flag_error(cls, name, f"{given} applies only to rented hardware; without --cloud (mode 'owned': buy "
                             "it) it would be ignored: give --cloud PROVIDER (or --cloud any) with it, or leave "
                             f"{cls.flag(name)} out")
        return self

    def options(self) -> CostOptions:
        keys = set(CostOptions.model_fields) & set(type(self).model_fields)
        return CostOptions(**{k: getattr(self, k) for k in keys})


class TcoRequest(CostRequestBase):
    """``xpuplan cost tco``: a fleet of ``devices`` over ``years``."""

    FLAGS = {**CostRequestBase.FLAGS, "busy_fraction": "--busy", "hw": "--hw"}

    hw: Id
    devices: DeviceCount
    years: float = Field(default=3.0, gt=0, le=MAX_YEARS, allow_inf_nan=False)
    busy_fraction: Share = 1.0
    compute_bound_fraction: Share = 1.0


class TrainCostRequest(CostRequestBase):
    """``xpuplan cost train``: the best plan of ``search_training`` priced, with failures."""

    FLAGS = {**CostRequestBase.FLAGS, "hw": "--hw", "model": "--model"}

    model: ModelRef
    hw: Id
    devices: DeviceCount
    tokens: Tokens
    seq_len: SeqLen = 4096
    method: Literal["full", "lora", "qlora"] = "full"
    checkpoint_bytes: float | None = Field(default=None, ge=0, le=1e18, allow_inf_nan=False)
    storage_gb_per_s: PositiveFloat | None = None
    failures_per_device_hour: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    restart_s: float | None = Field(default=None, ge=0, le=1e7, allow_inf_nan=False)
    power_cap_w: PositiveFloat | None = None


class PowerCapRequest(Request):
    """``xpuplan cost powercap``: throughput and energy of busy work at a lower power limit."""

    FLAGS = {"hw": "--hw"}

    hw: Id
    power_cap_w: PositiveFloat
    compute_bound_fraction: Share = 1.0
    dvfs_exponent: float | None = Field(default=None, ge=0.5, le=5, allow_inf_nan=False)
    idle_fraction: float | None = Field(default=None, ge=0, lt=1, allow_inf_nan=False)

    @model_validator(mode="after")
    def _idle_below_busy(self) -> PowerCapRequest:
        # the power model's busy draws are fixed here: idle draw above the lowest of them would make a
        # busy device draw less than an idle one
        busy = min(WORK_DRAW_FRACTION.values(), key=lambda a: a.value)
        if self.idle_fraction is not None and self.idle_fraction > busy.value:
            raise flag_error(type(self), "idle_fraction",
                             f"must be between 0 and {busy.value:g} (got {self.idle_fraction:g}): a device's idle draw "
                             f"cannot exceed its lowest busy draw, {busy.value:g} of TDP for memory-bound work "
                             "(LLM decode) in the power model")
        return self


class ServeCostRequest(CostRequestBase):
    """``xpuplan cost serve``: the devices ``size_for_qps`` needs for a load, priced over a period."""

    FLAGS = {**CostRequestBase.FLAGS, "hw": "--hw", "model": "--model", "input_len": "--in",
             "output_len": "--out", "ttft_ms": "--ttft-ms", "tpot_ms": "--tpot-ms"}

    model: ModelRef
    hw: Id
    qps: Rate
    input_len: SeqLen = 2048
    output_len: SeqLen = 256
    ttft_ms: LatencyMs = 2000.0
    tpot_ms: LatencyMs = 50.0
    hours: float = Field(default=24.0 * 365.25, gt=0, le=MAX_YEARS * 8766, allow_inf_nan=False)


# ---------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------
class TrainCostResult(Result):
    """A training run: the plan, its time with failures and checkpoints, and its cost."""

    NAME: ClassVar[str] = "cost-train"

    kind: str = "train_cost"
    model: str
    hardware: str
    devices: int
    tokens: float
    plan: dict[str, Any]
    failure_free_time_s: float
    reliability: ReliabilityResult
    cost: JobCostResult
    porting: dict[str, Any] | None = None
    power_cap: dict[str, Any] | None = None


class ServeCostResult(Result):
    """Serving ``qps`` for ``hours``: the capacity option chosen and its cost per token and query."""

    NAME: ClassVar[str] = "cost-serve"

    kind: str = "serve_cost"
    model: str
    hardware: str
    qps: float
    devices: int
    replicas: int
    option: dict[str, Any]
    cost: JobCostResult
    porting: dict[str, Any] | None = None


# ---------------------------------------------------------------------------------------
# jobs
# ---------------------------------------------------------------------------------------
def _book(req: CostRequestBase) -> PriceBook:
    return load_prices(req.prices)


@contextmanager
def _flags(req: Request) -> Iterator[None]:
    """Re-raise input errors about a request field under the flag the user typed (``--cooling``)."""
    try:
        yield
    except UserInputError as exc:
        name = (exc.field or "").removesuffix("_usd").split(".")[0]
        last = (exc.field or "").split(".")[-1]
        for cand in (exc.field, name, last):
            if cand and cand in type(req).model_fields and not exc.file:
                raise UserInputError(exc.message, field=type(req).flag(cand)) from None
        raise


def _check_team(req: CostRequestBase, ctx: RunContext) -> None:
    """The team's stacks must be software stacks of the catalog (an unknown one would price a port silently)."""
    if req.team_stacks is not None:
        check_team_stacks(req.team_stacks, (d.ecosystem.software_stack for d in ctx.catalog),
                          field=type(req).flag("team_stacks"))


def _porting(device: Any, book: PriceBook, req: CostRequestBase) -> dict[str, Any] | None:
    est = porting_for(device, book, req.options())
    return None if est is None else est.to_dict()


def run_tco(req: TcoRequest, ctx: RunContext | None = None) -> TcoResult:
    """TCO of ``req.devices`` x ``req.hw`` over ``req.years``."""
    ctx = ctx or default_context()
    dev = ctx.device(req.hw, field="--hw")
    _check_team(req, ctx)
    with _flags(req):
        inputs = resolve_inputs(dev, _book(req), req.options())
        return tco_core(inputs, power_profile_for(dev, tdp_w=req.tdp_w), devices=req.devices, years=req.years,
                        busy_fraction=req.busy_fraction, compute_bound_fraction=req.compute_bound_fraction)


def run_train_cost(req: TrainCostRequest, ctx: RunContext | None = None) -> TrainCostResult:
    """Best training plan on ``req.devices`` x ``req.hw``, its effective time with failures, and its cost."""
    import xpuplan as xp

    ctx = ctx or default_context()
    dev = ctx.device(req.hw, field="--hw")
    model = ctx.model(req.model, field="--model")
    _check_team(req, ctx)
    book = _book(req)
    with _flags(req):
        inputs = resolve_inputs(dev, book, req.options())  # price errors before the (slower) search
    cluster = xp.Cluster.from_catalog(dev, req.devices, assumptions=ctx.assumptions([dev]))
    with _flags(req):
        power = power_profile_for(dev, tdp_w=req.tdp_w)
    cap = None
    if req.power_cap_w is not None:  # the cap's clock ratio, checked before the search (errors name the flag)
        try:
            cap = power_cap_what_if(power, req.power_cap_w, compute_bound_fraction=1.0)
        except UserInputError as exc:
            raise UserInputError(exc.message, field=type(req).flag("power_cap_w")) from None
    # the training planner times the capped run itself: compute-bound kernels at the capped clock, the rest not
    job = xp.TrainingJob(train_tokens=req.tokens, seq_len=req.seq_len, method=req.method, power_cap_w=req.power_cap_w)
    best = xp.search_training(model, cluster, job, top=1).best
    if best is None or best.time_to_train_s is None:
        raise InfeasibleError(f"no training plan of {model.id} fits on {req.devices} x {dev.id}",
                              reasons=["`xpuplan train search` says what it would take"])
    failure_free_s = best.time_to_train_s
    params = float(xp.param_breakdown(model).total)
    ckpt = req.checkpoint_bytes if req.checkpoint_bytes is not None else params * CHECKPOINT_BYTES_PER_PARAM.value
    try:
        rel = reliability(
            devices=req.devices,
            failure_free_time_s=failure_free_s,
            checkpoint_bytes=ckpt,
            storage_bytes_per_s=req.storage_gb_per_s * units.GB_PER_S if req.storage_gb_per_s else None,
            failures_per_device_hour=req.failures_per_device_hour,
            restart_s=req.restart_s,
        )
    except UserInputError as exc:
        if exc.field == "storage_bytes_per_s":
            raise UserInputError(exc.message, field=type(req).flag("storage_gb_per_s")) from None
        raise
    if req.checkpoint_bytes is None:
        rel = rel.model_copy(update={"assumptions": [*rel.assumptions, CHECKPOINT_BYTES_PER_PARAM.to_dict()]})
    usage = Usage(device_id=dev.id, devices=req.devices, duration_s=rel.effective_time_s, busy_fraction=1.0,
                  compute_bound_fraction=1.0, tokens=req.tokens,
                  energy_j=None if cap is None else req.devices * cap.capped_power_w * rel.effective_time_s)
    cost = job_cost(inputs, power, usage, include_development=req.team_stacks is not None)
    return TrainCostResult(model=model.id, hardware=dev.id, devices=req.devices, tokens=req.tokens,
                           plan={"key": best.key, "tokens_per_s": best.tokens_per_s, "mfu": best.mfu},
                           failure_free_time_s=failure_free_s, reliability=rel, cost=cost,
                           porting=_porting(dev, book, req), power_cap=None if cap is None else cap.to_dict())


def run_power_cap(req: PowerCapRequest, ctx: RunContext | None = None) -> PowerCapResult:
    """The DVFS / power-cap what-if for one device (``xpuplan.perf.power``)."""
    ctx = ctx or default_context()
    dev = ctx.device(req.hw, field="--hw")
    power = power_profile_for(dev, dvfs_exponent=req.dvfs_exponent, idle_fraction=req.idle_fraction)
    try:
        return power_cap_what_if(power, req.power_cap_w, req.compute_bound_fraction)
    except UserInputError as exc:
        if exc.field == "power_cap_w":
            raise UserInputError(exc.message, field=PowerCapRequest.flag("power_cap_w")) from None
        raise


def run_serve_cost(req: ServeCostRequest, ctx: RunContext | None = None) -> ServeCostResult:
    """Devices to serve ``req.qps`` under the SLO on ``req.hw``, and the cost of running them ``req.hours``."""
    import xpuplan as xp

    ctx = ctx or default_context()
    dev = ctx.device(req.hw, field="--hw")
    model = ctx.model(req.model, field="--model")
    _check_team(req, ctx)
    if model.type != "encoder":  # a prompt (plus its output) longer than the model's context: as infer capacity
        model.check_context(req.input_len, "--in")
        model.check_context(req.input_len + req.output_len, "--out")
    book = _book(req)
    with _flags(req):
        inputs = resolve_inputs(dev, book, req.options())
    plan = xp.size_for_qps(model, [dev], qps=req.qps, input_len=req.input_len, output_len=req.output_len,
                           slo=xp.SLO(ttft_s=req.ttft_ms * units.MS, tpot_s=req.tpot_ms * units.MS))
    if not plan.options:
        reasons = plan.infeasible.get(dev.id, [])
        raise InfeasibleError(f"{dev.id} cannot serve {model.id} at {req.qps:g} requests/s under the SLO",
                              reasons=list(reasons))
    opt = plan.options[0]
    at = opt.at_target
    # A serving replica under load runs continuously (busy 1.0); the share of its time in prefill is
    # compute-bound, decode is memory-bound (perf.power).
    prefill = min(1.0, max(0.0, at.prefill_utilisation)) if at is not None else 1.0
    duration_s = req.hours * units.HOUR
    queries = req.qps * duration_s
    usage = Usage(device_id=dev.id, devices=opt.devices, duration_s=duration_s, busy_fraction=1.0,
                  compute_bound_fraction=prefill, queries=queries, tokens=queries * req.output_len)
    with _flags(req):
        cost = job_cost(inputs, power_profile_for(dev, tdp_w=req.tdp_w), usage)
    return ServeCostResult(model=model.id, hardware=dev.id, qps=req.qps, devices=opt.devices, replicas=opt.replicas,
                           option=opt.to_dict(), cost=cost, porting=_porting(dev, book, req))


# ---------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------
def tco(hw: str, devices: int, *, years: float = 3.0, busy_fraction: float = 1.0,
        compute_bound_fraction: float = 1.0, **options: Any) -> TcoResult:
    """TCO of ``devices`` x ``hw`` over ``years`` (public API: ``xpuplan.tco``).

    ``options`` are the fields of :class:`CostRequestBase`: ``mode='owned'|'cloud'``, ``provider``,
    ``term``, ``region``, ``cooling``, and any number to override (``device_price_usd``,
    ``electricity_usd_per_kwh``, ``operations_usd_per_year``, ``team_stacks=('CUDA',)``, ...).
    Figures without a public source must be given; the result's ``missing`` lists lines left out.
    """
    req = parse_request(TcoRequest, {"hw": hw, "devices": devices, "years": years, "busy_fraction": busy_fraction,
                                     "compute_bound_fraction": compute_bound_fraction, **options})
    return run_tco(req)


def training_cost(model: str, hw: str, devices: int, tokens: float, **options: Any) -> TrainCostResult:
    """Cost, energy, carbon and failure-aware time of training ``model`` on ``tokens`` (public API)."""
    req = parse_request(TrainCostRequest, {"model": model, "hw": hw, "devices": devices, "tokens": tokens, **options})
    return run_train_cost(req)


def serving_cost(model: str, hw: str, qps: float, **options: Any) -> ServeCostResult:
    """Cost per million output tokens and per query of serving ``qps`` requests/s (public API)."""
    req = parse_request(ServeCostRequest, {"model": model, "hw": hw, "qps": qps, **options})
    return run_serve_cost(req)

