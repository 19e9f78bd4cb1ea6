"""Typed configuration of a simulation: pools of replicas, routing, traffic classes, duration.

Everything is data the user can override; every default is named here with its reason. The
configuration holds data only (a trace or an empirical length list is already loaded, see
:mod:`xpuplan.serve.sim.traces`), so :func:`xpuplan.serve.sim.simulate` reads no file.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from xpuplan.errors import UserInputError
from xpuplan.workload.lengths import LengthDist, number_to_fixed

#: Seconds a static-batching replica waits for its batch to fill before it starts with fewer
#: requests (a common setting of batching servers such as Triton's ``max_queue_delay``; user data).
DEFAULT_STATIC_WAIT_MS: Final = 50.0
#: Requests of one static batch (user data; the engine's ``max_num_seqs`` caps it).
DEFAULT_STATIC_BATCH: Final = 16
#: Points of the downsampled time series (queue length, KV use, utilisation).
DEFAULT_SAMPLE_POINTS: Final = 200



def _not_bool(value: Any) -> Any:
    """A number's value as given: true/false is refused (pydantic would read it as 1/0)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, not {str(value).lower()}")
    return value


#: A number where true/false never means one (YAML's ``true`` is not a rate of 1).
NotBool = BeforeValidator(_not_bool)
Pos = Annotated[float, NotBool, Field(gt=0, le=1e12, allow_inf_nan=False)]
NonNeg = Annotated[float, NotBool, Field(ge=0, le=1e12, allow_inf_nan=False)]
Count = Annotated[int, NotBool, Field(ge=1, le=1 << 24)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TraceData(_Model):
    """Requests read from a trace: arrival offsets (s, from 0), lengths, optional class names."""

    times_s: list[Annotated[float, NotBool]]
    input_len: list[Annotated[int, NotBool]]
    output_len: list[Annotated[int, NotBool]]
    classes: list[str] | None = None
    source: str = "trace"


class EmpiricalLengths(_Model):
    """(input, output) length pairs sampled jointly, uniformly with replacement."""

    input_len: list[Annotated[int, NotBool]]
    output_len: list[Annotated[int, NotBool]]
    source: str = "lengths file"


class SLOSpec(_Model):
    """Latency targets per request (ms); a request meets the SLO when every given target holds."""

    ttft_ms: Pos | None = None
    tpot_ms: Pos | None = None
    e2e_ms: Pos | None = None


class TrafficClass(_Model):
    """One class of requests.

    ``arrival``: ``poisson`` (rate ``rate_rps``), ``gamma`` (inter-arrival times with coefficient of
    variation ``cv``; cv > 1 is bursty, cv = 1 is Poisson), ``diurnal`` (a Poisson process whose
    rate follows ``rate_curve`` — (time s, requests/s) points, linear in between, repeating every
    ``curve_period_s``), ``trace`` (``trace``'s times and lengths; its rows with a ``class``
    naming another class go to that class), ``closed``: ``clients`` clients that each send a
    request, wait for its last token, think ``think_time_s``, and send the next (a benchmark run at
    a fixed concurrency), or ``burst``: ``requests`` requests all sent at t = 0 (an offline benchmark
    run: ``vllm bench serve --num-prompts N`` without a request rate, ``trtllm-bench throughput``;
    give the simulation a ``drain_s`` long enough to serve them).
    """

    name: Annotated[str, Field(min_length=1, max_length=100)]
    rate_rps: Annotated[float, NotBool, Field(ge=0, le=1e9, allow_inf_nan=False)] = 0.0
    arrival: Literal["poisson", "gamma", "diurnal", "trace", "closed", "burst"] = "poisson"
    cv: Annotated[float, NotBool, Field(gt=0, le=100, allow_inf_nan=False)] = 1.0
    rate_curve: list[tuple[NonNeg, NonNeg]] | None = None
    curve_period_s: Pos | None = None
    trace: TraceData | None = None
    clients: Annotated[int, NotBool, Field(ge=1, le=1 << 20)] | None = None
    requests: Annotated[int, NotBool, Field(ge=1, le=1 << 20)] | None = None
    think_time_s: NonNeg = 0.0
    input_len: LengthDist = LengthDist(mean=512)
    output_len: LengthDist = LengthDist(mean=256)
    lengths: EmpiricalLengths | None = None
    slo: SLOSpec = SLOSpec()

    @model_validator(mode="before")
    @classmethod
    def _lengths(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for k in ("input_len", "output_len"):
                if k in data:
                    data[k] = number_to_fixed(data[k])
        return data

    @model_validator(mode="after")
    def _check(self) -> TrafficClass:
        if self.arrival in ("poisson", "gamma") and self.rate_rps <= 0:
            raise ValueError(f"rate_rps must be positive for {self.arrival} arrivals (got {self.rate_rps:g})")
        if self.arrival == "diurnal" and not self.rate_curve:
            raise ValueError("diurnal arrivals need rate_curve: a list of [time_s, requests_per_s] points")
        if self.arrival == "closed" and self.clients is None:
            raise ValueError("closed-loop arrivals need clients: the number of concurrent clients")
        if self.arrival == "trace" and self.trace is None:
            raise ValueError("trace arrivals need a trace file")
        if self.arrival == "burst" and self.requests is None:
            raise ValueError("burst arrivals need requests: the number of requests sent at t = 0")
        return self


class PoolConfig(_Model):
    """Identical replicas of one model on one hardware/TP/dtype, with one batching policy.

    Engine settings left None come from the engine profile (``serve.constants``): token budget per
    step (``max_batched_tokens``, the engine's prefill chunk), ``max_num_seqs``, KV block size,
    chunked prefill, whether the full output's KV is reserved at admission. ``decode_pool`` makes
    this a prefill pool of a disaggregated pair: prompts are prefilled here and their KV cache is
    sent over the scale-out link to the named decode pool.
    """

    name: Annotated[str, Field(min_length=1, max_length=100)]
    hardware: Annotated[str, Field(min_length=1, max_length=200)]
    model: str | None = None
    replicas: Count = 1
    tp: Count = 1
    pp: Count = 1
    ep: Count = 1
    etp: Count | None = None
    dtype: str = "bf16"
    kv_dtype: str | None = None
    engine: str | None = None
    batching: Literal["continuous", "static"] | None = None
    max_num_seqs: Count | None = None
    max_batched_tokens: Count | None = None
    chunked_prefill: bool | None = None
    block_size: Count | None = None
    memory_fraction: Annotated[float, NotBool, Field(gt=0, le=1)] | None = None
    reserve_full_output: bool | None = None
    static_batch_size: Count = DEFAULT_STATIC_BATCH
    static_wait_ms: NonNeg = DEFAULT_STATIC_WAIT_MS
    decode_pool: str | None = None
    price_per_device_hour: NonNeg | None = None


class RoutingConfig(_Model):
    """How a request picks a pool and a replica (``policies.ROUTERS``): ``round_robin``,
    ``least_outstanding`` (fewest unfinished tokens), ``class_based`` (``rules``: class -> pool,
    ``default`` for the rest), ``spill_over`` (``primary`` until its waiting requests exceed
    ``max_queue``, then ``secondary``). Inside a pool, the replica with the fewest outstanding
    tokens is chosen (round robin excepted)."""

    policy: str = "round_robin"
    rules: dict[str, str] = Field(default_factory=dict)
    default: str | None = None
    primary: str | None = None
    secondary: str | None = None
    max_queue: Annotated[int, NotBool, Field(ge=0, le=1 << 30)] = 64


class SimConfig(_Model):
    """A whole simulation: ``pools``, ``routing``, traffic ``classes`` and ``duration_s`` of arrivals.
    After arrivals stop, requests in flight finish for at most ``drain_s`` (None: ``duration_s``);
    what is still unfinished then counts as missing its SLO."""

    model: str | None = None
    pools: Annotated[list[PoolConfig], Field(min_length=1)]
    classes: Annotated[list[TrafficClass], Field(min_length=1)]
    routing: RoutingConfig = RoutingConfig()
    duration_s: Pos = 60.0
    drain_s: NonNeg | None = None
    sample_points: Annotated[int, NotBool, Field(ge=2, le=100_000)] = DEFAULT_SAMPLE_POINTS

    @model_validator(mode="after")
    def _refs(self) -> SimConfig:
        names = [p.name for p in self.pools]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise UserInputError(f"pool name {sorted(dup)[0]!r} is used twice", field="pools.name")
        cnames = [c.name for c in self.classes]
        cdup = {n for n in cnames if cnames.count(n) > 1}
        if cdup:
            raise UserInputError(f"class name {sorted(cdup)[0]!r} is used twice", field="classes.name")
        known = ", ".join(names)
        for i, p in enumerate(self.pools):
            if p.decode_pool is not None:
                if p.decode_pool not in names or p.decode_pool == p.name:
                    raise UserInputError(f"unknown decode pool {p.decode_pool!r}; pools: {known}",
                                         field=f"pools[{i}].decode_pool")
            if (p.model or self.model) is None:
                raise UserInputError("no model: give one for the scenario or the pool", field=f"pools[{i}].model")
        r = self.routing
        for key, pool in [*((f"routing.rules.{k}", v) for k, v in r.rules.items()),
                          ("routing.default", r.default), ("routing.primary", r.primary),
                          ("routing.secondary", r.secondary)]:
            if pool is not None and pool not in names:
                raise UserInputError(f"unknown pool {pool!r}; pools: {known}", field=key)
        for k in r.rules:
            if k not in cnames:
                raise UserInputError(f"unknown class {k!r}; classes: {', '.join(cnames)}", field=f"routing.rules.{k}")
        for c in self.classes:
            if c.trace is not None and c.trace.classes:
                for name in set(c.trace.classes) - set(cnames) - {""}:
                    raise UserInputError(f"trace class {name!r} is not a configured class ({', '.join(cnames)})",
                                         field="class", file=c.trace.source)
        return self
