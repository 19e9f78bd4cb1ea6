"""Background-job records of the HTTP API: one row per job, each change one transaction.

A job is created ``queued``, becomes ``running``, and ends ``succeeded`` (with its result),
``failed`` (with its error), ``cancelled``, or ``interrupted`` (the server stopped first:
:func:`interrupt_unfinished` marks those at start-up). Finished rows are never changed again, so a
restart loses no finished result.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, select, update

from xpuplan.store.engine import Store
from xpuplan.store.models import JOB_FINAL, JOB_STATUSES, JobRecord, utcnow


def create_job(store: Store, job_id: str, kind: str, request: dict[str, Any]) -> JobRecord:
    with store.transaction() as s:
        rec = JobRecord(id=job_id, kind=kind, status="queued", progress=0.0, request=request, created_at=utcnow())
        s.add(rec)
        s.flush()
        return rec


def mark_running(store: Store, job_id: str) -> None:
    with store.transaction() as s:
        s.execute(update(JobRecord).where(JobRecord.id == job_id, JobRecord.status == "queued")
                  .values(status="running", started_at=utcnow()))


def set_progress(store: Store, job_id: str, progress: float) -> None:
    with store.transaction() as s:
        s.execute(update(JobRecord).where(JobRecord.id == job_id, JobRecord.status == "running")
                  .values(progress=max(0.0, min(1.0, progress))))


def finish_job(store: Store, job_id: str, status: str, *, result: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None) -> bool:
    """Record the end of a job (once: a job already finished is left as it is); True if recorded."""
    assert status in JOB_FINAL, status
    with store.transaction() as s:
        res = s.execute(update(JobRecord).where(JobRecord.id == job_id, JobRecord.status.not_in(JOB_FINAL))
                        .values(status=status, finished_at=utcnow(), result=result, error=error,
                                progress=1.0 if status == "succeeded" else JobRecord.progress))
        return bool(getattr(res, "rowcount", 0))


def get_job(store: Store, job_id: str) -> JobRecord | None:
    with store.session() as s:
        return s.get(JobRecord, job_id)


def list_jobs(store: Store, *, status: str | None = None, kind: str | None = None, limit: int = 100) -> list[JobRecord]:
    assert status is None or status in JOB_STATUSES, status
    q = select(JobRecord).order_by(JobRecord.created_at.desc()).limit(limit)
    if status:
        q = q.where(JobRecord.status == status)
    if kind:
        q = q.where(JobRecord.kind == kind)
    with store.session() as s:
        return list(s.scalars(q))


def interrupt_unfinished(store: Store, *, exclude: Collection[str] = ()) -> int:
    """Mark every queued or running job ``interrupted`` (at start-up: whoever ran them is gone),
    except the jobs ``exclude`` (still alive in this process)."""
    cond: ColumnElement[bool] = JobRecord.status.in_(("queued", "running"))
    if exclude:
        cond = cond & JobRecord.id.not_in(list(exclude))
    with store.transaction() as s:
        res = s.execute(update(JobRecord).where(cond)
                        .values(status="interrupted", finished_at=utcnow(),
                                error={"status": 409, "body": {"error": "the server stopped before the job finished; "
                                                                         "submit it again", "field": None,
                                                               "hint": None}}))
        return int(getattr(res, "rowcount", 0) or 0)
