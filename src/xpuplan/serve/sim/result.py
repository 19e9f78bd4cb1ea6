"""Typed result of a simulation (SI units; unit suffixes in the keys)."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict

#: Version of the result's JSON layout; bump on an incompatible change.
SCHEMA_VERSION: Final = "2"


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class LatencyStats(_Out):
    """Percentiles and mean of one latency over the completed requests (s); None without samples."""

    count: int
    mean_s: float | None
    p50_s: float | None
    p90_s: float | None
    p99_s: float | None


class GroupStats(_Out):
    """Requests of one traffic class or one pool."""

    name: str
    arrived: int
    completed: int
    dropped: int
    unfinished: int
    ttft: LatencyStats
    tpot: LatencyStats
    e2e: LatencyStats
    slo_attainment: float | None
    goodput_requests_per_s: float | None
    goodput_output_tokens_per_s: float | None
    output_tokens_per_s: float
    preemptions: int


class PoolStats(_Out):
    """One pool: its hardware, utilisation, KV use, energy and cost."""

    name: str
    hardware: str
    model: str
    tp: int
    dtype: str
    kv_dtype: str
    engine: str
    batching: str
    replicas: int
    devices: int
    role: str
    kv_blocks_per_replica: int
    kv_peak_fraction: float
    utilisation: float
    compute_bound_fraction: float
    steps: int
    preemptions: int
    mean_power_w: float | None
    energy_j: float | None
    cost_usd: float | None
    requests: GroupStats
    step_cache_entries: int


class Series(_Out):
    """Downsampled time series: one value per pool and sample time."""

    times_s: list[float]
    queue_len: dict[str, list[int]]
    kv_used_fraction: dict[str, list[float]]
    utilisation: dict[str, list[float]]


class SimulationResult(_Out):
    """Everything a simulation measured; the same config and seed give the same result.

    ``duration_s`` is the window every rate is per second of, which ``rate_window`` names: ``arrivals`` (the
    arrival window) or, for a run whose classes are all bursts, ``makespan`` (first request to last completion).
    ``simulated_s`` is the simulated clock at the end, drain included."""

    schema_version: str = SCHEMA_VERSION
    seed: int
    duration_s: float
    rate_window: Literal["arrivals", "makespan"] = "arrivals"
    simulated_s: float
    arrived: int
    completed: int
    dropped: int
    unfinished: int
    classes: list[GroupStats]
    pools: list[PoolStats]
    output_tokens: int
    output_tokens_per_s: float
    slo_attainment: float | None
    goodput_requests_per_s: float | None
    energy_j: float | None
    cost_usd: float | None
    cost_per_million_output_tokens_usd: float | None
    series: Series
    events: int
    notes: list[str]
    quantiles: dict[str, dict[str, list[float]]]
    """Per class: ``ttft_s``/``tpot_s``/``e2e_s`` at percentiles 0, 1, ..., 100 (latency CDFs)."""

    def group(self, name: str) -> GroupStats:
        """The class (or else pool) statistics named ``name``."""
        for g in self.classes:
            if g.name == name:
                return g
        for p in self.pools:
            if p.name == name:
                return p.requests
        raise KeyError(name)
