"""Report of ``xpuplan infer capacity`` (a :class:`~xpuplan.jobs.serve.CapacityResult`): HTML and Markdown.

The options (fewest devices first, as the job orders them), a bar chart of devices per option,
the latency at the target load, what limits each option, infeasible hardware and notes.
"""

from __future__ import annotations

from html import escape
from typing import Any

from xpuplan.jobs.serve import CapacityOptionOut, CapacityResult
from xpuplan.report.page import bullets, html_page, kpis, md_page, md_table, section, table
from xpuplan.report.svg import value_bars
from xpuplan.workload.datasets import dataset_line

TITLE = "Serving capacity"


def fmt_ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:,.1f} ms"


def option_label(o: CapacityOptionOut) -> str:
    r = o.replica
    return f"{o.hardware} tp{r['tp']} pp{r['pp']} {r['precision']['scheme']}"


def _slo(res: CapacityResult) -> str:
    s = res.slo
    parts = []
    if s.get("ttft_s") is not None:
        parts.append(f"TTFT P{s.get('percentile', 99):g} ≤ {fmt_ms(s['ttft_s'])}")
    if s.get("tpot_s") is not None:
        parts.append(f"TPOT ≤ {fmt_ms(s['tpot_s'])}")
    return ", ".join(parts) or "no latency limit"


def _subtitle(res: CapacityResult) -> str:
    return (f"{res.model}: {res.target_qps:g} req/s, {res.input_len:g} prompt + {res.output_len:g} output tokens, "
            f"{_slo(res)}")


def head(res: CapacityResult) -> list[str]:
    return ["hardware", "replica", "engine", "req/s per replica", "replicas", "devices",
            "devices, 80% band", f"TTFT P{res.slo.get('percentile', 99):g} at target", "TPOT at target",
            "out tok/s at target",
            "limited by", "disaggregated devices"]


def _rows(res: CapacityResult) -> list[list[str]]:
    rows = []
    for o in res.options:
        r, at = o.replica, o.at_target
        dis = str(o.disaggregated["devices"]) if o.disaggregated else ("infeasible" if o.disaggregated_error else "-")
        rows.append([o.hardware, f"tp{r['tp']} pp{r['pp']} ep{r['ep']} {r['precision']['scheme']}", str(r["engine"]),
                     f"{o.max_requests_per_s_per_replica:.3g}", f"{o.replicas:,}", f"{o.devices:,}", _band(o),
                     fmt_ms(at["ttft_p_s"]) if at else "-", fmt_ms(at["tpot_s"]) if at else "-",
                     f"{at['output_tokens_per_s']:,.0f}" if at else "-", o.limited_by, dis])
    return rows


def _band(o: CapacityOptionOut) -> str:
    """The option's device count over its family's validation band (P10 - P90, whole replicas)."""
    if o.uncertainty is None or "devices" not in o.uncertainty.ranges:
        return "-"
    lo, hi = o.uncertainty.ranges["devices"]
    return f"{lo:,.0f} - {hi:,.0f}"


def _headline(res: CapacityResult) -> list[tuple[str, str]]:
    if not res.options:
        return [("feasible options", "0"), ("target", f"{res.target_qps:g} req/s")]
    b = res.options[0]
    r = b.replica
    out = [("fewest devices", f"{b.devices:,}"),
           (f"hardware (tp{r['tp']} pp{r['pp']} {r['precision']['scheme']}, {r['engine']})", b.hardware),
           ("limited by", b.limited_by)]
    if b.at_target:
        out.append((f"TTFT P{res.slo.get('percentile', 99):g} at target", fmt_ms(b.at_target["ttft_p_s"])))
        out.append(("TPOT at target", fmt_ms(b.at_target["tpot_s"])))
    return out


def _notes(res: CapacityResult) -> list[str]:
    notes: list[str] = []
    if res.assumed_lengths:
        notes.append(f"assumed {res.input_len:g} prompt and {res.output_len:g} output tokens per request "
                     "(--in/--out or --scenario to change)")
    if res.dataset:
        notes.append(dataset_line(res.dataset))
    for o in res.options:
        notes += [str(n) for n in o.replica.get("notes", []) or []]
        if o.disaggregated_error:
            notes.append(f"{o.hardware} disaggregated: {o.disaggregated_error}")
    return list(dict.fromkeys(notes))


def _infeasible(res: CapacityResult) -> list[str]:
    return [f"{hw}: {reasons[-1] if reasons else 'no feasible configuration'}" for hw, reasons in res.infeasible.items()]


def render_html(res: CapacityResult) -> str:
    s = [f"<section>{kpis(_headline(res))}<p class='muted'>devices = replicas × devices per replica; latencies at "
         "the target load spread over the replicas</p></section>"]
    if res.options:
        s.append(section("Options", table(head(res), _rows(res), win=0, left=(1, 2, 10))))
        s.append(section("Devices per option", value_bars(
            [(option_label(o), float(o.devices), f"{o.devices:,} devices ({o.replicas:,} replicas)")
             for o in res.options], "devices per option", highlight=0)))
    if res.infeasible:
        s.append(section("No feasible configuration", bullets(_infeasible(res))))
    notes = _notes(res)
    if notes:
        s.append(section("Notes", bullets(notes)))
    if res.commands:
        s.append(section("Serve commands", "".join(f"<pre><code>{escape(c)}</code></pre>" for c in res.commands)))
    used: Any = res.used
    return html_page(TITLE, _subtitle(res), schema_version=res.schema_version, sections=s,
                     figures=used.figures if used else (), assumptions=used.assumptions if used else None,
                     caveats=used.caveats if used else ())


def render_markdown(res: CapacityResult) -> str:
    out = [md_table(["quantity", "value"], _headline(res)), "",
           "_devices = replicas × devices per replica; latencies at the target load spread over the replicas_", ""]
    if res.options:
        out += ["## Options", "", md_table(head(res), _rows(res)), ""]
    if res.infeasible:
        out += ["## No feasible configuration", ""] + [f"- {x}" for x in _infeasible(res)] + [""]
    notes = _notes(res)
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    if res.commands:
        out += ["## Serve commands", ""] + [f"```\n{c}\n```" for c in res.commands] + [""]
    used: Any = res.used
    return md_page(TITLE, _subtitle(res), schema_version=res.schema_version, body=out,
                   figures=used.figures if used else (), assumptions=used.assumptions if used else None,
                   caveats=used.caveats if used else ())
