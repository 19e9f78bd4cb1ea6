"""A serving replica and the time of one engine step (forward pass) on it.

A replica is one copy of a model on ``tp × pp × ep`` devices of one kind:

* ``tp`` tensor-parallel ranks split every layer's heads and MLP columns (Megatron layout), with
  one all-reduce after attention and one after the MLP (one per layer for parallel attention/MLP
  blocks such as GPT-J and Falcon);
* ``pp`` pipeline stages split the layers; ``pp`` micro-batches are kept in flight;
* ``ep`` (MoE only) splits the routed experts over ``ep`` groups of ``tp`` devices; attention runs
  data-parallel across those groups (the DP-attention + EP layout of SGLang and DeepSeek's serving
  system), so a replica has ``tp·pp·ep`` devices and two all-to-alls per MoE layer.

One engine step is a forward pass over a set of tokens: ``decode_seqs`` sequences adding one token
at ``decode_context`` keys, plus ``prefill_tokens`` prompt tokens (whole prompts or chunks of
``prefill_len`` tokens). The linear layers see all tokens at once (weights read once); attention is
costed separately for the decode and the prefill parts. Each operation's time is the roofline
``max(FLOP / achievable FLOP/s, bytes / achievable B/s) + kernel overhead`` of ``perf.roofline``;
then TP/EP communication, the pipeline hand-offs and the engine's per-step host overhead are added.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from xpuplan.calibration import resolve_efficiency
from xpuplan.catalog.device import Device
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.ops import expected_experts_touched, head_ops, layer_ops
from xpuplan.perf.roofline import OpCost, cost_attention, op_time
from xpuplan.serve.comm import time_allreduce_s, time_alltoall_s, time_p2p_s
from xpuplan.serve.constants import (
    ACTIVATION_BYTES,
    DEQUANT_OPS_PER_WEIGHT,
    DEQUANT_TILE_TOKENS,
    VECTOR_TO_TENSOR_RATIO,
    EngineProfile,
    default_engine,
    engine_profile,
)
from xpuplan.serve.precision import Precision, resolve_precision

#: Op names that ``perf.ops.layer_ops`` gives the routed-expert part of an MoE layer.
EXPERT_OPS = ("router", "experts up/gate", "experts activation", "experts down")


@dataclass(frozen=True, eq=False)
class Replica:
    """One model copy on ``tp·pp·ep`` devices; build it with :func:`make_replica` (validated)."""

    model: ModelArch
    device: Device
    precision: Precision
    engine: EngineProfile
    eff: Efficiency
    tp: int = 1
    pp: int = 1
    ep: int = 1
    memory_fraction: float = 0.9
    block_size_tokens: int = 16
    max_num_seqs: int = 256
    notes: tuple[str, ...] = field(default=())

    @property
    def n_devices(self) -> int:
        return self.tp * self.pp * self.ep

    @property
    def key(self) -> str:
        """Stable candidate key, e.g. ``llama2-70b@nvidia-h100-sxm-80gb:tp4pp1ep1:fp8/kv-fp8:trtllm``."""
        p = self.precision
        return (f"{self.model.id}@{self.device.id}:tp{self.tp}pp{self.pp}ep{self.ep}:"
                f"{p.scheme}/kv-{p.kv_dtype}:{self.engine.id}")

    def to_dict(self) -> dict[str, object]:
        return {
            "key": self.key, "model": self.model.id, "hardware": self.device.id, "tp": self.tp, "pp": self.pp,
            "ep": self.ep, "n_devices": self.n_devices, "precision": self.precision.to_dict(),
            "engine": self.engine.id, "memory_fraction": self.memory_fraction,
            "block_size_tokens": self.block_size_tokens, "max_num_seqs": self.max_num_seqs,
            "efficiency_source": self.eff.source, "notes": list(self.notes),
        }


def _positive(name: str, value: int) -> int:
    if value is None or value < 1:
        raise UserInputError(f"{name} must be a positive integer (got {value})", field=name)
    return value


def check_parallelism(model: ModelArch, tp: int, pp: int, ep: int) -> None:
    """UserInputError naming the field when the split is impossible for this model."""
    _positive("tp", tp)
    _positive("pp", pp)
    _positive("ep", ep)
    if model.n_heads % tp:
        raise UserInputError(f"tp ({tp}) must divide n_heads ({model.n_heads})", field="tp")
    kvh = model.kv_heads
    if model.mla is None and kvh % tp and tp % kvh:
        raise UserInputError(f"tp ({tp}) and n_kv_heads ({kvh}) must divide one another", field="tp")
    if pp > model.n_layers:
        raise UserInputError(f"pp ({pp}) exceeds the number of layers ({model.n_layers})", field="pp")
    if ep > 1:
        if model.moe is None:
            raise UserInputError(f"ep ({ep}) needs a mixture-of-experts model; {model.id} is dense", field="ep")
        if model.moe.n_routed_experts % ep:
            raise UserInputError(f"ep ({ep}) must divide the routed experts ({model.moe.n_routed_experts})", field="ep")


def make_replica(
    model: ModelArch,
    device: Device,
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    engine: str | None = None,
    memory_fraction: float | None = None,
    block_size_tokens: int | None = None,
    max_num_seqs: int | None = None,
    eff: Efficiency | None = None,
) -> Replica:
    """Validated :class:`Replica`. ``dtype`` is a precision scheme (bf16, fp16, fp8, int8, int8-wo,
    int4-wo or an alias); ``engine`` an engine family or name (vLLM, SGLang, TensorRT-LLM, LMDeploy,
    MindIE, PyTorch, TensorRT; None: the first the device's ecosystem lists); engine defaults fill the
    memory fraction, block size and sequence limit."""
    if model.type == "encoder" and pp > 1:
        raise UserInputError("encoder models are served with pp=1", field="pp")
    check_parallelism(model, tp, pp, ep)
    if engine is None or not engine.strip():
        engine = default_engine(device.ecosystem.serving_engines, encoder=model.type == "encoder")
    prof = engine_profile(engine)
    prec = resolve_precision(dtype, device, kv_dtype)
    frac = prof.gpu_memory_fraction if memory_fraction is None else memory_fraction
    if not 0 < frac <= 1:
        raise UserInputError(f"memory fraction must be in (0, 1] (got {frac})", field="memory_fraction")
    block = prof.block_size_tokens if block_size_tokens is None else _positive("block_size", block_size_tokens)
    seqs = prof.max_num_seqs if max_num_seqs is None else _positive("max_num_seqs", max_num_seqs)
    notes: list[str] = []
    if prec.note:
        notes.append(prec.note)
    if tp * ep > max(device.scale_up_domain, 1):
        notes.append(f"tp·ep = {tp * ep} exceeds the {device.id} scale-up domain ({device.scale_up_domain}); "
                     "its collectives cross the scale-out network")
    return Replica(model=model, device=device, precision=prec, engine=prof, eff=eff or resolve_efficiency(device),
                   tp=tp, pp=pp, ep=ep, memory_fraction=frac, block_size_tokens=block, max_num_seqs=seqs,
                   notes=tuple(notes))


# ---------------------------------------------------------------------------------------------
# Step time
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepTime:
    """Seconds of one engine step, by part. ``compute_s``/``memory_s`` sum the roofline terms of every
    op (for the bound), ``ops_s`` is what the ops take (max of the two per op + kernel overheads)."""

    tokens: int
    compute_s: float
    memory_s: float
    ops_s: float
    kernels_s: float
    dequant_s: float
    comm_s: float
    overhead_s: float

    @property
    def total_s(self) -> float:
        return self.ops_s + self.dequant_s + self.comm_s + self.overhead_s

    @property
    def bound(self) -> str:
        """What dominates the step: ``compute`` or ``memory`` (roofline terms of the ops),
        ``communication``, or ``overhead`` (kernel launches and the engine's host step)."""
        parts = {"compute": self.compute_s + self.dequant_s, "memory": self.memory_s, "communication": self.comm_s,
                 "overhead": self.kernels_s + self.overhead_s}
        return max(parts, key=lambda k: parts[k])

    def to_dict(self) -> dict[str, object]:
        return {"tokens": self.tokens, "compute_s": self.compute_s, "memory_s": self.memory_s, "ops_s": self.ops_s,
                "kernels_s": self.kernels_s, "dequant_s": self.dequant_s, "comm_s": self.comm_s,
                "overhead_s": self.overhead_s, "total_s": self.total_s, "bound": self.bound}


def _vector_flops(device: Device, act16: str) -> float:
    """Non-tensor (vector) FLOP/s, where weight-only kernels dequantise."""
    if device.supports("fp32"):
        return device.peak_flops("fp32")
    if device.supports(act16):
        return device.peak_flops(act16) * VECTOR_TO_TENSOR_RATIO
    return max(device.peak_flops(p) for p in device.dense_precisions) * VECTOR_TO_TENSOR_RATIO


def time_dequant_s(weight_elements: float, rows: float, device: Device, act16: str) -> float:
    """Seconds to dequantise ``weight_elements`` weights once per tile of ``DEQUANT_TILE_TOKENS`` rows
    (weight-only int4/int8 GEMMs), at the device's vector rate; not overlapped (conservative)."""
    tiles = max(1, math.ceil(rows / DEQUANT_TILE_TOKENS))
    return weight_elements * tiles * DEQUANT_OPS_PER_WEIGHT / _vector_flops(device, act16)


def _scaled(op: OpCost, k: float) -> OpCost:
    return OpCost(op.name, op.op_class, op.flops * k, op.bytes * k, op.min_dim)


@lru_cache(maxsize=65536)
def _step_cached(rep: Replica, decode_seqs: int, decode_context: int, prefill_tokens: int, prefill_len: int,
                 prefill_kv_len: int, sampled_rows: int) -> StepTime:
    return _step(rep, decode_seqs, decode_context, prefill_tokens, prefill_len, prefill_kv_len, sampled_rows)


def step_time(
    rep: Replica,
    *,
    decode_seqs: int = 0,
    decode_context: float = 0,
    prefill_tokens: int = 0,
    prefill_len: int | None = None,
    prefill_kv_len: int | None = None,
    sampled_rows: int | None = None,
) -> StepTime:
    """Time of one engine step on ``rep`` (per pipeline micro-batch; all stages traversed).

    ``decode_seqs`` sequences add one token each attending ``decode_context`` keys; ``prefill_tokens``
    prompt tokens belong to prompts (or chunks) of ``prefill_len`` new tokens attending
    ``prefill_kv_len`` keys (default ``prefill_len``: whole prompts). ``sampled_rows`` rows go
    through the output head (default: the decode sequences plus the prompts completed).
    """
    if decode_seqs < 0 or prefill_tokens < 0 or decode_seqs + prefill_tokens == 0:
        raise UserInputError("a step needs at least one token", field="batch")
    plen = prefill_len or prefill_tokens or 1
    pkv = max(prefill_kv_len or plen, plen)
    if sampled_rows is None:
        sampled_rows = decode_seqs + (math.ceil(prefill_tokens / plen) if prefill_tokens else 0)
    return _step_cached(rep, int(decode_seqs), max(1, round(decode_context)), int(prefill_tokens), int(plen),
                        int(pkv), max(1, int(sampled_rows)))


def _step(rep: Replica, decode_seqs: int, decode_context: int, prefill_tokens: int, prefill_len: int,
          prefill_kv_len: int, sampled_rows: int) -> StepTime:
    m, dev, eff, p = rep.model, rep.device, rep.eff, rep.precision
    act16 = p.gemm_dtype if p.gemm_dtype in ("bf16", "fp16") else ("fp16" if not dev.supports("bf16") else "bf16")
    # rate for non-GEMM ops (attention, norms, head): 16-bit, or the GEMM dtype on integer-only parts
    # (Ascend 310P lists only int8); these ops are memory-bound in decode, so the choice matters little
    op16 = act16 if (dev.supports("bf16") or dev.supports("fp16")) else p.gemm_dtype
    tokens = decode_seqs + prefill_tokens
    group_tokens = max(1, math.ceil(tokens / rep.ep))  # tokens one attention (DP) group processes
    kv = p.kv_dtype
    launch = rep.engine.launch_overhead_s_per_kernel

    def layer(moe_layer: bool) -> tuple[float, float, float, float, float]:
        """(compute, memory, ops time, dequant time, fixed kernel overheads) of one layer."""
        def lops(batch: int, q_len: int, kv_len: int) -> list[OpCost]:
            return layer_ops(m, batch=batch, q_len=q_len, kv_len=kv_len, tp=rep.tp, ep=rep.ep, dtype=p.gemm_dtype,
                             weight_dtype=p.weight_dtype, kv_dtype=kv, moe_layer=moe_layer)

        ops: list[OpCost] = []
        group_ops = lops(group_tokens, 1, 1)
        ops += [o for o in group_ops if o.op_class != "attention" and o.name not in EXPERT_OPS]
        if m.moe is not None and moe_layer:
            full = lops(tokens, 1, 1)
            ops += [o for o in full if o.name in EXPERT_OPS]
        if decode_seqs:
            dseq = max(1, math.ceil(decode_seqs / rep.ep))
            att = [o for o in lops(dseq, 1, decode_context) if o.op_class == "attention"]
            if not rep.engine.gqa_shared_kv_load and m.mla is None and m.kv_heads < m.n_heads:
                att = [_kv_per_query_head(m, rep, dseq, decode_context)]
            ops += att
        if prefill_tokens:
            if m.type == "encoder":  # bidirectional: every token attends to all (layer_ops assumes causal)
                att = [cost_attention(1, max(1, m.n_heads // rep.tp), prefill_len, prefill_kv_len, m.qk_head_dim,
                                      causal=False, dtype=act16, kv_heads=max(1, m.kv_heads // rep.tp),
                                      v_head_dim=m.v_head_dim)]
            else:
                att = [o for o in lops(1, prefill_len, prefill_kv_len) if o.op_class == "attention"]
            # prefill tokens may be a fraction of a prompt (steady-state chunking): scale linearly
            ops += [_scaled(o, prefill_tokens / rep.ep / prefill_len) for o in att]
        c = mem = t = dq = k = 0.0
        for o in ops:
            dtype = p.gemm_dtype if o.op_class == "gemm" and o.name != "router" else op16
            ot = op_time(o, dev, dtype, eff)
            c += ot.compute_s
            mem += ot.memory_s
            t += ot.time_s + launch
            k += ot.overhead_s + launch
            if p.weight_only and o.op_class == "gemm" and o.name != "router":
                rows = _gemm_rows(m, o, tokens, group_tokens, rep)
                dq += time_dequant_s(o.flops / (2.0 * rows), rows, dev, act16)
        return c, mem, t, dq, k

    n_moe = m.n_moe_layers
    n_dense = m.n_layers - n_moe
    comp = memb = ops_t = dq_t = kern = 0.0
    for count, is_moe in ((n_dense, False), (n_moe, True)):
        if count:
            c, mem, t, dq, k = layer(is_moe)
            comp += count * c
            memb += count * mem
            ops_t += count * t
            dq_t += count * dq
            kern += count * k
    head_rows = max(1, math.ceil(sampled_rows / rep.ep))
    for o in head_ops(m, rows=head_rows, tp=rep.tp, dtype=act16, weight_dtype=act16):
        ot = op_time(o, dev, op16, eff)
        comp += ot.compute_s
        memb += ot.memory_s
        ops_t += ot.time_s + launch
        kern += ot.overhead_s + launch
    # communication
    msg = group_tokens * m.d_model * ACTIVATION_BYTES
    per_layer_ar = 1 if m.parallel_attn_mlp else 2
    comm = m.n_layers * per_layer_ar * time_allreduce_s(msg, rep.tp, dev, eff, two_shot=rep.engine.custom_allreduce)
    if rep.ep > 1 and m.moe is not None:
        a2a_bytes = group_tokens * m.moe.top_k * m.d_model * ACTIVATION_BYTES / rep.tp
        comm += n_moe * 2 * time_alltoall_s(a2a_bytes, rep.ep, dev, eff)
    if rep.pp > 1:
        comm += (rep.pp - 1) * time_p2p_s(msg / rep.tp, dev, eff, rep.n_devices)
    return StepTime(tokens=tokens, compute_s=comp, memory_s=memb, ops_s=ops_t, kernels_s=kern, dequant_s=dq_t,
                    comm_s=comm, overhead_s=rep.engine.step_overhead_s)


def _kv_per_query_head(m: ModelArch, rep: Replica, seqs: int, context: int) -> OpCost:
    """Decode attention of a kernel without GQA sharing (TensorRT-LLM < 0.8): every query head
    loads its KV head's cache itself, i.e. the bytes of an MHA cache with n_heads heads."""
    heads = max(1, m.n_heads // rep.tp)
    return cost_attention(seqs, heads, 1, context, m.qk_head_dim, causal=False,
                          dtype=rep.precision.kv_dtype, kv_heads=heads, v_head_dim=m.v_head_dim)


def _gemm_rows(m: ModelArch, op: OpCost, tokens: int, group_tokens: int, rep: Replica) -> float:
    """Token rows of a GEMM op (for dequantisation tiles): routed-expert GEMMs see the tokens routed
    to one expert, every other linear layer the attention group's tokens."""
    if op.name in EXPERT_OPS and m.moe is not None:
        local = max(1, m.moe.n_routed_experts // rep.ep)
        routed = tokens * m.moe.top_k / rep.ep
        touched = expected_experts_touched(local, min(m.moe.top_k, local), max(1, round(routed)))
        return max(1.0, routed / max(touched, 1e-9))
    return float(group_tokens)
