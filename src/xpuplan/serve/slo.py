"""Latency under an arrival process, and the largest load that meets a latency SLO.

Requests arrive as a Poisson process of rate ``λ`` (requests/s) at one replica running continuous
batching. Three approximations, each documented in docs/inference.md:

1. **Concurrency** C follows Little's law: C = λ · E2E(C), E2E = TTFT + (out - 1) · TPOT(C); the
   steady-state TPOT at C comes from :func:`xpuplan.serve.estimate.continuous_step`. The smallest
   integer C that satisfies λ · E2E(C) <= C is taken (bisection; E2E grows with C). A load that
   needs more sequences than the KV cache holds is over capacity.
2. **Prompt queueing**: prompts are served by a prefill "server" whose service time s is the time a
   prompt adds to the steps that carry it (chunked prefill) or its own prefill step (no chunking),
   an M/D/1 queue with utilisation ρ = λ · s. Its wait has mean ρ·s / (2(1-ρ)) and the tail
   P(W > t) ≈ ρ · exp(-2(1-ρ) t / s), so the p-th percentile wait is s/(2(1-ρ)) · ln(ρ / (1-p)).
3. **TTFT** = wait + half a step (a prompt arrives mid-step) + the prompt's own prefill time; **TPOT**
   is the per-request mean inter-token time, whose spread across requests is small for outputs of
   more than a few tokens, so its percentile is taken equal to its mean.

``throughput_at_slo`` bisects on λ (TTFT and TPOT both grow with λ) for the largest load with
TTFT_p <= x and TPOT <= y.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.serve import validity
from xpuplan.serve.constants import DEFAULT_SLO_PERCENTILE, MAX_STABLE_UTILISATION, SLO_SEARCH_REL_TOL
from xpuplan.serve.estimate import (
    cached_prefix_tokens,
    continuous_step,
    continuous_tpot,
    kv_tokens_per_sequence,
    time_prefill_s,
)
from xpuplan.serve.kv import max_concurrent_sequences, memory_plan, require_fit
from xpuplan.serve.replica import Replica, step_time


@dataclass(frozen=True)
class SLO:
    """Latency targets in seconds (None: no limit) at ``percentile`` (TTFT) ."""

    ttft_s: float | None = None
    tpot_s: float | None = None
    percentile: float = DEFAULT_SLO_PERCENTILE

    def __post_init__(self) -> None:
        for name, v in (("ttft", self.ttft_s), ("tpot", self.tpot_s)):
            if v is not None:
                validity.positive_rate(f"{name}_ms", v, shown=f"{v * 1e3:g}")
        if not 0 < self.percentile < 100:
            raise UserInputError(f"percentile must be in (0, 100) (got {self.percentile})", field="percentile")

    def to_dict(self) -> dict[str, Any]:
        return {"ttft_s": self.ttft_s, "tpot_s": self.tpot_s, "percentile": self.percentile}


@dataclass(frozen=True)
class LoadPoint:
    """One replica at arrival rate ``arrival_rate`` (requests/s); latencies in seconds."""

    arrival_rate: float
    concurrency: int
    ttft_mean_s: float
    ttft_p_s: float
    tpot_s: float
    e2e_mean_s: float
    prefill_utilisation: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    percentile: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def wait_quantile_s(rho: float, service_s: float, percentile: float) -> float:
    """p-th percentile of the M/D/1 wait (exponential-tail approximation; module doc)."""
    if rho <= 0:
        return 0.0
    if rho >= 1:
        return math.inf
    tail = 1.0 - percentile / 100.0
    return max(0.0, service_s / (2.0 * (1.0 - rho)) * math.log(rho / tail))


def wait_mean_s(rho: float, service_s: float) -> float:
    """Mean M/D/1 wait: ρ·s / (2(1-ρ))."""
    if rho >= 1:
        return math.inf
    return rho * service_s / (2.0 * (1.0 - rho))


def prefill_service_moments(rep: Replica, input_len: float, concurrency: int,
                            input_lengths: Sequence[tuple[float, float]] | None = None) -> tuple[float, float]:
    """(E[s], E[s²]/E[s]) of the prefill service time s over the prompt-length distribution given as
    (length, probability) nodes; one length when None (then both are s at ``input_len``). Prefill is
    superlinear in the length (attention), so E[s(L)] > s(E[L]) and the spread lengthens the queue."""
    if not input_lengths or len(input_lengths) == 1:
        s = prefill_service_s(rep, input_len, concurrency)
        return s, s
    total_p = sum(p for _, p in input_lengths)
    m1 = m2 = 0.0
    for length, p in input_lengths:
        x = prefill_service_s(rep, length, concurrency)
        m1 += p / total_p * x
        m2 += p / total_p * x * x
    return m1, (m2 / m1 if m1 > 0 else 0.0)


def prefill_service_s(rep: Replica, input_len: float, concurrency: int) -> float:
    """Seconds of replica time one prompt of ``input_len`` tokens costs at ``concurrency`` running
    sequences: the time its tokens add to the mixed steps (chunked prefill), or its prefill step."""
    plen = max(1, round(input_len))
    c = max(1, math.ceil(concurrency / rep.pp))
    flight = concurrency  # in the pipeline at once (the step model caps it at pp)
    if rep.engine.chunked_prefill:
        budget = rep.engine.prefill_chunk_tokens
        ctx = input_len
        total = 0.0
        done = cached_prefix_tokens(rep, plen)  # a prefix-cache hit is not prefilled again
        without = step_time(rep, decode_seqs=c, decode_context=ctx, in_flight=flight).total_s  # same for every chunk
        while done < plen:
            k = min(budget, plen - done)
            with_p = step_time(rep, decode_seqs=c, decode_context=ctx, prefill_tokens=k, prefill_len=k,
                               prefill_kv_len=done + k, in_flight=flight).total_s
            total += max(with_p - without, 0.0)
            done += k
        return total
    return time_prefill_s(rep, 1, plen)[0]


#: Largest concurrency for which the SLO search tabulates every concurrency at once (arrays); above it
#: the search evaluates the concurrencies it probes one by one. Both give the same numbers.
TABLE_MAX_CONCURRENCY = 8192


@dataclass(frozen=True)
class ConcurrencyTable:
    """What does not depend on the arrival rate, for every concurrency 1..len: TPOT, prefill service
    time of a mean and of a tail prompt, and the step time (seconds; index = concurrency - 1)."""

    tpot_s: Any
    service_s: Any
    service_tail_s: Any
    step_s: Any

    def at(self, concurrency: int) -> tuple[float, float, float, float]:
        i = concurrency - 1
        return (float(self.tpot_s[i]), float(self.service_s[i]), float(self.service_tail_s[i]),
                float(self.step_s[i]))


def _prefill_service_arrays(rep: Replica, input_len: float, conc: Any) -> Any:
    """:func:`prefill_service_s` for an array of concurrencies."""
    import numpy as np

    from xpuplan.serve.vectorised import step_time_arrays

    plen = max(1, round(input_len))
    if not rep.engine.chunked_prefill:
        return np.full(conc.shape, time_prefill_s(rep, 1, plen)[0])
    c = np.maximum(1.0, np.ceil(conc / rep.pp))
    flight = np.minimum(rep.pp, np.maximum(1.0, conc))  # pipeline micro-batches in flight
    budget = rep.engine.prefill_chunk_tokens
    without = step_time_arrays(rep, decode_seqs=c, decode_context=input_len, in_flight=flight).total_s
    total = np.zeros(conc.shape)
    done = 0
    while done < plen:
        k = min(budget, plen - done)
        with_p = step_time_arrays(rep, decode_seqs=c, decode_context=input_len, prefill_tokens=k, prefill_len=k,
                                  prefill_kv_len=done + k, in_flight=flight).total_s
        total = total + np.maximum(with_p - without, 0.0)
        done += k
    return total


def concurrency_table(rep: Replica, input_len: float, output_len: float, tail_len: float,
                      max_concurrency: int) -> ConcurrencyTable:
    """Rate-independent quantities at every concurrency up to ``max_concurrency``, in a few array
    evaluations of the step model (the scalar path, :func:`load_point` without a table, gives the same)."""
    import numpy as np

    from xpuplan.serve.vectorised import continuous_arrays, step_time_arrays

    conc = np.arange(1, max_concurrency + 1, dtype=float)
    c = np.maximum(1.0, np.ceil(conc / rep.pp))
    flight = np.minimum(rep.pp, conc)  # pipeline micro-batches in flight
    ctx = input_len + output_len / 2.0
    tpot = continuous_arrays(rep, input_len, output_len, conc).tpot_s
    if rep.engine.chunked_prefill:
        budget = rep.engine.prefill_chunk_tokens
        prefill_tokens = np.maximum(1.0, np.round(c / output_len * input_len))
        step = step_time_arrays(rep, decode_seqs=c, decode_context=ctx, prefill_tokens=np.minimum(prefill_tokens, budget),
                                prefill_len=min(int(round(input_len)), budget), in_flight=flight).total_s
    else:
        step = step_time_arrays(rep, decode_seqs=c, decode_context=ctx, in_flight=flight).total_s
    service = _prefill_service_arrays(rep, input_len, conc)
    tail = _prefill_service_arrays(rep, tail_len, conc) if tail_len != input_len else service
    return ConcurrencyTable(tpot_s=np.broadcast_to(tpot, conc.shape), service_s=service, service_tail_s=tail,
                            step_s=np.broadcast_to(step, conc.shape))


def load_point(rep: Replica, input_len: float, output_len: float, arrival_rate: float, *,
               percentile: float = DEFAULT_SLO_PERCENTILE, ttft_input_len: float | None = None,
               max_concurrency: int | None = None, table: ConcurrencyTable | None = None,
               input_lengths: Sequence[tuple[float, float]] | None = None) -> LoadPoint | None:
    """Latency of ``rep`` at Poisson arrivals of ``arrival_rate`` requests/s; None when the load is
    over capacity (prefill utilisation >= MAX_STABLE_UTILISATION or more sequences than the KV cache
    holds). ``ttft_input_len``: prompt length whose prefill sets the TTFT percentile (default the
    mean length; a length distribution passes its percentile). ``input_lengths``: (length,
    probability) nodes of the prompt-length distribution (``LengthDist.nodes``); the prompt queue
    then uses the mean and second moment of the prefill service time over it (M/G/1)."""
    validity.positive_rate("qps", arrival_rate)
    if max_concurrency is None:
        plan = memory_plan(rep)
        max_concurrency = max_concurrent_sequences(rep, plan, kv_tokens_per_sequence(rep, input_len, output_len))
    if max_concurrency < 1:
        return None
    tail_len = ttft_input_len or input_len
    if input_lengths is not None and len(input_lengths) > 1:
        table = None  # the table tabulates one prompt length

    def evaluate(c: int) -> tuple[float, float, float, float, float, float]:
        if table is not None:
            tpot, s, s_tail, step_s = table.at(c)
            s_eff = s
        else:
            tpot, st = continuous_tpot(rep, input_len, output_len, c)
            step_s = st.total_s
            s, s_eff = prefill_service_moments(rep, input_len, c, input_lengths)
            s_tail = prefill_service_s(rep, tail_len, c) if tail_len != input_len else s
        rho = arrival_rate * s
        own = s if not rep.engine.chunked_prefill else s + step_s  # carrying steps end after its chunk
        # M/G/1 (Pollaczek-Khinchine): the wait scales with E[s²]/E[s] (= s for one prompt length)
        ttft_mean = wait_mean_s(rho, s_eff) + step_s / 2.0 + own
        own_tail = s_tail if not rep.engine.chunked_prefill else s_tail + step_s
        ttft_p = wait_quantile_s(rho, s_eff, percentile) + step_s / 2.0 + own_tail
        e2e = ttft_mean + (output_len - 1) * tpot
        return tpot, ttft_mean, ttft_p, e2e, rho, step_s

    # smallest integer concurrency with λ·E2E(C) <= C (Little's law)
    lo, hi = 1, max_concurrency
    res_hi = evaluate(hi)
    if res_hi[4] >= MAX_STABLE_UTILISATION or arrival_rate * res_hi[3] > hi:
        return None
    res_lo = evaluate(lo)
    if arrival_rate * res_lo[3] <= lo:
        c, res = lo, res_lo
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            r = evaluate(mid)
            if arrival_rate * r[3] <= mid:
                hi, res_hi = mid, r
            else:
                lo = mid
        c, res = hi, res_hi
    tpot, ttft_mean, ttft_p, e2e, rho, _ = res
    if rho >= MAX_STABLE_UTILISATION:
        return None
    return LoadPoint(arrival_rate=arrival_rate, concurrency=c, ttft_mean_s=ttft_mean, ttft_p_s=ttft_p, tpot_s=tpot,
                     e2e_mean_s=e2e, prefill_utilisation=rho, output_tokens_per_s=arrival_rate * output_len,
                     total_tokens_per_s=arrival_rate * (input_len + output_len), percentile=percentile)


def meets(point: LoadPoint | None, slo: SLO) -> bool:
    if point is None:
        return False
    if slo.ttft_s is not None and point.ttft_p_s > slo.ttft_s:
        return False
    return not (slo.tpot_s is not None and point.tpot_s > slo.tpot_s)


@dataclass(frozen=True)
class SLOResult:
    """Largest arrival rate per replica meeting the SLO, the point there, and what limits it."""

    replica: dict[str, Any]
    slo: SLO
    input_len: float
    output_len: float
    max_rate: float
    point: LoadPoint
    limited_by: str

    @property
    def max_rate_per_device(self) -> float:
        return self.max_rate / int(self.replica["n_devices"])

    def to_dict(self) -> dict[str, Any]:
        return {"replica": self.replica, "slo": self.slo.to_dict(), "input_len": self.input_len,
                "output_len": self.output_len, "max_requests_per_s": self.max_rate,
                "max_requests_per_s_per_device": self.max_rate_per_device, "point": self.point.to_dict(),
                "limited_by": self.limited_by}


def _limit(point: LoadPoint, slo: SLO, max_concurrency: int) -> str:
    """Which constraint binds just above the found rate."""
    if slo.ttft_s is not None and point.ttft_p_s >= 0.97 * slo.ttft_s:
        return f"TTFT P{slo.percentile:g}"
    if slo.tpot_s is not None and point.tpot_s >= 0.97 * slo.tpot_s:
        return "TPOT"
    if point.concurrency >= 0.97 * max_concurrency:
        return "concurrency limit (KV cache or max_num_seqs)"
    return "prefill saturation"


def throughput_at_slo(rep: Replica, input_len: float, output_len: float, slo: SLO, *,
                      ttft_input_len: float | None = None,
                      input_lengths: Sequence[tuple[float, float]] | None = None) -> SLOResult:
    """Largest Poisson arrival rate (requests/s) one replica serves with TTFT_p <= ``slo.ttft_s`` and
    TPOT <= ``slo.tpot_s``. InfeasibleError (with reasons) when even a trickle misses the SLO."""
    validity.positive_length("input_len", input_len)
    validity.positive_length("output_len", output_len)
    plan = memory_plan(rep)
    kv_tok = kv_tokens_per_sequence(rep, input_len, output_len)
    require_fit(rep, plan, kv_tok, 1)
    cmax = max_concurrent_sequences(rep, plan, kv_tok)
    # unloaded latency: a single request
    tpot1, _, _ = continuous_step(rep, input_len, output_len, 1)
    floor_ttft = time_prefill_s(rep, 1, max(1, round(ttft_input_len or input_len)))[0]
    reasons = []
    if slo.tpot_s is not None and tpot1 > slo.tpot_s:
        reasons.append(f"TPOT of a single request is {tpot1 * 1e3:.1f} ms > {slo.tpot_s * 1e3:g} ms on {rep.key}; "
                       "use a larger tp, fp8/int8/int4 weights, or faster memory")
    if slo.ttft_s is not None and floor_ttft > slo.ttft_s:
        reasons.append(f"prefill of one prompt takes {floor_ttft * 1e3:.1f} ms > TTFT {slo.ttft_s * 1e3:g} ms on "
                       f"{rep.key}; use a larger tp or disaggregated prefill")
    if reasons:
        raise InfeasibleError("the SLO cannot be met even at minimal load", reasons=reasons)
    # upper bound on the rate: the KV-limited throughput at full concurrency
    tpot_max, _, _ = continuous_step(rep, input_len, output_len, cmax)
    hi = cmax / (output_len * tpot_max) * 1.05
    lo = hi * 1e-6
    # the table is the array form of the scalar path; speculation and prefix caching are scalar-only
    scalar_only = rep.speculation.active or bool(rep.prefix_hit_rate) or bool(input_lengths and len(input_lengths) > 1)
    table = (concurrency_table(rep, input_len, output_len, ttft_input_len or input_len, cmax)
             if cmax <= TABLE_MAX_CONCURRENCY and not scalar_only else None)
    p_lo = load_point(rep, input_len, output_len, lo, percentile=slo.percentile, ttft_input_len=ttft_input_len,
                      max_concurrency=cmax, table=table, input_lengths=input_lengths)
    if not meets(p_lo, slo):
        raise InfeasibleError("the SLO cannot be met even at minimal load",
                              reasons=[f"TTFT/TPOT at {lo:.3g} req/s exceed the SLO on {rep.key}"])
    assert p_lo is not None
    best = p_lo
    while hi / lo - 1.0 > SLO_SEARCH_REL_TOL:
        mid = math.sqrt(lo * hi)
        p = load_point(rep, input_len, output_len, mid, percentile=slo.percentile, ttft_input_len=ttft_input_len,
                       max_concurrency=cmax, table=table, input_lengths=input_lengths)
        if meets(p, slo):
            lo, best = mid, p  # type: ignore[assignment]
        else:
            hi = mid
    return SLOResult(replica=rep.to_dict(), slo=slo, input_len=input_len, output_len=output_len, max_rate=lo,
                     point=best, limited_by=_limit(best, slo, cmax))
