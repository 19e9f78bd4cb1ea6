"""The frame every report shares: CSS, header, key figures, tables, the "figures used" footer.

HTML pages are self-contained: inline CSS, charts as inline SVG (:mod:`xpuplan.report.svg`), no
script, no external resource (links to the sources of catalog figures are plain ``<a>`` links).
Every string that came from the user or the catalog is escaped here (HTML) or has its ``|`` and
line breaks neutralised (Markdown tables).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterable, Sequence
from html import escape
from importlib import resources
from typing import Any

from xpuplan.i18n import t
from xpuplan.report.format import fmt_figure

#: The stylesheet shared with the web page (``xpuplan.web`` serves the same file as /static/report.css).
CSS = (resources.files("xpuplan.report") / "style.css").read_text(encoding="utf-8")
#: Rules the reports add to the shared stylesheet (key-figure cards, trust colours, alignment, footer).
EXTRA_CSS = """
header .meta{font-size:12px;color:#dbe7f3}h3{font-size:14px;margin:14px 0 6px}
td.l,th.l{text-align:left}td.r,th.r{text-align:right}
.kpis{display:flex;flex-wrap:wrap;gap:10px;margin:4px 0 6px}
.kpi{flex:1 1 150px;border:1px solid var(--line);border-radius:8px;padding:8px 12px;background:var(--soft)}
.kpi b{display:block;font-size:18px;color:var(--accent);overflow-wrap:anywhere}.kpi span{font-size:12px;color:var(--muted)}
.t-A{background:#dafbe1}.t-B{background:#ddf4ff}.t-C{background:#fff8c5}.t-D{background:#ffebe9}
tr.dev td{font-weight:600;background:#f0f4f8;color:var(--accent)}td.src{overflow-wrap:anywhere;max-width:460px}
pre{background:var(--soft);padding:8px 10px;border-radius:6px;overflow-x:auto;font-size:12px}
a{color:var(--accent)}footer{color:var(--muted);font-size:12px;text-align:center;margin:10px 0 30px}
"""

_URL = re.compile(r"https?://[^\s,;)]+")
#: Longest value shown for one assumption (the JSON output has the whole value).
ASSUMPTION_CHARS = 160


def version() -> str:
    """The running xpuplan's version (the package's own ``__version__``, as ``xpuplan --version`` and the API
    say; installed metadata can lag behind an editable checkout)."""
    from xpuplan import __version__

    return __version__


def today() -> str:
    """The report date (UTC; a day, so the same result renders the same page all day)."""
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d UTC")


# ---------------------------------------------------------------------------------------
# the facts every report ends with
# ---------------------------------------------------------------------------------------
def figure_rows(figures: Iterable[Any]) -> list[tuple[str, str, str, str, str]]:
    """(device, figure, value unit, trust, source) per catalog figure (``FigureUsed`` or its dict)."""
    out = []
    for f in figures:
        g = f if isinstance(f, dict) else f.model_dump()
        out.append((str(g["device"]), str(g["path"]), fmt_figure(float(g["value"]), str(g["unit"]), str(g["path"])),
                    str(g["trust"]), str(g["source"])))
    return list(dict.fromkeys(out))


def _compact(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):  # a computed constant (20/132) reads as 0.151515, not its 17-digit repr
        return f"{v:.6g}"
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    return s if len(s) <= ASSUMPTION_CHARS else s[: ASSUMPTION_CHARS - 1] + "…"


def assumption_rows(assumptions: Any, lang: str = "en") -> list[tuple[str, str, str]]:
    """(name, value, source) per assumption: a ``Used.assumptions`` dict (nested, leaves
    ``{value, source}``) or a list of ``{name, value, source}`` (the decision engine's); the page's own
    words (the assumption set's row, "trust") in ``lang``."""
    rows: list[tuple[str, str, str]] = []
    if isinstance(assumptions, list):
        for a in assumptions:
            if isinstance(a, dict):
                src = str(a.get("source", ""))
                if a.get("trust"):
                    src += f" ({t('page.trust', lang)} {a['trust']})"
                rows.append((str(a.get("name", "")), _compact(a.get("value")), src))
        return rows

    def walk(prefix: str, node: Any) -> None:
        if isinstance(node, dict) and "value" in node and "source" in node:
            rows.append((prefix, _compact(node["value"]), str(node["source"])))
        elif isinstance(node, dict) and node:
            for k, v in node.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif node not in (None, {}, [], ""):
            rows.append((prefix, _compact(node), ""))

    if isinstance(assumptions, dict):
        summary = assumptions.get("summary")
        if isinstance(summary, dict):
            rows.append((t("page.assumption_set", lang), f"{t('page.fingerprint', lang)} {summary.get('fingerprint', '-')}",
                         str(summary.get("base", ""))))
        for k, v in assumptions.items():
            if k != "summary":
                walk(str(k), v)
    return rows


def _linkify(text: str) -> str:
    """Escaped text with its http(s) URLs as plain links (no resource is loaded)."""
    out, last = [], 0
    for m in _URL.finditer(text):
        out.append(escape(text[last:m.start()]))
        url = m.group(0)
        out.append(f"<a href='{escape(url)}' rel='noreferrer'>{escape(url)}</a>")
        last = m.end()
    out.append(escape(text[last:]))
    return "".join(out)


# ---------------------------------------------------------------------------------------
# HTML pieces
# ---------------------------------------------------------------------------------------
def table(head: Sequence[str], rows: Iterable[Sequence[Any]], *, win: int | None = None,
          left: Sequence[int] = ()) -> str:
    """An HTML table; every cell is escaped; row ``win`` (0-based) is highlighted. The first column and
    the ``left`` columns are left-aligned, the others (numbers) right-aligned."""
    lc = {0, *left}

    def cls(i: int) -> str:
        return " class=l" if i in lc else " class=r"

    h = "".join(f"<th{cls(i)}>{escape(str(c))}</th>" for i, c in enumerate(head))
    body = []
    for n, r in enumerate(rows):
        cells = "".join(f"<td{cls(i)}>{escape(str(c))}</td>" for i, c in enumerate(r))
        body.append(f"<tr{' class=win' if n == win else ''}>{cells}</tr>")
    return f"<table><tr>{h}</tr>{''.join(body)}</table>"


def kpis(items: Iterable[tuple[str, str]]) -> str:
    """Key figures as cards: (label, value)."""
    return "<div class='kpis'>" + "".join(f"<div class='kpi'><b>{escape(v)}</b><span>{escape(k)}</span></div>"
                                          for k, v in items) + "</div>"


def bullets(lines: Iterable[str]) -> str:
    items = [f"<li>{escape(x)}</li>" for x in lines]
    return "<ul>" + "".join(items) + "</ul>" if items else ""


def section(title: str, inner: str) -> str:
    return f"<section><h2>{escape(title)}</h2>{inner}</section>"


def html_page(title: str, subtitle: str, *, schema_version: Any, sections: Sequence[str], figures: Iterable[Any] = (),
              assumptions: Any = None, caveats: Sequence[str] = (), lang: str = "en",
              facts_note: str = "", facts_title: str | None = None, pre: str = "") -> str:
    """A whole report page: header (title, subtitle, version, schema, date), the body sections, then
    the figures used (with trust and source), the assumptions and caveats; its own words in ``lang``."""
    facts_title = t("page.figures_used", lang) if facts_title is None else facts_title
    h = [f"<!DOCTYPE html><html lang='{escape(lang)}'><head><meta charset='utf-8'>",
         "<meta name='viewport' content='width=device-width, initial-scale=1'>",
         f"<title>{escape(title)}: {escape(subtitle)}</title><style>{CSS}{EXTRA_CSS}</style></head><body><main>",
         f"<header><h1>{escape(title)}</h1><p>{escape(subtitle)}</p>"
         f"<p class='meta'>xpuplan {escape(version())} · schema_version {escape(str(schema_version))} · "
         f"{escape(today())}</p></header>"]
    h += list(sections)
    figs = figure_rows(figures)
    rows = assumption_rows(assumptions, lang)
    facts = []
    if caveats:
        facts.append(f"<h3>{escape(t('page.caveats', lang))}</h3>" + bullets(caveats))
    if figs:
        rows_h = []
        for dev in dict.fromkeys(f[0] for f in figs):
            rows_h.append(f"<tr class='dev'><td colspan=4>{escape(dev)}</td></tr>")
            rows_h += [f"<tr><td class=l>{escape(p)}</td><td class=r style='white-space:nowrap'>{escape(v)}</td>"
                       f"<td class=r><span class='tag t-{escape(t)}'>{escape(t)}</span></td>"
                       f"<td class='l muted src'>{_linkify(s)}</td></tr>" for d, p, v, t, s in figs if d == dev]
        facts.append(f"<table><tr><th class=l>{escape(t('page.figure', lang))}</th>"
                     f"<th class=r>{escape(t('page.value', lang))}</th><th class=r>{escape(t('page.trust', lang))}</th>"
                     f"<th class=l>{escape(t('page.source', lang))}</th></tr>" + "".join(rows_h) + "</table>")
    else:
        facts.append(f"<p class='muted'>{escape(t('page.no_figures', lang))}</p>")
    if rows:
        facts.append(f"<h3>{escape(t('page.assumptions', lang))}</h3>" + table(
            [t("page.assumption", lang), t("page.value", lang), t("page.source", lang)], rows, left=(1, 2)))
    if facts_note:
        facts.append(f"<p class='muted'>{escape(facts_note)}</p>")
    h.append(section(facts_title, pre + "".join(facts)))
    h.append(f"</main><footer>{escape(t('page.footer', lang))}</footer></body></html>\n")
    return "".join(h)


# ---------------------------------------------------------------------------------------
# Markdown pieces
# ---------------------------------------------------------------------------------------
def md_cell(x: Any) -> str:
    """A Markdown table cell: no pipe, no line break."""
    return str(x).replace("|", "/").replace("\r", " ").replace("\n", " ")


def md_table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(md_cell(c) for c in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(md_cell(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def md_page(title: str, subtitle: str, *, schema_version: Any, body: Sequence[str], figures: Iterable[Any] = (),
            assumptions: Any = None, caveats: Sequence[str] = (), facts_note: str = "", lang: str = "en") -> str:
    """A whole Markdown report: the same header and facts as :func:`html_page`, its own words in ``lang``."""
    out = [f"# {title}: {subtitle}", "",
           f"_xpuplan {version()} · schema_version {schema_version} · {today()}_", ""]
    out += list(body)
    out += [f"## {t('page.figures_used', lang)}", ""]
    if caveats:
        out += [f"{t('page.caveats', lang)}:", ""] + [f"- {c}" for c in caveats] + [""]
    figs = figure_rows(figures)
    out += [md_table([t(f"page.{k}", lang) for k in ("device", "figure", "value", "trust", "source")], figs) if figs
            else t("page.no_figures", lang), ""]
    rows = assumption_rows(assumptions, lang)
    if rows:
        out += [f"### {t('page.assumptions', lang)}", "",
                md_table([t("page.assumption", lang), t("page.value", lang), t("page.source", lang)], rows), ""]
    if facts_note:
        out += [f"_{facts_note}_", ""]
    out += [f"_{t('page.footer', lang).replace('--json', '`--json`')}_", ""]
    return "\n".join(out)
