"""Fleet-mix optimisation: capacity at the SLO per class and option, then the MILP, then the report.

Steps (enumerate -> prune -> evaluate -> solve):

1. every candidate option is one catalog device x TP x dtype (x engine); options outside the allowed
   vendors or origin countries are pruned before anything is evaluated;
2. per (class, option), the capacity of one replica is the largest Poisson arrival rate it serves
   within the class's SLO, from the inference planner (:func:`xpuplan.serve.throughput_at_slo`:
   continuous batching, Little's law for concurrency, an M/D/1 prefill queue for the TTFT tail; see
   docs/inference.md). An option that cannot meet the SLO even unloaded, or does not fit, gets
   capacity 0 and the planner's reason;
3. the MILP of :mod:`xpuplan.fleet.milp` picks replicas per class and option at least cost;
4. the same MILP restricted to one hardware kind at a time gives ``best_single``.

Pure: devices, models, prices and limits come in as arguments (the job resolves them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from xpuplan import units
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.fleet.milp import MixProblem, MixSolution, ResourceRow, binding_rows, diagnose, solve_mix
from xpuplan.serve import SLO, make_replica, throughput_at_slo

if TYPE_CHECKING:
    from xpuplan.catalog.assumptions import Assumptions
    from xpuplan.catalog.device import Device
    from xpuplan.models.arch import ModelArch

#: Version of the fleet plan's JSON form.
SCHEMA_VERSION = "2.0"


# ---------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RequestClass:
    """One class of requests: Poisson arrivals of ``rate_per_s`` requests/s, mean prompt and output
    lengths (tokens), the prompt length whose prefill sets the TTFT tail (``ttft_input_len``: the
    SLO percentile of the prompt-length distribution; None = the mean), and the SLO."""

    name: str
    model: ModelArch
    rate_per_s: float
    input_len: float
    output_len: float
    slo: SLO
    ttft_input_len: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.rate_per_s) and self.rate_per_s > 0):
            raise UserInputError(f"request rate must be a positive finite number (got {self.rate_per_s!r})",
                                 field=f"classes.{self.name}.rate_per_s")


@dataclass(frozen=True)
class HardwareOption:
    """One replica configuration: ``tp`` devices of ``device`` at precision ``dtype``; price per
    device-hour (USD, from the cost layer or the user) and power per device (W, busy; None unknown)."""

    device: Device
    tp: int
    dtype: str
    usd_per_device_hour: float
    power_w_per_device: float | None
    engine: str | None = None
    price_source: str = ""

    @property
    def key(self) -> str:
        return f"{self.device.id}/tp{self.tp}/{self.dtype}" + (f"/{self.engine}" if self.engine else "")


@dataclass(frozen=True)
class FleetConstraints:
    """Limits on the whole fleet (None: no limit). ``allowed_vendors`` / ``allowed_countries`` prune
    candidates (countries are catalog ``origin_country`` codes: ``["CN"]`` is a domestic-only fleet
    in China); ``max_devices`` caps devices per catalog id."""

    max_power_w: float | None = None
    max_usd_per_hour: float | None = None
    max_total_devices: int | None = None
    max_devices: tuple[tuple[str, int], ...] = ()
    allowed_vendors: tuple[str, ...] | None = None
    allowed_countries: tuple[str, ...] | None = None


# ---------------------------------------------------------------------------------------
# result
# ---------------------------------------------------------------------------------------
class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MixRow(_Out):
    request_class: str
    hardware: str
    tp: int
    dtype: str
    engine: str | None
    replicas: int
    devices: int
    max_requests_per_s_per_replica: float = Field(description="capacity of one replica at the class's SLO")
    usd_per_hour: float
    power_w: float | None


class ClassCapacity(_Out):
    """Capacity of one option for one class (0 with ``reason`` when it cannot serve it)."""

    request_class: str
    option: str
    max_requests_per_s_per_replica: float
    limited_by: str | None = None
    reason: str | None = None


class ConstraintReport(_Out):
    name: str
    label: str
    unit: str
    limit: float
    used: float
    slack: float
    binding: bool = Field(description="removing this constraint alone would lower the cost")


class ClassReport(_Out):
    request_class: str
    rate_per_s: float
    capacity_per_s: float
    headroom_per_s: float = Field(description="capacity minus demand: the slack of the demand constraint")
    slo: dict[str, Any]


class SingleHardware(_Out):
    hardware: str
    total_cost: float
    usd_per_hour: float
    devices: int
    mix: list[MixRow]


class FleetPlan(_Out):
    """The cheapest mix, its cost, constraints (slack, binding), and the best single-hardware fleet.

    ``total_cost`` is USD over ``horizon_s`` (``usd_per_hour`` x the horizon in hours); ``verification`` is set
    by ``--verify`` (simulated SLO attainment per class), ``training`` when the scenario also trains."""

    schema_version: str = SCHEMA_VERSION
    kind: str = "fleet_plan"
    horizon_s: float
    mix: list[MixRow]
    total_cost: float
    usd_per_hour: float
    devices: int
    power_w: float | None
    classes: list[ClassReport]
    constraints: list[ConstraintReport]
    best_single: SingleHardware | None
    best_single_reason: str | None = None
    savings_vs_best_single: float | None = Field(default=None, description="1 - total_cost / best_single.total_cost")
    capacities: list[ClassCapacity] = Field(default_factory=list)
    pruned: list[str] = Field(default_factory=list, description="candidates removed by vendor/country limits")
    prices: list[dict[str, Any]] = Field(default_factory=list, description="price per device-hour and its source")
    verification: dict[str, Any] | None = None
    training: dict[str, Any] | None = None
    combined_total_cost: float | None = Field(default=None, description="training cost + serving total_cost")
    notes: list[str] = Field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


# ---------------------------------------------------------------------------------------
# steps
# ---------------------------------------------------------------------------------------
def allowed(device: Device, cons: FleetConstraints) -> str | None:
    """None when the vendor and country limits allow ``device``, else why not."""
    if cons.allowed_vendors is not None and device.vendor.casefold() not in {v.casefold() for v in cons.allowed_vendors}:
        return f"{device.id}: vendor {device.vendor} not in allowed_vendors"
    if (cons.allowed_countries is not None
            and device.origin_country.casefold() not in {v.casefold() for v in cons.allowed_countries}):
        return f"{device.id}: origin {device.origin_country} not in allowed_countries"
    return None


def prune(options: list[HardwareOption], cons: FleetConstraints) -> tuple[list[HardwareOption], list[str]]:
    """Options allowed by the vendor and country limits, and one line per removed device."""
    keep: list[HardwareOption] = []
    removed: dict[str, str] = {}
    for o in options:
        why = allowed(o.device, cons)
        if why is None:
            keep.append(o)
        else:
            removed[o.device.id] = why
    return keep, list(removed.values())


def class_capacity(cls: RequestClass, opt: HardwareOption, assumptions: Assumptions | None = None) -> ClassCapacity:
    """Largest request rate one replica of ``opt`` serves within ``cls``'s SLO (0 with the reason)."""
    try:
        rep = make_replica(cls.model, opt.device, tp=opt.tp, dtype=opt.dtype, engine=opt.engine,
                           assumptions=assumptions)
        res = throughput_at_slo(rep, cls.input_len, cls.output_len, cls.slo, ttft_input_len=cls.ttft_input_len)
    except InfeasibleError as exc:
        why = "; ".join(exc.reasons) or str(exc)
        if "minimal load" in str(exc):
            why = f"the SLO is below this hardware's unloaded latency: {why}"
        return ClassCapacity(request_class=cls.name, option=opt.key, max_requests_per_s_per_replica=0.0, reason=why)
    except UserInputError as exc:
        return ClassCapacity(request_class=cls.name, option=opt.key, max_requests_per_s_per_replica=0.0,
                             reason=exc.message)
    return ClassCapacity(request_class=cls.name, option=opt.key, max_requests_per_s_per_replica=res.max_rate,
                         limited_by=res.limited_by)


def left_out(classes: list[RequestClass], options: list[HardwareOption],
             capacities: list[ClassCapacity]) -> list[str]:
    """One note per option that cannot serve some class (capacity 0: it does not fit, or misses the SLO even
    unloaded), with the planner's reason: the optimiser leaves it out for those classes."""
    by_key = {(c.request_class, c.option): c for c in capacities}
    notes = []
    for opt in options:
        missed = [by_key[(cls.name, opt.key)] for cls in classes
                  if by_key[(cls.name, opt.key)].max_requests_per_s_per_replica <= 0]
        if not missed:
            continue
        who = ("every class" if len(missed) == len(classes)
               else "class " + ", ".join(repr(c.request_class) for c in missed))
        notes.append(f"{opt.key} left out for {who}: {missed[0].reason or 'no capacity at the SLO'}")
    return notes


def build_problem(classes: list[RequestClass], options: list[HardwareOption], caps: list[list[float]],
                  cons: FleetConstraints) -> MixProblem:
    """The MILP data: rates, capacities, cost per replica-hour, resource rows."""
    rows: list[ResourceRow] = []
    n_dev = tuple(float(o.tp) for o in options)
    if cons.max_power_w is not None:
        missing = sorted({o.device.id for o in options if o.power_w_per_device is None})
        if missing:
            raise UserInputError(f"a power limit needs each candidate's power; none known for {', '.join(missing)}",
                                 field="candidates.power_w", hint="give power_w for these candidates")
        rows.append(ResourceRow("power", f"total power <= {cons.max_power_w / 1e3:g} kW", "W", cons.max_power_w,
                                tuple(o.tp * (o.power_w_per_device or 0.0) for o in options)))
    if cons.max_usd_per_hour is not None:
        rows.append(ResourceRow("budget", f"budget <= {cons.max_usd_per_hour:g} USD/hour", "USD/hour",
                                cons.max_usd_per_hour, tuple(o.tp * o.usd_per_device_hour for o in options)))
    for hw, limit in cons.max_devices:
        rows.append(ResourceRow(f"devices:{hw}", f"{hw} devices <= {limit}", "devices", float(limit),
                                tuple(float(o.tp) if o.device.id == hw else 0.0 for o in options)))
    if cons.max_total_devices is not None:
        rows.append(ResourceRow("total_devices", f"total devices <= {cons.max_total_devices}", "devices",
                                float(cons.max_total_devices), n_dev))
    return MixProblem(classes=tuple(c.name for c in classes), rates=tuple(c.rate_per_s for c in classes),
                      capacity=tuple(tuple(row) for row in caps),
                      usd_per_replica_hour=tuple(o.tp * o.usd_per_device_hour for o in options), rows=tuple(rows))


def _rows(sol: MixSolution, classes: list[RequestClass], options: list[HardwareOption],
          caps: list[list[float]]) -> list[MixRow]:
    out = []
    for c, cls in enumerate(classes):
        for o, opt in enumerate(options):
            n = sol.replicas[c][o]
            if n:
                out.append(MixRow(request_class=cls.name, hardware=opt.device.id, tp=opt.tp, dtype=opt.dtype,
                                  engine=opt.engine, replicas=n, devices=n * opt.tp,
                                  max_requests_per_s_per_replica=caps[c][o],
                                  usd_per_hour=n * opt.tp * opt.usd_per_device_hour,
                                  power_w=None if opt.power_w_per_device is None else n * opt.tp * opt.power_w_per_device))
    return out


def _infeasible(p: MixProblem, classes: list[RequestClass], capacities: list[ClassCapacity], pruned: list[str],
                ) -> InfeasibleError:
    """InfeasibleError naming the class and the constraint (module doc of milp.diagnose)."""
    for c, cls in enumerate(classes):
        if not any(v > 0 for v in p.capacity[c]):
            reasons = [f"{cc.option}: {cc.reason}" for cc in capacities if cc.request_class == cls.name]
            unloaded = reasons and all("unloaded latency" in r for r in reasons)
            what = ("its SLO is below the unloaded latency of every candidate" if unloaded
                    else "no candidate can serve it within its SLO")
            return InfeasibleError(f"class {cls.name!r}: {what}", reasons=reasons + pruned,
                                   hint="relax the SLO, add larger TP / lower-precision choices, or faster hardware")
    d = diagnose(p)
    who = f"class {d.request_class!r}" if d.request_class else "the classes together"
    if d.row is None:
        return InfeasibleError(f"{who}: no fleet meets the constraints", reasons=pruned)
    need = "" if d.needed is None else f"; serving it needs at least {d.needed:,.4g} {d.row.unit}"
    return InfeasibleError(f"{who} cannot be served under the constraint '{d.row.label}'{need}",
                           reasons=[f"constraint {d.row.name}: limit {d.row.limit:,.4g} {d.row.unit}", *pruned],
                           hint=f"raise the limit ({d.row.name}) or lower the traffic")


def optimize_mix(classes: list[RequestClass], options: list[HardwareOption], cons: FleetConstraints | None = None, *,
                 horizon_hours: float = 1.0, assumptions: Assumptions | None = None,
                 capacity_cache: dict[tuple[str, str], ClassCapacity] | None = None,
                 capacity_scale: dict[str, float] | None = None) -> FleetPlan:
    """Cheapest replicas per class and option meeting every class's SLO and the constraints.

    InfeasibleError naming the class and the constraint when no fleet can serve the traffic.
    ``capacity_cache`` (class name, option key) -> capacity lets callers reuse evaluations;
    ``capacity_scale`` (class name -> factor in (0, 1]) derates a class's planner capacity (the
    simulator-guided repair of :mod:`xpuplan.jobs.fleet`)."""
    cons = cons or FleetConstraints()
    if not classes:
        raise UserInputError("give at least one request class", field="classes")
    if not options:
        raise UserInputError("give at least one candidate hardware", field="candidates")
    if not (math.isfinite(horizon_hours) and horizon_hours > 0):
        raise UserInputError(f"horizon must be positive (got {horizon_hours!r})", field="horizon_hours")
    kept, pruned = prune(options, cons)
    if not kept:
        what = "allowed_vendors" if cons.allowed_vendors is not None else "allowed_countries"
        raise InfeasibleError(f"no candidate hardware is allowed by constraint {what}", reasons=pruned,
                              hint="add candidates from the allowed vendors/countries or widen the constraint")
    cache = capacity_cache if capacity_cache is not None else {}
    capacities: list[ClassCapacity] = []
    caps: list[list[float]] = []
    for cls in classes:
        row = []
        for opt in kept:
            k = (cls.name, opt.key)
            if k not in cache:
                cache[k] = class_capacity(cls, opt, assumptions)
            capacities.append(cache[k])
            row.append(cache[k].max_requests_per_s_per_replica * (capacity_scale or {}).get(cls.name, 1.0))
        caps.append(row)
    p = build_problem(classes, kept, caps, cons)
    sol = solve_mix(p)
    if not sol.feasible:
        if sol.status.startswith("error"):
            raise InfeasibleError(f"the MILP solver failed: {sol.status}")
        raise _infeasible(p, classes, capacities, pruned)
    binding = set(binding_rows(p, sol))
    cons_out = [ConstraintReport(name=r.name, label=r.label, unit=r.unit, limit=r.limit, used=sol.row_usage[r.name],
                                 slack=r.limit - sol.row_usage[r.name], binding=r.name in binding) for r in p.rows]
    class_out = []
    for c, cls in enumerate(classes):
        cap = sum(caps[c][o] * sol.replicas[c][o] for o in range(len(kept)))
        class_out.append(ClassReport(request_class=cls.name, rate_per_s=cls.rate_per_s, capacity_per_s=cap,
                                     headroom_per_s=cap - cls.rate_per_s, slo=cls.slo.to_dict()))
    mix = _rows(sol, classes, kept, caps)
    # best single hardware kind (all its TP/dtype options), same SLOs and constraints
    best: SingleHardware | None = None
    reasons: list[str] = []
    for hw in dict.fromkeys(o.device.id for o in kept):
        idx = [i for i, o in enumerate(kept) if o.device.id == hw]
        s = solve_mix(p.only_options(idx))
        if not s.feasible:
            reasons.append(f"{hw}: {s.status}")
            continue
        if best is None or s.usd_per_hour < best.usd_per_hour:
            rows = _rows(s, classes, kept, caps)
            best = SingleHardware(hardware=hw, total_cost=s.usd_per_hour * horizon_hours, usd_per_hour=s.usd_per_hour,
                                  devices=sum(r.devices for r in rows), mix=rows)
    powers = [r.power_w for r in mix]
    total = sol.usd_per_hour * horizon_hours
    return FleetPlan(
        horizon_s=horizon_hours * units.HOUR, mix=mix, total_cost=total, usd_per_hour=sol.usd_per_hour,
        devices=sum(r.devices for r in mix), power_w=None if any(v is None for v in powers) else float(sum(
            v for v in powers if v is not None)),
        classes=class_out, constraints=cons_out, best_single=best,
        best_single_reason=None if best is not None else "no single hardware kind meets every class's SLO under the "
        "constraints: " + "; ".join(reasons),
        # a restriction is never cheaper: clip float noise of the two sums at 0
        savings_vs_best_single=max(0.0, 1.0 - total / best.total_cost) if best is not None and best.total_cost > 0
        else None,
        capacities=capacities, pruned=pruned, notes=left_out(classes, kept, capacities),
        prices=[{"option": o.key, "usd_per_device_hour": o.usd_per_device_hour, "source": o.price_source,
                 "power_w_per_device": o.power_w_per_device} for o in kept],
    )
