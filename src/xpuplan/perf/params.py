"""Parameter counts per component (element counts, no bytes).

Every function takes a :class:`ModelArch` and returns a count of parameters. Totals follow the
convention of the published figures: token (and learned position/type) embeddings, all layers,
final norm and an untied output head; DeepSeek-V3's multi-token-prediction modules are reported
separately (``mtp``) because the published 671B excludes them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from xpuplan.models.arch import ModelArch


def _norm_params(model: ModelArch, width: int) -> int:
    """RMSNorm has a scale per channel; LayerNorm has scale and bias."""
    return width * (2 if model.norm == "layernorm" else 1)


def params_embedding(model: ModelArch) -> int:
    """Input embeddings: tokens, learned positions, token types (+ BERT's embedding LayerNorm)."""
    n = model.vocab_size * model.d_model
    if model.position == "learned":
        n += model.max_seq_len * model.d_model
    n += model.type_vocab_size * model.d_model
    if model.type == "encoder" or model.embedding_norm:
        n += _norm_params(model, model.d_model)
    return n


def params_output_head(model: ModelArch) -> int:
    """Output projection to the vocabulary (0 when tied to the embedding; 0 for encoders)."""
    if model.type == "encoder":
        return 0
    bias = model.vocab_size if model.head_bias else 0
    return bias if model.tied_embeddings else model.vocab_size * model.d_model + bias


def kv_replication(model: ModelArch, tp: int) -> float:
    """Copies of the KV projections per TP group over one: with tp > n_kv_heads each group of
    tp/n_kv ranks holds a copy of one KV head, so a device holds 1/n_kv of K and V instead of 1/tp.
    Returns (per device K/V share) · tp = max(1, tp / n_kv); 1 for MLA (its latent is replicated and
    counted separately) and when TP divides the KV heads."""
    if model.mla is not None or tp <= model.kv_heads:
        return 1.0
    return tp / model.kv_heads


def params_kv_per_layer(model: ModelArch) -> int:
    """K and V projection weights (and biases) of one layer; 0 for MLA."""
    if model.mla is not None:
        return 0
    kv_dim = model.kv_heads * model.hdim
    return 2 * model.d_model * kv_dim + (2 * kv_dim if model.qkv_bias else 0)


def params_attention_per_layer(model: ModelArch) -> int:
    """Q, K, V and output projections (+ biases, q/k norms, MLA compressions and their norms)."""
    d = model.d_model
    if model.mla is not None:
        m = model.mla
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            q = d * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * model.n_heads * qk
        else:
            q = d * model.n_heads * qk
        kv = d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
        kv += m.kv_lora_rank * model.n_heads * (m.qk_nope_head_dim + m.v_head_dim)
        o = model.n_heads * m.v_head_dim * d
        return q + kv + o
    q_dim = model.n_heads * model.hdim
    kv_dim = model.kv_heads * model.hdim
    n = d * q_dim + 2 * d * kv_dim + q_dim * d
    if model.qkv_bias:
        n += q_dim + 2 * kv_dim
    if model.out_bias:
        n += d
    if model.qk_norm:
        n += 2 * model.hdim
    return n


def params_attention_replicated_per_layer(model: ModelArch) -> int:
    """Attention weights of one layer that every tensor-parallel rank holds whole: MLA's down-projections (the
    query compression d x q_lora_rank and the KV compression d x (kv_lora_rank + rope dim), with their norms),
    whose latents every head needs. Megatron-Core builds them duplicated (``parallel_mode='duplicated'``), vLLM
    and SGLang as one replicated GEMM (``fused_qkv_a_proj``, ``disable_tp=True``). 0 for other attention."""
    if model.mla is None:
        return 0
    m = model.mla
    q = model.d_model * m.q_lora_rank + m.q_lora_rank if m.q_lora_rank else 0
    return q + model.d_model * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank


def params_mlp_dense(model: ModelArch, ffn_dim: int | None = None) -> int:
    """One dense MLP: 3·d·f (gated) or 2·d·f (classic), plus biases."""
    f = ffn_dim or model.ffn_dim
    n = model.mlp_matrices * model.d_model * f
    if model.mlp_bias:
        n += (model.mlp_matrices - 1) * f + model.d_model
    return n


def params_moe_layer(model: ModelArch) -> tuple[int, int]:
    """(total, active-per-token) parameters of one MoE MLP layer, router included."""
    assert model.moe is not None
    moe = model.moe
    expert = params_mlp_dense(model, moe.expert_ffn_dim)
    shared = moe.n_shared_experts * params_mlp_dense(model, moe.shared_ffn)
    router = model.d_model * moe.n_routed_experts + (moe.n_routed_experts if moe.router_bias else 0)
    total = moe.n_routed_experts * expert + shared + router
    active = moe.top_k * expert + shared + router
    return total, active


def params_norms_per_layer(model: ModelArch) -> int:
    return model.layer_norms * _norm_params(model, model.d_model)


def params_final_norm(model: ModelArch) -> int:
    return 0 if model.type == "encoder" else _norm_params(model, model.d_model)


def params_pooler(model: ModelArch) -> int:
    return model.d_model * model.d_model + model.d_model if model.pooler else 0


def params_mtp(model: ModelArch) -> int:
    """DeepSeek-V3 multi-token prediction modules (shared embedding and head not counted)."""
    if not model.mtp_layers:
        return 0
    block = params_attention_per_layer(model) + params_norms_per_layer(model)
    block += params_moe_layer(model)[0] if model.moe else params_mlp_dense(model)
    per_module = block + 2 * _norm_params(model, model.d_model) + 2 * model.d_model * model.d_model
    per_module += _norm_params(model, model.d_model)  # the module's own final norm
    return model.mtp_layers * per_module


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameter counts by component; ``total`` and ``active`` (per token) are the headline numbers."""

    embedding: int
    attention: int
    mlp_dense: int
    mlp_moe: int
    norms: int
    output_head: int
    pooler: int
    total: int
    active: int
    active_mlp_moe: int
    mtp: int

    @property
    def non_embedding(self) -> int:
        return self.total - self.embedding - self.output_head

    def to_dict(self) -> dict[str, int]:
        d = asdict(self)
        d["non_embedding"] = self.non_embedding
        return d


def param_breakdown(model: ModelArch) -> ParamBreakdown:
    """All parameter counts of ``model`` by component."""
    attn = model.n_layers * params_attention_per_layer(model)
    dense = model.n_dense_mlp_layers * params_mlp_dense(model)
    moe_total = moe_active = 0
    if model.moe is not None:
        t, a = params_moe_layer(model)
        moe_total, moe_active = model.n_moe_layers * t, model.n_moe_layers * a
    norms = model.n_layers * params_norms_per_layer(model) + params_final_norm(model)
    emb = params_embedding(model)
    head = params_output_head(model)
    pool = params_pooler(model)
    common = emb + attn + dense + norms + head + pool
    return ParamBreakdown(
        embedding=emb,
        attention=attn,
        mlp_dense=dense,
        mlp_moe=moe_total,
        norms=norms,
        output_head=head,
        pooler=pool,
        total=common + moe_total,
        active=common + moe_active,
        active_mlp_moe=moe_active,
        mtp=params_mtp(model),
    )


def params_total(model: ModelArch) -> int:
    return param_breakdown(model).total


def params_active(model: ModelArch) -> int:
    """Parameters used per token (equals total for dense models)."""
    return param_breakdown(model).active


def params_matmul_active(model: ModelArch, include_head: bool = True) -> int:
    """Active parameters that take part in a matrix multiply per token (norms, biases and
    embedding lookups excluded; the output head included unless ``include_head`` is False)."""
    b = param_breakdown(model)
    n = b.attention + b.mlp_dense + b.active_mlp_moe + b.pooler
    if include_head and model.type != "encoder":  # encoders (embeddings/classification) have no LM head
        n += model.vocab_size * model.d_model  # the head is a matmul whether or not it is tied
    return n
