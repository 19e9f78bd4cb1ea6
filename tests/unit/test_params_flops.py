import pytest

from tests.unit.archs import BERT_BASE, DEEPSEEK_V3, GPT3, LLAMA3_70B, MIXTRAL
from xpuplan.perf.flops import (
    flops_6nd,
    flops_decode_step,
    flops_megatron_eq3_per_token,
    flops_prefill,
    flops_training_per_token,
)
from xpuplan.perf.params import param_breakdown, params_attention_per_layer, params_mlp_dense


@pytest.mark.parametrize(
    "arch, total_b, active_b",
    [
        (LLAMA3_70B, 70.55, 70.55),  # Meta: 70.6B
        (GPT3, 174.6, 174.6),  # Brown et al. 2020: 175.0B
        (DEEPSEEK_V3, 671.0, 37.55),  # DeepSeek-V3 report: 671B total, 37B active
        (MIXTRAL, 46.70, 12.88),  # Mistral: 46.7B total, 12.9B active
    ],
)
def test_parameter_totals(arch, total_b, active_b):
    b = param_breakdown(arch)
    assert b.total / 1e9 == pytest.approx(total_b, rel=2e-3)
    assert b.active / 1e9 == pytest.approx(active_b, rel=2e-3)


def test_bert_base_exact_count():
    # bert-base-uncased has 109,482,240 parameters with the pooler.
    assert param_breakdown(BERT_BASE).total == 109_482_240


def test_gqa_attention_params():
    # q and o: d x d; k and v: d x (8 heads x 128)
    assert params_attention_per_layer(LLAMA3_70B) == 2 * 8192 * 8192 + 2 * 8192 * 1024


def test_gated_mlp_has_three_matrices():
    assert params_mlp_dense(LLAMA3_70B) == 3 * 8192 * 28672
    assert params_mlp_dense(GPT3) == 2 * 12288 * 49152 + 49152 + 12288


def test_deepseek_mtp_reported_separately():
    b = param_breakdown(DEEPSEEK_V3)
    assert 10e9 < b.mtp < 16e9  # DeepSeek-V3 report: 14B MTP module (685B with it)


def test_training_flops_are_three_forwards_and_close_to_6n():
    t = flops_training_per_token(LLAMA3_70B, 4096)
    assert t.model == pytest.approx(3 * t.forward)
    assert t.hardware == t.model
    six_n = 6 * param_breakdown(LLAMA3_70B).total
    assert 1.0 < t.model / six_n < 1.15  # attention adds a few percent at 4k


def test_recompute_adds_forward():
    full = flops_training_per_token(LLAMA3_70B, 4096, "full")
    sel = flops_training_per_token(LLAMA3_70B, 4096, "selective")
    assert full.hardware == pytest.approx(4 * full.forward)
    assert sel.hardware == pytest.approx(sel.model + sel.forward_attention)
    assert full.model == sel.model  # MFU ignores recomputation


def test_megatron_eq3_matches_our_count_for_classic_gpt():
    # Eq. 3 counts full recompute (4 forwards), non-causal attention and the logits layer.
    ours = flops_training_per_token(GPT3, 2048, "full", causal=False).hardware
    theirs = flops_megatron_eq3_per_token(96, 12288, 2048, 50257)
    assert ours == pytest.approx(theirs, rel=0.01)


def test_causal_attention_is_half_of_noncausal():
    c = flops_training_per_token(LLAMA3_70B, 8192, causal=True).forward_attention
    n = flops_training_per_token(LLAMA3_70B, 8192, causal=False).forward_attention
    assert c / n == pytest.approx(8193 / 2 / 8192)


def test_gpt3_training_compute_matches_paper():
    # Brown et al. 2020 Table D.1: 3.14e23 FLOP for 300B tokens (6ND); 3640 PF-days.
    assert flops_6nd(174.6e9, 300e9) == pytest.approx(3.14e23, rel=0.01)


def test_prefill_and_decode():
    p = flops_prefill(LLAMA3_70B, 1000, batch=2)
    lin = 2 * (param_breakdown(LLAMA3_70B).total - 2 * 128256 * 8192) * 1000 * 2
    assert p > lin
    d1 = flops_decode_step(LLAMA3_70B, 1, 10)
    d2 = flops_decode_step(LLAMA3_70B, 1, 10000)
    assert d2 > d1
    assert flops_decode_step(LLAMA3_70B, 4, 10) == pytest.approx(4 * d1)


def test_mla_decode_attention_uses_latent_dims():
    from xpuplan.perf.flops import flops_attention_core_per_token

    absorbed = flops_attention_core_per_token(DEEPSEEK_V3, 1000, mla_absorbed=True)
    assert absorbed == pytest.approx(61 * 2 * 128 * (512 + 64 + 512) * 1000)


def test_encoder_has_no_output_head_flops():
    assert param_breakdown(BERT_BASE).output_head == 0


def test_mla_down_projections_are_whole_on_every_tensor_parallel_rank(monkeypatch):
    """MLA's query and KV compressions (d x q_lora_rank, d x (kv_lora_rank + rope)) feed every head, so Megatron-Core
    duplicates them and vLLM / SGLang run them as one replicated GEMM: a rank's qkv projection keeps them whole at
    any TP, and only the up-projections split. Weights per device follow the same rule."""
    from xpuplan.perf.memory import params_per_device
    from xpuplan.perf.ops import layer_ops
    from xpuplan.perf.params import params_attention_replicated_per_layer

    m = DEEPSEEK_V3.mla
    d = DEEPSEEK_V3.d_model
    replicated = params_attention_replicated_per_layer(DEEPSEEK_V3)
    assert replicated == d * m.q_lora_rank + m.q_lora_rank + d * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank
    assert params_attention_replicated_per_layer(LLAMA3_70B) == 0

    def qkv_flops(tp: int) -> float:
        op = next(o for o in layer_ops(DEEPSEEK_V3, batch=1, q_len=1024, kv_len=1024, tp=tp) if o.name == "qkv projection")
        return float(op.flops)

    whole = qkv_flops(1)
    split = whole - 2 * 1024 * replicated
    assert qkv_flops(8) == pytest.approx(2 * 1024 * replicated + split / 8, rel=1e-3)
    assert qkv_flops(8) > whole / 8 * 2  # the replicated part dominates a TP8 rank's compressions
    import xpuplan.perf.memory as memory

    with_copies = params_per_device(DEEPSEEK_V3, tp=8).dense
    monkeypatch.setattr(memory, "params_attention_replicated_per_layer", lambda model: 0)  # everything split
    assert with_copies - params_per_device(DEEPSEEK_V3, tp=8).dense == pytest.approx(
        DEEPSEEK_V3.n_layers * replicated * (1 - 1 / 8), rel=1e-6)
    assert params_attention_per_layer(DEEPSEEK_V3) > replicated
