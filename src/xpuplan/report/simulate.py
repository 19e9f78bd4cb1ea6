"""Report of ``xpuplan simulate`` (a :class:`~xpuplan.serve.sim.result.SimulationResult`): HTML and Markdown.

The latency CDFs per class (TTFT, TPOT, end-to-end), the queue length, KV-cache use and utilisation
per pool over time, and the tables of the result. Latencies are seconds in the result and shown in ms.
"""

from __future__ import annotations

from collections.abc import Sequence

from xpuplan.report.format import fmt_energy_j
from xpuplan.report.page import bullets, html_page, kpis, md_page, md_table, section, table
from xpuplan.report.svg import line_chart
from xpuplan.serve.sim.result import GroupStats, SimulationResult

TITLE = "Request-level simulation"
NOTE = "Model of the simulator and its assumptions: docs/simulator.md."


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:,.1f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def _group_rows(groups: Sequence[GroupStats]) -> tuple[list[str], list[list[str]]]:
    head = ["name", "arrived", "completed", "TTFT p50/p90/p99 ms", "TPOT p50/p90/p99 ms", "E2E p50/p99 s",
            "SLO attainment", "goodput req/s", "output tok/s", "preemptions"]
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


def _pool_rows(res: SimulationResult) -> tuple[list[str], list[list[str]]]:
    head = ["pool", "hardware", "tp", "dtype", "KV dtype", "engine", "batching", "replicas", "role", "utilisation",
            "KV peak", "mean power W/device", "energy", "cost $"]
    rows = [[p.name, p.hardware, str(p.tp), p.dtype, p.kv_dtype, p.engine, p.batching, str(p.replicas), p.role,
             _pct(p.utilisation), _pct(p.kv_peak_fraction),
             "-" if p.mean_power_w is None else f"{p.mean_power_w:,.0f}", fmt_energy_j(p.energy_j),
             "-" if p.cost_usd is None else f"{p.cost_usd:,.2f}"] for p in res.pools]
    return head, rows


def _subtitle(res: SimulationResult) -> str:
    def n(k: int, what: str) -> str:
        return f"{k} {what}" + ("" if k == 1 else "es" if what.endswith("s") else "s")

    return f"{n(len(res.classes), 'traffic class')} on {n(len(res.pools), 'pool')}, seed {res.seed}"


def _summary(res: SimulationResult) -> list[tuple[str, str]]:
    window = (("makespan (rates are over it)", f"{res.duration_s:,.2f} s, seed {res.seed}") if res.rate_window == "makespan"
              else ("simulated arrivals", f"{res.duration_s:g} s (run ended at {res.simulated_s:.1f} s), seed {res.seed}"))
    out = [window,
           ("requests", f"{res.arrived:,} arrived, {res.completed:,} completed, {res.dropped:,} dropped, "
                        f"{res.unfinished:,} unfinished"),
           ("output tokens/s", f"{res.output_tokens_per_s:,.0f}"),
           ("SLO attainment", _pct(res.slo_attainment))]
    if res.energy_j is not None:
        out.append(("energy", fmt_energy_j(res.energy_j)))
    if res.cost_usd is not None:
        per = res.cost_per_million_output_tokens_usd
        out.append(("cost", f"${res.cost_usd:,.2f}" + ("" if per is None else f" (${per:,.3f} per million output "
                                                                               "tokens)")))
    return out


def _headline(res: SimulationResult) -> list[tuple[str, str]]:
    out = [("output tokens/s", f"{res.output_tokens_per_s:,.0f}"), ("SLO attainment", _pct(res.slo_attainment)),
           ("completed requests", f"{res.completed:,}")]
    if res.cost_per_million_output_tokens_usd is not None:
        out.append(("$ per million output tokens", f"${res.cost_per_million_output_tokens_usd:,.3f}"))
    return out


def _charts(res: SimulationResult) -> list[str]:
    pct = [float(p) for p in range(101)]
    charts = []
    for key, label in (("ttft_s", "TTFT (ms)"), ("tpot_s", "TPOT (ms)"), ("e2e_s", "end-to-end latency (s)")):
        scale = 1.0 if key == "e2e_s" else 1e3
        series = [(name, [v * scale for v in q[key]], pct) for name, q in res.quantiles.items() if q.get(key)]
        if series:
            charts.append(line_chart(series, f"{label.split(' (')[0]} CDF per class", label, "percentile"))
    t = res.series.times_s
    for title, data, y in (("Waiting requests per pool", res.series.queue_len, "requests"),
                           ("Utilisation per pool", res.series.utilisation, "busy fraction"),
                           ("KV-cache use per pool", res.series.kv_used_fraction, "fraction of blocks")):
        charts.append(line_chart([(n, t, [float(v) for v in vals]) for n, vals in data.items()], title, "time (s)", y))
    return charts


def render_html(res: SimulationResult) -> str:
    """A self-contained HTML page (inline CSS and SVG; nothing fetched)."""
    s = [f"<section>{kpis(_headline(res))}" + table(["quantity", "value"], _summary(res), left=(1,)) + "</section>",
         section("Traffic classes", table(*_group_rows(res.classes))),
         section("Pools", table(*_pool_rows(res), left=(1, 3, 4, 5, 7))),
         section("Charts", "<div class='grid'>" + "".join(f"<div>{c}</div>" for c in _charts(res)) + "</div>")]
    if res.notes:
        s.append(section("Notes", bullets(res.notes)))
    return html_page(TITLE, _subtitle(res),
                     schema_version=res.schema_version, sections=s, facts_note=NOTE)


def render_markdown(res: SimulationResult) -> str:
    """Markdown report; the charts are inline SVG blocks (rendered by most Markdown viewers)."""
    out = [f"- **{k}**: {v}" for k, v in _summary(res)]
    out += ["", "## Traffic classes", "", md_table(*_group_rows(res.classes)), "", "## Pools", "",
            md_table(*_pool_rows(res)), "", "## Charts", ""]
    out += [c + "\n" for c in _charts(res)]
    if res.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in res.notes] + [""]
    return md_page(TITLE, _subtitle(res),
                   schema_version=res.schema_version, body=out, facts_note=NOTE)
