"""Errors as HTTP responses: one JSON shape, ``{"error", "field", "hint"}``, never a traceback.

* a body that is not JSON (a syntax error, not UTF-8) or a malformed multipart upload: **400**,
  ``field: "body"``, with the JSON decoder's message, line and column;
* bad input (a pydantic error on the body or the query, or a job's ``UserInputError``): **422**,
  ``field`` is the path of the offending value in the request (``hw``, ``scenario.workload.tokens``;
  ``body`` for a body that is JSON but not an object, or no body at all);
* an unknown id in the URL (``/hardware/H1000``): **404** with ``hint: "did you mean ...?"``;
* a request that is well-formed but cannot be satisfied (``InfeasibleError``, CLI exit 3): **409**
  with the ``reasons`` and, where the job computed one, the ``result``;
* a body over the size limit: **413**; a missing or wrong bearer token: **401**;
* anything else: **500** ``{"error": "internal error ..."}`` (logged; a bug to report).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from xpuplan.errors import InfeasibleError, UnknownIdError, UserInputError, XpuplanError

log = logging.getLogger("xpuplan.api")


class ErrorOut(BaseModel):
    """The body of every error response."""

    error: str = Field(description="what is wrong, in one sentence")
    field: str | None = Field(default=None, description="path of the offending value in the request, if any")
    hint: str | None = Field(default=None, description="how to fix it (e.g. 'did you mean H100?')")
    file: str | None = Field(default=None, description="uploaded file the error is in (base name)")
    line: int | None = Field(default=None, description="line of that file")
    reasons: list[str] | None = Field(default=None, description="why a request is infeasible (409)")
    result: dict[str, Any] | None = Field(default=None, description="what was computed before it was found infeasible")


#: Error responses every endpoint may give (for the OpenAPI schema).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "the body is not valid JSON (or malformed multipart for an upload)"},
    401: {"model": ErrorOut, "description": "missing or wrong bearer token"},
    413: {"model": ErrorOut, "description": "request body too large"},
    422: {"model": ErrorOut, "description": "bad input: `field` names the offending value"},
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorOut, "description": "unknown id (with 'did you mean')"}}
INFEASIBLE: dict[int | str, dict[str, Any]] = {409: {"model": ErrorOut, "description": "well-formed but infeasible"}}


class NotFoundError(Exception):
    """An id in the URL that names nothing (404)."""

    def __init__(self, message: str, *, field: str | None = None, hint: str | None = None) -> None:
        self.message, self.field, self.hint = message, field, hint
        super().__init__(message)

    @classmethod
    def unknown(cls, kind: str, given: str, known: Sequence[str], *, field: str = "id") -> NotFoundError:
        err = UnknownIdError(kind, given, known, field=field)
        return cls(err.message, field=field, hint=err.hint)


def field_path(loc: Sequence[Any]) -> str | None:
    """``("body", "scenario", "workload", 0, "tokens")`` -> ``scenario.workload[0].tokens``."""
    parts = [p for p in loc if p not in ("body", "query", "path", "header", "cookie")]
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif str(p).startswith(("function-", "function_")):  # pydantic's validator location markers
            continue
        else:
            out += ("." if out else "") + str(p)
    return out or None


#: Flags of the CLI that are not a request field of the same name.
_EXTRA_FLAGS = {"--weight": "weights", "--preset": "preset", "--lang": "lang"}


def _known_flags() -> dict[str, str]:
    """Every request's explicitly named flags, flag -> field (``--in`` -> ``input_len``)."""
    from xpuplan.jobs.requests import Request as JobRequest

    out: dict[str, str] = {}
    todo: list[type] = [JobRequest]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        for field, flag in getattr(cls, "FLAGS", {}).items():
            if flag.startswith("--"):
                out.setdefault(flag, field.rstrip("_"))
    return out


def flag_to_field(name: str | None) -> str | None:
    """A CLI flag as the JSON key of the request body: ``--global-batch`` -> ``global_batch``,
    ``--in`` -> ``input_len`` (through the requests' ``FLAGS``); other names are kept."""
    if not name or not name.startswith("--"):
        return name
    cut = min((i for i in (name.find("."), name.find("[")) if i > 0), default=len(name))
    head, rest = name[:cut], name[cut:]
    return (_EXTRA_FLAGS.get(head) or _known_flags().get(head) or head[2:].replace("-", "_")) + rest


def error_body(exc: UserInputError, prefix: str | None = None) -> dict[str, Any]:
    """``{"error", "field", "hint"}`` of a ``UserInputError``; ``field`` as a JSON path below ``prefix``."""
    field = flag_to_field(exc.field)
    if field and field.isupper():  # a CLI positional argument (ID, SCENARIO): the value itself
        field = None
    if prefix is None and exc.file == "<scenario>":  # raised while reading a scenario body
        prefix = "scenario"
    if prefix:
        field = f"{prefix}.{field}" if field else prefix
    out: dict[str, Any] = {"error": exc.message, "field": field, "hint": exc.hint}
    if exc.file and not exc.file.startswith("<"):
        # an uploaded or packaged file: its base name (never the server's directory layout) and line
        out["file"] = exc.file.replace("\\", "/").rsplit("/", 1)[-1]
        out["line"] = exc.line
    return out


def _json_invalid(err: Any, doc: Any) -> JSONResponse:
    """400 for a body that is not JSON: the decoder's message at its line and column (FastAPI gives the
    character offset as the error's location and the decoded text as the exception's body)."""
    loc = tuple(err.get("loc") or ())
    pos = loc[-1] if loc and isinstance(loc[-1], int) else None
    why = str((err.get("ctx") or {}).get("error") or "JSON decode error")
    where = ""
    if pos is not None and isinstance(doc, str) and 0 <= pos <= len(doc):
        line, column = doc.count("\n", 0, pos) + 1, pos - doc.rfind("\n", 0, pos)
        where = f" at line {line}, column {column}"
    return JSONResponse(status_code=400, content={"error": f"the request body is not valid JSON: {why}{where}",
                                                  "field": "body", "hint": None})


def _validation_response(errors: Sequence[Any]) -> JSONResponse:
    err = errors[0]
    cause = (err.get("ctx") or {}).get("error")
    loc = tuple(err.get("loc") or ())
    if isinstance(cause, UserInputError):
        body = error_body(cause)
        if body["field"] is None:
            body["field"] = field_path(loc)
        return JSONResponse(status_code=422, content=body)
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if loc == ("body",):  # the body as a whole: missing, JSON but not an object, or a check across its fields
        if err.get("type") == "missing":
            msg = "no request body: expected a JSON object"
        elif err.get("type") in ("model_attributes_type", "model_type", "dict_type"):
            msg = "the request body must be a JSON object"
        return JSONResponse(status_code=422, content={"error": msg, "field": "body", "hint": None})
    value = err.get("input")
    if err.get("type") not in ("missing", "extra_forbidden") and isinstance(value, str | int | float | bool):
        from xpuplan.errors import echo

        msg += f" (got {echo(value)})"
    return JSONResponse(status_code=422, content={"error": msg, "field": field_path(loc), "hint": None})


def install(app: FastAPI) -> None:
    """Register the handlers above on ``app``."""

    @app.exception_handler(RequestValidationError)
    async def _request_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = list(exc.errors())
        if errs and errs[0].get("type") == "json_invalid":
            return _json_invalid(errs[0], exc.body)
        return _validation_response(errs)

    @app.exception_handler(ValidationError)
    async def _validation(_: Request, exc: ValidationError) -> JSONResponse:
        return _validation_response(list(exc.errors()))

    @app.exception_handler(NotFoundError)
    async def _not_found(_: Request, exc: NotFoundError) -> JSONResponse:
        return JSONResponse(status_code=404, content={"error": exc.message, "field": exc.field, "hint": exc.hint})

    @app.exception_handler(InfeasibleError)
    async def _infeasible(_: Request, exc: InfeasibleError) -> JSONResponse:
        payload: dict[str, Any] = exc.to_dict()
        result = exc.result
        if result is not None and hasattr(result, "to_dict"):
            payload["result"] = result.to_dict()
        return JSONResponse(status_code=409, content=payload)

    @app.exception_handler(UserInputError)
    async def _user(_: Request, exc: UserInputError) -> JSONResponse:
        return JSONResponse(status_code=422, content=error_body(exc))

    @app.exception_handler(XpuplanError)
    async def _xpuplan(_: Request, exc: XpuplanError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"error": str(exc), "field": None, "hint": None})

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # a 400 is the framework's: a body it cannot parse (not UTF-8, malformed multipart)
        field = "body" if exc.status_code == 400 else None
        return JSONResponse(status_code=exc.status_code, content={"error": str(exc.detail), "field": field,
                                                                  "hint": None}, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(status_code=500, content={
            "error": f"internal error ({type(exc).__name__}); please report it", "field": None, "hint": None})
