"""Fleet jobs: ``xpuplan fleet optimize`` and ``xpuplan fleet sweep`` (and ``xpuplan.optimize_fleet``).

A fleet scenario is a YAML (or JSON) file, validated at load with errors naming file, line and field::

    model: llama3-8b                 # default model of the classes
    horizon_hours: 8766              # total_cost is USD over this many hours (default: one year)
    classes:
      - name: complex
        rate_per_s: 4                # Poisson arrivals, requests/s
        input_len: {dist: lognormal, mean: 3000, cv: 0.5}   # or a number (fixed length)
        output_len: 600
        slo: {ttft_ms: 3000, tpot_ms: 60, percentile: 99}
    candidates:
      - hardware: nvidia-h100-sxm-80gb
        tp: [1, 2]                   # default: powers of two up to the scale-up domain (max 8)
        dtype: [bf16, fp8]
        usd_per_hour: 2.5            # per device; else purchase_usd, else the price book
        power_w: 700                 # per device; default the catalog TDP
        max_devices: 64
    pricing: {mode: owned, years: 3, region: us}    # how the price book prices a device-hour
    constraints:
      max_power_kw: 100
      budget_usd_per_hour: 200
      max_total_devices: 256
      allowed_vendors: [NVIDIA, Huawei]
      domestic_only: CN              # shorthand for allowed_countries: [CN]
    training: {model: llama3-8b, hardware: nvidia-h100-sxm-80gb, devices: 64, tokens: 1.0e11}
    simulation: {duration_s: 300, seed: 0}          # --verify

Prices per device-hour, first found wins: the candidate's ``usd_per_hour``; its ``purchase_usd``
(owned: TCO of that price plus energy over ``pricing.years``, from :mod:`xpuplan.cost`); the price
book (``catalog/data/prices``: cloud rate or owned TCO). Power per device: ``power_w``, else the
catalog TDP (busy power, a conservative bound for the power constraint).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from xpuplan import units
from xpuplan.datafile import Path_t, line_for, load_model, parse_text, read_text
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.fleet.optimize import FleetConstraints, FleetPlan, HardwareOption, RequestClass, optimize_mix
from xpuplan.jobs.context import RunContext, default_context
from xpuplan.jobs.requests import MAX_DEVICES, Id, LatencyMs, ModelRef, Percentile, PositiveFloat, Request
from xpuplan.serve.sim.config import NotBool
from xpuplan.workload.lengths import LengthDist, number_to_fixed
from xpuplan.workload.serving import percent_not_fraction

#: Default horizon of ``total_cost``: one year of 365.25 days.
DEFAULT_HORIZON_HOURS = units.YEAR / units.HOUR
#: Default amortisation horizon for owned hardware (years), the cost layer's usual TCO horizon.
DEFAULT_YEARS = 3.0
#: Default simulated seconds of arrivals for ``--verify``.
DEFAULT_SIM_DURATION_S = 300.0
#: Largest TP tried when the scenario gives none (one 8-device server).
DEFAULT_MAX_TP = 8
#: Simulator-guided repair: rounds at most, and the bounds of one round's capacity derating factor
#: (attainment / target, clipped): a small shortfall still moves the sizing, a large one does not
#: overshoot into a much larger fleet in one step.
REPAIR_ROUNDS = 6
REPAIR_MIN_STEP = 0.5
REPAIR_MAX_STEP = 0.95
#: Most candidate options (hardware x tp x dtype) per scenario: each costs one capacity evaluation per class.
MAX_OPTIONS = 256


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SLOIn(_Strict):
    ttft_ms: Annotated[LatencyMs, NotBool] | None = None
    tpot_ms: Annotated[LatencyMs, NotBool] | None = None
    percentile: Annotated[Percentile, NotBool] = 99.0

    @field_validator("percentile")
    @classmethod
    def _percent(cls, v: float) -> float:
        return percent_not_fraction(v)

    @model_validator(mode="after")
    def _some(self) -> SLOIn:
        if self.ttft_ms is None and self.tpot_ms is None:
            raise ValueError("give ttft_ms and/or tpot_ms")
        return self


class ClassIn(_Strict):
    name: Annotated[str, Field(min_length=1, max_length=100)]
    model: ModelRef | None = None
    rate_per_s: Annotated[float, NotBool] = Field(le=1e9, allow_inf_nan=False, description="requests/s (Poisson arrivals)")
    input_len: LengthDist
    output_len: LengthDist
    slo: SLOIn

    @field_validator("rate_per_s")
    @classmethod
    def _rate(cls, v: float) -> float:
        if v < 0:
            raise ValueError(f"a request rate cannot be negative (got {v:g} requests/s)")
        if v == 0:
            raise ValueError("a request rate must be positive (drop the class to serve nothing)")
        return v

    @model_validator(mode="before")
    @classmethod
    def _lengths(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {k: number_to_fixed(v) if k in ("input_len", "output_len") else v for k, v in data.items()}
        return data


class CandidateIn(_Strict):
    hardware: Id
    tp: list[Annotated[int, NotBool, Field(ge=1, le=1024)]] | None = None
    dtype: list[Id] = Field(default_factory=lambda: ["bf16"])
    engine: Id | None = None
    usd_per_hour: Annotated[float, NotBool] | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False,
                                                           description="price per device-hour, USD")
    purchase_usd: Annotated[float, NotBool] | None = Field(default=None, gt=0, le=1e9, allow_inf_nan=False,
                                                           description="purchase price per device, USD (owned)")
    power_w: Annotated[PositiveFloat, NotBool] | None = None
    max_devices: Annotated[int, NotBool] | None = Field(default=None, ge=0, le=MAX_DEVICES)

    @model_validator(mode="before")
    @classmethod
    def _lists(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for k in ("tp", "dtype"):
                if k in data and not isinstance(data[k], list):
                    data[k] = [data[k]]
        return data

    @field_validator("tp", "dtype")
    @classmethod
    def _not_empty(cls, v: list[Any] | None, info: ValidationInfo) -> list[Any] | None:
        if v is not None and not v:
            default = ("powers of two up to the scale-up domain, at most 8" if info.field_name == "tp" else "bf16")
            raise ValueError(f"an empty list tries no {info.field_name}: give at least one, or leave "
                             f"{info.field_name} out for the default ({default})")
        return v


class PricingIn(_Strict):
    mode: Literal["owned", "cloud"] = "owned"
    years: Annotated[float, NotBool] = Field(default=DEFAULT_YEARS, gt=0, le=50, allow_inf_nan=False)
    region: Id = "us"
    cooling: Id = "air"
    provider: Id | None = None
    term: Literal["on_demand", "reserved_1y", "reserved_3y", "spot", "capacity_block"] = "on_demand"


class ConstraintsIn(_Strict):
    max_power_kw: Annotated[PositiveFloat, NotBool] | None = None
    budget_usd_per_hour: Annotated[PositiveFloat, NotBool] | None = None
    max_total_devices: Annotated[int, NotBool] | None = Field(default=None, ge=1, le=MAX_DEVICES)
    allowed_vendors: list[Id] | None = None
    allowed_countries: list[Id] | None = None
    domestic_only: Id | None = Field(default=None, description="country code: only devices from there")


class TrainingIn(_Strict):
    model: ModelRef | None = None
    hardware: Id
    devices: Annotated[int, NotBool] = Field(ge=1, le=MAX_DEVICES)
    tokens: Annotated[float, NotBool] = Field(gt=0, le=1e16, allow_inf_nan=False)
    seq_len: Annotated[int, NotBool] = Field(default=4096, ge=1, le=1 << 24)


class SimulationIn(_Strict):
    duration_s: Annotated[float, NotBool] = Field(default=DEFAULT_SIM_DURATION_S, gt=0, le=86400 * 7,
                                                  allow_inf_nan=False)
    seed: Annotated[int, NotBool] = Field(default=0, ge=0, le=2**63 - 1)


class FleetScenario(_Strict):
    model: ModelRef | None = None
    horizon_hours: Annotated[float, NotBool] = Field(default=DEFAULT_HORIZON_HOURS, gt=0, le=50 * 8766,
                                                     allow_inf_nan=False)
    classes: Annotated[list[ClassIn], Field(min_length=1, max_length=64)]
    candidates: Annotated[list[CandidateIn], Field(min_length=1, max_length=64)]
    pricing: PricingIn = PricingIn()
    constraints: ConstraintsIn = ConstraintsIn()
    training: TrainingIn | None = None
    simulation: SimulationIn = SimulationIn()

    @model_validator(mode="after")
    def _names(self) -> FleetScenario:
        names = [c.name for c in self.classes]
        for n in names:
            if names.count(n) > 1:
                raise ValueError(f"class name {n!r} is used twice")
        return self


class LoadedScenario:
    """A validated scenario with the line of every field, to name file and line in later errors."""

    def __init__(self, scenario: FleetScenario, file: str, lines: dict[Path_t, int], base_dir: Path) -> None:
        self.scenario = scenario
        self.file = file
        self.lines = lines
        self.base_dir = base_dir

    def error(self, message: str, loc: tuple[Any, ...], hint: str | None = None) -> UserInputError:
        field = "".join(f"[{p}]" if isinstance(p, int) else ("." if i else "") + str(p) for i, p in enumerate(loc))
        return UserInputError(message, field=field, file=self.file, line=line_for(loc, self.lines), hint=hint)


def load_scenario(source: str | Path | Mapping[str, Any]) -> LoadedScenario:
    """Read and validate a fleet scenario (a path, or a mapping from the Python API)."""
    if isinstance(source, Mapping):
        sc = load_model(FleetScenario, dict(source), "<scenario>", {})
        return LoadedScenario(sc, "<scenario>", {}, Path.cwd())
    text = read_text(source)
    data, lines = parse_text(text, str(source))
    if data is None:
        raise UserInputError("file is empty", file=str(source))
    return LoadedScenario(load_model(FleetScenario, data, str(source), lines), str(source), lines,
                          Path(source).resolve().parent)


# ---------------------------------------------------------------------------------------
# resolution: scenario -> planner inputs
# ---------------------------------------------------------------------------------------
@contextmanager
def _at(ls: LoadedScenario, loc: tuple[Any, ...]) -> Iterator[None]:
    """Re-raise a UserInputError from the catalog or cost layer at ``loc`` of the scenario file."""
    try:
        yield
    except UserInputError as exc:
        if exc.file is not None and exc.file != ls.file:
            raise
        raise ls.error(exc.message, loc, hint=exc.hint) from None


def _check_context(ls: LoadedScenario, i: int, c: ClassIn, m: Any) -> None:
    """Class ``i``'s lengths against its model's context, as ``infer estimate`` checks ``--in``/``--out``: the caps
    (``max``) and the mean prompt (and prompt + output) the planner sizes for (UserInputError at the field)."""
    from xpuplan.jobs.serve import length_cap_issue

    if m.type == "encoder":
        return
    issue = length_cap_issue(m, c.input_len, c.output_len)
    if issue is not None:
        raise ls.error(issue[1], ("classes", i, *issue[0]))
    for key, tokens in (("input_len", c.input_len.average), ("output_len", c.input_len.average + c.output_len.average)):
        with _at(ls, ("classes", i, key)):
            m.check_context(tokens)


def _classes(ls: LoadedScenario, ctx: RunContext) -> list[RequestClass]:
    from xpuplan.serve import SLO

    sc = ls.scenario
    out = []
    for i, c in enumerate(sc.classes):
        name = c.model or sc.model
        if name is None:
            raise ls.error("no model: give one for the scenario or the class", ("classes", i, "model"))
        with _at(ls, ("classes", i, "model") if c.model else ("model",)):
            m = ctx.model(name)
        _check_context(ls, i, c, m)
        slo = SLO(ttft_s=None if c.slo.ttft_ms is None else c.slo.ttft_ms * units.MS,
                  tpot_s=None if c.slo.tpot_ms is None else c.slo.tpot_ms * units.MS, percentile=c.slo.percentile)
        out.append(RequestClass(name=c.name, model=m, rate_per_s=c.rate_per_s, input_len=c.input_len.average,
                                output_len=c.output_len.average, slo=slo,
                                ttft_input_len=c.input_len.quantile(c.slo.percentile)))
    return out


def _check_candidates(ls: LoadedScenario, ctx: RunContext, classes: list[RequestClass]) -> None:
    """Each candidate's engine, dtypes and tps against its hardware and the classes' models: an unknown engine or
    precision name, an engine built for another vendor's software stack, a tp that divides the heads of no class's
    model are mistakes in the file (UserInputError at the candidate's field), not options that cannot serve
    (those the optimiser leaves out, saying so in the plan's notes)."""
    from xpuplan.jobs.serve import check_engine, check_precisions
    from xpuplan.serve.validity import layout_issues

    models = list({c.model.id: c.model for c in classes}.values())
    for i, cand in enumerate(ls.scenario.candidates):
        with _at(ls, ("candidates", i, "hardware")):
            dev = ctx.device(cand.hardware)
        if cand.engine is not None:
            with _at(ls, ("candidates", i, "engine")):
                check_engine(ctx, cand.engine, [dev])
        for j, dt in enumerate(cand.dtype):
            with _at(ls, ("candidates", i, "dtype", j)):
                check_precisions([dt], None)
        for j, tp in enumerate(cand.tp or []):
            issues = [layout_issues(m, tp, 1, 1) for m in models]
            if all(issues):
                raise ls.error(issues[0][0].message + (" (and for every class's model)" if len(models) > 1 else ""),
                               ("candidates", i, "tp", j))


def _price(ls: LoadedScenario, i: int, dev: Any, book: Any) -> tuple[float, str]:
    """USD per device-hour of candidate ``i`` and where it came from (module doc)."""
    from xpuplan.cost import CostOptions, resolve_inputs, tco
    from xpuplan.perf.power import power_profile_for

    cand = ls.scenario.candidates[i]
    p = ls.scenario.pricing
    if cand.usd_per_hour is not None:
        return cand.usd_per_hour, "scenario usd_per_hour"
    opts: dict[str, Any] = {"mode": p.mode, "region": p.region, "cooling": p.cooling, "term": p.term,
                            "provider": p.provider}
    if cand.purchase_usd is not None:
        opts.update(mode="owned", device_price_usd=cand.purchase_usd)
    field = "purchase_usd" if cand.purchase_usd is not None else "usd_per_hour"
    try:
        inputs = resolve_inputs(dev, book, CostOptions(**opts))
        power = power_profile_for(dev, tdp_w=cand.power_w)
        # priced as one full node so per-node costs are shared as in a real deployment
        t = tco(inputs, power, devices=max(1, inputs.devices_per_node), years=p.years, busy_fraction=1.0)
    except UserInputError as exc:
        raise ls.error(f"no price for {dev.id}: {exc.message}", ("candidates", i, field),
                       hint="give usd_per_hour (USD per device-hour) or purchase_usd for this candidate") from None
    how = (f"cloud {p.term} price book" if inputs.mode == "cloud" else
           f"owned TCO over {p.years:g} years (busy), price book" + (" with scenario purchase_usd"
                                                                       if cand.purchase_usd is not None else ""))
    return t.usd_per_device_hour, how


def _options(ls: LoadedScenario, ctx: RunContext, cons: FleetConstraints) -> list[HardwareOption]:
    from xpuplan.catalog.prices import load_prices
    from xpuplan.fleet.optimize import allowed

    book = None
    out: list[HardwareOption] = []
    seen: set[str] = set()
    for i, cand in enumerate(ls.scenario.candidates):
        with _at(ls, ("candidates", i, "hardware")):
            dev = ctx.device(cand.hardware)
        if dev.id in seen:
            raise ls.error(f"{dev.id} is listed twice; give one candidate per hardware with lists of tp/dtype",
                           ("candidates", i, "hardware"))
        seen.add(dev.id)
        if allowed(dev, cons) is not None:
            usd, how = 0.0, "not priced: excluded by the vendor/country constraints"
        else:
            if cand.usd_per_hour is None and book is None:
                book = load_prices()
            usd, how = _price(ls, i, dev, book)
        power = cand.power_w if cand.power_w is not None else dev.tdp_w
        limit = max(dev.scale_up_domain, 1) if dev.scale_up_bandwidth else DEFAULT_MAX_TP
        tps = cand.tp or [t for t in (1, 2, 4, 8) if t <= min(limit, DEFAULT_MAX_TP)]
        for tp in tps:
            for dt in cand.dtype:
                out.append(HardwareOption(device=dev, tp=tp, dtype=dt, usd_per_device_hour=usd,
                                          power_w_per_device=power, engine=cand.engine, price_source=how))
    if len(out) > MAX_OPTIONS:
        raise ls.error(f"{len(out)} candidate options (hardware x tp x dtype); at most {MAX_OPTIONS}", ("candidates",))
    return out


def _constraints(ls: LoadedScenario, ctx: RunContext) -> FleetConstraints:
    sc = ls.scenario
    c = sc.constraints
    countries = list(c.allowed_countries) if c.allowed_countries is not None else None
    if c.domestic_only is not None:
        countries = sorted(set(countries or []) | {c.domestic_only}) if countries is not None else [c.domestic_only]
    return FleetConstraints(
        max_power_w=None if c.max_power_kw is None else c.max_power_kw * units.KILO,
        max_usd_per_hour=c.budget_usd_per_hour, max_total_devices=c.max_total_devices,
        max_devices=tuple(_device_limits(ls, ctx)),
        allowed_vendors=None if c.allowed_vendors is None else tuple(c.allowed_vendors),
        allowed_countries=None if countries is None else tuple(countries))


def _device_limits(ls: LoadedScenario, ctx: RunContext) -> list[tuple[str, int]]:
    out = []
    for i, c in enumerate(ls.scenario.candidates):
        if c.max_devices is not None:
            with _at(ls, ("candidates", i, "hardware")):
                out.append((ctx.device(c.hardware).id, c.max_devices))
    return out


# ---------------------------------------------------------------------------------------
# verification (request-level simulator) and training hybrid
# ---------------------------------------------------------------------------------------
def verify_plan(ls: LoadedScenario, plan: FleetPlan, *, seed: int | None = None,
                duration_s: float | None = None) -> dict[str, Any]:
    """Simulate each class on its own pools (one pool per hardware/TP/dtype of the mix, requests
    routed to the replica with the fewest outstanding tokens) and report SLO attainment per class."""
    try:
        from xpuplan.serve.sim import SimConfig, simulate
    except ImportError:
        raise UserInputError("--verify needs the request-level simulator (xpuplan.serve.sim), which is not "
                             "available in this installation", field="--verify") from None
    sc = ls.scenario
    seed = sc.simulation.seed if seed is None else seed
    duration = sc.simulation.duration_s if duration_s is None else duration_s
    out: dict[str, Any] = {"seed": seed, "duration_s": duration, "routing": "least_outstanding within each class's "
                           "pools (class-based between classes)", "classes": []}
    for i, c in enumerate(sc.classes):
        rows = [r for r in plan.mix if r.request_class == c.name]
        pools = [{"name": f"{r.hardware}-tp{r.tp}-{r.dtype}", "hardware": r.hardware, "replicas": r.replicas,
                  "tp": r.tp, "dtype": r.dtype, **({"engine": r.engine} if r.engine else {}),
                  "model": c.model or sc.model} for r in rows]
        cfg = SimConfig.model_validate({
            "model": c.model or sc.model, "pools": pools, "duration_s": duration,
            "routing": {"policy": "least_outstanding" if len(pools) > 1 else "round_robin"},
            "classes": [{"name": c.name, "rate_rps": c.rate_per_s, "arrival": "poisson",
                         "input_len": c.input_len, "output_len": c.output_len,
                         "slo": {k: v for k, v in (("ttft_ms", c.slo.ttft_ms), ("tpot_ms", c.slo.tpot_ms))
                                 if v is not None}}],
        })
        # each class gets its own stream of random numbers, fixed by the seed and its position
        res = simulate(cfg, seed=seed + i)
        out["classes"].append(_class_verification(c, res))
    return out


def _class_verification(c: ClassIn, res: Any) -> dict[str, Any]:
    """Attainment and latency percentiles of class ``c`` from a :class:`SimulationResult`."""
    g = res.group(c.name)
    att = g.slo_attainment

    def ms(v: float | None) -> float | None:
        return None if v is None else v / units.MS

    misses = []
    if c.slo.ttft_ms is not None and g.ttft.p99_s is not None and ms(g.ttft.p99_s) > c.slo.ttft_ms:  # type: ignore[operator]
        misses.append(f"simulated TTFT p99 {ms(g.ttft.p99_s):.0f} ms > {c.slo.ttft_ms:g} ms")
    if c.slo.tpot_ms is not None and g.tpot.p99_s is not None and ms(g.tpot.p99_s) > c.slo.tpot_ms:  # type: ignore[operator]
        misses.append(f"per-request TPOT p99 {ms(g.tpot.p99_s):.0f} ms > {c.slo.tpot_ms:g} ms (the planner sizes on "
                      f"the mean TPOT, simulated {ms(g.tpot.mean_s) or 0:.0f} ms)")
    return {"request_class": c.name, "slo_attainment": att, "target_percentile": c.slo.percentile,
            "meets_target": None if att is None else att * 100.0 >= c.slo.percentile, "misses": misses,
            "ttft_p99_s": g.ttft.p99_s, "ttft_p50_s": g.ttft.p50_s, "tpot_mean_s": g.tpot.mean_s,
            "tpot_p99_s": g.tpot.p99_s, "arrived": g.arrived, "completed": g.completed,
            "unfinished": g.unfinished, "preemptions": g.preemptions}


def _training(ls: LoadedScenario, ctx: RunContext) -> dict[str, Any]:
    """Cost of the scenario's training run on its own hardware (``xpuplan cost train``)."""
    from xpuplan.jobs.cost import TrainCostRequest, run_train_cost
    from xpuplan.jobs.requests import parse_request

    sc = ls.scenario
    t = sc.training
    assert t is not None
    model = t.model or sc.model
    if model is None:
        raise ls.error("no model: give one for the scenario or the training run", ("training", "model"))
    values: dict[str, Any] = {"model": model, "hw": t.hardware, "devices": t.devices, "tokens": t.tokens,
                              "seq_len": t.seq_len, "mode": sc.pricing.mode, "region": sc.pricing.region,
                              "cooling": sc.pricing.cooling}
    if sc.pricing.provider:
        values["provider"] = sc.pricing.provider
    with _at(ls, ("training", "hardware")):
        train_id = ctx.device(t.hardware).id
    # the scenario's own price for that hardware, in the order _price reads it: a rate rents, a purchase price buys
    own = next((c for c in sc.candidates if ctx.device(c.hardware).id == train_id
                and (c.usd_per_hour is not None or c.purchase_usd is not None)), None)
    if own is not None and own.usd_per_hour is not None:
        values.update(mode="cloud", cloud_usd_per_device_hour=own.usd_per_hour)
    elif own is not None and own.purchase_usd is not None:
        values.pop("provider", None)
        values.update(mode="owned", device_price_usd=own.purchase_usd)
    if values["mode"] == "cloud":  # a rental term means nothing for owned hardware (cost requests refuse it)
        values["term"] = sc.pricing.term
    with _at(ls, ("training", "hardware")):
        res = run_train_cost(parse_request(TrainCostRequest, values), ctx)
    return {"model": res.model, "hardware": res.hardware, "devices": res.devices, "tokens": res.tokens,
            "time_s": res.reliability.effective_time_s, "total_cost": res.cost.total_usd,
            "usd_per_million_tokens": res.cost.usd_per_million_tokens, "plan": res.plan}


# ---------------------------------------------------------------------------------------
# jobs
# ---------------------------------------------------------------------------------------
class FleetRequest(Request):
    """``xpuplan fleet optimize SCENARIO``."""

    FLAGS = {"scenario": "SCENARIO", "duration_s": "--duration"}

    scenario: Annotated[str, Field(min_length=1, max_length=4096)] | dict[str, Any] = Field(
        description="scenario file, or its content as a mapping (no file is read then)")
    verify: bool = False
    repair: bool = False
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1)
    duration_s: float | None = Field(default=None, gt=0, le=86400 * 7, allow_inf_nan=False)


def plan_scenario(ls: LoadedScenario, ctx: RunContext | None = None, *, verify: bool = False, seed: int | None = None,
                  duration_s: float | None = None, rate_scale: float = 1.0, only_hardware: str | None = None,
                  price_jitter: float = 0.0, capacity_cache: dict[Any, Any] | None = None,
                  repair: bool = False) -> FleetPlan:
    """Optimise (and optionally verify) a loaded scenario; the sweep's knobs scale every class's
    rate, keep one hardware kind, or draw each hardware's price uniformly within ±``price_jitter``.
    ``repair`` (implies verification): resize until the simulated attainment meets each class's
    percentile target (:func:`_repair`)."""
    ctx = ctx or default_context()
    capacity_cache = {} if capacity_cache is None else capacity_cache
    classes = _classes(ls, ctx)
    if rate_scale != 1.0:
        classes = [RequestClass(name=c.name, model=c.model, rate_per_s=c.rate_per_s * rate_scale,
                                input_len=c.input_len, output_len=c.output_len, slo=c.slo,
                                ttft_input_len=c.ttft_input_len) for c in classes]
    cons = _constraints(ls, ctx)
    _check_candidates(ls, ctx, classes)
    options = _options(ls, ctx, cons)
    if only_hardware is not None:
        options = [o for o in options if o.device.id == only_hardware]
    if price_jitter > 0:
        rng = random.Random(seed or 0)
        factor = {hw: rng.uniform(1 - price_jitter, 1 + price_jitter)
                  for hw in sorted({o.device.id for o in options})}
        options = [HardwareOption(device=o.device, tp=o.tp, dtype=o.dtype,
                                  usd_per_device_hour=o.usd_per_device_hour * factor[o.device.id],
                                  power_w_per_device=o.power_w_per_device, engine=o.engine,
                                  price_source=o.price_source + f" x {factor[o.device.id]:.4f} (jitter)")
                   for o in options]
    devices = list({o.device.id: o.device for o in options}.values())
    plan = optimize_mix(classes, options, cons, horizon_hours=ls.scenario.horizon_hours,
                        assumptions=ctx.assumptions(devices), capacity_cache=capacity_cache)
    update: dict[str, Any] = {}
    if ls.scenario.training is not None:
        tr = _training(ls, ctx)
        update["training"] = tr
        update["combined_total_cost"] = tr["total_cost"] + plan.total_cost
    if verify or repair:
        ver = verify_plan(ls, plan, seed=seed, duration_s=duration_s)
        if repair:
            plan, ver = _repair(ls, plan, ver, classes, options, cons, ctx, devices, capacity_cache, seed, duration_s)
        update["verification"] = ver
    return plan.model_copy(update=update) if update else plan


def _repair(ls: LoadedScenario, plan: FleetPlan, ver: dict[str, Any], classes: list[RequestClass],
            options: list[HardwareOption], cons: FleetConstraints, ctx: RunContext, devices: list[Any],
            cache: dict[Any, Any] | None, seed: int | None, duration_s: float | None,
            ) -> tuple[FleetPlan, dict[str, Any]]:
    """Simulator-guided sizing: while a class's simulated attainment is below its percentile target,
    derate that class's planner capacity by attainment / target (at least REPAIR_MIN_STEP, at most
    REPAIR_MAX_STEP per round), re-solve and re-simulate; at most REPAIR_ROUNDS rounds."""
    scale = {c.name: 1.0 for c in classes}
    rounds = [_round(0, scale, plan, ver)]
    for r in range(1, REPAIR_ROUNDS + 1):
        short = [v for v in ver["classes"] if v["meets_target"] is False]
        if not short:
            break
        for v in short:
            ratio = v["slo_attainment"] * 100.0 / v["target_percentile"]
            scale[v["request_class"]] *= min(REPAIR_MAX_STEP, max(REPAIR_MIN_STEP, ratio))
        plan = optimize_mix(classes, options, cons, horizon_hours=ls.scenario.horizon_hours,
                            assumptions=ctx.assumptions(devices), capacity_cache=cache, capacity_scale=dict(scale))
        ver = verify_plan(ls, plan, seed=seed, duration_s=duration_s)
        rounds.append(_round(r, scale, plan, ver))
    ver = {**ver, "repair": rounds,
           "repaired": all(v["meets_target"] is not False for v in ver["classes"])}
    return plan, ver


def _round(r: int, scale: dict[str, float], plan: FleetPlan, ver: dict[str, Any]) -> dict[str, Any]:
    return {"round": r, "capacity_scale": dict(scale), "usd_per_hour": plan.usd_per_hour, "devices": plan.devices,
            "slo_attainment": {v["request_class"]: v["slo_attainment"] for v in ver["classes"]}}


def run_fleet_optimize(req: FleetRequest, ctx: RunContext | None = None) -> FleetPlan:
    """The cheapest fleet for the scenario file (module doc), verified with the simulator on request."""
    ls = load_scenario(req.scenario)
    return plan_scenario(ls, ctx, verify=req.verify, seed=req.seed, duration_s=req.duration_s, repair=req.repair)


def optimize_fleet(scenario: str | Path | Mapping[str, Any], *, verify: bool = False, seed: int | None = None,
                   duration_s: float | None = None, repair: bool = False) -> FleetPlan:
    """Cheapest mix of hardware serving the scenario's request classes within their SLOs (public API).

    ``scenario``: a path to a fleet scenario file or the same content as a mapping (module doc).
    InfeasibleError names the class and the constraint when no fleet can serve the traffic."""
    ls = load_scenario(scenario)
    return plan_scenario(ls, default_context(), verify=verify, seed=seed, duration_s=duration_s, repair=repair)


# ---------------------------------------------------------------------------------------
# sweep
# ---------------------------------------------------------------------------------------
class SweepRequest(Request):
    """``xpuplan fleet sweep SCENARIO``: rate scales x hardware sets x seeds."""

    FLAGS = {"scenario": "SCENARIO", "rate_scale": "--rate-scale", "hardware": "--each-hardware",
             "duration_s": "--duration"}

    scenario: Annotated[str, Field(min_length=1, max_length=4096)]
    rate_scale: list[Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)]] = Field(default_factory=lambda: [1.0])
    hardware: bool = False
    seeds: int = Field(default=1, ge=1, le=1000)
    base_seed: int = Field(default=0, ge=0, le=2**31)
    price_jitter: float = Field(default=0.0, ge=0, lt=1, allow_inf_nan=False)
    verify: bool = False
    duration_s: float | None = Field(default=None, gt=0, le=86400 * 7, allow_inf_nan=False)
    ray: str | None = None
    workers: int | None = Field(default=None, ge=1, le=1024)


#: Per-process capacity cache of the sweep tasks: capacity does not depend on the rate, so tasks
#: that differ only in rate, seed or price reuse it (each worker process has its own).
_SWEEP_CACHE: dict[Any, Any] = {}


def fleet_sweep_task(params: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """One sweep task (top level so that process pools and Ray can pickle it)."""
    ls = load_scenario(params["scenario"])
    plan = plan_scenario(ls, None, verify=bool(params.get("verify")), seed=seed % (2**31),
                         duration_s=params.get("duration_s"), rate_scale=float(params["rate_scale"]),
                         only_hardware=params.get("hardware"), price_jitter=float(params.get("price_jitter", 0.0)),
                         capacity_cache=_SWEEP_CACHE.setdefault(str(params["scenario"]), {}))
    out: dict[str, Any] = {
        "usd_per_hour": plan.usd_per_hour, "total_cost": plan.total_cost, "devices": plan.devices,
        "mix": [{"request_class": r.request_class, "hardware": r.hardware, "tp": r.tp, "dtype": r.dtype,
                 "replicas": r.replicas} for r in plan.mix],
        "best_single": None if plan.best_single is None else {"hardware": plan.best_single.hardware,
                                                              "total_cost": plan.best_single.total_cost},
    }
    if plan.verification is not None:
        out["slo_attainment"] = {v["request_class"]: v["slo_attainment"] for v in plan.verification["classes"]}
    return out


def sweep_tasks(req: SweepRequest) -> list[Any]:
    """Tasks of the sweep: key (rate scale, hardware or 'mix', seed index)."""
    from xpuplan.fleet.sweep import make_tasks

    ls = load_scenario(req.scenario)  # validate once, here, before any worker starts
    ctx = default_context()
    _check_candidates(ls, ctx, _classes(ls, ctx))
    path = str(Path(req.scenario).resolve())
    hws: list[str | None] = [None]
    if req.hardware:
        cat_ids = [c.hardware for c in ls.scenario.candidates]
        hws += [ctx.device(h, field="candidates.hardware").id for h in cat_ids]
    seeds = range(req.seeds) if (req.verify or req.price_jitter > 0) else range(1)
    items = []
    for scale in req.rate_scale:
        for hw in hws:
            for s in seeds:
                items.append(((float(scale), hw or "mix", s),
                              {"scenario": path, "rate_scale": scale, "hardware": hw, "verify": req.verify,
                               "duration_s": req.duration_s, "price_jitter": req.price_jitter}))
    return make_tasks(items, base_seed=req.base_seed)


def run_fleet_sweep(req: SweepRequest) -> dict[str, Any]:
    """Run the sweep locally (processes) or on Ray (``req.ray``: 'auto' or an address)."""
    from xpuplan.fleet.sweep import run_sweep

    tasks = sweep_tasks(req)
    res = run_sweep(fleet_sweep_task, tasks, backend="ray" if req.ray else "local", address=req.ray,
                    workers=req.workers)
    out = res.to_dict()
    out["kind"] = "fleet_sweep"
    out["scenario"] = req.scenario
    if out["failed"] == out["tasks"]:
        first = res.results[0].error if res.results else "no tasks"
        raise InfeasibleError(f"every sweep task failed; first: {first}")
    return out
