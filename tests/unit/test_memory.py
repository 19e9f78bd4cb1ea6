import pytest

from tests.unit.archs import DEEPSEEK_V3, GPT3, LLAMA3_70B, MEGATRON_BLOCK, MIXTRAL
from xpuplan.errors import UserInputError
from xpuplan.perf.memory import (
    STATE_RECIPES,
    activation_bytes_per_layer,
    inference_memory,
    inference_weight_bytes,
    interleave_activation_factor,
    kv_cache_bytes_per_token,
    lora_params,
    params_per_device,
    pipeline_inflight_microbatches,
    saved_linear_input_bytes,
    training_memory,
)
from xpuplan.units import GB, GiB

S, B, H, A = 2048, 1, 1024, 16


def test_korthikanti_eq1_no_parallelism():
    got = activation_bytes_per_layer(MEGATRON_BLOCK, S, B, flash_attention=False, dropout=True)
    assert got == pytest.approx(S * B * H * (34 + 5 * A * S / H))


def test_korthikanti_eq2_tensor_parallel_without_sp():
    got = activation_bytes_per_layer(MEGATRON_BLOCK, S, B, tp=8, sp=False, flash_attention=False, dropout=True)
    assert got == pytest.approx(S * B * H * (10 + 24 / 8 + 5 * A * S / (H * 8)))


def test_korthikanti_eq4_tp_and_sp():
    got = activation_bytes_per_layer(MEGATRON_BLOCK, S, B, tp=8, sp=True, flash_attention=False, dropout=True)
    assert got == pytest.approx(S * B * H / 8 * (34 + 5 * A * S / H))


def test_korthikanti_selective_and_full():
    sel = activation_bytes_per_layer(MEGATRON_BLOCK, S, B, tp=8, sp=True, recompute="selective", flash_attention=False,
                                     dropout=True)
    assert sel == pytest.approx(S * B * H * 34 / 8)
    full = activation_bytes_per_layer(MEGATRON_BLOCK, S, B, tp=8, sp=True, recompute="full")
    assert full == pytest.approx(2 * S * B * H / 8)


def test_context_parallel_divides_sequence():
    a1 = activation_bytes_per_layer(LLAMA3_70B, 8192, 1, tp=8, recompute="selective")
    a2 = activation_bytes_per_layer(LLAMA3_70B, 8192, 1, tp=8, cp=2, recompute="selective")
    assert a2 == pytest.approx(a1 / 2)


def test_pipeline_inflight():
    assert pipeline_inflight_microbatches(1, 8) == 1
    assert pipeline_inflight_microbatches(4, 16) == 4
    assert pipeline_inflight_microbatches(4, 2) == 2
    assert pipeline_inflight_microbatches(4, 16, vpp=2) == pytest.approx(4 * (1 + 3 / 8))


def test_fp8_saved_linear_inputs():
    # Megatron block (MHA, classic 4h MLP, no dropout): with 1-byte linear inputs the two block inputs (norm
    # outputs) halve, the attention output gains the projection's 1-byte copy, the MLP's FC2 input halves
    base = activation_bytes_per_layer(LLAMA3_70B, 8192, 1, tp=8, recompute="selective")
    fp8 = activation_bytes_per_layer(LLAMA3_70B, 8192, 1, tp=8, recompute="selective", linear_input_bytes=1.0)
    s, h, f, t = 8192, LLAMA3_70B.d_model, LLAMA3_70B.ffn_dim, 8
    o = LLAMA3_70B.n_heads * LLAMA3_70B.v_head_dim
    expected_saving = (2 * s * h * 1.0) / t - (s * o * 1.0) / t + (s * f * 1.0) / t
    assert base - fp8 == pytest.approx(expected_saving)
    assert saved_linear_input_bytes("fp8", True) == 1.0 and saved_linear_input_bytes("fp4", True) == 1.0
    assert saved_linear_input_bytes("fp8", False) is None and saved_linear_input_bytes("bf16", True) is None
    # full recomputation keeps only the layer input, in 16 bits
    assert activation_bytes_per_layer(LLAMA3_70B, 8192, 1, tp=8, recompute="full", linear_input_bytes=1.0) == (
        activation_bytes_per_layer(LLAMA3_70B, 8192, 1, tp=8, recompute="full"))


def test_interleave_extra_activations_need_enough_microbatches():
    # Megatron-Core's interleaved warm-up on stage 0 is 2(pp-1) + (vpp-1)pp chunk forwards, capped at the
    # step's m·vpp: with m >= pp + (pp-1)/vpp the paper's factor 1 + (pp-1)/(pp·vpp) applies ...
    assert float(interleave_activation_factor(16, 64, 4)) == pytest.approx(1 + 15 / 64)
    # ... with m = pp every forward is warm-up, and stage 0 holds exactly what plain 1F1B holds
    assert float(interleave_activation_factor(16, 16, 4)) == pytest.approx(1.0)
    assert pipeline_inflight_microbatches(16, 16, vpp=4) == pytest.approx(16)
    # in between: min(m, pp + (pp-1)/vpp) / pp
    assert float(interleave_activation_factor(16, 18, 4)) == pytest.approx(18 / 16)
    # no interleaving or no pipeline: no change
    assert float(interleave_activation_factor(16, 64, 1)) == 1.0
    assert float(interleave_activation_factor(1, 64, 4)) == 1.0


def test_interleaving_at_m_equal_pp_costs_no_memory():
    kw = dict(seq_len=8192, micro_batch=1, tp=8, pp=16, dp=128, zero_stage=1, recompute="selective")
    plain = training_memory(LLAMA3_70B, vpp=1, n_microbatches=16, **kw)
    inter = training_memory(LLAMA3_70B, vpp=5, n_microbatches=16, **kw)
    more = training_memory(LLAMA3_70B, vpp=5, n_microbatches=64, **kw)
    assert inter.activations == pytest.approx(plain.activations)
    assert more.activations > plain.activations


def test_guide_16_bytes_per_parameter_full_finetune():
    # The guide: ~16 GB per billion parameters for full fine-tuning with Adam (mixed precision).
    assert STATE_RECIPES["bf16-adam"].total == 16
    m = training_memory(LLAMA3_70B, seq_len=128, micro_batch=1, zero_stage=0, recompute="full")
    assert m.states / m.params_on_device == pytest.approx(16)


def test_zero_stages_shard_states():
    kw = dict(seq_len=2048, tp=8, pp=1, dp=16)
    z0 = training_memory(GPT3, zero_stage=0, **kw)
    z1 = training_memory(GPT3, zero_stage=1, **kw)
    z2 = training_memory(GPT3, zero_stage=2, **kw)
    z3 = training_memory(GPT3, zero_stage=3, **kw)
    assert z1.optimizer_states == pytest.approx(z0.optimizer_states / 16)
    assert z1.gradients == z0.gradients
    assert z2.gradients == pytest.approx(z0.gradients / 16)
    assert z3.weights == pytest.approx(z0.weights / 16)
    assert z0.total > z1.total > z2.total > z3.total - z3.workspace + z2.workspace


def test_gpt3_does_not_fit_8_h100_with_plain_adam():
    # 175B x 16 B = 2.8 TB of states; 8 x 80 GB = 640 GB even fully sharded.
    m = training_memory(GPT3, seq_len=2048, tp=8, zero_stage=3, dp=1, recompute="full")
    assert m.states > 8 * 80 * GB / 8  # per device more than 80 GB


def test_lora_and_qlora_shrink_memory():
    full = training_memory(LLAMA3_70B, seq_len=2048, recompute="full")
    lora = training_memory(LLAMA3_70B, seq_len=2048, recompute="full", method="lora", lora_rank=16)
    qlora = training_memory(LLAMA3_70B, seq_len=2048, recompute="full", method="qlora", lora_rank=16)
    assert lora.total < full.total / 5
    assert qlora.weights < lora.weights / 3
    # QLoRA on a 70B fits a single 48-80 GB card with a short sequence (Dettmers et al. 2023: 65B on 48 GB)
    assert qlora.total < 60 * GB
    assert lora.trainable_params_on_device == lora_params(LLAMA3_70B, 16)


def test_lora_params_formula():
    # r x (d_in + d_out) per matrix; q only
    assert lora_params(LLAMA3_70B, 8, ("q",)) == 80 * 8 * (8192 + 8192)
    with pytest.raises(UserInputError):
        lora_params(LLAMA3_70B, 8, ("bogus",))


def test_expert_parallel_shards_experts():
    p1 = params_per_device(DEEPSEEK_V3, ep=1)
    p64 = params_per_device(DEEPSEEK_V3, ep=64)
    assert p64.expert == pytest.approx(p1.expert / 64)
    assert p64.dense == p1.dense


def test_guide_llama3_70b_weights_140gb_fp16():
    assert inference_weight_bytes(LLAMA3_70B, "bf16") == pytest.approx(141.1 * GB, rel=0.005)


def test_guide_llama3_70b_kv_128k_is_40_gib():
    kv = kv_cache_bytes_per_token(LLAMA3_70B, "bf16") * 128 * 1024
    assert kv == pytest.approx(40 * GiB)
    assert kv_cache_bytes_per_token(LLAMA3_70B) == 2 * 80 * 8 * 128 * 2


def test_mla_kv_cache():
    assert kv_cache_bytes_per_token(DEEPSEEK_V3, "bf16") == 61 * (512 + 64) * 2


def test_int4_group_overhead():
    w16 = inference_weight_bytes(MIXTRAL, "bf16")
    w4 = inference_weight_bytes(MIXTRAL, "int4")
    # body at 0.5 + 4/128 B/param, embeddings kept 16-bit
    assert 0.26 < w4 / w16 < 0.30


def test_inference_memory_splits_over_tp():
    m1 = inference_memory(LLAMA3_70B, batch=8, context=4096, tp=1)
    m8 = inference_memory(LLAMA3_70B, batch=8, context=4096, tp=8)
    assert m8.weights == pytest.approx(m1.weights / 8, rel=1e-3)  # norms are replicated over TP
    assert m8.kv_cache == pytest.approx(m1.kv_cache / 8)
    with pytest.raises(UserInputError):
        inference_memory(LLAMA3_70B, batch=0)
