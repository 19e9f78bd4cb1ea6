"""``xpuplan serve``: the web page and the HTTP API with uvicorn.

Binds to 127.0.0.1 by default. Bound to any other address it requires a bearer token in
``XPUPLAN_TOKEN`` and refuses to start without one (exit 2). FastAPI and uvicorn are the ``api``
extra: ``pip install 'xpuplan[api]'``.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import os
from typing import Annotated, Any

import typer

from xpuplan.cli.common import cli_command, err_console
from xpuplan.errors import UserInputError

#: Environment variable holding the bearer token.
ENV_TOKEN = "XPUPLAN_TOKEN"
#: Shortest token accepted (characters).
MIN_TOKEN_LEN = 16
#: Seconds an idle keep-alive connection stays open (uvicorn's default, 5 s, equals common clients'
#: pool expiry, so a client may reuse a connection the server is closing at that very moment).
KEEP_ALIVE_S = 30


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def build_app(*, store_url: str | None, token: str | None) -> Any:
    """The web app: the HTTP API plus the pages (``xpuplan.web.app.create_app``)."""
    from xpuplan.web.app import create_app

    return create_app(store_url=store_url, token=token)


@cli_command
def serve(
    host: Annotated[str, typer.Option(help="address to bind; anything but loopback needs XPUPLAN_TOKEN")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = 8000,
    db: Annotated[str | None, typer.Option(help="store: SQLAlchemy URL (default XPUPLAN_DB_URL or the SQLite file "
                                                "in the user's data directory)")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level: critical, error, warning, info, debug")] = "info",
) -> None:
    """Serve the web page (docs/web.md) and the HTTP API (docs/api.md)."""
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:
        raise UserInputError(f"{' and '.join(missing)} not installed", field="serve",
                             hint="pip install 'xpuplan[api]'")
    if log_level not in ("critical", "error", "warning", "info", "debug"):
        raise UserInputError(f"expected critical, error, warning, info or debug, got {log_level!r}",
                             field="--log-level")
    token = os.environ.get(ENV_TOKEN) or None
    if not is_loopback(host):
        if token is None:
            raise UserInputError(f"binding to {host} (not loopback) needs a bearer token: set {ENV_TOKEN}",
                                 field="--host", hint=f"export {ENV_TOKEN}=$(python -c 'import secrets; "
                                 "print(secrets.token_urlsafe(32))'), or serve on 127.0.0.1")
        if len(token) < MIN_TOKEN_LEN:
            raise UserInputError(f"{ENV_TOKEN} is {len(token)} characters; use at least {MIN_TOKEN_LEN}",
                                 field=ENV_TOKEN)
    import uvicorn

    app = build_app(store_url=db, token=token)
    auth = "bearer token required" if token else "no token (loopback only)"
    err_console.print(f"xpuplan web page on http://{host}:{port}/ and API on http://{host}:{port}/api/v1 ({auth}); "
                      "API docs at /api/v1/docs", highlight=False)
    uvicorn.run(app, host=host, port=port, log_level=log_level, timeout_keep_alive=KEEP_ALIVE_S)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
