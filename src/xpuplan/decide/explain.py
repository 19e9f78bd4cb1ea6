"""Explanations of a ranking in English or Chinese (messages in ``xpuplan/i18n``).

Why the winner wins (the criteria where it gains most points over the runner-up), what would
change the answer (the smallest weight moves, the constraints that removed options, the Monte
Carlo odds), what to benchmark first (the least certain figures of the leading options), and
caveats (low-trust figures, unknown prices, the weights being the guide's opinion).
"""

from __future__ import annotations

from typing import Any

from xpuplan.decide.engine import Evaluation
from xpuplan.decide.facts import efficiency_source_kind, part_efficiency_sigma
from xpuplan.decide.result import Explanation
from xpuplan.i18n import t

TOP_REASONS = 3
TOP_CHANGES = 3
#: Figures whose low trust is worth a caveat (the ones the planners' time and memory rest on).
LOW_TRUST_PATHS = ("dense_tflops.bf16", "dense_tflops.fp16", "memory.capacity_gb", "memory.bandwidth_gb_per_s",
                   "scale_up.bandwidth_gb_per_s_per_direction")


def fmt_num(x: float | None, unit: str = "") -> str:
    if x is None:
        return "?"
    ax = abs(x)
    if ax >= 1e6:
        s = f"{x / 1e6:,.2f}M"
    elif ax >= 1e4:
        s = f"{x:,.0f}"
    elif ax >= 100:
        s = f"{x:,.0f}"
    elif ax >= 1:
        s = f"{x:.2f}"
    else:
        s = f"{x:.3g}"
    return f"{s} {unit}".strip()


def criterion_name(leaf: str, lang: str) -> str:
    return t(f"criterion.{leaf}", lang)


def label(ev: Evaluation, k: int, lang: str) -> str:
    c = ev.candidates[k]
    if not c.is_mix:
        return c.key
    return " + ".join(f"{t('role.' + r, lang)}: {p.device_id}" for r, p in c.parts.items())


def explain(ev: Evaluation, lang: str) -> Explanation:
    cands = ev.candidates
    w = ev.weights.to_dict()
    total = [float(x) for x in ev.total]
    why: list[str] = []
    changes: list[str] = []
    bench: list[str] = []
    caveats: list[str] = []
    if len(cands) == 1:
        summary = t("summary.only", lang, winner=label(ev, 0, lang), score=total[0])
    else:
        summary = t("summary.ranked", lang, winner=label(ev, 0, lang), score=total[0], second=label(ev, 1, lang),
                    score2=total[1], n=len(cands))
        gains = []
        for leaf, wt in w.items():
            d = wt * (float(ev.scores[leaf][0]) - float(ev.scores[leaf][1]))
            gains.append((d, leaf))
        gains.sort(reverse=True)
        for d, leaf in gains[:TOP_REASONS]:
            if d <= 0:
                break
            why.append(t("why.gain", lang, criterion=criterion_name(leaf, lang), points=d,
                         raw=fmt_num(ev.raw[leaf][0]), raw2=fmt_num(ev.raw[leaf][1]), second=label(ev, 1, lang),
                         unit=_raw_unit(leaf, ev.role_share, lang)))
        losses = [g for g in gains if g[0] < 0]
        if losses:
            d, leaf = losses[-1]
            why.append(t("why.loss", lang, criterion=criterion_name(leaf, lang), points=-d, second=label(ev, 1, lang)))
        sens = sorted((x for x in ev.sensitivity if x["change_points"] is not None),
                      key=lambda x: abs(x["change_points"]))
        for x in sens[:TOP_CHANGES]:
            key = "change.weight_up" if x["change_points"] > 0 else "change.weight_down"
            changes.append(t(key, lang, criterion=criterion_name(x["criterion"], lang), weight=x["weight"],
                             new=x["weight"] + x["change_points"], winner=x["new_winner"]))
        if not sens:
            changes.append(t("change.robust", lang))
    by: dict[str, list[str]] = {}
    for r in ev.rejected:
        by.setdefault(r.constraint, []).append(r.key)
    for constraint, keys in sorted(by.items(), key=lambda kv: -len(kv[1])):
        if constraint == "workload":
            changes.append(t("change.workload", lang, n=len(keys), options=", ".join(keys[:6])))
        else:
            changes.append(t("change.constraint", lang, constraint=constraint, n=len(keys), options=", ".join(keys[:6])))
    if ev.mc is not None:
        p = ev.mc["p_rank_first"]
        changes.append(t("change.mc", lang, p=p[0] * 100, n=ev.mc["samples"]))
        if len(p) > 1:
            k = max(range(1, len(p)), key=lambda i: p[i])
            if p[k] > 0:
                changes.append(t("change.mc_other", lang, option=label(ev, k, lang), p=p[k] * 100))
    # benchmark first: the leading options' devices, least certain first
    lead = cands[: min(3, len(cands))]
    devs: dict[str, tuple[float, Any, str, float]] = {}
    for c in lead:
        for p in c.parts.values():
            dev = c.device(p.device_id)
            sigma = part_efficiency_sigma(dev, p.role, p.efficiency_source, p.regime)
            if p.device_id not in devs or sigma > devs[p.device_id][0]:
                devs[p.device_id] = (sigma, dev, p.efficiency_source, p.compute_bound_fraction)
    for dev_id, (sig, dev, src, cb) in sorted(devs.items(), key=lambda kv: -kv[1][0]):
        what = t("bench.compute" if cb >= 0.5 else "bench.memory", lang)
        bench.append(t("bench.device", lang, device=dev_id, what=what, trust=dev.min_trust(),
                       source=t("effsrc." + efficiency_source_kind(src), lang), sigma=sig * 100))
    # caveats
    for f in _low_trust(ev):
        caveats.append(t("caveat.low_trust", lang, device=f["device"], path=f["path"], trust=f["trust"],
                         source=f["source"]))
    for c in lead:
        for p in c.parts.values():
            if not p.hardware_known:
                caveats.append(t("caveat.no_price", lang, device=p.device_id))
    for c in cands:  # any option, not only the leading ones: it explains a device count that looks absurd
        for p in c.parts.values():
            if p.ttft_near_idle_s is not None and p.plan is not None:
                mean_s, limit_s = p.ttft_near_idle_s
                caveats.append(t("caveat.ttft_near_idle", lang, device=p.device_id, role=t("role." + p.role, lang),
                                 devices=p.devices, input_len=p.plan["input_len"], ttft=mean_s,
                                 rate=p.rate_per_replica or 0.0, limit=limit_s))
    caveats = list(dict.fromkeys(caveats))
    caveats.append(t("caveat.weights", lang))
    if ev.mc is not None:
        caveats.append(t("caveat.mc_method", lang))
    return Explanation(lang=lang, summary=summary, why=why, what_would_change=changes, benchmark_first=bench,
                       caveats=caveats)


def _low_trust(ev: Evaluation) -> list[dict[str, Any]]:
    from xpuplan.decide.engine import figures_used

    out = []
    for f in figures_used(ev.candidates[0]):
        if f["trust"] in ("C", "D") and f["path"] in LOW_TRUST_PATHS:
            out.append(f)
    return out[:6]


def _raw_unit(leaf: str, role_share: dict[str, float], lang: str) -> str:
    """Unit of a leaf's raw quantity as shown beside it (``scoring.LEAVES``), translated; the
    compute-fit quantity is time to train for training-only scenarios and devices for serving-only ones."""
    from xpuplan.decide.scoring import LEAVES

    if leaf == "compute_fit" and set(role_share) == {"train"}:
        return t("unit.s_to_train", lang)
    if leaf == "compute_fit" and set(role_share) == {"serve"}:
        return t("unit.devices_to_serve", lang)
    key = _UNIT_KEYS.get(LEAVES[leaf][1])
    return t(key, lang) if key else ""


#: Units of ``scoring.LEAVES`` -> message keys (dimensionless scores show no unit).
_UNIT_KEYS = {
    "s to train / devices to serve": "unit.s_to_train_or_devices",
    "devices per model copy": "unit.devices_per_copy",
    "s": "unit.s",
    "tokens/s per device": "unit.tokens_per_s_per_device",
    "engineer-months": "unit.engineer_months",
    "USD": "unit.usd",
}
