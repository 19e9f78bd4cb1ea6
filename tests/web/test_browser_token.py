"""The web page against a server that requires a bearer token (``xpuplan serve --host 0.0.0.0`` with
``XPUPLAN_TOKEN``): the page loads without one, asks for it once when a data call gets 401, keeps it
in sessionStorage and sends it on every call; a wrong token is asked for again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.web.conftest import serve
from xpuplan.i18n import catalogue

pytestmark = pytest.mark.browser

TOKEN = "browser-test-token-0123456789"


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from xpuplan.web.app import create_app

    url = f"sqlite:///{tmp_path_factory.mktemp('webtoken') / 'web.db'}"
    with serve(create_app(store_url=url, token=TOKEN, use_calibration=False)) as base:
        yield base


@pytest.fixture
def token_page(browser: Any, token_server: str) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.route("**/*", lambda route: route.continue_() if route.request.url.startswith(token_server)
              else route.fulfill(status=200, body=""))
    p = ctx.new_page()
    p.set_default_timeout(60_000)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    auth: list[tuple[str, str | None]] = []
    p.on("request", lambda r: auth.append((r.url, r.headers.get("authorization"))))
    p.js_errors = errors  # type: ignore[attr-defined]
    p.auth_headers = auth  # type: ignore[attr-defined]
    yield p
    ctx.close()


def test_page_asks_for_the_token_once_and_sends_it(token_page: Any, token_server: str, tmp_path: Path) -> None:
    page = token_page
    page.goto(token_server + "/")
    # the shell and its assets came without a token; the first data calls got 401 -> one dialog
    page.wait_for_selector("#token-dialog[open]")
    assert page.locator("#token-dialog").count() == 1
    assert "XPUPLAN_TOKEN" in page.inner_text("#token-dialog")
    page.fill("#token-input", "not-the-token")
    page.click("#token-ok")
    # a wrong token: asked again, saying so
    page.wait_for_selector("#token-dialog[open]")
    lang = "zh" if page.evaluate("document.documentElement.lang").startswith("zh") else "en"
    assert catalogue(lang)["web.auth.wrong"] in page.inner_text("#token-dialog")
    page.fill("#token-input", TOKEN)
    page.click("#token-ok")
    page.wait_for_selector("body[data-ready='1']")
    assert page.evaluate("sessionStorage.getItem('xpuplan.token')") == TOKEN
    # the form works: rank with the token, no further dialog
    page.select_option("#f-preset", "pretraining")
    page.fill("#f-samples", "30")
    page.click("#run")
    page.wait_for_selector("#ranking tbody tr")
    assert page.locator("#token-dialog").count() == 0
    data_calls = [(u, h) for u, h in page.auth_headers
                  if u.startswith(token_server + "/api/v1/") or u.startswith(token_server + "/ui/meta")]
    assert any(u.endswith("/api/v1/recommend") and h == f"Bearer {TOKEN}" for u, h in data_calls)
    # after the token was typed, every data call carried it
    last_prompt = max(i for i, (_, h) in enumerate(data_calls) if h != f"Bearer {TOKEN}")
    assert all(h == f"Bearer {TOKEN}" for _, h in data_calls[last_prompt + 1:])
    # the catalog page in the same tab reuses the stored token: no dialog
    page.goto(token_server + "/catalog")
    page.wait_for_selector("body[data-ready='1']")
    assert page.locator("#token-dialog").count() == 0
    assert not page.js_errors
    page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
