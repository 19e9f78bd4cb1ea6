"""Calibration profiles: fitted efficiency parameters per catalog device.

:func:`latest_profile` is what the planners call (through ``xpuplan.calibration``) on every
run, so it is cheap and cannot fail: no database file -> None without importing SQLAlchemy
and without creating anything; any database or data problem -> None (logged).
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from xpuplan.perf.efficiency import Efficiency
from xpuplan.store.paths import db_url_or_default, is_sqlite, sqlite_file

if TYPE_CHECKING:  # pragma: no cover
    from sqlalchemy import Engine

    from xpuplan.store.engine import Store
    from xpuplan.store.models import Calibration

log = logging.getLogger(__name__)


def profile_from_stored(device_id: str, stored: dict[str, Any], source: str) -> Efficiency:
    """Stored fitted values laid over today's defaults for the device.

    Only fields ``Efficiency`` still has are taken, so a profile saved by an older xpuplan keeps
    working when parameters are added.
    """
    from xpuplan.catalog import load_catalog
    from xpuplan.perf.efficiency import efficiency_for

    base = efficiency_for(load_catalog().get(device_id))
    known = {k: v for k, v in stored.items() if k in Efficiency.model_fields and k != "source"}
    return base.merged(known, source)


def profile_source(cal_id: int, device_id: str, created: str, run_ids: list[Any]) -> str:
    runs = ",".join(str(r) for r in run_ids) or "-"
    return f"calibration #{cal_id} for {device_id} ({created[:19]}, runs {runs})"


#: Seconds a planner waits for a database server before going on without a profile.
CONNECT_TIMEOUT_S = 3
#: Stores that failed in this process: not retried (a planner may ask for many devices).
_FAILED: set[str] = set()


@lru_cache(maxsize=8)
def _engine(url: str) -> Engine:
    from sqlalchemy import create_engine

    connect_args: dict[str, Any] = {}
    if url.startswith(("postgresql", "mysql", "mariadb")):
        connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    return create_engine(url, connect_args=connect_args)


def latest_profile(device_id: str, db_url: str | None = None) -> Efficiency | None:
    """The newest calibration profile stored for ``device_id``, or None.

    Returns None at once when the store is a SQLite file that does not exist; never creates a
    database; any error reading it is logged and gives None (a planner must not break because a
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
                    "SELECT id, efficiency, created_at, run_ids FROM calibrations WHERE device_id = :d "
                    "ORDER BY created_at DESC, id DESC LIMIT 1"
                ),
                {"d": device_id},
            ).first()
        if row is None:
            return None
        import json

        eff = row[1] if isinstance(row[1], dict) else json.loads(row[1])
        run_ids = row[3] if isinstance(row[3], list) else json.loads(row[3] or "[]")
        return profile_from_stored(device_id, eff, profile_source(int(row[0]), device_id, str(row[2]), run_ids))
    except Exception as exc:  # noqa: BLE001 - a broken store must never break a planner
        _FAILED.add(url)
        log.warning("ignoring the calibration store %s (%s); planners use default efficiencies",
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
