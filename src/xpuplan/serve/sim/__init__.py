"""Request-level discrete-event simulator of LLM serving fleets (mixed hardware, any catalog device).

Entities (:mod:`.entities`: requests, replicas, pools), events (:mod:`.events`: each handler returns
new events), policies (:mod:`.schedulers`: continuous and static batching; :mod:`.routing`: routing
policies), the loop (:mod:`.engine`) and the typed result (:mod:`.result`). Step times come from the
inference planner (``serve.replica.step_time``) through a bucketed cache (:mod:`.steps`).

Typical use::

    from xpuplan.serve.sim import SimConfig, simulate

    cfg = SimConfig.model_validate({
        "model": "llama2-70b",
        "pools": [{"name": "h100", "hardware": "H100", "tp": 4, "dtype": "fp8", "replicas": 2}],
        "classes": [{"name": "chat", "rate_rps": 5, "input_len": 512, "output_len": 256,
                     "slo": {"ttft_ms": 2000, "tpot_ms": 50}}],
        "duration_s": 60,
    })
    res = simulate(cfg, seed=0)
    res.classes[0].ttft.p99_s, res.slo_attainment

The design, assumptions and validation are in docs/simulator.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import ValidationError

from xpuplan.catalog.assumptions import Assumptions
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.serve.disagg import time_kv_transfer_s
from xpuplan.serve.sim.config import (
    EmpiricalLengths,
    PoolConfig,
    RoutingConfig,
    SimConfig,
    SLOSpec,
    TraceData,
    TrafficClass,
)
from xpuplan.serve.sim.engine import Progress, Simulation
from xpuplan.serve.sim.entities import Pool
from xpuplan.serve.sim.result import (
    SCHEMA_VERSION,
    GroupStats,
    LatencyStats,
    PoolStats,
    Series,
    SimulationResult,
)
from xpuplan.serve.sim.routing import ROUTERS, Router, register_router
from xpuplan.serve.sim.schedulers import SCHEDULERS, Scheduler, register_scheduler
from xpuplan.workload.lengths import LengthDist

__all__ = [
    "ROUTERS",
    "SCHEDULERS",
    "SCHEMA_VERSION",
    "EmpiricalLengths",
    "GroupStats",
    "LatencyStats",
    "LengthDist",
    "PoolConfig",
    "PoolStats",
    "Router",
    "RoutingConfig",
    "SLOSpec",
    "Scheduler",
    "Series",
    "SimConfig",
    "SimulationResult",
    "TraceData",
    "TrafficClass",
    "check_slos",
    "parse_config",
    "register_router",
    "register_scheduler",
    "simulate",
    "unloaded_latency_s",
]

#: Percentile of a class's length distributions that stands for a short request in the unloaded-latency
#: check (a request that short still misses the SLO).
SHORT_REQUEST_PERCENTILE = 1.0


def parse_config(data: Any) -> SimConfig:
    """Validate a mapping as :class:`SimConfig`; the first problem -> UserInputError naming the field."""
    from xpuplan.datafile import format_loc

    try:
        return SimConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, UserInputError):
            raise cause from None
        loc = tuple(err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise UserInputError(f"{msg} (got {err.get('input')!r})" if err["type"] not in ("missing",) and not
                             isinstance(err.get("input"), dict) else msg, field=format_loc(loc) or None) from None


def _short_lengths(c: TrafficClass) -> tuple[int, int]:
    """A short request of class ``c``: the 1st percentile of its length distributions (a fixed length
    itself), or the shortest of an empirical list or trace."""
    if c.trace is not None and c.arrival == "trace":
        return min(c.trace.input_len), min(c.trace.output_len)
    if c.lengths is not None:
        return min(c.lengths.input_len), min(c.lengths.output_len)

    def short(d: LengthDist) -> int:
        return max(1, round(d.quantile(SHORT_REQUEST_PERCENTILE)))

    return short(c.input_len), short(c.output_len)


def _median_lengths(c: TrafficClass) -> tuple[float, float]:
    """The median prompt and output lengths of class ``c`` (its distributions, list or trace)."""
    if c.trace is not None and c.arrival == "trace":
        return float(np.median(c.trace.input_len)), float(np.median(c.trace.output_len))
    if c.lengths is not None:
        return float(np.median(c.lengths.input_len)), float(np.median(c.lengths.output_len))
    return c.input_len.quantile(50.0), c.output_len.quantile(50.0)


def check_contexts(sim: Simulation) -> None:
    """UserInputError when a class's median request (prompt, prompt + output) exceeds the context of the model
    of a pool the routing can send it to: most of its requests could not run there (an engine refuses a prompt
    longer than its model's context)."""
    for i, c in enumerate(sim.config.classes):
        inp, out = _median_lengths(c)
        for p in sim.router.pools_for(i):
            m = p.replica.model
            if m.type == "encoder":
                continue
            m.check_context(inp, f"classes[{i}].input_len")
            m.check_context(inp + out, f"classes[{i}].output_len")


def unloaded_latency_s(sim: Simulation, pool: Pool, input_len: int, output_len: int) -> tuple[float, float]:
    """(TTFT, TPOT) of one request alone on a replica of ``pool`` (prefill in forwards of the token
    budget, plus the KV transfer for a disaggregated pool; decode steps of one sequence)."""
    table = pool.replicas[0].scheduler.table
    budget = max(1, pool.replica.engine.prefill_chunk_tokens)
    ttft, done = 0.0, 0
    while done < input_len:
        c = min(budget, input_len - done)
        ttft += table.time(0, 0.0, c, c, done + c)[0]
        done += c
    dec_pool = pool
    if pool.decode_target >= 0:
        ttft += time_kv_transfer_s(pool.replica, input_len)
        dec_pool = sim.pools[pool.decode_target]
    tpot = dec_pool.replicas[0].scheduler.table.time(1, input_len + output_len / 2)[0]
    return ttft, tpot


def check_slos(sim: Simulation) -> None:
    """UserInputError when a class's SLO is below the unloaded latency of a short request on every
    pool the routing can send it to (no load, no fleet size can meet it)."""
    for i, c in enumerate(sim.config.classes):
        s = c.slo
        if s.ttft_ms is None and s.tpot_ms is None and s.e2e_ms is None:
            continue
        inp, out = _short_lengths(c)
        lats = {p.name: unloaded_latency_s(sim, p, inp, out) for p in sim.router.pools_for(i)}
        best = {
            "ttft_ms": min(t for t, _ in lats.values()),
            "tpot_ms": min(tp for _, tp in lats.values()),
            "e2e_ms": min(t + (out - 1) * tp for t, tp in lats.values()),
        }
        for key, floor_s in best.items():
            target = getattr(s, key)
            if target is not None and target / 1e3 < floor_s:
                where = ", ".join(lats)
                raise UserInputError(
                    f"SLO {target:g} ms is below the unloaded {key[:-3].upper()} of {floor_s * 1e3:.1f} ms "
                    f"(one {inp}-token prompt, {out} output tokens, alone on pool(s) {where}); no load or "
                    "fleet size can meet it: relax the SLO or use faster hardware / a larger tp",
                    field=f"classes[{i}].slo.{key}")


def simulate(config: SimConfig, *, seed: int, progress: Progress | None = None, catalog: Any = None,
             assumptions: Assumptions | None = None, models: Mapping[str, ModelArch] | None = None,
             check_slo: bool = True) -> SimulationResult:
    """Simulate ``config`` (see :class:`SimConfig`) with random seed ``seed``; same seed, same result.

    ``progress`` is called now and then with the fraction of the arrival window simulated (0-1).
    ``catalog`` (None: ``load_catalog()``) and ``assumptions`` (None: the built-in defaults) are
    passed to the planner; ``models`` maps model names to architectures ahead of the presets. ``check_slo``: refuse SLOs below the hardware's unloaded latency first.
    """
    sim = Simulation(config, seed=seed, progress=progress, catalog=catalog, assumptions=assumptions, models=models)
    check_contexts(sim)
    if check_slo:
        check_slos(sim)
    return sim.run()
