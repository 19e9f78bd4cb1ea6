from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

#: ../shared/validation next to the repository root (the project's published measurements); the
#: package ships a copy (xpuplan/validate/data), which the tests use and check identical to it.
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
VALIDATION_DIR = SHARED / "validation"

# Never read or write the user's store (calibration profiles, runs) or pick up their override
# files: the data directory is a temporary one for the whole session. Planners do not read the
# store or the environment at all; this keeps the jobs layer and the CLI hermetic too.
_DATA_HOME = tempfile.mkdtemp(prefix="xpuplan-test-data-")
atexit.register(shutil.rmtree, _DATA_HOME, ignore_errors=True)
os.environ["XDG_DATA_HOME"] = _DATA_HOME
os.environ["XPUPLAN_TEST_DATA_HOME"] = _DATA_HOME
for _var in ("XPUPLAN_DB_URL", "XPUPLAN_ASSUMPTIONS_PATH", "XPUPLAN_HARDWARE_PATH", "XPUPLAN_MODEL_PATH",
             "XPUPLAN_PRICES_PATH"):
    os.environ.pop(_var, None)


@pytest.fixture
def no_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planner tests that must see the built-in efficiencies only, whatever a profile in the store says
    (``XPUPLAN_USE_CALIBRATION=0``); the modules that need it mark themselves with
    ``pytestmark = pytest.mark.usefixtures("no_calibration")``."""
    monkeypatch.setenv("XPUPLAN_USE_CALIBRATION", "0")


@pytest.fixture
def validation_dir() -> Path:
    """The public validation files shipped in the package; a test that cannot find them fails."""
    from xpuplan.validate.data_files import data_dir

    d = data_dir()
    assert (d / "training_public.csv").is_file(), f"packaged validation data missing at {d}"
    return d


@pytest.fixture
def api_client(tmp_path: Path) -> Iterator[Any]:
    """The HTTP API on a temporary store, calibration off, for tests outside tests/api (skipped without the api
    extra: FastAPI, httpx)."""
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from xpuplan.api.app import create_app

    with TestClient(create_app(store_url=f"sqlite:///{tmp_path / 'api.db'}", use_calibration=False)) as c:
        yield c


@pytest.fixture
def db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A temporary SQLite store, also the one the CLI opens (``XPUPLAN_DB_URL``) during the test."""
    from xpuplan.store import paths

    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv(paths.ENV_DB_URL, url)
    return url
