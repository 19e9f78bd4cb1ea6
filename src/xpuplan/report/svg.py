"""Small inline-SVG charts (no JavaScript, no CDN): stacked bars, scatter with a Pareto front, ranges.

Every function returns an ``<svg>`` string sized in CSS pixels; text is escaped. Colours come from
one palette so the same criterion or cost line has the same colour in every chart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

#: Criterion colours by group (performance blues, development greens, economics ambers, risk reds).
LEAF_COLOURS = {
    "compute_fit": "#1f4e79", "memory_fit": "#2e75b6", "latency": "#5b9bd5", "throughput": "#9dc3e6",
    "ecosystem": "#375623", "learning_cost": "#70ad47", "debugging": "#a9d18e",
    "hardware_cost": "#bf8f00", "operations_cost": "#ffc000", "development_cost": "#ffe699",
    "technical_risk": "#843c0c", "supply_chain": "#c55a11", "lock_in": "#f4b183",
}
#: Series colours in order; twelve distinct ones, so a step-time bar's parts (up to twelve: compute, recomputation, the
#: six collectives, bubble, offload copies, optimizer, overhead) never share a colour.
LINE_COLOURS = ["#1f4e79", "#70ad47", "#ffc000", "#c55a11", "#7030a0", "#5b9bd5", "#a5a5a5", "#843c0c",
                "#17a2b8", "#e377c2", "#bcbd22", "#1b1b1b"]
FONT = "font-family='Inter, Segoe UI, Helvetica, Arial, sans-serif'"


def text_width(s: str, size: int = 11) -> float:
    """Approximate rendered width in px: CJK characters are about one em, Latin about 0.6 em."""
    return sum(size if ord(ch) > 0x2E80 else 0.6 * size for ch in s)


def _text(x: float, y: float, s: str, size: int = 11, anchor: str = "start", colour: str = "#333",
          weight: str = "normal") -> str:
    return (f"<text x='{x:.1f}' y='{y:.1f}' font-size='{size}' text-anchor='{anchor}' fill='{colour}' "
            f"font-weight='{weight}' {FONT}>{escape(s)}</text>")


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' viewBox='0 0 {width} {height}' "
            f"role='img' aria-label='{escape(title)}'><title>{escape(title)}</title>" + "".join(body) + "</svg>")


def stacked_bars(rows: Sequence[tuple[str, dict[str, float]]], colours: dict[str, str], names: dict[str, str],
                 title: str, unit: str = "", width: int = 860, max_value: float | None = None) -> str:
    """Horizontal stacked bars: one row per (label, {segment: value}); a legend below."""
    label_w, bar_h, gap, top = 300, 20, 8, 10
    keys = [k for k in colours if any(r[1].get(k, 0) > 0 for r in rows)]
    mx = max_value or max((sum(v for v in r[1].values() if v > 0) for r in rows), default=1.0) or 1.0
    plot_w = width - label_w - 80
    body: list[str] = []
    y = top
    for lab, seg in rows:
        body.append(_text(label_w - 8, y + bar_h * 0.72, lab[:50], size=10, anchor="end"))
        x = float(label_w)
        tot = 0.0
        for k in keys:
            v = seg.get(k, 0.0)
            if v <= 0:
                continue
            w = v / mx * plot_w
            body.append(f"<rect x='{x:.1f}' y='{y}' width='{w:.1f}' height='{bar_h}' fill='{colours[k]}'>"
                        f"<title>{escape(names.get(k, k))}: {v:,.2f} {escape(unit)}</title></rect>")
            x += w
            tot += v
        body.append(_text(x + 6, y + bar_h * 0.72, _short(tot) + (f" {unit}" if unit else ""), size=10, colour="#555"))
        y += bar_h + gap
    # legend
    y += 8
    lx = 10.0
    for k in keys:
        name = names.get(k, k)
        wlab = 16 + text_width(name, 10)
        if lx + wlab > width - 10:
            lx = 10.0
            y += 18
        body.append(f"<rect x='{lx:.1f}' y='{y}' width='11' height='11' fill='{colours[k]}'/>")
        body.append(_text(lx + 15, y + 10, name, size=10))
        lx += wlab + 10
    return _svg(width, int(y + 24), body, title)


def _short(v: float) -> str:
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.2f}G"
    if a >= 1e6:
        return f"{v / 1e6:.2f}M"
    if a >= 1e4:
        return f"{v / 1e3:.0f}k"
    if a >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def _log_ticks(lo: float, hi: float) -> list[float]:
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    out = []
    for e in range(a, b + 1):
        for m in (1, 2, 5):
            v = m * 10.0 ** e
            if lo <= v <= hi:
                out.append(v)
    return out or [lo, hi]


def pareto_scatter(points: Sequence[tuple[str, float, float, bool]], title: str, x_label: str, y_label: str,
                   x_fmt: str = "time", width: int = 860, height: int = 380, y_fmt: str = "usd") -> str:
    """Scatter of (label, x, y, is_winner) on log axes; the Pareto front (min x, min y) joined.
    ``y_fmt``: 'usd' (ticks in dollars) or 'count'."""
    pts = [p for p in points if p[1] > 0 and p[2] > 0 and math.isfinite(p[1]) and math.isfinite(p[2])]
    left, right, top, bottom = 80, 30, 16, 50
    body: list[str] = []
    if not pts:
        body.append(_text(width / 2, height / 2, "-", anchor="middle"))
        return _svg(width, height, body, title)
    xs = [p[1] for p in pts]
    ys = [p[2] for p in pts]
    x0, x1 = min(xs) / 1.3, max(xs) * 1.3
    y0, y1 = min(ys) / 1.3, max(ys) * 1.3
    pw, ph = width - left - right, height - top - bottom

    def sx(v: float) -> float:
        return left + (math.log(v) - math.log(x0)) / (math.log(x1) - math.log(x0)) * pw

    def sy(v: float) -> float:
        return top + ph - (math.log(v) - math.log(y0)) / (math.log(y1) - math.log(y0)) * ph

    body.append(f"<rect x='{left}' y='{top}' width='{pw}' height='{ph}' fill='#fafbfc' stroke='#d0d7de'/>")
    for v in _log_ticks(x0, x1):
        body.append(f"<line x1='{sx(v):.1f}' x2='{sx(v):.1f}' y1='{top}' y2='{top + ph}' stroke='#eaeef2'/>")
        body.append(_text(sx(v), top + ph + 16, _fmt_x(v, x_fmt), size=10, anchor="middle", colour="#555"))
    for v in _log_ticks(y0, y1):
        body.append(f"<line x1='{left}' x2='{left + pw}' y1='{sy(v):.1f}' y2='{sy(v):.1f}' stroke='#eaeef2'/>")
        body.append(_text(left - 6, sy(v) + 4, ("$" if y_fmt == "usd" else "") + _short(v), size=10, anchor="end",
                          colour="#555"))
    body.append(_text(left + pw / 2, height - 10, x_label, anchor="middle", colour="#333"))
    body.append(f"<text transform='translate(16,{top + ph / 2:.0f}) rotate(-90)' font-size='11' text-anchor='middle' "
                f"fill='#333' {FONT}>{escape(y_label)}</text>")
    front = []
    best_y = math.inf
    for p in sorted(pts, key=lambda q: (q[1], q[2])):
        if p[2] < best_y:
            front.append(p)
            best_y = p[2]
    if len(front) > 1:
        path = " ".join(f"{sx(p[1]):.1f},{sy(p[2]):.1f}" for p in front)
        body.append(f"<polyline points='{path}' fill='none' stroke='#2e75b6' stroke-width='1.5' stroke-dasharray='4 3'/>")
    for lab, x, y, win in pts:
        on_front = any(f[0] == lab for f in front)
        colour = "#c00000" if win else ("#2e75b6" if on_front else "#8c959f")
        r = 6 if win else 4.5
        body.append(f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='{r}' fill='{colour}'><title>{escape(lab)}</title></circle>")
        body.append(_text(sx(x) + 8, sy(y) - 6, lab[:36], size=10, colour=colour))
    return _svg(width, height, body, title)


def _fmt_x(v: float, kind: str) -> str:
    if kind != "time":
        return _short(v)
    if v >= 86400:
        return f"{v / 86400:.3g} d"
    if v >= 3600:
        return f"{v / 3600:.3g} h"
    if v >= 1:
        return f"{v:.3g} s"
    return f"{v * 1e3:.3g} ms"


def range_bars(rows: Sequence[tuple[str, float, float, float]], title: str, fmt: str = "usd",
               width: int = 860) -> str:
    """One P10-P90 band per row with a P50 tick (log axis)."""
    rows = [r for r in rows if r[1] > 0 and r[3] > 0]
    label_w, bar_h, gap, top = 300, 14, 10, 10
    height = top + len(rows) * (bar_h + gap) + 30
    body: list[str] = []
    if not rows:
        return _svg(width, 40, [_text(10, 20, "-")], title)
    lo = min(r[1] for r in rows) / 1.2
    hi = max(r[3] for r in rows) * 1.2
    pw = width - label_w - 40

    def sx(v: float) -> float:
        return label_w + (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo) or 1.0) * pw

    y = top
    for lab, p10, p50, p90 in rows:
        body.append(_text(label_w - 8, y + bar_h * 0.8, lab[:50], size=10, anchor="end"))
        body.append(f"<line x1='{label_w}' x2='{label_w + pw}' y1='{y + bar_h / 2}' y2='{y + bar_h / 2}' stroke='#eaeef2'/>")
        body.append(f"<rect x='{sx(p10):.1f}' y='{y}' width='{max(1.0, sx(p90) - sx(p10)):.1f}' height='{bar_h}' "
                    f"rx='3' fill='#9dc3e6'><title>P10 {p10:,.4g} / P50 {p50:,.4g} / P90 {p90:,.4g}</title></rect>")
        body.append(f"<rect x='{sx(p50) - 1.5:.1f}' y='{y - 2}' width='3' height='{bar_h + 4}' fill='#1f4e79'/>")
        y += bar_h + gap
    for v in _log_ticks(lo, hi):
        body.append(_text(sx(v), y + 12, ("$" + _short(v)) if fmt == "usd" else _fmt_x(v, "time"), size=10,
                          anchor="middle", colour="#555"))
    return _svg(width, int(height), body, title)


def value_bars(rows: Sequence[tuple[str, float, str]], title: str, *, highlight: int | None = None,
               width: int = 860) -> str:
    """Horizontal bars, one per (label, value, shown text) on a linear axis from 0; row ``highlight`` in red."""
    label_w, bar_h, gap, top = 300, 20, 8, 10
    mx = max((r[1] for r in rows if math.isfinite(r[1])), default=1.0) or 1.0
    plot_w = width - label_w - 140
    body: list[str] = []
    y = top
    for i, (lab, v, shown) in enumerate(rows):
        colour = "#c00000" if i == highlight else "#2e75b6"
        w = max(1.0, v / mx * plot_w) if v > 0 else 0.0
        body.append(_text(label_w - 8, y + bar_h * 0.72, lab[:50], size=10, anchor="end"))
        body.append(f"<rect x='{label_w}' y='{y}' width='{w:.1f}' height='{bar_h}' rx='2' fill='{colour}'>"
                    f"<title>{escape(lab)}: {escape(shown)}</title></rect>")
        body.append(_text(label_w + w + 6, y + bar_h * 0.72, shown, size=10, colour="#333"))
        y += bar_h + gap
    return _svg(width, int(y + 6), body, title)


def _tick(v: float) -> str:
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
               y_label: str, *, width: int = 440, height: int = 260) -> str:
    """Lines of (name, xs, ys) on linear axes from 0, a legend at the right; the title above."""
    pts = [(n, list(xs), list(ys)) for n, xs, ys in series if len(xs) and len(xs) == len(ys)]
    left, right, top, bottom = 52, 110, 26, 40
    w, h = width - left - right, height - top - bottom
    x_max = max((max(xs) for _, xs, _ in pts), default=1.0) or 1.0
    y_max = max((max(ys) for _, _, ys in pts), default=1.0) or 1.0
    body = [_text(left, 15, title, size=12, weight="600", colour="#1f4e79"),
            f"<rect x='{left}' y='{top}' width='{w}' height='{h}' fill='#fafbfc' stroke='#d0d7de'/>"]
    for k in range(5):
        f = k / 4
        x = left + f * w
        y = top + h - f * h
        body.append(f"<line x1='{left}' y1='{y:.1f}' x2='{left + w}' y2='{y:.1f}' stroke='#eaeef2'/>")
        body.append(_text(x, top + h + 14, _tick(f * x_max), size=10, anchor="middle", colour="#555"))
        body.append(_text(left - 4, y + 3, _tick(f * y_max), size=10, anchor="end", colour="#555"))
    body.append(_text(left + w / 2, height - 6, x_label, anchor="middle"))
    body.append(f"<text transform='translate(12,{top + h / 2:.0f}) rotate(-90)' font-size='11' text-anchor='middle' "
                f"fill='#333' {FONT}>{escape(y_label)}</text>")
    for i, (name, xs, ys) in enumerate(pts):
        c = LINE_COLOURS[i % len(LINE_COLOURS)]
        d = " ".join(f"{left + x / x_max * w:.1f},{top + h - y / y_max * h:.1f}" for x, y in zip(xs, ys, strict=True))
        body.append(f"<polyline fill='none' stroke='{c}' stroke-width='1.6' points='{d}'/>")
        ly = top + 10 + 16 * i
        body.append(f"<line x1='{left + w + 8}' y1='{ly}' x2='{left + w + 24}' y2='{ly}' stroke='{c}' stroke-width='2'/>")
        body.append(_text(left + w + 28, ly + 4, name[:14], size=10))
    return _svg(width, height, body, title)
