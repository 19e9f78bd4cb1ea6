"""The decision engine: enumerate options, prune by constraints, evaluate, score, rank.

1. Candidates: the scenario's hardware (ids, or ``all``: every catalog accelerator).
2. Fact constraints (vendor, domestic-only, region/export control, power, memory, trust) reject a
   device before any planning.
3. Each role of the workload is planned on each remaining device (``parts``); a device that cannot
   run a role is rejected for single-hardware use with the planner's reasons.
4. Mixed options: the guide's hybrids, built from the best few devices per role (routed serving:
   complex requests to a ``complex_kinds`` pool, standard ones to a ``standard_kinds`` pool; train
   on one device and serve on another).
5. Option constraints (budget, deadline, max devices, site power) reject options with reasons.
6. Leaf scores (``scoring``) x weights -> ranking; Monte Carlo and weight sensitivity on top.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xpuplan.decide import facts
from xpuplan.decide.parts import (
    PERF_FIGURES,
    Part,
    lengths_used,
    load_for,
    plan_serving,
    plan_training,
    price_part,
    role_shapes,
    roles,
    serving_lengths,
)
from xpuplan.decide.scenario import Scenario
from xpuplan.decide.scoring import LEAVES, PERF_LEAVES, F, leaf_scores, totals
from xpuplan.decide.weights import Weights, criteria_data, make_weights
from xpuplan.errors import InfeasibleError, UserInputError

TRUST_ORDER = "ABCD"


@dataclass(frozen=True)
class Reason:
    """A message from the translation catalogue (``xpuplan.i18n``) with its parameters."""

    key: str
    params: tuple[tuple[str, Any], ...]

    def render(self, lang: str = "en") -> str:
        from xpuplan.i18n import t

        return t(self.key, lang, **dict(self.params))


def R(key: str, **params: Any) -> Reason:
    return Reason(key, tuple(sorted(params.items())))


@dataclass
class Candidate:
    key: str
    parts: dict[str, Part]  # role -> part
    devices_by_role: dict[str, Any]  # role -> Device
    notes: list[str] = field(default_factory=list)

    @property
    def is_mix(self) -> bool:
        return len({p.device_id for p in self.parts.values()}) > 1

    @property
    def device_ids(self) -> list[str]:
        return list(dict.fromkeys(p.device_id for p in self.parts.values()))

    @property
    def devices(self) -> int:
        return sum(p.devices for p in self.parts.values())

    def device_share(self) -> dict[str, float]:
        """Device id -> share of the option's devices."""
        tot = max(1, self.devices)
        out: dict[str, float] = {}
        for p in self.parts.values():
            out[p.device_id] = out.get(p.device_id, 0.0) + p.devices / tot
        return out

    def device(self, device_id: str) -> Any:
        for role, p in self.parts.items():
            if p.device_id == device_id:
                return self.devices_by_role[role]
        raise KeyError(device_id)

    @property
    def time_s(self) -> float | None:
        ts = [p.time_s for p in self.parts.values() if p.time_s is not None]
        return max(ts) if ts else None

    @property
    def latency_s(self) -> float | None:
        ls = [p.latency_s for p in self.parts.values() if p.role != "train" and p.latency_s is not None]
        if not ls:
            ls = [p.latency_s for p in self.parts.values() if p.latency_s is not None]
        return max(ls) if ls else None

    @property
    def hardware_usd(self) -> float | None:
        vals = [p.hardware_usd for p in self.parts.values()]
        return None if any(v is None for v in vals) else float(sum(v for v in vals if v is not None))

    @property
    def operations_usd(self) -> float:
        return sum(p.operations_usd for p in self.parts.values())

    @property
    def development_usd(self) -> float | None:
        """Porting cost once per distinct device (a mix pays for each stack it adopts)."""
        per_dev: dict[str, float | None] = {}
        for p in self.parts.values():
            per_dev[p.device_id] = p.development_usd
        vals = list(per_dev.values())
        return None if any(v is None for v in vals) else float(sum(v for v in vals if v is not None))

    @property
    def porting_months(self) -> float | None:
        per_dev = {p.device_id: p.porting_months for p in self.parts.values()}
        vals = list(per_dev.values())
        return None if any(v is None for v in vals) else float(sum(v for v in vals if v is not None))

    @property
    def cost_usd(self) -> float | None:
        hw = self.hardware_usd
        if hw is None:
            return None
        return hw + self.operations_usd + (self.development_usd or 0.0)

    @property
    def energy_kwh(self) -> float | None:
        vals = [p.energy_kwh for p in self.parts.values()]
        return None if any(v is None for v in vals) else float(sum(v for v in vals if v is not None))

    @property
    def power_kw(self) -> float | None:
        vals = [p.power_kw for p in self.parts.values()]
        return None if any(v is None for v in vals) else float(sum(v for v in vals if v is not None))

    def cost_lines(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in self.parts.values():
            for k, v in p.lines_usd.items():
                if k == "hardware_usd" and not p.hardware_known:
                    continue
                out[k] = out.get(k, 0.0) + v
        dev = self.development_usd
        if dev is not None:
            out["development_usd"] = dev
        return out

    def min_trust(self) -> str:
        grades = [self.device(d).min_trust() for d in self.device_ids]
        return max(grades, key=TRUST_ORDER.index)


@dataclass
class Rejected:
    key: str
    hardware: str | None
    mix: dict[str, str] | None
    constraint: str
    reasons: list[Reason]


@dataclass
class Evaluation:
    """Everything the ranking produced (turned into a Recommendation by the job)."""

    scenario: Scenario
    weights: Weights
    role_share: dict[str, float]
    candidates: list[Candidate]  # ranked
    scores: dict[str, F]  # leaf -> [K] normalised scores (ranked order)
    raw: dict[str, list[float | None]]  # leaf -> raw quantity per candidate (ranked order)
    total: F
    rejected: list[Rejected]
    mc: dict[str, Any] | None
    sensitivity: list[dict[str, Any]]
    elapsed_s: float
    #: serving roles' request lengths as planned (``parts.lengths_used``): where they came from and their means
    lengths: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# constraints on facts
# ---------------------------------------------------------------------------------------------
def fact_violation(dev: Any, s: Scenario) -> tuple[str, Reason] | None:
    """(constraint, reason) that rules ``dev`` out before planning, or None."""
    c = s.constraints
    vendor = dev.vendor.casefold()
    if c.allowed_vendors is not None and vendor not in {v.casefold() for v in c.allowed_vendors}:
        return "allowed_vendors", R("reason.allowed_vendors", vendor=dev.vendor, allowed=", ".join(c.allowed_vendors))
    if vendor in {v.casefold() for v in c.denied_vendors}:
        return "denied_vendors", R("reason.denied_vendors", vendor=dev.vendor)
    if c.domestic_only and dev.origin_country != "CN":
        return "domestic_only", R("reason.domestic_only", vendor=dev.vendor, country=dev.origin_country)
    why = facts.unavailable_reason(dev, s.region)
    if why is not None:
        return "region", R("reason.region", region=s.region, why=why)
    if c.max_power_w_per_device is not None:
        if dev.tdp_w is None:
            return "max_power_w_per_device", R("reason.no_tdp")
        if dev.tdp_w > c.max_power_w_per_device:
            return "max_power_w_per_device", R("reason.power", tdp=f"{dev.tdp_w:g}", limit=f"{c.max_power_w_per_device:g}")
    if c.min_memory_gb_per_device is not None:
        fig = dev.figure("memory.capacity_gb")
        if fig is None or fig.value / 1e9 < c.min_memory_gb_per_device:
            have = "unknown" if fig is None else f"{fig.value / 1e9:g} GB"
            return "min_memory_gb_per_device", R("reason.memory", have=have, limit=f"{c.min_memory_gb_per_device:g}")
    if c.min_trust is not None and TRUST_ORDER.index(dev.min_trust()) > TRUST_ORDER.index(c.min_trust):
        return "min_trust", R("reason.min_trust", grade=dev.min_trust(), limit=c.min_trust)
    return None


def option_violations(cand: Candidate, s: Scenario) -> list[tuple[str, Reason]]:
    c = s.constraints
    out: list[tuple[str, Reason]] = []
    if c.max_devices is not None and cand.devices > c.max_devices:
        out.append(("max_devices", R("reason.max_devices", devices=cand.devices, limit=c.max_devices)))
    if c.max_site_power_kw is not None:
        p = cand.power_kw
        if p is None:
            out.append(("max_site_power_kw", R("reason.no_tdp")))
        elif p > c.max_site_power_kw:
            out.append(("max_site_power_kw", R("reason.site_power", kw=f"{p:,.1f}", limit=f"{c.max_site_power_kw:g}")))
    if c.max_budget_usd is not None:
        cost = cand.cost_usd
        if cost is None:
            out.append(("max_budget_usd", R("reason.budget_unknown")))
        elif cost > c.max_budget_usd:
            out.append(("max_budget_usd", R("reason.budget", cost=f"{cost:,.0f}", limit=f"{c.max_budget_usd:,.0f}")))
    if c.deadline_days is not None and "train" in cand.parts:
        t = cand.parts["train"].time_s
        if t is not None and t / 86400 > c.deadline_days:
            out.append(("deadline_days", R("reason.deadline", days=f"{t / 86400:,.1f}", limit=f"{c.deadline_days:g}")))
    return out


def binding(cand: Candidate, s: Scenario, lang: str = "en") -> list[str]:
    """Constraints the option uses at least ``binding_share`` of (data/criteria.yaml)."""
    from xpuplan.i18n import t

    share = float(criteria_data().constants["binding_share"])
    c = s.constraints
    out: list[str] = []

    def add(constraint: str, used: str, limit: str) -> None:
        out.append(t("binding.use", lang, constraint=constraint, used=used, limit=limit))

    sv = s.workload.serving
    for role, p in cand.parts.items():
        if sv is not None and role != "train":
            if p.ttft_s is not None and p.ttft_s >= share * sv.ttft_ms / 1e3:
                add(f"ttft_ms ({role})", f"{p.ttft_s * 1e3:,.0f} ms", f"{sv.ttft_ms:g} ms")
            if p.tpot_s is not None and p.tpot_s >= share * sv.tpot_ms / 1e3:
                add(f"tpot_ms ({role})", f"{p.tpot_s * 1e3:,.1f} ms", f"{sv.tpot_ms:g} ms")
    for d in cand.device_ids:
        dev = cand.device(d)
        if c.max_power_w_per_device and dev.tdp_w and dev.tdp_w >= share * c.max_power_w_per_device:
            add(f"max_power_w_per_device ({d})", f"{dev.tdp_w:g} W", f"{c.max_power_w_per_device:g} W")
    if c.max_devices and cand.devices >= share * c.max_devices:
        add("max_devices", str(cand.devices), str(c.max_devices))
    if c.max_budget_usd and cand.cost_usd and cand.cost_usd >= share * c.max_budget_usd:
        add("max_budget_usd", f"${cand.cost_usd:,.0f}", f"${c.max_budget_usd:,.0f}")
    if c.max_site_power_kw and cand.power_kw and cand.power_kw >= share * c.max_site_power_kw:
        add("max_site_power_kw", f"{cand.power_kw:,.1f} kW", f"{c.max_site_power_kw:g} kW")
    if c.deadline_days and "train" in cand.parts:
        tt = cand.parts["train"].time_s
        if tt is not None and tt / 86400 >= share * c.deadline_days:
            add("deadline_days", f"{tt / 86400:,.1f} d", f"{c.deadline_days:g} d")
    return out


# ---------------------------------------------------------------------------------------------
# raw quantities per candidate
# ---------------------------------------------------------------------------------------------
def _nan(x: float | None) -> float:
    return float("nan") if x is None or not math.isfinite(x) else float(x)


def role_metric(part: Part, leaf: str) -> float:
    if leaf == "compute_fit":
        return _nan(part.time_s if part.role == "train" else float(part.devices))
    if leaf == "memory_fit":
        return float(part.model_parallel)
    if leaf == "latency":
        return _nan(part.latency_s)
    if leaf == "throughput":
        return _nan(part.throughput)
    raise KeyError(leaf)


def candidate_raw(cand: Candidate, s: Scenario) -> dict[str, float]:
    """The non-performance leaves' raw quantities (module docs of facts/scoring)."""
    share = cand.device_share()
    training = s.workload.kind == "training"
    region = s.region

    def mean(f: Any) -> float:
        return sum(w * f(cand.device(d)) for d, w in share.items())

    def tech(dev: Any) -> float:
        src = next(p.efficiency_source for p in cand.parts.values() if p.device_id == dev.id)
        return facts.technical_score(dev.min_trust(), src)

    return {
        "ecosystem": mean(lambda d: facts.ecosystem_score(d, training)),
        "learning_cost": _nan(cand.porting_months),
        "debugging": mean(facts.debugging_score),
        "hardware_cost": _nan(cand.hardware_usd),
        "operations_cost": _nan(cand.operations_usd),
        "development_cost": _nan(cand.development_usd),
        "technical_risk": mean(tech),
        "supply_chain": mean(lambda d: 1.0 - facts.supply_risk(d, region)[0]),
        "lock_in": mean(facts.lock_in_score),
    }


def score_candidates(cands: list[Candidate], s: Scenario, share: dict[str, float]
                     ) -> tuple[dict[str, F], dict[str, np.ndarray], dict[str, dict[str, F]]]:
    raw_rows = [candidate_raw(c, s) for c in cands]
    raw = {leaf: np.array([r[leaf] for r in raw_rows]) for leaf in raw_rows[0]} if raw_rows else {}
    role_raw = {leaf: {role: np.array([role_metric(c.parts[role], leaf) for c in cands]) for role in share}
                for leaf in PERF_LEAVES}
    return leaf_scores(raw, role_raw, share), raw, role_raw


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------
def _hardware(s: Scenario, catalog: Any) -> list[Any]:
    if s.hardware == "all":
        return [d for d in catalog if d.kind != "CPU"]
    out = []
    for i, h in enumerate(s.hardware):
        try:
            out.append(catalog.get(h))
        except UserInputError as exc:
            raise UserInputError(exc.message, field=f"hardware[{i}]", hint=exc.hint) from None
    return list({d.id: d for d in out}.values())


def _check_vendors(s: Scenario, catalog: Any) -> None:
    """Unknown vendor names in allowed/denied lists are the user's typo: error with suggestions."""
    from xpuplan.errors import UnknownIdError

    known = {d.vendor.casefold(): d.vendor for d in catalog}
    for name in ("allowed_vendors", "denied_vendors"):
        for i, v in enumerate(getattr(s.constraints, name) or []):
            if v.casefold() not in known:
                err = UnknownIdError("vendor", v, list(known.values()), field=f"constraints.{name}[{i}]")
                raise err


def _unknown(kind: str, given: str, known: list[str], field: str) -> UserInputError:
    from xpuplan.errors import UnknownIdError

    err = UnknownIdError(kind, given, known, field=field)
    return UserInputError(f"{err.message} (known: {', '.join(known)})", field=field, hint=err.hint)


def _check_cost(s: Scenario, catalog: Any, book: Any) -> None:
    """Regions, cooling and the team's stacks must be known: pricing would otherwise leave every option
    unpriced, or availability rules unapplied, without an error."""
    from xpuplan.cost import check_team_stacks

    c, region = s.cost, s.constraints.region
    if region is not None and region.casefold() not in {r.casefold() for r in (facts.ANY_REGION, *book.regions)}:
        raise _unknown("region", region, [facts.ANY_REGION, *book.regions], "constraints.region")
    if c.region not in book.regions:
        raise _unknown("region", c.region, list(book.regions), "cost.region")
    if c.cooling not in book.cooling:
        raise _unknown("cooling", c.cooling, list(book.cooling), "cost.cooling")
    check_team_stacks(c.team_stacks, (d.ecosystem.software_stack for d in catalog), field="cost.team_stacks",
                      allow_empty=True)


def _model(s: Scenario) -> Any:
    from xpuplan.models import get_model

    try:
        return get_model(s.model)
    except UserInputError as exc:
        if exc.file is not None:
            raise
        raise UserInputError(exc.message, field="model", hint=exc.hint) from None


def _check_context(s: Scenario, model: Any) -> None:
    """A request longer than the model's context (prompt + output > max_seq_len) is the scenario's error, named by
    its field, as ``xpuplan infer`` refuses it: planning it would price a request the model cannot serve."""
    sv = s.workload.serving
    if sv is None:
        return
    shapes = [(path, d_in, d_out) for _role, path, d_in, d_out, _ds in role_shapes(s, model)]
    if s.workload.routing is not None:  # the serving section's own lengths too, though routing replaces them
        shapes.insert(0, ("workload.serving", *serving_lengths(sv, model)[:2]))
    for path, d_in, d_out in shapes:  # a distribution: its mean, as `infer capacity` checks
        in_len = d_in.average
        model.check_context(in_len, f"{path}.input_len")
        model.check_context(in_len + d_out.average, f"{path}.output_len")


def evaluate(s: Scenario, *, catalog: Any = None, book: Any = None, samples: int | None = None,
             seed: int | None = None, weights: Weights | None = None, lang: str = "en") -> Evaluation:
    """Rank the options of scenario ``s`` (module doc). Raises InfeasibleError when none is left."""
    from xpuplan.catalog import load_catalog
    from xpuplan.catalog.prices import load_prices

    t0 = time.perf_counter()
    catalog = catalog if catalog is not None else load_catalog()
    book = book if book is not None else load_prices()
    w = weights or make_weights(s.weights, s.weight_adjustments)
    _check_vendors(s, catalog)
    _check_cost(s, catalog, book)
    model = _model(s)
    _check_context(s, model)
    share = roles(s)
    devs = _hardware(s, catalog)
    rejected: list[Rejected] = []
    usable = []
    for d in devs:
        fv = fact_violation(d, s)
        if fv is not None:
            rejected.append(Rejected(d.id, d.id, None, fv[0], [fv[1]]))
        else:
            usable.append(d)
    # plan every role on every usable device
    tokens = s.workload.training.train_tokens if s.workload.training else None
    parts: dict[tuple[str, str], Part] = {}
    for d in usable:
        for role in share:
            if role == "train":
                p = plan_training(model, d, s)
            else:
                load = load_for(role, s, model)
                p = plan_serving(model, d, role, load)
                sv = s.workload.serving
                if p.ok and sv is not None and sv.is_batch and sv.requests is not None and p.rate_per_replica:
                    p.time_s = load.qps * sv.window_hours * 3600 / ((p.devices / p.replica_devices) * p.rate_per_replica) \
                        if sv.window_hours else None
            if p.ok:
                price_part(p, d, book, s, tokens)
            parts[(role, d.id)] = p
    singles: list[Candidate] = []
    for d in usable:
        ps = {role: parts[(role, d.id)] for role in share}
        bad = [r for p in ps.values() if not p.ok for r in p.reasons]
        if bad:
            rejected.append(Rejected(d.id, d.id, None, "workload",
                                     [R("reason.planner", text=b) for b in dict.fromkeys(bad)]))
            continue
        singles.append(Candidate(d.id, ps, {role: d for role in share}))
    mixes = _mixes(s, usable, parts, share) if s.mixes else []
    cands: list[Candidate] = []
    for c in singles + mixes:
        v = option_violations(c, s)
        if v:
            rejected.append(Rejected(c.key, None if c.is_mix else c.device_ids[0],
                                     {r: p.device_id for r, p in c.parts.items()} if c.is_mix else None,
                                     v[0][0], [x[1] for x in v]))
        else:
            cands.append(c)
    if not cands:
        from xpuplan.i18n import t

        raise InfeasibleError(t("reason.none_left", lang), reasons=_elimination(rejected, lang),
                              hint=t("reason.none_left_hint", lang))
    scores, raw, role_raw = score_candidates(cands, s, share)
    wd = w.to_dict()
    total = totals(scores, wd)
    order = sorted(range(len(cands)), key=lambda i: (-round(float(total[i]), 9), cands[i].key))
    cands = [cands[i] for i in order]
    scores = {k: v[order] for k, v in scores.items()}
    total = total[order]
    raw_out: dict[str, list[float | None]] = {}
    for leaf in LEAVES:
        if leaf in raw:
            vals = raw[leaf][order]
        else:  # performance leaf: role-share-weighted mean of the role quantities (display only)
            vals = np.nansum([role_raw[leaf][r][order] * share[r] for r in share], axis=0) / sum(share.values())
        raw_out[leaf] = [None if math.isnan(x) else float(x) for x in vals]
    n = samples if samples is not None else s.monte_carlo.samples
    mc = None
    if n > 0:
        from xpuplan.decide.montecarlo import run_monte_carlo

        mc = run_monte_carlo(cands, s, share, wd, n, seed if seed is not None else s.monte_carlo.seed)
    from xpuplan.decide.sensitivity import weight_sensitivity

    sens = weight_sensitivity(scores, wd, [c.key for c in cands])
    rejected.sort(key=lambda r: (r.constraint, r.key))
    return Evaluation(s, w, share, cands, scores, raw_out, total, rejected, mc, sens, time.perf_counter() - t0,
                      lengths_used(s, model))


def _elimination(rejected: list[Rejected], lang: str) -> list[str]:
    from xpuplan.i18n import t

    by: dict[str, list[str]] = {}
    for r in rejected:
        by.setdefault(r.constraint, []).append(r.key)
    return [t("reason.eliminated", lang, constraint=c, n=len(keys), options=", ".join(keys))
            for c, keys in sorted(by.items())]


def _mixes(s: Scenario, usable: list[Any], parts: dict[tuple[str, str], Part], share: dict[str, float]
           ) -> list[Candidate]:
    """The guide's hybrids from the best ``candidates_per_pool`` devices of each role."""
    w = s.workload
    by_id = {d.id: d for d in usable}
    if w.routing is not None:
        pool_roles = {"complex": w.routing.complex_kinds, "standard": w.routing.standard_kinds}
        k = w.routing.candidates_per_pool
    else:
        pool_roles = {}
        k = 3
    if w.kind == "train_and_serve":
        pool_roles = {"train": ["GPU", "NPU", "TPU"], **(pool_roles or {"serve": ["GPU", "NPU", "TPU"]})}
    if len(pool_roles) < 2:
        return []
    best: dict[str, list[str]] = {}
    for role, kinds in pool_roles.items():
        ok = [d for d in usable if d.kind in kinds and parts[(role, d.id)].ok]
        if not ok:
            return []
        pseudo = [Candidate(d.id, {role: parts[(role, d.id)]}, {role: d}) for d in ok]
        sc, _, _ = score_candidates(pseudo, s, {role: 1.0})
        tot = totals(sc, make_weights(s.weights, s.weight_adjustments).to_dict())
        ranked = sorted(range(len(pseudo)), key=lambda i: (-float(tot[i]), pseudo[i].key))
        best[role] = [pseudo[i].key for i in ranked[:k]]
    role_list = list(pool_roles)
    combos: list[dict[str, str]] = [{}]
    for role in role_list:
        combos = [{**c, role: d} for c in combos for d in best[role]]
    out = []
    for combo in combos:
        if len(set(combo.values())) < 2:
            continue
        ps = {role: parts[(role, combo[role])] for role in share}
        key = "mix:" + "+".join(f"{r}={combo[r]}" for r in role_list)
        out.append(Candidate(key, ps, {r: by_id[combo[r]] for r in share}))
    return out


def figures_used(cand: Candidate) -> list[dict[str, Any]]:
    out = []
    for d in cand.device_ids:
        dev = cand.device(d)
        for path in PERF_FIGURES:
            f = dev.figure(path)
            if f is not None:
                out.append({"device": d, "path": path, "value": f.printed_value, "unit": f.printed_unit_key,
                            "trust": f.trust, "source": f.source.cite()})
    for p in cand.parts.values():
        for pf in p.price_figures:
            out.append({"device": p.device_id, "path": pf.name, "value": pf.value, "unit": pf.unit,
                        "trust": pf.trust, "source": pf.source})
    seen = set()
    uniq = []
    for f in out:
        k = (f["device"], f["path"])
        if k not in seen:
            seen.add(k)
            uniq.append(f)
    return uniq
