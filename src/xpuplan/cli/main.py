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
                              "schema", "recommend", "fleet", "simulate", "claims", "serve")
#: First command word -> the front end that registers it (the fast path of :func:`run`; a word not
#: here makes ``run`` build every front end, so a missing entry costs time, never correctness).
COMMANDS: dict[str, str] = {
    "hw": "hw", "model": "model", "memory": "analyze", "flops": "analyze", "roofline": "analyze",
    "validate": "validate", "overview": "overview", "train": "train", "infer": "infer", "bench": "bench",
    "calibrate": "bench", "import": "bench", "db": "bench", "cost": "cost", "schema": "schema",
    "recommend": "recommend", "fleet": "fleet", "simulate": "simulate", "audit-claims": "claims",
    "serve": "serve",
}

HELP = ("Which accelerators, how many, in what configuration: plan LLM training and inference on GPUs, TPUs "
        "and NPUs from a sourced hardware catalog, analytic models and your own measurements. Start with "
        "`xpuplan recommend` (a ranked, explained choice) or `xpuplan overview` (one model on the usual options).")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"xpuplan {__version__}")
        raise typer.Exit()


HW_FIGURE_HELP = ("add or override a catalog figure for this run, anywhere on the command line: "
                  "DEVICE:PATH=VALUE (e.g. enflame-s60:dense_tflops.bf16=150, optional [LOW..HIGH] and @TRUST) "
                  "or a YAML file 'device: {path: value}'; repeatable")


def _use_hw_figures(entries: list[str], *, as_json: bool = False) -> None:
    from xpuplan.cli.common import EXIT_USER_ERROR, fail, print_json
    from xpuplan.errors import UserInputError
    from xpuplan.jobs.context import use_hw_figures

    try:
        use_hw_figures(entries)
    except UserInputError as exc:
        if as_json:  # under --json every error is a JSON object, this one too
            print_json(exc.to_dict())
            raise typer.Exit(EXIT_USER_ERROR) from None
        raise fail(exc.render() + (f" (hint: {exc.hint})" if exc.hint else "")) from None


def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="print the version"),
    hw_figure: list[str] = typer.Option(None, "--hw-figure", help=HW_FIGURE_HELP),  # noqa: B008
) -> None:
    """xpuplan: which accelerators, how many, in what configuration."""
    if hw_figure:
        _use_hw_figures(hw_figure)


def take_hw_figures(words: list[str]) -> tuple[list[str], list[str]]:
    """(``words`` without ``--hw-figure X`` / ``--hw-figure=X``, the X's): the flag works after any
    command word, so every command gets it."""
    rest: list[str] = []
    figs: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--hw-figure" and i + 1 < len(words):
            figs.append(words[i + 1])
            i += 2
            continue
        if w.startswith("--hw-figure="):
            figs.append(w.split("=", 1)[1])
        else:
            rest.append(w)
        i += 1
    return rest, figs


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
    words, figures = take_hw_figures(sys.argv[1:])
    if figures:
        try:
            _use_hw_figures(figures, as_json="--json" in words)
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
    first = words[0] if words else None
    if first in COMMANDS:
        build_app((COMMANDS[first],))(args=words, prog_name="xpuplan")
    else:
        __getattr__("app")(args=words, prog_name="xpuplan")


if __name__ == "__main__":
    run()
