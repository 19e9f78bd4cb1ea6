"""Calibration profiles as stored: fitted efficiency parameters per catalog device, raw.

The store only persists and returns rows; turning a row into the efficiency a planner uses
(laying it over the assumptions' defaults) is :mod:`xpuplan.calibrate.profile`'s job.
:func:`latest_calibration_row` is what jobs call (through ``xpuplan.calibrate``) before a run, so it
is cheap and cannot fail: no database file -> None without importing SQLAlchemy and without
creating anything; any database or data problem -> None (logged).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from xpuplan.store.paths import db_url_or_default, is_sqlite, sqlite_file

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy import Engine

    from xpuplan.catalog.efficiency import Efficiency
    from xpuplan.store.engine import Store
    from xpuplan.store.models import Calibration

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CalibrationRow:
    """One stored calibration, as stored: ``efficiency`` is the raw mapping of fitted values."""

    id: int
    device_id: str
    created_at: str
    run_ids: tuple[Any, ...]
    efficiency: dict[str, Any] = field(default_factory=dict)
    note: str | None = None


def profile_source(cal_id: int, device_id: str, created: str, run_ids: list[Any] | tuple[Any, ...]) -> str:
    """Provenance label of a stored profile: ``calibration:#12 for <device> (<when>, runs 3,4)``."""
    runs = ",".join(str(r) for r in run_ids) or "-"
    return f"calibration:#{cal_id} for {device_id} ({created[:19]}, runs {runs})"


#: Seconds a look-up waits for a database server before going on without a profile.
CONNECT_TIMEOUT_S = 3
#: Stores that failed in this process: not retried (a job may ask for many devices).
_FAILED: set[str] = set()


@lru_cache(maxsize=8)
def _engine(url: str) -> Engine:
    from sqlalchemy import create_engine

    connect_args: dict[str, Any] = {}
    if url.startswith(("postgresql", "mysql", "mariadb")):
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    return create_engine(url, connect_args=connect_args)


def latest_calibration_row(device_id: str, db_url: str | None = None) -> CalibrationRow | None:
    """The newest calibration stored for ``device_id``, raw, or None.

    Returns None at once when the store is a SQLite file that does not exist; never creates a
    database; any error reading it is logged and gives None (a run must not break because a
    calibration database is unreadable).
    """
    url = db_url_or_default(db_url)
    if url in _FAILED:
        return None
    if is_sqlite(url):
        path = sqlite_file(url)
        if path is None or not path.is_file():
            return None
    try:
        from sqlalchemy import text

        with _engine(url).connect() as conn:
            row = conn.execute(
                text(
                    "SELECT id, efficiency, created_at, run_ids, note FROM calibrations WHERE device_id = :d "
                    "ORDER BY created_at DESC, id DESC LIMIT 1"
                ),
                {"d": device_id},
            ).first()
        if row is None:
            return None
        eff = row[1] if isinstance(row[1], dict) else json.loads(row[1])
        run_ids = row[3] if isinstance(row[3], list) else json.loads(row[3] or "[]")
        return CalibrationRow(id=int(row[0]), device_id=device_id, created_at=str(row[2]), run_ids=tuple(run_ids),
                              efficiency=dict(eff), note=row[4])
    except Exception as exc:  # noqa: BLE001 - a broken store must never break a run
        _FAILED.add(url)
        log.warning("ignoring the calibration store %s (%s); runs use default efficiencies",
                    url, str(exc).splitlines()[0][:200])
        return None


def save_calibration(store: Store, device_id: str, efficiency: Efficiency, *, run_ids: list[int],
                     report: dict[str, Any], note: str | None = None) -> tuple[int, Efficiency]:
    """Store a fitted profile; returns its id and the profile with its ``source`` set."""
    from xpuplan.store.models import Calibration, utcnow

    with store.transaction() as s:
        created = utcnow()
        cal = Calibration(device_id=device_id, created_at=created, run_ids=list(run_ids),
                          efficiency=efficiency.model_dump(), report=report, note=note)
        s.add(cal)
        s.flush()
        source = profile_source(cal.id, device_id, created.isoformat(sep=" "), list(run_ids))
        final = efficiency.merged({}, source)
        cal.efficiency = final.model_dump()
        return cal.id, final


def list_calibrations(store: Store, device_id: str | None = None) -> list[Calibration]:
    from sqlalchemy import select

    from xpuplan.store.models import Calibration

    q = select(Calibration).order_by(Calibration.created_at.desc(), Calibration.id.desc())
    if device_id:
        q = q.where(Calibration.device_id == device_id)
    with store.session() as s:
        return list(s.scalars(q))
