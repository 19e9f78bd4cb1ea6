"""The ``recommend`` job: a scenario in, a ranked, explained :class:`Recommendation` out.

Front ends (``xpuplan recommend``, the Python API ``xp.recommend``) call :func:`recommend`. The
request names a scenario (a file, a preset, a mapping or a :class:`Scenario`) and the run's knobs
(language, Monte Carlo samples and seed, weight overrides). The decision itself is
:func:`xpuplan.decide.engine.evaluate`; this module resolves inputs and shapes the typed result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from xpuplan.decide.engine import Evaluation, binding, evaluate, figures_used
from xpuplan.decide.explain import explain, label
from xpuplan.decide.result import (
    Criterion,
    Explanation,
    FigureUsed,
    OptionOut,
    PartOut,
    Recommendation,
    Rejection,
    Spread,
    Uncertainty,
    WeightChange,
)
from xpuplan.decide.scenario import Scenario, scenario_from
from xpuplan.decide.scoring import LEAVES
from xpuplan.decide.weights import criteria_data, make_weights
from xpuplan.units import KILO, KWH

__all__ = ["Recommendation", "RecommendRequest", "recommend"]


class RecommendRequest(BaseModel):
    """What to decide and how (every field optional: the default runs the built-in scenario)."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    # left_to_right: a mapping stays a mapping (merged over its preset by ``scenario_from``); in pydantic's
    # smart mode a complete mapping validated as a Scenario directly and silently lost the preset's keys.
    scenario: dict[str, Any] | Scenario | str | None = Field(default=None, description="file, preset, mapping",
                                                             union_mode="left_to_right")
    preset: str | None = Field(default=None, description="a built-in preset (when no scenario is given)")
    lang: str = Field(default="en", pattern="^(en|zh)$")
    samples: int | None = Field(default=None, ge=0, le=100_000, description="Monte Carlo samples (None: scenario)")
    seed: int | None = Field(default=None, ge=0)
    weights: dict[str, float] | None = Field(default=None, description="leaf (or group) weights replacing the scenario's")


def _scenario(req: RecommendRequest) -> Scenario:
    from xpuplan.decide.scenario import preset

    if req.scenario is not None:
        if isinstance(req.scenario, str | Path) and req.preset is not None:
            s = scenario_from(req.scenario)
            return s
        return scenario_from(req.scenario)
    if req.preset is not None:
        return preset(req.preset)
    return scenario_from(None)


def recommend(request: RecommendRequest | Scenario | dict[str, Any] | str | None = None, **kw: Any) -> Recommendation:
    """Rank deployment options for a scenario (see :class:`RecommendRequest`).

    ``recommend("pretraining")``, ``recommend("examples/x.yaml", lang="zh", samples=1000)`` and
    ``recommend(RecommendRequest(...))`` are all accepted. Raises ``UserInputError`` for bad input
    (naming the field) and ``InfeasibleError`` when no option meets the constraints.
    """
    req = request if isinstance(request, RecommendRequest) else RecommendRequest(scenario=request, **kw)
    s = _scenario(req)
    w = None
    if req.weights is not None:
        # a group the request names (performance=50) replaces the scenario's own weights of that group's leaves
        groups = criteria_data().groups
        shadowed = {leaf for g in req.weights if g in groups for leaf in groups[g]}
        kept = {k: v for k, v in s.weights.items() if k not in shadowed}
        w = make_weights({**kept, **req.weights}, s.weight_adjustments, field="--weight")
    from xpuplan.jobs.context import default_context

    ev = evaluate(s, catalog=default_context().catalog, samples=req.samples, seed=req.seed, weights=w,
                  lang=req.lang)
    return build(ev, req.lang)


def _joules(kwh: float | None) -> float | None:
    """kWh (the cost model's unit) to the result's joules."""
    return None if kwh is None else kwh * KWH


def _option_assumptions(c: Any) -> list[dict[str, Any]]:
    from xpuplan.decide.facts import efficiency_source_kind, part_efficiency_sigma

    out = []
    for p in c.parts.values():
        dev = c.device(p.device_id)
        out.append({"role": p.role, "device": p.device_id, "efficiency_source": p.efficiency_source,
                    "efficiency_source_kind": efficiency_source_kind(p.efficiency_source),
                    "efficiency_sigma": part_efficiency_sigma(dev, p.role, p.efficiency_source, p.regime),
                    "worst_trust": dev.min_trust(), "cost_mode": p.cost_mode})
    return out


def _workload(s: Scenario) -> dict[str, Any]:
    return s.workload.model_dump(mode="json", exclude_none=True)


def _lengths_line(ln: dict[str, Any]) -> str:
    """One serving role's request lengths in words (``parts.lengths_used``): shape, mean and origin of each."""
    def one(what: str, key: str) -> str:
        d, mean, origin = ln[key], ln[key.replace("_len", "_mean")], ln["from"][key]
        shape = "" if d["dist"] == "fixed" else f"{d['dist']}, mean "
        return f"{what} {shape}{mean:,} tokens ({origin})"
    return f"{one('prompts', 'input_len')}; {one('outputs', 'output_len')}"


def build(ev: Evaluation, lang: str = "en") -> Recommendation:
    """Shape an :class:`Evaluation` as the typed, versioned result."""
    s = ev.scenario
    cd = criteria_data()
    wd = ev.weights.to_dict()
    options = []
    for k, c in enumerate(ev.candidates):
        crit = {}
        groups: dict[str, float] = {}
        for leaf in LEAVES:
            sc = float(ev.scores[leaf][k])
            pts = wd[leaf] * sc
            g = cd.group_of(leaf)
            groups[g] = groups.get(g, 0.0) + pts
            crit[leaf] = Criterion(group=g, weight=wd[leaf], score=sc, points=pts, raw=ev.raw[leaf][k],
                                   raw_unit=LEAVES[leaf][1], known=ev.raw[leaf][k] is not None)
        unc = None
        if ev.mc is not None:
            ts, cs = ev.mc["time_s"][k], ev.mc["cost_usd"][k]
            unc = Uncertainty(samples=ev.mc["samples"], time_s=Spread(**ts) if ts else None,
                              cost_usd=Spread(**cs) if cs else None, p_rank_first=ev.mc["p_rank_first"][k])
        parts = [PartOut(role=r, hardware=p.device_id, devices=p.devices, plan=p.plan, time_s=p.time_s,
                         latency_s=p.latency_s, energy_j=_joules(p.energy_kwh),
                         cost_lines_usd={kk: v for kk, v in p.lines_usd.items()
                                         if p.hardware_known or kk != "hardware_usd"},
                         development_usd=p.development_usd, cost_mode=p.cost_mode, notes=p.notes)
                 for r, p in c.parts.items()]
        options.append(OptionOut(
            rank=k + 1, key=c.key, kind="mix" if c.is_mix else "single",
            hardware=None if c.is_mix else c.device_ids[0],
            mix={r: p.device_id for r, p in c.parts.items()} if c.is_mix else None,
            label=label(ev, k, lang), score=float(ev.total[k]), criteria=crit, groups=groups, devices=c.devices,
            time_s=c.time_s, latency_s=c.latency_s, cost_usd=c.cost_usd, cost_lines_usd=c.cost_lines(),
            energy_j=_joules(c.energy_kwh), power_w=None if c.power_kw is None else c.power_kw * KILO, parts=parts, binding=binding(c, s, lang),
            figures=[FigureUsed(**f) for f in figures_used(c)], min_trust=c.min_trust(), uncertainty=unc,
            assumptions=_option_assumptions(c),
            notes=c.notes,
        ))
    rejected = [Rejection(key=r.key, hardware=r.hardware, mix=r.mix, constraint=r.constraint,
                          reasons=[x.render(lang) for x in r.reasons]) for r in ev.rejected]
    sens = [WeightChange(**x) for x in ev.sensitivity]
    expl: Explanation = explain(ev, lang)
    assumptions: list[dict[str, Any]] = [
        {"name": "weights", "value": wd, "source": cd.source, "trust": "D", "file": cd.file},
        {"name": "criteria_constants", "value": dict(cd.constants), "source": "xpuplan assumption (docs/decide.md)",
         "trust": "D", "file": cd.file},
        {"name": "uncertainty", "value": dict(cd.uncertainty), "source": "xpuplan assumption (docs/decide.md)",
         "trust": "D", "file": cd.file},
        {"name": "cost", "value": s.cost.model_dump(mode="json"), "source": "scenario", "trust": "A"},
        {"name": "efficiency_sources", "value": {p.device_id: p.efficiency_source for c in ev.candidates
                                                for p in c.parts.values()},
         "source": "xpuplan.catalog.assumptions (planner defaults or calibration)", "trust": "D"},
    ]
    if ev.lengths:
        sources = sorted({ln["dataset"]["source"] for ln in ev.lengths if "dataset" in ln})
        origins = {o for ln in ev.lengths for o in ln["from"].values()}
        defaulted = "default" in origins
        assumptions.append({
            "name": "serving_lengths", "value": {ln["role"]: _lengths_line(ln) for ln in ev.lengths},
            "source": "; ".join([*(["scenario"] if "scenario" in origins else []), *sources,
                                 *(["xpuplan default (2,048 / 256 tokens)"] if defaulted else [])]),
            "trust": "D" if defaulted else ("B" if sources else "A")})
    mc = {"samples": 0} if ev.mc is None else {k: v for k, v in ev.mc.items()
                                                if k in ("samples", "seed", "method", "sigma_by_device")}
    return Recommendation(
        scenario=s.scenario, title=s.title_zh if lang == "zh" and s.title_zh else s.title, model=s.model,
        workload=_workload(s), weights=wd, options=options, rejected=rejected, sensitivity=sens,
        explanation=expl, assumptions=assumptions, monte_carlo=mc, elapsed_s=ev.elapsed_s,
    )
