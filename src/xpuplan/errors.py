"""Errors raised for the user's mistakes.

``UserInputError`` carries a field path (``devices[3].memory.capacity_gb``) and, for data files,
the file and line. Front ends render it as one clear message (CLI exit status 2, HTTP 4xx) —
never a traceback. Internal invariants use ``assert``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Final

#: Characters of a user's value echoed back in a message; longer values are cut (a 100,000-character
#: model name must not come back as a 100 KB error message).
ECHO_LIMIT: Final = 80


def echo(value: object, limit: int = ECHO_LIMIT) -> str:
    """``repr`` of a user's value for a message, cut to about ``limit`` characters."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(str(value)):,} characters)"


class XpuplanError(Exception):
    """Base class of every error xpuplan raises on purpose."""


class UserInputError(XpuplanError, ValueError):
    """Something the user supplied is invalid; the message names the field."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        file: str | None = None,
        line: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.field = field
        self.file = file
        self.line = line
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        where = []
        if self.file:
            where.append(self.file + (f":{self.line}" if self.line else ""))
        if self.field:
            where.append(f"field '{self.field}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message

    def to_dict(self) -> dict[str, object]:
        """The error as front ends return it (``--json``, HTTP): ``error``, ``field``, ``hint``,
        plus ``file``/``line`` for data files."""
        out: dict[str, object] = {"error": self.message, "field": self.field, "hint": self.hint}
        if self.file is not None:
            out["file"] = self.file
            out["line"] = self.line
        return out


class UnknownIdError(UserInputError, KeyError):
    """An id (hardware, model, preset) that is not in the catalog."""

    def __init__(self, kind: str, given: str, known: Iterable[str], *, field: str | None = None) -> None:
        by_lower: dict[str, str] = {}
        for k in known:  # first spelling of each name wins; case variants are one suggestion
            by_lower.setdefault(k.lower(), k)
        # a name far longer than any id cannot be a typo of one (and difflib is quadratic in it)
        close = (difflib.get_close_matches(given.lower(), list(by_lower), n=3, cutoff=0.5)
                 if len(given) <= 4 * ECHO_LIMIT else [])
        hint = f"; did you mean {', '.join(by_lower[c] for c in close)}?" if close else ""
        self.suggestions = [by_lower[c] for c in close]
        super().__init__(f"unknown {kind} {echo(given)}{hint}", field=field or kind,
                         hint=f"did you mean {', '.join(self.suggestions)}?" if close else None)

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.render()


class InfeasibleError(XpuplanError):
    """A request that is well-formed but cannot be satisfied (e.g. the model does not fit)."""

    def __init__(self, message: str, *, reasons: list[str] | None = None, hint: str | None = None,
                 result: object | None = None) -> None:
        self.reasons = reasons or []
        self.hint = hint
        #: The (typed) result computed before the plan was found infeasible, for front ends to render.
        self.result = result
        super().__init__(message)

    def to_dict(self) -> dict[str, object]:
        """``error``, ``field`` (None: the request as a whole), ``hint`` and the ``reasons``."""
        return {"error": str(self), "field": None, "hint": self.hint, "reasons": list(self.reasons)}
