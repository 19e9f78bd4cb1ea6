"""Errors raised for the user's mistakes.

``UserInputError`` carries a field path (``devices[3].memory.capacity_gb``) and, for data files,
the file and line. Front ends render it as one clear message (CLI exit status 2, HTTP 4xx) —
never a traceback. Internal invariants use ``assert``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


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
    ) -> None:
        self.message = message
        self.field = field
        self.file = file
        self.line = line
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
        return {"error": self.message, "field": self.field, "file": self.file, "line": self.line}


class UnknownIdError(UserInputError, KeyError):
    """An id (hardware, model, preset) that is not in the catalog."""

    def __init__(self, kind: str, given: str, known: Iterable[str], *, field: str | None = None) -> None:
        by_lower: dict[str, str] = {}
        for k in known:  # first spelling of each name wins; case variants are one suggestion
            by_lower.setdefault(k.lower(), k)
        close = difflib.get_close_matches(given.lower(), list(by_lower), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(by_lower[c] for c in close)}?" if close else ""
        self.suggestions = [by_lower[c] for c in close]
        super().__init__(f"unknown {kind} {given!r}{hint}", field=field or kind)

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return self.render()


class InfeasibleError(XpuplanError):
    """A request that is well-formed but cannot be satisfied (e.g. the model does not fit)."""

    def __init__(self, message: str, *, reasons: list[str] | None = None) -> None:
        self.reasons = reasons or []
        super().__init__(message)
