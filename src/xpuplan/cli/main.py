"""The ``xpuplan`` command: a thin layer over the public Python API."""

from __future__ import annotations

import typer

from xpuplan import __version__
from xpuplan.cli import analyze, bench, cost, hw, infer, model, overview, recommend, schema, train, validate

app = typer.Typer(
    name="xpuplan",
    help="Which accelerators, how many, in what configuration: plan LLM training and inference on GPUs, TPUs "
    "and NPUs from a sourced hardware catalog, analytic models and your own measurements. Start with "
    "`xpuplan overview`.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(hw.app, name="hw")
app.add_typer(model.app, name="model")
app.add_typer(analyze.memory_app, name="memory")
app.command("flops")(analyze.flops)
app.command("roofline")(analyze.roofline)
app.command("validate")(validate.validate)
# Planner and measurement front ends register their own commands (one edit here per front end).
for _frontend in (overview, train, infer, bench, cost, schema, recommend):
    _frontend.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"xpuplan {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version"),
) -> None:
    """xpuplan: which accelerators, how many, in what configuration."""


def run() -> None:
    app(prog_name="xpuplan")


if __name__ == "__main__":
    run()
