"""The FastAPI application: :func:`create_app`.

Every endpoint lives under ``/api/v1`` (docs/api.md), plus ``/metrics`` (Prometheus text) and
``/healthz``. The app holds one :class:`~xpuplan.jobs.context.RunContext` (catalog, assumptions,
calibration, the store URL) resolved at start, like one CLI run.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from xpuplan import __version__
from xpuplan.api import catalog, errors, planning, service

#: Prefix of every endpoint.
PREFIX: Final = "/api/v1"
#: Largest request body accepted, bytes (a scenario is a few KB; a validation CSV a few hundred KB).
DEFAULT_MAX_BODY_BYTES: Final = 2 * 1024 * 1024
#: Paths served without a token (liveness probes). Front ends add their own public paths and
#: prefixes (the web page's shell and static assets, which hold no data) to ``app.state.open_paths``
#: and ``app.state.open_prefixes``; every data route stays behind the token.
OPEN_PATHS: Final = frozenset({"/healthz"})


class BodyLimit:
    """ASGI middleware: a body over ``limit`` bytes gets 413, judged by ``Content-Length`` before
    anything is read; a body without one (chunked) is read here, at most ``limit`` bytes, and
    replayed to the app."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = None
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = None
        if length is not None:
            if length > self.limit:
                await self._reject(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break  # the client went away
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.limit:
                await self._reject(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        resp = JSONResponse(status_code=413, content={
            "error": f"request body larger than {self.limit:,} bytes", "field": None, "hint": None})
        await resp(scope, receive, send)


def _authorised(request: Request, token: str) -> bool:
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def _public(app: FastAPI, path: str) -> bool:
    """Whether ``path`` is served without a token (``app.state.open_paths``/``open_prefixes``)."""
    if path in app.state.open_paths:
        return True
    return any(path.startswith(p) and "/.." not in path for p in app.state.open_prefixes)


def create_app(*, store_url: str | None = None, token: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, use_calibration: bool | None = None,
               workers: int | None = None) -> FastAPI:
    """The HTTP API.

    ``store_url``: SQLAlchemy URL of the store (saved scenarios, background jobs and their results;
    default ``XPUPLAN_DB_URL`` or the SQLite file in the user's data directory). ``token``: when
    given, every request but ``/healthz`` needs ``Authorization: Bearer <token>`` (``xpuplan serve``
    requires one when bound to an address other than loopback). ``max_body_bytes``: larger bodies
    get 413. ``use_calibration``: use stored calibration profiles (default: ``XPUPLAN_USE_CALIBRATION``).
    ``workers``: threads running background jobs (default 2).
    """
    from xpuplan.api.background import DEFAULT_WORKERS, Background
    from xpuplan.api.metrics import Metrics
    from xpuplan.jobs.context import resolve_context
    from xpuplan.jobs.saved import Saved

    ctx = resolve_context(use_calibration=use_calibration, db_url=store_url)
    saved = Saved(store_url)
    metrics = Metrics()
    background = Background(saved, ctx, metrics, workers=workers or DEFAULT_WORKERS)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        background.start()
        try:
            yield
        finally:
            background.shutdown()
            saved.close()

    app = FastAPI(
        title="xpuplan",
        version=__version__,
        description="Choose accelerators for LLM training and inference: the jobs of the xpuplan CLI over HTTP. "
                    "Results are the same typed JSON as `--json`; see docs/api.md.",
        openapi_url=f"{PREFIX}/openapi.json",
        docs_url=f"{PREFIX}/docs",
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
        lifespan=lifespan,
    )
    app.state.context = ctx
    app.state.saved = saved
    app.state.background = background
    app.state.metrics = metrics
    app.state.prefix = PREFIX
    app.state.token = token
    app.state.open_paths = set(OPEN_PATHS)
    app.state.open_prefixes = []
    app.state.started = time.time()
    errors.install(app)

    @app.middleware("http")
    async def _measure(request: Request, call_next: Any) -> Any:
        t0 = time.perf_counter()
        status = 500
        try:
            if token and not _public(app, request.url.path) and not _authorised(request, token):
                response: Any = JSONResponse(status_code=401, content={
                    "error": "missing or wrong bearer token", "field": "Authorization", "hint": None},
                    headers={"WWW-Authenticate": "Bearer"})
            else:
                response = await call_next(request)
            status = response.status_code
            return response
        finally:
            route = request.scope.get("route")
            path = getattr(route, "path", None)
            label = "other" if path is None else (PREFIX + path if id(route) in prefixed else path)
            metrics.observe(request.method, label, status, time.perf_counter() - t0)

    app.add_middleware(BodyLimit, limit=max_body_bytes)

    #: routes of the routers below, whose template in the request scope lacks the prefix
    prefixed: set[int] = set()
    for router in (catalog.router, planning.router, service.router):
        app.include_router(router, prefix=PREFIX, responses=errors.ERROR_RESPONSES)
        prefixed.update(id(r) for r in router.routes)

    @app.get("/healthz", tags=["service"], summary="Liveness: 200 while the server runs")
    def healthz() -> dict[str, Any]:
        return {"status": "ok", "version": __version__, "uptime_s": time.time() - app.state.started}

    @app.get("/metrics", tags=["service"], summary="Prometheus metrics: requests, latencies, jobs",
             response_class=PlainTextResponse, responses={401: {"model": errors.ErrorOut}})
    def metrics_endpoint() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(background.counts()), media_type="text/plain; version=0.0.4")

    return app
