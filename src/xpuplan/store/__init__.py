"""Measurement store: benchmark runs, measurements, calibration profiles and saved scenarios.

SQLite in the user's data directory by default (``~/.local/share/xpuplan/xpuplan.db``, honouring
``XDG_DATA_HOME``); any SQLAlchemy URL through ``--db`` or ``XPUPLAN_DB_URL``. The schema is
managed by Alembic migrations shipped in ``store/migrations``.

This package is imported lazily: ``import xpuplan.store`` does not import SQLAlchemy, so the
jobs layer's cheap look-up of a stored calibration (:func:`xpuplan.store.calibrations.latest_calibration_row`,
raw values; :mod:`xpuplan.calibrate.profile` turns them into efficiencies) costs nothing when there
is no database. Planners never read the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xpuplan.store.paths import ENV_DB_URL, db_url_or_default, default_db_path, default_db_url

if TYPE_CHECKING:  # pragma: no cover
    from xpuplan.store.engine import Store, open_store
    from xpuplan.store.models import Calibration, Measurement, Run, Scenario

__all__ = [
    "ENV_DB_URL",
    "Calibration",
    "Measurement",
    "Run",
    "Scenario",
    "Store",
    "db_url_or_default",
    "default_db_path",
    "default_db_url",
    "open_store",
]

_LAZY = {
    "Store": "xpuplan.store.engine",
    "open_store": "xpuplan.store.engine",
    "Calibration": "xpuplan.store.models",
    "Measurement": "xpuplan.store.models",
    "Run": "xpuplan.store.models",
    "Scenario": "xpuplan.store.models",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'xpuplan.store' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
