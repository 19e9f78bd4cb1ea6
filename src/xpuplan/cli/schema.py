"""``xpuplan schema [NAME]``: the JSON schema of each job result (what ``--json`` prints)."""

from __future__ import annotations

from typing import Annotated

import typer

from xpuplan.cli.common import cli_command, console, print_json, table


@cli_command
def schema_cmd(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="result name, e.g. train.estimate; none: list them")] = None,
    json_: Annotated[bool, typer.Option("--json", help="the list of results as JSON")] = False,
) -> None:
    """Print the JSON schema of a result (``--json`` output of a command), or list the results."""
    from xpuplan.jobs.results import SCHEMA_VERSION, all_results, result_schema

    results = all_results()
    if name is None:
        if json_:
            print_json({"schema_version": SCHEMA_VERSION,
                        "results": {k: _first_line(v.__doc__) for k, v in results.items()}})
            return
        t = table(f"results (schema_version {SCHEMA_VERSION})", ["name", "description"],
                  [[k, _first_line(v.__doc__)] for k, v in sorted(results.items())],
                  caption="`xpuplan schema NAME` prints one result's JSON schema")
        t.columns[1].justify = "left"
        console.print(t)
        return
    print_json(result_schema(name))


def _first_line(doc: str | None) -> str:
    lines = (doc or "").strip().splitlines()
    return lines[0] if lines else ""


def register(app: typer.Typer) -> None:
    app.command("schema")(schema_cmd)
