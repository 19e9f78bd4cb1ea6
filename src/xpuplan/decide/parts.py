"""One role of a deployment on one device kind: run the planner, then price it.

A workload has roles (``train``; ``serve``; or ``complex`` + ``standard`` for the guide's routed
hybrid). A :class:`Part` is one role planned on one device with the public planners
(``train.search_plans`` at the scenario's device count; ``serve.size_for_qps`` for the role's load
under the SLO) and priced with :mod:`xpuplan.cost`. Options (single or mixed hardware) are sets of
parts. The decision layer never re-implements planner math; it reads the planners' results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from xpuplan.catalog.prices import PriceBook, PriceFigure
from xpuplan.decide.scenario import Scenario, ServingSpec
from xpuplan.errors import UserInputError, XpuplanError
from xpuplan.models.arch import ModelArch
from xpuplan.units import KWH
from xpuplan.validate.band import model_regime
from xpuplan.workload.datasets import DatasetLengths, dataset_lengths
from xpuplan.workload.lengths import LengthDist, as_length
from xpuplan.workload.serving import DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN, dataset_length_dists

#: Catalog figures an option's numbers rest on (shown with their trust grades).
PERF_FIGURES = ("dense_tflops.bf16", "dense_tflops.fp16", "dense_tflops.fp8", "dense_tflops.int8",
                "memory.capacity_gb", "memory.bandwidth_gb_per_s", "scale_up.bandwidth_gb_per_s_per_direction",
                "power.tdp_w")


#: A TTFT-limited serving plan whose mean TTFT at the target load is above this share of the limit is sized where
#: prompts barely queue: its replica count says more about the SLO than about the hardware (the part notes it).
TTFT_NEAR_IDLE_SHARE = 0.5


@dataclass(frozen=True)
class Load:
    """The serving load of one role: its request rate, prompt and output length distributions (a fixed length is a
    point), SLO, precisions, and whether it is a batch."""

    qps: float
    input_len: LengthDist
    output_len: LengthDist
    ttft_s: float
    tpot_s: float
    dtypes: tuple[str, ...]
    batch: bool
    dataset: DatasetLengths | None = None  # the dataset that gave a length (``used_for`` on the plan)

    @property
    def input_mean(self) -> float:
        return self.input_len.average

    @property
    def output_mean(self) -> float:
        return self.output_len.average


@dataclass
class Part:
    """One role on one device kind: plan, numbers, cost lines, figures used."""

    role: str
    device_id: str
    ok: bool
    reasons: list[str] = field(default_factory=list)
    devices: int = 0
    plan: dict[str, Any] = field(default_factory=dict)
    time_s: float | None = None  # training: time to train; batch: time to process; online: e2e latency
    latency_s: float | None = None  # training: step time; serving: P99 TTFT + output x TPOT at the target
    throughput: float | None = None  # tokens/s per device (training) or output tokens/s per device (serving)
    # training: the fewest devices whose usable memory holds the model's training state (whatever plan the search
    # picks: a ZeRO-3 or offloading plan spans no fewer); serving: devices per replica
    model_parallel: int = 1
    compute_bound_fraction: float = 1.0
    busy_fraction: float = 1.0
    replica_devices: int = 1
    rate_per_replica: float | None = None
    target_qps: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    energy_kwh: float | None = None
    power_kw: float | None = None
    lines_usd: dict[str, float] = field(default_factory=dict)
    hardware_known: bool = True
    development_usd: float | None = None
    porting_months: float | None = None
    cost_mode: str = "owned"
    price_figures: list[PriceFigure] = field(default_factory=list)
    main_price: PriceFigure | None = None  # the purchase or rental price the hardware line rests on
    electricity: PriceFigure | None = None
    efficiency_source: str = "defaults"
    notes: list[str] = field(default_factory=list)  # what the result says of this part (plan limits, costing gaps)
    # serving: (mean TTFT at the target load, the TTFT limit) when the limit binds near idle (TTFT_NEAR_IDLE_SHARE)
    ttft_near_idle_s: tuple[float, float] | None = None
    regime: Any = None  # validate.band.Regime of the plan (widens its validation band outside the public rows')

    @property
    def hardware_usd(self) -> float | None:
        if not self.hardware_known:
            return None
        return sum(self.lines_usd.get(k, 0.0) for k in ("hardware_usd", "network_usd", "cloud_usd"))

    @property
    def operations_usd(self) -> float:
        return sum(self.lines_usd.get(k, 0.0) for k in ("energy_usd", "space_cooling_usd", "operations_usd"))


def roles(s: Scenario) -> dict[str, float]:
    """Role -> share of the decision (performance leaves are averaged with these shares)."""
    w = s.workload
    out: dict[str, float] = {}
    serving_share = 1.0 if w.kind == "serving" else 0.5
    if w.kind in ("training", "train_and_serve"):
        out["train"] = 1.0 if w.kind == "training" else 0.5
    if w.kind in ("serving", "train_and_serve"):
        if w.routing is not None:
            out["complex"] = serving_share * w.routing.complex_fraction
            out["standard"] = serving_share * (1 - w.routing.complex_fraction)
        else:
            out["serve"] = serving_share
    return out


def serving_lengths(sv: ServingSpec, model: ModelArch) -> tuple[LengthDist, LengthDist, DatasetLengths | None]:
    """Prompt and output lengths of the scenario's serving load: ``input_len`` / ``output_len`` where given (a number
    is a fixed length), else the ``dataset``'s for the model's tokenizer (``workload.datasets``), else the defaults
    (2,048 / 256 tokens). The third item is the dataset, where it gave a length."""
    ds = dataset_lengths(sv.dataset, model.vocab_size, field="workload.serving.dataset") if sv.dataset else None
    ds_in, ds_out = dataset_length_dists(ds) if ds else (None, None)
    d_in = as_length(sv.input_len) if sv.input_len is not None else ds_in or as_length(DEFAULT_INPUT_LEN)
    d_out = as_length(sv.output_len) if sv.output_len is not None else ds_out or as_length(DEFAULT_OUTPUT_LEN)
    used = ds is not None and (sv.input_len is None or sv.output_len is None)
    return d_in, d_out, ds if used else None


def role_shapes(s: Scenario, model: ModelArch
                ) -> list[tuple[str, str, LengthDist, LengthDist, DatasetLengths | None]]:
    """(role, field path, prompt lengths, output lengths, the dataset that gave a length) of every serving role."""
    sv, rt = s.workload.serving, s.workload.routing
    if sv is None:
        return []
    if rt is None:
        return [("serve", "workload.serving", *serving_lengths(sv, model))]
    return [(role, f"workload.routing.{role}", as_length(shape.input_len), as_length(shape.output_len), None)
            for role, shape in (("complex", rt.complex), ("standard", rt.standard))]


def lengths_used(s: Scenario, model: ModelArch) -> list[dict[str, Any]]:
    """Per serving role, the request lengths the plans use (the result's ``serving_lengths`` assumption): the
    distributions, their means, and where they came from (the scenario, its dataset, or the defaults)."""
    out: list[dict[str, Any]] = []
    sv = s.workload.serving
    for role, path, d_in, d_out, ds in role_shapes(s, model):
        given = ((sv.input_len, sv.output_len) if role == "serve" and sv is not None else (True, True))
        origin = ["scenario" if g is not None else (ds.dataset if ds else "default") for g in given]
        out.append({"role": role, "field": path,
                    "input_len": d_in.model_dump(exclude_none=True), "output_len": d_out.model_dump(exclude_none=True),
                    "input_mean": _tokens(d_in.average), "output_mean": _tokens(d_out.average),
                    "from": {"input_len": origin[0], "output_len": origin[1]},
                    **({"dataset": {k: v for k, v in ds.to_dict().items()
                                    if k in ("dataset", "tokenizer", "tokenizer_assumed", "source")}} if ds else {})})
    return out


def load_for(role: str, s: Scenario, model: ModelArch) -> Load:
    sv: ServingSpec | None = s.workload.serving
    assert sv is not None
    qps = sv.target_qps
    rt = s.workload.routing
    if role in ("complex", "standard") and rt is not None:
        qps *= rt.complex_fraction if role == "complex" else 1 - rt.complex_fraction
        shape = rt.complex if role == "complex" else rt.standard
        inp, out, ds = as_length(shape.input_len), as_length(shape.output_len), None
    else:
        inp, out, ds = serving_lengths(sv, model)
    return Load(qps, inp, out, sv.ttft_ms / 1e3, sv.tpot_ms / 1e3, tuple(sv.dtypes), sv.is_batch, ds)


def _tokens(x: float) -> float | int:
    """A token count for results and messages: whole where it is (a fixed length), else to one decimal (a mean)."""
    return int(x) if float(x).is_integer() else round(x, 1)


def _distinct(reasons: list[str], limit: int = 3) -> list[str]:
    causes = list(dict.fromkeys(r.split(": ", 1)[-1] for r in reasons))
    return causes[:limit]


def plan_training(model: ModelArch, dev: Any, s: Scenario) -> Part:
    from xpuplan.train import Cluster
    from xpuplan.train import search_plans as search
    from xpuplan.train.search import min_devices_for_states
    from xpuplan.workload import TrainingJob

    spec = s.workload.training
    assert spec is not None
    part = Part("train", dev.id, ok=False)
    try:
        job = TrainingJob(train_tokens=spec.train_tokens, method=spec.method, seq_len=spec.seq_len,
                          global_batch_tokens=spec.global_batch_tokens)
        res = search(model, Cluster.from_catalog(dev, spec.devices), job, top=1)
    except XpuplanError as exc:
        part.reasons = [f"training: {exc}"]
        return part
    if not res.top:
        part.reasons = [f"training: {r}" for r in _distinct(list(res.reasons))] or ["training: no plan fits"]
        return part
    e = res.top[0]
    st = e.step
    compute = st.compute_s + st.recompute_s
    part.ok = True
    part.devices = e.n_devices
    part.plan = {"kind": "training", "key": e.key, "devices": e.n_devices, "tp": e.plan.tp, "pp": e.plan.pp,
                 "dp": e.plan.dp, "mfu": e.mfu, "tokens_per_s": e.tokens_per_s,
                 "memory_bytes_per_device": e.memory.total_bytes}
    if e.recompute_modules is not None:  # what the plan's selective recomputation re-runs (the search's set)
        part.plan["recompute_modules"] = list(e.recompute_modules)
    if e.offload_modules is not None:  # the search chose fine-grained activation offloading for this plan
        part.plan["offload_modules"] = list(e.offload_modules)
    part.time_s = e.time_to_train_s
    part.latency_s = st.step_s
    part.throughput = e.tokens_per_s_per_device
    part.model_parallel = min_devices_for_states(model, Cluster.from_catalog(dev, e.n_devices), job, e.plan.precision)
    part.compute_bound_fraction = min(1.0, compute / st.step_s) if st.step_s > 0 else 1.0
    part.busy_fraction = 1.0
    part.efficiency_source = e.efficiency_source
    part.regime = model_regime(model, seq_len=spec.seq_len, n_devices=e.n_devices, precision=e.plan.precision,
                               method=spec.method)
    return part


def plan_serving(model: ModelArch, dev: Any, role: str, load: Load) -> Part:
    from xpuplan.serve import SLO, size_for_qps

    part = Part(role, dev.id, ok=False)
    slo = SLO(ttft_s=load.ttft_s, tpot_s=load.tpot_s)
    spread = not load.input_len.is_fixed  # a distribution: the TTFT tail is the tail prompt's, the queue M/G/1
    in_mean, out_mean = load.input_mean, load.output_mean
    try:
        plan = size_for_qps(model, [dev], load.qps, in_mean, out_mean, slo, dtypes=list(load.dtypes), disagg=False,
                            ttft_input_len=load.input_len.quantile(slo.percentile) if spread else None,
                            input_lengths=load.input_len.nodes() if spread else None)
    except XpuplanError as exc:
        part.reasons = [f"serving ({role}): {exc}"]
        return part
    if not plan.options:
        part.reasons = [f"serving ({role}): {c}" for c in
                        _distinct(plan.infeasible.get(dev.id, ["no configuration meets the SLO"]))]
        return part
    o = plan.options[0]
    at = o.at_target
    rep = o.replica_obj
    n_rep = rep.n_devices if rep is not None else int(o.replica.get("n_devices", 1))
    part.ok = True
    part.devices = o.devices
    part.replica_devices = n_rep
    part.rate_per_replica = o.rate_per_replica
    part.target_qps = load.qps
    part.plan = {"kind": "serving", "role": role, "replica": o.replica.get("key"), "replicas": o.replicas,
                 "devices": o.devices, "tp": o.replica.get("tp"), "pp": o.replica.get("pp"),
                 "dtype": (o.replica.get("precision") or {}).get("scheme"), "limited_by": o.limited_by,
                 "max_requests_per_s_per_replica": o.rate_per_replica, "qps": load.qps,
                 "input_len": _tokens(in_mean), "output_len": _tokens(out_mean)}
    for key, d in (("input_dist", load.input_len), ("output_dist", load.output_len)):
        if not d.is_fixed:  # the lengths' distribution (input_len / output_len above are its mean)
            part.plan[key] = d.model_dump(exclude_none=True)
    if load.dataset is not None:
        part.plan["dataset"] = load.dataset.dataset
    if at is not None:
        part.ttft_s, part.tpot_s = at.ttft_p_s, at.tpot_s
        part.latency_s = at.ttft_p_s + out_mean * at.tpot_s
        decode = out_mean * at.tpot_s
        part.compute_bound_fraction = at.ttft_mean_s / (at.ttft_mean_s + decode) if at.ttft_mean_s + decode > 0 else 0.5
    part.throughput = o.rate_per_replica * out_mean / n_rep
    part.model_parallel = n_rep
    part.busy_fraction = min(1.0, load.qps / (o.replicas * o.rate_per_replica))
    if load.batch:
        part.time_s = None  # set by the caller from the batch size
    else:
        part.time_s = part.latency_s
    part.efficiency_source = str(o.replica.get("efficiency_source", "defaults"))
    if at is not None and str(o.limited_by).startswith("TTFT") and at.ttft_mean_s > TTFT_NEAR_IDLE_SHARE * load.ttft_s:
        part.ttft_near_idle_s = (at.ttft_mean_s, load.ttft_s)
        part.notes.append(
            f"serving ({role}): the TTFT limit binds near idle: {_tokens(in_mean):,}-token prompts take "
            f"{at.ttft_mean_s:.2f} s on average even when a replica serves only {o.rate_per_replica:.3g} req/s, "
            f"so their P99 reaches the {load.ttft_s:g} s limit with the replicas nearly idle; a looser TTFT limit, "
            f"shorter prompts or faster prefill hardware would need far fewer devices")
    prec = o.replica.get("precision")
    part.regime = model_regime(model, seq_len=round(in_mean), n_devices=n_rep,
                               precision=prec.get("gemm_dtype") if isinstance(prec, dict) else None,
                               batch=at.concurrency if at is not None else None)
    return part


# -- cost ---------------------------------------------------------------------------------------
def _cost_options(dev: Any, s: Scenario, mode: str) -> Any:
    from xpuplan.cost import CostOptions

    c = s.cost
    return CostOptions(
        mode=mode,  # type: ignore[arg-type]
        region=c.region, cooling=c.cooling, team_stacks=tuple(c.team_stacks),
        device_price_usd=_lookup(c.device_price_usd, dev), cloud_usd_per_device_hour=_lookup(c.cloud_usd_per_device_hour, dev),
        electricity_usd_per_kwh=c.electricity_usd_per_kwh, operations_usd_per_year=c.operations_usd_per_year,
        porting_engineer_months=c.porting_engineer_months, engineer_usd_per_year=c.engineer_usd_per_year,
    )


def _lookup(table: dict[str, float], dev: Any) -> float | None:
    from xpuplan.registry import normalise_alias

    names = {normalise_alias(n) for n in (dev.id, *dev.aliases)}
    for k, v in table.items():
        if normalise_alias(k) in names:
            return v
    return None


def _inputs(dev: Any, book: PriceBook, s: Scenario, part: Part) -> Any:
    """Cost inputs in the scenario's mode; rental-only hardware (TPUs) falls back to the cloud."""
    from xpuplan.cost import resolve_inputs

    try:
        return resolve_inputs(dev, book, _cost_options(dev, s, s.cost.mode))
    except UserInputError as exc:
        if s.cost.mode == "owned" and exc.field == "mode":
            part.notes.append(f"{dev.id} is not sold: priced as cloud rental")
            part.cost_mode = "cloud"
            return resolve_inputs(dev, book, _cost_options(dev, s, "cloud"))
        raise


def price_part(part: Part, dev: Any, book: PriceBook, s: Scenario, model_tokens: float | None) -> None:
    """Fill the part's cost lines, energy and development cost (unknown prices stay unknown).

    Adapter over :mod:`xpuplan.cost`: where the price book has no purchase price the hardware line is
    left out and marked unknown (the rest - energy, operations, development - is still priced).
    """
    from xpuplan.cost import Usage, development_for, job_cost, porting_for, tco
    from xpuplan.perf.power import power_profile_for

    part.cost_mode = s.cost.mode
    try:
        power = power_profile_for(dev)
    except XpuplanError as exc:
        part.notes.append(f"no power model: {exc}")
        part.hardware_known = False
        return
    part.power_kw = part.devices * power.tdp_w / 1e3
    try:
        inputs = _inputs(dev, book, s, part)
    except UserInputError as exc:
        part.notes.append(f"not priced: {exc.render()}")
        part.hardware_known = False
        return
    if inputs.mode == "owned" and inputs.device_price is None and inputs.node_system_price is None:
        part.hardware_known = False
        part.notes.append(f"no public purchase price for {dev.id}: hardware cost unknown "
                               "(give cost.device_price_usd)")
        inputs = inputs.model_copy(update={"device_price": PriceFigure("device_price_usd", 0.0, 0.0, 0.0, "USD",
                                                                         "placeholder: price unknown", "D")})
    part.price_figures = [f for f in inputs.figures() if f.source != "placeholder: price unknown"]
    if part.hardware_known:
        part.main_price = inputs.device_price or inputs.node_system_price or inputs.cloud_rate
    part.electricity = inputs.electricity
    try:
        if part.role == "train":
            assert part.time_s is not None
            usage = Usage(device_id=dev.id, devices=part.devices, duration_s=part.time_s, busy_fraction=1.0,
                          compute_bound_fraction=part.compute_bound_fraction, tokens=model_tokens)
            res: Any = job_cost(inputs, power, usage, amortisation_years=s.cost.years)
        else:
            res = tco(inputs, power, devices=part.devices, years=s.cost.years, busy_fraction=part.busy_fraction,
                      compute_bound_fraction=part.compute_bound_fraction)
    except UserInputError as exc:
        part.notes.append(f"not priced: {exc.render()}")
        part.hardware_known = False
        return
    part.lines_usd = {k: v for k, v in res.lines_usd.items() if k != "development_usd"}
    part.energy_kwh = res.facility_energy_j / KWH
    part.notes += [m for m in res.missing if "development" not in m]
    opts = _cost_options(dev, s, part.cost_mode)
    dev_fig = development_for(dev, book, opts)
    part.development_usd = None if dev_fig is None else dev_fig.value
    est = porting_for(dev, book, opts)
    part.porting_months = None if est is None else est.engineer_months


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)
