"""Fixtures of the HTTP API tests: an app on a temporary SQLite store, calibration off.

Without the ``api`` extra (FastAPI, httpx) these tests are not collected: the core runs without it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if any(importlib.util.find_spec(m) is None for m in ("fastapi", "httpx", "multipart")):
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'api.db'}"


@pytest.fixture
def client(store_url: str) -> Iterator[Any]:
    from fastapi.testclient import TestClient

    from xpuplan.api.app import create_app

    app = create_app(store_url=store_url, use_calibration=False)
    with TestClient(app) as c:
        yield c
