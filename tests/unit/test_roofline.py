import pytest

from tests.unit.archs import LLAMA3_70B
from tests.unit.hwfixture import device
from xpuplan.models import get_model
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.ops import expected_experts_touched, layer_ops
from xpuplan.perf.roofline import OpCost, cost_elementwise, cost_gemm, gemm_efficiency, op_time

EFF = Efficiency(gemm_peak_fraction=0.8, gemm_half_dim=0, low_precision_factor=1.0, attention_peak_fraction=0.5,
                 memory_bw_fraction=1.0, kernel_overhead_s=0.0, scale_up_bw_fraction=0.8, scale_out_bw_fraction=0.8,
                 scale_up_latency_s=0.0, scale_out_latency_s=0.0)


def test_gemm_cost():
    c = cost_gemm(512, 1024, 4096)
    assert c.flops == 2 * 512 * 1024 * 4096
    assert c.bytes == 2 * (512 * 4096 + 4096 * 1024 + 512 * 1024)


def test_guide_linear_layer_is_compute_bound(tmp_path):
    # The guide: a 4096x1024 linear layer at batch 512 is compute-bound.
    d = device(tmp_path)  # 1000 TFLOP/s, 4000 GB/s: ridge 200 FLOP/B (at 80%: 200)
    t = op_time(cost_gemm(512, 1024, 4096), d, "bf16", EFF)
    assert t.intensity_flop_per_byte > 300
    assert t.bound == "compute"
    assert t.time_s == pytest.approx(2 * 512 * 1024 * 4096 / 800e12)


def test_guide_relu_is_memory_bound(tmp_path):
    d = device(tmp_path)
    t = op_time(cost_elementwise(1e8, name="relu"), d, "bf16", EFF)
    assert t.bound == "memory"
    assert t.intensity_flop_per_byte == pytest.approx(0.25)
    assert t.time_s == pytest.approx(4e8 / 4000e9)


def test_small_gemm_efficiency_drops():
    eff = EFF.merged({"gemm_half_dim": 64}, "test")
    assert gemm_efficiency(eff, 64, "bf16") == pytest.approx(0.4)
    assert gemm_efficiency(eff, 4096, "bf16") > 0.78


def test_decode_layer_is_memory_bound(tmp_path):
    d = device(tmp_path)
    ops = layer_ops(LLAMA3_70B, batch=1, q_len=1, kv_len=4096)
    times = [op_time(o, d, "bf16", EFF) for o in ops]
    gemms = [t for o, t in zip(ops, times, strict=True) if o.op_class == "gemm"]
    assert all(t.bound == "memory" for t in gemms)


def test_prefill_layer_gemms_compute_bound(tmp_path):
    d = device(tmp_path)
    ops = layer_ops(LLAMA3_70B, batch=1, q_len=4096, kv_len=4096)
    gemms = [op_time(o, d, "bf16", EFF) for o in ops if o.op_class == "gemm"]
    assert all(t.bound == "compute" for t in gemms)


def test_layer_ops_flops_match_model_flops():
    from xpuplan.perf.flops import flops_linear_per_token

    ops = layer_ops(LLAMA3_70B, batch=1, q_len=1, kv_len=1)
    gemm_flops = sum(o.flops for o in ops if o.op_class == "gemm")
    per_layer = (flops_linear_per_token(LLAMA3_70B, include_head=False)) / LLAMA3_70B.n_layers
    assert gemm_flops == pytest.approx(per_layer, rel=1e-6)


def test_experts_touched():
    assert expected_experts_touched(8, 2, 1) == pytest.approx(2)
    assert expected_experts_touched(256, 8, 10_000) == pytest.approx(256)


def test_routed_rows_counts_token_copies_not_tokens():
    """``routed_rows`` takes the copies (tokens x top-k) reaching a rank: one decoding sequence of a top-8 model
    touches its 8 experts (before 0.4.22 its 8 copies were counted as 8 tokens of 8 picks each: 52 experts)."""
    from xpuplan.perf.ops import routed_rows

    assert routed_rows(128, 8, 8)[0] == pytest.approx(8.0)
    assert routed_rows(8, 2, 2)[0] == pytest.approx(2.0)  # Mixtral, one token
    # T tokens: E(1 - (1 - k/E)^T), whatever way the copies are counted
    assert routed_rows(128, 8, 8 * 8)[0] == pytest.approx(expected_experts_touched(128, 8, 8))
    # EP: a rank holding 16 of the 128 experts gets 1/8 of the group's copies and 1/8 of the touched experts
    whole, _ = routed_rows(128, 8, 64 * 8)
    local, rows = routed_rows(16, 8, 64 * 8 / 8, n_experts=128)
    assert local == pytest.approx(whole / 8)
    assert rows == round(64 * 8 / 8 / local)
    # and the serving step reads only those experts' weights at batch 1
    q = get_model("qwen3-30b-a3b")
    up = next(o for o in layer_ops(q, batch=1, q_len=1, kv_len=1, moe_layer=True) if o.name == "experts up/gate")
    assert up.flops == pytest.approx(8 * 2.0 * q.d_model * 2 * q.moe.expert_ffn_dim)


def test_family_efficiency_applies_to_npus():
    from xpuplan.catalog import load_catalog
    from xpuplan.perf.efficiency import default_efficiency, efficiency_for

    npu = efficiency_for(load_catalog().get("910B"))
    assert npu.source.startswith("family:")
    assert npu.gemm_peak_fraction < default_efficiency().gemm_peak_fraction


def test_encoder_attention_is_bidirectional():
    from tests.unit.archs import BERT_BASE

    ops = layer_ops(BERT_BASE, batch=1, q_len=128, kv_len=128)
    attn = next(o for o in ops if o.op_class == "attention")
    assert attn.flops == pytest.approx(2 * 12 * 128 * 128 * (64 + 64))


def test_block_scaled_fp4_gemms_reach_a_smaller_share_than_fp8():
    """NVFP4/MXFP4 GEMMs: the FP8 fraction times fp4_factor (cuBLAS on a B200: 58.2% of the FP4 peak where FP8
    reaches 76.3% of its own); FP8 and bf16 are untouched, and the factor is data a user can override."""
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.catalog.efficiency import DEFAULT_FP4_FACTOR
    from xpuplan.catalog.loader import get_device

    eff = EFF.merged({"low_precision_factor": 0.9}, "test")
    assert eff.fp4_factor == DEFAULT_FP4_FACTOR == pytest.approx(58.2 / 76.3, abs=0.002)
    assert gemm_efficiency(eff, 4096, "fp8") == pytest.approx(0.8 * 0.9)
    assert gemm_efficiency(eff, 4096, "fp4") == pytest.approx(0.8 * 0.9 * DEFAULT_FP4_FACTOR)
    assert gemm_efficiency(eff, 4096, "bf16") == pytest.approx(0.8)
    assert gemm_efficiency(eff.merged({"fp4_factor": 1.0}, "user"), 4096, "fp4") == pytest.approx(0.8 * 0.9)
    b200 = default_assumptions().efficiency(get_device("nvidia-b200-180gb"))
    assert b200.fp4_factor == DEFAULT_FP4_FACTOR


# ---------------------------------------------------------------------------------------
# head dimension: the softmax exponentials' share of fused attention
# ---------------------------------------------------------------------------------------
def test_attention_head_dim_factor_reproduces_flashattention3_on_h100():
    from xpuplan.perf.roofline import ATTENTION_EXP_HEAD_DIM, attention_head_dim_factor

    def law(d: float, k: float) -> float:  # rate / (matmul-only rate), uncapped
        return 1.0 / (1.0 + k / d)

    # FA3, H100 SXM5, forward at 16K tokens (arXiv 2407.08608 Fig. 5): BF16 497 / 648 / 756 TFLOP/s at d 64 / 128 / 256
    k = ATTENTION_EXP_HEAD_DIM
    assert law(64, k) / law(128, k) == pytest.approx(497 / 648, rel=0.01)
    assert law(256, k) / law(128, k) == pytest.approx(756 / 648, rel=0.02)
    # FP8 doubles the matmul rate, not the exponentials': FA3 FP8 613 / 1,171 at d 64 / 256
    assert law(64, 2 * k) / law(256, 2 * k) == pytest.approx(613 / 1171, rel=0.01)
    # the factor is relative to the calibration head dimension (128) and never above 1
    assert attention_head_dim_factor(128) == 1.0 and attention_head_dim_factor(256) == 1.0
    assert attention_head_dim_factor(64) == pytest.approx(497 / 648, rel=0.01)
    assert attention_head_dim_factor(64, "fp8") < attention_head_dim_factor(64) < 1.0
    # the backward (10·d matmul FLOP per exponential) loses less: FA3 backward 422 / 501 at 2K tokens, d 64 / 128
    assert attention_head_dim_factor(64, backward=True) == pytest.approx(422 / 501, rel=0.05)
    assert attention_head_dim_factor(64) < attention_head_dim_factor(64, backward=True)


def test_attention_op_time_slows_with_narrow_heads_only():
    from xpuplan.catalog.loader import get_device
    from xpuplan.perf.roofline import cost_attention

    d = get_device("nvidia-h100-sxm-80gb")
    # the same FLOPs at head dimension 64 and 128 (twice the heads at 64): compute-bound prefill
    narrow = op_time(cost_attention(1, 64, 8192, 8192, 64), d)
    wide = op_time(cost_attention(1, 32, 8192, 8192, 128), d)
    assert narrow.compute_s / wide.compute_s == pytest.approx(1 / 0.7667, rel=0.01)
    widest = op_time(cost_attention(1, 16, 8192, 8192, 256), d)
    assert widest.compute_s == pytest.approx(wide.compute_s, rel=1e-9)


def test_k_factor_scales_the_compute_time_only(tmp_path):
    """OpCost.k_factor (a short reduction dimension) multiplies the compute term; a memory-bound op keeps its
    memory time, and the default is 1."""
    dev = device(tmp_path)
    g = cost_gemm(8192, 8192, 256)
    slow = OpCost(g.name, g.op_class, g.flops, g.bytes, g.min_dim, k_factor=2.0)
    assert g.k_factor == 1.0
    a, b = op_time(g, dev), op_time(slow, dev)
    assert b.compute_s == pytest.approx(2.0 * a.compute_s) and b.memory_s == a.memory_s
    tiny = cost_gemm(1, 8192, 8192)  # decode-like: memory-bound
    t1 = op_time(tiny, dev)
    t2 = op_time(OpCost(tiny.name, "gemm", tiny.flops, tiny.bytes, tiny.min_dim, k_factor=1.5), dev)
    assert t1.bound == "memory" and t2.time_s == pytest.approx(t1.time_s)


def test_busiest_expert_parallel_rank_gets_more_than_its_share():
    """A balanced router still sends a step's copies unevenly: the EP rank with the most sets the pace. The
    excess is statistical, shrinks as the step grows, and vanishes when every token hits every expert."""
    from xpuplan.perf.ops import busiest_rank_copies, expected_max_normal

    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(8) == pytest.approx(1.42, abs=0.02)  # E[max of 8 standard normals] = 1.4236
    assert busiest_rank_copies(512.0, 1, 128, 8) == 512.0
    excess = [busiest_rank_copies(t * 8.0, 8, 128, 8) / (t * 8.0 / 8) - 1 for t in (1, 8, 64, 1024)]
    assert excess == sorted(excess, reverse=True) and excess[-1] < 0.05 < 0.10 < excess[2] < 0.25
    assert busiest_rank_copies(8.0, 8, 128, 8) <= 8.0  # never more copies than were sent
    assert busiest_rank_copies(64.0, 8, 8, 8) == pytest.approx(8.0)  # top-8 of 8: every rank gets exactly its share
    q = get_model("qwen3-30b-a3b")

    def up(busiest: bool) -> float:
        ops = layer_ops(q, batch=16, q_len=1, kv_len=1, ep=8, moe_layer=True, busiest_rank=busiest)
        return next(o for o in ops if o.name == "experts up/gate").bytes

    assert up(True) > up(False)  # the busiest rank touches more of its experts than the mean rank
    dense = layer_ops(get_model("llama3-8b"), batch=16, q_len=1, kv_len=1, busiest_rank=True)
    assert dense == layer_ops(get_model("llama3-8b"), batch=16, q_len=1, kv_len=1)
