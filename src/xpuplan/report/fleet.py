"""Report of ``xpuplan fleet optimize`` (a :class:`~xpuplan.fleet.optimize.FleetPlan`): HTML and Markdown.

The mix (class, hardware, replicas, cost per hour), its cost against the best single-hardware
fleet (chart), demand against capacity, the constraints (slack, binding), the simulated SLO
attainment when ``--verify`` ran, training when the scenario also trains, and the prices used
with their sources.
"""

from __future__ import annotations

from html import escape
from typing import Any

from xpuplan.fleet.optimize import FleetPlan
from xpuplan.report.format import fmt_number, fmt_usd_detail
from xpuplan.report.page import bullets, html_page, kpis, md_page, md_table, section, table
from xpuplan.report.svg import LINE_COLOURS, stacked_bars
from xpuplan.units import HOUR

TITLE = "Fleet plan"
MIX_HEAD = ["class", "hardware", "tp", "dtype", "replicas", "devices", "req/s per replica", "USD/h"]


def _usd(x: float | None) -> str:
    """Dollars as ``fleet optimize`` prints them: millions, whole dollars from $1,000, else cents."""
    return fmt_usd_detail(x)


def _subtitle(plan: FleetPlan) -> str:
    return f"{_usd(plan.total_cost)} over {plan.horizon_s / HOUR:g} h ({_usd(plan.usd_per_hour)}/h), {plan.devices:,} devices"


def _headline(plan: FleetPlan) -> list[tuple[str, str]]:
    out = [("total cost", _usd(plan.total_cost)), ("USD per hour", _usd(plan.usd_per_hour)),
           ("devices", f"{plan.devices:,}")]
    if plan.power_w:
        out.append(("power", f"{plan.power_w / 1e3:,.1f} kW"))
    if plan.best_single is not None:
        out.append(("saving vs best single", f"{100 * (plan.savings_vs_best_single or 0):.1f}%"))
    return out


def _single_line(plan: FleetPlan) -> str:
    if plan.best_single is not None:
        return (f"Best single hardware: {plan.best_single.hardware}, {_usd(plan.best_single.total_cost)} "
                f"({plan.best_single.devices:,} devices); the mix saves {100 * (plan.savings_vs_best_single or 0):.1f}%.")
    return f"Best single hardware: none ({plan.best_single_reason})."


def _mix_rows(plan: FleetPlan) -> list[list[str]]:
    return [[r.request_class, r.hardware, str(r.tp), r.dtype, f"{r.replicas:,}", f"{r.devices:,}",
             f"{r.max_requests_per_s_per_replica:.3g}", f"{r.usd_per_hour:,.2f}"] for r in plan.mix]


def _constraint_rows(plan: FleetPlan) -> list[list[str]]:
    return [[c.label, f"{fmt_number(c.limit)} {c.unit}", fmt_number(c.used), fmt_number(c.slack),
             "yes" if c.binding else "no"]
            for c in plan.constraints]


def _class_rows(plan: FleetPlan) -> list[list[str]]:
    return [[c.request_class, f"{c.rate_per_s:g}", f"{c.capacity_per_s:.3g}", f"{c.headroom_per_s:.3g}"]
            for c in plan.classes]


def _verify_rows(plan: FleetPlan) -> list[list[str]]:
    if not plan.verification:
        return []
    out = []
    for v in plan.verification["classes"]:
        att = v.get("slo_attainment")
        out.append([v["request_class"], "-" if att is None else f"{100 * att:.2f}%", f"{v['target_percentile']:g}%",
                    {True: "yes", False: "no", None: "-"}[v.get("meets_target")]])
    return out


def _training(plan: FleetPlan) -> str:
    t = plan.training
    if not t:
        return ""
    return (f"Training: {t['model']} on {t['devices']} x {t['hardware']}, {_usd(t['total_cost'])}; "
            f"training + serving: {_usd(plan.combined_total_cost)}.")


def _prices(plan: FleetPlan) -> list[dict[str, Any]]:
    return [{"name": f"price {p['option']}", "value": f"${p['usd_per_device_hour']:.4g} per device-hour",
             "source": p.get("source", "")} for p in plan.prices]


def mix_chart(plan: FleetPlan) -> str:
    """Cost per hour by hardware: the mix against the best single-hardware fleet."""
    hws = list(dict.fromkeys(r.hardware for r in plan.mix))
    if plan.best_single is not None:
        hws += [h for h in dict.fromkeys(r.hardware for r in plan.best_single.mix) if h not in hws]
    colours = {h: LINE_COLOURS[i % len(LINE_COLOURS)] for i, h in enumerate(hws)}
    rows: list[tuple[str, dict[str, float]]] = []
    mixes = [("mix", plan.mix)]
    if plan.best_single is not None:
        mixes.append((f"best single: {plan.best_single.hardware}", plan.best_single.mix))
    for label, mix in mixes:
        seg: dict[str, float] = {}
        for r in mix:
            seg[r.hardware] = seg.get(r.hardware, 0.0) + r.usd_per_hour
        rows.append((label, seg))
    return stacked_bars(rows, colours, {h: h for h in hws}, "Cost per hour by hardware", unit="USD/h")


def render_html(plan: FleetPlan) -> str:
    s = [f"<section>{kpis(_headline(plan))}<p>{escape(_single_line(plan))}</p>"
         + (f"<p>{escape(_training(plan))}</p>" if plan.training else "") + "</section>",
         section("Mix", table(MIX_HEAD, _mix_rows(plan), left=(1, 3))),
         section("Cost per hour by hardware", mix_chart(plan)),
         section("Demand and capacity", table(["class", "demand req/s", "capacity req/s", "headroom req/s"],
                                              _class_rows(plan)))]
    if plan.constraints:
        s.append(section("Constraints", table(["constraint", "limit", "used", "slack", "binding"],
                                              _constraint_rows(plan))))
    if plan.verification:
        s.append(section("Simulated SLO attainment", table(["class", "attainment", "target", "meets"],
                                                           _verify_rows(plan))))
    notes = [*plan.notes, *(f"pruned: {p}" for p in plan.pruned)]
    if notes:
        s.append(section("Notes", bullets(notes)))
    return html_page(TITLE, _subtitle(plan), schema_version=plan.schema_version, sections=s,
                     assumptions=_prices(plan), facts_note="Prices per device-hour are the assumptions of this plan.")


def render_markdown(plan: FleetPlan) -> str:
    out = [md_table(["quantity", "value"], _headline(plan)), "", _single_line(plan), ""]
    if plan.training:
        out += [_training(plan), ""]
    out += ["## Mix", "", md_table(MIX_HEAD, _mix_rows(plan)), "",
            "## Demand and capacity", "", md_table(["class", "demand req/s", "capacity req/s", "headroom req/s"],
                                                   _class_rows(plan)), ""]
    if plan.constraints:
        out += ["## Constraints", "", md_table(["constraint", "limit", "used", "slack", "binding"],
                                               _constraint_rows(plan)), ""]
    if plan.verification:
        out += ["## Simulated SLO attainment", "", md_table(["class", "attainment", "target", "meets"],
                                                            _verify_rows(plan)), ""]
    notes = [*plan.notes, *(f"pruned: {p}" for p in plan.pruned)]
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return md_page(TITLE, _subtitle(plan), schema_version=plan.schema_version, body=out, assumptions=_prices(plan),
                   facts_note="Prices per device-hour are the assumptions of this plan.")
