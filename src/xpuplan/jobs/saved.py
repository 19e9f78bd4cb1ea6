"""Saved scenarios and background-job records, for the front ends that keep them (the HTTP API).

A thin application-layer door to :mod:`xpuplan.store` (front ends never import the store): a
:class:`Saved` opens the store at a URL (SQLite by default, any SQLAlchemy URL) on first use and
returns plain dicts, never ORM rows.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from xpuplan.errors import UserInputError

if TYPE_CHECKING:
    from xpuplan.store.engine import Store

#: Longest scenario name.
MAX_NAME_LEN = 200


def _scenario_dict(sc: Any, *, full: bool = True) -> dict[str, Any]:
    out = {"id": sc.id, "name": sc.name, "kind": sc.kind,
           "created_at": sc.created_at.isoformat() if sc.created_at else None, "note": sc.note,
           "has_result": sc.result is not None}
    if full:
        out.update(inputs=sc.inputs, result=sc.result)
    return out


class Saved:
    """Scenarios and job records in the store at ``db_url`` (None: ``XPUPLAN_DB_URL`` or the default file)."""

    def __init__(self, db_url: str | None = None) -> None:
        self.db_url = db_url
        self._store: Store | None = None
        self._lock = threading.Lock()

    @property
    def store(self) -> Store:
        with self._lock:
            if self._store is None:
                from xpuplan.store.engine import open_store

                self._store = open_store(self.db_url)
            return self._store

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.dispose()
                self._store = None

    # -- scenarios -----------------------------------------------------------------------------
    def save_scenario(self, name: str, kind: str, inputs: dict[str, Any], *, result: dict[str, Any] | None = None,
                      note: str | None = None) -> dict[str, Any]:
        from xpuplan.store.records import save_scenario

        if not name.strip() or len(name) > MAX_NAME_LEN:
            raise UserInputError(f"a name of 1 to {MAX_NAME_LEN} characters", field="name")
        sid = save_scenario(self.store, name.strip(), kind, inputs, result, note)
        return _scenario_dict(self._by_id(sid))

    def _by_id(self, sid: int) -> Any:
        from xpuplan.store.models import Scenario

        with self.store.session() as s:
            return s.get(Scenario, sid)

    def list_scenarios(self, kind: str | None = None) -> list[dict[str, Any]]:
        from xpuplan.store.records import list_scenarios

        return [_scenario_dict(sc, full=False) for sc in list_scenarios(self.store, kind=kind)]

    def get_scenario(self, ref: str) -> dict[str, Any] | None:
        """The scenario with id ``ref`` (digits), else the newest called ``ref``; None if neither."""
        from xpuplan.store.records import get_scenario

        sc = self._by_id(int(ref)) if ref.isdigit() and len(ref) < 18 else None
        if sc is None:
            try:
                sc = get_scenario(self.store, ref)
            except UserInputError:
                return None
        return _scenario_dict(sc)

    def scenario_names(self) -> list[str]:
        return [s["name"] for s in self.list_scenarios()]

    # -- background jobs -----------------------------------------------------------------------
    def create_job(self, job_id: str, kind: str, request: dict[str, Any]) -> dict[str, Any]:
        from xpuplan.store.jobs import create_job

        return create_job(self.store, job_id, kind, request).to_dict()

    def mark_running(self, job_id: str) -> None:
        from xpuplan.store.jobs import mark_running

        mark_running(self.store, job_id)

    def set_progress(self, job_id: str, progress: float) -> None:
        from xpuplan.store.jobs import set_progress

        set_progress(self.store, job_id, progress)

    def finish_job(self, job_id: str, status: str, *, result: dict[str, Any] | None = None,
                   error: dict[str, Any] | None = None) -> bool:
        from xpuplan.store.jobs import finish_job

        return finish_job(self.store, job_id, status, result=result, error=error)

    def get_job(self, job_id: str, *, with_payload: bool = False) -> dict[str, Any] | None:
        """The job's record (``with_payload``: also ``request``, ``result`` and ``error``); None if unknown."""
        from xpuplan.store.jobs import get_job

        rec = get_job(self.store, job_id)
        if rec is None:
            return None
        out = rec.to_dict()
        if with_payload:
            out.update(request=rec.request, result=rec.result, error=rec.error)
        return out

    def list_jobs(self, *, status: str | None = None, kind: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        from xpuplan.store.jobs import list_jobs

        return [r.to_dict() for r in list_jobs(self.store, status=status, kind=kind, limit=limit)]

    def interrupt_unfinished(self, exclude: frozenset[str] | set[str] = frozenset()) -> int:
        """Jobs queued or running in the store, but not ``exclude`` (alive here), -> ``interrupted``."""
        from xpuplan.store.jobs import interrupt_unfinished

        return interrupt_unfinished(self.store, exclude=exclude)
