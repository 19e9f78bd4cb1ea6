"""Simulation reports: self-contained HTML (inline SVG, no CDN, no script) or Markdown.

Shows the latency CDFs per class (TTFT, TPOT, end-to-end), the queue length, KV-cache use and
utilisation per pool over time, and the tables of the result. The small SVG line-chart helper is
here because the shared report helpers (``xpuplan.report.svg``) draw bars and scatters only.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from xpuplan.serve.sim.result import GroupStats, SimulationResult

_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 10:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.1f}"
    return f"{v:.2g}"


def line_chart(series: Sequence[tuple[str, Sequence[float], Sequence[float]]], title: str, x_label: str,
               y_label: str, *, width: int = 560, height: int = 260) -> str:
    """An SVG line chart of (name, xs, ys) series on linear axes from 0."""
    pts = [(n, list(xs), list(ys)) for n, xs, ys in series if len(xs) and len(xs) == len(ys)]
    left, right, top, bottom = 60, 130, 28, 40
    w, h = width - left - right, height - top - bottom
    x_max = max((max(xs) for _, xs, _ in pts), default=1.0) or 1.0
    y_max = max((max(ys) for _, _, ys in pts), default=1.0) or 1.0
    body = [f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">'
            f'{html.escape(title)}</text>',
            f'<rect x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#999"/>']
    for k in range(5):
        fx, fy = k / 4, k / 4
        x = left + fx * w
        y = top + h - fy * h
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" stroke="#eee"/>')
        body.append(f'<text x="{x:.1f}" y="{top + h + 14}" text-anchor="middle" font-size="10">{_fmt(fx * x_max)}</text>')
        body.append(f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end" font-size="10">{_fmt(fy * y_max)}</text>')
    body.append(f'<text x="{left + w / 2}" y="{height - 6}" text-anchor="middle" font-size="11">'
                f'{html.escape(x_label)}</text>')
    body.append(f'<text x="12" y="{top + h / 2}" text-anchor="middle" font-size="11" '
                f'transform="rotate(-90 12 {top + h / 2})">{html.escape(y_label)}</text>')
    for i, (name, xs, ys) in enumerate(pts):
        c = _COLOURS[i % len(_COLOURS)]
        d = " ".join(f"{left + x / x_max * w:.1f},{top + h - y / y_max * h:.1f}" for x, y in zip(xs, ys, strict=True))
        body.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.6" points="{d}"/>')
        ly = top + 12 + 16 * i
        body.append(f'<line x1="{left + w + 8}" y1="{ly}" x2="{left + w + 24}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        body.append(f'<text x="{left + w + 28}" y="{ly + 4}" font-size="11">{html.escape(name)}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            f'aria-label="{html.escape(title)}">' + "".join(body) + "</svg>")


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
    head = ["pool", "hardware", "tp", "dtype", "engine", "batching", "replicas", "role", "utilisation",
            "KV peak", "mean power W/device", "energy kWh", "cost $"]
    rows = [[p.name, p.hardware, str(p.tp), p.dtype, p.engine, p.batching, str(p.replicas), p.role,
             _pct(p.utilisation), _pct(p.kv_peak_fraction),
             "-" if p.mean_power_w is None else f"{p.mean_power_w:,.0f}",
             "-" if p.energy_j is None else f"{p.energy_j / 3.6e6:,.2f}",
             "-" if p.cost_usd is None else f"{p.cost_usd:,.2f}"] for p in res.pools]
    return head, rows


def _summary(res: SimulationResult) -> list[tuple[str, str]]:
    out = [("simulated arrivals", f"{res.duration_s:g} s (run ended at {res.simulated_s:.1f} s), seed {res.seed}"),
           ("requests", f"{res.arrived:,} arrived, {res.completed:,} completed, {res.dropped:,} dropped, "
                        f"{res.unfinished:,} unfinished"),
           ("output tokens/s", f"{res.output_tokens_per_s:,.0f}"),
           ("SLO attainment", _pct(res.slo_attainment))]
    if res.energy_j is not None:
        out.append(("energy", f"{res.energy_j / 3.6e6:,.2f} kWh"))
    if res.cost_per_million_output_tokens_usd is not None:
        out.append(("cost", f"${res.cost_usd:,.2f} (${res.cost_per_million_output_tokens_usd:,.3f} "
                            "per million output tokens)"))
    return out


def _charts(res: SimulationResult) -> list[str]:
    pct = list(range(101))
    charts = []
    for key, label in (("ttft_s", "TTFT (s)"), ("tpot_s", "TPOT (s)"), ("e2e_s", "end-to-end latency (s)")):
        series = [(name, q[key], pct) for name, q in res.quantiles.items() if q.get(key)]
        if series:
            charts.append(line_chart(series, f"{label} CDF per class", label, "percentile"))
    t = res.series.times_s
    for title, data, y in (("Waiting requests per pool", res.series.queue_len, "requests"),
                           ("Utilisation per pool", res.series.utilisation, "busy fraction"),
                           ("KV-cache use per pool", res.series.kv_used_fraction, "fraction of blocks")):
        charts.append(line_chart([(n, t, [float(v) for v in vals]) for n, vals in data.items()], title, "time (s)", y))
    return charts


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    b = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{b}</tbody></table>"


def render_html(res: SimulationResult) -> str:
    """A self-contained HTML page (inline CSS and SVG; nothing fetched)."""
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>xpuplan simulation</title><style>"
             "body{font-family:sans-serif;max-width:1200px;margin:2em auto;color:#222}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}"
             "th{background:#f4f4f4}.charts svg{margin:6px}</style></head><body>",
             "<h1>Request-level simulation</h1><dl>"]
    parts += [f"<dt><b>{html.escape(k)}</b></dt><dd>{html.escape(v)}</dd>" for k, v in _summary(res)]
    parts.append("</dl><h2>Traffic classes</h2>")
    parts.append(_html_table(*_group_rows(res.classes)))
    parts.append("<h2>Pools</h2>")
    parts.append(_html_table(*_pool_rows(res)))
    parts.append("<h2>Charts</h2><div class='charts'>" + "".join(_charts(res)) + "</div>")
    if res.notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in res.notes) + "</ul>")
    parts.append(f"<p><small>schema_version {res.schema_version}; model and assumptions: docs/simulator.md"
                 "</small></p></body></html>")
    return "".join(parts)


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(res: SimulationResult) -> str:
    """Markdown report; the charts are inline SVG blocks (rendered by most Markdown viewers)."""
    out = ["# Request-level simulation", ""]
    out += [f"- **{k}**: {v}" for k, v in _summary(res)]
    out += ["", "## Traffic classes", "", _md_table(*_group_rows(res.classes)), "", "## Pools", "",
            _md_table(*_pool_rows(res)), "", "## Charts", ""]
    out += [c + "\n" for c in _charts(res)]
    if res.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in res.notes]
    return "\n".join(out) + "\n"
