"""Report of ``xpuplan recommend`` (a :class:`~xpuplan.decide.result.Recommendation`): HTML and Markdown.

Words come from the translation catalogue (:mod:`xpuplan.i18n`); the frame, the figures of the winner
and the assumptions come from :mod:`xpuplan.report.page`.
"""

from __future__ import annotations

from html import escape

from xpuplan.decide.result import OptionOut, Recommendation
from xpuplan.i18n import t
from xpuplan.report.format import fmt_energy_j as _mwh
from xpuplan.report.format import fmt_time as _time
from xpuplan.report.format import fmt_usd as _usd
from xpuplan.report.page import html_page, md_page
from xpuplan.report.svg import LEAF_COLOURS, LINE_COLOURS, pareto_scatter, range_bars, stacked_bars

#: Options shown in charts (the table lists all).
CHART_OPTIONS = 10



def _pfirst(o: OptionOut) -> str:
    return "-" if o.uncertainty is None else f"{o.uncertainty.p_rank_first:.0%}"


def short_label(o: OptionOut) -> str:
    """Chart label: the device ids (a mix joins its pools' devices with '+')."""
    if o.mix:
        return " + ".join(dict.fromkeys(o.mix.values()))
    return o.hardware or o.key


def _lines(rec: Recommendation, lang: str) -> list[tuple[str, list[str]]]:
    e = rec.explanation
    return [(t("report.why", lang), e.why), (t("report.what_would_change", lang), e.what_would_change),
            (t("report.benchmark_first", lang), e.benchmark_first), (t("report.caveats", lang), e.caveats)]


def render_html(rec: Recommendation) -> str:
    lang = rec.explanation.lang
    leaf_names = {k: t(f"criterion.{k}", lang) for k in LEAF_COLOURS}
    shown = rec.options[:CHART_OPTIONS]
    h: list[str] = []
    # summary and explanation
    h.append(f"<section><p class='muted'>{escape(t('report.scenario', lang))}: {escape(rec.scenario)} · "
             f"{escape(t('report.model', lang))}: {escape(rec.model)} · {escape(t('report.samples', lang))}: "
             f"{rec.monte_carlo.get('samples', 0)}</p><p class='summary'>{escape(rec.explanation.summary)}</p>")
    for head, lines in _lines(rec, lang):
        if lines:
            h.append(f"<h2>{escape(head)}</h2><ul>" + "".join(f"<li>{escape(x)}</li>" for x in lines) + "</ul>")
    h.append("</section>")
    # ranking table
    cols = ["report.rank", "report.option", "report.score", "report.devices", "report.time", "report.cost",
            "report.energy", "report.p_first", "report.trust"]
    h.append(f"<section><h2>{escape(t('report.ranking', lang))}</h2><table><tr>"
             + "".join(f"<th>{escape(t(c, lang))}</th>" for c in cols) + "</tr>")
    for o in rec.options:
        h.append(f"<tr class='{'win' if o.rank == 1 else ''}'><td>{o.rank}</td><td>{escape(o.label)}</td>"
                 f"<td class=r>{o.score:.1f}</td><td class=r>{o.devices:,}</td><td class=r>{_time(o.time_s)}</td>"
                 f"<td class=r>{_usd(o.cost_usd)}</td><td class=r>{_mwh(o.energy_j)}</td><td class=r>{_pfirst(o)}</td>"
                 f"<td><span class='tag'>{o.min_trust}</span></td></tr>")
    h.append("</table></section>")
    # charts
    contrib = [(short_label(o), {k: c.points for k, c in o.criteria.items()}) for o in shown]
    h.append(f"<section><h2>{escape(t('report.contributions', lang))}</h2>"
             + stacked_bars(contrib, LEAF_COLOURS, leaf_names, t("report.contributions", lang), max_value=100.0)
             + "</section>")
    pts = [(short_label(o), o.time_s or 0.0, o.cost_usd or 0.0, o.rank == 1) for o in shown]
    h.append(f"<section><h2>{escape(t('report.pareto', lang))}</h2>"
             + pareto_scatter(pts, t("report.pareto", lang), t("report.time", lang), t("report.cost", lang) + " (USD)")
             + "</section>")
    line_keys = list(dict.fromkeys(k for o in shown for k in o.cost_lines_usd))
    line_colours = {k: LINE_COLOURS[i % len(LINE_COLOURS)] for i, k in enumerate(line_keys)}
    tco_rows = [(short_label(o) + ("" if o.cost_usd is not None else " " + t("report.hw_unknown", lang)),
                 dict(o.cost_lines_usd)) for o in shown]
    h.append(f"<section><h2>{escape(t('report.tco', lang))}</h2>"
             + stacked_bars(tco_rows, line_colours, {k: k.removesuffix("_usd") for k in line_keys},
                            t("report.tco", lang), unit="USD") + "</section>")
    unc = [o for o in shown if o.uncertainty is not None]
    h.append(f"<section><h2>{escape(t('report.uncertainty', lang))}</h2>")
    if unc:
        crow = [(short_label(o), o.uncertainty.cost_usd.p10, o.uncertainty.cost_usd.p50, o.uncertainty.cost_usd.p90)
                for o in unc if o.uncertainty and o.uncertainty.cost_usd]
        trow = [(short_label(o), o.uncertainty.time_s.p10, o.uncertainty.time_s.p50, o.uncertainty.time_s.p90)
                for o in unc if o.uncertainty and o.uncertainty.time_s]
        h.append(f"<p class='muted'>{escape(t('report.cost', lang))}</p>" + range_bars(crow, "cost", "usd"))
        h.append(f"<p class='muted'>{escape(t('report.time', lang))}</p>" + range_bars(trow, "time", "time"))
    else:
        h.append(f"<p class='muted'>{escape(t('report.no_mc', lang))}</p>")
    h.append("</section>")
    # sensitivity
    h.append(f"<section><h2>{escape(t('report.sensitivity', lang))}</h2><table><tr>"
             f"<th>{escape(t('report.criterion', lang))}</th><th>{escape(t('report.weight', lang))}</th>"
             f"<th>{escape(t('report.change', lang))}</th><th>{escape(t('report.new_winner', lang))}</th></tr>")
    for x in rec.sensitivity:
        ch = "-" if x.change_points is None else f"{x.change_points:+.1f}"
        h.append(f"<tr><td>{escape(leaf_names.get(x.criterion, x.criterion))}</td><td>{x.weight:.1f}</td>"
                 f"<td>{ch}</td><td>{escape(x.new_winner or '-')}</td></tr>")
    h.append("</table></section>")
    # rejected
    h.append(f"<section><h2>{escape(t('report.rejected', lang))}</h2>")
    if rec.rejected:
        h.append(f"<table><tr><th>{escape(t('report.option', lang))}</th><th>{escape(t('report.constraint', lang))}</th>"
                 f"<th>{escape(t('report.reasons', lang))}</th></tr>")
        for r in rec.rejected:
            h.append(f"<tr><td>{escape(r.key)}</td><td>{escape(r.constraint)}</td>"
                     f"<td style='text-align:left'>{escape('; '.join(r.reasons))}</td></tr>")
        h.append("</table>")
    else:
        h.append(f"<p class='muted'>{escape(t('report.none', lang))}</p>")
    h.append("</section>")
    # the winner's plan, then its figures (shared footer)
    w = rec.options[0]
    plan = f"<h3>{escape(t('report.plan', lang))}</h3><ul>" + "".join(
        f"<li><b>{escape(t('role.' + p.role, lang))}</b>: {escape(p.hardware)} × {p.devices} — "
        f"<code>{escape(str(p.plan.get('key') or p.plan.get('replica') or ''))}</code></li>" for p in w.parts) + "</ul>"
    return html_page(t("report.title", lang), rec.title or rec.scenario, schema_version=rec.schema_version,
                     sections=h, figures=w.figures, assumptions=rec.assumptions, lang=lang,
                     facts_title=t("report.figures", lang), pre=plan, facts_note=t("report.generated", lang))


def render_markdown(rec: Recommendation) -> str:
    lang = rec.explanation.lang
    out = [f"{t('report.scenario', lang)}: `{rec.scenario}` · {t('report.model', lang)}: `{rec.model}` · "
           f"{t('report.samples', lang)}: {rec.monte_carlo.get('samples', 0)}", "",
           f"**{rec.explanation.summary}**", ""]
    cols = ["report.rank", "report.option", "report.score", "report.devices", "report.time", "report.cost",
            "report.energy", "report.p_first", "report.trust"]
    out.append("| " + " | ".join(t(c, lang) for c in cols) + " |")
    out.append("|" + "---|" * len(cols))
    for o in rec.options:
        out.append(f"| {o.rank} | {o.label} | {o.score:.1f} | {o.devices:,} | {_time(o.time_s)} | {_usd(o.cost_usd)} | "
                   f"{_mwh(o.energy_j)} | {_pfirst(o)} | {o.min_trust} |")
    out.append("")
    for head, lines in _lines(rec, lang):
        if lines:
            out += [f"## {head}", ""] + [f"- {x}" for x in lines] + [""]
    out += [f"## {t('report.contributions', lang)}", ""]
    leaves = list(rec.weights)
    out.append("| " + t("report.option", lang) + " | " + " | ".join(t(f"criterion.{k}", lang) for k in leaves) + " |")
    out.append("|" + "---|" * (len(leaves) + 1))
    for o in rec.options[:CHART_OPTIONS]:
        out.append(f"| {o.label} | " + " | ".join(f"{o.criteria[k].points:.1f}" for k in leaves) + " |")
    out.append(f"| {t('report.weight', lang)} | " + " | ".join(f"{rec.weights[k]:g}" for k in leaves) + " |")
    out.append("")
    if any(o.uncertainty for o in rec.options):
        out += [f"## {t('report.uncertainty', lang)}", "",
                f"| {t('report.option', lang)} | {t('report.time', lang)} P10 / P50 / P90 | "
                f"{t('report.cost', lang)} P10 / P50 / P90 | {t('report.p_first', lang)} |", "|---|---|---|---|"]
        for o in rec.options:
            u = o.uncertainty
            if u is None:
                continue
            ts = "-" if u.time_s is None else f"{_time(u.time_s.p10)} / {_time(u.time_s.p50)} / {_time(u.time_s.p90)}"
            cs = "-" if u.cost_usd is None else f"{_usd(u.cost_usd.p10)} / {_usd(u.cost_usd.p50)} / {_usd(u.cost_usd.p90)}"
            out.append(f"| {o.label} | {ts} | {cs} | {u.p_rank_first:.0%} |")
        out.append("")
    if rec.rejected:
        out += [f"## {t('report.rejected', lang)}", "", f"| {t('report.option', lang)} | "
                f"{t('report.constraint', lang)} | {t('report.reasons', lang)} |", "|---|---|---|"]
        out += [f"| {r.key} | {r.constraint} | {'; '.join(r.reasons).replace('|', '/')} |" for r in rec.rejected]
        out.append("")
    w = rec.options[0]
    return md_page(t("report.title", lang), rec.title or rec.scenario, schema_version=rec.schema_version, body=out,
                   figures=w.figures, assumptions=rec.assumptions, facts_note=t("report.generated", lang),
                   lang=lang)
