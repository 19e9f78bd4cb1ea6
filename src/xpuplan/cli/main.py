"""The ``xpuplan`` command: a thin layer over the jobs (``xpuplan.jobs``).

Front ends are modules of ``xpuplan.cli`` with a ``register(app)`` function, listed once in
:data:`FRONTENDS` (one line per front end). ``run()`` — the ``xpuplan`` script — imports only the
front end of the command being run when :data:`COMMANDS` knows it (start-up time: ``xpuplan hw list``
does not import the planners or the cost model); anything else (``--help``, ``--version``, an
unknown word) builds the whole command tree. ``app`` is the whole tree, built on first use.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

import typer

from xpuplan import __version__

#: Front-end modules of ``xpuplan.cli``, in the order of ``xpuplan --help``.
FRONTENDS: tuple[str, ...] = ("hw", "model", "analyze", "validate", "overview", "train", "infer", "bench", "cost",
                              "schema", "recommend", "fleet", "simulate", "serve")
#: First command word -> the front end that registers it (the fast path of :func:`run`; a word not
#: here makes ``run`` build every front end, so a missing entry costs time, never correctness).
COMMANDS: dict[str, str] = {
    "hw": "hw", "model": "model", "memory": "analyze", "flops": "analyze", "roofline": "analyze",
    "validate": "validate", "overview": "overview", "train": "train", "infer": "infer", "bench": "bench",
    "calibrate": "bench", "import": "bench", "db": "bench", "cost": "cost", "schema": "schema",
    "recommend": "recommend", "fleet": "fleet", "simulate": "simulate", "serve": "serve",
}

HELP = ("Which accelerators, how many, in what configuration: plan LLM training and inference on GPUs, TPUs "
        "and NPUs from a sourced hardware catalog, analytic models and your own measurements. Start with "
        "`xpuplan recommend` (a ranked, explained choice) or `xpuplan overview` (one model on the usual options).")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"xpuplan {__version__}")
        raise typer.Exit()


def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version"),
) -> None:
    """xpuplan: which accelerators, how many, in what configuration."""


def _register(app: typer.Typer, name: str) -> None:
    mod = importlib.import_module(f"xpuplan.cli.{name}")
    if hasattr(mod, "register"):
        mod.register(app)
    else:  # a front end with a single command function named like the module
        app.command(name)(getattr(mod, name))


def build_app(frontends: tuple[str, ...] = FRONTENDS) -> typer.Typer:
    """The command tree with ``frontends`` registered."""
    app = typer.Typer(name="xpuplan", help=HELP, no_args_is_help=True, pretty_exceptions_enable=False,
                      add_completion=False)
    app.callback()(_main)
    for name in frontends:
        _register(app, name)
    return app


_APP: typer.Typer | None = None


def __getattr__(name: str) -> Any:
    global _APP
    if name == "app":
        if _APP is None:
            _APP = build_app()
        return _APP
    raise AttributeError(f"module 'xpuplan.cli.main' has no attribute {name!r}")


def run() -> None:
    """The ``xpuplan`` script."""
    words = sys.argv[1:]
    first = words[0] if words else None
    if first in COMMANDS:
        build_app((COMMANDS[first],))(prog_name="xpuplan")
    else:
        __getattr__("app")(prog_name="xpuplan")


if __name__ == "__main__":
    run()
