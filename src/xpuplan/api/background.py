"""Background jobs: long requests (a search over large clusters, a simulation, a Monte Carlo
recommendation) run in a small thread pool; the client polls ``GET /api/v1/jobs/{id}``.

Every job is a row of the store (:mod:`xpuplan.jobs.saved`): created ``queued``, then ``running``
with its progress, then ``succeeded`` with the result document, ``failed`` with the error (and the
HTTP status a direct call would have returned), or ``cancelled``. Results are written once, in one
transaction, so a restarted server still serves every finished result; jobs that were queued or
running when the server stopped are marked ``interrupted`` at the next start.

Cancelling a queued job removes it from the queue. A running job is cancelled at its next progress
report (training search: after each device count; simulation: every few simulated seconds); a job
kind that reports no progress runs to its end and its result is discarded.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from xpuplan.api.errors import error_body
from xpuplan.api.metrics import Metrics
from xpuplan.api.planning import RUNNERS
from xpuplan.errors import InfeasibleError, UserInputError, XpuplanError
from xpuplan.jobs.context import RunContext
from xpuplan.jobs.saved import Saved

log = logging.getLogger("xpuplan.api")

#: Worker threads running background jobs.
DEFAULT_WORKERS: Final = 2
#: Jobs queued or running at once; more are refused with 429.
MAX_PENDING: Final = 64
#: Seconds between two progress writes to the store (progress is kept in memory in between).
PROGRESS_WRITE_S: Final = 1.0


class JobCancelled(Exception):
    """Raised from a job's progress callback once the job is cancelled."""


class TooManyJobs(Exception):
    """More than :data:`MAX_PENDING` jobs queued or running (429)."""


@dataclass
class Handle:
    """A job of this process."""

    id: str
    kind: str
    status: str = "queued"
    progress: float = 0.0
    cancel: threading.Event = field(default_factory=threading.Event)
    future: Future[None] | None = None
    written_at: float = 0.0


class Background:
    """The pool, the live handles and the store of one app."""

    def __init__(self, saved: Saved, ctx: RunContext, metrics: Metrics, *, workers: int = DEFAULT_WORKERS) -> None:
        self.saved, self.ctx, self.metrics = saved, ctx, metrics
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._live: dict[str, Handle] = {}
        self._lock = threading.Lock()

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """At server start: jobs left queued or running by a previous server are ``interrupted``."""
        with self._lock:
            mine = set(self._live)
        n = self.saved.interrupt_unfinished(exclude=mine)
        if n:
            log.warning("%d background job(s) of a previous server marked interrupted", n)

    def shutdown(self) -> None:
        """At server stop: cancel every job of this process; the pool is made again on the next submit."""
        with self._lock:
            handles = list(self._live.values())
            pool, self._pool = self._pool, None
        for h in handles:
            h.cancel.set()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        for h in handles:
            if h.future is not None and h.future.cancelled():
                self._finish(h, "cancelled")

    def counts(self) -> dict[str, int]:
        with self._lock:
            out: dict[str, int] = {}
            for h in self._live.values():
                out[h.status] = out.get(h.status, 0) + 1
            return out

    # -- submit / run ----------------------------------------------------------------------------
    def submit(self, kind: str, body: BaseModel) -> dict[str, Any]:
        with self._lock:
            if len(self._live) >= MAX_PENDING:
                raise TooManyJobs
            job_id = uuid.uuid4().hex
            handle = Handle(id=job_id, kind=kind)
            self._live[job_id] = handle
        try:
            record = self.saved.create_job(job_id, kind, body.model_dump(mode="json"))
        except Exception:
            with self._lock:
                self._live.pop(job_id, None)
            raise
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="xpuplan-job")
            handle.future = self._pool.submit(self._run, handle, body)
        return record

    def _progress(self, handle: Handle) -> Any:
        def report(fraction: float) -> None:
            if handle.cancel.is_set():
                raise JobCancelled
            handle.progress = max(0.0, min(1.0, float(fraction)))
            now = time.monotonic()
            if now - handle.written_at >= PROGRESS_WRITE_S:
                handle.written_at = now
                self.saved.set_progress(handle.id, handle.progress)

        return report

    def _finish(self, handle: Handle, status: str, *, result: dict[str, Any] | None = None,
                error: dict[str, Any] | None = None) -> None:
        try:
            self.saved.finish_job(handle.id, status, result=result, error=error)
        except Exception:  # the store went away: the record stays 'running' and becomes 'interrupted'
            log.exception("cannot record the end of job %s", handle.id)
        self.metrics.job_finished(handle.kind, status)
        with self._lock:
            handle.status = status
            self._live.pop(handle.id, None)

    def _run(self, handle: Handle, body: BaseModel) -> None:
        if handle.cancel.is_set():
            self._finish(handle, "cancelled")
            return
        handle.status = "running"
        try:
            self.saved.mark_running(handle.id)
            result = RUNNERS[handle.kind].execute(body, self.ctx, self._progress(handle))
            document = result.to_dict()
        except JobCancelled:
            self._finish(handle, "cancelled")
            return
        except InfeasibleError as exc:
            payload: dict[str, Any] = exc.to_dict()
            if exc.result is not None and hasattr(exc.result, "to_dict"):
                payload["result"] = exc.result.to_dict()
            self._finish(handle, "failed", error={"status": 409, "body": payload})
            return
        except UserInputError as exc:
            self._finish(handle, "failed", error={"status": 422, "body": error_body(exc)})
            return
        except XpuplanError as exc:
            self._finish(handle, "failed", error={"status": 422, "body": {"error": str(exc), "field": None,
                                                                          "hint": None}})
            return
        except Exception as exc:
            log.exception("background job %s (%s) failed", handle.id, handle.kind)
            self._finish(handle, "failed", error={"status": 500, "body": {
                "error": f"internal error ({type(exc).__name__}); please report it", "field": None, "hint": None}})
            return
        if handle.cancel.is_set():
            self._finish(handle, "cancelled")
        else:
            self._finish(handle, "succeeded", result=document)

    # -- queries ---------------------------------------------------------------------------------
    def status(self, job_id: str, *, with_payload: bool = False) -> dict[str, Any] | None:
        rec = self.saved.get_job(job_id, with_payload=with_payload)
        if rec is None:
            return None
        with self._lock:
            h = self._live.get(job_id)
            if h is not None and rec["status"] in ("queued", "running"):
                rec["status"] = h.status if h.status in ("queued", "running") else rec["status"]
                rec["progress"] = max(rec["progress"], h.progress)
                rec["cancel_requested"] = h.cancel.is_set()
        return rec

    def cancel(self, job_id: str) -> dict[str, Any] | None:
        with self._lock:
            h = self._live.get(job_id)
        if h is not None:
            h.cancel.set()
            if h.future is not None and h.future.cancel():  # still queued: it never runs
                self._finish(h, "cancelled")
        return self.status(job_id)

    def known_ids(self, limit: int = 200) -> list[str]:
        return [r["id"] for r in self.saved.list_jobs(limit=limit)]
