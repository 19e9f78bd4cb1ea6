"""Latency and throughput of one replica at a batch (static) or a concurrency (continuous batching).

Static batch (``mode="static"``): ``batch`` prompts of ``input_len`` tokens start together, are
prefilled (in chunks of the engine's token budget), then decoded in lock-step for ``output_len - 1``
steps (the first output token comes from the prefill). TTFT is the batch's prefill time, TPOT the mean
decode step, end-to-end latency their sum. This is also what continuous batching does when all
requests arrive at once with equal lengths (benchmark "latency" and fixed-length offline runs).

Continuous batching (``mode="continuous"``), steady state at ``concurrency`` C running sequences:
every step each running sequence emits one token, and C/output_len new requests are admitted per
step, whose prompts add C·input_len/output_len prefill tokens per step. The decode context averages
``input_len + output_len/2``.

* With chunked prefill (vLLM V1, SGLang, TensorRT-LLM) those prompt tokens ride in the same forward
  as the decode tokens (Sarathi-style piggybacking): one mixed step; TPOT = that step.
* Without it (LMDeploy, MindIE, vLLM V0 default) prompts run in separate prefill steps that stall
  decoding: TPOT = decode step + the prefill time per step.

TTFT under continuous batching at this closed-loop concurrency is the step that carries the prompt
(no queueing); queueing under an arrival process is in :mod:`xpuplan.serve.slo`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.serve import validity
from xpuplan.serve.kv import MemoryPlan, max_concurrent_sequences, memory_plan, require_fit
from xpuplan.serve.replica import Replica, StepTime, step_time
from xpuplan.workload.vocabulary import BatchingMode

Mode = BatchingMode  # the serving vocabulary (workload.vocabulary)

#: Decode steps sampled to integrate the step time over a growing context (the step time is
#: piecewise linear in the context, so a few points integrate it exactly enough).
_DECODE_SAMPLES = 8


@dataclass(frozen=True)
class ServingEstimate:
    """Metrics of one replica at one operating point (SI units: seconds, tokens/s, requests/s)."""

    replica: dict[str, Any]
    mode: str
    input_len: int
    output_len: int
    batch: int
    ttft_s: float
    tpot_s: float
    e2e_latency_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    requests_per_s: float
    n_devices: int
    prefill: StepTime
    decode: StepTime
    memory: MemoryPlan
    max_concurrency: int
    fits: bool
    efficiency_source: str
    notes: list[str] = field(default_factory=list)

    @property
    def output_tokens_per_s_per_device(self) -> float:
        return self.output_tokens_per_s / self.n_devices

    @property
    def requests_per_s_per_device(self) -> float:
        return self.requests_per_s / self.n_devices

    @property
    def tokens_per_s_per_user(self) -> float:
        """Decode speed one user sees (1 / TPOT)."""
        return 1.0 / self.tpot_s if self.tpot_s > 0 else math.inf

    def metric(self, name: str) -> float:
        """A metric by its validation-file name (ms for latencies)."""
        values = {
            "ttft_ms": self.ttft_s * 1e3, "tpot_ms": self.tpot_s * 1e3, "e2e_latency_ms": self.e2e_latency_s * 1e3,
            "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_device": self.output_tokens_per_s_per_device,
            "total_tokens_per_s": self.total_tokens_per_s, "requests_per_s": self.requests_per_s,
        }
        if name not in values:
            raise UserInputError(f"unknown serving metric {name!r}; known: {', '.join(values)}", field="metric")
        return values[name]

    def to_dict(self) -> dict[str, Any]:
        return {
            "replica": self.replica, "mode": self.mode, "input_len": self.input_len, "output_len": self.output_len,
            "batch": self.batch, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
            "e2e_latency_s": self.e2e_latency_s, "output_tokens_per_s": self.output_tokens_per_s,
            "output_tokens_per_s_per_device": self.output_tokens_per_s_per_device,
            "total_tokens_per_s": self.total_tokens_per_s, "requests_per_s": self.requests_per_s,
            "requests_per_s_per_device": self.requests_per_s_per_device,
            "tokens_per_s_per_user": self.tokens_per_s_per_user, "n_devices": self.n_devices,
            "prefill_step": self.prefill.to_dict(), "decode_step": self.decode.to_dict(),
            "memory_per_device": self.memory.to_dict(), "max_concurrency": self.max_concurrency, "fits": self.fits,
            "efficiency_source": self.efficiency_source, "notes": self.notes,
        }


def _check_lengths(input_len: int, output_len: int, batch: int) -> None:
    validity.check_request(input_len, output_len, batch)


def time_prefill_s(rep: Replica, n_prompts: int, prompt_len: int) -> tuple[float, StepTime]:
    """Seconds to prefill ``n_prompts`` prompts of ``prompt_len`` tokens, in forwards of at most the
    engine's token budget (whole prompts per forward; a longer prompt is chunked). Returns the time
    and the largest step's breakdown."""
    budget = max(rep.engine.prefill_chunk_tokens, 1)
    per_micro = max(1, math.ceil(n_prompts / rep.pp))  # pipeline stages work on different prompts
    flight = n_prompts  # in the pipeline at once (the step model caps it at pp)
    cached = cached_prefix_tokens(rep, prompt_len)
    new = prompt_len - cached
    if new <= budget:
        per_fwd = max(1, min(per_micro, budget // new))
        full, rest = divmod(per_micro, per_fwd)
        st = step_time(rep, prefill_tokens=per_fwd * new, prefill_len=new, prefill_kv_len=prompt_len, in_flight=flight)
        t = full * st.total_s
        if rest:
            t += step_time(rep, prefill_tokens=rest * new, prefill_len=new, prefill_kv_len=prompt_len,
                           in_flight=flight).total_s
        return t + _pp_fill(rep, st), st
    # chunked long prompt: chunk i attends to all earlier chunks (and the cached prefix)
    t = 0.0
    done = cached
    largest = step_time(rep, prefill_tokens=budget, prefill_len=budget, prefill_kv_len=prompt_len, sampled_rows=1,
                        in_flight=flight)
    while done < prompt_len:
        c = min(budget, prompt_len - done)
        t += step_time(rep, prefill_tokens=c, prefill_len=c, prefill_kv_len=done + c, sampled_rows=1,
                       in_flight=flight).total_s
        done += c
    return per_micro * t + _pp_fill(rep, largest), largest


def cached_prefix_tokens(rep: Replica, prompt_len: float) -> int:
    """Prompt tokens served from the prefix cache (``rep.prefix_hit_rate`` of the prompt, at least one
    token left to prefill): their keys are read by attention, their forward is not run again."""
    if not rep.prefix_hit_rate:
        return 0
    return min(int(prompt_len) - 1, int(round(prompt_len * rep.prefix_hit_rate)))


def draft_s(rep: Replica, seqs: int, context: float, in_flight: int | None = None) -> float:
    """Seconds of proposing ``draft_tokens`` per sequence per step (speculative decoding): draft_cost
    of a plain (one-token) decode step of ``seqs`` sequences at ``context`` per draft token."""
    sp = rep.speculation
    if not sp.active or sp.draft_cost == 0:
        return 0.0
    plain = _without_speculation(rep)
    return sp.draft_tokens * sp.draft_cost * step_time(plain, decode_seqs=seqs, decode_context=context,
                                                       in_flight=in_flight).total_s


@lru_cache(maxsize=1024)
def _without_speculation(rep: Replica) -> Replica:
    """The plain (non-speculative) twin of a replica (one object per replica, so step_time's cache hits)."""
    from xpuplan.serve.plan import NO_SPECULATION

    return replace(rep, speculation=NO_SPECULATION)


def _pp_fill(rep: Replica, st: StepTime) -> float:
    """Pipeline fill: with ``pp`` micro-batches in flight the last one finishes (pp-1) stage-times
    after the first; a stage takes 1/pp of a full pass. Zero without PP."""
    return (rep.pp - 1) / rep.pp * st.total_s


def mean_decode_step(rep: Replica, seqs: int, ctx_start: float, ctx_end: float, *,
                     prefill_tokens: int = 0, prefill_len: int = 1, in_flight: int | None = None) -> tuple[float, StepTime]:
    """Mean step time while ``seqs`` sequences decode from ``ctx_start`` to ``ctx_end`` keys (trapezoid
    over a few samples), and the breakdown at the middle context."""
    n = _DECODE_SAMPLES if ctx_end > ctx_start else 1
    pts = [ctx_start + (ctx_end - ctx_start) * i / max(n - 1, 1) for i in range(n)]
    times = [step_time(rep, decode_seqs=seqs, decode_context=c, prefill_tokens=prefill_tokens,
                       prefill_len=prefill_len, in_flight=in_flight).total_s for c in pts]
    mean = times[0] if n == 1 else (sum(times) - 0.5 * (times[0] + times[-1])) / (n - 1)
    mid = step_time(rep, decode_seqs=seqs, decode_context=(ctx_start + ctx_end) / 2, prefill_tokens=prefill_tokens,
                    prefill_len=prefill_len, in_flight=in_flight)
    return mean, mid


def static_misfit_note(rep: Replica, plan: MemoryPlan, batch: int, seq_tokens: int) -> str:
    """What a static batch that does not fit the memory model says (a published batch that ran but
    does not fit means the memory model, not the batch, is wrong for that run)."""
    kv_seqs = plan.max_sequences(seq_tokens) * rep.ep if plan.kv_bytes_per_token else batch
    fixed = plan.weights_bytes + plan.workspace_bytes + plan.activation_bytes
    if fixed > plan.usable_bytes:
        why = "the weights and workspace alone exceed the usable memory"
    elif kv_seqs >= batch:
        why = f"the engine's sequence limit (max_num_seqs {rep.max_num_seqs}) is below the batch"
    else:
        need = batch * plan.blocks_per_sequence(seq_tokens) * plan.block_size_tokens * plan.kv_bytes_per_token / rep.ep
        why = (f"its KV cache needs {need / 1e9:.1f} GB per device, {max(0.0, plan.kv_budget_bytes) / 1e9:.1f} GB "
               f"modelled ({kv_seqs} such sequences)")
    return (f"memory check: batch {batch} x {seq_tokens} tokens does not fit the memory model ({why}); "
            "if the batch ran as published, the memory model is wrong for this run")


def estimate_static(rep: Replica, input_len: int, output_len: int, batch: int, *, check_memory: bool = True) -> ServingEstimate:
    """Static batch: prefill all ``batch`` prompts, then decode them together (see module doc)."""
    _check_lengths(input_len, output_len, batch)
    plan = memory_plan(rep, tokens_per_forward=min(batch * input_len, rep.engine.prefill_chunk_tokens))
    seq_tokens = input_len + output_len
    fits = True
    notes = list(rep.notes)
    try:
        require_fit(rep, plan, seq_tokens, batch)
    except InfeasibleError:
        if check_memory:
            raise
        fits = False
        notes.append(static_misfit_note(rep, plan, batch, seq_tokens))
    t_prefill, st_prefill = time_prefill_s(rep, batch, input_len)
    micro = max(1, math.ceil(batch / rep.pp))
    flight = batch  # in the pipeline at once (the step model caps it at pp)
    if output_len > 1:
        tpot, st_decode = mean_decode_step(rep, micro, input_len + 1, input_len + output_len - 1, in_flight=flight)
        sp = rep.speculation
        if sp.active:  # one verification step (+ drafting) emits accepted_tokens tokens per sequence
            tpot = (tpot + draft_s(rep, micro, input_len + output_len / 2.0, flight)) / sp.accepted_tokens
    else:
        tpot, st_decode = 0.0, step_time(rep, decode_seqs=micro, decode_context=input_len + 1, in_flight=flight)
    e2e = t_prefill + (output_len - 1) * tpot
    return ServingEstimate(
        replica=rep.to_dict(), mode="static", input_len=input_len, output_len=output_len, batch=batch,
        ttft_s=t_prefill, tpot_s=tpot, e2e_latency_s=e2e, output_tokens_per_s=batch * output_len / e2e,
        total_tokens_per_s=batch * (input_len + output_len) / e2e, requests_per_s=batch / e2e,
        n_devices=rep.n_devices, prefill=st_prefill, decode=st_decode, memory=plan,
        max_concurrency=max_concurrent_sequences(rep, plan, seq_tokens), fits=fits,
        efficiency_source=rep.eff.source, notes=notes,
    )


def kv_tokens_per_sequence(rep: Replica, input_len: float, output_len: float) -> float:
    """KV tokens one running sequence holds on average: prompt + full output when the engine reserves
    it (TensorRT-LLM GUARANTEED_NO_EVICT, MindIE, static batches), else prompt + half the output."""
    return input_len + (output_len if rep.engine.reserve_full_output else output_len / 2.0)


def prompt_in_mixed_steps_s(rep: Replica, prompt_len: int, decode_seqs: int, decode_context: float,
                            in_flight: int | None = None) -> float:
    """Seconds until a prompt of ``prompt_len`` tokens is prefilled when its chunks (at most the engine's
    token budget each) ride in steps that also decode ``decode_seqs`` running sequences (per pipeline micro-batch;
    ``in_flight`` micro-batches in the pipeline)."""
    budget = split_budget(rep, prompt_len)
    t, done = 0.0, cached_prefix_tokens(rep, prompt_len)
    while done < prompt_len:
        k = min(budget, prompt_len - done)
        t += step_time(rep, decode_seqs=decode_seqs, decode_context=decode_context, prefill_tokens=k, prefill_len=k,
                       prefill_kv_len=done + k, in_flight=in_flight).total_s
        done += k
    return t


def continuous_step(rep: Replica, input_len: float, output_len: float, concurrency: int) -> tuple[float, float, StepTime]:
    """(TPOT, TTFT, decode-step breakdown) of the steady state at ``concurrency`` running sequences."""
    c = max(1, math.ceil(concurrency / rep.pp))  # sequences per pipeline micro-batch
    flight = concurrency  # in the pipeline at once (the step model caps it at pp)
    ctx = input_len + output_len / 2.0
    sp = rep.speculation
    new_per_step = c / steps_per_request(rep, output_len)
    plen = int(round(input_len))
    if rep.engine.chunked_prefill:
        tpot, st = continuous_tpot(rep, input_len, output_len, concurrency)
        # the new prompt rides in ceil(in / budget) steps beside the running sequences' decode tokens
        ttft = prompt_in_mixed_steps_s(rep, plen, c, ctx, flight)
    else:
        st = step_time(rep, decode_seqs=c, decode_context=ctx, in_flight=flight)
        t_pref, _ = time_prefill_s(rep, max(1, math.ceil(new_per_step)), plen)
        per_step_prefill = t_pref * new_per_step / max(1, math.ceil(new_per_step))
        tpot = st.total_s + per_step_prefill
        ttft = t_pref + st.total_s / 2.0  # a prompt waits on average half a decode step
        if sp.active:  # per token: a step (+ drafting) emits accepted_tokens per sequence
            tpot = (tpot + draft_s(rep, c, ctx, flight)) / sp.accepted_tokens
    return tpot, ttft, st


def mean_chunk_keys(start: int, end: int, piece: int) -> float:
    """Keys a prompt token attends on average, token-weighted, when tokens ``start``..``end`` are
    prefilled in chunks of ``piece`` (chunk i attends all keys up to its end): closed form for
    start = 0, Σ piece·(i·piece) + rest·end over end tokens."""
    n_tok = max(1, end - start)
    if start == 0:
        n, rest = divmod(end, piece)
        return (piece * piece * n * (n + 1) / 2.0 + rest * end) / n_tok
    total, done = 0.0, start
    while done < end:
        c = min(piece, end - done)
        total += c * (done + c)
        done += c
    return total / n_tok


def split_budget(rep: Replica, prompt_len: float) -> int:
    """Largest piece of one prompt a mixed step carries: the engine's token budget when it splits
    prompts (chunked prefill), else the whole prompt (TensorRT-LLM in-flight batching by default)."""
    budget = max(1, rep.engine.prefill_chunk_tokens)
    return budget if rep.engine.split_prompts else max(budget, int(math.ceil(prompt_len)))


def steps_per_request(rep: Replica, output_len: float) -> float:
    """Engine steps a request decodes for: its output, over the tokens accepted per step."""
    return output_len / rep.speculation.accepted_tokens


def continuous_tpot(rep: Replica, input_len: float, output_len: float, concurrency: int) -> tuple[float, StepTime]:
    """(TPOT, step breakdown) of the steady state at ``concurrency`` running sequences — the part of
    :func:`continuous_step` that does not need the TTFT (cheaper with chunked prefill)."""
    if not rep.engine.chunked_prefill:
        tpot, _, st = continuous_step(rep, input_len, output_len, concurrency)
        return tpot, st
    c = max(1, math.ceil(concurrency / rep.pp))  # sequences per pipeline micro-batch
    flight = concurrency  # in the pipeline at once (the step model caps it at pp)
    ctx = input_len + output_len / 2.0
    plen = int(round(input_len))
    new = plen - cached_prefix_tokens(rep, plen)  # prompt tokens each new request still prefills
    prefill_tokens = max(1, round(c / steps_per_request(rep, output_len) * new))
    budget = rep.engine.prefill_chunk_tokens
    pt = min(prefill_tokens, budget)
    piece = min(new, split_budget(rep, new))
    # a prompt split into chunks (or after a cached prefix): each chunk attends every key before it
    kv = {"prefill_kv_len": max(piece, round(mean_chunk_keys(plen - new, plen, piece)))} if (piece < new or new < plen) else {}
    st = step_time(rep, decode_seqs=c, decode_context=ctx, prefill_tokens=pt, prefill_len=piece, in_flight=flight, **kv)
    tpot = st.total_s * max(1.0, prefill_tokens / budget) if prefill_tokens > budget else st.total_s
    sp = rep.speculation
    if sp.active:  # per token: a step (+ drafting) emits accepted_tokens per sequence
        tpot = (tpot + draft_s(rep, c, ctx, flight)) / sp.accepted_tokens
    return tpot, st


def estimate_continuous(rep: Replica, input_len: int, output_len: int, concurrency: int, *,
                        check_memory: bool = True) -> ServingEstimate:
    """Steady state of continuous batching at ``concurrency`` running sequences (see module doc)."""
    _check_lengths(input_len, output_len, concurrency)
    plan = memory_plan(rep)
    kv_tokens = kv_tokens_per_sequence(rep, input_len, output_len)
    notes = list(rep.notes)
    fits = True
    limit = max_concurrent_sequences(rep, plan, kv_tokens)
    running = concurrency
    try:
        require_fit(rep, plan, kv_tokens, 1)
        if concurrency > limit:
            running = limit
    except InfeasibleError:
        if check_memory:
            raise
        fits = False
        notes.append(f"concurrency {concurrency} exceeds the modelled KV capacity")
    tpot, ttft, st = continuous_step(rep, input_len, output_len, running)
    # every running sequence emits one token per TPOT; requests complete at running / (out · TPOT)
    out_tps = running / tpot
    rps = out_tps / output_len
    if running < concurrency:
        # Closed loop above the running-sequence limit (KV capacity or max_num_seqs): the engine runs
        # `limit` sequences, so TPOT stops growing; the other clients wait for a slot, freed at the
        # completion rate, so by Little's law each waits (concurrency - limit) / rps more for its first token.
        wait = (concurrency - running) / rps
        ttft += wait
        notes.append(f"concurrency {concurrency} is above the running-sequence limit {running} (KV capacity / "
                     f"max_num_seqs): {running} run, the rest wait {wait * 1e3:,.0f} ms for a slot (added to TTFT)")
    e2e = ttft + (output_len - 1) * tpot
    pre = time_prefill_s(rep, 1, input_len)[1]
    return ServingEstimate(
        replica=rep.to_dict(), mode="continuous", input_len=input_len, output_len=output_len, batch=concurrency,
        ttft_s=ttft, tpot_s=tpot, e2e_latency_s=e2e, output_tokens_per_s=out_tps,
        total_tokens_per_s=rps * (input_len + output_len), requests_per_s=rps, n_devices=rep.n_devices,
        prefill=pre, decode=st, memory=plan, max_concurrency=max_concurrent_sequences(rep, plan, kv_tokens),
        fits=fits, efficiency_source=rep.eff.source, notes=notes,
    )


def estimate(rep: Replica, input_len: int, output_len: int, batch: int, *, mode: Mode | None = None,
             check_memory: bool = True) -> ServingEstimate:
    """Static or continuous estimate; ``mode`` None follows the engine (static for plain PyTorch)."""
    mode = mode or ("static" if rep.engine.batching == "static" else "continuous")
    if mode == "static":
        return estimate_static(rep, input_len, output_len, batch, check_memory=check_memory)
    if mode == "continuous":
        return estimate_continuous(rep, input_len, output_len, batch, check_memory=check_memory)
    validity.check_batching(mode)
    raise AssertionError("unreachable")


def max_batch(rep: Replica, input_len: int, output_len: int, *, mode: Mode | None = None) -> int:
    """Largest batch (static) or concurrency (continuous) the KV cache and the engine allow."""
    _check_lengths(input_len, output_len, 1)
    plan = memory_plan(rep)
    mode = mode or ("static" if rep.engine.batching == "static" else "continuous")
    tokens = input_len + output_len if mode == "static" else kv_tokens_per_sequence(rep, input_len, output_len)
    require_fit(rep, plan, tokens, 1)
    return max_concurrent_sequences(rep, plan, tokens)


def max_throughput(rep: Replica, input_len: int, output_len: int, *, mode: Mode | None = None) -> ServingEstimate:
    """The maximum-throughput operating point: the largest batch/concurrency that fits (output tokens/s
    grows with the batch until memory runs out in this model)."""
    b = max_batch(rep, input_len, output_len, mode=mode)
    return estimate(rep, input_len, output_len, b, mode=mode)
