"""``xpuplan audit-claims``: re-run the seed guides' machine-checkable claims (thin; see jobs.claims)."""

from __future__ import annotations

from typing import Annotated

import typer

from xpuplan.cli.common import cli_command, console, print_json


def register(app: typer.Typer) -> None:
    app.command("audit-claims")(audit_claims_cmd)


@cli_command
def audit_claims_cmd(
    checks: Annotated[str | None, typer.Option(help="claims file (default: docs/guide-claims-checks.yaml)")] = None,
    doc: Annotated[str | None, typer.Option(help="doc whose generated table to check (default: docs/guide-claims.md)")] = None,
    write: Annotated[bool, typer.Option("--write", help="regenerate the table in the doc")] = False,
    json_: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Re-run every machine-checkable guide claim against the catalog and the models; with --write,
    regenerate the table in docs/guide-claims.md. Exit 1 when a claim fails or the table is stale."""
    from xpuplan.jobs.claims import audit_claims

    res = audit_claims(checks, doc, write)
    if json_:
        print_json(res.to_dict())
    else:
        typer.echo(res.table, nl=False)
        console.print(f"{len(res.checks)} claims re-run, {len(res.failed)} failing"
                      + (f": {', '.join(res.failed)}" if res.failed else "")
                      + f"; {len(res.skipped)} left out (see --json 'skipped')", highlight=False)
        if res.doc_file:
            state = "rewritten" if res.written else ("current" if res.doc_current else
                                                      "STALE (run `xpuplan audit-claims --write`)")
            console.print(f"table in {res.doc_file}: {state}", highlight=False)
    if res.failed or res.doc_current is False:
        raise typer.Exit(1 if res.failed or not write else 0)

