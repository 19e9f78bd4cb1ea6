"""Fixtures of the HTTP API tests: an app on a temporary SQLite store, calibration off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from xpuplan.api.app import create_app  # noqa: E402


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'api.db'}"


@pytest.fixture
def client(store_url: str) -> Iterator[TestClient]:
    app = create_app(store_url=store_url, use_calibration=False)
    with TestClient(app) as c:
        yield c
