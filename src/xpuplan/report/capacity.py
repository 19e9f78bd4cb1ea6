"""Report of ``xpuplan infer capacity`` (a :class:`~xpuplan.jobs.serve.CapacityResult`): HTML and Markdown.

The options (fewest devices first, as the job orders them), a bar chart of devices per option,
the latency at the target load, what limits each option, infeasible hardware and notes.
"""

from __future__ import annotations

from html import escape
from typing import Any

from xpuplan.i18n import t
from xpuplan.jobs.serve import CapacityOptionOut, CapacityResult
from xpuplan.report.format import fmt_number
from xpuplan.report.page import bullets, html_page, kpis, md_page, md_table, section, table
from xpuplan.report.svg import value_bars
from xpuplan.workload.datasets import dataset_line

#: The report's title in English (``cap.title`` in the i18n catalogue; kept for older imports).
TITLE = "Serving capacity"


def _layout(r: dict, always_ep: bool = False) -> str:
    """A replica's parallel layout as the tables print it: tp, pp, ep (where > 1 unless ``always_ep``) and etp
    (where the experts are not split over tp)."""
    ep = f" ep{r['ep']}" if always_ep or r.get("ep", 1) > 1 else ""
    etp = f" etp{r['etp']}" if r.get("etp") is not None else ""
    return f"tp{r['tp']} pp{r['pp']}{ep}{etp}"


def fmt_ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.1f} ms"


def option_label(o: CapacityOptionOut) -> str:
    r = o.replica
    return f"{o.hardware} {_layout(r)} {r['precision']['scheme']}"


def _slo(res: CapacityResult, lang: str = "en") -> str:
    s = res.slo
    parts = []
    if s.get("ttft_s") is not None:
        parts.append(f"TTFT P{s.get('percentile', 99):g} ≤ {fmt_ms(s['ttft_s'])}")
    if s.get("tpot_s") is not None:
        parts.append(f"TPOT ≤ {fmt_ms(s['tpot_s'])}")
    return ", ".join(parts) or t("cap.no_limit", lang)


def _subtitle(res: CapacityResult, lang: str = "en") -> str:
    return t("cap.subtitle", lang, model=res.model, qps=f"{res.target_qps:g}", inp=fmt_number(res.input_len),
             out=fmt_number(res.output_len), slo=_slo(res, lang))


def limited_by(text: str, lang: str = "en") -> str:
    """The planner's binding constraint in ``lang`` (TTFT/TPOT names stay as they are)."""
    words = {"concurrency limit (KV cache or max_num_seqs)": "cap.limit.concurrency",
             "prefill saturation": "cap.limit.prefill"}
    return t(words[text], lang) if text in words else text


def head(res: CapacityResult, lang: str = "en") -> list[str]:
    p = f"{res.slo.get('percentile', 99):g}"
    return [t(f"cap.col.{k}", lang) for k in ("hardware", "replica", "engine", "rate", "replicas", "devices", "band")] + [
        t("cap.ttft_at_target", lang, p=p), t("cap.tpot_at_target", lang), t("cap.col.out", lang),
        t("cap.limited_by", lang), t("cap.col.disagg", lang)]


def _rows(res: CapacityResult, lang: str = "en") -> list[list[str]]:
    rows = []
    for o in res.options:
        r, at = o.replica, o.at_target
        dis = (str(o.disaggregated["devices"]) if o.disaggregated else
               (t("cap.infeasible_cell", lang) if o.disaggregated_error else "-"))
        rows.append([o.hardware, f"{_layout(r, always_ep=True)} {r['precision']['scheme']}", str(r["engine"]),
                     f"{o.max_requests_per_s_per_replica:.3g}", f"{o.replicas:,}", f"{o.devices:,}", _band(o),
                     fmt_ms(at["ttft_p_s"]) if at else "-", fmt_ms(at["tpot_s"]) if at else "-",
                     f"{at['output_tokens_per_s']:,.0f}" if at else "-", limited_by(o.limited_by, lang), dis])
    return rows


def _band(o: CapacityOptionOut) -> str:
    """The option's device count over its family's validation band (P10 - P90, whole replicas)."""
    if o.uncertainty is None or "devices" not in o.uncertainty.ranges:
        return "-"
    lo, hi = o.uncertainty.ranges["devices"]
    return f"{lo:,.0f} - {hi:,.0f}"


def _headline(res: CapacityResult, lang: str = "en") -> list[tuple[str, str]]:
    if not res.options:
        return [(t("cap.kpi_options", lang), "0"), (t("cap.kpi_target", lang), f"{res.target_qps:g} req/s")]
    b = res.options[0]
    r = b.replica
    out = [(t("cap.kpi_fewest", lang), f"{b.devices:,}"),
           (t("cap.kpi_hardware", lang, replica=f"{_layout(r)} {r['precision']['scheme']}",
              engine=r["engine"]), b.hardware),
           (t("cap.limited_by", lang), limited_by(b.limited_by, lang))]
    if b.at_target:
        out.append((t("cap.ttft_at_target", lang, p=f"{res.slo.get('percentile', 99):g}"),
                    fmt_ms(b.at_target["ttft_p_s"])))
        out.append((t("cap.tpot_at_target", lang), fmt_ms(b.at_target["tpot_s"])))
    return out


def _notes(res: CapacityResult, lang: str = "en") -> list[str]:
    """The report's notes: its own (in ``lang``) first, then the planner's (in English)."""
    notes = _own_notes(res, lang)
    if res.dataset:
        notes.append(dataset_line(res.dataset))
    for o in res.options:
        notes += [str(n) for n in o.replica.get("notes", []) or []]
        if o.disaggregated_error:
            notes.append(t("cap.disagg_error", lang, hw=o.hardware, error=o.disaggregated_error))
    return list(dict.fromkeys(notes))


def _own_notes(res: CapacityResult, lang: str) -> list[str]:
    notes = [t("cap.assumed", lang, inp=fmt_number(res.input_len), out=fmt_number(res.output_len))] if res.assumed_lengths else []
    # why an option's band is wide: its job lies outside the regime of the public rows behind it (the reasons are the
    # planner's, in English)
    for o in res.options:
        u = o.uncertainty
        if u is not None and u.extrapolation:
            notes.append(t("cap.band_widened", lang, hw=o.hardware, band=_band(o), why="; ".join(u.extrapolation)))
    return notes


def _notes_title(res: CapacityResult, notes: list[str], lang: str) -> str:
    """"Notes", saying the planner's notes are in English where the report is not."""
    planner = len(notes) > len(_own_notes(res, lang))
    return t("cap.notes", lang) + (t("cap.notes_english", lang) if planner else "")


def _infeasible(res: CapacityResult, lang: str = "en") -> list[str]:
    return [f"{hw}: {reasons[-1] if reasons else t('cap.no_feasible', lang)}" for hw, reasons in res.infeasible.items()]


def render_html(res: CapacityResult, lang: str = "en") -> str:
    s = [f"<section>{kpis(_headline(res, lang))}<p class='muted'>{escape(t('cap.explain', lang))}</p></section>"]
    if res.options:
        s.append(section(t("cap.options", lang), table(head(res, lang), _rows(res, lang), win=0, left=(1, 2, 10))))
        s.append(section(t("cap.devices_per_option", lang), value_bars(
            [(option_label(o), float(o.devices), t("cap.bar_label", lang, devices=f"{o.devices:,}",
                                                   replicas=f"{o.replicas:,}"))
             for o in res.options], t("cap.devices_per_option", lang), highlight=0)))
    if res.infeasible:
        s.append(section(t("cap.infeasible", lang), bullets(_infeasible(res, lang))))
    notes = _notes(res, lang)
    if notes:
        s.append(section(_notes_title(res, notes, lang), bullets(notes)))
    if res.commands:
        s.append(section(t("cap.commands", lang), "".join(f"<pre><code>{escape(c)}</code></pre>" for c in res.commands)))
    used: Any = res.used
    return html_page(t("cap.title", lang), _subtitle(res, lang), schema_version=res.schema_version, sections=s,
                     figures=used.figures if used else (), assumptions=used.assumptions if used else None,
                     caveats=used.caveats if used else (), lang=lang)


def render_markdown(res: CapacityResult, lang: str = "en") -> str:
    out = [md_table([t("cap.quantity", lang), t("page.value", lang)], _headline(res, lang)), "",
           f"_{t('cap.explain', lang)}_", ""]
    if res.options:
        out += [f"## {t('cap.options', lang)}", "", md_table(head(res, lang), _rows(res, lang)), ""]
    if res.infeasible:
        out += [f"## {t('cap.infeasible', lang)}", ""] + [f"- {x}" for x in _infeasible(res, lang)] + [""]
    notes = _notes(res, lang)
    if notes:
        out += [f"## {_notes_title(res, notes, lang)}", ""] + [f"- {n}" for n in notes] + [""]
    if res.commands:
        out += [f"## {t('cap.commands', lang)}", ""] + [f"```\n{c}\n```" for c in res.commands] + [""]
    used: Any = res.used
    return md_page(t("cap.title", lang), _subtitle(res, lang), schema_version=res.schema_version, body=out,
                   figures=used.figures if used else (), assumptions=used.assumptions if used else None,
                   caveats=used.caveats if used else (), lang=lang)
