"""The serving model over arrays: many batch sizes, lengths and efficiency samples in one call.

The decision layer's Monte Carlo (1,000 efficiency samples for every candidate device) and the
fleet optimizer's capacity tables evaluate the same replica at many points. These functions take
NumPy arrays that broadcast together — e.g. batch ``(k,)`` against efficiency samples ``(n, 1)``
gives ``(n, k)`` results — and return exactly what the scalar estimators return at each point
(a test checks equality to 1e-9 on a grid). They share the one step model
(:func:`xpuplan.serve.step.step_arrays`); only the loops over steps are written here, as masked
array operations.

* :func:`step_time_arrays`: engine steps (``serve.replica.step_time``);
* :func:`time_prefill_arrays`: prompts prefilled in forwards of the engine's token budget, chunked
  beyond it (``serve.estimate.time_prefill_s``);
* :func:`estimate_static_arrays`: TTFT, TPOT, end-to-end latency and throughput of static batches
  (``serve.estimate.estimate_static``);
* :func:`continuous_arrays`: TPOT, TTFT and throughput of continuous batching at a concurrency
  (``serve.estimate.estimate_continuous``).

What stays scalar: the memory fit (it does not depend on efficiency samples; check it once per
replica and batch with ``serve.fit.replica_fit``), the SLO capacity search and the disaggregated
estimate (bisections over the scalar estimators), and the collectives' link efficiencies (from the
replica's nominal efficiency, not from the samples).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from xpuplan.serve import validity
from xpuplan.serve.replica import Replica
from xpuplan.serve.step import EfficiencyArrays, StepArrays, normalise, step_arrays

#: Points of the trapezoid that averages the decode step over a growing context
#: (``serve.estimate.mean_decode_step``, same count).
DECODE_SAMPLES = 8

__all__ = ["EfficiencyArrays", "ServingArrays", "continuous_arrays", "estimate_static_arrays", "step_time_arrays",
           "time_prefill_arrays"]


def step_time_arrays(rep: Replica, *, decode_seqs: Any = 0, decode_context: Any = 0, prefill_tokens: Any = 0,
                     prefill_len: Any = None, prefill_kv_len: Any = None, sampled_rows: Any = None,
                     eff: EfficiencyArrays | None = None, in_flight: Any = None) -> StepArrays:
    """``serve.replica.step_time`` over arrays (same defaults); ``eff`` samples and ``in_flight`` broadcast too."""
    ds, ctx, pt, plen, pkv, rows = normalise(decode_seqs, decode_context, prefill_tokens, prefill_len, prefill_kv_len,
                                             sampled_rows)
    return step_arrays(rep, ds, ctx, pt, plen, pkv, rows, eff, in_flight=in_flight)


def _total(rep: Replica, eff: Any, **kw: Any) -> np.ndarray:
    return step_time_arrays(rep, eff=eff, **kw).total_s


def time_prefill_arrays(rep: Replica, n_prompts: Any, prompt_len: Any, eff: EfficiencyArrays | None = None) -> np.ndarray:
    """Seconds to prefill ``n_prompts`` prompts of ``prompt_len`` tokens (``serve.estimate.time_prefill_s``):
    whole prompts per forward up to the engine's token budget, longer prompts in chunks that attend
    to all earlier chunks, plus the pipeline fill."""
    _scalar_only(rep)
    n = np.asarray(n_prompts, dtype=float)
    plen = np.asarray(prompt_len, dtype=float)
    budget = float(max(rep.engine.prefill_chunk_tokens, 1))
    per_micro = np.maximum(1.0, np.ceil(n / rep.pp))  # pipeline stages work on different prompts
    flight = n  # in the pipeline at once (the step model caps it at pp)
    fill = (rep.pp - 1) / rep.pp
    short = plen <= budget
    sp = np.where(short, plen, 1.0)  # prompt length on the whole-prompt path (dummy where chunked)
    per_fwd = np.maximum(1.0, np.minimum(per_micro, np.floor(budget / sp)))
    full, rest = np.floor(per_micro / per_fwd), np.mod(per_micro, per_fwd)
    st = _total(rep, eff, prefill_tokens=per_fwd * sp, prefill_len=sp, in_flight=flight)
    t_rest = np.where(rest > 0, _total(rep, eff, prefill_tokens=np.where(rest > 0, rest, 1.0) * sp, prefill_len=sp,
                                       in_flight=flight), 0.0)
    t_short = full * st + t_rest + fill * st
    if not np.any(~short):
        return t_short
    lp = np.where(short, budget + 1.0, plen)  # chunked path (dummy where whole prompts)
    largest = _total(rep, eff, prefill_tokens=budget, prefill_len=budget, prefill_kv_len=lp, sampled_rows=1,
                     in_flight=flight)
    t: Any = 0.0
    for i in range(int(np.ceil(np.max(lp) / budget))):
        done = i * budget
        c = np.minimum(budget, lp - done)
        ok = c > 0
        cc = np.where(ok, c, 1.0)
        t = t + np.where(ok, _total(rep, eff, prefill_tokens=cc, prefill_len=cc, prefill_kv_len=done + cc,
                                    sampled_rows=1, in_flight=flight), 0.0)
    return np.where(short, t_short, per_micro * t + fill * largest)


def mean_decode_arrays(rep: Replica, seqs: Any, ctx_start: Any, ctx_end: Any, eff: EfficiencyArrays | None = None,
                       **prefill: Any) -> np.ndarray:
    """Mean decode step while ``seqs`` sequences go from ``ctx_start`` to ``ctx_end`` keys
    (``serve.estimate.mean_decode_step``: trapezoid over :data:`DECODE_SAMPLES` points)."""
    a = np.asarray(ctx_start, dtype=float)
    b = np.asarray(ctx_end, dtype=float)
    n = DECODE_SAMPLES
    times = [_total(rep, eff, decode_seqs=seqs, decode_context=a + (b - a) * i / (n - 1), **prefill) for i in range(n)]
    mean = (sum(times) - 0.5 * (times[0] + times[-1])) / (n - 1)
    return np.where(b > a, mean, times[0])


@dataclass(frozen=True)
class ServingArrays:
    """Latencies (s) and throughputs of many serving points (arrays broadcast from the inputs)."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_latency_s: np.ndarray
    output_tokens_per_s: np.ndarray
    requests_per_s: np.ndarray
    n_devices: int

    @property
    def output_tokens_per_s_per_device(self) -> np.ndarray:
        return self.output_tokens_per_s / self.n_devices


def _scalar_only(rep: Replica) -> None:
    """Speculative decoding and prefix caching are modelled by the scalar estimators only."""
    if rep.speculation.active or rep.prefix_hit_rate:
        from xpuplan.errors import UserInputError

        raise UserInputError("the array estimators do not model speculative decoding or prefix caching; "
                             "use serve.estimate", field="speculation")


def _lengths(input_len: Any, output_len: Any, batch: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The request arrays, each finite and >= 1 (``UserInputError`` naming the field otherwise)."""
    out = tuple(np.asarray(v, dtype=float) for v in (input_len, output_len, batch))
    for name, v in zip(("input_len", "output_len", "batch"), out, strict=True):
        bad = ~np.isfinite(v) | (v < 1)
        if np.any(bad):
            validity.positive_length(name, float(v[bad].flat[0]) if np.ndim(v) else float(v))
    return out  # type: ignore[return-value]


def estimate_static_arrays(rep: Replica, input_len: Any, output_len: Any, batch: Any,
                           eff: EfficiencyArrays | None = None) -> ServingArrays:
    """``serve.estimate.estimate_static`` over arrays: prefill every prompt, then decode together."""
    _scalar_only(rep)
    i, o, b = _lengths(input_len, output_len, batch)
    t_prefill = time_prefill_arrays(rep, b, i, eff)
    micro = np.maximum(1.0, np.ceil(b / rep.pp))
    tpot = np.where(o > 1, mean_decode_arrays(rep, micro, i + 1, i + o - 1, eff, in_flight=b), 0.0)
    e2e = t_prefill + (o - 1) * tpot
    return ServingArrays(ttft_s=t_prefill + 0 * e2e, tpot_s=tpot + 0 * e2e, e2e_latency_s=e2e,
                         output_tokens_per_s=b * o / e2e, requests_per_s=b / e2e, n_devices=rep.n_devices)


def _mixed_prompt_arrays(rep: Replica, prompt_len: np.ndarray, decode_seqs: Any, ctx: Any, eff: Any,
                         in_flight: Any = None) -> np.ndarray:
    """``serve.estimate.prompt_in_mixed_steps_s``: a prompt's chunks ride in steps that also decode."""
    budget = float(max(1, rep.engine.prefill_chunk_tokens))
    if not rep.engine.split_prompts:  # whole prompts only (serve.estimate.split_budget)
        budget = max(budget, float(np.ceil(np.max(prompt_len))))
    t: Any = 0.0
    for k in range(int(np.ceil(np.max(prompt_len) / budget))):
        done = k * budget
        c = np.minimum(budget, prompt_len - done)
        ok = c > 0
        cc = np.where(ok, c, 1.0)
        t = t + np.where(ok, _total(rep, eff, decode_seqs=decode_seqs, decode_context=ctx, prefill_tokens=cc,
                                    prefill_len=cc, prefill_kv_len=done + cc, in_flight=in_flight), 0.0)
    return t


def continuous_arrays(rep: Replica, input_len: Any, output_len: Any, concurrency: Any,
                      eff: EfficiencyArrays | None = None) -> ServingArrays:
    """``serve.estimate.estimate_continuous`` over arrays: the steady state at ``concurrency`` running
    sequences (new prompts chunked beside the decode tokens, or prefilled in their own steps)."""
    _scalar_only(rep)
    i, o, conc = _lengths(input_len, output_len, concurrency)
    c = np.maximum(1.0, np.ceil(conc / rep.pp))  # sequences per pipeline micro-batch
    flight = np.minimum(rep.pp, conc)  # micro-batches in the pipeline
    ctx = i + o / 2.0
    new_per_step = c / o
    prefill_tokens = np.maximum(1.0, np.round(new_per_step * i))
    plen = np.round(i)
    if rep.engine.chunked_prefill:
        budget = float(rep.engine.prefill_chunk_tokens)
        piece = np.minimum(plen, budget) if rep.engine.split_prompts else plen
        # chunks of a split prompt attend every key before them (serve.estimate.mean_chunk_keys, start 0)
        n, rest = np.floor(plen / piece), plen - np.floor(plen / piece) * piece
        keys = np.where(piece < plen, np.round((piece * piece * n * (n + 1) / 2.0 + rest * plen) / plen), piece)
        st = _total(rep, eff, decode_seqs=c, decode_context=ctx, prefill_tokens=np.minimum(prefill_tokens, budget),
                    prefill_len=piece, prefill_kv_len=np.maximum(piece, keys), in_flight=flight)
        tpot = np.where(prefill_tokens > budget, st * np.maximum(1.0, prefill_tokens / budget), st)
        ttft = _mixed_prompt_arrays(rep, plen, c, ctx, eff, flight)
    else:
        st = _total(rep, eff, decode_seqs=c, decode_context=ctx, in_flight=flight)
        n_new = np.maximum(1.0, np.ceil(new_per_step))
        t_pref = time_prefill_arrays(rep, n_new, plen, eff)
        tpot = st + t_pref * new_per_step / n_new
        ttft = t_pref + st / 2.0  # a prompt waits on average half a decode step
    e2e = ttft + (o - 1) * tpot
    out_tps = conc / tpot
    return ServingArrays(ttft_s=ttft + 0 * e2e, tpot_s=tpot + 0 * e2e, e2e_latency_s=e2e,
                         output_tokens_per_s=out_tps + 0 * e2e, requests_per_s=out_tps / o + 0 * e2e,
                         n_devices=rep.n_devices)
