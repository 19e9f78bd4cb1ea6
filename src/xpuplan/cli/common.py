"""Shared CLI plumbing: error handling (exit 2, no traceback), JSON output, tables."""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from xpuplan.datafile import format_loc
from xpuplan.errors import InfeasibleError, UserInputError, XpuplanError

if TYPE_CHECKING:
    from xpuplan.jobs.requests import Request

R = TypeVar("R", bound="Request")

#: Width when output is not a terminal (pipes, files, tests): wide enough that tables don't fold.
NON_TTY_WIDTH = 180


def _width() -> int | None:
    cols = os.environ.get("COLUMNS")
    if cols and cols.isdigit():
        return int(cols)
    return None if sys.stdout.isatty() else NON_TTY_WIDTH


console = Console(width=_width(), emoji=False)
err_console = Console(stderr=True, width=_width(), emoji=False)

F = TypeVar("F", bound=Callable[..., Any])

EXIT_USER_ERROR = 2
EXIT_INFEASIBLE = 3
EXIT_INTERNAL = 1


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def print_json(obj: Any) -> None:
    """Plain JSON on stdout (no Rich wrapping), NaN/inf as null."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2, ensure_ascii=False) + "\n")


def fail(message: str, code: int = EXIT_USER_ERROR) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


def _json_error(payload: dict[str, Any], code: int) -> typer.Exit:
    """Under ``--json``: the error as a JSON object on stdout (``error``, ``field``, ``hint``)."""
    print_json(payload)
    return typer.Exit(code)


def render_infeasible(exc: InfeasibleError) -> None:
    err_console.print(f"[bold red]infeasible:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    for r in exc.reasons:
        err_console.print(f"  - {escape(r)}", highlight=False, soft_wrap=True)
    if exc.hint:
        err_console.print(f"hint: {escape(exc.hint)}", highlight=False, soft_wrap=True)


def cli_command(func: F) -> F:
    """Turn xpuplan's errors into one clear message and an exit status (2 user error, 3 infeasible,
    1 internal); no tracebacks. With ``--json`` (a ``json_`` parameter) the error is a JSON object
    ``{"error", "field", "hint"}`` on stdout (infeasible: plus ``reasons`` and the ``result``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = bool(kwargs.get("json_"))
        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except InfeasibleError as exc:
            if as_json:
                payload = exc.to_dict()
                result = exc.result
                if result is not None and hasattr(result, "to_dict"):
                    payload["result"] = result.to_dict()
                raise _json_error(payload, EXIT_INFEASIBLE) from None
            render_infeasible(exc)
            raise typer.Exit(EXIT_INFEASIBLE) from None
        except UserInputError as exc:
            if as_json:
                raise _json_error(exc.to_dict(), EXIT_USER_ERROR) from None
            text = exc.render()
            raise fail(text + (f" (hint: {exc.hint})" if exc.hint and exc.hint not in text else "")) from None
        except ValidationError as exc:
            e = exc.errors()[0]
            field = format_loc(tuple(e["loc"]))
            if as_json:
                raise _json_error({"error": e["msg"], "field": field, "hint": None}, EXIT_USER_ERROR) from None
            raise fail(f"field '{field}': {e['msg']}") from None
        except XpuplanError as exc:
            if as_json:
                raise _json_error({"error": str(exc), "field": None, "hint": None}, EXIT_USER_ERROR) from None
            raise fail(str(exc)) from None
        except (ValueError, KeyError) as exc:
            if os.environ.get("XPUPLAN_DEBUG"):
                raise
            msg = str(exc).strip("'\"")[:500]
            if as_json:
                raise _json_error({"error": msg, "field": None, "hint": None}, EXIT_USER_ERROR) from None
            raise fail(msg) from None
        except KeyboardInterrupt:
            raise fail("interrupted", 130) from None
        except Exception as exc:  # pragma: no cover - last resort
            if os.environ.get("XPUPLAN_DEBUG"):
                raise
            msg = (f"internal error ({type(exc).__name__}: {str(exc)[:200]}); set XPUPLAN_DEBUG=1 for the traceback "
                   "and report it")
            if as_json:
                raise _json_error({"error": msg, "field": None, "hint": None}, EXIT_INTERNAL) from None
            raise fail(msg, EXIT_INTERNAL) from None

    return wrapper  # type: ignore[return-value]


def request(cls: type[R], **values: Any) -> R:
    """Validate CLI values as the job's request (errors name the flag)."""
    from xpuplan.jobs.requests import parse_request

    values.pop("json_", None)
    return parse_request(cls, values)


def table(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, caption: str | None = None) -> Table:
    t = Table(title=title, caption=caption, title_justify="left", show_lines=False)
    for i, c in enumerate(columns):
        t.add_column(c, justify="left" if i == 0 else "right", overflow="fold")
    for r in rows:
        t.add_row(*[fmt(v) for v in r])
    return t


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1000:
            return f"{v:,.0f}"
        if abs(v) >= 10:
            return f"{v:.1f}"
        return f"{v:.3g}"
    return str(v)


def band_line(u: Any, what: str) -> str | None:
    """One line saying how far to trust a prediction: the family's validation band (``Uncertainty``)."""
    if u is None:
        return None
    d = u if isinstance(u, dict) else u.model_dump()
    if d["n_rows"]:
        basis = f"{d['family']}, {d['n_rows']} public {d['kind']} rows"
    else:
        basis = f"{d['family']}: no public {d['kind']} rows, the band of all rows"
    if d["widened_by"] > 1:
        basis += f", widened x{d['widened_by']:g}"
    if d.get("extrapolation"):
        basis += f"; outside their regime: {'; '.join(d['extrapolation'])}"
    cal = " (your calibration likely narrows it)" if d["calibrated"] else ""
    span = f"-{d['low_fraction']:.0%}..+{d['high_fraction']:.0%} of the prediction"
    if d["widened_by"] > 1:  # no longer what 80% of the rows measured: their 80% range, made wider
        return f"band ({basis}): {span} (their 80% range, widened){cal} -> {what}"
    return f"band ({basis}): measured within {span} for 80% of them{cal} -> {what}"


def print_caveats(used: Any, skip: Sequence[str] = ()) -> None:
    """The result's caveats (trust-D or user-supplied figures, fp16 used for bf16), one line each
    (those in ``skip``, already printed as notes, are left out)."""
    if used is None:
        return
    items = used.get("caveats", []) if isinstance(used, dict) else getattr(used, "caveats", [])
    for c in items:
        if c in skip:
            continue
        console.print(f"[yellow]caveat:[/] {escape(c)}", highlight=False, soft_wrap=True)
