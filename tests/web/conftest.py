"""Fixtures of the web page tests: the app on a temporary store, served by uvicorn on loopback, and
Debian's Chromium driven by Playwright.

Browser tests need ``/usr/bin/chromium`` (``apt-get install -y chromium``) and the ``playwright``
package (``test`` extra); Playwright's own browser download is not used. Without them the browser
tests FAIL in CI (env ``CI`` set, where ``.ci/run`` installs Chromium) and are skipped elsewhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

CHROMIUM = os.environ.get("XPUPLAN_CHROMIUM", "/usr/bin/chromium")


@pytest.fixture(scope="session")
def store_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('web') / 'web.db'}"


@pytest.fixture(scope="session")
def web_app(store_url: str) -> Any:
    from xpuplan.web.app import create_app

    return create_app(store_url=store_url, use_calibration=False)


@pytest.fixture
def client(web_app: Any) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    with TestClient(web_app) as c:
        yield c


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Base URL of ``app`` served by uvicorn on 127.0.0.1 (a thread, stopped on exit)."""
    import uvicorn

    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=srv.run, name="xpuplan-web-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def server(web_app: Any) -> Iterator[str]:
    """Base URL of the app served by uvicorn on 127.0.0.1 (stopped after the session)."""
    with serve(web_app) as url:
        yield url


def _missing_browser() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"Chromium not found at {CHROMIUM} (apt-get install -y chromium)"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    why = _missing_browser()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"browser tests cannot run: {why}; CI must install Chromium (see .ci/run)")
        pytest.skip(f"browser tests skipped: {why} (they fail instead when CI is set)")
    from playwright.sync_api import sync_playwright

    args = ["--headless=new", "--disable-gpu", "--disable-dev-shm-usage"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--no-sandbox")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Any]:
    """A fresh page (1400x1000) whose requests outside loopback are answered locally (no network)."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    outside: list[str] = []

    def _route(route: Any) -> None:
        url = route.request.url
        if url.startswith(server):
            route.continue_()
        else:
            outside.append(url)
            route.fulfill(status=200, content_type="text/html", body="<html><body>source page (offline test)</body></html>")

    ctx.route("**/*", _route)
    p = ctx.new_page()
    p.set_default_timeout(60_000)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    p.outside_requests = outside  # type: ignore[attr-defined]
    p.js_errors = errors  # type: ignore[attr-defined]
    yield p
    ctx.close()
