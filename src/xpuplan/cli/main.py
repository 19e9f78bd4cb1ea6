"""The ``xpuplan`` command: a thin layer over the public Python API."""

from __future__ import annotations

import importlib
import importlib.util

import typer

from xpuplan import __version__
from xpuplan.cli import analyze, hw, model, validate

app = typer.Typer(
    name="xpuplan",
    help="Plan LLM training and inference on GPUs, TPUs and NPUs: catalog, models, FLOPs, memory, roofline.",
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

#: Front ends of the planners; each module exposes ``register(app)``.
PLUGIN_MODULES = ("xpuplan.cli.overview", "xpuplan.cli.train", "xpuplan.cli.infer", "xpuplan.cli.bench")
for _name in PLUGIN_MODULES:
    if importlib.util.find_spec(_name) is not None:
        importlib.import_module(_name).register(app)


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
