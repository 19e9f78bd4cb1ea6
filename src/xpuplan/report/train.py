"""Report of ``xpuplan train search`` (a :class:`~xpuplan.jobs.train.TrainSearchResult`): HTML and Markdown.

Top plans, the time-vs-devices front when several device counts were searched, the exposed step
time and the memory of the best plan, and the advice. Numbers are formatted as the terminal table
formats them (tokens/s with thousands separators, MFU as a percentage, memory in GB).
"""

from __future__ import annotations

from html import escape
from typing import Any

from xpuplan import units
from xpuplan.jobs.train import TrainEstimateOut, TrainSearchResult
from xpuplan.report.format import fmt_energy_j, fmt_time
from xpuplan.report.page import bullets, html_page, kpis, md_page, md_table, section, table
from xpuplan.report.svg import LINE_COLOURS, line_chart, pareto_scatter, stacked_bars

TITLE = "Training plan search"
#: Memory parts of a plan, in the order the planner stacks them.
MEMORY_PARTS = (("weights", "weights_bytes"), ("gradients", "gradients_bytes"),
                ("master weights", "master_weights_bytes"), ("optimizer states", "optimizer_states_bytes"),
                ("activations", "activations_bytes"), ("workspace", "workspace_bytes"))


def fmt_tokens_per_s(x: float) -> str:
    return f"{x:,.0f}"


def fmt_gb(x: float) -> str:
    return f"{x / units.GB:,.1f} GB"


def _subtitle(res: TrainSearchResult) -> str:
    counts = ", ".join(str(n) for n in res.device_counts[:12]) + (" …" if len(res.device_counts) > 12 else "")
    return f"{res.model} on {res.hardware} · devices {counts}"


def _plan_rows(res: TrainSearchResult) -> list[list[str]]:
    return [[str(i), f"{e.n_devices:,}", e.key, fmt_tokens_per_s(e.tokens_per_s), f"{e.tokens_per_s_per_device:,.1f}",
             f"{e.mfu:.1%}", f"{e.step_time_s:.3f} s", fmt_gb(e.memory["total_bytes"]), fmt_time(e.time_to_train_s)]
            for i, e in enumerate(res.plans, 1)]


PLAN_HEAD = ["#", "devices", "plan", "tokens/s", "tok/s/device", "MFU", "step", "memory/device", "time to train"]


def _headline(res: TrainSearchResult) -> list[tuple[str, str]]:
    if not res.plans:
        return [("plans evaluated", f"{res.plans_evaluated:,}"), ("plans that fit", "0")]
    b = res.plans[0]
    out = [("tokens/s, best plan", fmt_tokens_per_s(b.tokens_per_s)), ("devices", f"{b.n_devices:,}"),
           ("MFU", f"{b.mfu:.1%}"), ("step time", f"{b.step_time_s:.3f} s")]
    if b.time_to_train_s is not None:
        out.append(("time to train", fmt_time(b.time_to_train_s)))
    u = res.uncertainty
    if u is not None and "tokens_per_s" in u.ranges:
        lo, hi = u.ranges["tokens_per_s"]
        out.append((f"tokens/s, 80% band ({u.family})", f"{fmt_tokens_per_s(lo)} - {fmt_tokens_per_s(hi)}"))
        if "time_to_train_s" in u.ranges:
            tlo, thi = u.ranges["time_to_train_s"]
            out.append(("time to train, 80% band", f"{fmt_time(tlo)} - {fmt_time(thi)}"))
    return out


def _step_parts(b: TrainEstimateOut) -> dict[str, float]:
    return {k.removesuffix("_s"): v for k, v in b.step.items() if k != "step_s" and v > 0}


def _memory_parts(b: TrainEstimateOut) -> dict[str, float]:
    return {name: b.memory.get(key, 0.0) for name, key in MEMORY_PARTS if b.memory.get(key, 0.0) > 0}


def _pareto_chart(res: TrainSearchResult) -> str:
    pts = res.pareto
    if len(res.device_counts) < 2 or len(pts) < 2:
        return ""
    if all(p.get("time_to_train_s") for p in pts):
        best = res.plans[0].n_devices if res.plans else None
        return pareto_scatter([(f"{p['n_devices']:,} devices", p["time_to_train_s"], float(p["n_devices"]),
                                p["n_devices"] == best) for p in pts],
                              "time to train vs devices", "time to train", "devices", y_fmt="count")
    return line_chart([("tokens/s", [float(p["n_devices"]) for p in pts], [p["tokens_per_s"] for p in pts])],
                      "tokens/s vs devices", "devices", "tokens/s", width=860)


def render_html(res: TrainSearchResult) -> str:
    s = [f"<section>{kpis(_headline(res))}<p class='muted'>{res.plans_evaluated:,} plans evaluated, "
         f"{res.plans_feasible:,} fit, {res.elapsed_s:.2f} s; efficiency: {escape(res.efficiency_source)}</p>"]
    if res.interrupted:
        s.append(f"<p><b>Interrupted:</b> {res.counts_done} of {len(res.device_counts)} device counts searched; the "
                 "plans are the best found so far.</p>")
    if res.reasons:
        s.append("<h3>Why plans did not fit</h3>" + bullets(res.reasons[:20]))
    s.append("</section>")
    if res.plans:
        s.append(section("Best plans", table(PLAN_HEAD, _plan_rows(res), win=0, left=(2,))))
    chart = _pareto_chart(res)
    if chart:
        s.append(section("Pareto front: time vs devices", chart + table(
            ["devices", "plan", "tokens/s", "time to train"],
            [[f"{p['n_devices']:,}", p["key"], fmt_tokens_per_s(p["tokens_per_s"]), fmt_time(p.get("time_to_train_s"))]
             for p in res.pareto], left=(1,))))
    if res.plans:
        b = res.plans[0]
        steps = _step_parts(b)
        colours = {k: LINE_COLOURS[i % len(LINE_COLOURS)] for i, k in enumerate(steps)}
        s.append(section(f"Step time of the best plan ({b.step_time_s:.3f} s, exposed)",
                         stacked_bars([("best plan", steps)], colours, {k: k for k in steps}, "step time", unit="s")
                         + table(["part", "seconds", "share"],
                                 [[k, f"{v:.3f}", f"{v / b.step_time_s:.1%}"] for k, v in steps.items()])))
        mem = _memory_parts(b)
        mc = {k: LINE_COLOURS[i % len(LINE_COLOURS)] for i, k in enumerate(mem)}
        usable = b.memory.get("usable_bytes")
        s.append(section(f"Memory per device of the best plan ({fmt_gb(b.memory['total_bytes'])}"
                         + (f" of {fmt_gb(usable)} usable)" if usable else ")"),
                         stacked_bars([("best plan", {k: v / units.GB for k, v in mem.items()})], mc,
                                      {k: k for k in mem}, "memory per device", unit="GB",
                                      max_value=(usable / units.GB) if usable else None)
                         + table(["part", "GB"], [[k, f"{v / units.GB:,.2f}"] for k, v in mem.items()])))
        extra = [("power per device", "-" if b.power_w_per_device is None else f"{b.power_w_per_device:,.0f} W")]
        if b.energy_j is not None:
            extra.append(("energy to train (devices only)", fmt_energy_j(b.energy_j)))
        if b.device_time_s is not None:
            extra.append(("device-hours", f"{b.device_time_s / units.HOUR:,.0f}"))
        s.append(section("Best plan", table(["quantity", "value"], [["plan", b.key], ["global batch",
                         f"{b.global_batch_seqs:,} x {b.seq_len:,} tokens"], *[[k, v] for k, v in extra]], left=(1,))
                         + bullets(b.notes)))
    if res.advice:
        s.append(section("Advice", bullets(a.message for a in res.advice)))
    if res.launch and res.launch.get("text"):
        s.append(section("Launch command of the best plan (--emit)",
                         f"<pre><code>{escape(str(res.launch['text']))}</code></pre>"))
    used = res.used
    return html_page(TITLE, _subtitle(res), schema_version=res.schema_version, sections=s,
                     figures=used.figures if used else (), assumptions=used.assumptions if used else None,
                     caveats=used.caveats if used else ())


def render_markdown(res: TrainSearchResult) -> str:
    out = ["| quantity | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in _headline(res)]
    out += ["", f"{res.plans_evaluated:,} plans evaluated, {res.plans_feasible:,} fit, {res.elapsed_s:.2f} s; "
            f"efficiency: {res.efficiency_source}", ""]
    if res.interrupted:
        out += [f"**Interrupted:** {res.counts_done} of {len(res.device_counts)} device counts searched.", ""]
    if res.plans:
        out += ["## Best plans", "", md_table(PLAN_HEAD, _plan_rows(res)), ""]
    if len(res.device_counts) > 1 and res.pareto:
        out += ["## Pareto front: time vs devices", "", md_table(
            ["devices", "plan", "tokens/s", "time to train"],
            [[f"{p['n_devices']:,}", p["key"], fmt_tokens_per_s(p["tokens_per_s"]), fmt_time(p.get("time_to_train_s"))]
             for p in res.pareto]), ""]
    if res.plans:
        b = res.plans[0]
        out += [f"## Step time of the best plan ({b.step_time_s:.3f} s, exposed)", "",
                md_table(["part", "seconds", "share"],
                         [[k, f"{v:.3f}", f"{v / b.step_time_s:.1%}"] for k, v in _step_parts(b).items()]), "",
                f"## Memory per device of the best plan ({fmt_gb(b.memory['total_bytes'])})", "",
                md_table(["part", "GB"], [[k, f"{v / units.GB:,.2f}"] for k, v in _memory_parts(b).items()]), ""]
    if res.reasons:
        out += ["## Why plans did not fit", ""] + [f"- {r}" for r in res.reasons[:20]] + [""]
    if res.advice:
        out += ["## Advice", ""] + [f"- {a.message}" for a in res.advice] + [""]
    if res.launch and res.launch.get("text"):
        out += ["## Launch command of the best plan (--emit)", "", "```", str(res.launch["text"]), "```", ""]
    used: Any = res.used
    return md_page(TITLE, _subtitle(res), schema_version=res.schema_version, body=out,
                   figures=used.figures if used else (), assumptions=used.assumptions if used else None,
                   caveats=used.caveats if used else ())
