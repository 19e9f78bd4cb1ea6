"""FLOP counts for forward, backward, training, prefill and decode.

Conventions (documented in docs/perf.md):

* A multiply-add is 2 FLOP. A linear layer with P weights costs 2·P FLOP per token forward.
* Backward costs twice the forward for every matmul (gradient w.r.t. inputs and weights), so a
  training step costs 3x the forward; full recomputation adds one more forward (4x), selective
  recomputation (Korthikanti et al. 2022) adds the attention core's forward only.
* Attention core (QK^T and attention·V) per token per layer: 2·h·d_qk·c + 2·h·d_v·c FLOP where
  c is the number of keys attended. ``causal=True`` counts the exact causal average
  c = (s+1)/2 during training/prefill; ``causal=False`` counts c = s, the convention behind
  the PaLM MFU formula (6N + 12·L·h·s) and Megatron's Eq. 3, which validation rows derived
  from those papers use.
* Local attention layers (sliding window w, or chunks of w tokens; Gemma 2/3, gpt-oss, Mistral,
  Llama 4) attend to at most w keys: :func:`mean_local_context` gives their average keys per query,
  and the attention core sums global and local layers separately.
* MFU counts model FLOPs (no recomputation); HFU counts what the hardware executes.
* Norms, softmax, activations and residual adds are O(d) per token and omitted from FLOPs (they
  are memory-bound; the roofline model charges their bytes instead).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from xpuplan.models.arch import ModelArch
from xpuplan.perf.params import param_breakdown
from xpuplan.workload.vocabulary import Recompute


def flops_attention_core_per_token(model: ModelArch, context: float, *, mla_absorbed: bool = False,
                                   local_context: float | None = None) -> float:
    """Attention-core FLOP for one token attending ``context`` keys, all layers (forward).

    Local-attention layers attend ``local_context`` keys (default ``min(context, sliding_window)``,
    right for a decode step; training and prefill pass :func:`mean_local_context`).
    ``mla_absorbed``: DeepSeek MLA with the up-projections absorbed into q and o (how MLA is
    decoded): scores over (kv_lora_rank + rope) dims and values over kv_lora_rank dims.
    """
    if model.mla is not None and mla_absorbed:
        qk = model.mla.kv_lora_rank + model.mla.qk_rope_head_dim
        v = model.mla.kv_lora_rank
    else:
        qk, v = model.qk_head_dim, model.v_head_dim
    keys = model.n_global_layers * context
    if model.n_local_layers:
        assert model.sliding_window is not None
        local = min(context, model.sliding_window) if local_context is None else local_context
        keys += model.n_local_layers * local
    return 2.0 * model.n_heads * (qk + v) * keys


def flops_linear_per_token(model: ModelArch, *, include_head: bool = True) -> float:
    """Forward FLOP of all active matmul weights for one token: 2 · active matmul params."""
    b = param_breakdown(model)
    n = b.attention + b.mlp_dense + b.active_mlp_moe + b.pooler
    if include_head and model.type == "decoder":
        n += model.vocab_size * model.d_model
    return 2.0 * n


def mean_causal_context(seq_len: int, causal: bool) -> float:
    """Average keys attended per query in a sequence of ``seq_len`` tokens."""
    return (seq_len + 1) / 2.0 if causal else float(seq_len)


def mean_local_context(model: ModelArch, seq_len: int, causal: bool = True) -> float:
    """Average keys a local-attention layer of ``model`` attends per query over ``seq_len`` tokens.

    Sliding window w, causal: token i (1-based) sees min(i, w) keys, so the mean is (s+1)/2 when
    s ≤ w, else (w(w+1)/2 + (s-w)·w)/s. Chunked (chunks of w): a full chunk averages (w+1)/2 and a
    last partial chunk of r tokens (r+1)/2. ``causal=False`` (the c = s convention): min(s, w).
    A model without local layers returns the global figure."""
    s, w = seq_len, model.sliding_window
    if w is None:
        return mean_causal_context(s, causal)
    if not causal:
        return float(min(s, w))
    if model.local_attention == "chunked":
        full, rest = divmod(s, w)
        return (full * w * (w + 1) / 2.0 + rest * (rest + 1) / 2.0) / s
    if s <= w:
        return (s + 1) / 2.0
    return (w * (w + 1) / 2.0 + (s - w) * w) / s


@dataclass(frozen=True)
class TrainingFlops:
    """FLOP per trained token, by part. ``model`` excludes recomputation, ``hardware`` includes it."""

    forward_linear: float
    forward_attention: float
    forward: float
    backward: float
    recompute: float
    model: float
    hardware: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def flops_training_per_token(
    model: ModelArch, seq_len: int, recompute: Recompute = "none", *, causal: bool = True
) -> TrainingFlops:
    """Training FLOP per token: forward + backward (2x forward) + recomputation."""
    if seq_len <= 0:
        raise ValueError("seq_len must be positive")
    lin = flops_linear_per_token(model)
    attn = flops_attention_core_per_token(model, mean_causal_context(seq_len, causal),
                                          local_context=mean_local_context(model, seq_len, causal))
    fwd = lin + attn
    bwd = 2.0 * fwd
    if recompute in ("full", "offload"):
        rec = fwd
    elif recompute == "selective":
        rec = attn
    else:
        rec = 0.0
    return TrainingFlops(
        forward_linear=lin,
        forward_attention=attn,
        forward=fwd,
        backward=bwd,
        recompute=rec,
        model=fwd + bwd,
        hardware=fwd + bwd + rec,
    )


def flops_training_total(model: ModelArch, tokens: float, seq_len: int, recompute: Recompute = "none") -> float:
    """Model FLOP to train on ``tokens`` tokens (≈ 6·N·D plus attention)."""
    return flops_training_per_token(model, seq_len, recompute).model * tokens


def flops_6nd(n_params: float, tokens: float) -> float:
    """The Kaplan et al. 2020 approximation C ≈ 6·N·D (no attention term)."""
    return 6.0 * n_params * tokens


def flops_megatron_eq3_per_token(layers: int, hidden: int, seq_len: int, vocab: int) -> float:
    """Narayanan et al. 2021, Eq. 3, per token: 96·l·h²·(1 + s/(6h) + V/(16·l·h)).

    Assumes a classic 4h MLP, MHA, and full recomputation (it counts 4 forward passes); used to
    reproduce rows the paper reports.
    """
    return 96.0 * layers * hidden**2 * (1 + seq_len / (6.0 * hidden) + vocab / (16.0 * layers * hidden))


def flops_prefill(model: ModelArch, prompt_len: int, batch: int = 1, *, logits_all: bool = False) -> float:
    """Forward FLOP to prefill ``batch`` prompts of ``prompt_len`` tokens (exact causal attention).

    Only the last position's logits are computed unless ``logits_all`` (serving engines do this).
    """
    lin = flops_linear_per_token(model, include_head=False) * prompt_len
    # exact causal sum of keys over the prompt: mean keys per query times the prompt length
    attn = flops_attention_core_per_token(model, (prompt_len + 1) / 2.0,
                                          local_context=mean_local_context(model, prompt_len)) * prompt_len
    head = 2.0 * model.vocab_size * model.d_model * (prompt_len if logits_all else 1)
    if model.type == "encoder":
        head = 0.0
        attn = flops_attention_core_per_token(model, float(prompt_len)) * prompt_len  # bidirectional
    return batch * (lin + attn + head)


def flops_decode_step(model: ModelArch, batch: int, context: int) -> float:
    """Forward FLOP for one decode step of ``batch`` sequences each attending ``context`` tokens."""
    lin = flops_linear_per_token(model)
    attn = flops_attention_core_per_token(model, float(context), mla_absorbed=True)
    return batch * (lin + attn)


@dataclass(frozen=True)
class FlopsSummary:
    """Headline FLOP figures for a model at a sequence length."""

    model_id: str
    seq_len: int
    params_total: int
    params_active: int
    forward_per_token: float
    training_per_token: float
    training_per_token_full_recompute: float
    six_n_per_token: float
    attention_share: float
    prefill_per_sequence: float
    decode_per_token: float

    def to_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


def flops_summary(model: ModelArch, seq_len: int) -> FlopsSummary:
    """Forward, training (with and without full recompute), prefill and decode FLOP figures."""
    p = param_breakdown(model)
    tr = flops_training_per_token(model, seq_len)
    full = flops_training_per_token(model, seq_len, "full")
    return FlopsSummary(
        model_id=model.id,
        seq_len=seq_len,
        params_total=p.total,
        params_active=p.active,
        forward_per_token=tr.forward,
        training_per_token=tr.model,
        training_per_token_full_recompute=full.hardware,
        six_n_per_token=6.0 * p.active,
        attention_share=tr.forward_attention / tr.forward,
        prefill_per_sequence=flops_prefill(model, seq_len),
        decode_per_token=flops_decode_step(model, 1, seq_len),
    )
