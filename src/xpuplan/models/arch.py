"""``ModelArch``: the shape of a Transformer, independent of hardware and parallel plan.

Covers dense decoders (MHA/GQA/MQA; gated or classic MLP; tied or untied embeddings), MoE
(routed experts, top-k, shared experts, leading dense layers), DeepSeek's MLA attention, and
encoder-only models (BERT). Nothing here depends on a plan or a device.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_ID = re.compile(r"^[a-z0-9][a-z0-9.\-_]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MoEConfig(_Strict):
    """Mixture-of-experts MLP used in every layer after ``n_dense_layers`` leading dense layers."""

    n_routed_experts: int = Field(ge=1, description="routed experts per MoE layer")
    top_k: int = Field(ge=1, description="routed experts each token is sent to")
    expert_ffn_dim: int = Field(ge=1, description="intermediate size of one routed expert")
    n_shared_experts: int = Field(default=0, ge=0, description="always-active shared experts")
    shared_expert_ffn_dim: int | None = Field(
        default=None, ge=1, description="intermediate size of one shared expert (default: expert_ffn_dim)"
    )
    n_dense_layers: int = Field(default=0, ge=0, description="leading layers with a dense MLP of ffn_dim")
    router_bias: bool = Field(default=False, description="per-expert bias in the router (DeepSeek-V3)")
    node_limit: int | None = Field(
        default=None, ge=1,
        description="node-limited routing: each token's experts lie on at most this many expert-parallel nodes "
                    "(DeepSeek-V3: 4; HF config topk_group); None = unrestricted")

    @model_validator(mode="after")
    def _check(self) -> MoEConfig:
        if self.top_k > self.n_routed_experts:
            raise ValueError(f"top_k ({self.top_k}) exceeds n_routed_experts ({self.n_routed_experts})")
        return self

    @property
    def shared_ffn(self) -> int:
        return self.shared_expert_ffn_dim or self.expert_ffn_dim


class MLAConfig(_Strict):
    """DeepSeek multi-head latent attention dimensions."""

    q_lora_rank: int | None = Field(default=None, ge=1, description="query compression rank (None: no compression)")
    kv_lora_rank: int = Field(ge=1, description="latent KV dimension cached per token")
    qk_nope_head_dim: int = Field(ge=1)
    qk_rope_head_dim: int = Field(ge=0, description="decoupled RoPE key dims, cached per token (shared by heads)")
    v_head_dim: int = Field(ge=1)


class PublishedCount(_Strict):
    value_b: float = Field(gt=0, description="parameters, billions, as published")
    source: str


class Published(_Strict):
    total_params: PublishedCount
    active_params: PublishedCount | None = None


class ModelArch(_Strict):
    """A Transformer's architecture. Sizes are element counts; no bytes, no devices."""

    id: str
    name: str
    family: str = ""
    aliases: list[str] = Field(default_factory=list)
    type: Literal["decoder", "encoder"] = "decoder"
    n_layers: int = Field(ge=1)
    d_model: int = Field(ge=1)
    n_heads: int = Field(ge=1)
    n_kv_heads: int | None = Field(default=None, ge=1, description="default n_heads (MHA); 1 is MQA")
    head_dim: int | None = Field(default=None, ge=1, description="default d_model // n_heads")
    ffn_dim: int = Field(ge=1, description="intermediate size of the dense MLP")
    vocab_size: int = Field(ge=1)
    mlp: Literal["gated", "classic"] = Field(description="gated: SwiGLU/GeGLU (3 matrices); classic: 2 matrices")
    activation: str = "silu"
    tied_embeddings: bool = False
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    norms_per_layer: int | None = Field(default=None, ge=0, le=4, description="default 2 (1 if parallel_attn_mlp)")
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = Field(default=False, description="per-head RMSNorm on q and k (Qwen3)")
    position: Literal["rope", "learned", "alibi", "none"] = "rope"
    max_seq_len: int = Field(default=2048, ge=1)
    parallel_attn_mlp: bool = Field(default=False, description="attention and MLP read the same input (GPT-J, Falcon)")
    moe: MoEConfig | None = None
    mla: MLAConfig | None = None
    mtp_layers: int = Field(default=0, ge=0, description="multi-token-prediction modules (DeepSeek-V3), not in totals")
    embedding_norm: bool = Field(default=False, description="norm right after the token embedding (BLOOM)")
    head_bias: bool = Field(default=False, description="bias on the output head (GPT-J)")
    type_vocab_size: int = Field(default=0, ge=0, description="token-type embeddings (BERT)")
    pooler: bool = Field(default=False, description="BERT pooler dense layer")
    published: Published | None = None
    notes: str | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError("id must be lowercase letters, digits, '.', '-' and '_'")
        return v

    @model_validator(mode="after")
    def _shape(self) -> ModelArch:
        if self.head_dim is None and self.mla is None and self.d_model % self.n_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must divide d_model ({self.d_model}) unless head_dim is given"
            )
        if self.n_heads % self.kv_heads:
            raise ValueError(f"n_kv_heads ({self.kv_heads}) must divide n_heads ({self.n_heads})")
        if self.moe is not None and self.moe.n_dense_layers > self.n_layers:
            raise ValueError("moe.n_dense_layers exceeds n_layers")
        if self.type == "encoder" and (self.moe is not None or self.mla is not None):
            raise ValueError("encoder models with MoE or MLA are not supported")
        return self

    # -- derived shape ------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_heads

    @property
    def hdim(self) -> int:
        """Per-head dimension of q/k/v (MLA: see ``mla``)."""
        return self.head_dim or self.d_model // self.n_heads

    @property
    def attention_kind(self) -> str:
        if self.mla is not None:
            return "MLA"
        if self.kv_heads == self.n_heads:
            return "MHA"
        if self.kv_heads == 1:
            return "MQA"
        return "GQA"

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def n_moe_layers(self) -> int:
        return 0 if self.moe is None else self.n_layers - self.moe.n_dense_layers

    @property
    def n_dense_mlp_layers(self) -> int:
        return self.n_layers - self.n_moe_layers

    @property
    def layer_norms(self) -> int:
        if self.norms_per_layer is not None:
            return self.norms_per_layer
        return 1 if self.parallel_attn_mlp else 2

    @property
    def qk_head_dim(self) -> int:
        """Dimension of one query/key head used in QK^T."""
        return self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim if self.mla else self.hdim

    @property
    def v_head_dim(self) -> int:
        return self.mla.v_head_dim if self.mla else self.hdim

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.mlp == "gated" else 2
