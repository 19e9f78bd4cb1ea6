"""Report of ``xpuplan simulate`` (a :class:`~xpuplan.serve.sim.result.SimulationResult`): HTML and Markdown.

The latency CDFs per class (TTFT, TPOT, end-to-end), the queue length, KV-cache use and utilisation
per pool over time, and the tables of the result. Latencies are seconds in the result and shown in ms.
Words come from the i18n catalogue (``sim.*``, English or Chinese); the simulator's notes stay as it
wrote them (English).
"""

from __future__ import annotations

from collections.abc import Sequence

from xpuplan.i18n import t
from xpuplan.report.format import fmt_energy_j
from xpuplan.report.page import bullets, html_page, kpis, md_page, md_table, section, table
from xpuplan.report.svg import line_chart
from xpuplan.serve.sim.result import GroupStats, SimulationResult

#: The report's title and closing note in English (``sim.title``, ``sim.note`` in the i18n catalogue).
TITLE = "Request-level simulation"
NOTE = "Model of the simulator and its assumptions: docs/simulator.md."
#: Columns of the traffic-class and pool tables (``sim.col.*``).
GROUP_COLS = ("name", "arrived", "completed", "ttft", "tpot", "e2e", "slo", "goodput", "output", "preemptions")
POOL_COLS = ("pool", "hardware", "tp", "dtype", "kv_dtype", "engine", "batching", "replicas", "role", "utilisation",
             "kv_peak", "power", "energy", "cost")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:,.1f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _group_rows(groups: Sequence[GroupStats], lang: str = "en") -> tuple[list[str], list[list[str]]]:
    head = [t(f"sim.col.{c}", lang) for c in GROUP_COLS]
    rows = []
    for g in groups:
        rows.append([g.name, f"{g.arrived:,}", f"{g.completed:,}",
                     f"{_ms(g.ttft.p50_s)} / {_ms(g.ttft.p90_s)} / {_ms(g.ttft.p99_s)}",
                     f"{_ms(g.tpot.p50_s)} / {_ms(g.tpot.p90_s)} / {_ms(g.tpot.p99_s)}",
                     f"{'-' if g.e2e.p50_s is None else f'{g.e2e.p50_s:.2f}'} / "
                     f"{'-' if g.e2e.p99_s is None else f'{g.e2e.p99_s:.2f}'}",
                     _pct(g.slo_attainment),
                     "-" if g.goodput_requests_per_s is None else f"{g.goodput_requests_per_s:.2f}",
                     f"{g.output_tokens_per_s:,.0f}", str(g.preemptions)])
    return head, rows


def _pool_rows(res: SimulationResult, lang: str = "en") -> tuple[list[str], list[list[str]]]:
    head = [t(f"sim.col.{c}", lang) for c in POOL_COLS]
    rows = [[p.name, p.hardware, str(p.tp), p.dtype, p.kv_dtype, p.engine, p.batching, str(p.replicas), p.role,
             _pct(p.utilisation), _pct(p.kv_peak_fraction),
             "-" if p.mean_power_w is None else f"{p.mean_power_w:,.0f}", fmt_energy_j(p.energy_j),
             "-" if p.cost_usd is None else f"{p.cost_usd:,.2f}"] for p in res.pools]
    return head, rows


def _subtitle(res: SimulationResult, lang: str = "en") -> str:
    def n(k: int, what: str) -> str:
        return t(f"sim.{what}_{'one' if k == 1 else 'many'}", lang, n=k)

    return t("sim.subtitle", lang, classes=n(len(res.classes), "classes"), pools=n(len(res.pools), "pools"),
             seed=res.seed)


def _summary(res: SimulationResult, lang: str = "en") -> list[tuple[str, str]]:
    window = ((t("sim.makespan", lang), t("sim.makespan_value", lang, duration=f"{res.duration_s:,.2f}", seed=res.seed))
              if res.rate_window == "makespan" else
              (t("sim.arrivals", lang), t("sim.arrivals_value", lang, duration=f"{res.duration_s:g}",
                                          simulated=f"{res.simulated_s:.1f}", seed=res.seed)))
    out = [window,
           (t("sim.requests", lang), t("sim.requests_value", lang, arrived=f"{res.arrived:,}",
                                       completed=f"{res.completed:,}", dropped=f"{res.dropped:,}",
                                       unfinished=f"{res.unfinished:,}")),
           (t("sim.output_tokens_per_s", lang), f"{res.output_tokens_per_s:,.0f}"),
           (t("sim.slo_attainment", lang), _pct(res.slo_attainment))]
    if res.energy_j is not None:
        out.append((t("sim.energy", lang), fmt_energy_j(res.energy_j)))
    if res.cost_usd is not None:
        per = res.cost_per_million_output_tokens_usd
        out.append((t("sim.cost", lang), f"${res.cost_usd:,.2f}" + (
            "" if per is None else t("sim.cost_per_million", lang, usd=f"{per:,.3f}"))))
    return out


def _headline(res: SimulationResult, lang: str = "en") -> list[tuple[str, str]]:
    out = [(t("sim.output_tokens_per_s", lang), f"{res.output_tokens_per_s:,.0f}"),
           (t("sim.slo_attainment", lang), _pct(res.slo_attainment)),
           (t("sim.completed_requests", lang), f"{res.completed:,}")]
    if res.cost_per_million_output_tokens_usd is not None:
        out.append((t("sim.usd_per_million", lang), f"${res.cost_per_million_output_tokens_usd:,.3f}"))
    return out


def _charts(res: SimulationResult, lang: str = "en") -> list[str]:
    pct = [float(p) for p in range(101)]
    charts = []
    for key, metric, unit in (("ttft_s", "ttft", "ms"), ("tpot_s", "tpot", "ms"), ("e2e_s", "e2e", "s")):
        scale = 1.0 if key == "e2e_s" else 1e3
        series = [(name, [v * scale for v in q[key]], pct) for name, q in res.quantiles.items() if q.get(key)]
        if series:
            m = t(f"sim.metric.{metric}", lang)
            charts.append(line_chart(series, t("sim.chart.cdf", lang, metric=m), t("sim.chart.axis", lang, metric=m,
                                     unit=unit), t("sim.chart.percentile", lang)))
    times = res.series.times_s
    for name, data in (("queue", res.series.queue_len), ("utilisation", res.series.utilisation),
                       ("kv", res.series.kv_used_fraction)):
        charts.append(line_chart([(n, times, [float(v) for v in vals]) for n, vals in data.items()],
                                 t(f"sim.chart.{name}", lang), t("sim.chart.time", lang),
                                 t(f"sim.chart.{name}_y", lang)))
    return charts


def _notes_title(lang: str) -> str:
    """"Notes", saying the simulator's notes are in English where the report is not."""
    return t("sim.notes", lang) + t("sim.notes_english", lang)


def render_html(res: SimulationResult, lang: str = "en") -> str:
    """A self-contained HTML page (inline CSS and SVG; nothing fetched)."""
    s = [f"<section>{kpis(_headline(res, lang))}"
         + table([t("sim.quantity", lang), t("page.value", lang)], _summary(res, lang), left=(1,)) + "</section>",
         section(t("sim.classes", lang), table(*_group_rows(res.classes, lang))),
         section(t("sim.pools", lang), table(*_pool_rows(res, lang), left=(1, 3, 4, 5, 7))),
         section(t("sim.charts", lang),
                 "<div class='grid'>" + "".join(f"<div>{c}</div>" for c in _charts(res, lang)) + "</div>")]
    if res.notes:
        s.append(section(_notes_title(lang), bullets(res.notes)))
    return html_page(t("sim.title", lang), _subtitle(res, lang),
                     schema_version=res.schema_version, sections=s, facts_note=t("sim.note", lang), lang=lang)


def render_markdown(res: SimulationResult, lang: str = "en") -> str:
    """Markdown report; the charts are inline SVG blocks (rendered by most Markdown viewers)."""
    sep = t("page.label_sep", lang)
    out = [f"- **{k}**{sep}{v}" for k, v in _summary(res, lang)]
    out += ["", f"## {t('sim.classes', lang)}", "", md_table(*_group_rows(res.classes, lang)), "",
            f"## {t('sim.pools', lang)}", "", md_table(*_pool_rows(res, lang)), "", f"## {t('sim.charts', lang)}", ""]
    out += [c + "\n" for c in _charts(res, lang)]
    if res.notes:
        out += [f"## {_notes_title(lang)}", ""] + [f"- {n}" for n in res.notes] + [""]
    return md_page(t("sim.title", lang), _subtitle(res, lang),
                   schema_version=res.schema_version, body=out, facts_note=t("sim.note", lang), lang=lang)
