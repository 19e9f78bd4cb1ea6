"""Fit the serving model's few free parameters against the published inference rows.

Sweeps each engine-family step overhead (host-side time per engine iteration) over a grid and
prints the mean, median and P90 absolute error over the trust A/B rows of that engine family; the
value with the least mean absolute error is chosen (one criterion balancing the median and the
tail). Each grid point is an explicit ``Assumptions`` override handed to the predictor (nothing is
patched):

    python benchmarks/infer_fit.py [../shared/validation/inference_public.csv] [--write [engines.yaml]]

With ``--write`` the chosen values are written into the engines data file (default: the package's
``src/xpuplan/catalog/data/engines.yaml``): a family whose step overhead is a shared overhead of
kind ``fitted`` updates that shared value (every engine using it moves with it); a family with its
own number updates that number. Shared overheads of kind ``assumption`` are reported but never
written. Only the value on its line changes, so comments and notes stay; record the printed grid
in docs/validation.md.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

from xpuplan.catalog.assumptions import DATA_DIR, Assumptions, default_assumptions
from xpuplan.validate import public_file
from xpuplan.validate.core import ValidationRow, percentile, predict_row, read_rows

DEFAULT_CSV = public_file("inference_public.csv")  # the copy shipped in the package
ENGINES_FILE = DATA_DIR / "engines.yaml"
GRID_MS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0)


def with_step_overhead(base: Assumptions, family: str, overhead_ms: float) -> Assumptions:
    """``base`` with engine ``family``'s step overhead set to ``overhead_ms``."""
    return base.with_overrides({"engines": {family: {"step_overhead_ms": overhead_ms}}}, source="infer_fit grid")


def errors_for(rows: list[ValidationRow], family: str, overhead_ms: float, base: Assumptions) -> list[float]:
    a = with_step_overhead(base, family, overhead_ms)
    out = []
    for row in rows:
        if base.engine(row.get("engine")).id != family:
            continue
        pred = predict_row(row, a)
        if pred.value is not None:
            out.append(abs(pred.value / row.value - 1.0) * 100)
    return out


def fit(path: str, base: Assumptions) -> dict[str, float]:
    """Best step overhead (ms) per engine family with trust A/B rows; prints the grid."""
    rows = [r for r in read_rows(path) if r.kind == "infer" and r.trust in ("A", "B")]
    families = sorted({base.engine(r.get("engine")).id for r in rows})
    chosen: dict[str, float] = {}
    for family in families:
        print(f"engine family {family}: step overhead sweep over its trust A/B rows")
        best = None
        for ms in GRID_MS:
            errs = errors_for(rows, family, ms, base)
            if not errs:
                continue
            mean, med, p90 = statistics.mean(errs), statistics.median(errs), percentile(errs, 90)
            print(f"  {ms:4.1f} ms  n={len(errs):3d}  mean {mean:5.1f}%  median {med:5.1f}%  P90 {p90:5.1f}%")
            if best is None or mean < best[1]:
                best = (ms, mean, med, p90)
        if best is None:
            print("  (no predictable rows)")
            continue
        print(f"  -> least mean |error|: {best[0]} ms (mean {best[1]:.1f}%, median {best[2]:.1f}%, P90 {best[3]:.1f}%)")
        chosen[family] = best[0]
    return chosen


def _replace_in_block(text: str, header: str, key: str, value_ms: float) -> str:
    """Set ``key: <number>`` inside the YAML block that starts with the line ``header``."""
    start = text.index(header)
    indent = len(header.strip("\n")) - len(header.strip("\n").lstrip(" ")) + 2  # the entry's fields
    end = len(text)
    for m in re.finditer(r"^( *)[^ \n]", text[start + len(header):], re.M):
        if len(m.group(1)) < indent:
            end = start + len(header) + m.start()
            break
    block = text[start:end]
    new, n = re.subn(rf"^(\s*{re.escape(key)}:\s*)[^\n#]*", rf"\g<1>{value_ms:g}", block, count=1, flags=re.M)
    if n != 1:
        raise ValueError(f"no {key!r} under {header.strip()!r}")
    return text[:start] + new + text[end:]


def write_engines(path: Path, chosen: dict[str, float], base: Assumptions) -> list[str]:
    """Write the chosen values into the engines file; returns what changed."""
    text = path.read_text(encoding="utf-8")
    spec = base.engine_specs
    changes = []
    for family, ms in chosen.items():
        ref = spec.engines[family].step_overhead_ms
        if isinstance(ref, str):
            shared = spec.shared_overheads[ref]
            if shared.kind != "fitted":
                print(f"not written: {family} uses shared overhead {ref!r} of kind {shared.kind!r}")
                continue
            if shared.value_ms == ms:
                continue
            text = _replace_in_block(text, f"\n  {ref}:\n", "value_ms", ms)
            changes.append(f"shared_overheads.{ref}.value_ms: {shared.value_ms} -> {ms}")
        else:
            if ref == ms:
                continue
            text = _replace_in_block(text, f"\n  {family}:\n", "step_overhead_ms", ms)
            changes.append(f"engines.{family}.step_overhead_ms: {ref} -> {ms}")
    if changes:
        path.write_text(text, encoding="utf-8")
    return changes


def main(argv: list[str]) -> None:
    args = [a for a in argv if a != "--write"]
    write = "--write" in argv
    csv = args[0] if args else str(DEFAULT_CSV)
    target = Path(args[1]) if len(args) > 1 else ENGINES_FILE
    base = default_assumptions()
    chosen = fit(csv, base)
    if write:
        changes = write_engines(target, chosen, base)
        print(f"{target}: " + ("; ".join(changes) if changes else "already at the fitted values"))


if __name__ == "__main__":
    main(sys.argv[1:])
