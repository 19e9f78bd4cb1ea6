"""Generalisation check: the planner on published runs it was never fitted to (``benchmarks/data/heldout_*.csv``).

    python benchmarks/heldout.py                 # held-out files + whole tables + public files, per-row tables and summaries
    python benchmarks/heldout.py --no-public     # held-out files only
    python benchmarks/heldout.py --json OUT.json # also write every figure as JSON
    python benchmarks/heldout.py --quiet         # summaries only (no per-row tables)

Rows whose layout the source leaves uncertain may carry another reading in an ``alt_layout`` column (``tp=1;ep=8``):
they are scored at the recorded layout, and the alternative reading is reported beside it (never in the figures);
those with a recorded tp > 1 are also read with the experts over the tp ranks (``etp`` 1, expert parallelism inside
the TP group), a third reading reported the same way.

Predictions come from the public command line, ``xpuplan validate FILE --json`` (run once per file, under the
built-in assumptions: no calibration profile, no override file), so this script depends on nothing inside the
validator. Errors are signed, ``predicted / measured - 1``; a file's or a family's figures are the median and the
P90 (linear interpolation) of the absolute errors in percent, over the rows the planner could predict. Rows it
could not predict are counted with their reason. The *generalisation gap* is held-out minus public, per kind
(training, serving) and per hardware family.

The held-out rows are for judging only: never fit a constant, a family parameter or a default to them
(``benchmarks/data/README.md``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / "data"
HELDOUT_FILES = ("heldout_training.csv", "heldout_inference.csv")
#: Whole published tables (every cell of one vendor table, ``heldout_table_*.csv``), held out like the files above but
#: reported on their own, per model and layout: one table's hundreds of cells of one engine would otherwise outweigh
#: every other source in the held-out figures and the generalisation gap.
TABLE_FILES = ("heldout_table_trtllm_v1.csv", "heldout_table_megatron_bridge.csv")


@dataclass(frozen=True)
class RowError:
    """One row as the validator answered it."""

    id: str
    kind: str
    hardware: str
    family: str
    metric: str
    trust: str
    measured: float
    predicted: float | None
    reason: str | None
    group: str = ""  # model@hardware:layout of the prediction (its replica or plan), where the report gives it

    @property
    def error(self) -> float | None:
        """Signed relative error, predicted / measured - 1 (None when not predicted)."""
        return None if self.predicted is None else self.predicted / self.measured - 1.0


@dataclass
class FileResult:
    """The validator's answer for one CSV file."""

    path: Path
    label: str
    rows: list[RowError] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100] (the validator's definition)."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def stats(rows: list[RowError]) -> dict[str, Any]:
    """n, predicted, median and P90 |error| in percent, mean signed error in percent."""
    errs = [r.error for r in rows if r.error is not None]
    out: dict[str, Any] = {"rows": len(rows), "predicted": len(errs)}
    if errs:
        abs_pct = [abs(e) * 100 for e in errs]
        out.update(median_abs_pct=statistics.median(abs_pct), p90_abs_pct=percentile(abs_pct, 90),
                   mean_signed_pct=statistics.mean(errs) * 100)
    else:
        out.update(median_abs_pct=None, p90_abs_pct=None, mean_signed_pct=None)
    return out


def _family_lookup(report: dict[str, Any]) -> dict[str, str]:
    """hardware id -> family name, from the report's ``families`` section when it has one."""
    lookup: dict[str, str] = {}
    fams = report.get("families") or {}
    for per_kind in fams.values() if isinstance(fams, dict) else ():
        if not isinstance(per_kind, dict):
            continue
        for fam, info in per_kind.items():
            for hw in (info or {}).get("hardware", []) if isinstance(info, dict) else []:
                lookup[hw] = fam
    return lookup


def _family(hardware: str, lookup: dict[str, str]) -> str:
    if hardware in lookup:
        return lookup[hardware]
    try:  # the package's own grouping (public API), when the report does not carry it
        from xpuplan.validate import hardware_family

        return str(hardware_family(hardware))
    except Exception:  # noqa: BLE001 - any failure: fall back to the vendor prefix
        return hardware.split("-", 1)[0]


def run_validate(path: Path, label: str) -> FileResult:
    """``xpuplan validate PATH --json`` in a subprocess (the same interpreter as this script)."""
    cmd = [sys.executable, "-m", "xpuplan", "validate", str(path), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr.strip() or proc.stdout.strip()}")
    report = json.loads(proc.stdout)
    lookup = _family_lookup(report)
    result = FileResult(path=path, label=label)
    columns = _row_columns(path)
    for r in report["rows"]:
        hw = r.get("hardware") or ""
        col = columns.get(r["id"], {})
        group = _group((r.get("details") or {}).get("replica")) or (
            f"{col.get('model') or '(architecture)'}@{hw}:{col.get('precision', '')}" if col else "")
        result.rows.append(RowError(
            id=r["id"], kind=r.get("kind") or "", hardware=hw, family=r.get("family") or _family(hw, lookup),
            metric=r.get("metric") or "", trust=r.get("trust") or "", measured=float(r["measured"]),
            predicted=None if r.get("predicted") is None else float(r["predicted"]), reason=r.get("reason"),
            group=group))
    return result


def _row_columns(path: Path) -> dict[str, dict[str, str]]:
    """id -> the row's model and precision columns (the validator's report does not repeat them)."""
    import csv

    with path.open(encoding="utf-8-sig", newline="") as fh:
        return {row["id"]: {"model": row.get("model", ""), "precision": row.get("precision", "")}
                for row in csv.DictReader(fh) if row.get("id")}


def _group(replica: Any) -> str:
    """``model@hardware:layout`` of a serving replica key (``qwen3-8b@nvidia-h100-sxm-80gb:tp1pp1ep1:bf16/...``)."""
    if not isinstance(replica, str) or "@" not in replica:
        return ""
    return ":".join(replica.split(":")[:2])


def reason_key(reason: str) -> str:
    """A reason with its row-specific numbers and quoted values elided, so like reasons count together."""
    text = re.sub(r"'[^']*'", "'…'", reason)
    text = re.sub(r"\d+(\.\d+)?", "#", text)
    return text[:110]


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}"


def print_rows(res: FileResult) -> None:
    print(f"\n## {res.label}: {res.path}\n")
    print("| id | hardware | family | metric | trust | measured | predicted | error | reason |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in res.rows:
        err = "-" if r.error is None else f"{r.error * 100:+.1f}%"
        print(f"| {r.id} | {r.hardware} | {r.family} | {r.metric} | {r.trust} | {_num(r.measured)} | {_num(r.predicted)} "
              f"| {err} | {r.reason or ''} |")


def print_stats_table(title: str, groups: dict[str, list[RowError]]) -> None:
    print(f"\n### {title}\n")
    print("| group | rows | predicted | median abs | P90 abs | mean signed |")
    print("|---|---|---|---|---|---|")
    for name, rows in groups.items():
        s = stats(rows)
        print(f"| {name} | {s['rows']} | {s['predicted']} | {_pct(s['median_abs_pct'])} | {_pct(s['p90_abs_pct'])} "
              f"| {_pct(s['mean_signed_pct'])} |")


def by_family(rows: list[RowError]) -> dict[str, list[RowError]]:
    groups: dict[str, list[RowError]] = defaultdict(list)
    for r in rows:
        groups[r.family].append(r)
    return dict(sorted(groups.items()))


def gap_table(kind: str, held: list[RowError], public: list[RowError]) -> list[dict[str, Any]]:
    """Per family and overall: held-out vs public median/P90 and their difference (percentage points)."""
    out = []
    hf, pf = by_family(held), by_family(public)
    for fam in ["all", *sorted(set(hf) | set(pf))]:
        h = stats(held if fam == "all" else hf.get(fam, []))
        p = stats(public if fam == "all" else pf.get(fam, []))
        gap_med = (None if h["median_abs_pct"] is None or p["median_abs_pct"] is None
                   else h["median_abs_pct"] - p["median_abs_pct"])
        gap_p90 = None if h["p90_abs_pct"] is None or p["p90_abs_pct"] is None else h["p90_abs_pct"] - p["p90_abs_pct"]
        out.append({"kind": kind, "family": fam, "heldout": h, "public": p, "gap_median_pp": gap_med, "gap_p90_pp": gap_p90})
    return out


def print_gap(rows: list[dict[str, Any]]) -> None:
    print("| kind | family | held-out n | held-out median | held-out P90 | public n | public median | public P90 "
          "| gap median (pp) | gap P90 (pp) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for g in rows:
        h, p = g["heldout"], g["public"]
        gm = "-" if g["gap_median_pp"] is None else f"{g['gap_median_pp']:+.1f}"
        gp = "-" if g["gap_p90_pp"] is None else f"{g['gap_p90_pp']:+.1f}"
        print(f"| {g['kind']} | {g['family']} | {h['predicted']} | {_pct(h['median_abs_pct'])} | {_pct(h['p90_abs_pct'])} "
              f"| {p['predicted']} | {_pct(p['median_abs_pct'])} | {_pct(p['p90_abs_pct'])} | {gm} | {gp} |")


def band_coverage(path: Path, rows: list[RowError]) -> dict[str, Any]:
    """How often the measured figure lies inside the uncertainty band the planner would print for the row
    (``xpuplan.validate.band``; nominally 80%): with the family band alone, and with the band widened where
    the row lies outside the public rows' regime (``Regime``: MoE, longer sequence or prompt, more devices,
    another precision). The band is on speed (``validate.band.speed_ratio``: measured / predicted - 1, inverted for
    times) in [-low, +high], as results apply it."""
    from xpuplan.validate.band import band_record, regime_of_row, speed_ratio
    from xpuplan.validate.rows import read_rows

    by_id = {v.id: v for v in read_rows(path)}
    n = plain = with_regime = outside = outside_inside = 0
    for r in rows:
        if r.predicted is None or r.id not in by_id:
            continue
        ratio = speed_ratio(r.metric, r.measured, r.predicted)
        b0 = band_record(r.hardware, r.kind or by_id[r.id].kind)
        b1 = band_record(r.hardware, r.kind or by_id[r.id].kind, regime_of_row(by_id[r.id]))
        n += 1
        plain += -b0.low_fraction <= ratio <= b0.high_fraction
        inside1 = -b1.low_fraction <= ratio <= b1.high_fraction
        with_regime += inside1
        if b1.extrapolation:
            outside += 1
            outside_inside += inside1
    return {"rows": n, "within_family_band": plain, "within_band_with_regime": with_regime,
            "outside_public_regime": outside, "outside_regime_within_band": outside_inside}


def print_coverage(cov: dict[str, dict[str, Any]]) -> None:
    print("\n### Uncertainty band coverage (nominal 80%)\n")
    print("| file | rows | within family band | within band, regime-widened | rows outside the public regime "
          "| of those, within band |")
    print("|---|---|---|---|---|---|")
    for label, c in cov.items():
        n = max(c["rows"], 1)
        o = max(c["outside_public_regime"], 1)
        print(f"| {label} | {c['rows']} | {c['within_family_band']} ({100 * c['within_family_band'] / n:.0f}%) "
              f"| {c['within_band_with_regime']} ({100 * c['within_band_with_regime'] / n:.0f}%) "
              f"| {c['outside_public_regime']} | {c['outside_regime_within_band']} "
              f"({100 * c['outside_regime_within_band'] / o:.0f}%) |")


#: Optional column of a held-out file: another reading of a row's layout the source leaves uncertain
#: (``key=value`` pairs separated by ``;``, e.g. ``tp=1;ep=8``), reported beside the recorded one.
ALT_LAYOUT_COLUMN = "alt_layout"


def _uncertain_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """(columns, rows) of ``path`` whose layout the source leaves uncertain: those carrying an ``alt_layout``."""
    import csv

    with path.open(encoding="utf-8-sig", newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), [r for r in reader if (r.get(ALT_LAYOUT_COLUMN) or "").strip()]


def _validate_reading(rows: list[dict[str, str]], fields: list[str], out: Path, label: str) -> FileResult:
    """``rows`` written to ``out`` and scored by the same ``xpuplan validate`` as the recorded reading."""
    import csv

    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    return run_validate(out, label)


def alternative_readings(path: Path, tmp_dir: Path) -> FileResult | None:
    """The rows of ``path`` that carry an ``alt_layout``, predicted with that layout instead of the recorded one
    (their other columns unchanged), through the same ``xpuplan validate``; None when no row carries one."""
    fields, rows = _uncertain_rows(path)
    if not rows:
        return None
    for r in rows:
        for pair in r[ALT_LAYOUT_COLUMN].split(";"):
            key, _, value = pair.partition("=")
            if key.strip() not in fields:
                raise SystemExit(f"{path}: row {r['id']}: field '{ALT_LAYOUT_COLUMN}': {key.strip()!r} is not a column")
            r[key.strip()] = value.strip()
    return _validate_reading(rows, fields, tmp_dir / f"alt_{path.name}", f"alternative layouts of {path.name}")


def ep_in_tp_readings(path: Path, tmp_dir: Path) -> FileResult | None:
    """A third reading of the rows that carry an ``alt_layout`` and a recorded tp > 1: their recorded layout with the
    routed experts over the tp ranks (``etp`` 1, expert parallelism inside the TP group: what TensorRT-LLM's
    ``--ep`` without attention-DP and vLLM's ``--enable-expert-parallel`` run); None when no row qualifies."""
    fields, rows = _uncertain_rows(path)
    rows = [r for r in rows if int(r.get("tp") or 1) > 1]
    if not rows:
        return None
    for r in rows:
        r["etp"] = "1"
    return _validate_reading(rows, fields + ([] if "etp" in fields else ["etp"]), tmp_dir / f"etp_{path.name}",
                             f"EP inside the TP group of {path.name}")


def layout_sensitivity(recorded: FileResult, alternative: FileResult) -> dict[str, dict[str, Any]]:
    """Per group of the recorded reading: the recorded and the alternative reading's figures, over the same rows."""
    alt = {r.id: r for r in alternative.rows}
    groups: dict[str, list[tuple[RowError, RowError]]] = defaultdict(list)
    for r in recorded.rows:
        if r.id in alt:
            groups[r.group or "(no replica)"].append((r, alt[r.id]))
    everything = [pair for pairs in groups.values() for pair in pairs]
    out = {}
    for name, pairs in [("all", everything), *sorted(groups.items())]:
        out[name] = {"recorded": stats([a for a, _ in pairs]), "alternative": stats([b for _, b in pairs]),
                     "alternative_layout": sorted({b.group.split(":")[-1] for _, b in pairs if b.group})}
    return out


def print_sensitivity(label: str, table: dict[str, dict[str, Any]]) -> None:
    print(f"\n### {label}: rows whose layout the source leaves uncertain, both readings\n")
    print("| group (recorded reading) | rows | recorded median / signed | alternative layout | alternative median / signed |")
    print("|---|---|---|---|---|")
    for name, t in table.items():
        a, b = t["recorded"], t["alternative"]
        print(f"| {name} | {a['predicted']} | {_pct(a['median_abs_pct'])} / {_pct(a['mean_signed_pct'])} "
              f"| {', '.join(t['alternative_layout']) or '-'} | {_pct(b['median_abs_pct'])} / {_pct(b['mean_signed_pct'])} |")


def public_paths() -> list[Path]:
    from xpuplan.validate import public_files  # public API: the files shipped with the package

    return list(public_files())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=DATA_DIR, help="folder holding heldout_*.csv")
    ap.add_argument("--no-public", action="store_true", help="skip the public files (no generalisation gap)")
    ap.add_argument("--quiet", action="store_true", help="summaries only, no per-row tables")
    ap.add_argument("--json", type=Path, help="write every figure to this JSON file")
    args = ap.parse_args(argv)
    missing = [name for name in HELDOUT_FILES + TABLE_FILES if not (args.data_dir / name).is_file()]
    if missing:
        print(f"field '--data-dir': {args.data_dir} holds no {', '.join(missing)}", file=sys.stderr)
        return 2

    held = [run_validate(args.data_dir / name, "held-out " + name.split("_")[1].split(".")[0]) for name in HELDOUT_FILES]
    public = [] if args.no_public else [run_validate(p, "public " + p.stem) for p in public_paths()]

    print("# Held-out validation (never fitted to)\n")
    print("Error = predicted / measured - 1; median and P90 of |error| over predicted rows.")
    if not args.quiet:
        for res in held:
            print_rows(res)

    print_stats_table("Per file", {f"{r.label} ({r.path.name})": r.rows for r in held + public})
    for res in held:
        print_stats_table(f"{res.label}: per hardware family", by_family(res.rows))
        print_stats_table(f"{res.label}: per trust grade", {t: [r for r in res.rows if r.trust == t]
                                                             for t in sorted({r.trust for r in res.rows})})
        reasons = Counter(reason_key(r.reason) for r in res.rows if r.predicted is None and r.reason)
        if reasons:
            print(f"\n{res.label}: rows not predicted, by reason\n")
            for why, n in reasons.most_common():
                print(f"- {n} x {why}")

    tables = [run_validate(args.data_dir / name, "held-out table " + name.split("_", 2)[2].split(".")[0])
              for name in TABLE_FILES]
    if tables:
        print("\n## Whole published tables (held out; reported on their own)\n")
        print_stats_table("Per table", {f"{r.label} ({r.path.name})": r.rows for r in tables})
    for res in tables:
        print_stats_table(f"{res.label}: per hardware family", by_family(res.rows))
        groups: dict[str, list[RowError]] = defaultdict(list)
        for r in res.rows:
            groups[r.group or "(no replica)"].append(r)
        print_stats_table(f"{res.label}: per model, hardware and layout (serving) or precision (training)",
                          dict(sorted(groups.items())))

    sensitivity: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for res in tables:
            alt = alternative_readings(res.path, Path(tmp))
            if alt is not None:
                sensitivity[res.label] = layout_sensitivity(res, alt)
                print_sensitivity(res.label, sensitivity[res.label])
            third = ep_in_tp_readings(res.path, Path(tmp))
            if third is not None:
                label = f"{res.label}, EP inside the TP group (etp 1)"
                sensitivity[label] = layout_sensitivity(res, third)
                print_sensitivity(label, sensitivity[label])

    coverage = {f"{r.label} ({r.path.name})": band_coverage(r.path, r.rows) for r in held + tables + public}
    print_coverage(coverage)

    gaps: list[dict[str, Any]] = []
    if public:
        print("\n### Generalisation gap (held-out minus public, percentage points)\n")
        for kind, label in (("train", "training"), ("infer", "serving")):
            h_rows = [r for res in held for r in res.rows if r.kind == kind]
            p_rows = [r for res in public for r in res.rows if r.kind == kind]
            gaps += gap_table(label, h_rows, p_rows)
        print_gap(gaps)

    if args.json:
        payload = {
            "files": [{"path": str(r.path), "label": r.label, "summary": stats(r.rows),
                       "by_family": {k: stats(v) for k, v in by_family(r.rows).items()},
                       "not_predicted": dict(Counter(reason_key(x.reason) for x in r.rows if x.predicted is None and x.reason)),
                       "rows": [{"id": x.id, "kind": x.kind, "hardware": x.hardware, "family": x.family, "metric": x.metric,
                                 "trust": x.trust, "measured": x.measured, "predicted": x.predicted, "error": x.error,
                                 "reason": x.reason} for x in r.rows]}
                      for r in held + tables + public],
            "gap": gaps,
            "band_coverage": coverage,
            "layout_sensitivity": sensitivity,
        }
        args.json.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
