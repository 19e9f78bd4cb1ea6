"""Report of ``xpuplan train search`` (a :class:`~xpuplan.jobs.train.TrainSearchResult`): HTML and Markdown.

Top plans, the time-vs-devices front when several device counts were searched, the exposed step
time and the memory of the best plan, and the advice. Numbers are formatted as the terminal table
formats them (tokens/s with thousands separators, MFU as a percentage, memory in GB). Words come
from the i18n catalogue (``train.*``, English or Chinese); the planner's reasons, notes and advice
stay as it wrote them (English).
"""

from __future__ import annotations

from html import escape
from typing import Any

from xpuplan import units
from xpuplan.i18n import catalogue, t
from xpuplan.jobs.train import TrainEstimateOut, TrainSearchResult
from xpuplan.report.format import fmt_energy_j, fmt_time
from xpuplan.report.page import bullets, html_page, kpis, md_page, md_table, section, table
from xpuplan.report.svg import LINE_COLOURS, line_chart, pareto_scatter, stacked_bars

#: The report's title in English (``train.title`` in the i18n catalogue; kept for older imports).
TITLE = "Training plan search"
#: Memory parts of a plan, in the order the planner stacks them (English names; ``train.mem.*`` in the catalogue).
MEMORY_PARTS = (("weights", "weights_bytes"), ("gradients", "gradients_bytes"),
                ("master weights", "master_weights_bytes"), ("optimizer states", "optimizer_states_bytes"),
                ("activations", "activations_bytes"), ("workspace", "workspace_bytes"))
#: Columns of the plan table (``train.col.*``); the English header is :data:`PLAN_HEAD`.
PLAN_COLS = ("rank", "devices", "plan", "tokens_per_s", "per_device", "mfu", "step", "memory", "time_to_train")
PLAN_HEAD = ["#", "devices", "plan", "tokens/s", "tok/s/device", "MFU", "step", "memory/device", "time to train"]


def fmt_tokens_per_s(x: float) -> str:
    return f"{x:,.0f}"


def fmt_gb(x: float) -> str:
    return f"{x / units.GB:,.1f} GB"


def _subtitle(res: TrainSearchResult, lang: str = "en") -> str:
    counts = ", ".join(str(n) for n in res.device_counts[:12]) + (" …" if len(res.device_counts) > 12 else "")
    return t("train.subtitle", lang, model=res.model, hardware=res.hardware, counts=counts)


def _plan_head(lang: str) -> list[str]:
    return [t(f"train.col.{c}", lang) for c in PLAN_COLS]


def _plan_rows(res: TrainSearchResult) -> list[list[str]]:
    return [[str(i), f"{e.n_devices:,}", e.key, fmt_tokens_per_s(e.tokens_per_s), f"{e.tokens_per_s_per_device:,.1f}",
             f"{e.mfu:.1%}", f"{e.step_time_s:.3f} s", fmt_gb(e.memory["total_bytes"]), fmt_time(e.time_to_train_s)]
            for i, e in enumerate(res.plans, 1)]


def _headline(res: TrainSearchResult, lang: str = "en") -> list[tuple[str, str]]:
    if not res.plans:
        return [(t("train.kpi.evaluated", lang), f"{res.plans_evaluated:,}"), (t("train.kpi.fit", lang), "0")]
    b = res.plans[0]
    out = [(t("train.kpi.tokens_per_s", lang), fmt_tokens_per_s(b.tokens_per_s)),
           (t("train.col.devices", lang), f"{b.n_devices:,}"),
           (t("train.col.mfu", lang), f"{b.mfu:.1%}"), (t("train.kpi.step_time", lang), f"{b.step_time_s:.3f} s")]
    if b.time_to_train_s is not None:
        out.append((t("train.col.time_to_train", lang), fmt_time(b.time_to_train_s)))
    u = res.uncertainty
    if u is not None and "tokens_per_s" in u.ranges:
        lo, hi = u.ranges["tokens_per_s"]
        out.append((t("train.kpi.tokens_band", lang, family=u.family),
                    f"{fmt_tokens_per_s(lo)} - {fmt_tokens_per_s(hi)}"))
        if "time_to_train_s" in u.ranges:
            tlo, thi = u.ranges["time_to_train_s"]
            out.append((t("train.kpi.time_band", lang), f"{fmt_time(tlo)} - {fmt_time(thi)}"))
    return out


def _searched(res: TrainSearchResult, lang: str) -> str:
    line = t("train.searched", lang, evaluated=f"{res.plans_evaluated:,}", fit=f"{res.plans_feasible:,}",
             elapsed=f"{res.elapsed_s:.2f}", source=res.efficiency_source)
    stack = (res.used.assumptions.get("training_stack") or {}) if res.used is not None else {}
    sep = "；" if lang == "zh" else "; "
    return line + (sep + t("train.stack", lang, stack=stack["id"]) if stack.get("id") else "")


def step_part_name(part: str, lang: str = "en") -> str:
    """A part of the step time (``compute``, ``tp_comm``, ...) in ``lang``; a part the catalogue does not
    know keeps its id."""
    key = f"train.step.{part}"
    return t(key, lang) if key in catalogue("en") else part


def _step_parts(b: TrainEstimateOut) -> dict[str, float]:
    return {k.removesuffix("_s"): v for k, v in b.step.items() if k != "step_s" and v > 0}


def _memory_parts(b: TrainEstimateOut, lang: str = "en") -> dict[str, float]:
    return {t(f"train.mem.{key.removesuffix('_bytes')}", lang): b.memory.get(key, 0.0)
            for _name, key in MEMORY_PARTS if b.memory.get(key, 0.0) > 0}


def _step_head(lang: str) -> list[str]:
    return [t(f"train.col.{c}", lang) for c in ("part", "seconds", "share")]


def _step_rows(b: TrainEstimateOut, lang: str) -> list[list[str]]:
    return [[step_part_name(k, lang), f"{v:.3f}", f"{v / b.step_time_s:.1%}"] for k, v in _step_parts(b).items()]


def _memory_rows(b: TrainEstimateOut, lang: str) -> list[list[str]]:
    return [[k, f"{v / units.GB:,.2f}"] for k, v in _memory_parts(b, lang).items()]


def _pareto_head(lang: str) -> list[str]:
    return [t(f"train.col.{c}", lang) for c in ("devices", "plan", "tokens_per_s", "time_to_train")]


def _pareto_rows(res: TrainSearchResult) -> list[list[str]]:
    return [[f"{p['n_devices']:,}", p["key"], fmt_tokens_per_s(p["tokens_per_s"]), fmt_time(p.get("time_to_train_s"))]
            for p in res.pareto]


def _pareto_chart(res: TrainSearchResult, lang: str = "en") -> str:
    pts = res.pareto
    if len(res.device_counts) < 2 or len(pts) < 2:
        return ""
    if all(p.get("time_to_train_s") for p in pts):
        best = res.plans[0].n_devices if res.plans else None
        return pareto_scatter([(t("train.n_devices", lang, n=f"{p['n_devices']:,}"), p["time_to_train_s"],
                                float(p["n_devices"]), p["n_devices"] == best) for p in pts],
                              t("train.chart.time_vs_devices", lang), t("train.col.time_to_train", lang),
                              t("train.col.devices", lang), y_fmt="count")
    tps = t("train.col.tokens_per_s", lang)
    return line_chart([(tps, [float(p["n_devices"]) for p in pts], [p["tokens_per_s"] for p in pts])],
                      t("train.chart.tokens_vs_devices", lang), t("train.col.devices", lang), tps, width=860)


def _step_title(b: TrainEstimateOut, lang: str) -> str:
    return t("train.step_title", lang, step=f"{b.step_time_s:.3f}")


def _memory_title(b: TrainEstimateOut, lang: str, usable: float | None = None) -> str:
    total = fmt_gb(b.memory["total_bytes"])
    if usable:
        return t("train.memory_title_usable", lang, total=total, usable=fmt_gb(usable))
    return t("train.memory_title", lang, total=total)


def _planner(title: str, lang: str) -> str:
    """A heading over the planner's own words, saying they are in English where the report is not."""
    return title + t("train.planner_english", lang)


def render_html(res: TrainSearchResult, lang: str = "en") -> str:
    s = [f"<section>{kpis(_headline(res, lang))}<p class='muted'>{escape(_searched(res, lang))}</p>"]
    if res.interrupted:
        s.append(f"<p><b>{escape(t('train.interrupted', lang))}</b> "
                 f"{escape(t('train.interrupted_html', lang, done=res.counts_done, n=len(res.device_counts)))}</p>")
    if res.reasons:
        s.append(f"<h3>{escape(_planner(t('train.why_not_fit', lang), lang))}</h3>" + bullets(res.reasons[:20]))
    s.append("</section>")
    if res.plans:
        s.append(section(t("train.best_plans", lang), table(_plan_head(lang), _plan_rows(res), win=0, left=(2,))))
    chart = _pareto_chart(res, lang)
    if chart:
        s.append(section(t("train.pareto", lang), chart + table(_pareto_head(lang), _pareto_rows(res), left=(1,))))
    if res.plans:
        b = res.plans[0]
        best = t("train.best_plan_bar", lang)
        steps = _step_parts(b)
        colours = {k: LINE_COLOURS[i % len(LINE_COLOURS)] for i, k in enumerate(steps)}
        s.append(section(_step_title(b, lang),
                         stacked_bars([(best, steps)], colours, {k: step_part_name(k, lang) for k in steps},
                                      t("train.kpi.step_time", lang), unit="s")
                         + table(_step_head(lang), _step_rows(b, lang))))
        mem = _memory_parts(b, lang)
        mc = {k: LINE_COLOURS[i % len(LINE_COLOURS)] for i, k in enumerate(mem)}
        usable = b.memory.get("usable_bytes")
        s.append(section(_memory_title(b, lang, usable),
                         stacked_bars([(best, {k: v / units.GB for k, v in mem.items()})], mc,
                                      {k: k for k in mem}, t("train.chart.memory", lang), unit="GB",
                                      max_value=(usable / units.GB) if usable else None)
                         + table([t("train.col.part", lang), "GB"], _memory_rows(b, lang))))
        extra = [(t("train.power", lang), "-" if b.power_w_per_device is None else f"{b.power_w_per_device:,.0f} W")]
        if b.energy_j is not None:
            extra.append((t("train.energy", lang), fmt_energy_j(b.energy_j)))
        if b.device_time_s is not None:
            extra.append((t("train.device_hours", lang), f"{b.device_time_s / units.HOUR:,.0f}"))
        batch = t("train.batch_value", lang, seqs=f"{b.global_batch_seqs:,}", seq_len=f"{b.seq_len:,}")
        if b.plan.get("ep_overlap"):  # what the key's -epo means, in the reader's language (-rm:/-off: may follow it)
            extra.insert(0, (t("train.ep_overlap", lang), t("train.ep_overlap_on", lang)))
        if b.plan.get("recompute") == "partial" and b.memory.get("recompute_layers"):
            extra.insert(0, (t("train.partial_recompute", lang),
                             t("train.partial_recompute_on", lang, n=f"{int(b.memory['recompute_layers'])}")))
        if b.plan.get("recompute") == "selective" and b.plan.get("recompute_modules"):
            extra.insert(0, (t("train.recompute_modules", lang), t("train.recompute_modules_on", lang, modules=", ".join(
                b.plan["recompute_modules"]))))
        if b.plan.get("offload_modules"):
            extra.insert(0, (t("train.offload_modules", lang), t("train.offload_modules_on", lang, modules=", ".join(
                b.plan["offload_modules"]), host=units.format_bytes(float(b.memory.get("host_offload_bytes") or 0.0)))))
        if b.lora:
            extra.insert(0, (t("train.method", lang), t("train.lora_value", lang, method=b.method.upper().replace(
                "QLORA", "QLoRA").replace("LORA", "LoRA"), rank=b.lora["rank"], targets=", ".join(b.lora["targets"]))))
        s.append(section(t("train.best_plan", lang), table(
            [t("train.quantity", lang), t("page.value", lang)],
            [[t("train.col.plan", lang), b.key], [t("train.global_batch", lang), batch], *[[k, v] for k, v in extra]],
            left=(1,)) + (f"<p class='muted'>{escape(_planner(t('train.plan_notes', lang), lang))}</p>"
                          + bullets(b.notes) if b.notes else "")))
    if res.advice:
        s.append(section(_planner(t("train.advice", lang), lang), bullets(a.message for a in res.advice)))
    if res.launch and res.launch.get("text"):
        s.append(section(t("train.launch", lang), f"<pre><code>{escape(str(res.launch['text']))}</code></pre>"))
    used = res.used
    return html_page(t("train.title", lang), _subtitle(res, lang), schema_version=res.schema_version, sections=s,
                     figures=used.figures if used else (), assumptions=used.assumptions if used else None,
                     caveats=used.caveats if used else (), lang=lang)


def render_markdown(res: TrainSearchResult, lang: str = "en") -> str:
    out = [f"| {t('train.quantity', lang)} | {t('page.value', lang)} |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in _headline(res, lang)]
    out += ["", _searched(res, lang), ""]
    if res.interrupted:
        out += [f"**{t('train.interrupted', lang)}** "
                f"{t('train.interrupted_md', lang, done=res.counts_done, n=len(res.device_counts))}", ""]
    if res.plans:
        out += [f"## {t('train.best_plans', lang)}", "", md_table(_plan_head(lang), _plan_rows(res)), ""]
    if len(res.device_counts) > 1 and res.pareto:
        out += [f"## {t('train.pareto', lang)}", "", md_table(_pareto_head(lang), _pareto_rows(res)), ""]
    if res.plans:
        b = res.plans[0]
        out += [f"## {_step_title(b, lang)}", "",
                md_table(_step_head(lang), _step_rows(b, lang)), "",
                f"## {_memory_title(b, lang)}", "",
                md_table([t("train.col.part", lang), "GB"], _memory_rows(b, lang)), ""]
    if res.reasons:
        out += [f"## {_planner(t('train.why_not_fit', lang), lang)}", ""] + [f"- {r}" for r in res.reasons[:20]] + [""]
    if res.advice:
        out += [f"## {_planner(t('train.advice', lang), lang)}", ""] + [f"- {a.message}" for a in res.advice] + [""]
    if res.launch and res.launch.get("text"):
        out += [f"## {t('train.launch', lang)}", "", "```", str(res.launch["text"]), "```", ""]
    used: Any = res.used
    return md_page(t("train.title", lang), _subtitle(res, lang), schema_version=res.schema_version, body=out,
                   figures=used.figures if used else (), assumptions=used.assumptions if used else None,
                   caveats=used.caveats if used else (), lang=lang)
