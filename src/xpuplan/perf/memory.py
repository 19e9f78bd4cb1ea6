"""Memory per device for training, fine-tuning and inference (bytes, decimal).

Training states follow the mixed-precision recipes of Micikevicius et al. 2018 / ZeRO
(Rajbhandari et al. 2020): bytes per parameter for weights, gradients, fp32 master weights and
optimizer moments, sharded by ZeRO stage over the data-parallel group. Activations generalise
Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
Eq. 1-5) to GQA/MLA attention, gated MLPs, MoE and flash attention; see docs/perf.md for the
derivation. Inference: weights per dtype with group-quantisation overhead, KV cache per token,
and an activation workspace.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.params import (
    param_breakdown,
    params_attention_per_layer,
    params_mlp_dense,
    params_moe_layer,
    params_norms_per_layer,
)
from xpuplan.units import GB, bytes_per_element

Recompute = Literal["none", "selective", "full"]
FinetuneMethod = Literal["full", "lora", "qlora"]


# ---------------------------------------------------------------------------------------
# Training-state recipes
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StateRecipe:
    """Bytes per parameter kept for training, by role."""

    name: str
    weights: float
    grads: float
    master: float
    optimizer: float
    description: str

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.master + self.optimizer


#: Named mixed-precision recipes. Adam keeps two fp32 moments (8 B/param).
STATE_RECIPES: dict[str, StateRecipe] = {
    r.name: r
    for r in (
        StateRecipe("bf16-adam", 2, 2, 4, 8, "bf16 weights and grads, fp32 master + Adam m, v: 16 B/param"),
        StateRecipe(
            "bf16-adam-fp32-grads", 2, 4, 4, 8,
            "Megatron default: bf16 weights, fp32 main grads, fp32 master + Adam: 18 B/param",
        ),
        StateRecipe(
            "fp8-adam", 3, 2, 4, 8,
            "FP8 GEMMs (Transformer Engine): bf16 weights plus cached fp8 copies, fp32 master + Adam: 17 B/param",
        ),
        StateRecipe("fp32-adam", 4, 4, 0, 8, "pure fp32 weights, grads and Adam moments: 16 B/param"),
        StateRecipe("bf16-pure-adam", 2, 2, 0, 4, "bf16 weights, grads and moments, no master copy: 8 B/param"),
        StateRecipe("bf16-adam8bit", 2, 2, 4, 2, "8-bit Adam moments (bitsandbytes), fp32 master: 10 B/param"),
    )
}


def state_recipe(name: str) -> StateRecipe:
    try:
        return STATE_RECIPES[name]
    except KeyError:
        raise UserInputError(
            f"unknown optimizer-state recipe {name!r}; choose one of {', '.join(STATE_RECIPES)}", field="recipe"
        ) from None


def default_recipe_for(precision: str) -> str:
    return "fp8-adam" if precision == "fp8" else ("fp32-adam" if precision in ("fp32", "tf32") else "bf16-adam")


# ---------------------------------------------------------------------------------------
# Parameters held by one device
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceParams:
    """Parameters on the most loaded device, split into dense and expert parts."""

    dense: float
    expert: float

    @property
    def total(self) -> float:
        return self.dense + self.expert


def params_per_device(model: ModelArch, tp: int = 1, pp: int = 1, ep: int = 1, etp: int = 1) -> DeviceParams:
    """Parameters on the busiest pipeline stage of one device.

    Dense weights (attention, dense MLPs, shared experts, norms) split over TP; layers split over
    PP, the first or last stage also holding the embedding or the output head. Routed experts are
    split over EP x expert-TP. Norms are replicated across TP (counted in full).
    """
    for name, v in (("tp", tp), ("pp", pp), ("ep", ep), ("etp", etp)):
        if v < 1:
            raise UserInputError(f"{name} must be >= 1", field=name)
    b = param_breakdown(model)
    layers_per_stage = -(-model.n_layers // pp)  # ceil: the busiest stage
    attn = params_attention_per_layer(model) / tp
    norms = params_norms_per_layer(model)
    dense_mlp_layer = params_mlp_dense(model) / tp
    if model.moe is not None:
        moe_total, _ = params_moe_layer(model)
        shared = model.moe.n_shared_experts * params_mlp_dense(model, model.moe.shared_ffn)
        router = moe_total - shared - model.moe.n_routed_experts * params_mlp_dense(model, model.moe.expert_ffn_dim)
        routed = moe_total - shared - router
        moe_dense_part = shared / tp + router
        moe_expert_part = routed / (ep * etp)
        frac_moe = model.n_moe_layers / model.n_layers
    else:
        moe_dense_part = moe_expert_part = frac_moe = 0.0
    per_layer_dense = attn + norms + (1 - frac_moe) * dense_mlp_layer + frac_moe * moe_dense_part
    per_layer_expert = frac_moe * moe_expert_part
    edge = max(b.embedding, b.output_head) if pp > 1 else b.embedding + b.output_head
    dense = layers_per_stage * per_layer_dense + edge / tp + b.pooler / tp
    return DeviceParams(dense=dense, expert=layers_per_stage * per_layer_expert)


# ---------------------------------------------------------------------------------------
# Activations
# ---------------------------------------------------------------------------------------
def activation_bytes_per_layer(
    model: ModelArch,
    seq_len: int,
    micro_batch: int,
    *,
    tp: int = 1,
    sp: bool = True,
    cp: int = 1,
    recompute: Recompute = "none",
    flash_attention: bool = True,
    dropout: bool = False,
    act_bytes: float = 2.0,
) -> float:
    """Activation bytes one Transformer layer keeps for backward (Korthikanti et al. 2022).

    For MHA, a 4h GeLU MLP, dropout on, no flash attention and 2-byte activations this is the
    paper's s·b·h·(34 + 5·a·s/h) (Eq. 1); with TP and SP every term is divided by t (Eq. 4);
    without SP, 10·s·b·h stays replicated (Eq. 2). Selective recomputation and flash attention drop
    the a·s² terms (softmax, its dropout); flash attention keeps the softmax statistics (fp32,
    per head and query). Full recomputation keeps only the layer input (2·s·b·h, Eq. 5 per layer).
    MoE layers keep the expert MLP activations for top_k (+ shared) experts per token.
    ``cp`` splits the sequence across context-parallel ranks.
    """
    if seq_len <= 0 or micro_batch <= 0:
        raise UserInputError("seq_len and micro_batch must be positive", field="seq_len" if seq_len <= 0 else "micro_batch")
    s = seq_len / cp
    b = micro_batch
    h = model.d_model
    sbh = s * b * h
    t_sp = tp if sp else 1
    if recompute == "full":
        return act_bytes * sbh / t_sp
    q_dim = model.n_heads * model.qk_head_dim
    kv_dim = (
        model.n_heads * (model.qk_head_dim + model.v_head_dim)
        if model.mla is not None
        else model.kv_heads * (model.qk_head_dim + model.v_head_dim)
    )
    o_dim = model.n_heads * model.v_head_dim
    mask = 1.0 if dropout else 0.0  # dropout masks: 1 byte per element
    # parts replicated across TP unless SP: norm inputs, attention/MLP inputs, dropout masks
    norm_inputs = act_bytes * sbh * model.layer_norms
    block_inputs = act_bytes * sbh * (1 if model.parallel_attn_mlp else 2)
    masks = mask * sbh * (1 if model.parallel_attn_mlp else 2)
    replicated = norm_inputs + block_inputs + masks
    # parts split by TP: q, k, v, attention output; MLP intermediates
    attn_split = act_bytes * s * b * (q_dim + kv_dim + o_dim)
    if model.mla is not None:
        m = model.mla
        attn_split += act_bytes * s * b * (m.kv_lora_rank + (m.q_lora_rank or 0)) * tp  # latents are not TP-split
    if model.moe is not None and model.n_moe_layers:
        frac_moe = model.n_moe_layers / model.n_layers
        moe = model.moe
        per_tok_moe = moe.top_k * moe.expert_ffn_dim + moe.n_shared_experts * moe.shared_ffn
        mlp_width = (1 - frac_moe) * model.ffn_dim + frac_moe * per_tok_moe
    else:
        mlp_width = model.ffn_dim
    # gated: gate out, up out, activation out (3 f); classic: act input and output (2 f)
    mlp_split = act_bytes * s * b * mlp_width * (3 if model.mlp == "gated" else 2)
    s2_terms = 0.0
    if not flash_attention and recompute == "none":
        # softmax output (act_bytes), dropout mask (1 B) and dropout output (act_bytes) per score
        s2_terms = model.n_heads * s * seq_len * b * (2 * act_bytes + mask if dropout else act_bytes)
    elif flash_attention:
        s2_terms = 4.0 * model.n_heads * s * b  # fp32 log-sum-exp per head and query
    return replicated / t_sp + (attn_split + mlp_split + s2_terms) / tp


def activation_bytes_output(model: ModelArch, seq_len: int, micro_batch: int, *, tp: int = 1, cp: int = 1) -> float:
    """Logits (bf16) and their fp32 copy for the cross-entropy loss on the last stage."""
    if model.type == "encoder":
        return 0.0
    return (seq_len / cp) * micro_batch * model.vocab_size * (2 + 4) / tp


def pipeline_inflight_microbatches(pp: int, n_microbatches: int, vpp: int = 1) -> float:
    """Micro-batches whose activations the first stage holds at the peak of 1F1B.

    1F1B keeps ``pp`` in flight (fewer if there are fewer micro-batches); interleaving adds
    (pp-1)/(pp·vpp) (Korthikanti et al. 2022, Sec. 4.2.3). Without PP the answer is 1.
    """
    if pp <= 1:
        return 1.0
    base = float(min(pp, n_microbatches))
    return base * (1.0 + (pp - 1) / (pp * vpp)) if vpp > 1 else base


# ---------------------------------------------------------------------------------------
# Training memory
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainingMemory:
    """Bytes per device, by part; ``total`` is the peak estimate."""

    weights: float
    gradients: float
    master_weights: float
    optimizer_states: float
    activations: float
    workspace: float
    params_on_device: float
    trainable_params_on_device: float

    @property
    def states(self) -> float:
        return self.weights + self.gradients + self.master_weights + self.optimizer_states

    @property
    def total(self) -> float:
        return self.states + self.activations + self.workspace

    def to_dict(self) -> dict[str, float]:
        d = asdict(self)
        d["states"] = self.states
        d["total"] = self.total
        return d


#: Framework + allocator overhead per device that is not model state (CUDA context, NCCL
#: buffers, cuBLAS workspace, fragmentation). An assumption: ~1-3 GB seen in practice; calibrate
#: with the bench tools. Used by training and inference estimates.
RUNTIME_OVERHEAD_BYTES = 2.0 * GB

#: Extra bytes per parameter of a 4-bit NF4 base (QLoRA, Dettmers et al. 2023): one fp8 absmax
#: per 64 weights + fp32 second-level constants per 256 blocks (double quantisation) = 0.127 bit.
NF4_OVERHEAD_BYTES_PER_PARAM = 0.127 / 8

LORA_DEFAULT_TARGETS = ("q", "k", "v", "o", "gate", "up", "down")


def lora_params(model: ModelArch, rank: int, targets: tuple[str, ...] = LORA_DEFAULT_TARGETS) -> int:
    """Adapter parameters: rank·(d_in + d_out) per targeted matrix per layer (active experts'
    matrices are adapted in the shared/dense MLP only, as PEFT does by default)."""
    if rank <= 0:
        raise UserInputError("LoRA rank must be positive", field="lora_rank")
    d = model.d_model
    q_dim = model.n_heads * model.qk_head_dim
    kv_dim = model.kv_heads * model.hdim
    o_in = model.n_heads * model.v_head_dim
    f = model.ffn_dim
    shapes = {
        "q": (d, q_dim),
        "k": (d, kv_dim),
        "v": (d, kv_dim),
        "o": (o_in, d),
        "gate": (d, f) if model.mlp == "gated" else (0, 0),
        "up": (d, f),
        "down": (f, d),
    }
    unknown = [t for t in targets if t not in shapes]
    if unknown:
        raise UserInputError(f"unknown LoRA target(s) {unknown}; choose from {list(shapes)}", field="lora_targets")
    per_layer = sum(rank * (a + c) for a, c in (shapes[t] for t in targets))
    return model.n_layers * per_layer


def training_memory(
    model: ModelArch,
    *,
    seq_len: int,
    micro_batch: int = 1,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    cp: int = 1,
    ep: int = 1,
    vpp: int = 1,
    sp: bool | None = None,
    zero_stage: int = 1,
    recompute: Recompute = "selective",
    recipe: str = "bf16-adam",
    n_microbatches: int | None = None,
    flash_attention: bool = True,
    dropout: bool = False,
    method: FinetuneMethod = "full",
    lora_rank: int = 16,
    lora_targets: tuple[str, ...] = LORA_DEFAULT_TARGETS,
) -> TrainingMemory:
    """Peak memory per device of a training or fine-tuning step (bytes).

    ZeRO: stage 1 shards optimizer states and master weights over the data-parallel group,
    stage 2 also gradients, stage 3 (= FSDP full shard) also weights. Expert parameters are
    sharded over the expert-data-parallel group dp·cp/ep. LoRA/QLoRA freeze the base (bf16 or NF4)
    and keep gradients and optimizer states for the adapters only.
    """
    if zero_stage not in (0, 1, 2, 3):
        raise UserInputError("zero_stage must be 0, 1, 2 or 3", field="zero_stage")
    if (dp * cp) % ep:
        raise UserInputError(f"ep ({ep}) must divide dp·cp ({dp * cp})", field="ep")
    sp = tp > 1 if sp is None else sp
    r = state_recipe(recipe)
    dev = params_per_device(model, tp=tp, pp=pp, ep=ep)
    edp = max(1, dp * cp // ep)
    shard_dense = dp * cp  # ZeRO shards over the data-parallel group, CP ranks included (Megatron)

    def shard(n_dense: float, n_expert: float, per_param: float, sharded: bool) -> float:
        if not sharded:
            return (n_dense + n_expert) * per_param
        return n_dense * per_param / shard_dense + n_expert * per_param / edp

    if method == "full":
        weights = shard(dev.dense, dev.expert, r.weights, zero_stage >= 3)
        grads = shard(dev.dense, dev.expert, r.grads, zero_stage >= 2)
        master = shard(dev.dense, dev.expert, r.master, zero_stage >= 1)
        opt = shard(dev.dense, dev.expert, r.optimizer, zero_stage >= 1)
        trainable = dev.total
    else:
        total = param_breakdown(model).total
        linear_frac = 1.0 - (param_breakdown(model).embedding + param_breakdown(model).output_head) / total
        if method == "qlora":
            base_bytes = dev.total * (linear_frac * (0.5 + NF4_OVERHEAD_BYTES_PER_PARAM) + (1 - linear_frac) * 2.0)
        else:
            base_bytes = dev.total * 2.0
        weights = base_bytes / (shard_dense if zero_stage >= 3 else 1)
        adapters = lora_params(model, lora_rank, lora_targets) / (tp * pp)
        weights += adapters * r.weights
        grads = adapters * r.grads / (shard_dense if zero_stage >= 2 else 1)
        master = adapters * r.master / (shard_dense if zero_stage >= 1 else 1)
        opt = adapters * r.optimizer / (shard_dense if zero_stage >= 1 else 1)
        trainable = adapters
    n_mb = n_microbatches if n_microbatches is not None else pp
    layers_per_stage = -(-model.n_layers // pp)
    per_layer = activation_bytes_per_layer(
        model, seq_len, micro_batch, tp=tp, sp=sp, cp=cp, recompute=recompute,
        flash_attention=flash_attention, dropout=dropout,
    )
    first_stage = per_layer * layers_per_stage * pipeline_inflight_microbatches(pp, n_mb, vpp)
    last_stage = per_layer * layers_per_stage + activation_bytes_output(model, seq_len, micro_batch, tp=tp, cp=cp)
    acts = max(first_stage, last_stage) if pp > 1 else first_stage + activation_bytes_output(
        model, seq_len, micro_batch, tp=tp, cp=cp
    )
    if recompute == "full":
        # one layer's activations are rebuilt during its backward
        acts += activation_bytes_per_layer(
            model, seq_len, micro_batch, tp=tp, sp=sp, cp=cp, recompute="selective", flash_attention=flash_attention
        )
    if zero_stage >= 3 and method == "full":
        # FSDP gathers one layer's (unit's) full weights at a time, plus prefetch of the next
        layer_weights = (dev.dense + dev.expert) / max(1, layers_per_stage) * r.weights
        workspace_extra = 2 * layer_weights
    else:
        workspace_extra = 0.0
    return TrainingMemory(
        weights=weights,
        gradients=grads,
        master_weights=master,
        optimizer_states=opt,
        activations=acts,
        workspace=RUNTIME_OVERHEAD_BYTES + workspace_extra,
        params_on_device=dev.total,
        trainable_params_on_device=trainable,
    )


# ---------------------------------------------------------------------------------------
# Inference memory
# ---------------------------------------------------------------------------------------
#: Group-quantisation overhead: AWQ/GPTQ-style int4 with group size 128 keep an fp16 scale and
#: an fp16 (or packed) zero point per group -> 4 B per 128 weights.
INT4_GROUP_SIZE = 128
INT4_GROUP_OVERHEAD_BYTES = 4.0


def weight_bytes_per_param(dtype: str, group_size: int = INT4_GROUP_SIZE) -> float:
    """Bytes per weight for a storage format, including quantisation scales."""
    base = bytes_per_element(dtype)
    if dtype in ("int4", "fp4", "nf4"):
        if group_size <= 0:
            raise UserInputError("group_size must be positive", field="group_size")
        return base + INT4_GROUP_OVERHEAD_BYTES / group_size
    return base


def inference_weight_bytes(
    model: ModelArch, weight_dtype: str = "bf16", *, group_size: int = INT4_GROUP_SIZE, quantize_embeddings: bool = False
) -> float:
    """Bytes of all weights for serving; embeddings and the head stay 16-bit unless
    ``quantize_embeddings`` (what AWQ/GPTQ/FP8 checkpoints usually do)."""
    b = param_breakdown(model)
    edge = b.embedding + b.output_head
    body = b.total - edge
    edge_dtype = weight_dtype if quantize_embeddings or bytes_per_element(weight_dtype) >= 2 else "bf16"
    return body * weight_bytes_per_param(weight_dtype, group_size) + edge * weight_bytes_per_param(edge_dtype, group_size)


def kv_cache_bytes_per_token(model: ModelArch, kv_dtype: str = "bf16") -> float:
    """KV-cache bytes per token, all layers: 2·L·n_kv·d_head·bytes (MHA/GQA/MQA) or
    L·(kv_lora_rank + rope_dim)·bytes (MLA, DeepSeek-V2/V3). Encoders cache nothing."""
    if model.type == "encoder":
        return 0.0
    b = bytes_per_element(kv_dtype)
    if model.mla is not None:
        return model.n_layers * (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * b
    return 2.0 * model.n_layers * model.kv_heads * model.hdim * b


def inference_activation_bytes(model: ModelArch, tokens_in_flight: int, act_bytes: float = 2.0) -> float:
    """Transient activation workspace for a forward over ``tokens_in_flight`` tokens: residual,
    q/k/v/o and MLP intermediates of one layer at a time, plus fp32 logits of one row per sequence
    is ignored (small). Upper-bound style estimate."""
    width = model.d_model * 4 + model.n_heads * model.qk_head_dim * 2
    mlp = model.ffn_dim if model.moe is None else max(model.ffn_dim, model.moe.top_k * model.moe.expert_ffn_dim)
    width += mlp * (3 if model.mlp == "gated" else 2)
    return tokens_in_flight * width * act_bytes


@dataclass(frozen=True)
class InferenceMemory:
    """Bytes per device of a replica split over ``tp·pp`` devices."""

    weights: float
    kv_cache: float
    activations: float
    workspace: float
    kv_bytes_per_token: float

    @property
    def total(self) -> float:
        return self.weights + self.kv_cache + self.activations + self.workspace

    def to_dict(self) -> dict[str, float]:
        d = asdict(self)
        d["total"] = self.total
        return d


def inference_memory(
    model: ModelArch,
    *,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    batch: int = 1,
    context: int = 4096,
    tp: int = 1,
    pp: int = 1,
    prefill_chunk: int = 8192,
    group_size: int = INT4_GROUP_SIZE,
) -> InferenceMemory:
    """Memory per device to serve ``batch`` sequences of ``context`` tokens on tp·pp devices.

    Weights and KV cache split evenly over tp·pp (KV heads fewer than TP are replicated:
    each device holds at least one KV head).
    """
    if batch <= 0 or context <= 0:
        raise UserInputError("batch and context must be positive", field="batch" if batch <= 0 else "context")
    if tp <= 0 or pp <= 0:
        raise UserInputError("tp and pp must be positive", field="tp" if tp <= 0 else "pp")
    w = inference_weight_bytes(model, weight_dtype, group_size=group_size) / (tp * pp)
    kv_tok = kv_cache_bytes_per_token(model, kv_dtype)
    if model.mla is not None:
        kv_split = pp  # the latent is shared by all heads: replicated across TP
    else:
        kv_split = pp * min(tp, model.kv_heads)
    kv = kv_tok * batch * context / kv_split
    acts = inference_activation_bytes(model, min(batch * context, max(prefill_chunk, batch))) / tp
    return InferenceMemory(
        weights=w, kv_cache=kv, activations=acts, workspace=RUNTIME_OVERHEAD_BYTES, kv_bytes_per_token=kv_tok / kv_split
    )
