"""Report of ``xpuplan fleet optimize`` (a :class:`~xpuplan.fleet.optimize.FleetPlan`): HTML and Markdown.

The mix (class, hardware, replicas, cost per hour), its cost against the best single-hardware
fleet (chart), demand against capacity, the constraints (slack, binding), the simulated SLO
attainment when ``--verify`` ran, training when the scenario also trains, and the prices used
with their sources. Words come from the i18n catalogue (``fleet.*``, English or Chinese); the
optimiser's notes, constraint labels and reasons stay as it wrote them (English).
"""

from __future__ import annotations

from html import escape
from typing import Any

from xpuplan.fleet.optimize import FleetPlan
from xpuplan.i18n import t
from xpuplan.report.format import fmt_number, fmt_usd_detail
from xpuplan.report.page import bullets, html_page, kpis, md_page, md_table, section, table
from xpuplan.report.svg import LINE_COLOURS, stacked_bars
from xpuplan.units import HOUR

#: The report's title and mix header in English (``fleet.title``, ``fleet.col.*`` in the i18n catalogue).
TITLE = "Fleet plan"
MIX_HEAD = ["class", "hardware", "tp", "dtype", "replicas", "devices", "req/s per replica", "USD/h"]
MIX_COLS = ("class", "hardware", "tp", "dtype", "replicas", "devices", "rate", "usd_per_hour")


def _usd(x: float | None) -> str:
    """Dollars as ``fleet optimize`` prints them: millions, whole dollars from $1,000, else cents."""
    return fmt_usd_detail(x)


def _cols(lang: str, *names: str) -> list[str]:
    return [t(f"fleet.col.{c}", lang) for c in names]


def _yes_no(v: bool | None, lang: str) -> str:
    return "-" if v is None else t("fleet.yes" if v else "fleet.no", lang)


def _subtitle(plan: FleetPlan, lang: str = "en") -> str:
    return t("fleet.subtitle", lang, total=_usd(plan.total_cost), hours=f"{plan.horizon_s / HOUR:g}",
             per_hour=_usd(plan.usd_per_hour), devices=f"{plan.devices:,}")


def _headline(plan: FleetPlan, lang: str = "en") -> list[tuple[str, str]]:
    out = [(t("fleet.total_cost", lang), _usd(plan.total_cost)),
           (t("fleet.usd_per_hour", lang), _usd(plan.usd_per_hour)),
           (t("fleet.col.devices", lang), f"{plan.devices:,}")]
    if plan.power_w:
        out.append((t("fleet.power", lang), f"{plan.power_w / 1e3:,.1f} kW"))
    if plan.best_single is not None:
        out.append((t("fleet.saving", lang), f"{100 * (plan.savings_vs_best_single or 0):.1f}%"))
    return out


def _single_line(plan: FleetPlan, lang: str = "en") -> str:
    if plan.best_single is not None:
        return t("fleet.best_single", lang, hardware=plan.best_single.hardware, cost=_usd(plan.best_single.total_cost),
                 devices=f"{plan.best_single.devices:,}", saving=f"{100 * (plan.savings_vs_best_single or 0):.1f}")
    return t("fleet.best_single_none", lang, reason=plan.best_single_reason)


def _mix_rows(plan: FleetPlan) -> list[list[str]]:
    return [[r.request_class, r.hardware, str(r.tp), r.dtype, f"{r.replicas:,}", f"{r.devices:,}",
             f"{r.max_requests_per_s_per_replica:.3g}", f"{r.usd_per_hour:,.2f}"] for r in plan.mix]


def _constraint_rows(plan: FleetPlan, lang: str = "en") -> list[list[str]]:
    return [[c.label, f"{fmt_number(c.limit)} {c.unit}", fmt_number(c.used), fmt_number(c.slack),
             _yes_no(c.binding, lang)]
            for c in plan.constraints]


def _class_rows(plan: FleetPlan) -> list[list[str]]:
    return [[c.request_class, f"{c.rate_per_s:g}", f"{c.capacity_per_s:.3g}", f"{c.headroom_per_s:.3g}"]
            for c in plan.classes]


def _verify_rows(plan: FleetPlan, lang: str = "en") -> list[list[str]]:
    if not plan.verification:
        return []
    out = []
    for v in plan.verification["classes"]:
        att = v.get("slo_attainment")
        out.append([v["request_class"], "-" if att is None else f"{100 * att:.2f}%", f"{v['target_percentile']:g}%",
                    _yes_no(v.get("meets_target"), lang)])
    return out


def _training(plan: FleetPlan, lang: str = "en") -> str:
    tr = plan.training
    if not tr:
        return ""
    return t("fleet.training", lang, model=tr["model"], devices=tr["devices"], hardware=tr["hardware"],
             cost=_usd(tr["total_cost"]), combined=_usd(plan.combined_total_cost))


def _prices(plan: FleetPlan, lang: str = "en") -> list[dict[str, Any]]:
    return [{"name": t("fleet.price_name", lang, option=p["option"]),
             "value": t("fleet.price_value", lang, usd=f"{p['usd_per_device_hour']:.4g}"),
             "source": p.get("source", "")} for p in plan.prices]


def _notes(plan: FleetPlan, lang: str) -> list[str]:
    return [*plan.notes, *(t("fleet.pruned", lang, what=p) for p in plan.pruned)]


def _notes_title(lang: str) -> str:
    """"Notes", saying the optimiser's notes are in English where the report is not."""
    return t("fleet.notes", lang) + t("fleet.notes_english", lang)


def mix_chart(plan: FleetPlan, lang: str = "en") -> str:
    """Cost per hour by hardware: the mix against the best single-hardware fleet."""
    hws = list(dict.fromkeys(r.hardware for r in plan.mix))
    if plan.best_single is not None:
        hws += [h for h in dict.fromkeys(r.hardware for r in plan.best_single.mix) if h not in hws]
    colours = {h: LINE_COLOURS[i % len(LINE_COLOURS)] for i, h in enumerate(hws)}
    rows: list[tuple[str, dict[str, float]]] = []
    mixes = [(t("fleet.chart.mix", lang), plan.mix)]
    if plan.best_single is not None:
        mixes.append((t("fleet.chart.best_single", lang, hardware=plan.best_single.hardware), plan.best_single.mix))
    for label, mix in mixes:
        seg: dict[str, float] = {}
        for r in mix:
            seg[r.hardware] = seg.get(r.hardware, 0.0) + r.usd_per_hour
        rows.append((label, seg))
    return stacked_bars(rows, colours, {h: h for h in hws}, t("fleet.cost_by_hardware", lang), unit="USD/h")


def render_html(plan: FleetPlan, lang: str = "en") -> str:
    s = [f"<section>{kpis(_headline(plan, lang))}<p>{escape(_single_line(plan, lang))}</p>"
         + (f"<p>{escape(_training(plan, lang))}</p>" if plan.training else "") + "</section>",
         section(t("fleet.mix", lang), table(_cols(lang, *MIX_COLS), _mix_rows(plan), left=(1, 3))),
         section(t("fleet.cost_by_hardware", lang), mix_chart(plan, lang)),
         section(t("fleet.demand", lang), table(_cols(lang, "class", "demand", "capacity", "headroom"),
                                                _class_rows(plan)))]
    if plan.constraints:
        s.append(section(t("fleet.constraints", lang), table(
            _cols(lang, "constraint", "limit", "used", "slack", "binding"), _constraint_rows(plan, lang))))
    if plan.verification:
        s.append(section(t("fleet.verification", lang), table(_cols(lang, "class", "attainment", "target", "meets"),
                                                              _verify_rows(plan, lang))))
    notes = _notes(plan, lang)
    if notes:
        s.append(section(_notes_title(lang), bullets(notes)))
    return html_page(t("fleet.title", lang), _subtitle(plan, lang), schema_version=plan.schema_version, sections=s,
                     assumptions=_prices(plan, lang), facts_note=t("fleet.prices_note", lang), lang=lang)


def render_markdown(plan: FleetPlan, lang: str = "en") -> str:
    out = [md_table([t("fleet.quantity", lang), t("page.value", lang)], _headline(plan, lang)), "",
           _single_line(plan, lang), ""]
    if plan.training:
        out += [_training(plan, lang), ""]
    out += [f"## {t('fleet.mix', lang)}", "", md_table(_cols(lang, *MIX_COLS), _mix_rows(plan)), "",
            f"## {t('fleet.demand', lang)}", "", md_table(_cols(lang, "class", "demand", "capacity", "headroom"),
                                                          _class_rows(plan)), ""]
    if plan.constraints:
        out += [f"## {t('fleet.constraints', lang)}", "",
                md_table(_cols(lang, "constraint", "limit", "used", "slack", "binding"), _constraint_rows(plan, lang)),
                ""]
    if plan.verification:
        out += [f"## {t('fleet.verification', lang)}", "",
                md_table(_cols(lang, "class", "attainment", "target", "meets"), _verify_rows(plan, lang)), ""]
    notes = _notes(plan, lang)
    if notes:
        out += [f"## {_notes_title(lang)}", ""] + [f"- {n}" for n in notes] + [""]
    return md_page(t("fleet.title", lang), _subtitle(plan, lang), schema_version=plan.schema_version, body=out,
                   assumptions=_prices(plan, lang), facts_note=t("fleet.prices_note", lang), lang=lang)
