"""The bad-input checks the CLI test modules share: run a command in-process, and assert that it was refused as
bad input (exit 2, one message naming the flag as typed, no traceback)."""

from __future__ import annotations

from typing import Any

from typer.testing import CliRunner

from xpuplan.cli.main import app

runner = CliRunner()


def run(*args: str) -> Any:
    """``xpuplan ARGS`` in-process; the click result (exit_code, output)."""
    return runner.invoke(app, list(args))


def assert_user_error(r: Any, flag: str, *needles: str, one_line: bool = False) -> None:
    """``r`` exited 2 naming ``flag`` (``'--tp'``), with each of ``needles`` in its message, no traceback, no internal
    error and no infeasibility verdict; ``one_line``: the whole output is one line."""
    assert r.exit_code == 2, r.output
    assert f"'{flag}'" in r.output, r.output
    assert "Traceback" not in r.output and "internal error" not in r.output and "infeasible" not in r.output, r.output
    if one_line:
        assert len([x for x in r.output.splitlines() if x.strip()]) == 1, r.output
    for needle in needles:
        assert needle in r.output, (needle, r.output)
