"""The application layer: the jobs every front end (CLI, HTTP API, web page, reports) calls.

A job takes a typed request (``*Request``, validated once: finite numbers in physical range, ids
checked as ids, ranges bounded, errors naming the flag the user typed) and a :class:`RunContext`
(catalog, assumptions, calibration, resolved from the environment only here), and returns a typed
result (``*Result``, pydantic, with ``schema_version`` and the figures and assumptions it used).
Front ends parse, call a job, render. Submodules are imported on use (start-up time).
"""

from xpuplan.jobs.context import RunContext, default_context, resolve_context
from xpuplan.jobs.requests import Request, parse_request
from xpuplan.jobs.results import RESULTS, SCHEMA_VERSION, Result, result_schema

__all__ = ["RESULTS", "SCHEMA_VERSION", "Request", "Result", "RunContext", "default_context", "parse_request",
           "resolve_context", "result_schema"]
