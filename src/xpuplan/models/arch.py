"""``ModelArch``: the shape of a Transformer, independent of hardware and parallel plan.

Covers dense decoders (MHA/GQA/MQA; gated or classic MLP; tied or untied embeddings), MoE
(routed experts, top-k, shared experts, leading dense layers, MoE every k-th layer as in Llama 4),
DeepSeek's MLA attention, local attention (sliding-window or chunked layers, alone or interleaved
with global layers as in Gemma 2/3, gpt-oss, Llama 4) and encoder-only models (BERT). Nothing here
depends on a plan or a device.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xpuplan.errors import UserInputError

_ID = re.compile(r"^[a-z0-9][a-z0-9.\-_]*$")

# Ceilings on architecture sizes: far above any published model (the largest have ~200 layers, a 16K-64K hidden
# size, 128-256 heads, a 256K vocabulary, 512 experts and 10M-token contexts), low enough that every count the
# planners derive (parameters, FLOPs, bytes, numpy indices) stays finite. A value above one is a typo or a unit
# mistake (e.g. a hidden size in bytes), rejected with the field named instead of turning into absurd figures.
MAX_LAYERS = 100_000
MAX_WIDTH = 1 << 22  # hidden, head, FFN, expert and latent widths (4,194,304)
MAX_HEADS = 1 << 16
MAX_VOCAB = 1 << 26
MAX_EXPERTS = 1 << 16
MAX_CONTEXT = 1 << 34  # tokens (17 billion)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MoEConfig(_Strict):
    """Mixture-of-experts MLP used in every layer after ``n_dense_layers`` leading dense layers."""

    n_routed_experts: int = Field(ge=1, le=MAX_EXPERTS, description="routed experts per MoE layer")
    top_k: int = Field(ge=1, le=MAX_EXPERTS, description="routed experts each token is sent to")
    expert_ffn_dim: int = Field(ge=1, le=MAX_WIDTH, description="intermediate size of one routed expert")
    n_shared_experts: int = Field(default=0, ge=0, le=MAX_EXPERTS, description="always-active shared experts")
    shared_expert_ffn_dim: int | None = Field(
        default=None, ge=1, le=MAX_WIDTH, description="intermediate size of one shared expert (default: expert_ffn_dim)"
    )
    n_dense_layers: int = Field(default=0, ge=0, le=MAX_LAYERS, description="leading layers with a dense MLP of ffn_dim")
    router_bias: bool = Field(default=False, description="per-expert bias in the router (DeepSeek-V3)")
    node_limit: int | None = Field(
        default=None, ge=1,
        description="node-limited routing: each token's experts lie on at most this many expert-parallel nodes "
                    "(DeepSeek-V3: 4; HF config topk_group); None = unrestricted")
    layer_step: int = Field(
        default=1, ge=1,
        description="after the leading dense layers, layer i (0-based) is MoE when (i + 1) % layer_step == 0, "
                    "the others dense (Llama 4 Maverick: 2; HF interleave_moe_layer_step / decoder_sparse_step)",
    )

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

    q_lora_rank: int | None = Field(default=None, ge=1, le=MAX_WIDTH, description="query compression rank (None: no compression)")
    kv_lora_rank: int = Field(ge=1, le=MAX_WIDTH, description="latent KV dimension cached per token")
    qk_nope_head_dim: int = Field(ge=1, le=MAX_WIDTH)
    qk_rope_head_dim: int = Field(ge=0, le=MAX_WIDTH, description="decoupled RoPE key dims, cached per token (shared by heads)")
    v_head_dim: int = Field(ge=1, le=MAX_WIDTH)


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
    n_layers: int = Field(ge=1, le=MAX_LAYERS)
    d_model: int = Field(ge=1, le=MAX_WIDTH)
    n_heads: int = Field(ge=1, le=MAX_HEADS)
    n_kv_heads: int | None = Field(default=None, ge=1, le=MAX_HEADS, description="default n_heads (MHA); 1 is MQA")
    head_dim: int | None = Field(default=None, ge=1, le=MAX_WIDTH, description="default d_model // n_heads")
    ffn_dim: int = Field(ge=1, le=MAX_WIDTH, description="intermediate size of the dense MLP")
    vocab_size: int = Field(ge=1, le=MAX_VOCAB)
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
    max_seq_len: int = Field(default=2048, ge=1, le=MAX_CONTEXT)
    parallel_attn_mlp: bool = Field(default=False, description="attention and MLP read the same input (GPT-J, Falcon)")
    moe: MoEConfig | None = None
    mla: MLAConfig | None = None
    mtp_layers: int = Field(default=0, ge=0, le=MAX_LAYERS, description="multi-token-prediction modules (DeepSeek-V3), not in totals")
    embedding_norm: bool = Field(default=False, description="norm right after the token embedding (BLOOM)")
    head_bias: bool = Field(default=False, description="bias on the output head (GPT-J)")
    type_vocab_size: int = Field(default=0, ge=0, le=MAX_VOCAB, description="token-type embeddings (BERT)")
    pooler: bool = Field(default=False, description="BERT pooler dense layer")
    sliding_window: int | None = Field(
        default=None, ge=1, le=MAX_CONTEXT,
        description="tokens a local-attention layer attends to (the window; the chunk for chunked attention); "
                    "None: every layer attends to the whole context",
    )
    local_attention: Literal["sliding", "chunked"] = Field(
        default="sliding",
        description="sliding: each token sees the previous sliding_window tokens (Mistral, Gemma, gpt-oss); "
                    "chunked: tokens see only their own chunk of sliding_window tokens (Llama 4)",
    )
    global_every: int | None = Field(
        default=None, ge=1,
        description="with sliding_window: layer i (0-based) is global when (i + 1) % global_every == 0, the others "
                    "local (Gemma 2, gpt-oss: 2; Llama 4: 4; Gemma 3: 6); None: every layer is local",
    )
    layer_types: list[Literal["global", "local"]] | None = Field(
        default=None, description="explicit attention kind per layer (overrides global_every; HF layer_types)"
    )
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
        if self.sliding_window is None and (self.global_every is not None or self.layer_types is not None):
            raise ValueError("global_every and layer_types need sliding_window")
        if self.layer_types is not None and len(self.layer_types) != self.n_layers:
            raise ValueError(f"layer_types has {len(self.layer_types)} entries for {self.n_layers} layers")
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
    def moe_layer_flags(self) -> tuple[bool, ...]:
        """Per layer: True where the MLP is mixture-of-experts."""
        if self.moe is None:
            return (False,) * self.n_layers
        m = self.moe
        return tuple(i >= m.n_dense_layers and (i + 1) % m.layer_step == 0 for i in range(self.n_layers))

    @property
    def n_moe_layers(self) -> int:
        return sum(self.moe_layer_flags)

    @property
    def local_layer_flags(self) -> tuple[bool, ...]:
        """Per layer: True where attention is local (sliding window or chunked)."""
        if self.sliding_window is None:
            return (False,) * self.n_layers
        if self.layer_types is not None:
            return tuple(t == "local" for t in self.layer_types)
        if self.global_every is None:
            return (True,) * self.n_layers
        return tuple((i + 1) % self.global_every != 0 for i in range(self.n_layers))

    @property
    def n_local_layers(self) -> int:
        """Layers whose attention is local (sliding-window or chunked)."""
        return sum(self.local_layer_flags)

    @property
    def n_global_layers(self) -> int:
        """Layers that attend to the whole context."""
        return self.n_layers - self.n_local_layers

    @property
    def attention_pattern(self) -> str:
        """'global', or e.g. '5 sliding(1024) : 1 global' for interleaved local/global layers."""
        if self.sliding_window is None:
            return "global"
        local = f"{self.local_attention}({self.sliding_window})"
        if self.n_global_layers == 0:
            return f"all {local}"
        return f"{self.n_local_layers} {local} + {self.n_global_layers} global layers"

    def check_context(self, tokens: float, field: str = "input_len") -> None:
        """UserInputError naming ``field`` when ``tokens`` exceed the model's context (max_seq_len)."""
        if tokens > self.max_seq_len:
            raise UserInputError(
                f"{int(tokens)} tokens exceed {self.id}'s context of {self.max_seq_len} tokens "
                f"(max_seq_len; max_position_embeddings in its config.json)", field=field)

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
