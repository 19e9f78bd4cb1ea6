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

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

import numpy as np

from xpuplan.catalog.assumptions import Assumptions, LazyMapping, StateRecipe, default_assumptions
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.params import (
    kv_replication,
    param_breakdown,
    params_attention_per_layer,
    params_attention_replicated_per_layer,
    params_kv_per_layer,
    params_mlp_dense,
    params_moe_layer,
    params_norms_per_layer,
)
from xpuplan.perf.recompute import selective_modules
from xpuplan.units import GB, bytes_per_element
from xpuplan.workload.vocabulary import LORA_TARGETS, Method, Recompute

FinetuneMethod = Method  # the shared vocabulary (workload.vocabulary)


# ---------------------------------------------------------------------------------------
# Training-state recipes
# ---------------------------------------------------------------------------------------
#: Named mixed-precision recipes (bytes per parameter by role; Adam keeps two fp32 moments,
#: 8 B/param). The table is data (``catalog/data/state_recipes.yaml``); this is a read-only view
#: of the built-in recipes. Planners may pass their ``Assumptions`` to :func:`state_recipe`.
STATE_RECIPES: Mapping[str, StateRecipe] = LazyMapping(lambda: default_assumptions().state_recipes)


def state_recipe(name: str, assumptions: Assumptions | None = None) -> StateRecipe:
    """The recipe named ``name`` in ``assumptions`` (built-in when None); UserInputError lists the known ones."""
    return (assumptions or default_assumptions()).state_recipe(name)


def default_recipe_for(precision: str, *, fp8_primary_weights: bool = False) -> str:
    """The state recipe a plan of ``precision`` keeps: FP8 on a stack whose weights are FP8 primary copies
    (``TrainingStack.fp8_primary_weights``) keeps ``fp8-primary-adam`` (no 16-bit working copy)."""
    if precision == "fp8" and fp8_primary_weights:
        return "fp8-primary-adam"
    if precision in ("fp8", "fp4"):
        return f"{precision}-adam"
    return "fp32-adam" if precision in ("fp32", "tf32") else "bf16-adam"


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


def params_per_device(model: ModelArch, tp: int = 1, pp: int = 1, ep: int = 1, etp: int = 1, *,
                      dualpipe: bool = False) -> DeviceParams:
    """Parameters on the busiest pipeline stage of one device.

    Dense weights (attention, dense MLPs, shared experts, norms) split over TP; layers split over
    PP, the first or last stage also holding the embedding or the output head. Routed experts are
    split over EP x expert-TP. Norms are replicated across TP (counted in full). With tp > n_kv_heads
    each device holds one KV head's projections (``perf.params.kv_replication``).

    ``dualpipe`` (DeepSeek-V3's bidirectional schedule, pp > 1): rank i holds stages i and pp-1-i, so every
    device keeps two stages' layers ("DualPipe requires keeping two copies of the model parameters",
    arXiv 2412.19437 sec. 3.2.1) and the first rank both the embedding and the output head (sec. 3.2.3: "the
    shallowest layers (including the embedding layer) and deepest layers (including the output head) ... on the
    same PP rank"). The d = pp·ceil(L/pp) - L layers an uneven pipeline lacks fall on those two edge stages, as
    under 1F1B (:func:`pipeline_peak_layer_microbatches`), so the edge rank holds 2·ceil(L/pp) - d layers plus
    both ends and an inner rank 2·ceil(L/pp) layers; the busier of the two (by parameter count) is returned.
    """
    for name, v in (("tp", tp), ("pp", pp), ("ep", ep), ("etp", etp)):
        if v < 1:
            raise UserInputError(f"{name} must be >= 1", field=name)
    b = param_breakdown(model)
    layers_per_stage = -(-model.n_layers // pp)  # ceil: the busiest stage
    replicated = params_attention_replicated_per_layer(model)  # MLA's down-projections: whole on every rank
    attn = (params_attention_per_layer(model) - replicated
            + (kv_replication(model, tp) - 1.0) * params_kv_per_layer(model)) / tp + replicated
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
    if dualpipe and pp > 1:
        deficit = pp * layers_per_stage - model.n_layers
        edge_rank = DeviceParams(
            dense=(2 * layers_per_stage - deficit) * per_layer_dense + (b.embedding + b.output_head + b.pooler) / tp,
            expert=(2 * layers_per_stage - deficit) * per_layer_expert)
        if pp == 2:
            return edge_rank  # both ranks hold the whole model
        inner_rank = DeviceParams(dense=2 * layers_per_stage * per_layer_dense,
                                  expert=2 * layers_per_stage * per_layer_expert)
        return max(edge_rank, inner_rank, key=lambda d: d.total)
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
    linear_input_bytes: float | None = None,
    recompute_modules: Iterable[str] | None = None,
    kv_repeat: bool = False,
    expert_tp: int | None = None,
    moe_act_input_bytes: float | None = None,
    offload_modules: Iterable[str] | None = None,
    where: Literal["device", "host"] = "device",
) -> float:
    """Activation bytes one Transformer layer keeps for backward (Korthikanti et al. 2022).

    For MHA, a 4h GeLU MLP, dropout on, no flash attention and 2-byte activations this is the
    paper's s·b·h·(34 + 5·a·s/h) (Eq. 1); with TP and SP every term is divided by t (Eq. 4);
    without SP, 10·s·b·h stays replicated (Eq. 2). Selective recomputation and flash attention drop
    the a·s² terms (softmax, its dropout); flash attention keeps the softmax statistics (fp32,
    per head and query). Full recomputation keeps only the layer input (2·s·b·h, Eq. 5 per layer);
    ``offload`` moves that input to host memory, so the layer keeps nothing on the device (the
    copies in flight are :func:`offload_buffer_bytes`). ``layer_offload`` keeps what ``none`` keeps: how many
    layers' worth waits on the host is decided per plan (:func:`layer_offload_count`).
    MoE layers keep the expert MLP activations for top_k (+ shared) experts per token, and the routed experts'
    FC1 input: the top_k dispatched copies of every token (d_model wide, ``linear_input_bytes`` each), which the
    grouped GEMM keeps for its weight gradient (Transformer Engine ``GroupedLinear`` saves its input; Megatron-Core
    applies the gate probabilities inside the experts' activation, so the unpermutation keeps only its index map:
    ``megatron/core/transformer/moe/experts.py``, TE ``pytorch/permutation.py``). ``expert_tp`` (None: ``tp``) is the
    expert tensor-parallel size (:func:`expert_tensor_parallel`): experts split etp ways see the copies of every
    token of their group, gathered at full width; folded (etp < tp), a rank's experts see its own sequence shard's.
    ``moe_act_input_bytes`` (None: ``act_bytes``): bytes per element of the routed experts' activation input (FC1's
    output) kept for the activation's backward; 1 where FP8 training stores it in FP8
    (:func:`saved_moe_act_input_bytes`).
    ``cp`` splits the sequence across context-parallel ranks.

    ``linear_input_bytes``: bytes per element of the GEMM inputs the linear layers keep for their weight
    gradient (the norm outputs feeding QKV and FC1, the attention output feeding the projection, the
    activation output feeding FC2); ``act_bytes`` when None. FP8 training on Transformer Engine keeps the
    FP8 (column-wise) copy it cast for the forward GEMM instead of the 16-bit tensor (TE
    ``pytorch/module/linear.py``: ``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)``;
    ``saved_inputmat = inputmat``), as DeepSeek-V3's framework caches linear inputs in FP8 (arXiv 2412.19437,
    sec. 3.3.3): 1 byte. The attention output is then kept twice (16-bit by the attention kernel, FP8 by the
    projection); the FC2 input only in FP8 (the activation's backward needs its input, FC1's output).

    ``recompute_modules``: what ``selective`` re-runs (:func:`xpuplan.perf.recompute.selective_modules`; None: the
    attention core, and MLA's up-projections). A re-run module keeps only its input: ``core_attn`` drops the s²
    terms of unfused attention (fused attention keeps its softmax statistics either way); ``mla_up_proj`` the
    up-projected q, k, v; ``layernorm`` the norm outputs feeding QKV and FC1 (the linear layers' saved inputs);
    ``mlp`` the dense MLP's intermediates and ``moe`` the MoE block's (routed and shared experts, the dispatched
    copies included); ``shared_experts``
    the shared experts'; ``moe_act`` the routed experts' activation output (FC2's saved input). Megatron-Core
    frees these through ``CheckpointWithoutOutput`` (layernorm, moe_act) or a checkpointed sub-module.

    ``kv_repeat``: the model code copies the KV heads to every query head before the attention call
    (``TrainingStack.attention_kv_repeat``), so the attention keeps K and V of every query head.

    ``offload_modules``: fine-grained activation offloading (Megatron-Core ``--offload-modules``,
    :data:`~xpuplan.workload.vocabulary.OFFLOAD_MODULES`) keeps the named modules' inputs in host memory between the
    forward and the backward: ``attn_norm`` / ``mlp_norm`` the norms' inputs, ``qkv_linear`` the QKV projection's
    (nothing when ``layernorm`` is recomputed: the norm output is not kept), ``core_attn`` q, k and v (nothing for MLA
    with ``mla_up_proj`` recomputed), ``attn_proj`` the attention output (and its FP8 copy), ``expert_fc1`` the
    dispatched copies, ``moe_act`` the routed experts' activation input (nothing when ``moe`` is recomputed).
    ``where``: ``device`` (the default) returns what stays on the device, ``host`` what those modules move to the
    host. Full recomputation and offloaded layers keep no module inputs, so nothing moves.
    """
    if seq_len <= 0 or micro_batch <= 0:
        raise UserInputError("seq_len and micro_batch must be positive", field="seq_len" if seq_len <= 0 else "micro_batch")
    if recompute in ("layer_offload", "partial"):
        # an offloaded layer keeps what it keeps, only elsewhere; a partial plan's recomputed layers keep their input
        # only, counted per plan (training_memory_arrays)
        recompute = "none"
    s = seq_len / cp
    b = micro_batch
    h = model.d_model
    sbh = s * b * h
    t_sp = tp if sp else 1
    mods = selective_modules(model, recompute_modules) if recompute == "selective" else frozenset()
    offl = frozenset(offload_modules or ())
    if recompute == "offload":
        return 0.0  # the layer input full recomputation keeps waits in host memory
    if recompute == "full":
        return act_bytes * sbh / t_sp if where == "device" else 0.0
    q_dim = model.n_heads * model.qk_head_dim
    kv_dim = (
        model.n_heads * (model.qk_head_dim + model.v_head_dim)
        if model.mla is not None or kv_repeat
        else model.kv_heads * (model.qk_head_dim + model.v_head_dim)
    )
    o_dim = model.n_heads * model.v_head_dim
    mask = 1.0 if dropout else 0.0  # dropout masks: 1 byte per element
    # parts replicated across TP unless SP: norm inputs, attention/MLP inputs, dropout masks
    lin_bytes = act_bytes if linear_input_bytes is None else linear_input_bytes
    norm_inputs = act_bytes * sbh * model.layer_norms
    block_inputs = 0.0 if "layernorm" in mods else lin_bytes * sbh * (1 if model.parallel_attn_mlp else 2)
    masks = mask * sbh * (1 if model.parallel_attn_mlp else 2)
    replicated = norm_inputs + block_inputs + masks
    # parts split by TP: q, k, v, attention output; MLP intermediates
    attn_split = act_bytes * s * b * (q_dim + kv_dim * (1.0 if kv_repeat else kv_replication(model, tp)) + o_dim)
    if lin_bytes != act_bytes:
        attn_split += lin_bytes * s * b * o_dim  # the projection's own quantised copy of the attention output
    if model.mla is not None:
        m = model.mla
        attn_split += act_bytes * s * b * (m.kv_lora_rank + (m.q_lora_rank or 0)) * tp  # latents are not TP-split
        if "mla_up_proj" in mods:
            # MLA under selective recomputation re-runs the up-projections from the kept latents
            # (Megatron-Core --recompute-modules mla_up_proj; DeepSeek-V3 report §3.2.3): the
            # up-projected q, k, v are not kept
            attn_split -= act_bytes * s * b * (q_dim + kv_dim)
    # gated: gate out, up out (the activation's input), activation out (FC2's input); classic: act input
    # and output. The routed experts' activation input in ``moe_act_input_bytes`` where the stack stores it so.
    n_in = 2 if model.mlp == "gated" else 1
    per_width = act_bytes * n_in + lin_bytes
    per_width_routed = (act_bytes if moe_act_input_bytes is None else moe_act_input_bytes) * n_in + lin_bytes
    dispatched = 0.0  # the routed experts' FC1 input per token, averaged over the layers (already x etp/tp x tp)
    if model.moe is not None and model.n_moe_layers:
        frac_moe = model.n_moe_layers / model.n_layers
        moe = model.moe
        mlp_bytes = ((1 - frac_moe) * model.ffn_dim * per_width
                     + frac_moe * (moe.top_k * moe.expert_ffn_dim * per_width_routed
                                   + moe.n_shared_experts * moe.shared_ffn * per_width))
        if "moe" not in mods:
            etp = tp if expert_tp is None else expert_tp
            dispatched = frac_moe * moe.top_k * h * lin_bytes * etp
    else:
        mlp_bytes = model.ffn_dim * per_width
    mlp_split = s * b * mlp_bytes
    if mods & {"mlp", "moe", "shared_experts", "moe_act"}:
        frac = model.n_moe_layers / model.n_layers if model.moe is not None else 0.0
        routed = shared = 0.0
        if model.moe is not None:
            routed = frac * model.moe.top_k * model.moe.expert_ffn_dim
            shared = frac * model.moe.n_shared_experts * model.moe.shared_ffn
        freed = ((1 - frac) * model.ffn_dim * per_width if "mlp" in mods else 0.0)
        if "moe" in mods:
            freed += routed * per_width_routed + shared * per_width
        else:
            freed += (shared * per_width if "shared_experts" in mods else 0.0) + (
                routed * lin_bytes if "moe_act" in mods else 0.0)
        mlp_split = max(0.0, mlp_split - s * b * freed)
    s2_terms = 0.0
    if not flash_attention and (recompute == "none" or (recompute == "selective" and "core_attn" not in mods)):
        # softmax output (act_bytes), dropout mask (1 B) and dropout output (act_bytes) per score
        s2_terms = model.n_heads * s * seq_len * b * (2 * act_bytes + mask if dropout else act_bytes)
    elif flash_attention:
        s2_terms = 4.0 * model.n_heads * s * b  # fp32 log-sum-exp per head and query
    kept = replicated / t_sp + (attn_split + mlp_split + s * b * dispatched + s2_terms) / tp
    if not offl:
        return kept if where == "device" else 0.0
    # the modules' inputs that fine-grained activation offloading moves to the host (each a part of ``kept``)
    one_norm = act_bytes * sbh / t_sp
    host = 0.0
    if "attn_norm" in offl:
        host += one_norm
    if "mlp_norm" in offl and model.layer_norms >= 2:
        host += one_norm
    if "qkv_linear" in offl and "layernorm" not in mods:
        host += lin_bytes * sbh / t_sp
    if "core_attn" in offl and not (model.mla is not None and "mla_up_proj" in mods):
        host += act_bytes * s * b * (q_dim + kv_dim * (1.0 if kv_repeat else kv_replication(model, tp))) / tp
    if "attn_proj" in offl:
        host += (act_bytes + (lin_bytes if lin_bytes != act_bytes else 0.0)) * s * b * o_dim / tp
    if "expert_fc1" in offl:
        host += s * b * dispatched / tp
    if "moe_act" in offl and model.moe is not None and model.n_moe_layers and "moe" not in mods:
        frac = model.n_moe_layers / model.n_layers
        act_in = act_bytes if moe_act_input_bytes is None else moe_act_input_bytes
        host += s * b * frac * model.moe.top_k * model.moe.expert_ffn_dim * n_in * act_in / tp
    host = min(host, kept)
    return kept - host if where == "device" else host


#: Layer inputs of an offloaded (``recompute="offload"``) plan that are on the device at once: the one
#: being copied to the host after its forward and the one prefetched back before its backward (a
#: double buffer, as MaxText's host offload and Megatron's activation offloading keep).
OFFLOAD_BUFFER_LAYERS: Final = 2


def offload_layer_input_bytes(model: ModelArch, seq_len: int, micro_batch: int, *, tp: int = 1, sp: bool = True,
                              cp: int = 1, act_bytes: float = 2.0) -> float:
    """Bytes of one layer's input per micro-batch, on one device: what an offloaded plan copies to the
    host after each layer's forward and back before its backward (2·s·b·h, sharded like the saved input
    of full recomputation)."""
    return activation_bytes_per_layer(model, seq_len, micro_batch, tp=tp, sp=sp, cp=cp, recompute="full",
                                      act_bytes=act_bytes)


def host_usable_bytes(host_memory_bytes: float | None, reserve: float) -> float | None:
    """Host memory per device that activations offloaded to the host may take: the reference system's CPU memory per
    device (``Device.host_memory_bytes``) less ``reserve`` (``TrainingJob.host_memory_reserve``: the OS, the ranks'
    processes, data loading, checkpoint staging); None when the host's memory is unknown (then it is not checked)."""
    return None if host_memory_bytes is None else host_memory_bytes * (1.0 - reserve)


def offload_buffer_bytes(model: ModelArch, seq_len: int, micro_batch: int, *, tp: int = 1, sp: bool = True,
                         cp: int = 1) -> float:
    """Device bytes of the layer inputs in transit in an offloaded plan (:data:`OFFLOAD_BUFFER_LAYERS`)."""
    return OFFLOAD_BUFFER_LAYERS * offload_layer_input_bytes(model, seq_len, micro_batch, tp=tp, sp=sp, cp=cp)


def saved_linear_input_bytes(precision: str, fp8_saved_activations: bool) -> float | None:
    """Bytes per element of the linear-layer inputs kept for backward (``linear_input_bytes`` of
    :func:`activation_bytes_per_layer`): 1 for FP8/FP4 training on a stack that keeps the quantised copy
    (``TrainingStack.fp8_saved_activations``), else None (the 16-bit activation). FP4 recipes keep at
    least their FP8-or-wider wgrad inputs, so 1 byte is the conservative figure for both."""
    return 1.0 if precision in ("fp8", "fp4") and fp8_saved_activations else None


def saved_moe_act_input_bytes(precision: str, fp8_moe_act_inputs: bool) -> float | None:
    """Bytes per element of the routed experts' activation input kept for backward (``moe_act_input_bytes`` of
    :func:`activation_bytes_per_layer`): 1 for FP8/FP4 training on a stack that stores it in FP8
    (``TrainingStack.fp8_moe_act_inputs``: DeepSeek-V3's framework), else None (the 16-bit activation)."""
    return 1.0 if precision in ("fp8", "fp4") and fp8_moe_act_inputs else None


def activation_bytes_output(model: ModelArch, seq_len: int, micro_batch: int, *, tp: int = 1, cp: int = 1) -> float:
    """Logits (bf16) and their fp32 copy for the cross-entropy loss on the last stage."""
    if model.type == "encoder":
        return 0.0
    return (seq_len / cp) * micro_batch * model.vocab_size * (2 + 4) / tp


def pipeline_inflight_microbatches(pp: int, n_microbatches: int, vpp: int = 1) -> float:
    """Micro-batches whose activations the first stage holds at the peak of 1F1B.

    1F1B keeps ``pp`` in flight (fewer if there are fewer micro-batches); interleaving adds
    (pp-1)/(pp·vpp) (Korthikanti et al. 2022, Sec. 4.2.3) when the step has enough micro-batches to
    reach the steady state (:func:`interleave_activation_factor`). Without PP the answer is 1.
    """
    if pp <= 1:
        return 1.0
    base = float(min(pp, n_microbatches))
    return base * float(interleave_activation_factor(np.asarray(pp), np.asarray(n_microbatches), np.asarray(vpp)))


def ep_overlap_extra_layers(n_layers: int, pp: Any, vpp: Any) -> Any:
    """Layer-micro-batches of activations the first stage holds beyond its schedule's own when Megatron-Core's
    batch-level MoE all-to-all overlap merges one micro-batch's forward with another's backward, layer by layer
    (combined_1f1b.py: the forward of layer l runs beside the backward of layer L-1-l, which frees that layer's
    activations as the forward allocates the next): one layer more (the pair in flight), and with the interleaved
    schedule also the extra warm-up forward of one model chunk, ceil(layers/pp)/vpp layers (schedules.py, "we
    schedule one extra micro-batch forward step before the 1f1b stages"). Numbers or arrays."""
    pp_f = np.asarray(pp, dtype=float)
    chunk = np.ceil(n_layers / pp_f) / np.maximum(np.asarray(vpp, dtype=float), 1.0)
    out = 1.0 + np.where(pp_f > 1, chunk, 0.0)
    return float(out) if out.ndim == 0 else out


def interleave_activation_factor(pp: np.ndarray, n_microbatches: np.ndarray, vpp: np.ndarray) -> np.ndarray:
    """Activations the first stage of an interleaved (virtual-stage) 1F1B schedule holds, over plain 1F1B's.

    Megatron-Core's interleaved schedule runs 2·(pp-1) + (vpp-1)·pp warm-up forwards of model chunks (each
    L/(pp·vpp) layers) on stage 0 before its first backward, capped at the step's m·vpp chunk forwards
    (``forward_backward_pipelining_with_interleaving``, megatron/core/pipeline_parallel/schedules.py: "if
    num_microbatches == pipeline_parallel_size: all warm-up"; ``min(num_warmup_microbatches,
    total_num_microbatches)``). With the one forward of the steady state that is L/pp layers times
    min(m, pp + (pp-1)/vpp) micro-batches, against min(m, pp) for plain 1F1B: the paper's 1 + (pp-1)/(pp·vpp)
    when m is large, and no extra memory at all when the step has only pp micro-batches (deep pipelines
    at a fixed global batch on thousands of devices, e.g. Llama 3 405B on 16,384 H100: m = pp = 16).
    """
    pp_f = np.asarray(pp, dtype=float)
    m = np.asarray(n_microbatches, dtype=float)
    v = np.maximum(np.asarray(vpp, dtype=float), 1.0)
    plain = np.maximum(np.minimum(m, pp_f), 1.0)
    inter = np.minimum(m, pp_f + (pp_f - 1.0) / v)
    return np.where((pp_f > 1) & (v > 1), np.maximum(inter / plain, 1.0), 1.0)


def expert_dp_size(tp: np.ndarray, dpcp: np.ndarray, ep: np.ndarray, whole_experts: bool = False) -> np.ndarray:
    """Ranks sharing one expert's weights (the expert-data-parallel group): tp·dp·cp / (ep·etp) with
    :func:`expert_tensor_parallel` -- dp·cp/ep when EP is carved out of dp·cp (experts split over TP),
    tp·dp·cp/ep when the expert layers fold TP ranks into EP (MoE parallel folding, expert-TP 1:
    arXiv 2504.14960)."""
    tp_i, dpcp_i, ep_i = (np.asarray(x).astype(np.int64) for x in (tp, dpcp, ep))
    etp = expert_tensor_parallel(tp_i, dpcp_i, ep_i, whole_experts)
    return np.maximum(tp_i * dpcp_i // (ep_i * etp), 1).astype(float)


def expert_tensor_parallel(tp: Any, dpcp: Any, ep: Any, whole_experts: bool = False) -> Any:
    """Expert tensor-parallel size (ETP) of a plan: how many ranks split one routed expert's weights.

    TP when EP is carved out of the data-parallel ranks (``ep`` divides dp·cp, every ep = 1 plan
    included): the experts are split over the tensor-parallel group like a dense MLP, Megatron-Core's
    default (``expert_tensor_parallel_size`` unset = TP) and what MindSpeed and DeepSpeed-Megatron do.
    1 when the expert layers fold TP ranks into EP (MoE parallel folding, arXiv 2504.14960): every
    rank of the EP group then holds whole experts; always 1 with EP for a stack whose recipes set
    expert-TP 1 (``whole_experts``: ``TrainingStack.expert_tp_one``, Megatron-Bridge's MoE recipes). The one
    rule the memory model, the compute model and the launch configurations share. Numbers or arrays."""
    if any(isinstance(x, np.ndarray) for x in (tp, dpcp, ep)):
        tp_i, dpcp_i, ep_i = (np.asarray(x).astype(np.int64) for x in (tp, dpcp, ep))
        folded = (dpcp_i % ep_i != 0) | (whole_experts & (ep_i > 1))
        return np.where(folded, 1, tp_i)
    folded = int(dpcp) % int(ep) != 0 or (whole_experts and int(ep) > 1)
    return 1 if folded else int(tp)


def gradients_sharded(zero: np.ndarray, pp: np.ndarray) -> np.ndarray:
    """Whether each plan keeps only its 1/dp shard of the gradients between micro-batches.

    ZeRO-3 always does. ZeRO-2 does without pipelining: it reduce-scatters every micro-batch's
    gradients into its shard (DeepSpeed stage 2 under gradient accumulation). With pipelining
    (pp > 1) a stage's gradients accumulate in a full-size local buffer over the step's
    micro-batches and are reduce-scattered once per step, as ZeRO-1 does: DeepSpeed's pipeline
    engine refuses ZeRO-2 ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism",
    deepspeed/runtime/pipe/engine.py), Megatron-LM's distributed optimizer keeps a full gradient
    buffer and reduce-scatters it once per step, and Meta's Llama 3 stack runs FSDP without
    re-sharding between the micro-batches of its pipeline (Llama 3 Herd of Models, arXiv
    2407.21783, sec. 3.3.2). The step model (``train.phases.dp_comm_s``) and the memory model
    both read this, so time and memory agree."""
    z = np.asarray(zero)
    return (z >= 3) | ((z == 2) & (np.asarray(pp) <= 1))


def pipeline_peak_layer_microbatches(n_layers: int, pp: np.ndarray, n_microbatches: np.ndarray) -> np.ndarray:
    """Peak (layers x micro-batches) of activations one pipeline stage holds under 1F1B.

    Stage i (from 0) holds min(pp - i, m) micro-batches in flight. With L layers on pp stages of
    at most Ls = ceil(L/pp) layers, the d = pp·Ls - L missing layers go to the first and last stages
    (the first gets ceil(d/2) fewer: Meta's Llama 3 layout, one layer fewer on each end), so the peak
    is max((Ls - ceil(d/2))·min(pp, m), Ls·min(pp - 1, m)); even pipelines (d = 0) give Ls·min(pp, m)."""
    pp = np.asarray(pp, dtype=float)
    m = np.asarray(n_microbatches, dtype=float)
    ls = np.ceil(n_layers / pp)
    deficit = pp * ls - n_layers
    first_layers = np.maximum(1.0, ls - np.ceil(deficit / 2.0))
    return np.maximum(first_layers * np.minimum(pp, m), ls * np.minimum(pp - 1.0, m))


def dualpipe_layer_microbatches(n_layers: int, pp: np.ndarray, n_microbatches: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(inner rank, edge rank) peak layer-micro-batches of activations under DualPipe: pp + 1 micro-batches of one
    stage, against 1F1B's pp (DeepSeek-V3, arXiv 2412.19437 Table 2; deepseek-ai/DualPipe README: activation
    PP + 1), fewer when the step has fewer micro-batches. An inner rank's stages hold ceil(L/pp) layers; the edge rank
    holds, besides the logits, its deeper edge stage's ceil(L/pp) - floor(d/2) layers, d = pp·ceil(L/pp) - L (the
    missing layers split between the two edge stages, as :func:`params_per_device` places them)."""
    pp = np.asarray(pp, dtype=float)
    in_flight = np.minimum(pp + 1.0, np.maximum(np.asarray(n_microbatches, dtype=float), 1.0))
    ls = np.ceil(n_layers / pp)
    edge = np.maximum(1.0, ls - np.floor((pp * ls - n_layers) / 2.0))
    return ls * in_flight, edge * in_flight


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
    #: host memory the offloaded activations take per device (``recompute="offload"``: the layer inputs;
    #: ``"layer_offload"``: whole layers; ``offload_modules``: those modules' inputs; 0 otherwise): not in ``total``
    host_activations: float = 0.0
    #: layers whose activations a ``layer_offload`` plan keeps in host memory (0 otherwise)
    offload_layers: int = 0
    #: layers of the busiest pipeline stage a ``partial`` plan recomputes fully (0 otherwise)
    recompute_layers: int = 0

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

#: Every matrix LoRA can adapt (:data:`~xpuplan.workload.vocabulary.LORA_TARGETS`); the default, PEFT's "all-linear".
LORA_DEFAULT_TARGETS: tuple[str, ...] = LORA_TARGETS


def lora_target_shapes(model: ModelArch, targets: tuple[str, ...] = LORA_DEFAULT_TARGETS) -> list[tuple[int, int]]:
    """(d_in, d_out) of each targeted matrix of one block, unsplit by TP: the query, key, value and output
    projections and the MLP's gate (none in a non-gated MLP), up and down projections (an MoE block's adapters sit
    on its dense/shared MLP width, as PEFT adapts by default). The one shape table of LoRA's parameters
    (:func:`lora_params`) and its adapter traffic (``train.compute``). Unknown names are refused (field
    ``lora_targets``)."""
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
    return [shapes[t] for t in targets if shapes[t] != (0, 0)]


def lora_params(model: ModelArch, rank: int, targets: tuple[str, ...] = LORA_DEFAULT_TARGETS) -> int:
    """Adapter parameters: rank·(d_in + d_out) per targeted matrix per layer (:func:`lora_target_shapes`)."""
    if rank <= 0:
        raise UserInputError("LoRA rank must be positive", field="lora_rank")
    return model.n_layers * sum(rank * (a + c) for a, c in lora_target_shapes(model, targets))


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
    linear_input_bytes: float | None = None,
    method: FinetuneMethod = "full",
    lora_rank: int = 16,
    lora_targets: tuple[str, ...] = LORA_DEFAULT_TARGETS,
    usable_bytes: float | None = None,
    recompute_layers: int | None = None,
    whole_experts: bool = False,
    ep_overlap: bool = False,
    recompute_modules: Iterable[str] | None = None,
    kv_repeat: bool = False,
    dualpipe: bool = False,
    moe_act_input_bytes: float | None = None,
    offload_modules: Iterable[str] | None = None,
) -> TrainingMemory:
    """Peak memory per device of a training or fine-tuning step (bytes).

    ``whole_experts``: the training stack runs its expert layers at expert-TP 1 (``TrainingStack.expert_tp_one``).
    ``ep_overlap``: Megatron-Core's batch-level MoE all-to-all overlap is on (:func:`ep_overlap_extra_layers`).
    ``dualpipe``: DeepSeek-V3's DualPipe schedule (two stages per rank; see :func:`training_memory_arrays`).
    ``offload_modules``: fine-grained activation offloading (:func:`activation_bytes_per_layer`): the modules' inputs
    of every layer in flight are host memory (``host_offload_bytes``), two layers' worth in transit on the device.

    ``recompute="layer_offload"`` moves the activations of as many layers to host memory as the step needs to
    fit in ``usable_bytes`` (:func:`layer_offload_count`); without ``usable_bytes``, all layers but one.
    ``recompute="partial"`` recomputes fully as few of the busiest stage's layers as let it fit in ``usable_bytes``
    (:func:`partial_recompute_layers`); without ``usable_bytes``, all of them; ``recompute_layers`` of them when given.

    ZeRO: stage 1 shards optimizer states and master weights over the data-parallel group,
    stage 2 also gradients, stage 3 (= FSDP full shard) also weights. Routed experts are split
    over EP x :func:`expert_tensor_parallel` and sharded over the expert-data-parallel group
    (:func:`expert_dp_size`). LoRA/QLoRA freeze the base (bf16 or NF4)
    and keep gradients and optimizer states for the adapters only.
    """
    if zero_stage not in (0, 1, 2, 3):
        raise UserInputError("zero_stage must be 0, 1, 2 or 3", field="zero_stage")
    if (tp * dp * cp) % ep:
        raise UserInputError(f"ep ({ep}) must divide tp·cp·dp ({tp * dp * cp})", field="ep")
    sp = tp > 1 if sp is None else sp
    r = state_recipe(recipe)
    etp = expert_tensor_parallel(tp, dp * cp, ep, whole_experts)
    dev = params_per_device(model, tp=tp, pp=pp, ep=ep, etp=etp, dualpipe=dualpipe)
    layer: dict[str, Any] = dict(tp=tp, sp=sp, cp=cp, recompute=recompute, flash_attention=flash_attention,
                                 dropout=dropout, linear_input_bytes=linear_input_bytes,
                                 recompute_modules=recompute_modules, kv_repeat=kv_repeat, expert_tp=etp,
                                 moe_act_input_bytes=moe_act_input_bytes, offload_modules=offload_modules)
    per_layer = activation_bytes_per_layer(model, seq_len, micro_batch, **layer)
    # fine-grained activation offloading: the modules' inputs wait in host memory, two layers' worth in transit
    module_host = activation_bytes_per_layer(model, seq_len, micro_batch, **layer, where="host")
    rebuilt = 0.0
    if recompute in ("full", "offload", "partial"):
        rebuilt = activation_bytes_per_layer(model, seq_len, micro_batch, tp=tp, sp=sp, cp=cp, recompute="selective",
                                             flash_attention=flash_attention, linear_input_bytes=linear_input_bytes,
                                             kv_repeat=kv_repeat, expert_tp=etp, moe_act_input_bytes=moe_act_input_bytes,
                                           offload_modules=offload_modules)
    # fine-grained activation offloading: the modules' inputs wait in host memory, two layers' worth in transit
    module_host = activation_bytes_per_layer(model, seq_len, micro_batch, tp=tp, sp=sp, cp=cp, recompute=recompute,
                                             flash_attention=flash_attention, dropout=dropout,
                                             linear_input_bytes=linear_input_bytes, recompute_modules=recompute_modules,
                                             kv_repeat=kv_repeat, expert_tp=etp,
                                             moe_act_input_bytes=moe_act_input_bytes, offload_modules=offload_modules,
                                             where="host") if offload_modules else 0.0
    if recompute == "offload":
        rebuilt += offload_buffer_bytes(model, seq_len, micro_batch, tp=tp, sp=sp, cp=cp)
    rebuilt += OFFLOAD_BUFFER_LAYERS * module_host
    host_layer = (offload_layer_input_bytes(model, seq_len, micro_batch, tp=tp, sp=sp, cp=cp)
                  if recompute == "offload" else module_host)
    frozen_bpp = frozen_base_bytes_per_param(model, method) if method != "full" else 0.0
    adapters = lora_params(model, lora_rank, lora_targets) if method != "full" else 0

    def one(v: float) -> np.ndarray:
        return np.asarray([v], dtype=float)

    parts = training_memory_arrays(
        model.n_layers, method=method, dense=one(dev.dense), expert=one(dev.expert),
        recipe={k: one(getattr(r, k)) for k in ("weights", "grads", "master", "optimizer")},
        tp=one(tp), pp=one(pp), dp=one(dp), cp=one(cp), ep=one(ep), vpp=one(vpp), zero=one(zero_stage),
        n_microbatches=one(n_microbatches if n_microbatches is not None else pp), act_per_layer=one(per_layer),
        act_rebuilt_layer=one(rebuilt), act_output=one(activation_bytes_output(model, seq_len, micro_batch, tp=tp, cp=cp)),
        frozen_base_bytes_per_param=frozen_bpp, lora_params_total=adapters, act_host_layer=one(host_layer),
        layer_offload=one(recompute == "layer_offload").astype(bool),
        usable=one(usable_bytes if usable_bytes is not None else 0.0), whole_experts=whole_experts,
        extra_inflight_layers=one(ep_overlap_extra_layers(model.n_layers, pp, vpp)) if ep_overlap and ep > 1 else None,
        dualpipe=dualpipe, partial=one(recompute == "partial").astype(bool),
        act_full_layer=one(activation_bytes_per_layer(model, seq_len, micro_batch, tp=tp, sp=sp, cp=cp,
                                                      recompute="full")) if recompute == "partial" else None,
        partial_layers=recompute_layers,
    )
    return TrainingMemory(
        weights=float(parts["weights"][0]),
        gradients=float(parts["grads"][0]),
        master_weights=float(parts["master"][0]),
        optimizer_states=float(parts["opt"][0]),
        activations=float(parts["acts"][0]),
        workspace=float(parts["workspace"][0]),
        params_on_device=dev.total,
        trainable_params_on_device=dev.total if method == "full" else adapters / (tp * pp),
        host_activations=float(parts["host"][0]),
        offload_layers=int(parts["offload_layers"][0]),
        recompute_layers=int(parts["recompute_layers"][0]),
    )


def frozen_base_bytes_per_param(model: ModelArch, method: Method) -> float:
    """Bytes per frozen base weight: LoRA keeps a bf16 base (2 B); QLoRA stores the linear layers
    in NF4 (0.5 B + the quantisation constants) and the embeddings and head in bf16."""
    if method != "qlora":
        return 2.0
    b = param_breakdown(model)
    linear_frac = 1.0 - (b.embedding + b.output_head) / b.total
    return linear_frac * (0.5 + NF4_OVERHEAD_BYTES_PER_PARAM) + (1 - linear_frac) * 2.0


def training_memory_arrays(
    n_layers: int,
    *,
    method: Method,
    dense: np.ndarray,
    expert: np.ndarray,
    recipe: Mapping[str, np.ndarray],
    tp: np.ndarray,
    pp: np.ndarray,
    dp: np.ndarray,
    cp: np.ndarray,
    ep: np.ndarray,
    vpp: np.ndarray,
    zero: np.ndarray,
    n_microbatches: np.ndarray,
    act_per_layer: np.ndarray,
    act_rebuilt_layer: np.ndarray,
    act_output: np.ndarray,
    frozen_base_bytes_per_param: float,
    lora_params_total: float,
    act_host_layer: np.ndarray | None = None,
    extra_inflight_layers: np.ndarray | None = None,
    layer_offload: np.ndarray | None = None,
    usable: np.ndarray | None = None,
    whole_experts: bool = False,
    dualpipe: bool = False,
    partial: np.ndarray | None = None,
    act_full_layer: np.ndarray | None = None,
    partial_layers: float | None = None,
) -> dict[str, np.ndarray]:
    """Peak bytes per device of many training plans at once: THE training-memory model (the scalar
    :func:`training_memory` and the step model's search both call it).

    Inputs per plan (arrays): parameters on the busiest device (``dense``/``expert``, from
    :func:`params_per_device`), bytes per parameter by role (``recipe``: weights, grads, master,
    optimizer), the layout, the micro-batches per step, one layer's kept activations, the layer
    rebuilt during a fully recomputed backward (0 otherwise; with ``offload`` also the layer inputs in
    transit, :func:`offload_buffer_bytes`) and the output logits.

    ZeRO: stage 1 shards optimizer states and master weights over the data-parallel group dp·cp,
    stage 2 also gradients (without pipelining: with pp > 1 the full-size gradient accumulation
    buffer stays, :func:`gradients_sharded`), stage 3 (FSDP) also weights; expert parameters shard
    over dp·cp/ep.
    LoRA/QLoRA freeze the base and keep gradients and optimizer states for the adapters only.
    The first pipeline stage holds the activations of the micro-batches in flight
    (:func:`pipeline_inflight_microbatches`); the last stage holds the logits, which the output layer's
    backward frees before the first layer is rebuilt for its backward (so the logits and the rebuilt layer
    are not counted at once). Returns a dict of
    arrays: weights, grads, master, opt, acts, workspace, total, and host: the host memory of the layer inputs an
    offloaded plan keeps there (``act_host_layer`` per layer and micro-batch, 0 by default), as many as the first
    stage would keep on the device; not part of ``total``; and offload_layers: per plan, the layers a
    ``layer_offload`` plan (mask ``layer_offload``) moves to the host to fit in ``usable`` bytes
    (:func:`layer_offload_count`; 0 for other plans), whose activations are then in ``host``, not ``acts``.
    ``extra_inflight_layers``: layer-micro-batches of activations the first stage holds beyond the schedule's
    (the MoE all-to-all overlap's layer pair in flight and, pipelined, its extra warm-up chunk:
    :func:`ep_overlap_extra_layers`).
    ``dualpipe``: the stack runs DeepSeek-V3's DualPipe (pp > 1): ``dense``/``expert`` are then two stages' worth
    (:func:`params_per_device` with ``dualpipe``), each stage's two copies share one data-parallel group of 2·dp·cp
    ranks (so sharded states cost what they cost under 1F1B), and a rank holds pp + 1 micro-batches of one stage's
    activations, the edge rank also the logits of the direction it ends (:func:`dualpipe_layer_microbatches`); the
    busier rank counts.
    ``partial`` (mask) with ``act_full_layer`` (what a fully recomputed layer keeps, its input): such a plan keeps
    ``act_per_layer`` (no recomputation) in every layer but the fewest per pipeline stage that, fully recomputed,
    let it fit in ``usable`` bytes (:func:`partial_recompute_layers`; all of them when ``usable`` is 0, not known);
    returned as recompute_layers (0 for other plans), the layers of the busiest stage recomputed. ``partial_layers``:
    the run's own count per stage instead (capped at the stage's layers), fitting or not.
    """
    dpcp = dp * cp
    edp = expert_dp_size(tp, dpcp, ep, whole_experts)
    total_dev = dense + expert
    two = dualpipe & (pp > 1)
    copies = np.where(two, 2.0, 1.0)

    def shard(per_param: np.ndarray, sharded: np.ndarray) -> np.ndarray:
        return np.where(sharded, (dense * per_param / dpcp + expert * per_param / edp) / copies, total_dev * per_param)

    if method == "full":
        weights = shard(recipe["weights"], zero >= 3)
        grads = shard(recipe["grads"], gradients_sharded(zero, pp))
        master = shard(recipe["master"], zero >= 1)
        opt = shard(recipe["optimizer"], zero >= 1)
    else:
        weights = total_dev * frozen_base_bytes_per_param / np.where(zero >= 3, dpcp, 1.0)
        adapters = lora_params_total / (tp * pp)
        weights = weights + adapters * recipe["weights"]
        grads = adapters * recipe["grads"] / np.where(gradients_sharded(zero, pp), dpcp, 1.0)
        master = adapters * recipe["master"] / np.where(zero >= 1, dpcp, 1.0)
        opt = adapters * recipe["optimizer"] / np.where(zero >= 1, dpcp, 1.0)
    layers_stage = np.ceil(n_layers / pp)
    multi = pp > 1
    interleave = interleave_activation_factor(pp, n_microbatches, vpp)
    inflight_layers = np.where(multi, pipeline_peak_layer_microbatches(n_layers, pp, n_microbatches),
                               layers_stage) * interleave
    if dualpipe:
        dual_inner, dual_edge = dualpipe_layer_microbatches(n_layers, pp, n_microbatches)
        inflight_layers = np.where(two, dual_inner, inflight_layers)
    if extra_inflight_layers is not None:  # e.g. what the MoE all-to-all overlap holds beyond the schedule
        inflight_layers = inflight_layers + extra_inflight_layers
    host = (act_host_layer if act_host_layer is not None else np.zeros_like(dense)) * inflight_layers

    def peaks(per_layer: np.ndarray, rebuilt: np.ndarray) -> list[np.ndarray]:
        """The candidate activation peaks of the busiest rank, each linear in ``per_layer``: the first stage with the
        micro-batches in flight, the last stage with the logits, DualPipe's edge rank; the largest counts."""
        first = per_layer * inflight_layers
        # the logits (and the loss's fp32 copy) are freed by the output layer's backward, before any layer's
        # backward rebuilds its activations: on the last stage the two peaks do not add up
        last_extra = np.maximum(act_output, rebuilt)
        out = [np.where(multi, first + rebuilt, first + last_extra),
               np.where(multi, per_layer * layers_stage + last_extra, 0.0)]
        if dualpipe:  # the edge rank runs the first stage of one direction and the last (the logits) of the other
            out = [out[0], np.where(two, per_layer * dual_edge + last_extra, out[1])]
        return out

    acts = _largest(peaks(act_per_layer, act_rebuilt_layer))
    if method == "full":
        # FSDP gathers one layer's (unit's) full weights at a time, plus prefetch of the next
        layer_w = total_dev / np.maximum(1.0, layers_stage) * recipe["weights"]
        workspace = RUNTIME_OVERHEAD_BYTES + np.where(zero >= 3, 2.0 * layer_w, 0.0)
    else:
        workspace = np.full_like(weights, RUNTIME_OVERHEAD_BYTES)
    total = weights + grads + master + opt + acts + workspace
    n_rec = np.zeros_like(total)
    if partial is not None and partial.any():
        if act_full_layer is None:
            raise ValueError("partial recomputation needs act_full_layer")
        states = total - acts
        # nothing recomputed, no layer rebuilt in the backward (``act_rebuilt_layer`` is the rebuilt layer otherwise)
        acts = np.where(partial, _largest(peaks(act_per_layer, np.zeros_like(acts))), acts)
        kept, recomputed = peaks(act_per_layer, act_rebuilt_layer), peaks(act_full_layer, act_rebuilt_layer)
        room = (usable if usable is not None else np.zeros_like(total)) - states
        count = (partial_recompute_layers(acts, kept, recomputed, room, layers_stage) if partial_layers is None
                 else np.minimum(float(partial_layers), layers_stage))
        n_rec = np.where(partial, count, 0.0)
        share = n_rec / np.maximum(layers_stage, 1.0)
        mixed = _largest([k + share * (r - k) for k, r in zip(kept, recomputed, strict=True)])
        acts = np.where(partial & (n_rec > 0), mixed, acts)
        total = states + acts
        # a fully recomputed layer keeps only its input: no module input of it waits on the host
        host = np.where(partial, host * (1.0 - share), host)
    n_off = np.zeros_like(total)
    if layer_offload is not None and layer_offload.any():
        n_off = np.where(layer_offload, layer_offload_count(total, act_per_layer, usable if usable is not None
                                                            else np.zeros_like(total), n_layers), 0.0)
        moved = n_off * act_per_layer - np.where(n_off > 0, OFFLOAD_BUFFER_LAYERS * act_per_layer, 0.0)
        acts, total, host = acts - moved, total - moved, host + n_off * act_per_layer
    return {"weights": weights, "grads": grads, "master": master, "opt": opt, "acts": acts,
            "workspace": workspace, "total": total, "host": host, "offload_layers": n_off, "recompute_layers": n_rec}


def _largest(arrays: list[np.ndarray]) -> np.ndarray:
    """Elementwise maximum of equally shaped arrays."""
    return np.asarray(np.maximum.reduce(arrays), dtype=float)


def partial_recompute_layers(kept_acts: np.ndarray, kept: list[np.ndarray], recomputed: list[np.ndarray],
                             room: np.ndarray, layers_stage: np.ndarray) -> np.ndarray:
    """Layers of the busiest pipeline stage a ``partial`` plan recomputes fully: the fewest k that bring its
    activation peak within ``room`` (usable bytes minus everything else), each candidate peak falling linearly
    from its value with every layer kept (``kept``; ``kept_acts`` their maximum, without a rebuilt layer) to its
    value with every layer recomputed (``recomputed``): k_i = ceil(Ls · (kept_i − room) / (kept_i − recomputed_i)),
    the largest over the peaks. 0 when everything fits as it is (no layer rebuilt then); all ``layers_stage`` when
    ``room`` is not positive (the device not known, or nothing fits: the plan is then full recomputation, infeasible
    if that does not fit either). Megatron-Core recomputes the first k layers of each pipeline chunk
    (``--recompute-method block``); the stages' layers are alike, so which k does not change the bytes."""
    ls = np.maximum(np.asarray(layers_stage, dtype=float), 1.0)
    need = np.zeros_like(ls)
    for k_i, r_i in zip(kept, recomputed, strict=True):
        saved = np.maximum(k_i - r_i, 1e-9)
        need = np.maximum(need, np.ceil(ls * (k_i - room) / saved - 1e-9))
    need = np.where(kept_acts <= room, 0.0, np.maximum(need, 1.0))
    return np.where(room <= 0, ls, np.clip(need, 0.0, ls))


def layer_offload_count(total_bytes: np.ndarray, layer_bytes: np.ndarray, usable_bytes: np.ndarray,
                        n_layers: int) -> np.ndarray:
    """Layers whose activations a ``layer_offload`` plan (one micro-batch in flight: no pipeline) moves to host
    memory: the fewest that bring ``total_bytes`` (everything kept on the device) within ``usable_bytes``,
    counting the :data:`OFFLOAD_BUFFER_LAYERS` layers in transit once anything moves; at most all layers but
    one (Megatron-Core: cpu_offloading_num_layers < num_layers); 0 when the plan fits as it is; all but one
    when ``usable_bytes`` is 0 (not known). A plan that still does not fit stays infeasible."""
    layer = np.maximum(np.asarray(layer_bytes, dtype=float), 1.0)
    excess = total_bytes + OFFLOAD_BUFFER_LAYERS * layer - usable_bytes
    need = np.where(total_bytes <= usable_bytes, 0.0, np.ceil(excess / layer))
    need = np.where(usable_bytes <= 0, n_layers - 1.0, need)
    return np.clip(need, 0.0, max(n_layers - 1.0, 0.0))


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


def kv_cache_bytes_per_token(model: ModelArch, kv_dtype: str = "bf16", *, context: float | None = None) -> float:
    """KV-cache bytes per token, all layers: 2·L·n_kv·d_head·bytes (MHA/GQA/MQA) or
    L·(kv_lora_rank + rope_dim)·bytes (MLA, DeepSeek-V2/V3). Encoders cache nothing.

    Local-attention layers (sliding window or chunk of w tokens) keep at most w tokens: with
    ``context`` (tokens per sequence) the figure is the average over that sequence,
    (L_global·c + L_local·min(c, w)) / c layers' worth per token. Without ``context`` every layer
    counts in full: the upper bound, exact for models without local layers."""
    if model.type == "encoder":
        return 0.0
    b = bytes_per_element(kv_dtype)
    if model.mla is not None:
        per_layer = (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * b
    else:
        per_layer = 2.0 * model.kv_heads * model.hdim * b
    return per_layer * kv_cache_layers_per_token(model, context)


def kv_full_equivalent_tokens(model: ModelArch, tokens: float) -> float:
    """Tokens of all-global KV that one sequence of ``tokens`` tokens occupies: ``tokens`` for a model
    without local layers; less when local layers keep only their window (a paged cache sized in
    full-model tokens holds this many per sequence)."""
    return tokens * kv_cache_layers_per_token(model, tokens) / model.n_layers


def kv_cache_layers_per_token(model: ModelArch, context: float | None = None) -> float:
    """Layers' worth of KV each token of a ``context``-token sequence keeps, on average: n_layers for
    global attention; a local layer keeps only min(context, sliding_window) of the context's tokens."""
    if context is None or model.n_local_layers == 0 or context <= 0:
        return float(model.n_layers)
    assert model.sliding_window is not None
    return model.n_global_layers + model.n_local_layers * min(context, model.sliding_window) / context


def inference_activation_bytes(model: ModelArch, tokens_in_flight: int, act_bytes: float = 2.0) -> float:
    """Transient activation workspace for a forward over ``tokens_in_flight`` tokens: residual,
    q/k/v/o and MLP intermediates of one layer at a time, plus fp32 logits of one row per sequence
    is ignored (small). Upper-bound style estimate."""
    width = model.d_model * 4 + model.n_heads * model.qk_head_dim * 2
    mlp = model.ffn_dim if model.moe is None else max(model.ffn_dim, model.moe.top_k * model.moe.expert_ffn_dim)
    width += mlp * (3 if model.mlp == "gated" else 2)
    return tokens_in_flight * width * act_bytes


def inference_weight_bytes_per_device(model: ModelArch, weight_dtype: str = "bf16", *, tp: int = 1, pp: int = 1,
                                      ep: int = 1) -> float:
    """Weight bytes on the busiest device of a serving replica: the serving checkpoint's bytes
    (:func:`inference_weight_bytes`: quantised body, 16-bit embeddings/head for 8/4-bit schemes)
    times that device's share of the parameters (:func:`params_per_device`; with ep = 1 an MoE's
    routed experts split over TP, with ep > 1 over ep·tp)."""
    total_bytes = inference_weight_bytes(model, weight_dtype)
    dev = params_per_device(model, tp=tp, pp=pp, ep=ep, etp=tp if ep > 1 else 1)
    if ep == 1 and model.moe is not None:
        share = (dev.dense + dev.expert / tp) / param_breakdown(model).total  # experts split over TP
    else:
        share = dev.total / param_breakdown(model).total
    return total_bytes * share


def kv_bytes_per_token_per_device(model: ModelArch, kv_dtype: str = "bf16", *, tp: int = 1, pp: int = 1,
                                  context: float | None = None) -> float:
    """KV-cache bytes per token on one device: KV heads split over TP (replicated when TP exceeds
    them: each device keeps at least one), layers over PP; MLA's latent is replicated over TP.
    ``context``: average over a sequence of that many tokens (local layers keep at most their
    window; :func:`kv_cache_bytes_per_token`)."""
    split = pp if model.mla is not None else pp * min(tp, model.kv_heads)
    return kv_cache_bytes_per_token(model, kv_dtype, context=context) / split


def inference_activation_bytes_per_device(model: ModelArch, tokens_per_forward: int, *, tp: int = 1,
                                          ep: int = 1) -> float:
    """Activation workspace of one forward of ``tokens_per_forward`` tokens on one device: the
    tokens split over the ep attention groups, the widths over TP."""
    return inference_activation_bytes(model, max(1, -(-tokens_per_forward // ep))) / tp


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
    ep: int = 1,
    prefill_chunk: int = 8192,
    workspace_bytes: float = RUNTIME_OVERHEAD_BYTES,
) -> InferenceMemory:
    """Memory per device to serve ``batch`` sequences of ``context`` tokens on tp·pp·ep devices: the
    serving planner's model (``serve.kv.memory_plan`` uses the same three functions):
    :func:`inference_weight_bytes_per_device`, :func:`kv_bytes_per_token_per_device` and
    :func:`inference_activation_bytes_per_device` for a forward of ``prefill_chunk`` tokens, plus
    ``workspace_bytes``. The KV cache here is the exact ``batch·context`` tokens (local-attention
    layers keeping at most their window); the serving
    planner also rounds each sequence up to whole paged blocks (``serve.fit.replica_fit``).
    """
    if batch <= 0 or context <= 0:
        raise UserInputError("batch and context must be positive", field="batch" if batch <= 0 else "context")
    for name, v in (("tp", tp), ("pp", pp), ("ep", ep)):
        if v <= 0:
            raise UserInputError(f"{name} must be positive", field=name)
    w = inference_weight_bytes_per_device(model, weight_dtype, tp=tp, pp=pp, ep=ep)
    kv_tok = kv_bytes_per_token_per_device(model, kv_dtype, tp=tp, pp=pp, context=context)
    kv = kv_tok * batch * context / ep
    acts = inference_activation_bytes_per_device(model, prefill_chunk, tp=tp, ep=ep)
    return InferenceMemory(weights=w, kv_cache=kv, activations=acts, workspace=workspace_bytes, kv_bytes_per_token=kv_tok)
