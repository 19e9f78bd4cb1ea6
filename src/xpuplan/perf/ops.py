"""The operations of one forward pass, as roofline costs (per device under tensor parallelism).

``layer_ops`` lists what one Transformer layer executes for ``batch`` sequences that each add
``q_len`` new tokens attending ``kv_len`` keys: prefill is q_len = kv_len = prompt length,
decode is q_len = 1 and kv_len = context. Column-parallel matmuls (QKV, gate/up) split their
output over TP, row-parallel ones (output projection, down) their input; heads split over TP,
KV heads too while there are at least as many as TP ranks.

An MoE layer adds the router, the routed experts of the rank (:func:`routed_expert_ops`) and the combine
(:data:`MOE_COMBINE_OP`): the engines gather each expert's rows inside the grouped GEMM, but sum the top-k
expert outputs of a token in a pass of their own. The training planner replaces the combine with its stack's
explicit permutation (``train.compute``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Final

import numpy as np

from xpuplan.models.arch import ModelArch
from xpuplan.perf.flops import mean_local_context
from xpuplan.perf.params import (
    kv_replication,
    params_attention_per_layer,
    params_attention_replicated_per_layer,
    params_kv_per_layer,
)
from xpuplan.perf.roofline import LOW_PRECISION, OpCost, cost_attention, cost_elementwise, cost_linear

#: Name of the MoE combine op of :func:`layer_ops`: the top-k expert outputs of each token (written by the down
#: projection) read back and summed into one row, a separate kernel in every serving engine (vLLM's and SGLang's
#: ``moe_sum`` after the Triton ``fused_moe`` GEMMs, TensorRT-LLM's ``finalizeMoeRouting``, Ascend's
#: ``npu_moe_finalize_routing``): reads top-k rows and writes one per token. Its routing weights are applied in
#: the down projection's epilogue or in the same pass.
MOE_COMBINE_OP: Final = "moe combine"

#: FLOP per element of RMSNorm/LayerNorm (square, sum, scale, multiply): a convention; norms are
#: memory-bound, so this does not change times.
NORM_FLOPS_PER_ELEMENT = 5.0


#: Fixed cost of one GEMM output tile (pipeline fill, epilogue: write-back and scaling) as an
#: equivalent length of the K (reduction) loop: a GEMM whose K is short spends a larger share of its
#: time outside the tensor-core main loop, so its rate is ~K / (K + K0) of the long-K rate. Measured with
#: cuBLAS (the library Transformer Engine, torchao and PyTorch call) on two lent GPUs, M = N = 4096, K = 256 ...
#: 16384, each GEMM graph-replayed (benchmarks/expert_gemm_probe.py; benchmarks/data/device_runs/
#: {h200,h100}_expert_gemm_2026-11-27.json), fitting time = a·(K + K0) over K = 768 ... 7168 (the widths of
#: fine-grained experts up to the hidden sizes): BF16 K0 = 649 on an H200 (494 / 608 / 756 / 786 TFLOP/s at
#: K = 768 / 2048 / 4096 / 7168) and 474 on an H100 (523 / 701 / 787 / 805); the mean of the two. (DeepGEMM's
#: public H800 FP8 table, deepseek-ai/DeepGEMM README 2025-02, M = 4096, fits 640: hand-tuned kernels.)
GEMM_K_TILE_OVERHEAD: Final = 560.0
#: The same for 8-bit (and block-scaled 4-bit) GEMMs: the main loop runs twice as fast per K step and the
#: tile's fixed part does not, so K0 is longer. Same sweeps in FP8 e4m3 with per-tensor scales
#: (torch._scaled_mm): K0 = 1235 on the H200 (623 / 1082 / 1313 / 1380 TFLOP/s at K = 768 / 2048 / 4096 / 7168)
#: and 1105 on the H100 (648 / 1103 / 1334 / 1416); the mean.
GEMM_K_TILE_OVERHEAD_LOW_PRECISION: Final = 1170.0


def gemm_k_tile_overhead(dtype: str) -> float:
    """K0 of :data:`GEMM_K_TILE_OVERHEAD` for a GEMM in ``dtype`` (8-bit and 4-bit: the low-precision one)."""
    return GEMM_K_TILE_OVERHEAD_LOW_PRECISION if dtype in LOW_PRECISION else GEMM_K_TILE_OVERHEAD


#: Shortest K the law K / (K + K0) was fitted over; below it the same sweeps give the rate directly.
SHORT_K_LAW_MIN: Final = 768.0
#: Below :data:`SHORT_K_LAW_MIN` the law overstates the loss (at K = 256 it gives 0.54 / 0.45 of the rate at
#: K = 768 in 16 / 8 bits where the sweeps measure 0.68 / 0.51): the measured rates at K = 256 and 512
#: relative to K = 768, means of the H200 and H100 sweeps above (16-bit: 318 / 437 / 494 and 371 / 457 / 523
#: TFLOP/s; 8-bit: 300 / 510 / 623 and 354 / 550 / 648 at K = 256 / 512 / 768). These are the K of fine-grained
#: experts split over tensor parallelism (Qwen3-235B-A22B's 1,536 over TP 8 = 192, DeepSeek-V3's 2,048 = 256).
SHORT_K_MEASURED: Final = {"16bit": ((256.0, 0.678), (512.0, 0.878)), "8bit": ((256.0, 0.514), (512.0, 0.833))}
#: Below K = 256 the rate keeps falling like K / (K + K0') with the K0' that joins the measured K = 256 and 512
#: rates (16-bit 215, 8-bit 832): an extrapolation, the sweeps stop at 256.
SHORT_K_TAIL_K0: Final = {"16bit": 215.0, "8bit": 832.0}


def gemm_short_k_rate(k: float, dtype: str = "bf16") -> float:
    """A GEMM's rate at reduction length ``k`` as a fraction of its long-K rate: K / (K + K0) from
    :data:`SHORT_K_LAW_MIN` up (K0 = :func:`gemm_k_tile_overhead`), the measured sweep points below it
    (:data:`SHORT_K_MEASURED`, interpolated in log K), and below K = 256 the tail of
    :data:`SHORT_K_TAIL_K0`."""
    k0 = gemm_k_tile_overhead(dtype)
    k = max(1.0, float(k))
    if k >= SHORT_K_LAW_MIN:
        return k / (k + k0)
    at_min = SHORT_K_LAW_MIN / (SHORT_K_LAW_MIN + k0)
    key = "8bit" if dtype in LOW_PRECISION else "16bit"
    (k1, r1), (k2, r2) = SHORT_K_MEASURED[key]
    if k < k1:
        tail = SHORT_K_TAIL_K0[key]
        return at_min * r1 * (k / (k + tail)) / (k1 / (k1 + tail))
    lo, hi = ((k1, r1), (k2, r2)) if k < k2 else ((k2, r2), (SHORT_K_LAW_MIN, 1.0))
    w = math.log(k / lo[0]) / math.log(hi[0] / lo[0])
    return at_min * (lo[1] + w * (hi[1] - lo[1]))


def short_k_factor(k: float, d_model: int, dtype: str = "bf16") -> float:
    """Time factor (>= 1) of a GEMM whose reduction dimension ``k`` is shorter than the hidden size,
    relative to a GEMM of K = hidden, whose rate the family's GEMM efficiency already describes (QKV,
    the up/gate projections): :func:`gemm_short_k_rate` at the hidden size over the rate at ``k``; for
    k >= 768 that is (1 + K0/k) / (1 + K0/d_model) with K0 = :func:`gemm_k_tile_overhead`. 1 when
    k >= d_model."""
    return max(1.0, gemm_short_k_rate(d_model, dtype) / gemm_short_k_rate(k, dtype))


def expert_gemm_k_factor(model: ModelArch, tp: int = 1, dtype: str = "bf16") -> float:
    """:func:`short_k_factor` of an MoE layer's expert down projection, whose K is the expert width
    moe_ffn/tp (768 in Qwen3-30B-A3B, 2048 in DeepSeek-V3, 192 per rank for Qwen3-235B-A22B's experts
    split over TP 8): far below the hidden size for fine-grained experts. 1 for coarse experts
    (moe_ffn/tp >= hidden) and dense models. :func:`layer_ops` puts it on its ``experts down`` op
    (``OpCost.k_factor``), so the training and the serving planners time it alike."""
    if model.moe is None:
        return 1.0
    return short_k_factor(max(1, model.moe.expert_ffn_dim // tp), model.d_model, dtype)


def round_at_least_1(x: Any) -> Any:
    """``max(1, round(x))`` for a number or an array (both round halves to even)."""
    if isinstance(x, np.ndarray):
        return np.maximum(1.0, np.round(x))
    return max(1, round(x))


def routed_rows(n_local_experts: int, top_k: int, routed_tokens: Any,
                n_experts: int | None = None) -> tuple[Any, Any]:
    """(experts touched, token rows per touched expert) for ``routed_tokens`` token *copies* (tokens x top-k,
    those reaching the rank after the dispatch) over the rank's ``n_local_experts`` experts, of ``n_experts`` in
    all (None: the local ones are all of them, no EP). Numbers or arrays.

    The copies come from T = copies·E/(E_local·k) tokens of the EP group, each sending its k copies to k
    distinct experts chosen uniformly (a balanced router), so a local expert is missed by every one of them with
    probability (1 - k/E)^T: :func:`expected_experts_touched` over the group's tokens, scaled to the rank's share
    of the experts. One decoding sequence of Qwen3-30B-A3B touches its 8 experts, not the 52 that 8 tokens of
    8 picks each would (before 0.4.22 the copies were counted as tokens)."""
    e = n_local_experts if n_experts is None else max(int(n_experts), n_local_experts)
    k = min(top_k, e)
    copies = round_at_least_1(routed_tokens)
    group_tokens = copies * e / (n_local_experts * k)
    touched = n_local_experts / e * expected_experts_touched(e, k, group_tokens)
    return touched, round_at_least_1(routed_tokens / np.maximum(touched, 1e-9))


def expected_experts_touched(n_experts: int, top_k: int, tokens: Any) -> Any:
    """Expected distinct experts hit when ``tokens`` tokens each pick ``top_k`` distinct ones of ``n_experts``
    uniformly: E·(1 - (1 - k/E)^tokens). Decode at small batch reads only these experts."""
    return n_experts * (1.0 - (1.0 - top_k / n_experts) ** tokens)


def expected_groups_hit(n_experts: int, top_k: int, groups: Any) -> Any:
    """Expected number of ``groups`` (the nodes an EP group spans, or its ranks) that one token's ``top_k``
    distinct experts fall on, with the experts spread evenly (n_experts/groups per group) and chosen uniformly,
    as a balanced router does: groups·(1 - P(a group gets none)), P = C(E - E/G, k) / C(E, k) (hypergeometric).
    At most min(top_k, groups): 8 of 128 experts over 4 groups hit 3.62 of them, not 4; over 2, 1.99. A
    de-duplicating dispatch sends a token once to each group it hits (DeepEP per node across the network, and
    per rank inside it). Numbers or arrays."""
    n = np.maximum(np.asarray(groups, dtype=float), 1.0)
    e = float(n_experts)
    per_group = e / n
    miss = np.ones_like(n)
    for i in range(int(top_k)):
        miss = miss * np.clip((e - per_group - i) / max(e - i, 1.0), 0.0, 1.0)
    out = np.minimum(n * (1.0 - miss), np.minimum(float(top_k), n))
    return float(out) if np.ndim(out) == 0 else out


def expected_max_normal(n: int) -> float:
    """Expected largest of ``n`` independent standard normal draws, Blom's approximation Φ⁻¹((n - 0.375)/(n + 0.25))
    (Blom 1958, *Statistical Estimates and Transformed Beta-Variables*: 0.59 for 2 against the exact 0.56, 1.43
    for 8 against 1.42, within 1% from 8 on); 0 for n <= 1."""
    from statistics import NormalDist

    return 0.0 if n <= 1 else NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def busiest_rank_copies(copies: Any, ranks: int, n_experts: int, top_k: int) -> Any:
    """Token copies the busiest of ``ranks`` expert-parallel ranks receives when ``copies`` (tokens x top-k) are
    routed by a balanced router, each token to ``top_k`` distinct experts of ``n_experts`` spread evenly over the
    ranks. Every rank's count has mean copies/R and, per token, the variance of drawing k of E experts of which
    E/R are the rank's (hypergeometric: k·(1/R)(1 - 1/R)·(E - k)/(E - 1)); the step waits for the largest of the
    R counts, taken as mean + σ·:func:`expected_max_normal` (R) and capped at all the copies. The excess is
    statistical only (a trained router's preference for some experts adds to it; EPLB-style replication of
    the busiest experts removes part of it): 64 tokens of top-8 of 128 experts over 8 ranks give 64 copies a rank
    on average and 74 on the busiest (+16%), one token 2.3 against 1, 1,024 tokens +4%. 1 rank: the copies."""
    if ranks <= 1:
        return copies
    r = float(ranks)
    e, k = float(n_experts), float(min(top_k, n_experts))
    tokens = np.asarray(copies, dtype=float) / k
    var = tokens * k * (1.0 / r) * (1.0 - 1.0 / r) * ((e - k) / max(e - 1.0, 1.0))
    out = np.minimum(np.asarray(copies, dtype=float), np.asarray(copies, dtype=float) / r
                     + np.sqrt(np.maximum(var, 0.0)) * expected_max_normal(ranks))
    return float(out) if np.ndim(out) == 0 else out


def routed_expert_ops(n_local_experts: int, top_k: int, routed_tokens: Any, d_model: int, expert_width: int, *,
                      gated: bool = True, dtype: str = "bf16", weight_dtype: str | None = None,
                      groups: tuple[Any, Any] | None = None, n_experts: int | None = None) -> list[OpCost]:
    """The routed experts of one MoE layer on one rank, as the planners time them: ``routed_tokens`` token
    copies (tokens x top-k reaching the rank) over ``n_local_experts`` experts of width ``expert_width``
    (the expert FFN over TP), each touched expert one GEMM of its own rows (:func:`routed_rows`): the
    up/gate projection, the activation, and the down projection, whose reduction dimension is the expert
    width: its cost is the :func:`short_k_factor` (measured at M = N = 4096, so it holds K's whole effect) and
    the size law sees only its M and N. Numbers or arrays. ``groups``: (experts touched, rows each) when they
    are known (a measured kernel's shapes) instead of the expected spread of :func:`routed_rows`; ``n_experts``:
    the model's routed experts when the rank holds only ``n_local_experts`` of them (EP)."""
    n_in = 2 if gated else 1
    touched, rows = groups if groups is not None else routed_rows(n_local_experts, top_k, routed_tokens, n_experts)
    f, d = expert_width, d_model
    up = cost_linear(rows, d, n_in * f, dtype, weight_dtype)
    down = cost_linear(rows, f, d, dtype, weight_dtype)
    down_mn: Any = np.minimum(rows, d) if isinstance(rows, np.ndarray) else float(min(rows, d))
    return [OpCost("experts up/gate", "gemm", up.flops * touched, up.bytes * touched, up.min_dim),
            cost_elementwise(routed_tokens * f, reads=n_in, writes=1, dtype="bf16", name="experts activation"),
            OpCost("experts down", "gemm", down.flops * touched, down.bytes * touched, down_mn,
                   k_factor=short_k_factor(f, d, dtype))]


def layer_ops(
    model: ModelArch,
    *,
    batch: int,
    q_len: int,
    kv_len: int,
    tp: int = 1,
    ep: int = 1,
    dtype: str = "bf16",
    weight_dtype: str | None = None,
    kv_dtype: str | None = None,
    moe_layer: bool | None = None,
    local: bool | None = None,
    busiest_rank: bool = False,
) -> list[OpCost]:
    """Roofline costs of one layer on one device (see module docstring). ``batch``, ``q_len`` and
    ``kv_len`` may be arrays (many shapes at once); the costs' fields are then arrays.

    ``local``: True for a local-attention layer (``model.local_layer_flags``: its queries see at most
    ``model.sliding_window`` keys), False for a global one; None (the default) gives the average layer
    of the model, whose attention FLOPs and bytes are the mean over its global and local layers, so
    that ``n_layers`` x one layer counts sliding-window / chunked layers right.

    ``busiest_rank``: with EP (``ep`` > 1) the routed experts are timed for the rank that receives the most
    token copies (:func:`busiest_rank_copies`), which a step waits for; False (the default) times the mean
    rank (the training planner puts its own load-imbalance factor on the expert GEMMs)."""
    if any((np.any(v <= 0) if isinstance(v, np.ndarray) else v <= 0) for v in (batch, q_len, kv_len, tp, ep)):
        raise ValueError("batch, q_len, kv_len, tp and ep must be positive")
    wd = weight_dtype or dtype
    tokens = batch * q_len
    d = model.d_model
    heads = max(1, model.n_heads // tp)
    kvh = max(1, model.kv_heads // tp)
    ops: list[OpCost] = []
    act = "bf16"
    ops.append(cost_elementwise(tokens * d, flops_per_element=NORM_FLOPS_PER_ELEMENT, dtype=act, name="norm (attention)"))
    o_params = model.n_heads * model.v_head_dim * d
    replicated = params_attention_replicated_per_layer(model)  # MLA's down-projections: whole on every rank
    qkv_out = (params_attention_per_layer(model) - o_params - replicated) // d
    qkv_out += round((kv_replication(model, tp) - 1.0) * params_kv_per_layer(model) / d)  # KV heads copied
    ops.append(_named(cost_linear(tokens, d, max(1, qkv_out // tp + replicated // d), dtype, wd), "qkv projection"))
    ops.append(_layer_attention(model, batch, q_len, kv_len, heads, kvh, kv_dtype or act, local))
    ops.append(_named(cost_linear(tokens, max(1, model.n_heads * model.v_head_dim // tp), d, dtype, wd), "output projection"))
    ops.append(cost_elementwise(tokens * d, reads=2, writes=1, dtype=act, name="residual add"))
    if not model.parallel_attn_mlp:
        ops.append(cost_elementwise(tokens * d, flops_per_element=NORM_FLOPS_PER_ELEMENT, dtype=act, name="norm (mlp)"))
    is_moe = model.moe is not None and (moe_layer if moe_layer is not None else True)
    n_in = 2 if model.mlp == "gated" else 1
    if is_moe:
        assert model.moe is not None
        moe = model.moe
        ops.append(_named(cost_linear(tokens, d, moe.n_routed_experts, "bf16"), "router"))
        local_experts = max(1, moe.n_routed_experts // ep)
        routed_tokens = tokens * moe.top_k / ep  # tokens each EP rank processes after all-to-all
        if busiest_rank and ep > 1:
            routed_tokens = busiest_rank_copies(tokens * moe.top_k, ep, moe.n_routed_experts, moe.top_k)
        ops += routed_expert_ops(local_experts, moe.top_k, routed_tokens, d, max(1, moe.expert_ffn_dim // tp),
                                 gated=n_in == 2, dtype=dtype, weight_dtype=wd, n_experts=moe.n_routed_experts)
        # each rank sums the top-k copies of its own tokens (tokens / ep of them) after they come back
        ops.append(cost_elementwise(tokens / ep * d, reads=moe.top_k, writes=1, dtype=act, name=MOE_COMBINE_OP))
        if moe.n_shared_experts:
            fs = max(1, moe.n_shared_experts * moe.shared_ffn // tp)
            ops.append(_named(cost_linear(tokens, d, n_in * fs, dtype, wd), "shared experts up/gate"))
            ops.append(_named(cost_linear(tokens, fs, d, dtype, wd), "shared experts down"))
    else:
        f = max(1, model.ffn_dim // tp)
        ops.append(_named(cost_linear(tokens, d, n_in * f, dtype, wd), "mlp up/gate" if n_in == 2 else "mlp up"))
        ops.append(cost_elementwise(tokens * f, reads=n_in, writes=1, dtype=act, name="mlp activation"))
        ops.append(_named(cost_linear(tokens, f, d, dtype, wd), "mlp down"))
    ops.append(cost_elementwise(tokens * d, reads=2, writes=1, dtype=act, name="residual add"))
    return ops


def head_ops(model: ModelArch, *, rows: int, tp: int = 1, dtype: str = "bf16", weight_dtype: str | None = None) -> list[OpCost]:
    """Final norm and output projection for ``rows`` positions (vocabulary split over TP)."""
    if model.type == "encoder":
        return []
    return [
        cost_elementwise(rows * model.d_model, flops_per_element=NORM_FLOPS_PER_ELEMENT, name="final norm"),
        _named(cost_linear(rows, model.d_model, max(1, model.vocab_size // tp), dtype, weight_dtype or "bf16"), "output head"),
    ]


def _attention(model: ModelArch, batch: Any, q_len: Any, kv_len: Any, heads: int, kvh: int, dtype: str) -> OpCost:
    """The attention core: absorbed MLA decode when one query token (scores and values over the
    latent kv_lora + rope), else fused attention, causal over a square block (decoders)."""
    arrays = isinstance(q_len, np.ndarray) or isinstance(kv_len, np.ndarray)
    causal = (np.asarray(q_len) == kv_len) & (model.type != "encoder") if arrays else (
        q_len == kv_len and model.type != "encoder")
    full = cost_attention(batch, heads, q_len, kv_len, model.qk_head_dim, causal=causal, dtype=dtype, kv_heads=kvh,
                          v_head_dim=model.v_head_dim)
    if model.mla is None or not (np.any(q_len == 1) if isinstance(q_len, np.ndarray) else q_len == 1):
        return full
    m = model.mla
    absorbed = cost_attention(batch, heads, 1, kv_len, m.kv_lora_rank + m.qk_rope_head_dim, causal=False,
                              dtype=dtype, kv_heads=1, v_head_dim=m.kv_lora_rank)
    if not isinstance(q_len, np.ndarray):
        return absorbed
    one = np.asarray(q_len) == 1
    return OpCost("attention", "attention", np.where(one, absorbed.flops, full.flops),  # type: ignore[arg-type]
                  np.where(one, absorbed.bytes, full.bytes), np.where(one, absorbed.min_dim, full.min_dim),  # type: ignore[arg-type]
                  min(absorbed.head_dim, full.head_dim))


def _layer_attention(model: ModelArch, batch: Any, q_len: Any, kv_len: Any, heads: int, kvh: int, dtype: str,
                     local: bool | None) -> OpCost:
    """The attention op of a global, a local, or (``local`` None) the model's average layer."""
    if model.sliding_window is None or local is False or (local is None and model.n_local_layers == 0):
        return _attention(model, batch, q_len, kv_len, heads, kvh, dtype)
    loc = _local_attention(model, batch, q_len, kv_len, heads, kvh, dtype)
    if local or model.n_global_layers == 0:
        return loc
    glob = _attention(model, batch, q_len, kv_len, heads, kvh, dtype)
    f = model.n_local_layers / model.n_layers
    return OpCost("attention", "attention", (1 - f) * glob.flops + f * loc.flops, (1 - f) * glob.bytes + f * loc.bytes,
                  glob.min_dim, glob.head_dim)


def _local_attention(model: ModelArch, batch: Any, q_len: Any, kv_len: Any, heads: int, kvh: int,
                     dtype: str) -> OpCost:
    """Attention of a local layer: each query sees at most w = sliding_window keys. A block shorter
    than w is the ordinary (causal) attention; a decode step reads min(kv_len, w) keys. A longer
    block over its own keys (q_len = kv_len: training, a fresh prefill) attends
    :func:`~xpuplan.perf.flops.mean_local_context` keys per query (sliding: the causal ramp, then w;
    chunked: within each chunk), the figure :mod:`xpuplan.perf.flops` counts; a longer block that
    continues a context (q_len < kv_len, chunked prefill) is charged w keys per query (the upper
    bound, exact once q_len ≫ w). Bytes: Q and O of the block, K and V of a window."""
    assert model.sliding_window is not None
    w = model.sliding_window
    kv_eff = np.minimum(kv_len, w) if isinstance(kv_len, np.ndarray) else min(kv_len, w)
    long_block = np.asarray(q_len) > w
    if not np.any(long_block):
        q_eff = np.minimum(q_len, kv_eff) if isinstance(q_len, np.ndarray) or isinstance(kv_eff, np.ndarray) else (
            min(q_len, kv_eff))
        return _attention(model, batch, q_eff, kv_eff, heads, kvh, dtype)
    windowed = cost_attention(batch, heads, q_len, kv_eff, model.qk_head_dim, causal=False, dtype=dtype,  # type: ignore[arg-type]
                              kv_heads=kvh, v_head_dim=model.v_head_dim)
    causal = model.type != "encoder"
    own = np.asarray(q_len) == kv_len
    if np.any(own):
        mean_keys = np.vectorize(lambda s: mean_local_context(model, int(s), causal))(np.maximum(q_len, 1))
        exact = 2.0 * batch * heads * q_len * mean_keys * (model.qk_head_dim + model.v_head_dim)
        flops = np.where(own, exact, windowed.flops)
        windowed = OpCost("attention", "attention", float(flops) if np.ndim(flops) == 0 else flops,  # type: ignore[arg-type]
                          windowed.bytes, windowed.min_dim, windowed.head_dim)
    if not (isinstance(q_len, np.ndarray) or isinstance(kv_len, np.ndarray)):
        return windowed
    short = _attention(model, batch, np.minimum(q_len, kv_eff), kv_eff, heads, kvh, dtype)
    return OpCost("attention", "attention", np.where(long_block, windowed.flops, short.flops),  # type: ignore[arg-type]
                  np.where(long_block, windowed.bytes, short.bytes),  # type: ignore[arg-type]
                  np.where(long_block, windowed.min_dim, short.min_dim), windowed.head_dim)  # type: ignore[arg-type]


def _named(op: OpCost, name: str) -> OpCost:
    return replace(op, name=name)
