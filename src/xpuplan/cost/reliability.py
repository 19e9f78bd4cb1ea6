"""Reliability at scale: failures, checkpointing, the Young/Daly interval, goodput, effective time.

Model (Daly 2006): failures arrive as a Poisson process with rate ``lambda = failures per
device-hour * devices``, so the job's mean time between failures is ``M = 1/lambda``. Every ``tau``
seconds of work the job writes a checkpoint taking ``delta`` seconds; after a failure it restarts in
``R`` seconds (reading the checkpoint back, at least) and redoes the work since the last checkpoint.
The expected wall time for ``T_s`` seconds of failure-free work is

    T_wall = M * exp(R/M) * (exp((tau + delta)/M) - 1) * T_s / tau

and goodput is ``T_s / T_wall``. When goodput falls below :data:`MIN_GOODPUT` (checkpoint writes or
restarts far longer than ``M``: almost no segment of work survives to its next checkpoint) the job
effectively never completes; :func:`reliability` says so with an ``InfeasibleError`` rather than
report an astronomically long (or overflowing) expected time. Young's (1974) first-order optimum is ``tau = sqrt(2 delta M)``;
Daly's higher-order one (used by default) is
``tau = sqrt(2 delta M) * (1 + sqrt(delta/(2M))/3 + (delta/(2M))/9) - delta`` for ``delta < 2M``, else ``M``.

Default failure rate: the Llama 3 405B pre-training run saw 419 unexpected interruptions in a
54-day window on 16,384 H100 GPUs (Llama Team, 'The Llama 3 Herd of Models', arXiv:2407.21783,
2024, section 3.3.4), i.e. 419 / (54 * 24 * 16,384) = 1.97e-5 per device-hour.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from xpuplan import units
from xpuplan.cost.model import SCHEMA_VERSION
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.perf.power import PowerAssumption

_LLAMA3 = (
    "Llama Team, AI @ Meta, 'The Llama 3 Herd of Models', arXiv:2407.21783, 2024-07, "
    "https://arxiv.org/abs/2407.21783 (419 unexpected interruptions in 54 days on 16,384 H100; storage "
    "(Tectonic) 2 TB/s sustained, 7 TB/s peak); also DatacenterDynamics, 2024-07, "
    "https://www.datacenterdynamics.com/en/news/meta-report-details-hundreds-of-gpu-and-hbm3-related-"
    "interruptions-to-llama-3-training-run"
)
_DALY = (
    "J. T. Daly, 'A higher order estimate of the optimum checkpoint interval for restart dumps', "
    "Future Generation Computer Systems 22(3), 2006, doi:10.1016/j.future.2004.11.016; J. W. Young, "
    "'A first order approximation to the optimum checkpoint interval', CACM 17(9), 1974, doi:10.1145/361147.361115"
)

FAILURES_PER_DEVICE_HOUR = PowerAssumption(
    name="failures_per_device_hour",
    value=419 / (54 * 24 * 16384),
    low=419 / (54 * 24 * 16384),
    high=419 / (54 * 24 * 16384),
    unit="1/(device*h)",
    source=_LLAMA3,
    trust="B",
    note="unexpected interruptions of a 16k-GPU synchronous job (GPU, HBM, network, host); one run, one fleet",
)

STORAGE_BYTES_PER_S_PER_DEVICE = PowerAssumption(
    name="storage_bytes_per_s_per_device",
    value=2e12 / 16384,
    low=2e12 / 16384,
    high=7e12 / 16384,
    unit="B/s per device",
    source=_LLAMA3,
    trust="C",
    note="Meta's 2 TB/s sustained (7 TB/s peak) checkpoint storage for 16,384 GPUs, scaled per device; "
    "give your own storage bandwidth",
)

CHECKPOINT_BYTES_PER_PARAM = PowerAssumption(
    name="checkpoint_bytes_per_param",
    value=14.0,
    low=2.0,
    high=16.0,
    unit="B/param",
    source="mixed-precision Adam: bf16 weights (2) + fp32 master weights (4) + fp32 Adam moments (8)",
    trust="B",
    note="2 for weights only; 16 if fp32 gradients are saved too",
)

#: Least goodput (useful share of the expected wall time) reported as a run: below it (e.g. a restart
#: ~4.6x the job's MTBF, so that fewer than 1 in 100 restarts completes before the next failure) the job
#: effectively never completes and :func:`reliability` raises ``InfeasibleError``.
MIN_GOODPUT = 0.01


class ReliabilityResult(BaseModel):
    """Expected effect of failures and checkpointing on a job (seconds, dimensionless)."""

    model_config = ConfigDict(frozen=True)

    schema_version: str = SCHEMA_VERSION
    kind: str = "reliability"
    devices: int
    failures_per_device_hour: float
    job_mtbf_s: float | None = Field(description="None: no failures (rate 0)")
    checkpoint_bytes: float
    storage_bytes_per_s: float
    checkpoint_write_s: float
    restart_s: float
    interval_s: float
    interval_rule: str
    failure_free_time_s: float
    effective_time_s: float
    goodput: float
    expected_failures: float
    checkpoint_overhead_fraction: float
    assumptions: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


def job_mtbf_s(failures_per_device_hour: float, devices: int) -> float:
    """Mean time between failures of a job spanning ``devices`` (s); any device failing stops it."""
    if failures_per_device_hour <= 0:
        return math.inf
    return units.HOUR / (failures_per_device_hour * devices)


def checkpoint_write_s(checkpoint_bytes: float, storage_bytes_per_s: float) -> float:
    """Seconds to write a checkpoint of ``checkpoint_bytes`` at ``storage_bytes_per_s``."""
    if storage_bytes_per_s <= 0:
        raise UserInputError(f"must be > 0, got {storage_bytes_per_s!r}", field="storage_bytes_per_s")
    return checkpoint_bytes / storage_bytes_per_s


def young_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Young's first-order optimal checkpoint interval ``sqrt(2 * delta * M)`` (s)."""
    return math.sqrt(2.0 * checkpoint_s * mtbf_s)


def daly_interval_s(checkpoint_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimal checkpoint interval (s); ``M`` when ``delta >= 2M``."""
    if math.isinf(mtbf_s):
        return math.inf
    if checkpoint_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = checkpoint_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * checkpoint_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - checkpoint_s


def expected_wall_time_s(work_s: float, interval_s: float, checkpoint_s: float, restart_s: float,
                         mtbf_s: float) -> float:
    """Daly's expected wall time (s) to complete ``work_s`` of failure-free work; ``inf`` when it is
    beyond the floating-point range (restart or checkpoint hundreds of times the MTBF)."""
    if math.isinf(mtbf_s):
        return work_s * (1.0 + checkpoint_s / interval_s) if math.isfinite(interval_s) else work_s
    m = mtbf_s
    try:
        return m * math.exp(restart_s / m) * math.expm1((interval_s + checkpoint_s) / m) * work_s / interval_s
    except OverflowError:
        return math.inf


def _num(x: float) -> str:
    return f"{x:.3g}" if x < 100 or x >= 1e9 else f"{x:,.0f}"


def _duration(seconds: float) -> str:
    for unit, size in (("years", units.YEAR), ("days", units.DAY), ("h", units.HOUR)):
        if seconds >= size:
            return f"{_num(seconds / size)} {unit}"
    return f"{_num(seconds)} s"


def _never_completes(m: float, delta: float, restart_s: float, work_s: float, wall: float) -> InfeasibleError:
    """The error of a job whose goodput is below MIN_GOODPUT, naming the overheads against the MTBF."""
    slowdown = (f"{_num(wall / work_s)} times its failure-free time" if math.isfinite(wall)
                else "beyond any finite estimate")
    reasons = [f"{what} ({_duration(x)}) is {_num(x / m)} x the job's mean time between failures ({_duration(m)})"
               for what, x in (("checkpoint write", delta), ("restart", restart_s)) if x >= 0.1 * m]
    return InfeasibleError(
        f"checkpoint/restart overhead exceeds what the job's mean time between failures ({_duration(m)}) allows: "
        f"the expected time with failures is {slowdown} (goodput under {MIN_GOODPUT:.0%}); the job effectively "
        "never completes",
        reasons=reasons or [f"goodput {work_s / wall:.3g} is below {MIN_GOODPUT:.0%}"],
        hint="faster checkpoint storage, a shorter restart, fewer devices or a lower failure rate",
    )


def reliability(
    *,
    devices: int,
    failure_free_time_s: float,
    checkpoint_bytes: float,
    storage_bytes_per_s: float | None = None,
    failures_per_device_hour: float | None = None,
    restart_s: float | None = None,
    interval_s: float | None = None,
    rule: str = "daly",
) -> ReliabilityResult:
    """Goodput and effective time of a job of ``failure_free_time_s`` on ``devices``.

    ``storage_bytes_per_s`` defaults to the Llama 3 storage bandwidth per device times ``devices``;
    ``restart_s`` to the time to read the checkpoint back (scheduler and re-initialisation time are
    not included: give them); ``interval_s`` to the optimum by ``rule`` ('daly' or 'young').
    """
    if devices < 1:
        raise UserInputError(f"must be >= 1, got {devices!r}", field="devices")
    if not failure_free_time_s > 0:
        raise UserInputError(f"must be > 0, got {failure_free_time_s!r}", field="failure_free_time_s")
    if checkpoint_bytes < 0:
        raise UserInputError(f"must be >= 0, got {checkpoint_bytes!r}", field="checkpoint_bytes")
    if rule not in ("daly", "young"):
        raise UserInputError(f"unknown rule {rule!r}; expected 'daly' or 'young'", field="rule")
    used: list[PowerAssumption] = []
    notes: list[str] = []
    if failures_per_device_hour is None:
        failures_per_device_hour = FAILURES_PER_DEVICE_HOUR.value
        used.append(FAILURES_PER_DEVICE_HOUR)
    elif failures_per_device_hour < 0:
        raise UserInputError("must be >= 0", field="failures_per_device_hour")
    if storage_bytes_per_s is None:
        storage_bytes_per_s = STORAGE_BYTES_PER_S_PER_DEVICE.value * devices
        used.append(STORAGE_BYTES_PER_S_PER_DEVICE)
    m = job_mtbf_s(failures_per_device_hour, devices)
    delta = checkpoint_write_s(checkpoint_bytes, storage_bytes_per_s)
    if not math.isfinite(delta):
        raise UserInputError(f"a {checkpoint_bytes:g}-byte checkpoint at {storage_bytes_per_s:g} B/s would take "
                             "longer than any finite time; give a realistic storage bandwidth", field="storage_bytes_per_s")
    if restart_s is None:
        restart_s = delta
        notes.append("restart time = checkpoint read time only; scheduler re-queue and re-initialisation not "
                     "included (give restart_s)")
    if interval_s is None:
        interval_s = daly_interval_s(delta, m) if rule == "daly" else young_interval_s(delta, m)
        if not math.isfinite(interval_s):
            interval_s = failure_free_time_s
    elif not interval_s > 0:
        raise UserInputError("must be > 0", field="interval_s")
    interval_s = min(interval_s, failure_free_time_s) if interval_s > 0 else failure_free_time_s
    if interval_s <= 0:  # zero-size checkpoint: checkpoint continuously at no cost
        interval_s = failure_free_time_s
    wall = expected_wall_time_s(failure_free_time_s, interval_s, delta, restart_s, m)
    if math.isfinite(m) and not failure_free_time_s / wall >= MIN_GOODPUT:
        raise _never_completes(m, delta, restart_s, failure_free_time_s, wall)
    return ReliabilityResult(
        devices=devices,
        failures_per_device_hour=failures_per_device_hour,
        job_mtbf_s=m if math.isfinite(m) else None,
        checkpoint_bytes=checkpoint_bytes,
        storage_bytes_per_s=storage_bytes_per_s,
        checkpoint_write_s=delta,
        restart_s=restart_s,
        interval_s=interval_s,
        interval_rule=rule,
        failure_free_time_s=failure_free_time_s,
        effective_time_s=wall,
        goodput=failure_free_time_s / wall,
        expected_failures=wall / m if math.isfinite(m) else 0.0,
        checkpoint_overhead_fraction=delta / interval_s,
        assumptions=[a.to_dict() for a in used] + [{"name": "checkpoint_interval_model", "source": _DALY}],
        notes=notes,
    )
