"""Compute of one training micro-batch: every layer's operations timed with the roofline.

Each layer's operations come from :func:`xpuplan.perf.ops.layer_ops`, timed with
:func:`xpuplan.perf.roofline.op_time` (efficiency by operation size and precision); the attention
core is replaced by :func:`attention_core_ops` (fused or unfused), whose FLOPs are those of
:mod:`xpuplan.perf.flops` (each layer's attended keys: sliding-window layers see at most their
window) and which runs in 16-bit even in FP8 training unless the stack enables FP8 attention. Backward = 2 x forward for GEMMs
(1 x for the frozen base of LoRA/QLoRA: no weight gradients), :data:`ATTENTION_BACKWARD_FACTOR` x for
fused attention, 2 x for elementwise ops; recomputation adds the layer's forward (full) or the
attention core's (selective); the last stage adds the output head and the loss.
:func:`stage_compute` sums one pipeline stage's layers for many plans at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Final

import numpy as np

from xpuplan.catalog.device import Device
from xpuplan.catalog.efficiency import DEFAULT_HOST_SYNC_S
from xpuplan.models.arch import ModelArch
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.flops import flops_attention_core_per_token, mean_causal_context, mean_local_context
from xpuplan.perf.memory import (
    LORA_DEFAULT_TARGETS,
    NF4_OVERHEAD_BYTES_PER_PARAM,
    lora_target_shapes,
    params_per_device,
)
from xpuplan.perf.ops import MOE_COMBINE_OP, head_ops, layer_ops, routed_rows
from xpuplan.perf.params import param_breakdown
from xpuplan.perf.recompute import selective_modules
from xpuplan.perf.roofline import OpCost, attention_head_dim_factor, cost_attention, cost_gemm, op_time
from xpuplan.train.layout import Layout

#: Fused attention backward over forward time: FlashAttention-2's backward runs 5 matmuls
#: (recomputing S and P) against the forward's 2, i.e. 2.5x the forward FLOPs (Dao 2023, Sec. 3.1).
ATTENTION_BACKWARD_FACTOR: Final = 2.5

#: Backward of a GEMM with trainable weights: input gradient + weight gradient, each as large as
#: the forward GEMM.
GEMM_BACKWARD_FACTOR: Final = 2.0

#: Backward of a GEMM whose weights are frozen (LoRA/QLoRA base): input gradient only.
FROZEN_GEMM_BACKWARD_FACTOR: Final = 1.0

#: Backward of an elementwise op (norm, activation, residual): reads the upstream gradient and the
#: saved input, writes the input gradient: ~2x the forward's bytes.
ELEMENTWISE_BACKWARD_FACTOR: Final = 2.0

#: Unfused attention (no FlashAttention): bytes moved per attention score in the forward besides
#: the two GEMMs' own traffic: the fused scale-mask-softmax reads the fp16 scores (2 B) and writes
#: probabilities (2 B); dropout writes its mask (1 B) and output (2 B) (Megatron-LM's kernels).
UNFUSED_SOFTMAX_BYTES_PER_SCORE: Final = 2.0 + 2.0 + 1.0 + 2.0

#: Eager-mode kernels (PyTorch without fusion: HF/FSDP model code): extra bytes per element beyond
#: the fused op's one read and one write, per forward, counted from the kernels eager code launches:
#: * RMSNorm written out in PyTorch (upcast to fp32, square, mean, rsqrt, scale, downcast, weight):
#:   ~36 B per element instead of 4;
#: * rotary embedding (q·cos, rotate_half = slice + neg + cat, ·sin, add) on q and k: ~22 B per element;
#: * SwiGLU as silu(gate) then multiply: 10 B per intermediate element instead of 6;
#: * head transposes made contiguous around attention: 4 B per q, k, v and output element.
#: LayerNorm and GELU are single native kernels in eager mode too (no extra). Backward moves ~2x.
EAGER_RMSNORM_EXTRA_BYTES: Final = 32.0
EAGER_ROPE_EXTRA_BYTES: Final = 22.0
EAGER_SWIGLU_EXTRA_BYTES: Final = 4.0
EAGER_TRANSPOSE_BYTES: Final = 4.0

#: LoRA adapter path per targeted matrix and token (PEFT): read the input x (d_in), write the
#: adapter output (d_out), read base and adapter outputs and write their sum (3 d_out): 2 B each,
#: i.e. 2·(d_in + 4·d_out) bytes per forward; the rank-r intermediates are negligible.
LORA_OUTPUT_PASSES: Final = 4.0

#: MoE token permutation: routed tokens are gathered into expert order and scattered back
#: (read + write 2 B each way) around the expert GEMMs.
MOE_PERMUTE_BYTES_PER_ELEMENT: Final = 8.0

#: MoE router beyond its gating GEMM, per token and expert score (fp32): softmax (or sigmoid) reads
#: the logits and writes the probabilities (4 + 4 B), top-k reads them (4 B) and the load-balancing
#: auxiliary loss reads them once more to sum each expert's share (4 B).
MOE_ROUTER_BYTES_PER_SCORE: Final = 16.0

#: MoE combine: each routed expert output is scaled by its gate probability before the copies of a
#: token are summed back (read + write 2 B per element; a separate kernel unless fused into the
#: unpermutation).
MOE_PROBS_BYTES_PER_ELEMENT: Final = 4.0

#: GPU idle time per MoE layer forward where the dropless dispatcher brings the per-expert token counts
#: to the host (training stacks with ``moe_host_sync``): Megatron-Core's alltoall dispatcher and Transformer
#: Engine's GroupedLinear need them as Python split sizes, so the host waits for the device queue to
#: drain, copies the counts back, and the device then waits while the host issues the next kernels
#: (the split bookkeeping and the all-to-all launch). Made of a synchronising device-to-host round trip,
#: ~6 µs (NVIDIA developer blog "Getting Started with CUDA Graphs", A. Gray, 2019-09: a 2.9 µs kernel
#: costs 9.6 µs per launch with a stream sync after each, 3.8 µs without), plus ~4 eager PyTorch operations issued
#: after it at ~10 µs of host time each (PyTorch operator dispatch + cudaLaunchKernel). Chosen from
#: these figures, not fitted to any run; conservative (the lost host run-ahead after the sync, which
#: can leave the device starved for longer when the next kernels are short, is not counted). The default of
#: the efficiency parameter ``host_sync_s`` (catalog.efficiency.DEFAULT_HOST_SYNC_S), which a calibration
#: replaces with the device's measured round trip plus MOE_POST_SYNC_OPS measured operations.
MOE_HOST_SYNC_S: Final = DEFAULT_HOST_SYNC_S


def moe_host_sync_s(eff: Efficiency) -> float:
    """Device idle per MoE layer forward while the dispatcher syncs with the host: the device's
    ``host_sync_s`` (default :data:`MOE_HOST_SYNC_S`; calibrated by ``xpuplan calibrate`` from the bench's
    ``host_sync`` and ``overhead`` measurements)."""
    return eff.host_sync_s

#: Precisions whose linear layers torchao runs as ``torch._scaled_mm`` (Float8Linear), an op the op-level
#: selective checkpointing policy does not save (torchtitan's ``_save_list`` names ``aten.mm`` only).
SCALED_MM_PRECISIONS: Final = ("fp8", "fp4")


def op_sac_linear_shares(model: ModelArch, precision: str) -> tuple[float, float]:
    """(share of the fused QKV projection, share of the MLP's up/gate projection) that PyTorch's op-level
    selective activation checkpointing re-runs in the backward, as torchtitan applies it to each Transformer
    block (``parallelize_llama.py``, ``selective_ac_option = "op"``, the 8B configs' choice @9dec370 and
    @820504e): it saves the outputs of SDPA, of the sequence-parallel reduce-scatters and of every *second*
    ``aten.mm`` of the block, and recomputes what else the backward needs. In a Llama block the matmuls run
    wq, wk, wv, wo, w1, w3, w2: the even ones are wk, wo, w3, and of those the backward needs wk's output (K,
    an input of SDPA's backward) and w3's (an input of the SwiGLU product's backward), not wo's or w2's (a
    matmul's backward needs its input, not its output); so the K projection and half of the gated up
    projection run again (none of a non-gated MLP: w1 is odd, w2's output is not needed). FP8 linear layers
    (torchao Float8Linear) run ``torch._scaled_mm``, which the policy does not save: every projection whose
    output the backward needs runs again, Q, K, V and the whole up/gate projection. MLA models: the K share
    is not defined (0). An MoE layer's expert up/gate GEMMs are taken like a dense MLP's."""
    low = precision in SCALED_MM_PRECISIONS
    if low:
        qkv = 1.0
    elif model.mla is not None:
        qkv = 0.0
    else:
        q = model.n_heads * model.qk_head_dim
        k = model.kv_heads * model.qk_head_dim
        v = model.kv_heads * model.v_head_dim
        qkv = k / (q + k + v)
    gated = model.mlp == "gated"
    up = 1.0 if low else (0.5 if gated else 0.0)
    return qkv, up


def op_sac_linear_flops_share(model: ModelArch, precision: str) -> float:
    """Share of a block's forward linear FLOPs that op-level selective checkpointing re-runs
    (:func:`op_sac_linear_shares` weighted by the projections' sizes; the MLP width of an MoE block is its
    active experts' width). Hardware-FLOP accounting (HFU) only: the step time uses the timed ops."""
    qkv_share, up_share = op_sac_linear_shares(model, precision)
    d = model.d_model
    qkv = d * (model.n_heads * model.qk_head_dim + model.kv_heads * (model.qk_head_dim + model.v_head_dim))
    o = model.n_heads * model.v_head_dim * d
    if model.moe is not None:
        width = model.moe.top_k * model.moe.expert_ffn_dim + model.moe.n_shared_experts * model.moe.shared_ffn
    else:
        width = model.ffn_dim
    n_in = 2 if model.mlp == "gated" else 1
    up, down = d * n_in * width, width * d
    return (qkv_share * qkv + up_share * up) / (qkv + o + up + down)


#: MoE load imbalance: with auxiliary-loss balancing the busiest expert-parallel rank still gets
#: ~10-20% more tokens than the mean, and every rank waits for it; expert GEMM time x this factor.
MOE_IMBALANCE_FACTOR: Final = 1.15

#: FP8 GEMM inputs are quantised from bf16 first (Transformer Engine): read 2 B, write 1 B per element.
FP8_CAST_BYTES_PER_ELEMENT: Final = 3.0
#: NVFP4 quantisation of a GEMM input: read 2 B (bf16), write 0.5 B (E2M1) plus one FP8 scale per 16
#: elements (NVIDIA, "Pretraining Large Language Models with NVFP4", arXiv 2509.25149, 2025, §2).
FP4_CAST_BYTES_PER_ELEMENT: Final = 2.0 + 0.5 + 1.0 / 16.0
#: Quantisation traffic per GEMM-input element by training precision (bf16/fp16 plans quantise nothing).
CAST_BYTES_PER_ELEMENT: Final = {"fp8": FP8_CAST_BYTES_PER_ELEMENT, "fp4": FP4_CAST_BYTES_PER_ELEMENT}
#: Quantisation traffic per element of a routed expert's GEMM operand in low-precision training. Transformer Engine's
#: grouped expert GEMMs (``GroupedLinear``, what Megatron-Core's MoE experts run) quantise tensors that no earlier
#: kernel can quantise on the way out (the permuted tokens, the activation's output, the output gradients), so the
#: per-tensor scaling of its FP8 recipe (current scaling) pays a pass of its own: an amax reduction (read 2 B), then
#: one cast writing the row-wise copy and, for the weight gradient, the column-wise (transposed) copy Hopper's FP8
#: GEMMs need (read 2 B, write 1 + 1 B): ``Float8CurrentScalingQuantizer::quantize_impl``
#: (transformer_engine/pytorch/csrc/quantizer.cpp @d0067d0: ``nvte_compute_amax_with_config``, then
#: ``nvte_quantize_v2``); the grouped form (``nvte_group_compute_amax``, ``nvte_group_quantize``, csrc/extensions/
#: cast.cpp) moves the same bytes. NVFP4: the per-tensor amax of its second-level scale, the cast, two 0.5-byte
#: copies and an FP8 scale per 16 elements of each. Dense layers keep :data:`CAST_BYTES_PER_ELEMENT`: their norms
#: compute the amax in the norm kernel (``FUSED_NORM_AMAX_FP8``, csrc/extensions/normalization.cpp).
#: Measured on a lent H100 (docs/measurement.md, fifth session): the expert GEMMs themselves follow the FP8 law within
#: 1-13%, and quantising Qwen3-30B-A3B's routed tensors takes about 5x the older charge even with fused, grouped
#: kernels (1.37 ms against 0.26 for an EP16 layer; this charge, at the memory roofline, is 0.40: a lower bound).
EXPERT_QUANT_BYTES_PER_ELEMENT: Final = {"fp8": 2.0 + 2.0 + 1.0 + 1.0, "fp4": 2.0 + 2.0 + 0.5 + 0.5 + 2.0 / 16.0}

#: Share of a model's linear layers NVFP4 training keeps in BF16 for stability in NVIDIA's pre-training recipe: the
#: first two and the last eight of the 62 blocks of its 12B model (16%; arXiv 2509.25149, §4.1, "about 15% of the
#: linear layers"). Their GEMMs run at the bf16 rate; the rest in FP4. The default of
#: ``TrainingStack.fp4_bf16_layer_fraction``; stacks whose NVFP4 recipe keeps no BF16 layer set 0 (layer_compute's
#: ``fp4_bf16_layers``).
FP4_BF16_LAYER_FRACTION: Final = 0.15

#: Cross-entropy over the logits: fp32 softmax and loss read and write each logit once (fused).
LOSS_BYTES_PER_LOGIT: Final = 2 * 4.0

#: QLoRA dequantises every NF4 weight to bf16 before each GEMM pass: read 0.5 B (+ constants),
#: write 2 B per weight.
NF4_DEQUANT_BYTES_PER_PARAM: Final = 0.5 + NF4_OVERHEAD_BYTES_PER_PARAM + 2.0


@dataclass(frozen=True)
class LayerCompute:
    """Seconds of one micro-batch on one device, by operation class.

    ``dense_*``: a layer with a dense MLP; ``moe_*``: a layer with the MoE MLP (forward GEMMs,
    elementwise ops); ``attn_fwd`` / ``attn_bwd``: the attention core forward and backward (the same
    in both layer kinds); ``head_*``: final norm, output projection and loss (forward);
    ``dequant_*``: QLoRA NF4 -> bf16 dequantisation per pass; ``mla_up_gemm``: MLA's query and
    key/value up-projections (latent -> heads), which selective recomputation re-runs for MLA models;
    ``moe_sync``: the device idle time of an MoE layer's forward while the dispatcher brings the token
    counts to the host (:data:`MOE_HOST_SYNC_S`; not in the backward, which reuses the split sizes);
    ``sac_dense`` / ``sac_moe``: what PyTorch's op-level selective activation checkpointing re-runs of a layer's
    forward (:func:`op_sac_linear_shares`: the matmuls whose outputs it does not save but the backward needs,
    and every elementwise op), for stacks whose ``selective_recompute`` is ``op_sac``.
    ``moe_quant_fwd`` / ``moe_quant_bwd``: in FP8/FP4 training, the quantisation of the routed experts' GEMM
    inputs (forward, re-run by full recomputation) and of their output gradients (backward),
    :data:`EXPERT_QUANT_BYTES_PER_ELEMENT` each (:func:`expert_quant_ops`).
    ``rec_*``: the forward of the modules selective recomputation can re-run by name (Megatron-Core
    ``--recompute-modules``; :mod:`xpuplan.perf.recompute`): ``rec_norm_dense`` / ``rec_norm_moe`` the two pre-norms,
    ``rec_mlp`` a dense layer's MLP block, ``rec_moe`` a MoE layer's whole MoE block (router, permutation, experts,
    shared experts, the host sync and the experts' quantisation; its all-to-alls are communication, in
    :func:`xpuplan.train.phases.ep_comm_per_mb_s`), ``rec_moe_act`` the routed experts' activation,
    ``rec_shared`` the shared experts.
    """

    dense_gemm: float
    dense_elem: float
    moe_gemm: float
    moe_elem: float
    attn_fwd: float
    attn_bwd: float
    head_gemm: float
    head_elem: float
    dequant_dense: float
    dequant_moe: float
    mla_up_gemm: float = 0.0
    moe_sync: float = 0.0
    sac_dense: float = 0.0
    sac_moe: float = 0.0
    moe_quant_fwd: float = 0.0
    moe_quant_bwd: float = 0.0
    rec_norm_dense: float = 0.0
    rec_norm_moe: float = 0.0
    rec_mlp: float = 0.0
    rec_moe: float = 0.0
    rec_moe_act: float = 0.0
    rec_shared: float = 0.0


#: Op names (``xpuplan.perf.ops.layer_ops`` and :func:`layer_compute`'s MoE extras) of each module selective
#: recomputation can re-run by name (:mod:`xpuplan.perf.recompute`).
NORM_OPS: Final = frozenset({"norm (attention)", "norm (mlp)"})
MLP_OPS: Final = frozenset({"mlp up/gate", "mlp up", "mlp activation", "mlp down"})
SHARED_EXPERT_OPS: Final = frozenset({"shared experts up/gate", "shared experts down"})
MOE_ACT_OPS: Final = frozenset({"experts activation"})
MOE_BLOCK_OPS: Final = (frozenset({"router", "experts up/gate", "experts down", "token permutation",
                                   "gate probabilities", "router softmax/top-k/aux-loss"})
                        | SHARED_EXPERT_OPS | MOE_ACT_OPS)


def _op_seconds(op: OpCost, device: Device, precision: str, eff: Efficiency) -> float:
    """Roofline seconds of one op: GEMMs at the plan's precision, everything else in bf16."""
    dtype = precision if op.op_class == "gemm" else "bf16"
    return op_time(op, device, dtype, eff).time_s


def head_precision(precision: str, fp8_output_head: bool) -> str:
    """Precision of the output head's GEMM (hidden -> vocabulary). FP8 and FP4 recipes keep it in 16 bits:
    Megatron-Core builds the head as ``tensor_parallel.ColumnParallelLinear``, not a Transformer Engine module,
    unless ``fp8_output_proj`` with MXFP8 selects ``TELMHeadColumnParallelLinear``
    (megatron/core/models/gpt/gpt_model.py); torchtitan's float8 conversion filters out ``output``
    (torchtitan/float8.py @9dec370: ``module_filter_fn=lambda mod, fqn: fqn != "output"``). So the head runs at
    the plan's precision only for FP8/FP4 plans on a stack with ``fp8_output_head``."""
    return precision if precision not in ("fp8", "fp4") or fp8_output_head else "bf16"


def attention_precision(precision: str, fp8_attention: bool) -> str:
    """Precision the attention core (QK^T, softmax, P·V) runs in. FP8 training recipes quantise the
    linear layers only: Transformer Engine runs fused attention in BF16 unless the recipe sets
    ``fp8_dpa`` (off by default), and torchao's float8 training converts ``nn.Linear`` modules only.
    So the core runs at the plan's precision only for FP8 plans on a stack with ``fp8_attention``."""
    return "fp8" if precision in ("fp8", "fp4") and fp8_attention else "bf16"


def mean_attended_keys(model: ModelArch, seq_len: int) -> float:
    """Keys one query attends, averaged over the model's layers, in a training sequence of
    ``seq_len`` tokens: the causal mean (s+1)/2 on global layers and
    :func:`~xpuplan.perf.flops.mean_local_context` on local (sliding-window / chunked) layers;
    encoders attend all s keys (window-capped on local layers). The same figures
    :func:`~xpuplan.perf.flops.flops_training_per_token` counts, so FLOPs and step time agree."""
    causal = model.type != "encoder"
    per_token = flops_attention_core_per_token(model, mean_causal_context(seq_len, causal),
                                               local_context=mean_local_context(model, seq_len, causal))
    one_key = flops_attention_core_per_token(model, 1.0, local_context=1.0)
    return per_token / one_key if one_key else 0.0


def attention_core_ops(
    model: ModelArch, *, micro_batch: int, q_len: int, kv_len: int, tp: int, cp: int, flash: bool,
) -> tuple[list[OpCost], float]:
    """The attention core of one (average) layer on one device and its backward/forward time ratio.

    ``q_len`` = the local sequence chunk (seq_len / cp), ``kv_len`` = the whole sequence.
    Flash (fused) attention: one kernel that skips masked blocks, causal and sliding-window alike, so
    its FLOPs are the model's attention FLOPs (:func:`mean_attended_keys` keys per query, the average
    over global and local layers) for this device's queries and heads. With CP the split is load
    balanced (ring and all-gather CP: each rank holds two mirrored chunks of s/(2·cp) tokens;
    all-to-all CP: every token for 1/cp of the heads), so every rank computes 1/cp of the total and
    the causally masked half is counted once, not twice.
    Bytes: Q and O of the local chunk, K and V of every key the rank meets.

    Unfused attention (Megatron-LM before FlashAttention, eager code): QK^T and P·V batched GEMMs
    over the *whole* q x kv score matrix (cuBLAS does not skip masked scores, causal or outside a
    window) plus a fused scale-mask-softmax-dropout kernel whose score traffic is
    :data:`UNFUSED_SOFTMAX_BYTES_PER_SCORE`; its backward is 2x (GEMMs and elementwise alike).
    """
    heads = max(1, model.n_heads // tp)
    kvh = max(1, model.kv_heads // tp)
    dqk, dv = model.qk_head_dim, model.v_head_dim
    if flash:
        full = cost_attention(micro_batch, heads, q_len, kv_len, dqk, causal=False, kv_heads=kvh, v_head_dim=dv)
        flops = 2.0 * micro_batch * heads * q_len * mean_attended_keys(model, kv_len) * (dqk + dv)
        return [OpCost("attention (flash)", "attention", flops, full.bytes, full.min_dim, full.head_dim)], \
            ATTENTION_BACKWARD_FACTOR
    bh = micro_batch * heads
    qk = cost_gemm(q_len, kv_len, dqk, name="attention scores QK^T")
    pv = cost_gemm(q_len, dv, kv_len, name="attention P·V")
    scores = float(bh) * q_len * kv_len
    soft = OpCost("softmax + dropout (unfused)", "elementwise", 5.0 * scores, scores * UNFUSED_SOFTMAX_BYTES_PER_SCORE)
    ops = [OpCost(o.name, "gemm", o.flops * bh, o.bytes * bh, o.min_dim) for o in (qk, pv)] + [soft]
    return ops, GEMM_BACKWARD_FACTOR


def _cast_op(model: ModelArch, tokens: int, tp: int, moe: bool, precision: str = "fp8") -> OpCost:
    """FP8/FP4 (Transformer Engine) quantisation of the GEMM inputs of a layer's attention and dense (or shared-expert)
    MLP per forward: read bf16, write the low-precision copy (:data:`CAST_BYTES_PER_ELEMENT`). The routed experts'
    operands are :func:`expert_quant_ops`."""
    q_in = model.d_model  # QKV and MLP-up inputs
    o_in = model.n_heads * model.v_head_dim / tp
    if moe and model.moe is not None:
        shared = model.moe.n_shared_experts
        f = shared * model.moe.shared_ffn / tp
        up_in = model.d_model if shared else 0.0
    else:
        f = model.ffn_dim / tp
        up_in = q_in
    elems = tokens * (q_in + up_in + o_in + f)
    return OpCost(f"{precision} casts", "elementwise", elems, elems * CAST_BYTES_PER_ELEMENT[precision])


def expert_quant_ops(model: ModelArch, routed_rows: float, etp: int, precision: str) -> tuple[OpCost, OpCost]:
    """(forward, backward) quantisation of one rank's routed-expert GEMM operands in FP8/FP4 training, for
    ``routed_rows`` token copies on the rank: the forward quantises the up/gate input (hidden) and the down
    projection's input (the expert width / etp); the backward the output gradients of the down projection (hidden)
    and of the gated up projection (2 x width / etp), :data:`EXPERT_QUANT_BYTES_PER_ELEMENT` each."""
    moe = model.moe
    assert moe is not None
    width = moe.expert_ffn_dim / etp
    n_up = 2.0 if model.mlp == "gated" else 1.0
    per = EXPERT_QUANT_BYTES_PER_ELEMENT[precision]
    fwd = routed_rows * (model.d_model + width)
    bwd = routed_rows * (model.d_model + n_up * width)
    return (OpCost(f"experts {precision} quantisation", "elementwise", fwd, fwd * per),
            OpCost(f"experts {precision} gradient quantisation", "elementwise", bwd, bwd * per))


def _eager_extra_op(model: ModelArch, tokens: int, tp: int, moe: bool) -> OpCost:
    """Extra memory traffic of eager (unfused) elementwise kernels in one layer's forward (see the
    ``EAGER_*`` constants)."""
    q_dim = model.n_heads * model.qk_head_dim / tp
    kv_dim = max(1, model.kv_heads // tp) * (model.qk_head_dim if model.mla is None else model.qk_head_dim)
    o_dim = model.n_heads * model.v_head_dim / tp
    per_token = 0.0
    if model.norm == "rmsnorm":
        per_token += EAGER_RMSNORM_EXTRA_BYTES * model.d_model * model.layer_norms
    if model.position == "rope":
        per_token += EAGER_ROPE_EXTRA_BYTES * (q_dim + kv_dim)
    if model.mlp == "gated":
        if moe and model.moe is not None:
            f = (model.moe.top_k * model.moe.expert_ffn_dim + model.moe.n_shared_experts * model.moe.shared_ffn) / tp
        else:
            f = model.ffn_dim / tp
        per_token += EAGER_SWIGLU_EXTRA_BYTES * f
    per_token += EAGER_TRANSPOSE_BYTES * (q_dim + 2 * kv_dim + o_dim)
    return OpCost("eager elementwise", "elementwise", 0.0, tokens * per_token)


def _lora_adapter_op(model: ModelArch, tokens: int, tp: int,
                     targets: tuple[str, ...] = LORA_DEFAULT_TARGETS) -> OpCost:
    """Memory traffic of the LoRA adapter paths of one layer's forward over the adapted matrices
    (:func:`~xpuplan.perf.memory.lora_target_shapes`; see :data:`LORA_OUTPUT_PASSES`)."""
    per_token = sum(2.0 * (a + LORA_OUTPUT_PASSES * b) for a, b in lora_target_shapes(model, targets)) / tp
    return OpCost("lora adapters", "elementwise", 0.0, tokens * per_token)


def layer_compute(
    model: ModelArch, device: Device, eff: Efficiency, *, micro_batch: int, seq_len: int, tp: int, cp: int,
    ep: int, sp: bool, precision: str, flash: bool = True, qlora: bool = False, eager: bool = False,
    lora: bool = False, fp8_attention: bool = False, moe_host_sync: bool = True, etp: int | None = None,
    op_sac: bool = False, fp8_output_head: bool = False, grouped_expert_gemm: bool = False,
    fp4_bf16_layers: float = FP4_BF16_LAYER_FRACTION, lora_targets: tuple[str, ...] = LORA_DEFAULT_TARGETS,
) -> LayerCompute:
    """Forward (and attention backward) compute times of one layer and the head for one micro-batch.

    Tokens on a device: micro_batch · seq_len / cp. With SP the norms and residual adds run on
    1/tp of the tokens. GEMMs come from :func:`xpuplan.perf.ops.layer_ops`; the attention core is
    replaced by :func:`attention_core_ops`, timed at :func:`attention_precision` (16-bit unless
    ``fp8_attention``: the training stack's FP8 dot-product attention). ``moe_host_sync``: the
    training stack's MoE dispatcher syncs with the host every MoE layer forward
    (``TrainingStack.moe_host_sync``). ``etp``: the expert tensor-parallel size
    (:func:`~xpuplan.perf.memory.expert_tensor_parallel`; None: ``tp``). With etp = tp the experts
    are split like a dense MLP over every token of the TP group; with etp = 1 (MoE parallel folding)
    each rank runs whole experts over its 1/tp sequence shard: the same FLOPs, wider GEMMs.
    ``grouped_expert_gemm``: the stack runs each expert GEMM as one grouped kernel over the local experts
    (``TrainingStack.expert_gemm`` grouped), so no further launch per expert is charged.
    ``op_sac``: also time what op-level selective checkpointing re-runs (``sac_dense``, ``sac_moe``:
    :func:`op_sac_linear_shares` of the projections, plus the layer's forward elementwise ops).
    ``fp8_output_head``: an FP8/FP4 plan runs the output head's GEMM at its precision too; else at 16 bits
    (:func:`head_precision`). ``fp4_bf16_layers``: the share of the linear layers an FP4 plan keeps in BF16
    (``TrainingStack.fp4_bf16_layer_fraction``; :data:`FP4_BF16_LAYER_FRACTION` by default). ``lora_targets``:
    the matrices a LoRA/QLoRA job adapts (their adapter traffic, :func:`_lora_adapter_op`).
    """
    s_loc = max(1, seq_len // cp)
    etp = tp if etp is None else etp

    def classify(ops: list[OpCost], gemm_precision: str = precision) -> tuple[float, float]:
        g = e = 0.0
        for op in ops:
            t = _op_seconds(op, device, gemm_precision, eff)
            if op.op_class == "gemm":
                if gemm_precision == "fp4" and fp4_bf16_layers > 0:  # the recipe's BF16 layers: the bf16 rate
                    t = (1.0 - fp4_bf16_layers) * t + fp4_bf16_layers * _op_seconds(op, device, "bf16", eff)
                g += t
            else:
                if sp and tp > 1 and (op.name.startswith("norm") or op.name.startswith("residual")):
                    t /= tp
                e += t
        return g, e

    def without_attention(ops: list[OpCost]) -> list[OpCost]:
        return [op for op in ops if op.op_class != "attention"]

    tokens = micro_batch * s_loc
    extra: list[OpCost] = []
    dense_ops = without_attention(layer_ops(model, batch=micro_batch, q_len=s_loc, kv_len=s_loc, tp=tp,
                                            dtype=precision, moe_layer=False))
    if precision in CAST_BYTES_PER_ELEMENT:
        extra = [_cast_op(model, tokens, tp, moe=False, precision=precision)]
    if eager:
        extra.append(_eager_extra_op(model, tokens, tp, moe=False))
    if lora:
        extra.append(_lora_adapter_op(model, tokens, tp, lora_targets))
    dg, de = classify(dense_ops + extra)

    def part(ops: list[OpCost], names: frozenset[str]) -> float:
        """Forward seconds of the ops of one module (by op name)."""
        g, e = classify([op for op in ops if op.name in names])
        return g + e

    rec_norm_dense = part(dense_ops, NORM_OPS)
    rec_mlp = part(dense_ops, MLP_OPS)
    rec_norm_moe = rec_moe = rec_moe_act = rec_shared = 0.0
    qkv_share, up_share = op_sac_linear_shares(model, precision) if op_sac else (0.0, 0.0)

    def sac_gemm(ops: list[OpCost]) -> float:
        """GEMM seconds of the shares of the projections op-level checkpointing re-runs."""
        share = {"qkv projection": qkv_share, "mlp up/gate": up_share, "mlp up": up_share,
                 "experts up/gate": up_share, "shared experts up/gate": up_share}
        part = [replace(op, flops=op.flops * share[op.name], bytes=op.bytes * share[op.name])
                for op in ops if op.op_class == "gemm" and share.get(op.name, 0.0) > 0.0]
        return classify(part)[0] if part else 0.0

    sac_dense = sac_gemm(dense_ops) + de if op_sac else 0.0
    sac_moe = 0.0
    mg = me = 0.0
    quant_fwd = quant_bwd = 0.0
    if model.moe is not None:
        base = without_attention(layer_ops(model, batch=micro_batch, q_len=s_loc, kv_len=s_loc, tp=tp,
                                           dtype=precision, moe_layer=True))
        # with EP carved from DP, each rank receives tokens from ep ranks: evaluate the expert ops
        # for ep x the local batch split over ep ranks (= the local tokens x top_k per rank)
        # (folded, etp < tp: the rank's sequence shard, s_loc·etp/tp tokens, through experts split etp ways)
        ep_ops = layer_ops(model, batch=micro_batch * ep, q_len=max(1, s_loc * etp // tp), kv_len=s_loc, tp=etp,
                           ep=ep, dtype=precision, moe_layer=True)
        # the down projection's short K (the expert width) runs below the fitted GEMM rate: layer_ops puts
        # perf.ops.expert_gemm_k_factor on it (OpCost.k_factor), kept here
        experts = [replace(op, flops=op.flops * MOE_IMBALANCE_FACTOR, bytes=op.bytes * MOE_IMBALANCE_FACTOR)
                   for op in ep_ops if op.name.startswith("experts")]
        routed = tokens * model.moe.top_k * model.d_model
        # the permutation moves the copies this rank's experts run (as ep_ops above): all the TP group's tokens
        # when the experts are split etp = tp ways (the copies are gathered over the expert-TP group), the rank's
        # own sequence shard when folded (etp < tp: Megatron-Core's dispatcher gathers over expert-TP, size etp)
        permuted = routed * etp / tp
        # with SP the router and the probability scaling see the rank's sequence shard only
        shard = tp if sp and tp > 1 else 1
        moe_extra = [OpCost("token permutation", "elementwise", 0.0, permuted * MOE_PERMUTE_BYTES_PER_ELEMENT),
                     OpCost("gate probabilities", "elementwise", routed / shard,
                            routed / shard * MOE_PROBS_BYTES_PER_ELEMENT),
                     OpCost("router softmax/top-k/aux-loss", "elementwise", 0.0,
                            tokens / shard * model.moe.n_routed_experts * MOE_ROUTER_BYTES_PER_SCORE)]
        if precision in CAST_BYTES_PER_ELEMENT:
            moe_extra.append(_cast_op(model, tokens, tp, moe=True, precision=precision))
            # the rank's routed copies (folded: its sequence shard, as ep_ops above)
            q_fwd, q_bwd = expert_quant_ops(model, tokens * model.moe.top_k * etp / tp, etp, precision)
            quant_fwd, quant_bwd = (_op_seconds(op, device, precision, eff) for op in (q_fwd, q_bwd))
        if eager:
            moe_extra.append(_eager_extra_op(model, tokens, tp, moe=True))
        if lora:
            moe_extra.append(_lora_adapter_op(model, tokens, tp, lora_targets))
        # the stack's permutation (MOE_PERMUTE_BYTES_PER_ELEMENT) scatters the copies back: no separate combine
        moe_ops = ([op for op in base if not op.name.startswith("experts") and op.name != MOE_COMBINE_OP]
                   + experts + moe_extra)
        mg, me = classify(moe_ops)
        # op-level checkpointing re-runs the forward's elementwise ops, the experts' quantisation among them
        sac_moe = sac_gemm(moe_ops) + me + quant_fwd if op_sac else 0.0
        # per-expert GEMM launch/tail: Transformer Engine's GroupedLinear runs one cuBLAS GEMM per local
        # expert (over several streams), each with the family's fixed kernel overhead; the roofline charged
        # one per op above. Two expert GEMMs per forward. A single grouped kernel (torch._grouped_mm, DeepGEMM)
        # pays only a partly filled last tile per expert, which the per-expert shape's efficiency already
        # holds: on an H200, 128 experts of 256 rows run in one grouped kernel at 0.38x the time of a
        # graph-replayed loop of 128 GEMMs, at 16 experts of 2,048 rows 0.95x (benchmarks/expert_gemm_probe.py).
        launches = 0.0
        if not grouped_expert_gemm:
            touched, _ = routed_rows(max(1, model.moe.n_routed_experts // ep), model.moe.top_k,
                                     tokens * model.moe.top_k, model.moe.n_routed_experts)
            launches = 2.0 * max(0.0, float(touched) - 1.0) * eff.kernel_overhead_s
            mg += launches
        rec_norm_moe = part(moe_ops, NORM_OPS)
        rec_moe_act = part(moe_ops, MOE_ACT_OPS)
        rec_shared = part(moe_ops, SHARED_EXPERT_OPS)
        rec_moe = part(moe_ops, MOE_BLOCK_OPS) + launches + quant_fwd
    attn_ops, bwd_factor = attention_core_ops(model, micro_batch=micro_batch, q_len=s_loc, kv_len=seq_len if cp > 1 else s_loc,
                                              tp=tp, cp=cp, flash=flash)
    attn_dtype = attention_precision(precision, fp8_attention)
    af = sum(op_time(op, device, attn_dtype if op.op_class != "elementwise" else "bf16", eff).time_s for op in attn_ops)
    if flash:  # the backward's softmax share is smaller than the forward's (perf.roofline.attention_head_dim_factor)
        bwd_factor *= (attention_head_dim_factor(model.qk_head_dim, attn_dtype)
                       / attention_head_dim_factor(model.qk_head_dim, attn_dtype, backward=True))
    head_prec = head_precision(precision, fp8_output_head)
    hops = head_ops(model, rows=tokens, tp=tp, dtype=head_prec)
    loss = OpCost("loss", "elementwise", 5.0 * tokens * model.vocab_size / tp,
                  tokens * model.vocab_size / tp * LOSS_BYTES_PER_LOGIT)
    hg, he = classify(hops + ([loss] if hops else []), head_prec)
    dq_d = dq_m = 0.0
    if qlora:
        bw = device.memory_bandwidth * eff.memory_bw_fraction
        per_dev = params_per_device(model, tp=tp, pp=1, ep=ep)
        b = param_breakdown(model)
        body = (per_dev.dense - (b.embedding + b.output_head) / tp) / model.n_layers
        dq_d = body * NF4_DEQUANT_BYTES_PER_PARAM / bw
        dq_m = (body + per_dev.expert / max(model.n_moe_layers, 1)) * NF4_DEQUANT_BYTES_PER_PARAM / bw
    up = 0.0
    if model.mla is not None:
        m = model.mla
        heads_dev = max(1, model.n_heads // tp)
        q_up = cost_gemm(tokens, heads_dev * model.qk_head_dim, m.q_lora_rank, name="mla q up-projection") \
            if m.q_lora_rank else None
        kv_up = cost_gemm(tokens, heads_dev * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank,
                          name="mla kv up-projection")
        up = sum(_op_seconds(op, device, precision, eff) for op in (q_up, kv_up) if op is not None)
    sync = moe_host_sync_s(eff) if model.moe is not None and moe_host_sync else 0.0
    return LayerCompute(dg, de, mg, me, af, af * bwd_factor, hg, he, dq_d, dq_m, up, sync, sac_dense, sac_moe,
                        quant_fwd, quant_bwd, rec_norm_dense=rec_norm_dense, rec_norm_moe=rec_norm_moe, rec_mlp=rec_mlp,
                        rec_moe=rec_moe + sync, rec_moe_act=rec_moe_act, rec_shared=rec_shared)


def _selective_forward(c: dict[str, np.ndarray], kind: str, mods: frozenset[str]) -> np.ndarray:
    """Seconds of one layer's forward that selective recomputation of ``mods`` re-runs (``kind``: dense or moe)."""
    zero = np.zeros_like(c["attn_fwd"])
    out = (c["attn_fwd"] if "core_attn" in mods else zero) + (c["mla_up_gemm"] if "mla_up_proj" in mods else zero)
    if "layernorm" in mods:
        out = out + c[f"rec_norm_{kind}"]
    if kind == "dense":
        return out + c["rec_mlp"] if "mlp" in mods else out
    if "moe" in mods:
        return out + c["rec_moe"]
    return (out + (c["rec_moe_act"] if "moe_act" in mods else zero)
            + (c["rec_shared"] if "shared_experts" in mods else zero))


@dataclass(frozen=True)
class StageCompute:
    """Seconds per micro-batch on the busiest pipeline stage, per plan: ``per_mb`` every layer's
    forward + backward (+ QLoRA dequantisation) and the head; ``fwd``/``bwd`` the layers' forward and
    backward alone (overlap windows); ``recompute`` the recomputed forward; ``attn_fwd`` one layer's
    attention core forward (the window CP hides its ring exchange under); ``gemm_fwd`` one layer's
    forward GEMMs, averaged over the layer kinds (the window TP communication overlap hides under)."""

    per_mb: np.ndarray
    fwd: np.ndarray
    bwd: np.ndarray
    recompute: np.ndarray
    attn_fwd: np.ndarray
    attn_bwd: np.ndarray
    gemm_fwd: np.ndarray


def stage_compute(c: dict[str, np.ndarray], lay: Layout, model: ModelArch, *, frozen: bool,
                  selective: str = "attention", modules: Iterable[str] | None = None) -> StageCompute:
    """Compute phase of many plans from their :class:`LayerCompute` table ``c`` (one array per field).
    ``selective``: what selective recomputation re-runs (``TrainingStack.selective_recompute``): ``attention``,
    Megatron's modules (``modules``, :func:`xpuplan.perf.recompute.selective_modules`; None: the attention core, and
    MLA's up-projections); ``op_sac``, PyTorch's op-level checkpointing (``sac_dense``, ``sac_moe``)."""
    mods = selective_modules(model, modules)
    L = model.n_layers
    n_moe = model.n_moe_layers
    n_dense = L - n_moe
    gbf = FROZEN_GEMM_BACKWARD_FACTOR if frozen else GEMM_BACKWARD_FACTOR

    def fwd(kind: str) -> np.ndarray:
        f = c[f"{kind}_gemm"] + c["attn_fwd"] + c[f"{kind}_elem"]
        return f + c["moe_sync"] + c["moe_quant_fwd"] if kind == "moe" else f

    def bwd(kind: str) -> np.ndarray:
        b = gbf * c[f"{kind}_gemm"] + c["attn_bwd"] + ELEMENTWISE_BACKWARD_FACTOR * c[f"{kind}_elem"]
        return b + c["moe_quant_bwd"] if kind == "moe" else b

    def recomp(kind: str) -> np.ndarray:
        # selective: the named modules (by default the attention core and, for MLA, the up-projections from the
        # latents); op-level checkpointing: its unsaved projections and the elementwise ops
        sel = c[f"sac_{kind}"] if selective == "op_sac" else _selective_forward(c, kind, mods)
        # full_rec: the share of the layers recomputed whole (1 for full recomputation, k/Ls for partial)
        return lay.full_rec * fwd(kind) + np.where(lay.sel_rec, sel, 0.0)

    def passes_dequant(kind: str) -> np.ndarray:
        return c[f"dequant_{kind}"] * (2.0 + lay.full_rec)

    def per_stage(dense_v: np.ndarray, moe_v: np.ndarray) -> np.ndarray:
        """Sum over one stage's layers: exact when pp = 1, the heaviest layer kind x L/pp otherwise."""
        if n_moe == 0:
            return np.where(lay.multi_stage, lay.Ls, L) * dense_v
        heavy = np.maximum(dense_v, moe_v) if n_dense else moe_v
        return np.where(lay.multi_stage, lay.Ls * heavy, n_dense * dense_v + n_moe * moe_v)

    comp_layers = per_stage(fwd("dense") + bwd("dense") + passes_dequant("dense"),
                            fwd("moe") + bwd("moe") + passes_dequant("moe"))
    head = (1.0 + gbf) * c["head_gemm"] + (1.0 + ELEMENTWISE_BACKWARD_FACTOR) * c["head_elem"]
    return StageCompute(per_mb=comp_layers + head, fwd=per_stage(fwd("dense"), fwd("moe")),
                        bwd=per_stage(bwd("dense"), bwd("moe")), recompute=per_stage(recomp("dense"), recomp("moe")),
                        attn_fwd=c["attn_fwd"], attn_bwd=c["attn_bwd"],
                        gemm_fwd=(n_dense * c["dense_gemm"] + n_moe * c["moe_gemm"]) / L)
