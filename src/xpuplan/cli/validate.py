"""``xpuplan validate``: predictions vs published (or local) measurements. Parses, calls
:func:`xpuplan.jobs.validate.validate`, renders: the error on every row, then the summaries."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from xpuplan.cli.common import cli_command, console, print_json, table

_STAT_COLUMNS = ["group", "n", "median |err| %", "P90 |err| %", "mean signed %"]


def _error_or_reason(r: dict[str, Any]) -> str:
    if r["error"] is not None:
        text = f"{r['error'] * 100:+.1f}%"
        details = r.get("details") or {}
        best = details.get("best_plan") or {}
        conv = details.get("conventional") or {}
        if best.get("error") is not None:  # training row without a layout: conventional layout, best plan too
            text += f" (conventional layout; best plan, an upper bound: {best['error'] * 100:+.1f}%)"
        elif conv.get("error") is not None:  # serving row without tp: the conventional layout too
            text += f" ({conv['layout'].split(' ')[0]}: {conv['error'] * 100:+.1f}%)"
        return text
    return r["reason"] or "-"


def render_rows(rows: list[dict[str, Any]], title: str) -> None:
    body = [[r["id"], r["metric"], r["hardware"], r["trust"], r["measured"], r["predicted"], _error_or_reason(r)]
            for r in rows]
    console.print(table(title, ["id", "metric", "hardware", "trust", "measured", "predicted", "error / reason"], body))


def render_summary(s: dict[str, Any]) -> None:
    def stat_rows(group: dict[str, Any]) -> list[list[object]]:
        return [[k, v["n"], v["median_abs_pct"], v["p90_abs_pct"], v["mean_signed_pct"]] for k, v in group.items()]

    o = s["overall"]
    console.print(table("summary", _STAT_COLUMNS,
                        [["all", o["n"], o["median_abs_pct"], o["p90_abs_pct"], o["mean_signed_pct"]]],
                        caption=f"{s['predicted']}/{s['rows']} rows predicted ({s['coverage']:.0%})"))
    console.print(table("by trust", _STAT_COLUMNS, stat_rows(s["by_trust"])))
    console.print(table("by metric", _STAT_COLUMNS, stat_rows(s["by_metric"])))
    console.print(table("by hardware", _STAT_COLUMNS, stat_rows(s["by_hardware"])))
    console.print(table("by hardware family", _STAT_COLUMNS, stat_rows(s["by_family"])))


@cli_command
def validate(
    files: Annotated[list[str] | None, typer.Argument(metavar="FILE.csv...",
                                                      help="validation CSVs (format: validate/data/README.md); "
                                                           "none: the public files shipped with xpuplan")] = None,
    public: Annotated[bool, typer.Option("--public", help="the public validation files shipped with xpuplan "
                                                          "(the default when no file is given)")] = False,
    kind: Annotated[str | None, typer.Option(help="only rows of this kind: train or infer")] = None,
    trust: Annotated[str | None, typer.Option(help="only these trust grades, e.g. A,B")] = None,
    local: Annotated[str | None, typer.Option("--local", metavar="RUN",
                                              help="a stored run instead of CSVs: a `bench run` (its model steps) or an "
                                                   "import with validation rows (CSV, vLLM, SGLang, trtllm-bench, "
                                                   "MLPerf Inference, Megatron-LM, torchtitan); an id or 'latest'")] = None,
    db: Annotated[str | None, typer.Option("--db", help="store for --local (default: $XPUPLAN_DB_URL or the data dir)")] = None,
    json_: Annotated[bool, typer.Option("--json", help="machine-readable result")] = False,
) -> None:
    """Compare predictions with measurements row by row; median and P90 errors by group."""
    from xpuplan.jobs.requests import parse_request
    from xpuplan.jobs.validate import ValidateRequest
    from xpuplan.jobs.validate import validate as run_validation

    req = parse_request(ValidateRequest, {"files": files or [], "public": public, "kind": kind, "trust": trust,
                                          "local": local, "db": db})
    result = run_validation(req)
    if json_:
        print_json(result.to_dict())
        return
    render_rows(result.rows, result.title)
    render_summary(result.summary)
