"""SQLAlchemy 2 models of the store.

- :class:`Run`: one benchmark run or one imported file, with the device, software and clocks.
- :class:`Measurement`: one measured figure of a run (a GEMM shape, a bandwidth, a model step,
  a collective at one message size, a serving metric, an imported validation row).
- :class:`Calibration`: efficiency parameters fitted for one catalog device, with the fit report.
- :class:`Scenario`: a saved planner input and its result.
- :class:`JobRecord`: a background job of the HTTP API (its request, status, and result or error),
  so a restarted server loses no finished result.

Every change to these tables needs an Alembic revision in ``store/migrations/versions``; a test
checks that the migrated schema matches these models.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

#: Run statuses. ``running`` is left behind by a run that was killed; ``bench list`` shows it as
#: ``aborted`` when the process that wrote it is gone.
RUN_STATUSES = ("running", "completed", "failed", "interrupted")

#: Run kinds: measured here, or imported from another tool's output.
RUN_KINDS = ("bench", "collectives", "import-nccl-tests", "import-hccl-test", "import-vllm", "import-sglang",
             "import-trtllm", "import-mlperf-inference", "import-mlperf-training", "import-megatron",
             "import-torchtitan", "import-csv")

#: Imported runs that hold validation rows (``xpuplan validate --local RUN`` predicts them).
VALIDATION_ROW_KINDS = ("import-csv", "import-vllm", "import-sglang", "import-trtllm", "import-mlperf-inference",
                        "import-megatron", "import-torchtitan")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default="running")
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    #: Catalog id of the device the figures belong to (None when it could not be mapped).
    device_id: Mapped[str | None] = mapped_column(String(64), default=None)
    #: The name the driver reports ("NVIDIA H100 80GB HBM3", "AMD EPYC 9454").
    device_name: Mapped[str | None] = mapped_column(String(200), default=None)
    backend: Mapped[str | None] = mapped_column(String(32), default=None)
    n_devices: Mapped[int] = mapped_column(Integer, default=1)
    host: Mapped[str | None] = mapped_column(String(200), default=None)
    pid: Mapped[int | None] = mapped_column(Integer, default=None)
    #: Imported file (imports only).
    source: Mapped[str | None] = mapped_column(Text, default=None)
    #: Software versions, driver, clocks, threads.
    environment: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: How the run was made (quick, dtype, model config, message sizes ...).
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    note: Mapped[str | None] = mapped_column(Text, default=None)

    measurements: Mapped[list[Measurement]] = relationship(
        back_populates="run", order_by="Measurement.seq", cascade="all, delete-orphan", passive_deletes=True
    )

    __table_args__ = (Index("ix_runs_device_started", "device_id", "started_at"),)

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "device_id": self.device_id,
            "device_name": self.device_name,
            "backend": self.backend,
            "n_devices": self.n_devices,
            "host": self.host,
            "source": self.source,
            "note": self.note,
        }


class Measurement(Base):
    __tablename__ = "measurements"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    #: Position within the run (0, 1, 2 ...), unique per run.
    seq: Mapped[int] = mapped_column(Integer)
    #: gemm, membw, attention, overhead, model_step, collective, serving, validation_row
    kind: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(200))
    dtype: Mapped[str | None] = mapped_column(String(16), default=None)
    #: What ``value`` is (``time_s``, ``busbw_gb_per_s``, ``ttft_ms``, a validation metric ...).
    metric: Mapped[str] = mapped_column(String(64))
    value: Mapped[float] = mapped_column(Float)
    unit: Mapped[str] = mapped_column(String(32))
    #: Median seconds per operation where the measurement is a timing.
    time_s: Mapped[float | None] = mapped_column(Float, default=None)
    #: FLOP and bytes of one operation (perf's cost model), where defined.
    flops: Mapped[float | None] = mapped_column(Float, default=None)
    bytes: Mapped[float | None] = mapped_column(Float, default=None)
    #: Shape and settings (m, n, k; batch, heads, seq; message size; the raw CSV row ...).
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    run: Mapped[Run] = relationship(back_populates="measurements")

    __table_args__ = (
        UniqueConstraint("run_id", "seq", name="uq_measurements_run_seq"),
        Index("ix_measurements_run_kind", "run_id", "kind"),
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "name": self.name,
            "dtype": self.dtype,
            "metric": self.metric,
            "value": self.value,
            "unit": self.unit,
            "time_s": self.time_s,
            "flops": self.flops,
            "bytes": self.bytes,
            "params": self.params,
        }


class Calibration(Base):
    __tablename__ = "calibrations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    device_id: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    #: Runs whose measurements were fitted.
    run_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)
    #: ``Efficiency.model_dump()`` of the fitted profile.
    efficiency: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: Per parameter: fitted value, default, points used, residual error.
    report: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    note: Mapped[str | None] = mapped_column(Text, default=None)

    __table_args__ = (Index("ix_calibrations_device_created", "device_id", "created_at"),)


class Scenario(Base):
    __tablename__ = "scenarios"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    #: train, infer, fleet, compare ...
    kind: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    note: Mapped[str | None] = mapped_column(Text, default=None)

    __table_args__ = (Index("ix_scenarios_name", "name"),)


#: Statuses of a background job. ``interrupted``: the server stopped while it was queued or running.
JOB_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")
#: Statuses after which a job never changes.
JOB_FINAL = ("succeeded", "failed", "cancelled", "interrupted")


class JobRecord(Base):
    __tablename__ = "jobs"

    #: Random hex id (uuid4), as in the job's URL.
    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: What ran: a job kind of the API (``recommend``, ``train.search``, ``simulate`` ...).
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    #: Fraction done, 0..1 (as last stored).
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), default=None)
    #: The request body as received (validated).
    request: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: The result document (``--json``) of a succeeded job.
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)
    #: ``{"status": HTTP status, "body": {"error", "field", "hint", ...}}`` of a failed job.
    error: Mapped[dict[str, Any] | None] = mapped_column(JSON, default=None)

    __table_args__ = (Index("ix_jobs_status_created", "status", "created_at"),)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "status": self.status,
            "progress": self.progress,
            "created_at": _iso(self.created_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
        }


def _iso(t: datetime | None) -> str | None:
    """ISO 8601 in UTC (SQLite returns naive datetimes for the UTC values written)."""
    if t is None:
        return None
    return (t if t.tzinfo is not None else t.replace(tzinfo=UTC)).isoformat()
