"""How far to trust a prediction: an uncertainty band from the hardware family's validation error.

For each hardware family (vendor and architecture in the catalog: "NVIDIA Ampere", "Google TPU
v6e", ...) and kind (``train`` / ``infer``), ``validate/data/bands.json`` holds the error statistics of
the planner on the packaged public validation files: how many rows, their trust grades, and the
10th and 90th percentiles of measured / predicted - 1 in speed (:func:`speed_ratio`: times and device-hours
inverted, so that a run slower than predicted is negative whatever the metric; the keys keep the name
``..._measured_over_predicted_minus_1``). The file is *generated*
(``scripts/update-validation-snapshot`` calls :func:`band_table`), never typed by hand.

:func:`validation_band` turns them into a band around a prediction: the measured figure was
between ``prediction·(1 - low_fraction)`` and ``prediction·(1 + high_fraction)`` for 80% of the family's
public rows. The band is widened where the evidence is weaker, by named factors:

* a family with fewer than :data:`MIN_ROWS` rows, or none: the band of all rows of that kind,
  times :data:`UNVALIDATED_WIDENING` (an uncalibrated family has no measured error of its own);
* a family whose rows are mostly trust C/D: times :data:`LOW_TRUST_WIDENING`;
* a prediction outside the regime the rows behind the band cover (:class:`Regime`: a mixture-of-experts
  model where none of them is, a longer sequence or prompt, more devices, a precision none of them used, more
  concurrent sequences per serving replica than any of them ran, or another model where all of them are one):
  the wider of the family's spread and that of all rows of the kind (the family's own error was measured in
  another regime: it is treated like a family without rows of its own), times :data:`EXTRAPOLATION_WIDENING`,
  with the reasons named (``Band.extrapolation``). The rows' regime (their "envelope") is stored beside their
  statistics in ``bands.json``;
* never narrower than :data:`MIN_BAND_FRACTION` on either side (run-to-run variation of published
  throughput: software versions, clocks, data loading).

Why the regime matters: the held-out judge (``benchmarks/heldout.py``) shows the planner's error on published
runs outside the public files is about 3x its error on them, and the largest misses sit in regimes no public
row covers (fine-grained MoE training, 128K+ context, FP8 on a family validated in BF16 only). A band drawn
from rows of another regime would claim a precision nobody measured.
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

from xpuplan.catalog.efficiency import architecture_name
from xpuplan.errors import UnknownIdError, XpuplanError

if TYPE_CHECKING:
    from xpuplan.catalog.device import Device
    from xpuplan.validate.core import RowResult
    from xpuplan.validate.rows import ValidationRow

#: Fewest rows of a family for its own band (below: the pooled band, widened).
MIN_ROWS: Final = 5
#: Widening of the pooled band for a family without enough public rows (no measured error of its own).
UNVALIDATED_WIDENING: Final = 2.0
#: Widening for a family whose public rows are mostly trust C or D (loose sanity checks only).
LOW_TRUST_WIDENING: Final = 1.5
#: Narrowest band on either side, a fraction of the prediction.
MIN_BAND_FRACTION: Final = 0.05
#: Percentiles of measured/predicted - 1 that bound the band (an 80% interval).
LOW_PERCENTILE: Final = 10.0
HIGH_PERCENTILE: Final = 90.0

#: Widening of a band for a prediction outside the regime of the rows behind it (see the module doc): the
#: measured error of one regime says nothing about another, so such a prediction is treated like one for a
#: family without rows of its own (:data:`UNVALIDATED_WIDENING`). Applied once, however many dimensions are out.
EXTRAPOLATION_WIDENING: Final = 2.0

#: Metrics where a larger value means slower (times, device-hours). A band is on speed, as results apply it
#: (``jobs.results.uncertainty``: throughput-like figures scale with it, time-like ones inversely), so these rows
#: enter it as predicted / measured - 1, the others as measured / predicted - 1 (:func:`speed_ratio`).
TIME_METRICS: Final = frozenset({"step_time_s", "device_hours", "ttft_ms", "tpot_ms", "e2e_latency_ms"})

BANDS_FILE: Final = "bands.json"
KINDS: Final = ("train", "infer")


def hardware_family(device: str | Device) -> str:
    """The family a device's validation error is pooled over: vendor and architecture as the
    catalog names them (the part before any parenthesis), else the device id."""
    from xpuplan.catalog import load_catalog

    if isinstance(device, str):
        try:
            dev = load_catalog().get(device)
        except UnknownIdError:
            return device
    else:
        dev = device
    arch = architecture_name(dev.architecture)
    return f"{dev.vendor} {arch}" if arch else dev.id


@dataclass(frozen=True)
class Regime:
    """Where a prediction (or a validation row) sits: ``moe`` a mixture-of-experts model; ``fine_grained_moe``
    one whose routed experts are narrower than its hidden size (Qwen3, DeepSeek-V3: the short-K regime of the
    expert GEMMs, ``perf.ops.short_k_factor``; Mixtral's experts are wider); ``seq_len`` tokens per training
    sequence, or the prompt length of a serving request; ``n_devices`` devices of the run (a training job, or
    one serving replica); ``precision`` the compute precision (bf16, fp8, fp4, int8, ...); ``batch`` (serving)
    the sequences one replica runs at once: a decode step of a few sequences reads weights, one of thousands
    is bound by the GEMMs, the KV reads, the all-reduces and the host, so rows up to batch 256 measure
    nothing of batch 3,000; ``model`` the model id (a family whose rows are all one model has measured
    nothing that depends on the shape); ``method`` (training) full training, or LoRA/QLoRA on a frozen base.
    None: not known (never counted as outside)."""

    moe: bool = False
    seq_len: int | None = None
    n_devices: int | None = None
    precision: str | None = None
    fine_grained_moe: bool = False
    batch: int | None = None
    model: str | None = None
    method: str | None = None


def model_regime(model: Any, *, seq_len: float | None = None, n_devices: int | None = None,
                 precision: str | None = None, batch: float | None = None, method: str | None = None) -> Regime:
    """The :class:`Regime` of a prediction for ``model`` (a ``ModelArch``): MoE, fine-grained MoE and the model
    id from it, the rest as given (``seq_len`` and ``batch`` rounded; ``batch``: a serving replica's concurrent
    sequences)."""
    moe = getattr(model, "moe", None)
    return Regime(moe=moe is not None, seq_len=round(seq_len) if seq_len else None, n_devices=n_devices,
                  precision=precision,
                  fine_grained_moe=moe is not None and moe.expert_ffn_dim < model.d_model,
                  batch=round(batch) if batch else None, model=getattr(model, "id", None) or None, method=method)


def _int(v: str | None) -> int | None:
    try:
        return int(float(v)) if v not in (None, "") else None
    except ValueError:
        return None


def regime_of_row(row: ValidationRow) -> Regime:
    """The regime of a validation row, from its columns (MoE: ``moe_experts`` > 1, or a preset model that
    is MoE)."""
    raw = row.raw
    experts = _int(raw.get("moe_experts"))
    moe = experts is not None and experts > 1
    moe_ffn, d_model = _int(raw.get("moe_ffn")), _int(raw.get("d_model"))
    fine = moe and moe_ffn is not None and d_model is not None and moe_ffn < d_model
    if (experts is None or (moe and (moe_ffn is None or d_model is None))) and raw.get("model"):
        from xpuplan.models import get_model

        try:
            m = get_model(raw["model"])
            moe = m.moe is not None
            fine = moe and m.moe.expert_ffn_dim < m.d_model  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - an architecture-only row: its columns said no experts
            moe = moe and experts is not None
    seq = _int(raw.get("seq_len")) if row.kind == "train" else _int(raw.get("input_len"))
    batch = row_batch(row) if row.kind == "infer" else None
    return Regime(moe=moe, seq_len=seq, n_devices=row.n_devices or None, precision=row.precision or None,
                  fine_grained_moe=fine, batch=batch, model=_model_id(raw.get("model")),
                  method=_row_method(row) if row.kind == "train" else None)


def _row_method(row: ValidationRow) -> str | None:
    """A training row's method (``train_predictor.row_method``); None where its method columns are malformed."""
    from xpuplan.validate.train_predictor import row_method

    try:
        return row_method(row)[0]
    except XpuplanError:
        return None


def _model_id(name: str | None) -> str | None:
    """A row's model as the catalog names it (an alias resolved), so that rows and predictions compare;
    the name as written when the catalog does not know it, None when the row gives none."""
    name = (name or "").strip()
    if not name:
        return None
    from xpuplan.models import get_model

    try:
        return get_model(name).id
    except Exception:  # noqa: BLE001 - a model the catalog lacks: compared by its own name
        return name


def row_batch(row: ValidationRow) -> int | None:
    """The sequences a serving row's replica runs at once, as far as the row says: its ``batch``, else its
    ``concurrency``, else its ``max_num_seqs`` (capped by ``num_prompts``: an offline run of every prompt at
    once); None when it names none of them (the engine's default decides, which this module does not know)."""
    raw = row.raw
    for col in ("batch", "concurrency"):
        v = _int(raw.get(col))
        if v:
            return v
    seqs, prompts = _int(raw.get("max_num_seqs")), _int(raw.get("num_prompts"))
    if seqs:
        return min(seqs, prompts) if prompts else seqs
    return None


def precision_class(precision: str) -> str:
    """The precision as far as speed goes: bf16 and fp16 run at the same rate (one class, "16-bit")."""
    p = precision.casefold()
    return "16-bit" if p in ("bf16", "fp16") else p


def public_regimes() -> dict[str, Regime]:
    """Row id -> :class:`Regime` of every row of the packaged public validation files (the rows behind
    ``bands.json``)."""
    from xpuplan.validate.data_files import public_files
    from xpuplan.validate.rows import read_rows

    return {r.id: regime_of_row(r) for p in public_files() for r in read_rows(p)}


def envelope(regimes: Iterable[Regime]) -> dict[str, Any]:
    """What a set of rows covers: any MoE model, the longest sequence, the most devices, the precision
    classes (:func:`precision_class`), the most concurrent sequences of a serving replica, and the models by id
    (None when a row gives only an architecture: which models the rows cover is then not known)."""
    rs = list(regimes)
    seqs = [r.seq_len for r in rs if r.seq_len]
    devs = [r.n_devices for r in rs if r.n_devices]
    batches = [r.batch for r in rs if r.batch]
    return {"moe": any(r.moe for r in rs), "fine_grained_moe": any(r.fine_grained_moe for r in rs),
            "max_seq_len": max(seqs) if seqs else None,
            "max_devices": max(devs) if devs else None,
            "precisions": sorted({precision_class(r.precision) for r in rs if r.precision}),
            "max_batch": max(batches) if batches else None,
            "methods": sorted({r.method for r in rs if r.method}),
            "models": sorted({r.model for r in rs if r.model}) if rs and all(r.model for r in rs) else None}


def outside(regime: Regime, env: dict[str, Any], kind: str) -> list[str]:
    """Why ``regime`` lies outside the envelope ``env`` of ``kind`` rows (empty: inside)."""
    why: list[str] = []
    what = "training" if kind == "train" else "serving"
    if regime.moe and not env.get("moe"):
        why.append(f"MoE model (no MoE {what} row)")
    elif regime.fine_grained_moe and "fine_grained_moe" in env and not env["fine_grained_moe"]:
        why.append(f"fine-grained MoE (experts narrower than the hidden size; no such {what} row)")
    length = "sequence" if kind == "train" else "prompt"
    if regime.seq_len and env.get("max_seq_len") and regime.seq_len > env["max_seq_len"]:
        why.append(f"{length} {regime.seq_len:,} tokens > the longest row's {env['max_seq_len']:,}")
    if regime.n_devices and env.get("max_devices") and regime.n_devices > env["max_devices"]:
        why.append(f"{regime.n_devices:,} devices > the largest row's {env['max_devices']:,}")
    if regime.precision and env.get("precisions") and precision_class(regime.precision) not in env["precisions"]:
        why.append(f"{regime.precision} (rows in {', '.join(env['precisions'])} only)")
    if kind == "infer" and regime.batch and env.get("max_batch") and regime.batch > env["max_batch"]:
        why.append(f"{regime.batch:,} concurrent sequences > the most of any row ({env['max_batch']:,})")
    methods = env.get("methods")
    if kind == "train" and regime.method and methods and regime.method not in methods:
        why.append(f"{regime.method} fine-tuning (the rows are {', '.join(methods)} training only)")
    models = env.get("models")
    if regime.model and models and len(models) == 1 and regime.model not in models:
        why.append(f"model {regime.model} (the rows are all {models[0]})")
    return why


@dataclass(frozen=True)
class Band:
    """A band around a prediction, as fractions of it, with where it comes from. ``extrapolation``: why
    the prediction lies outside the regime of the rows behind the band (empty: inside)."""

    low_fraction: float
    high_fraction: float
    family: str
    kind: str
    n_rows: int
    widened_by: float
    source: str
    extrapolation: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _pct(values: list[float], q: float) -> float:
    from xpuplan.validate.core import percentile

    return percentile(values, q)


def family_stats(results: Iterable[RowResult], regimes: dict[str, Regime] | None = None) -> dict[str, dict[str, Any]]:
    """Per family: rows, trust grades, P10/P90 of measured/predicted - 1, median |error| (and, given the
    rows' regimes by id, their envelope)."""
    by_family: dict[str, list[RowResult]] = {}
    for r in results:
        if r.error is not None:
            by_family.setdefault(hardware_family(r.hardware), []).append(r)
    return {fam: _stats(rows, regimes) for fam, rows in sorted(by_family.items())}


def speed_ratio(metric: str, measured: float, predicted: float) -> float:
    """Measured speed over predicted speed, minus 1: measured / predicted - 1 for throughput-like metrics,
    predicted / measured - 1 for :data:`TIME_METRICS` (a run slower than predicted is negative either way)."""
    return predicted / measured - 1.0 if metric in TIME_METRICS else measured / predicted - 1.0


def _stats(rows: list[RowResult], regimes: dict[str, Regime] | None = None) -> dict[str, Any]:
    ratio = [speed_ratio(r.metric, r.measured, r.predicted) for r in rows
             if r.error is not None and r.predicted is not None]
    trust: dict[str, int] = {}
    for r in rows:
        trust[r.trust] = trust.get(r.trust, 0) + 1
    return {
        "n_rows": len(ratio),
        "trust": dict(sorted(trust.items())),
        "p10_measured_over_predicted_minus_1": _pct(ratio, LOW_PERCENTILE),
        "p90_measured_over_predicted_minus_1": _pct(ratio, HIGH_PERCENTILE),
        "median_abs_error": statistics.median(abs(r.error) for r in rows if r.error is not None),
        "hardware": sorted({r.hardware for r in rows}),
        **({"envelope": envelope(regimes[r.id] for r in rows if r.id in regimes)} if regimes is not None else {}),
    }


def band_table(results: Iterable[RowResult], *, files: list[str], baseline: str,
               regimes: dict[str, Regime] | None = None) -> dict[str, Any]:
    """The content of ``bands.json``: per kind, per family and pooled ("all") statistics; ``regimes``
    (row id -> :class:`Regime`, :func:`regime_of_row`) adds each group's envelope."""
    rows = list(results)
    out: dict[str, Any] = {
        "about": "Generated by scripts/update-validation-snapshot from the packaged public validation files "
                 "(built-in assumptions); read by xpuplan.validate.band.validation_band. Do not edit by hand.",
        "files": files, "baseline": baseline, "kinds": {},
    }
    for kind in KINDS:
        sub = [r for r in rows if r.kind == kind and r.error is not None]
        if sub:
            out["kinds"][kind] = {"all": _stats(sub, regimes), "families": family_stats(sub, regimes)}
    return out


@functools.cache
def _table() -> dict[str, Any]:
    text = resources.files("xpuplan.validate").joinpath("data", BANDS_FILE).read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _low_trust(stats: dict[str, Any]) -> bool:
    trust = stats["trust"]
    return sum(trust.get(g, 0) for g in ("C", "D")) * 2 > sum(trust.values())


def band_record(device: str | Device, kind: str = "train", regime: Regime | None = None) -> Band:
    """The band of ``device``'s family for ``kind`` predictions, with its provenance; ``regime``: where the
    prediction sits, widened by :data:`EXTRAPOLATION_WIDENING` outside the envelope of the rows behind the
    band."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    table = _table()
    fam = hardware_family(device)
    kinds = table["kinds"][kind]
    stats = kinds["families"].get(fam)
    where = f"validate/data/{BANDS_FILE} ({', '.join(table['files'])}; {table['baseline']})"
    if stats is None or stats["n_rows"] < MIN_ROWS:
        base, widen = kinds["all"], UNVALIDATED_WIDENING
        have = stats["n_rows"] if stats else 0
        source = (f"{fam}: {have} public {kind} row(s), fewer than {MIN_ROWS}: the error of all {base['n_rows']} "
                  f"{kind} rows (P10/P90 of measured/predicted) widened x{widen}; {where}")
    else:
        base, widen = stats, (LOW_TRUST_WIDENING if _low_trust(stats) else 1.0)
        source = (f"{fam}: P10/P90 of measured/predicted over {stats['n_rows']} public {kind} rows "
                  f"(trust {stats['trust']})" + (f", widened x{widen} (mostly trust C/D)" if widen > 1 else "")
                  + f"; {where}")
    why = outside(regime, base["envelope"], kind) if regime is not None and "envelope" in base else []
    p10, p90 = base["p10_measured_over_predicted_minus_1"], base["p90_measured_over_predicted_minus_1"]
    if why:
        widen *= EXTRAPOLATION_WIDENING
        pooled = kinds["all"]
        if base is not pooled:  # the family's own spread was measured elsewhere: at least all rows' spread
            p10 = min(p10, pooled["p10_measured_over_predicted_minus_1"])
            p90 = max(p90, pooled["p90_measured_over_predicted_minus_1"])
        source += (f"; outside the rows' regime ({'; '.join(why)}): the wider of the family's and all "
                   f"{pooled['n_rows']} {kind} rows' spread, widened x{EXTRAPOLATION_WIDENING:g}")
    low = max(MIN_BAND_FRACTION, -p10 * widen)
    high = max(MIN_BAND_FRACTION, p90 * widen)
    return Band(low_fraction=min(low, 0.95), high_fraction=high, family=fam, kind=kind,
                n_rows=stats["n_rows"] if stats else 0, widened_by=widen, source=source, extrapolation=tuple(why))


def validation_band(device: str | Device, kind: str = "train", regime: Regime | None = None) -> tuple[float, float]:
    """(low_fraction, high_fraction): the measured figure was in [p·(1 - low), p·(1 + high)] for
    80% of the public rows of ``device``'s family (widened where evidence is weak or the prediction's
    ``regime`` lies outside theirs; see the module doc). :func:`band_record` gives the same band with its
    provenance."""
    b = band_record(device, kind, regime)
    return b.low_fraction, b.high_fraction
