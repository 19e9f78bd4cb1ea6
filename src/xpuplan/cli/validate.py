"""``xpuplan validate``: predictions vs published (or local) measurements."""

from __future__ import annotations

from typing import Annotated

import typer

from xpuplan.cli.common import cli_command, console, print_json, table
from xpuplan.errors import UserInputError
from xpuplan.validate import ValidationReport, validate_file


def render_report(report: ValidationReport, title: str) -> None:
    rows = []
    for r in report.rows:
        rows.append([r.id, r.metric, r.hardware, r.trust, r.measured, r.predicted,
                     f"{r.error * 100:+.1f}%" if r.error is not None else (r.reason or "-")])
    console.print(table(title, ["id", "metric", "hardware", "trust", "measured", "predicted", "error / reason"], rows))
    s = report.summary()

    def stat_rows(group: dict) -> list[list[object]]:
        return [[k, v["n"], v["median_abs_pct"], v["p90_abs_pct"], v["mean_signed_pct"]] for k, v in group.items()]

    cols = ["group", "n", "median |err| %", "P90 |err| %", "mean signed %"]
    o = s["overall"]
    console.print(table("summary", cols, [["all", o["n"], o["median_abs_pct"], o["p90_abs_pct"], o["mean_signed_pct"]]],
                        caption=f"{s['predicted']}/{s['rows']} rows predicted ({s['coverage']:.0%})"))
    console.print(table("by trust", cols, stat_rows(s["by_trust"])))
    console.print(table("by metric", cols, stat_rows(s["by_metric"])))
    console.print(table("by hardware", cols, stat_rows(s["by_hardware"])))


@cli_command
def validate(
    files: Annotated[list[str] | None, typer.Argument(metavar="FILE.csv...", help="validation CSVs (shared/validation format)")] = None,
    kind: Annotated[str | None, typer.Option(help="only rows of this kind: train or infer")] = None,
    trust: Annotated[str | None, typer.Option(help="only these trust grades, e.g. A,B")] = None,
    local: Annotated[str | None, typer.Option("--local", metavar="RUN",
                                              help="a stored run instead of CSVs: a `bench run` (its model steps) or an "
                                                   "imported CSV / vLLM result; an id or 'latest'")] = None,
    db: Annotated[str | None, typer.Option("--db", help="store for --local (default: $XPUPLAN_DB_URL or the data dir)")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Compare predictions with measurements row by row; median and P90 errors by group."""
    if local is not None and files:
        raise UserInputError("give CSV files or --local RUN, not both", field="local")
    if local is None and not files:
        raise UserInputError("give one or more CSV files (or --local RUN)", field="FILE")
    if kind not in (None, "train", "infer"):
        raise UserInputError("expected train or infer", field="kind")
    from xpuplan.validate.core import read_rows, validate_rows

    if local is not None:
        from xpuplan.bench.local_validation import validate_run
        from xpuplan.store.engine import open_store

        run, report = validate_run(open_store(db), local)
        title = f"validation: run {run.id} ({run.kind}, {run.device_name or run.device_id or run.source})"
        report = ValidationReport([r for r in report.rows if (not kind or r.kind == kind)
                                   and (not trust or r.trust in {g.strip().upper() for g in trust.split(",")})])
    else:
        assert files is not None
        rows = [r for f in files for r in read_rows(f)]
        if kind:
            rows = [r for r in rows if r.kind == kind]
        if trust:
            grades = {g.strip().upper() for g in trust.split(",")}
            rows = [r for r in rows if r.trust in grades]
        report = validate_rows(rows)
        title = f"validation: {', '.join(files)}"
    if json_:
        print_json(report.to_dict())
        return
    render_report(report, title)


_ = validate_file  # re-exported for API users
