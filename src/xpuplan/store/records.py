"""Reading and writing runs, measurements and scenarios.

Each write is one transaction: :func:`add_measurement` commits one measurement (a killed run keeps
every measurement it finished), :func:`record_import` commits an imported file's run and all its
measurements together (an import is all or nothing).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, select

from xpuplan.errors import UserInputError
from xpuplan.store.engine import Store
from xpuplan.store.models import RUN_KINDS, Measurement, Run, Scenario, utcnow

#: ``RUN`` arguments accept this for the newest run (optionally ``latest:KIND``).
LATEST = "latest"


@dataclass(frozen=True)
class Record:
    """One measurement to store (the store-independent form the benchmarks and importers build)."""

    kind: str
    name: str
    metric: str
    value: float
    unit: str
    dtype: str | None = None
    time_s: float | None = None
    flops: float | None = None
    bytes: float | None = None
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunInfo:
    """What is known about a run when it starts."""

    kind: str
    device_id: str | None = None
    device_name: str | None = None
    backend: str | None = None
    n_devices: int = 1
    environment: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        assert self.kind in RUN_KINDS, f"unknown run kind {self.kind!r}"


def _new_run(info: RunInfo, status: str) -> Run:
    return Run(
        kind=info.kind, status=status, started_at=utcnow(), device_id=info.device_id, device_name=info.device_name,
        backend=info.backend, n_devices=info.n_devices, host=socket.gethostname(), pid=os.getpid(),
        source=info.source, environment=dict(info.environment), config=dict(info.config), note=info.note,
    )


def _measurement(run_id: int, seq: int, r: Record) -> Measurement:
    return Measurement(
        run_id=run_id, seq=seq, kind=r.kind, name=r.name, dtype=r.dtype, metric=r.metric, value=float(r.value),
        unit=r.unit, time_s=r.time_s, flops=r.flops, bytes=r.bytes, params=dict(r.params), created_at=utcnow(),
    )


def start_run(store: Store, info: RunInfo) -> int:
    """Create a run in state ``running``; returns its id."""
    with store.transaction() as s:
        run = _new_run(info, "running")
        s.add(run)
        s.flush()
        return run.id


def add_measurement(store: Store, run_id: int, record: Record) -> int:
    """Append one measurement to a run in its own transaction; returns its sequence number."""
    with store.transaction() as s:
        seq = s.scalar(select(func.coalesce(func.max(Measurement.seq) + 1, 0)).where(Measurement.run_id == run_id))
        s.add(_measurement(run_id, int(seq or 0), record))
        return int(seq or 0)


def finish_run(store: Store, run_id: int, status: str = "completed", note: str | None = None) -> None:
    with store.transaction() as s:
        run = s.get(Run, run_id)
        assert run is not None, f"run {run_id} vanished"
        run.status = status
        run.finished_at = utcnow()
        if note:
            run.note = f"{run.note}; {note}" if run.note else note


def record_import(store: Store, info: RunInfo, records: Sequence[Record]) -> int:
    """Store an imported file as one completed run with all its measurements (one transaction)."""
    with store.transaction() as s:
        run = _new_run(info, "completed")
        run.finished_at = run.started_at
        s.add(run)
        s.flush()
        for i, r in enumerate(records):
            s.add(_measurement(run.id, i, r))
        return run.id


def resolve_run(store: Store, ref: str | int, *, kinds: Iterable[str] | None = None) -> Run:
    """A run by id, or ``latest`` / ``latest:KIND`` (newest first); unknown -> UserInputError."""
    kinds = tuple(kinds) if kinds else None
    text = str(ref).strip()
    with store.session() as s:
        if text.lower().startswith(LATEST):
            _, _, kind = text.partition(":")
            q = select(Run).order_by(Run.started_at.desc(), Run.id.desc()).limit(1)
            if kind:
                q = q.where(Run.kind == kind)
            elif kinds:
                q = q.where(Run.kind.in_(kinds))
            run = s.scalars(q).first()
            if run is None:
                what = f" of kind {kind or ' or '.join(kinds or ())}" if (kind or kinds) else ""
                raise UserInputError(f"no runs{what} in the store ({store.display_url})", field="run")
            return run
        try:
            run_id = int(text)
        except ValueError:
            raise UserInputError(f"expected a run id (an integer) or 'latest', got {text!r}", field="run") from None
        run = s.get(Run, run_id)
        if run is None:
            raise UserInputError(f"unknown run {run_id} in {store.display_url}; see `xpuplan bench list`", field="run")
        return run


def list_runs(store: Store, *, kind: str | None = None, device_id: str | None = None, limit: int = 50) -> list[Run]:
    q = select(Run).order_by(Run.started_at.desc(), Run.id.desc()).limit(limit)
    if kind:
        q = q.where(Run.kind == kind)
    if device_id:
        q = q.where(Run.device_id == device_id)
    with store.session() as s:
        return list(s.scalars(q))


def count_measurements(store: Store, run_ids: Sequence[int]) -> dict[int, int]:
    if not run_ids:
        return {}
    q = select(Measurement.run_id, func.count()).where(Measurement.run_id.in_(run_ids)).group_by(Measurement.run_id)
    with store.session() as s:
        return {int(r): int(n) for r, n in s.execute(q)}


def run_measurements(store: Store, run_id: int, *, kind: str | None = None) -> list[Measurement]:
    q = select(Measurement).where(Measurement.run_id == run_id).order_by(Measurement.seq)
    if kind:
        q = q.where(Measurement.kind == kind)
    with store.session() as s:
        return list(s.scalars(q))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def effective_status(run: Run) -> str:
    """``aborted`` for a ``running`` run whose process (on this host) no longer exists."""
    if run.status == "running" and run.pid and run.host == socket.gethostname() and not _pid_alive(run.pid):
        return "aborted"
    return run.status


# -- scenarios ---------------------------------------------------------------------------------
def save_scenario(store: Store, name: str, kind: str, inputs: dict[str, Any], result: dict[str, Any] | None = None,
                  note: str | None = None) -> int:
    """Save a planner input (and its result) under ``name``; returns the scenario id."""
    if not name.strip():
        raise UserInputError("scenario name must not be empty", field="name")
    with store.transaction() as s:
        sc = Scenario(name=name, kind=kind, inputs=inputs, result=result, note=note, created_at=utcnow())
        s.add(sc)
        s.flush()
        return sc.id


def list_scenarios(store: Store, *, kind: str | None = None) -> list[Scenario]:
    q = select(Scenario).order_by(Scenario.created_at.desc(), Scenario.id.desc())
    if kind:
        q = q.where(Scenario.kind == kind)
    with store.session() as s:
        return list(s.scalars(q))


def get_scenario(store: Store, ref: str | int) -> Scenario:
    """Newest scenario called ``ref``, or the scenario with that id."""
    with store.session() as s:
        sc = s.scalars(select(Scenario).where(Scenario.name == str(ref)).order_by(Scenario.id.desc())).first()
        if sc is None and str(ref).isdigit():
            sc = s.get(Scenario, int(ref))
        if sc is None:
            raise UserInputError(f"unknown scenario {ref!r}", field="scenario")
        return sc
