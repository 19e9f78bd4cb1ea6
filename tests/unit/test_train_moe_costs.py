"""Fine-grained MoE training costs: per-MoE-layer fixed costs (router, permutation, probability
scaling, token-count sync, per-expert GEMM launches) and the narrow-K efficiency of expert GEMMs."""

from __future__ import annotations

import numpy as np
import pytest

import xpuplan.perf.ops as ops
import xpuplan.train.compute as compute
from xpuplan.catalog import get_device
from xpuplan.catalog.stacks import training_stack
from xpuplan.models import get_model
from xpuplan.perf.efficiency import efficiency_for
from xpuplan.perf.ops import (
    GEMM_K_TILE_OVERHEAD,
    GEMM_K_TILE_OVERHEAD_LOW_PRECISION,
    SHORT_K_LAW_MIN,
    expert_gemm_k_factor,
    gemm_k_tile_overhead,
    gemm_short_k_rate,
    layer_ops,
    routed_rows,
    short_k_factor,
)
from xpuplan.perf.roofline import op_time
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.train.compute import (
    FP8_CAST_BYTES_PER_ELEMENT,
    MOE_HOST_SYNC_S,
    MOE_PROBS_BYTES_PER_ELEMENT,
    MOE_ROUTER_BYTES_PER_SCORE,
    _cast_op,
    layer_compute,
)
from xpuplan.train.phases import MOE_COUNT_BYTES_PER_EXPERT
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")


H100 = "nvidia-h100-sxm-80gb"


def _lc(model_id: str, *, mb: int = 2, seq: int = 4096, tp: int = 1, ep: int = 8, prec: str = "bf16", **kw):
    dev = get_device(H100)
    return layer_compute(get_model(model_id), dev, efficiency_for(dev), micro_batch=mb, seq_len=seq, tp=tp, cp=1,
                         ep=ep, sp=tp > 1, precision=prec, **kw)


def _without_new_terms(monkeypatch) -> None:
    """The MoE layer as costed before the per-layer fixed costs and the narrow-K term existed."""
    monkeypatch.setattr(compute, "MOE_ROUTER_BYTES_PER_SCORE", 0.0)
    monkeypatch.setattr(compute, "MOE_PROBS_BYTES_PER_ELEMENT", 0.0)
    monkeypatch.setattr(compute, "moe_host_sync_s", lambda eff: 0.0)
    monkeypatch.setattr(ops, "GEMM_K_TILE_OVERHEAD", 0.0)
    monkeypatch.setattr(ops, "GEMM_K_TILE_OVERHEAD_LOW_PRECISION", 0.0)
    monkeypatch.setattr(compute, "routed_rows", lambda *a: (1.0, 1.0))


def _moe_fwd(lc) -> float:
    return lc.moe_gemm + lc.moe_elem + lc.moe_sync


# ---- narrow-K expert GEMMs ---------------------------------------------------------------------
def test_deepgemm_fp8_runs_short_k_better_than_cublas():
    """DeepGEMM's public H800 FP8 table (M = 4096; 590 / 990 / 1025 / 1304 / 1358 TFLOP/s at K = 512 / 1536 / 2048
    / 7168 / 16384) fits K0 = 640: hand-tuned kernels lose less at short K than cuBLAS's FP8 (K0 above)."""
    def rel(k: float, k0: float) -> float:
        return (k / (k + k0)) / (16384 / (16384 + k0))
    for k, printed in ((512, 590 / 1358), (1536, 990 / 1358), (2048, 1025 / 1358), (7168, 1304 / 1358)):
        assert rel(k, 640.0) == pytest.approx(printed, abs=0.05)
        assert rel(k, GEMM_K_TILE_OVERHEAD_LOW_PRECISION) <= printed


#: cuBLAS, M = N = 4096, graph-replayed (benchmarks/data/device_runs/{h200,h100}_expert_gemm_2026-11-27.json):
#: TFLOP/s at K = 768, 1024, 1536, 2048, 2880, 4096, 7168
CUBLAS_K_SWEEP = {
    ("H200", "bf16"): (494, 531, 582, 608, 742, 756, 786),
    ("H200", "fp8"): (623, 726, 841, 1082, 1172, 1313, 1380),
    ("H100", "bf16"): (523, 572, 673, 701, 738, 787, 805),
    ("H100", "fp8"): (648, 761, 996, 1103, 1164, 1334, 1416),
}


@pytest.mark.parametrize("card,dtype", list(CUBLAS_K_SWEEP))
def test_k_tile_overhead_reproduces_the_measured_cublas_sweeps(card, dtype):
    """Over the widths of fine-grained experts up to the hidden sizes, the short-K law with each precision's K0
    gives the measured rate at every K relative to K = 7168 within 15% on both cards; 8-bit K0 is the longer."""
    ks = (768, 1024, 1536, 2048, 2880, 4096, 7168)
    k0 = gemm_k_tile_overhead(dtype)
    measured = CUBLAS_K_SWEEP[(card, dtype)]
    for k, rate in zip(ks, measured, strict=True):
        modelled = (k / (k + k0)) / (7168 / (7168 + k0))
        assert modelled == pytest.approx(rate / measured[-1], rel=0.15)
    assert gemm_k_tile_overhead("fp8") == GEMM_K_TILE_OVERHEAD_LOW_PRECISION > 2 * GEMM_K_TILE_OVERHEAD * 0.9
    assert gemm_k_tile_overhead("fp4") == GEMM_K_TILE_OVERHEAD_LOW_PRECISION
    assert gemm_k_tile_overhead("bf16") == GEMM_K_TILE_OVERHEAD


#: the same sweeps below the law's range: TFLOP/s at K = 256, 512, 768
CUBLAS_SHORT_K = {
    ("H200", "bf16"): (318, 437, 494),
    ("H200", "fp8"): (300, 510, 623),
    ("H100", "bf16"): (371, 457, 523),
    ("H100", "fp8"): (354, 550, 648),
}


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_short_k_rate_below_the_law_follows_the_measured_sweeps(dtype):
    """Below K = 768 the rate is the sweeps' own (mean of both cards, relative to K = 768), not the law's
    extrapolation, which overstates the loss there; from 768 up it is the law K / (K + K0) unchanged."""
    for i, k in enumerate((256, 512)):
        measured = sum(CUBLAS_SHORT_K[(c, dtype)][i] / CUBLAS_SHORT_K[(c, dtype)][2] for c in ("H200", "H100")) / 2
        assert gemm_short_k_rate(k, dtype) / gemm_short_k_rate(768, dtype) == pytest.approx(measured, rel=0.01)
        law = (k / (k + gemm_k_tile_overhead(dtype))) / (768 / (768 + gemm_k_tile_overhead(dtype)))
        assert law < measured  # the law would charge more than was measured
    k0 = gemm_k_tile_overhead(dtype)
    for k in (SHORT_K_LAW_MIN, 1536, 4096):
        assert gemm_short_k_rate(k, dtype) == pytest.approx(k / (k + k0))
    # monotone and continuous across the joins (256, 512, 768)
    ks = [96, 128, 192, 255, 256, 257, 400, 511, 512, 513, 700, 767, 768, 769, 2048]
    rates = [gemm_short_k_rate(k, dtype) for k in ks]
    assert all(a < b for a, b in zip(rates, rates[1:], strict=False))
    for j in (256, 512, 768):
        assert gemm_short_k_rate(j - 1e-6, dtype) == pytest.approx(gemm_short_k_rate(j, dtype), rel=1e-4)


def test_short_k_factor_is_relative_to_the_hidden_size():
    assert short_k_factor(4096, 4096) == 1.0 and short_k_factor(8192, 4096) == 1.0
    # Qwen3-235B-A22B's experts (1,536 wide) split over TP 8: K = 192 per rank
    assert short_k_factor(192, 4096, "fp8") > short_k_factor(192, 4096, "bf16") > short_k_factor(1536, 4096) > 1.0
    assert short_k_factor(192, 4096) == pytest.approx(gemm_short_k_rate(4096) / gemm_short_k_rate(192))


def test_layer_ops_put_the_short_k_factor_on_the_expert_down_projection_only():
    """One model for both planners: layer_ops marks the expert down projection (K = moe_ffn/tp) with its
    short-K factor, the training planner's expert_gemm_k_factor; every other op keeps 1."""
    q = get_model("qwen3-235b-a22b")
    for tp, dtype in ((1, "bf16"), (8, "bf16"), (8, "fp8")):
        ops_ = {o.name: o for o in layer_ops(q, batch=4, q_len=2048, kv_len=2048, tp=tp, dtype=dtype, moe_layer=True)}
        down = ops_["experts down"]
        assert down.k_factor == pytest.approx(expert_gemm_k_factor(q, tp=tp, dtype=dtype))
        assert all(o.k_factor == 1.0 for n, o in ops_.items() if n != "experts down")
        # the K0 law was measured at M = N = 4096, so it holds K's whole effect: the size law sees M and N only
        _, rows = routed_rows(q.moe.n_routed_experts, q.moe.top_k, 4 * 2048 * q.moe.top_k)
        assert down.min_dim == min(rows, q.d_model)
    assert expert_gemm_k_factor(q, tp=8) > expert_gemm_k_factor(q, tp=1) > 1.0


def test_fp8_expert_down_projection_pays_the_longer_k0():
    q = get_model("qwen3-30b-a3b")
    k0 = GEMM_K_TILE_OVERHEAD_LOW_PRECISION
    assert expert_gemm_k_factor(q, dtype="fp8") == pytest.approx((1 + k0 / 768) / (1 + k0 / 2048))
    assert expert_gemm_k_factor(q, dtype="fp8") > expert_gemm_k_factor(q, dtype="bf16")
    assert expert_gemm_k_factor(get_model("mixtral-8x7b"), dtype="fp8") == 1.0  # wide experts: no factor


def test_expert_k_factor_only_for_narrow_experts():
    assert expert_gemm_k_factor(get_model("llama3-8b")) == 1.0  # dense
    assert expert_gemm_k_factor(get_model("mixtral-8x7b")) == 1.0  # moe_ffn 14336 > hidden 4096
    q = get_model("qwen3-30b-a3b")  # hidden 2048, moe_ffn 768
    k0 = GEMM_K_TILE_OVERHEAD
    assert expert_gemm_k_factor(q) == pytest.approx((1 + k0 / 768) / (1 + k0 / 2048))
    assert expert_gemm_k_factor(q, tp=2) > expert_gemm_k_factor(q)  # expert width split further by TP
    assert 1.1 < expert_gemm_k_factor(get_model("deepseek-v3")) < expert_gemm_k_factor(q)


def test_expert_gemms_are_costed_per_expert_shape():
    """Few tokens over many experts: each expert GEMM is a thin GEMM of ~rows-per-expert rows (its
    efficiency follows that size), not one GEMM over all routed tokens."""
    q = get_model("qwen3-30b-a3b")
    up = next(o for o in layer_ops(q, batch=1, q_len=64, kv_len=64, moe_layer=True) if o.name == "experts up/gate")
    touched, rows = ops.routed_rows(128, 8, 64 * 8)
    assert 100 < touched <= 128 and rows <= 5
    assert up.min_dim == rows
    assert up.flops == pytest.approx(2.0 * rows * q.d_model * 2 * q.moe.expert_ffn_dim * touched)


# ---- per-layer memory-bound ops -----------------------------------------------------------------
def test_router_and_probability_bytes(monkeypatch):
    """The router's softmax/top-k/aux-loss and the gate-probability scaling move exactly their
    bytes through the memory roofline (forward, one MoE layer)."""
    dev = get_device(H100)
    eff = efficiency_for(dev)
    q = get_model("qwen3-30b-a3b")
    tokens = 2 * 4096
    full = _lc("qwen3-30b-a3b")
    monkeypatch.setattr(compute, "MOE_ROUTER_BYTES_PER_SCORE", 0.0)
    monkeypatch.setattr(compute, "MOE_PROBS_BYTES_PER_ELEMENT", 0.0)
    bare = _lc("qwen3-30b-a3b")
    bw = dev.memory_bandwidth * eff.memory_bw_fraction
    expected = (tokens * q.moe.n_routed_experts * MOE_ROUTER_BYTES_PER_SCORE
                + tokens * q.moe.top_k * q.d_model * MOE_PROBS_BYTES_PER_ELEMENT) / bw
    assert full.moe_elem - bare.moe_elem == pytest.approx(expected, rel=0.02)
    assert full.dense_elem == bare.dense_elem


def test_fp8_casts_of_an_moe_layer_leave_the_routed_experts_to_their_own_quantisation():
    """The layer-input casts of an MoE layer cover attention (and shared experts); every routed copy's operands are
    quantised by expert_quant_ops: forward inputs (hidden + width) and backward output gradients (hidden + 2 x width
    for a gated expert), 6 B per element in FP8 (amax pass, cast, row-wise and column-wise copies)."""
    q = get_model("qwen3-30b-a3b")
    tokens = 1000
    op = _cast_op(q, tokens, 1, moe=True)
    d, k, f = q.d_model, q.moe.top_k, q.moe.expert_ffn_dim
    o = q.n_heads * q.v_head_dim
    assert op.bytes == pytest.approx(tokens * (d + o) * FP8_CAST_BYTES_PER_ELEMENT)  # no shared expert in Qwen3
    fwd, bwd = compute.expert_quant_ops(q, tokens * k, 1, "fp8")
    assert compute.EXPERT_QUANT_BYTES_PER_ELEMENT["fp8"] == 6.0
    assert fwd.bytes == pytest.approx(tokens * k * (d + f) * 6.0)
    assert bwd.bytes == pytest.approx(tokens * k * (d + 2 * f) * 6.0)
    fwd2, _ = compute.expert_quant_ops(q, tokens * k, 2, "fp8")  # expert-TP 2 halves the width on a rank
    assert fwd2.bytes == pytest.approx(tokens * k * (d + f / 2) * 6.0)
    ds = get_model("deepseek-v3")  # a shared expert's input and width stay with the layer casts
    sh = _cast_op(ds, tokens, 1, moe=True)
    assert sh.bytes == pytest.approx(tokens * (2 * ds.d_model + ds.n_heads * ds.v_head_dim
                                               + ds.moe.n_shared_experts * ds.moe.shared_ffn) * 3.0)
    dense = _cast_op(get_model("llama3-8b"), tokens, 1, moe=False)
    m = get_model("llama3-8b")
    assert dense.bytes == pytest.approx(tokens * (2 * m.d_model + m.n_heads * m.v_head_dim + m.ffn_dim) * 3.0)


def test_routed_expert_quantisation_is_charged_once_forward_and_once_backward():
    """FP8 MoE layers carry the experts' quantisation in moe_quant_fwd (re-run by full recomputation) and
    moe_quant_bwd (the output gradients), not in the elementwise time the backward doubles; BF16 carries none,
    and dense layers are untouched."""
    dev = get_device(H100)
    eff = efficiency_for(dev)
    q = get_model("qwen3-30b-a3b")
    kw = dict(micro_batch=1, seq_len=4096, tp=1, cp=1, ep=16, sp=False)
    f8 = compute.layer_compute(q, dev, eff, precision="fp8", **kw)
    b16 = compute.layer_compute(q, dev, eff, precision="bf16", **kw)
    assert b16.moe_quant_fwd == b16.moe_quant_bwd == 0.0
    assert f8.moe_quant_fwd > 0 and f8.moe_quant_bwd > f8.moe_quant_fwd  # 2 x width in the gated backward
    bw = dev.memory_bandwidth * eff.memory_bw_fraction
    rows = 4096 * q.moe.top_k
    assert f8.moe_quant_fwd == pytest.approx(rows * (q.d_model + q.moe.expert_ffn_dim) * 6.0 / bw, rel=0.05)
    table = {n: np.asarray([getattr(f8, n)]) for n in compute.LayerCompute.__dataclass_fields__}
    lay = type("L", (), {"full_rec": np.asarray([False]), "sel_rec": np.asarray([False]),
                         "multi_stage": np.asarray([False]), "Ls": np.asarray([48.0])})()
    sc = compute.stage_compute(table, lay, q, frozen=False)
    zero = {**table, "moe_quant_fwd": np.asarray([0.0]), "moe_quant_bwd": np.asarray([0.0])}
    sc0 = compute.stage_compute(zero, lay, q, frozen=False)
    assert sc.fwd[0] - sc0.fwd[0] == pytest.approx(q.n_moe_layers * f8.moe_quant_fwd)
    assert sc.bwd[0] - sc0.bwd[0] == pytest.approx(q.n_moe_layers * f8.moe_quant_bwd)


# ---- per-expert launches and the host sync ------------------------------------------------------
def test_one_kernel_overhead_per_local_expert_gemm():
    dev = get_device(H100)
    eff = efficiency_for(dev)
    q = get_model("qwen3-30b-a3b")
    kw = dict(micro_batch=2, seq_len=4096, tp=1, cp=1, ep=8, sp=False, precision="bf16")
    a = layer_compute(q, dev, eff.model_copy(update={"kernel_overhead_s": 0.0}), **kw)
    b = layer_compute(q, dev, eff.model_copy(update={"kernel_overhead_s": 1e-5}), **kw)
    # 5 GEMM ops in an MoE layer's forward (qkv, output, router, experts up/gate, experts down), each
    # charged one overhead by the roofline, plus one per further local expert for the two expert GEMMs
    local = q.moe.n_routed_experts // 8  # 16, all touched by 8192 x 8 routed tokens
    assert b.moe_gemm - a.moe_gemm == pytest.approx((5 + 2 * (local - 1)) * 1e-5, rel=1e-6)


def test_host_sync_per_moe_layer_forward_only():
    on, off = _lc("qwen3-30b-a3b"), _lc("qwen3-30b-a3b", moe_host_sync=False)
    assert on.moe_sync == MOE_HOST_SYNC_S and off.moe_sync == 0.0
    assert _lc("llama3-8b", ep=1).moe_sync == 0.0
    # the stack decides: eager PyTorch dispatchers sync, XLA's static shapes do not
    assert training_stack("megatron-core").moe_host_sync and not training_stack("maxtext").moe_host_sync
    tab = {k: np.asarray([getattr(on, k)]) for k in on.__dataclass_fields__}
    from xpuplan.train.compute import stage_compute
    from xpuplan.train.layout import Layout
    m = get_model("qwen3-30b-a3b")
    plan = make_plan(n_devices=8, global_batch_seqs=16, ep=8, model=m, recompute="none", micro_batch=2)
    lay = Layout.of(_arrays(plan), m, 4096)
    st = stage_compute(tab, lay, m, frozen=False)
    tab0 = dict(tab, moe_sync=np.zeros(1))
    st0 = stage_compute(tab0, lay, m, frozen=False)
    assert st.fwd - st0.fwd == pytest.approx(m.n_moe_layers * MOE_HOST_SYNC_S)
    assert st.bwd == pytest.approx(st0.bwd)


def _arrays(plan):
    return _arrays_many([plan])


def _arrays_many(plans):
    from xpuplan.train.arrays import PlanArrays
    return PlanArrays.from_plans(plans)


# ---- coarse vs fine-grained ---------------------------------------------------------------------
def test_fine_grained_moe_layer_exceeds_its_old_cost_coarse_moe_nearly_unchanged(monkeypatch):
    fine_new, coarse_new = _moe_fwd(_lc("qwen3-30b-a3b", prec="fp8")), _moe_fwd(_lc("mixtral-8x7b", tp=2))
    _without_new_terms(monkeypatch)
    fine_old, coarse_old = _moe_fwd(_lc("qwen3-30b-a3b", prec="fp8")), _moe_fwd(_lc("mixtral-8x7b", tp=2))
    assert fine_new / fine_old > 1.15  # 128 experts top-8, width 768: the fixed costs matter
    assert 1.0 <= coarse_new / coarse_old < 1.03  # 8 experts top-2, width 14336: nearly unchanged


def test_fine_grained_moe_layer_runs_above_its_gemm_roofline():
    """The MoE layer's forward exceeds the roofline of its GEMMs alone by at least the modelled
    fixed terms: the host sync and one kernel overhead per further local expert GEMM."""
    dev = get_device(H100)
    eff = efficiency_for(dev)
    q = get_model("qwen3-30b-a3b")
    lc = _lc("qwen3-30b-a3b")
    # the rank's own GEMMs (QKV, output, router) and the experts' over the tokens it receives from 8 ranks
    own = [o for o in layer_ops(q, batch=2, q_len=4096, kv_len=4096, moe_layer=True)
           if o.op_class == "gemm" and not o.name.startswith("experts")]
    experts = [o for o in layer_ops(q, batch=2 * 8, q_len=4096, kv_len=4096, ep=8, moe_layer=True)
               if o.op_class == "gemm" and o.name.startswith("experts")]
    gemms = own + experts
    roofline = sum(op_time(o, dev, "bf16", eff).time_s for o in gemms)
    fixed = MOE_HOST_SYNC_S + 2 * (q.moe.n_routed_experts // 8 - 1) * eff.kernel_overhead_s
    assert _moe_fwd(lc) > roofline + fixed


# ---- token-count exchange (EP) ------------------------------------------------------------------
def test_token_count_exchange_only_with_ep_and_once_more_when_recomputing():
    m = get_model("qwen3-30b-a3b")
    c = Cluster.from_catalog(H100, 16)
    job = TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096)

    def ep_comm(ep: int, rec: str) -> float:
        p = make_plan(n_devices=16, global_batch_seqs=64, ep=ep, model=m, recompute=rec)
        return estimate(m, c, p, job, stack=training_stack("megatron-core")).step.ep_comm_s
    assert ep_comm(1, "none") == 0.0
    assert ep_comm(8, "full") > 1.4 * ep_comm(8, "none")  # a third pass of all-to-alls, a second count exchange


def test_token_count_exchange_is_a_latency_bound_all_gather():
    from xpuplan.train import phases
    from xpuplan.train.layout import Layout
    m = get_model("qwen3-30b-a3b")
    c = Cluster.from_catalog(H100, 16)
    plans = [make_plan(n_devices=16, global_batch_seqs=64, ep=ep, model=m, recompute=r)
             for ep, r in ((1, "none"), (8, "none"), (8, "full"))]
    p = _arrays_many(plans)
    lay = Layout.of(p, m, 4096)
    t = phases.moe_dispatch_fixed_s(lay, m, c, p, p.tp * p.cp)
    counts = m.moe.n_routed_experts * MOE_COUNT_BYTES_PER_EXPERT * 8
    one = phases.group_time_s("all_gather", np.asarray([counts]), c, np.asarray([8]), np.asarray([1]))[0]
    assert t[0] == 0.0 and t[1] == pytest.approx(one) and t[2] == pytest.approx(2 * one)
    assert 0 < one < 1e-4  # a few latency steps, no bandwidth to speak of


def test_op_level_checkpointing_re_runs_the_experts_forward_quantisation(monkeypatch):
    """torchtitan's op-level checkpointing re-runs every forward elementwise op; the experts' FP8 quantisation is
    one of them (before 0.4.14 it sat in the elementwise time; it must not drop out of the re-run)."""
    dev = get_device(H100)
    eff = efficiency_for(dev)
    q = get_model("qwen3-30b-a3b")
    kw = dict(micro_batch=1, seq_len=4096, tp=1, cp=1, ep=8, sp=False, precision="fp8", op_sac=True)
    full = compute.layer_compute(q, dev, eff, **kw)
    monkeypatch.setattr(compute, "EXPERT_QUANT_BYTES_PER_ELEMENT", {"fp8": 0.0, "fp4": 0.0})
    bare = compute.layer_compute(q, dev, eff, **kw)
    assert full.moe_quant_fwd > bare.moe_quant_fwd
    assert full.sac_moe - bare.sac_moe == pytest.approx(full.moe_quant_fwd - bare.moe_quant_fwd)
