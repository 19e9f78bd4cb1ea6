import pytest

from tests.unit.archs import DEEPSEEK_V3, GPT3, LLAMA3_70B, MEGATRON_BLOCK, MIXTRAL
from xpuplan.errors import UserInputError
from xpuplan.perf.memory import (
    STATE_RECIPES,
    activation_bytes_per_layer,
    inference_memory,
    inference_weight_bytes,
    kv_cache_bytes_per_token,
    lora_params,
    params_per_device,
    pipeline_inflight_microbatches,
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
