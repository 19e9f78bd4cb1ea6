"""Markdown per-row tables and summaries of the validation (for docs/validation.md).

    python benchmarks/infer_validation_report.py [FILE.csv ...]   # default: the packaged inference_public.csv
    python benchmarks/infer_validation_report.py --public-2       # the second public set (TPU, Gaudi, MI300X, Ascend)
    python benchmarks/infer_validation_report.py --write-doc      # rewrite every file's tables and the Summary
                                                                  # numbers in docs/validation.md (between markers)

The same predictions as ``xpuplan validate FILE``, under the built-in assumptions (no calibration
profile, no override file), so the numbers depend only on the repository. Inference rows print the
replica; training rows print the plan (and, for rows without a layout, the best plan's error, an upper bound).
"""

from __future__ import annotations

import io
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

from xpuplan.validate import public_file
from xpuplan.validate.core import RowResult, ValidationReport, error_stats, read_rows, validate_rows
from xpuplan.validate.rows import ValidationRow

DEFAULT_CSV = public_file("inference_public.csv")
PUBLIC_2 = ("training_public_2.csv", "inference_public_2.csv")


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _err(res: RowResult) -> str:
    return f"{res.error * 100:+.1f}%" if res.error is not None else "-"


def infer_table(report: ValidationReport, by_id: dict[str, ValidationRow]) -> None:
    print("| id | trust | model | hardware | tp | in/out | batch | metric | measured | predicted | error | replica / reason |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for res in report.rows:
        row = by_id[res.id]
        lens = f"{row.get('input_len') or '-'}/{row.get('output_len') or '-'}"
        what = res.details.get("replica", "").split("@", 1)[-1] if res.predicted is not None else (res.reason or "")
        print(f"| {res.id} | {res.trust} | {row.get('model') or str(row.get('params_b')) + 'B'} | {res.hardware} | {row.get('tp') or 1} "
              f"| {lens} | {row.get('batch') or '-'} | {res.metric} | {_fmt(res.measured)} | {_fmt(res.predicted)} "
              f"| {_err(res)} | {what} |")


def train_table(report: ValidationReport, by_id: dict[str, ValidationRow]) -> None:
    print("| id | trust | model | hardware | n | metric | measured | predicted | error | plan / reason |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for res in report.rows:
        row = by_id[res.id]
        if res.predicted is None:
            what = res.reason or ""
        else:
            what = res.details.get("plan", "")
            best = res.details.get("best_plan") or {}
            if best.get("error") is not None:
                what = f"conventional layout {what}; best plan (upper bound) {best['plan']}: {best['error'] * 100:+.1f}%"
        print(f"| {res.id} | {res.trust} | {row.get('model') or str(row.get('params_b')) + 'B'} | {res.hardware} "
              f"| {row.n_devices} | {res.metric} | {_fmt(res.measured)} | {_fmt(res.predicted)} | {_err(res)} | {what} |")


def summary(report: ValidationReport) -> None:
    print("| rows | n | coverage | median abs % | P90 abs % | mean signed % |")
    print("|---|---|---|---|---|---|")
    for name, grades in (("trust A/B", ("A", "B")), ("trust C", ("C",)), ("trust D", ("D",)), ("all", ("A", "B", "C", "D"))):
        sub = [r for r in report.rows if r.trust in grades]
        if not sub:
            continue
        s = error_stats(sub)
        cov = sum(r.predicted is not None for r in sub) / len(sub)
        print(f"| {name} | {s.n}/{len(sub)} | {cov:.0%} | {_fmt(s.median_abs_pct)} | {_fmt(s.p90_abs_pct)} "
              f"| {_fmt(s.mean_signed_pct)} |")


def main(path: str) -> None:
    rows = read_rows(path)
    by_id = {r.id: r for r in rows}
    for kind, table in (("infer", infer_table), ("train", train_table)):
        sub = [r for r in rows if r.kind == kind]
        if not sub:
            continue
        report = validate_rows(sub)
        print(f"<!-- {kind} rows of {path.rsplit('/', 1)[-1]} -->")
        table(report, by_id)
        print()
        summary(report)
        print()


DOC = Path(__file__).resolve().parents[1] / "docs" / "validation.md"
#: The Summary table of docs/validation.md: label -> (file, kind, trust grades, metric or None).
SUMMARY_ROWS = {
    "training, trust A/B, `tokens_per_s_per_device`": ("training_public.csv", "train", "AB", "tokens_per_s_per_device"),
    "training, all rows": ("training_public.csv", "train", "ABCD", None),
    "inference, trust A/B": ("inference_public.csv", "infer", "AB", None),
    "inference, all rows": ("inference_public.csv", "infer", "ABCD", None),
    "second set, training, all rows": ("training_public_2.csv", "train", "ABCD", None),
    "second set, inference, all rows": ("inference_public_2.csv", "infer", "ABCD", None),
}
ALL_FILES = ("training_public.csv", "inference_public.csv", *PUBLIC_2)


def _begin(name: str) -> str:
    return f"<!-- rows of {name}: begin (python benchmarks/infer_validation_report.py --write-doc) -->"


def _end(name: str) -> str:
    return f"<!-- rows of {name}: end -->"


def write_doc(doc: Path = DOC) -> list[str]:
    """Regenerate, in ``doc``, every public file's per-row tables (between its markers) and the numbers of the
    Summary table (labels and targets kept). Returns what was rewritten."""
    text = doc.read_text(encoding="utf-8")
    done = []
    for name in ALL_FILES:
        b, e = _begin(name), _end(name)
        if b not in text or e not in text:
            continue
        buf = io.StringIO()
        with redirect_stdout(buf):
            main(str(public_file(name)))
        text = text[: text.index(b) + len(b)] + "\n" + buf.getvalue() + text[text.index(e):]
        done.append(name)
    for label, (name, kind, grades, metric) in SUMMARY_ROWS.items():
        rows = [r for r in read_rows(public_file(name))
                if r.kind == kind and r.trust in grades and (metric is None or r.metric == metric)]
        st = error_stats(validate_rows(rows).rows)
        pattern = re.compile(rf"^\| {re.escape(label)} \| [^|]*\| [^|]*\| [^|]*\|(.*)$", re.M)
        share = f" ({st.n / len(rows):.0%})" if grades == "AB" else ""
        med = "-" if st.median_abs_pct is None else f"{st.median_abs_pct:.1f}%"
        p90 = "-" if st.p90_abs_pct is None else f"{st.p90_abs_pct:.1f}%"
        head = f"| {label} | {st.n} / {len(rows)}{share} | {med} | {p90} |"
        text, n = pattern.subn(lambda m, head=head: head + m.group(1), text)
        if n:
            done.append(f"summary: {label}")
    doc.write_text(text, encoding="utf-8")
    return done


if __name__ == "__main__":
    args = sys.argv[1:]
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        sys.exit(0)
    unknown = [a for a in args if a.startswith("-") and a not in ("--write-doc", "--public-2")]
    if unknown:
        print(f"error: unknown option {unknown[0]} (see --help)", file=sys.stderr)
        sys.exit(2)
    if args == ["--write-doc"]:
        for what in write_doc():
            print(f"rewrote {what}")
        sys.exit(0)
    if args == ["--public-2"]:
        args = [str(public_file(n)) for n in PUBLIC_2]
    for p in args or [str(DEFAULT_CSV)]:
        if not Path(p).is_file():
            print(f"error: {p}: file not found", file=sys.stderr)
            sys.exit(2)
        main(p)
