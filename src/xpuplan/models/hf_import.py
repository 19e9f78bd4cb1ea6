"""Import a local Hugging Face ``config.json`` as a :class:`ModelArch` (no network access).

Supported: Llama 2/3, Llama 4 (chunked/global attention, interleaved MoE layers), Mistral (sliding
window), Mixtral, Qwen2/2.5, Qwen2-MoE, Qwen3, Qwen3-MoE, DeepSeek-V2/V3/V3.1/V3.2, Gemma 1/2/3
(local/global layer patterns), GLM-4 (glm, glm4, GLM-4.5 glm4_moe), gpt-oss, Phi-3/Phi-4, GPT-2,
GPT-J and BERT. The builder is picked from ``architectures[0]``, falling back to ``model_type``;
multimodal wrappers (Gemma 3, Llama 4 ``...ForConditionalGeneration``) are read from their
``text_config`` (the vision tower is not counted). Defaults for keys a config leaves out follow the
``transformers`` config classes. Errors are :class:`UserInputError` naming the file, the line and
the config key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from xpuplan.datafile import Path_t, parse_text, read_text
from xpuplan.errors import UserInputError
from xpuplan.models.arch import MLAConfig, ModelArch, MoEConfig

_REQUIRED: Any = object()
_HASH = re.compile(r"^[0-9a-f]{40}$")


class _Config:
    """Typed access to a parsed ``config.json``; errors name the file, line and key."""

    def __init__(self, data: dict[str, Any], file: str, lines: dict[Path_t, int], arch: str,
                 prefix: tuple[str, ...] = ()) -> None:
        self.data, self.file, self.lines, self.arch, self.prefix = data, file, lines, arch, prefix

    def error(self, key: str, message: str) -> UserInputError:
        """A UserInputError about ``key`` (at its line, or the top of the file if it is missing)."""
        line = self.lines.get((*self.prefix, key), self.lines.get(self.prefix, self.lines.get(())))
        return UserInputError(message, field=".".join((*self.prefix, key)), file=self.file, line=line)

    def get(self, key: str, default: Any = _REQUIRED) -> Any:
        """The raw value of ``key``; a missing (or null) required key raises."""
        value = self.data.get(key)
        if value is None:
            if default is _REQUIRED:
                raise self.error(key, f"missing required key {key!r} for {self.arch}")
            return default
        return value

    def integer(self, key: str, default: Any = _REQUIRED) -> Any:
        """An integer value (``default`` when missing/null; the default may be None)."""
        value = self.get(key, default)
        if self.data.get(key) is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected an integer, got {value!r}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        """A boolean value (``default`` when missing/null)."""
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def text(self, key: str, default: str) -> str:
        """A string value (``default`` when missing/null)."""
        value = self.get(key, default)
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {value!r}")
        return value


Builder = Callable[[_Config], dict[str, Any]]


def _decoder(c: _Config, *, max_pos: int, tied: bool = False, head_dim: int | None = None,
             vocab: Any = _REQUIRED, defaults: dict[str, int] | None = None) -> dict[str, Any]:
    """Fields shared by Llama-style decoders (RoPE, RMSNorm, gated MLP). ``defaults``: the config
    class's defaults for shape keys a checkpoint may leave out (else they are required)."""
    bias = c.flag("attention_bias", False)
    d = defaults or {}
    return {
        "n_layers": c.integer("num_hidden_layers", d.get("num_hidden_layers", _REQUIRED)),
        "d_model": c.integer("hidden_size", d.get("hidden_size", _REQUIRED)),
        "n_heads": c.integer("num_attention_heads", d.get("num_attention_heads", _REQUIRED)),
        "n_kv_heads": c.integer("num_key_value_heads", d.get("num_key_value_heads")),
        "head_dim": c.integer("head_dim", head_dim),
        "ffn_dim": c.integer("intermediate_size", d.get("intermediate_size", _REQUIRED)),
        "vocab_size": c.integer("vocab_size", vocab),
        "mlp": "gated",
        "activation": c.text("hidden_act", "silu"),
        "tied_embeddings": c.flag("tie_word_embeddings", tied),
        "qkv_bias": bias,
        "out_bias": bias,
        "mlp_bias": c.flag("mlp_bias", False),
        "max_seq_len": c.integer("max_position_embeddings", max_pos),
    }


def _llama(c: _Config) -> dict[str, Any]:
    return _decoder(c, max_pos=2048)


def _mistral(c: _Config) -> dict[str, Any]:
    return _mistral_window(c, _decoder(c, max_pos=4096 * 32))


def _mixtral(c: _Config) -> dict[str, Any]:
    kw = _mistral_window(c, _decoder(c, max_pos=4096 * 32))
    kw["moe"] = MoEConfig(
        n_routed_experts=c.integer("num_local_experts"),
        top_k=c.integer("num_experts_per_tok"),
        expert_ffn_dim=kw["ffn_dim"],
    )
    return kw


def _qwen2(c: _Config) -> dict[str, Any]:
    kw = _decoder(c, max_pos=32768)
    kw.update(qkv_bias=True, out_bias=False)  # Qwen2 attention: bias on q/k/v only
    return _qwen_window(c, kw)


def _qwen3(c: _Config) -> dict[str, Any]:
    return _qwen_window(c, {**_decoder(c, max_pos=32768, head_dim=128), "qk_norm": True})


def _qwen3_moe(c: _Config) -> dict[str, Any]:
    kw = {**_decoder(c, max_pos=32768), "qk_norm": True}
    if c.integer("decoder_sparse_step", 1) != 1:
        raise c.error("decoder_sparse_step", "only decoder_sparse_step 1 (every layer MoE) is supported")
    dense = c.get("mlp_only_layers", [])
    if not isinstance(dense, list) or dense != list(range(len(dense))):
        raise c.error("mlp_only_layers", "only a leading run of dense layers [0, 1, ..., k-1] is supported")
    kw["moe"] = MoEConfig(
        n_routed_experts=c.integer("num_experts"),
        top_k=c.integer("num_experts_per_tok"),
        expert_ffn_dim=c.integer("moe_intermediate_size"),
        n_dense_layers=len(dense),
    )
    return _qwen_window(c, kw)


def _deepseek(c: _Config) -> dict[str, Any]:
    v3 = c.text("model_type", "deepseek_v3") in ("deepseek_v3", "deepseek_v32")
    kw = _decoder(c, max_pos=4096 if v3 else 2048)
    kw.update(n_kv_heads=None, head_dim=None, qkv_bias=False, out_bias=False)
    kw["mla"] = MLAConfig(
        q_lora_rank=c.integer("q_lora_rank", None),
        kv_lora_rank=c.integer("kv_lora_rank"),
        qk_nope_head_dim=c.integer("qk_nope_head_dim"),
        qk_rope_head_dim=c.integer("qk_rope_head_dim"),
        v_head_dim=c.integer("v_head_dim"),
    )
    experts = c.integer("n_routed_experts", None)
    if experts:
        if c.integer("moe_layer_freq", 1) != 1:
            raise c.error(
                "moe_layer_freq", "only moe_layer_freq 1 (every layer after the dense ones) is supported"
            )
        kw["moe"] = MoEConfig(
            n_routed_experts=experts,
            top_k=c.integer("num_experts_per_tok"),
            expert_ffn_dim=c.integer("moe_intermediate_size"),
            n_shared_experts=c.integer("n_shared_experts", 0),
            n_dense_layers=c.integer("first_k_dense_replace", 0),
            router_bias=c.text("topk_method", "noaux_tc" if v3 else "greedy") == "noaux_tc",
            # group-limited routing: experts in n_group groups (V3: one per node of EP64), a token
            # reaches at most topk_group of them
            node_limit=c.integer("topk_group", None) if c.integer("n_group", 1) > 1 else None,
        )
    kw["mtp_layers"] = c.integer("num_nextn_predict_layers", 0)
    return kw


def _pattern(flags: list[bool], window: int | None, max_pos: int) -> dict[str, Any]:
    """ModelArch fields for per-layer local (True) / global (False) attention: none when no layer is
    local or the window covers the whole context; ``global_every`` when global layers recur every
    k-th layer; else the explicit ``layer_types``."""
    if window is None or window >= max_pos or not any(flags):
        return {}
    n = len(flags)
    if all(flags):
        return {"sliding_window": window}
    for k in range(2, n + 1):
        if all(flags[i] == ((i + 1) % k != 0) for i in range(n)):
            return {"sliding_window": window, "global_every": k}
    return {"sliding_window": window, "layer_types": ["local" if f else "global" for f in flags]}


_LOCAL_TYPES = {"sliding_attention": True, "chunked_attention": True, "full_attention": False}


def _layer_types(c: _Config, n_layers: int) -> list[bool] | None:
    """HF ``layer_types`` (transformers >= 4.53) as local flags, or None when absent."""
    raw = c.get("layer_types", None)
    if raw is None:
        return None
    if not isinstance(raw, list) or len(raw) != n_layers or any(t not in _LOCAL_TYPES for t in raw):
        raise c.error("layer_types", f"expected {n_layers} entries of {', '.join(_LOCAL_TYPES)}")
    return [_LOCAL_TYPES[t] for t in raw]


def _qwen_window(c: _Config, kw: dict[str, Any]) -> dict[str, Any]:
    """Qwen2/Qwen3: sliding window only when ``use_sliding_window``, on layers >= max_window_layers."""
    n = kw["n_layers"]
    if not c.flag("use_sliding_window", False):
        return kw
    flags = _layer_types(c, n) or [i >= c.integer("max_window_layers", n) for i in range(n)]
    return {**kw, **_pattern(flags, c.integer("sliding_window", None), kw["max_seq_len"])}


def _mistral_window(c: _Config, kw: dict[str, Any]) -> dict[str, Any]:
    """Mistral/Mixtral/Phi-3: one sliding window on every layer when ``sliding_window`` is set."""
    n = kw["n_layers"]
    flags = _layer_types(c, n) or [True] * n
    return {**kw, **_pattern(flags, c.integer("sliding_window", None), kw["max_seq_len"])}


def _gemma(c: _Config) -> dict[str, Any]:
    kw = _decoder(c, max_pos=8192, tied=True, head_dim=256)
    kw["activation"] = c.text("hidden_activation", c.text("hidden_act", "gelu_pytorch_tanh"))
    return kw


def _gemma2(c: _Config) -> dict[str, Any]:
    """Gemma 2: pre- and post-norms around attention and MLP (4 per layer); local and global layers
    alternate (layer 0 local)."""
    kw = {**_gemma(c), "norms_per_layer": 4}
    n = kw["n_layers"]
    flags = _layer_types(c, n) or [(i + 1) % 2 != 0 for i in range(n)]
    return {**kw, **_pattern(flags, c.integer("sliding_window", 4096), kw["max_seq_len"])}


def _gemma3(c: _Config) -> dict[str, Any]:
    """Gemma 3 text model: Gemma 2's four norms plus q/k norms; ``sliding_window_pattern`` - 1 local
    layers then one global."""
    # Gemma3TextConfig's defaults: the 4B-27B checkpoints' text_config omits the vocabulary, and the
    # 4B's its head counts
    kw = _decoder(c, max_pos=131072, tied=True, head_dim=256, vocab=262208,
                  defaults={"num_hidden_layers": 26, "hidden_size": 2304, "intermediate_size": 9216,
                            "num_attention_heads": 8, "num_key_value_heads": 4})
    kw.update(activation=c.text("hidden_activation", "gelu_pytorch_tanh"), norms_per_layer=4, qk_norm=True)
    n = kw["n_layers"]
    every = c.integer("sliding_window_pattern", 6)
    flags = _layer_types(c, n) or [(i + 1) % every != 0 for i in range(n)]
    return {**kw, **_pattern(flags, c.integer("sliding_window", 4096), kw["max_seq_len"])}


def _glm(c: _Config) -> dict[str, Any]:
    """GLM-4 (glm-4-9b ``glm``): bias on q, k and v only; fused gate/up MLP."""
    kw = _decoder(c, max_pos=131072)
    kw.update(qkv_bias=c.flag("attention_bias", True), out_bias=False)
    return kw


def _glm4(c: _Config) -> dict[str, Any]:
    """GLM-4-0414 (``glm4``): as ``glm`` plus post-attention and post-MLP norms (4 per layer)."""
    return {**_glm(c), "norms_per_layer": 4}


def _glm4_moe(c: _Config) -> dict[str, Any]:
    """GLM-4.5/4.6 (``glm4_moe``): DeepSeek-V3-style MoE (shared expert, leading dense layers,
    sigmoid router with a correction bias, MTP layers) over GQA attention."""
    kw = _decoder(c, max_pos=131072)
    kw.update(qkv_bias=c.flag("attention_bias", False), out_bias=False, qk_norm=c.flag("use_qk_norm", False))
    kw["moe"] = MoEConfig(
        n_routed_experts=c.integer("n_routed_experts"),
        top_k=c.integer("num_experts_per_tok"),
        expert_ffn_dim=c.integer("moe_intermediate_size"),
        n_shared_experts=c.integer("n_shared_experts", 1),
        n_dense_layers=c.integer("first_k_dense_replace", 1),
        router_bias=True,  # e_score_correction_bias
    )
    kw["mtp_layers"] = c.integer("num_nextn_predict_layers", 0)
    return kw


def _gpt_oss(c: _Config) -> dict[str, Any]:
    """gpt-oss: every layer MoE (experts with biases, router with bias), attention with biases and
    alternating 128-token sliding-window / full layers. Attention sinks (one scalar per head) are
    not counted."""
    kw = _decoder(c, max_pos=131072, head_dim=64)
    kw.update(qkv_bias=c.flag("attention_bias", True), out_bias=c.flag("attention_bias", True), mlp_bias=True)
    top_k = c.integer("num_experts_per_tok", None) or c.integer("experts_per_token", 4)
    kw["moe"] = MoEConfig(
        n_routed_experts=c.integer("num_local_experts"), top_k=top_k, expert_ffn_dim=kw["ffn_dim"], router_bias=True,
    )
    n = kw["n_layers"]
    flags = _layer_types(c, n) or [(i + 1) % 2 != 0 for i in range(n)]
    return {**kw, **_pattern(flags, c.integer("sliding_window", 128), kw["max_seq_len"])}


def _phi3(c: _Config) -> dict[str, Any]:
    """Phi-3 / Phi-4 (``phi3``): fused qkv and gate/up projections (same counts as Llama); Phi-3's
    sliding window on every layer where the config sets one."""
    return _mistral_window(c, _decoder(c, max_pos=4096))


def _qwen2_moe(c: _Config) -> dict[str, Any]:
    """Qwen1.5/Qwen2-MoE: routed experts plus one gated shared expert of its own width in every
    ``decoder_sparse_step``-th layer (the shared expert's 1-output gate is not counted)."""
    kw = _decoder(c, max_pos=32768)
    kw.update(qkv_bias=True, out_bias=False)
    dense = c.get("mlp_only_layers", [])
    if not isinstance(dense, list) or dense != list(range(len(dense))):
        raise c.error("mlp_only_layers", "only a leading run of dense layers [0, 1, ..., k-1] is supported")
    shared = c.integer("shared_expert_intermediate_size", 0)
    kw["moe"] = MoEConfig(
        n_routed_experts=c.integer("num_experts"),
        top_k=c.integer("num_experts_per_tok"),
        expert_ffn_dim=c.integer("moe_intermediate_size"),
        n_shared_experts=1 if shared else 0,
        shared_expert_ffn_dim=shared or None,
        n_dense_layers=len(dense),
        layer_step=c.integer("decoder_sparse_step", 1),
    )
    return _qwen_window(c, kw)


def _llama4(c: _Config) -> dict[str, Any]:
    """Llama 4 text model: MoE (routed experts of ``intermediate_size`` plus one shared expert) every
    ``interleave_moe_layer_step``-th layer, dense MLPs of ``intermediate_size_mlp`` between; RoPE
    layers use chunked attention (``attention_chunk_size``), every ``no_rope_layer_interval``-th
    layer (NoPE) attends globally. Its q/k norm has no weights."""
    kw = _decoder(c, max_pos=4096 * 32, head_dim=128)
    n = kw["n_layers"]
    expert_ffn = kw["ffn_dim"]
    kw["ffn_dim"] = c.integer("intermediate_size_mlp", expert_ffn)
    step = c.integer("interleave_moe_layer_step", 1)
    moe_layers = c.get("moe_layers", None)
    if moe_layers is not None and moe_layers != list(range(step - 1, n, step)):
        raise c.error("moe_layers", f"only every interleave_moe_layer_step-th layer ({step}) as MoE is supported")
    kw["moe"] = MoEConfig(
        n_routed_experts=c.integer("num_local_experts"),
        top_k=c.integer("num_experts_per_tok", 1),
        expert_ffn_dim=expert_ffn,
        n_shared_experts=1,
        layer_step=step,
    )
    chunk = c.integer("attention_chunk_size", None)
    rope = c.get("no_rope_layers", None) or None  # [] in the published configs: the default pattern
    if rope is not None and (not isinstance(rope, list) or len(rope) < n):
        raise c.error("no_rope_layers", f"expected a list of at least {n} 0/1 entries")
    every = c.integer("no_rope_layer_interval", 4)
    flags = [bool(x) for x in rope[:n]] if rope else [(i + 1) % every != 0 for i in range(n)]
    kw.update(_pattern(flags, chunk, kw["max_seq_len"]))
    if "sliding_window" in kw:
        kw["local_attention"] = "chunked"
    return kw


def _gpt2(c: _Config) -> dict[str, Any]:
    d = c.integer("n_embd")
    return {
        "n_layers": c.integer("n_layer"),
        "d_model": d,
        "n_heads": c.integer("n_head"),
        "ffn_dim": c.integer("n_inner", None) or 4 * d,
        "vocab_size": c.integer("vocab_size"),
        "mlp": "classic",
        "activation": c.text("activation_function", "gelu_new"),
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "norm": "layernorm",
        "qkv_bias": True,
        "out_bias": True,
        "mlp_bias": True,
        "position": "learned",
        "max_seq_len": c.integer("n_positions", 1024),
    }


def _gptj(c: _Config) -> dict[str, Any]:
    d = c.integer("n_embd")
    return {
        "n_layers": c.integer("n_layer"),
        "d_model": d,
        "n_heads": c.integer("n_head"),
        "ffn_dim": c.integer("n_inner", None) or 4 * d,
        "vocab_size": c.integer("vocab_size"),
        "mlp": "classic",
        "activation": c.text("activation_function", "gelu_new"),
        "tied_embeddings": c.flag("tie_word_embeddings", False),
        "norm": "layernorm",
        "mlp_bias": True,
        "position": "rope",
        "max_seq_len": c.integer("n_positions", 2048),
        "parallel_attn_mlp": True,
        "head_bias": True,  # GPTJForCausalLM's lm_head has a bias
    }


def _bert(c: _Config) -> dict[str, Any]:
    return {
        "type": "encoder",
        "n_layers": c.integer("num_hidden_layers"),
        "d_model": c.integer("hidden_size"),
        "n_heads": c.integer("num_attention_heads"),
        "ffn_dim": c.integer("intermediate_size"),
        "vocab_size": c.integer("vocab_size"),
        "mlp": "classic",
        "activation": c.text("hidden_act", "gelu"),
        "tied_embeddings": c.flag("tie_word_embeddings", True),
        "norm": "layernorm",
        "qkv_bias": True,
        "out_bias": True,
        "mlp_bias": True,
        "position": "learned",
        "max_seq_len": c.integer("max_position_embeddings", 512),
        "type_vocab_size": c.integer("type_vocab_size", 2),
        "pooler": True,  # checkpoints (and published counts) include the pooler
    }


#: model_type -> (family, builder)
_BY_MODEL_TYPE: dict[str, tuple[str, Builder]] = {
    "llama": ("llama", _llama),
    "mistral": ("mistral", _mistral),
    "mixtral": ("mistral", _mixtral),
    "qwen2": ("qwen", _qwen2),
    "qwen3": ("qwen", _qwen3),
    "qwen3_moe": ("qwen", _qwen3_moe),
    "deepseek_v2": ("deepseek", _deepseek),
    "deepseek_v3": ("deepseek", _deepseek),
    "deepseek_v32": ("deepseek", _deepseek),  # V3.2: + a small lightning indexer (not counted, ~0.1%)
    "qwen2_moe": ("qwen", _qwen2_moe),
    "gemma": ("gemma", _gemma),
    "gemma2": ("gemma", _gemma2),
    "gemma3_text": ("gemma", _gemma3),
    "glm": ("glm", _glm),
    "glm4": ("glm", _glm4),
    "glm4_moe": ("glm", _glm4_moe),
    "gpt_oss": ("gpt-oss", _gpt_oss),
    "phi3": ("phi", _phi3),
    "llama4_text": ("llama", _llama4),
    "gemma3": ("gemma", _gemma3),  # multimodal wrapper: read from text_config
    "llama4": ("llama", _llama4),  # multimodal wrapper: read from text_config
    "gpt2": ("gpt", _gpt2),
    "gptj": ("gpt", _gptj),
    "bert": ("bert", _bert),
}
#: architectures[0] -> model_type
_BY_ARCHITECTURE: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "GemmaForCausalLM": "gemma",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "Gemma3ForConditionalGeneration": "gemma3_text",
    "GlmForCausalLM": "glm",
    "Glm4ForCausalLM": "glm4",
    "Glm4MoeForCausalLM": "glm4_moe",
    "GptOssForCausalLM": "gpt_oss",
    "Phi3ForCausalLM": "phi3",
    "Llama4ForCausalLM": "llama4_text",
    "Llama4ForConditionalGeneration": "llama4_text",
    "GPT2LMHeadModel": "gpt2",
    "GPT2Model": "gpt2",
    "GPTJForCausalLM": "gptj",
    "GPTJModel": "gptj",
    "BertModel": "bert",
    "BertForMaskedLM": "bert",
    "BertForPreTraining": "bert",
    "BertForSequenceClassification": "bert",
}

#: multimodal wrappers whose language model is described by ``text_config``
_TEXT_CONFIG_WRAPPERS = frozenset({"Gemma3ForConditionalGeneration", "Llama4ForConditionalGeneration"})
_TEXT_CONFIG_MODEL_TYPES = frozenset({"gemma3", "llama4"})

SUPPORTED_ARCHITECTURES: tuple[str, ...] = tuple(_BY_ARCHITECTURE)
SUPPORTED_MODEL_TYPES: tuple[str, ...] = tuple(_BY_MODEL_TYPE)


def _dispatch(data: dict[str, Any], file: str, lines: dict[Path_t, int]) -> tuple[str, str, Builder]:
    """(label, family, builder) for a config, from ``architectures[0]`` or ``model_type``."""
    archs = data.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    model_type = data.get("model_type") if isinstance(data.get("model_type"), str) else None
    if arch in _BY_ARCHITECTURE:
        family, builder = _BY_MODEL_TYPE[_BY_ARCHITECTURE[arch]]
        return arch, family, builder
    if model_type in _BY_MODEL_TYPE:
        family, builder = _BY_MODEL_TYPE[model_type]
        return arch or model_type, family, builder
    supported = (
        f"supported architectures: {', '.join(SUPPORTED_ARCHITECTURES)}; "
        f"supported model_type values: {', '.join(SUPPORTED_MODEL_TYPES)}"
    )
    if arch is None and model_type is None:
        raise UserInputError(
            f"neither 'architectures' nor 'model_type' is set; {supported}",
            field="architectures",
            file=file,
            line=lines.get(()),
        )
    field = "architectures" if arch is not None else "model_type"
    if arch is None:
        shown = f"model_type {model_type!r}"
    else:
        shown = f"architecture {arch!r}" + (f" (model_type {model_type!r})" if model_type else "")
    raise UserInputError(
        f"unsupported {shown}; {supported}", field=field, file=file, line=lines.get((field,), lines.get(()))
    )


def _sanitise_id(raw: str) -> str:
    s = re.sub(r"[^a-z0-9._-]+", "-", raw.strip().lower())
    s = re.sub(r"^[^a-z0-9]+", "", s).rstrip("-")
    return s or "imported-model"


def derive_id(path: Path, data: dict[str, Any]) -> tuple[str, str]:
    """(id, display name) for an imported config: the directory name (the file stem when the file is
    not called ``config.json``), or ``_name_or_path``'s last part when the directory is a commit hash."""
    raw = path.parent.name if path.name == "config.json" else path.stem
    name_or_path = data.get("_name_or_path")
    if (not raw or _HASH.match(raw)) and isinstance(name_or_path, str) and name_or_path.strip():
        raw = name_or_path.strip().rstrip("/").rsplit("/", 1)[-1]
    return _sanitise_id(raw), raw or "imported model"


def _normalise(kw: dict[str, Any]) -> dict[str, Any]:
    """Drop head counts/dims that equal their defaults, so imports compare equal to presets."""
    if kw.get("n_kv_heads") == kw["n_heads"]:
        kw["n_kv_heads"] = None
    hd = kw.get("head_dim")
    if hd is not None and kw["d_model"] % kw["n_heads"] == 0 and hd == kw["d_model"] // kw["n_heads"]:
        kw["head_dim"] = None
    return kw


def arch_from_hf_config(
    data: Any, *, file: str, lines: dict[Path_t, int], path: Path | None = None, id: str | None = None
) -> ModelArch:
    """Build a :class:`ModelArch` from parsed ``config.json`` data; returns it (``published`` unset)."""
    if not isinstance(data, dict):
        raise UserInputError(
            "expected a JSON object (a Hugging Face config.json)", file=file, line=lines.get(())
        )
    label, family, builder = _dispatch(data, file, lines)
    if label in _TEXT_CONFIG_WRAPPERS or data.get("model_type") in _TEXT_CONFIG_MODEL_TYPES:
        text = data.get("text_config")
        if not isinstance(text, dict):
            raise UserInputError(f"{label} needs a 'text_config' object (its language model)", field="text_config",
                                 file=file, line=lines.get(("text_config",), lines.get(())))
        c = _Config(text, file, lines, label, prefix=("text_config",))
    else:
        c = _Config(data, file, lines, label)
    try:
        kw = _normalise(builder(c))
    except ValidationError as exc:  # MoE/MLA sub-records
        raise UserInputError(f"invalid config for {label}: {exc.errors()[0]['msg']}", file=file) from None
    derived_id, name = derive_id(path or Path(file), data)
    try:
        return ModelArch(
            id=id or derived_id,
            name=name,
            family=family,
            notes=f"imported from {file} ({label})",
            **kw,
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or None
        raise UserInputError(f"invalid config for {label}: {err['msg']}", field=field, file=file) from None


def load_hf_config(path: str | Path, *, id: str | None = None) -> ModelArch:
    """Read a local Hugging Face ``config.json`` (or a directory holding one); returns its
    :class:`ModelArch`. ``id`` overrides the id derived from the directory / ``_name_or_path``."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    file = str(p)
    data, lines = parse_text(read_text(p), file)
    return arch_from_hf_config(data, file=file, lines=lines, path=p, id=id)
