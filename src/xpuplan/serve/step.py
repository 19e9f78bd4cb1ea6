"""One engine step (forward pass) of a serving replica, over arrays: THE serving step model.

``step_arrays`` evaluates many steps at once — any mix of decode batches, contexts, prefill token
counts and prompt/chunk lengths, broadcast together — and, through ``eff``, many efficiency
samples (Monte Carlo) at once: pass an :class:`EfficiencyArrays` whose fields are arrays. The scalar
``serve.replica.step_time`` is this function on one point, so the two cannot disagree.

The assembly (module doc of ``serve.replica``): every layer's operations (``perf.ops.layer_ops``)
timed with the roofline (``perf.roofline.op_seconds``) plus the engine's per-kernel launch cost;
weight-only schemes add dequantisation; then TP all-reduces, MoE all-to-alls and pipeline
hand-offs from the one collective model (``perf.collectives.time_group_s``) and the engine's host
step overhead. Parts a step does not have (no decode sequences, no prefill tokens) cost nothing.

What stays scalar: the links (bus bandwidths and latencies) come from the replica's nominal
efficiency, not from the samples; collectives therefore vary with message size, not with samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from xpuplan.catalog.device import Device
from xpuplan.catalog.efficiency import Efficiency
from xpuplan.perf import collectives as coll
from xpuplan.perf.ops import MOE_COMBINE_OP, busiest_rank_copies, head_ops, layer_ops, routed_rows
from xpuplan.perf.roofline import OpCost, cost_attention, op_seconds
from xpuplan.serve.comm import moe_exchange_s, serving_all_reduce_algorithm
from xpuplan.serve.constants import (
    ACTIVATION_BYTES,
    DEQUANT_OPS_PER_WEIGHT,
    DEQUANT_TILE_TOKENS,
    VECTOR_TO_TENSOR_RATIO,
)

if TYPE_CHECKING:
    from xpuplan.serve.replica import Replica

#: Op names that ``perf.ops.layer_ops`` gives the routed-expert part of an MoE layer.
EXPERT_OPS = ("router", "experts up/gate", "experts activation", "experts down")
#: Attention work of a kernel that computes the full square of scores and masks it, over a causal kernel's
#: (which skips the tiles above the diagonal): s² against s²/2.
MASKED_SQUARE_OVER_CAUSAL: Final = 2.0


@dataclass(frozen=True)
class EfficiencyArrays:
    """The roofline efficiencies as arrays (one value per Monte Carlo sample, say); fields as in
    :class:`~xpuplan.catalog.efficiency.Efficiency`."""

    gemm_peak_fraction: np.ndarray
    gemm_half_dim: np.ndarray
    attention_peak_fraction: np.ndarray
    memory_bw_fraction: np.ndarray
    kernel_overhead_s: np.ndarray
    low_precision_factor: np.ndarray
    fp4_factor: np.ndarray

    @classmethod
    def of(cls, samples: list[Efficiency] | Efficiency) -> EfficiencyArrays:
        """From one efficiency (0-d arrays) or a list of samples (1-d arrays)."""
        items = samples if isinstance(samples, list) else [samples]
        arrs = {f.name: np.asarray([getattr(e, f.name) for e in items], dtype=float) for f in fields(cls)}
        if not isinstance(samples, list):
            arrs = {k: v[0] for k, v in arrs.items()}
        return cls(**arrs)

    def reshape(self, shape: tuple[int, ...]) -> EfficiencyArrays:
        """Every field reshaped (e.g. (n, 1) to broadcast samples against a grid of steps)."""
        return EfficiencyArrays(**{f.name: np.reshape(getattr(self, f.name), shape) for f in fields(self)})


@dataclass(frozen=True)
class StepArrays:
    """Seconds of many engine steps, by part (arrays broadcast from the inputs); see ``StepTime``."""

    tokens: np.ndarray
    compute_s: np.ndarray
    memory_s: np.ndarray
    ops_s: np.ndarray
    kernels_s: np.ndarray
    dequant_s: np.ndarray
    comm_s: np.ndarray
    overhead_s: np.ndarray
    pipeline_s: np.ndarray | float = 0.0

    @property
    def total_s(self) -> np.ndarray:
        return self.ops_s + self.dequant_s + self.comm_s + self.overhead_s + self.pipeline_s


def vector_flops(device: Device, act16: str) -> float:
    """Non-tensor (vector) FLOP/s, where weight-only kernels dequantise."""
    if device.supports("fp32"):
        return device.peak_flops("fp32")
    if device.supports(act16):
        return device.peak_flops(act16) * VECTOR_TO_TENSOR_RATIO
    return max(device.peak_flops(p) for p in device.dense_precisions) * VECTOR_TO_TENSOR_RATIO


def time_dequant_s(weight_elements: Any, rows: Any, device: Device, act16: str) -> Any:
    """Seconds to dequantise ``weight_elements`` weights once per tile of ``DEQUANT_TILE_TOKENS`` rows
    (weight-only int4/int8 GEMMs), at the device's vector rate; not overlapped (conservative)."""
    tiles = np.maximum(1.0, np.ceil(np.asarray(rows, dtype=float) / DEQUANT_TILE_TOKENS))
    return weight_elements * tiles * DEQUANT_OPS_PER_WEIGHT / vector_flops(device, act16)


def _ceil_div(a: Any, b: float) -> Any:
    if isinstance(a, np.ndarray):
        return np.maximum(1.0, np.ceil(a / b))
    return float(max(1.0, np.ceil(a / b)))


def _scaled(op: OpCost, k: Any) -> OpCost:
    return replace(op, flops=op.flops * k, bytes=op.bytes * k)


@dataclass(frozen=True)
class _Shape:
    """The broadcast inputs of a batch of steps (floats; ``has_*`` masks say which parts exist)."""

    tokens: np.ndarray
    group_tokens: np.ndarray
    decode_seqs: np.ndarray
    decode_context: np.ndarray
    prefill_tokens: np.ndarray
    prefill_len: np.ndarray
    prefill_kv_len: np.ndarray
    sampled_rows: np.ndarray
    has_decode: np.ndarray
    has_prefill: np.ndarray


def _dtypes(rep: Replica) -> tuple[str, str]:
    """(16-bit activation dtype, dtype of non-GEMM ops): 16-bit, or the GEMM dtype on integer-only
    parts (Ascend 310P lists only int8); those ops are memory-bound in decode, the choice matters little."""
    p, dev = rep.precision, rep.device
    act16 = p.gemm_dtype if p.gemm_dtype in ("bf16", "fp16") else ("fp16" if not dev.supports("bf16") else "bf16")
    op16 = act16 if (dev.supports("bf16") or dev.supports("fp16")) else p.gemm_dtype
    return act16, op16


def _layer_ops(rep: Replica, sh: _Shape, moe_layer: bool, act16: str) -> list[tuple[OpCost, np.ndarray]]:
    """One layer's ops, each with the mask of the steps that run it."""
    m, p = rep.model, rep.precision
    every = np.ones(np.shape(sh.tokens), dtype=bool)

    def lops(batch: Any, q_len: Any, kv_len: Any) -> list[OpCost]:
        return layer_ops(m, batch=batch, q_len=q_len, kv_len=kv_len, tp=rep.tp, ep=rep.ep, dtype=p.gemm_dtype,
                         weight_dtype=p.weight_dtype, kv_dtype=p.kv_dtype, moe_layer=moe_layer)

    # with expert parallelism inside the TP group (etp < tp) the experts and their combine run on tp/etp ranks
    # that each hold every token; otherwise the experts follow the replica's tp and ep
    expert_part = EXPERT_OPS if rep.etp is None else (*EXPERT_OPS, MOE_COMBINE_OP)
    ops = [(o, every) for o in lops(sh.group_tokens, 1, 1) if o.op_class != "attention" and o.name not in expert_part]
    if m.moe is not None and moe_layer:
        # the step waits for the expert-parallel rank the router sends the most copies to
        experts = layer_ops(m, batch=sh.tokens, q_len=1, kv_len=1, tp=rep.expert_tp, ep=rep.expert_ranks,  # type: ignore[arg-type]
                            dtype=p.gemm_dtype, weight_dtype=p.weight_dtype, kv_dtype=p.kv_dtype, moe_layer=moe_layer,
                            busiest_rank=True)
        ops += [(o, every) for o in experts if o.name in expert_part]
    dseq = _ceil_div(sh.decode_seqs, rep.ep)
    # speculative decoding: each decoding sequence verifies q = draft tokens + 1 positions per step,
    # all attending its cached keys (read once per sequence)
    q = rep.speculation.verify_tokens
    reuse = decode_kv_reuse(rep)
    if reuse < 1.0 and m.mla is None and m.kv_heads < m.n_heads:
        # Decode attention reads each KV head once per group of query heads sharing it (XQA, FlashInfer,
        # FlashAttention GQA), or once per query head (TRT-LLM < 0.8's masked MHA): KV heads loaded per
        # step = kv_heads + (1 - reuse)·(heads - kv_heads), reuse the engine's continuous gqa_kv_reuse.
        heads = max(1, m.n_heads // rep.tp)
        kvh = max(1, m.kv_heads // rep.tp)
        loaded = kvh + (1.0 - reuse) * (heads - kvh)
        att = [cost_attention(dseq, heads, q, sh.decode_context, m.qk_head_dim, causal=False, dtype=p.kv_dtype,  # type: ignore[arg-type]
                              kv_heads=loaded, v_head_dim=m.v_head_dim)]  # type: ignore[arg-type]
    else:
        att = [o for o in lops(dseq, q, sh.decode_context) if o.op_class == "attention"]
    ops += [(o, sh.has_decode) for o in att]
    if m.type == "encoder":  # bidirectional: every token attends to all (layer_ops assumes causal)
        att = [cost_attention(1, max(1, m.n_heads // rep.tp), sh.prefill_len, sh.prefill_kv_len, m.qk_head_dim,  # type: ignore[arg-type]
                              causal=False, dtype=act16, kv_heads=max(1, m.kv_heads // rep.tp), v_head_dim=m.v_head_dim)]
    else:
        att = [o for o in lops(1, sh.prefill_len, sh.prefill_kv_len) if o.op_class == "attention"]
    # prefill tokens may be a fraction of a prompt (steady-state chunking): scale linearly
    prompts = sh.prefill_tokens / rep.ep / sh.prefill_len
    square = full_square_prefill_steps(rep, sh)
    if square is None:
        ops += [(_scaled(o, prompts), sh.has_prefill) for o in att]
    else:  # those steps compute every score of the square: twice the causal triangle
        ops += [(_scaled(o, prompts), sh.has_prefill & ~square) for o in att]
        ops += [(_scaled(o, prompts * MASKED_SQUARE_OVER_CAUSAL), square) for o in att]
    return ops


def full_square_prefill_steps(rep: Replica, sh: _Shape) -> np.ndarray | None:
    """Mask of the steps whose prefill attention computes the full square of scores: steps of fresh prompts
    only (no decode, no cached context) on an engine release that runs them through a kernel masking every
    tile (``EngineProfile.masked_prefill_attention``: vLLM-Ascend before 0.12); None where the engine has no
    such path, and for MLA models and encoders (other kernels)."""
    rule = rep.engine.masked_prefill_attention
    if rule is None or not rule.active or rep.model.mla is not None or rep.model.type == "encoder":
        return None
    return np.asarray(sh.has_prefill & (np.asarray(sh.decode_seqs) == 0)
                      & (np.asarray(sh.prefill_kv_len) <= np.asarray(sh.prefill_len)))


def _gemm_rows(rep: Replica, op: OpCost, sh: _Shape) -> Any:
    """Token rows of a GEMM op (for dequantisation tiles): routed-expert GEMMs see the tokens routed
    to one expert, every other linear layer the attention group's tokens."""
    m = rep.model
    if op.name in EXPERT_OPS and m.moe is not None:
        ranks = rep.expert_ranks
        local = max(1, m.moe.n_routed_experts // ranks)
        routed = busiest_rank_copies(sh.tokens * m.moe.top_k, ranks, m.moe.n_routed_experts, m.moe.top_k) \
            if ranks > 1 else sh.tokens * m.moe.top_k
        touched, _ = routed_rows(local, m.moe.top_k, routed, m.moe.n_routed_experts)
        return np.maximum(1.0, routed / np.maximum(touched, 1e-9))
    return sh.group_tokens


def _ops_seconds(rep: Replica, ops: list[tuple[OpCost, np.ndarray]], sh: _Shape, eff: Any, op16: str,
                 act16: str, gemm_dtype: str | None) -> tuple[Any, Any, Any, Any, Any]:
    """(compute, memory, ops time, dequant time, fixed kernel overheads) of ``ops`` (masked sums).
    GEMMs other than the router run at ``gemm_dtype`` (None: everything at ``op16``)."""
    p, dev = rep.precision, rep.device
    launch = rep.engine.launch_overhead_s_per_kernel
    c = mem = t = dq = k = 0.0
    for o, mask in ops:
        whole = mask.all()  # every step runs it (the common case; no masking needed)
        if not whole and not mask.any():
            continue
        gemm = o.op_class == "gemm" and o.name != "router"
        t_c, t_m, t_o, _ = op_seconds(o, dev, gemm_dtype if (gemm and gemm_dtype) else op16, eff)
        parts = [t_c, t_m, t_o + launch, eff.kernel_overhead_s + launch]
        if p.weight_only and gemm and gemm_dtype:
            rows = _gemm_rows(rep, o, sh)
            parts.append(time_dequant_s(o.flops / (2.0 * rows), rows, dev, act16))
        if not whole:
            parts = [np.where(mask, x, 0.0) for x in parts]
        c, mem, t, k = c + parts[0], mem + parts[1], t + parts[2], k + parts[3]
        if len(parts) > 4:
            dq = dq + parts[4]
    return c, mem, t, dq, k


def _comm_s(rep: Replica, group_tokens: np.ndarray) -> np.ndarray:
    """TP all-reduces, MoE all-to-alls and pipeline hand-offs of one step (one collective model)."""
    m = rep.model
    links = rep.device_links
    msg = group_tokens * m.d_model * ACTIVATION_BYTES
    per_layer_ar = 1 if m.parallel_attn_mlp else 2
    ar = coll.time_group_s("all_reduce", msg, rep.tp, 1, links,
                           all_reduce=serving_all_reduce_algorithm(rep.engine.custom_allreduce))
    comm = m.n_layers * per_layer_ar * np.asarray(ar)
    if rep.ep > 1 and m.moe is not None:
        exchange = moe_exchange_s(rep.engine, m, rep.precision, rep.tp, rep.ep, links, group_tokens)
        comm = comm + m.n_moe_layers * np.asarray(exchange)
    if rep.pp > 1:  # stages are tp·ep devices apart
        comm = comm + (rep.pp - 1) * np.asarray(coll.time_group_s("p2p", msg / rep.tp, rep.pp, rep.tp * rep.ep, links))
    return comm


def decode_kv_reuse(rep: Replica) -> float:
    """Fraction of a GQA group's query heads served by one KV load in decode attention: the engine's
    ``gqa_kv_reuse`` (calibratable, 0-1), 0 for a printed version before its shared-KV kernels."""
    return rep.engine.gqa_kv_reuse if rep.engine.gqa_shared_kv_load else 0.0


def pipeline_wait_s(rep: Replica, layers_s: Any, head_s: Any, in_flight: Any = None) -> Any:
    """Seconds a pipelined step waits for its busiest stage, beyond the stages' own work (0 without PP).

    A step of a ``pp``-stage pipeline pushes one micro-batch through every stage, and with ``m`` micro-batches in
    flight each stage serves all of them in turn, so a round of the pipeline takes max(Σ stages, m × busiest stage)
    (the step model's other parts are the sum of the stages). The engines split the layers evenly with the remainder
    on the first stages (vLLM ``get_pp_indices``, TensorRT-LLM ``Mapping.pp_layers``), and the last stage also runs
    the output head (the LM head, kept in 16-bit by quantized checkpoints, and what it samples): the busiest stage is
    ``ceil(L/pp)`` layers, or ``floor(L/pp)`` layers plus the head. ``layers_s``: every layer's time (the layers'
    average per layer); ``head_s``: the head's. ``in_flight``: micro-batches in the pipeline (at most ``pp``; None:
    ``pp``, a full pipeline, what a loaded engine keeps)."""
    pp = rep.pp
    if pp <= 1:
        return 0.0
    m = pp if in_flight is None else np.clip(np.asarray(in_flight, dtype=float), 1.0, pp)
    n = rep.model.n_layers
    per_layer = np.asarray(layers_s) / n
    busiest = np.maximum(-(-n // pp) * per_layer, (n // pp) * per_layer + head_s)
    return np.maximum(0.0, m * busiest - (layers_s + head_s))


def step_arrays(rep: Replica, decode_seqs: Any, decode_context: Any, prefill_tokens: Any, prefill_len: Any,
                prefill_kv_len: Any, sampled_rows: Any, eff: Any = None, in_flight: Any = None) -> StepArrays:
    """Seconds of engine steps on ``rep`` from normalised inputs (integers >= 0 broadcast together;
    ``prefill_len``, ``prefill_kv_len``, ``sampled_rows``, ``decode_context`` >= 1; see
    ``serve.replica.step_time`` for their meaning). ``eff``: the replica's efficiency, or an
    :class:`EfficiencyArrays` of samples broadcasting against the inputs. ``in_flight``: pipeline micro-batches in
    flight (:func:`pipeline_wait_s`; None: a full pipeline)."""
    eff = rep.eff if eff is None else eff
    inputs = (decode_seqs, decode_context, prefill_tokens, prefill_len, prefill_kv_len, sampled_rows)
    ds: Any
    ctx: Any
    pt: Any
    plen: Any
    pkv: Any
    rows: Any
    if any(np.ndim(v) for v in inputs):
        ds, ctx, pt, plen, pkv, rows = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in inputs))
    else:  # one step: plain floats keep the scalar path fast (same arithmetic)
        ds, ctx, pt, plen, pkv, rows = (float(v) for v in inputs)
    q = rep.speculation.verify_tokens
    if q > 1:  # speculative decoding: q positions per decoding sequence go through the layers and the head
        rows = rows + ds * (q - 1)
        ds_tokens = ds * q
    else:
        ds_tokens = ds
    tokens = ds_tokens + pt
    sh = _Shape(tokens=tokens, group_tokens=_ceil_div(tokens, rep.ep), decode_seqs=ds, decode_context=ctx,
                prefill_tokens=pt, prefill_len=plen, prefill_kv_len=pkv, sampled_rows=rows,
                has_decode=np.asarray(ds > 0), has_prefill=np.asarray(pt > 0))
    act16, op16 = _dtypes(rep)
    m = rep.model
    n_moe = m.n_moe_layers
    comp = memb = ops_t = dq_t = kern = 0.0
    for count, is_moe in ((m.n_layers - n_moe, False), (n_moe, True)):
        if count:
            c, mem, t, dq, k = _ops_seconds(rep, _layer_ops(rep, sh, is_moe, act16), sh, eff, op16, act16,
                                            rep.precision.gemm_dtype)
            comp, memb, ops_t = comp + count * c, memb + count * mem, ops_t + count * t
            dq_t, kern = dq_t + count * dq, kern + count * k
    head = head_ops(m, rows=_ceil_div(rows, rep.ep), tp=rep.tp, dtype=act16, weight_dtype=act16)  # type: ignore[arg-type]
    every = np.ones(np.shape(tokens), dtype=bool)
    c, mem, t, _, k = _ops_seconds(rep, [(o, every) for o in head], sh, eff, op16, act16, None)
    zeros = np.zeros(np.broadcast(tokens, eff.kernel_overhead_s).shape)
    ops_s, comm_s = ops_t + t + zeros, _comm_s(rep, sh.group_tokens) + zeros
    # each attention-DP group (ep > 1) schedules its own share of the requests, in parallel with the others
    wait = pipeline_wait_s(rep, ops_t + dq_t, t, in_flight) + zeros
    host_s = exposed_host_s(rep, _ceil_div(scheduled_sequences(ds, pt, plen), rep.ep), ops_s + dq_t + comm_s + wait)
    return StepArrays(tokens=tokens + zeros, compute_s=comp + c + zeros, memory_s=memb + mem + zeros,
                      ops_s=ops_s, kernels_s=kern + k + zeros, dequant_s=dq_t + zeros,
                      comm_s=comm_s, overhead_s=rep.engine.step_overhead_s + host_s + zeros, pipeline_s=wait)


def scheduled_sequences(decode_seqs: Any, prefill_tokens: Any, prefill_len: Any) -> Any:
    """Requests an engine step schedules: every decoding sequence, and each prompt (or chunk) of
    ``prefill_len`` tokens among the ``prefill_tokens``."""
    if not (np.ndim(decode_seqs) or np.ndim(prefill_tokens) or np.ndim(prefill_len)):
        return decode_seqs + (math.ceil(prefill_tokens / max(prefill_len, 1)) if prefill_tokens > 0 else 0.0)
    return decode_seqs + np.where(np.asarray(prefill_tokens) > 0,
                                  np.ceil(np.asarray(prefill_tokens) / np.maximum(prefill_len, 1)), 0.0)


def exposed_host_s(rep: Replica, sequences: Any, device_s: Any) -> Any:
    """Seconds of the engine's per-sequence host work (``host_s_per_sequence`` x ``sequences``) that
    the step does not hide: all of it in a synchronous engine loop (schedule, run, update in turn);
    with asynchronous scheduling the next step's host work runs under this step's ``device_s``, so
    only what exceeds it."""
    if not rep.engine.host_s_per_sequence:
        return 0.0
    host = rep.engine.host_s_per_sequence * np.asarray(sequences, dtype=float)
    return np.maximum(host - device_s, 0.0) if rep.engine.async_scheduling else host


def normalise(decode_seqs: Any = 0, decode_context: Any = 0, prefill_tokens: Any = 0, prefill_len: Any = None,
              prefill_kv_len: Any = None, sampled_rows: Any = None) -> tuple[np.ndarray, ...]:
    """The defaults of ``serve.replica.step_time`` over arrays: whole prompts (``prefill_len`` =
    the prefill tokens), keys = the prompt, sampled rows = decode sequences + prompts completed."""
    ds = np.asarray(decode_seqs, dtype=float)
    pt = np.asarray(prefill_tokens, dtype=float)
    if np.any(ds < 0) or np.any(pt < 0) or np.any(ds + pt == 0):
        from xpuplan.serve.validity import check_step_tokens

        check_step_tokens(-1, 0)
    plen = np.where(pt > 0, pt, 1.0) if prefill_len is None else np.where(
        np.asarray(prefill_len) > 0, prefill_len, np.where(pt > 0, pt, 1.0))
    plen = np.asarray(plen, dtype=float)
    pkv = plen if prefill_kv_len is None else np.maximum(np.where(np.asarray(prefill_kv_len) > 0, prefill_kv_len, plen), plen)
    rows = ds + np.where(pt > 0, np.ceil(pt / plen), 0.0) if sampled_rows is None else np.asarray(sampled_rows, float)
    ctx = np.maximum(1.0, np.round(np.asarray(decode_context, dtype=float)))
    return ds, ctx, pt, plen, np.asarray(pkv, dtype=float), np.maximum(1.0, np.floor(rows))
