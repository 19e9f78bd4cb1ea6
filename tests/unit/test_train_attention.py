"""Attention in the training step: precision under FP8, attended keys (causal, sliding window),
context-parallel splits and the CP exchange algorithms (docs/training.md, "Attention and long
context")."""

from __future__ import annotations

import pytest

from xpuplan.catalog.stacks import load_stacks, training_stack
from xpuplan.models import get_model
from xpuplan.perf import collectives as coll
from xpuplan.perf.flops import flops_attention_core_per_token, flops_training_per_token, mean_causal_context
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.train.compute import (
    ATTENTION_BACKWARD_FACTOR,
    attention_core_ops,
    attention_precision,
    layer_compute,
    mean_attended_keys,
)
from xpuplan.train.phases import ACTIVATION_BYTES, OVERLAP_INTERFERENCE
from xpuplan.workload.training import TrainingJob

H100 = "nvidia-h100-sxm-80gb"


def _device_eff():
    c = Cluster.from_catalog(H100, 8)
    return c.device, c.efficiency


def _llama8b_layer(precision: str, seq_len: int, **flags: bool):
    """One Llama 3.1 8B layer's compute on one H100 (micro-batch 1, no parallelism)."""
    dev, eff = _device_eff()
    return layer_compute(get_model("llama3.1-8b"), dev, eff, micro_batch=1, seq_len=seq_len, tp=1, cp=1, ep=1,
                         sp=False, precision=precision, **flags)


# ---------------------------------------------------------------------------------------
# precision
# ---------------------------------------------------------------------------------------
def test_attention_runs_in_bf16_under_fp8_unless_the_stack_enables_fp8_attention():
    assert attention_precision("fp8", False) == "bf16"
    assert attention_precision("fp8", True) == "fp8"
    assert attention_precision("bf16", True) == "bf16"
    assert attention_precision("fp16", False) == "bf16"


def test_fp8_speeds_up_the_gemms_not_the_attention_core():
    bf, f8 = _llama8b_layer("bf16", 32768), _llama8b_layer("fp8", 32768)
    f8_dpa = _llama8b_layer("fp8", 32768, fp8_attention=True)
    assert f8.dense_gemm < 0.8 * bf.dense_gemm
    assert f8.attn_fwd == pytest.approx(bf.attn_fwd)
    assert f8_dpa.attn_fwd < 0.8 * bf.attn_fwd
    assert f8_dpa.attn_bwd == pytest.approx(f8_dpa.attn_fwd * ATTENTION_BACKWARD_FACTOR)


def test_every_builtin_stack_keeps_attention_in_bf16():
    assert not any(s.fp8_attention for s in load_stacks().stacks.values())


def test_the_output_head_runs_in_16_bits_under_fp8_and_fp4_unless_the_stack_says_so():
    """Megatron-Core's LM head is a plain ColumnParallelLinear (not a TE module) and torchtitan's float8 conversion
    skips ``output``: in FP8/FP4 training the head's GEMM runs at the bf16 rate; ``fp8_output_head`` (Megatron's
    fp8_output_proj with MXFP8) runs it at the plan's precision."""
    from xpuplan.train.compute import head_precision

    assert head_precision("fp8", False) == "bf16" and head_precision("fp4", False) == "bf16"
    assert head_precision("fp8", True) == "fp8" and head_precision("bf16", False) == "bf16"
    assert not any(s.fp8_output_head for s in load_stacks().stacks.values())
    bf, f8 = _llama8b_layer("bf16", 8192), _llama8b_layer("fp8", 8192)
    f8_head = _llama8b_layer("fp8", 8192, fp8_output_head=True)
    assert f8.dense_gemm < 0.8 * bf.dense_gemm  # the layers' GEMMs run in FP8
    assert f8.head_gemm == pytest.approx(bf.head_gemm, rel=0.05)  # the head's does not
    assert f8_head.head_gemm < 0.8 * f8.head_gemm


def test_a_stack_with_fp8_attention_trains_long_sequences_faster():
    m = get_model("llama3.1-8b")
    c = Cluster.from_catalog(H100, 8)
    job = TrainingJob(seq_len=65536, global_batch_tokens=8 * 65536)
    plan = make_plan(n_devices=8, global_batch_seqs=8, zero_stage=3, recompute="full", precision="fp8")
    st = training_stack("torchtitan")
    plain = estimate(m, c, plan, job, stack=st)
    dpa = estimate(m, c, plan, job, stack=st.model_copy(update={"fp8_attention": True}))
    assert dpa.step.compute_s < 0.85 * plain.step.compute_s


# ---------------------------------------------------------------------------------------
# attended keys: causal mask, sliding windows, context-parallel split
# ---------------------------------------------------------------------------------------
def _flash_flops(model, s, cp=1, tp=1, mb=1):
    ops, _ = attention_core_ops(model, micro_batch=mb, q_len=s // cp, kv_len=s, tp=tp, cp=cp, flash=True)
    return sum(o.flops for o in ops)


def test_causal_attention_counts_the_unmasked_half_once():
    m, s = get_model("llama3.1-8b"), 8192
    per_layer = 2.0 * m.n_heads * s * (s + 1) / 2.0 * (m.qk_head_dim + m.v_head_dim)
    assert _flash_flops(m, s) == pytest.approx(per_layer)
    # the same figure perf.flops counts for one sequence
    assert _flash_flops(m, s) * m.n_layers == pytest.approx(
        flops_attention_core_per_token(m, mean_causal_context(s, True)) * s)


@pytest.mark.parametrize("cp", [2, 4, 16])
def test_load_balanced_cp_gives_each_rank_one_cp_th_of_the_attention(cp):
    m, s = get_model("llama3.1-8b"), 131072
    assert _flash_flops(m, s, cp=cp) * cp == pytest.approx(_flash_flops(m, s))


def test_encoder_attention_sees_every_key():
    m = get_model("bert-large")
    assert mean_attended_keys(m, 512) == pytest.approx(512.0)
    dec = get_model("llama3.1-8b")
    assert mean_attended_keys(dec, 512) == pytest.approx(256.5)


def _windowed(model_id, window, every):
    m = get_model(model_id)
    return m.model_copy(update={"sliding_window": window, "global_every": every, "id": m.id + "-swa"})


@pytest.mark.parametrize(("window", "every"), [(4096, 2), (4096, None), (1024, 6)])
def test_sliding_window_layers_cut_attention_time_as_much_as_flops(window, every):
    glob = get_model("llama3.1-8b")
    local = _windowed("llama3.1-8b", window, every)
    dev, eff = _device_eff()
    s = 32768
    kw = dict(micro_batch=1, seq_len=s, tp=1, cp=1, ep=1, sp=False, precision="bf16")
    t_glob = layer_compute(glob, dev, eff, **kw).attn_fwd
    t_loc = layer_compute(local, dev, eff, **kw).attn_fwd
    assert t_loc < t_glob
    flops_ratio = (flops_training_per_token(local, s).forward_attention
                   / flops_training_per_token(glob, s).forward_attention)
    assert flops_ratio < 0.7
    assert t_loc / t_glob == pytest.approx(flops_ratio, rel=0.02)  # compute-bound: time follows the FLOPs


def test_sliding_window_model_trains_faster_end_to_end():
    s = 32768
    c = Cluster.from_catalog(H100, 8)
    job = TrainingJob(seq_len=s, global_batch_tokens=8 * s)
    plan = make_plan(n_devices=8, global_batch_seqs=8, zero_stage=3, recompute="full")
    g = estimate(get_model("llama3.1-8b"), c, plan, job)
    w = estimate(_windowed("llama3.1-8b", 4096, 2), c, plan, job)
    # half the layers attend 4K of 32K keys: attention (a third of the step on H100's native kernels) shrinks
    assert w.tokens_per_s_per_device > 1.1 * g.tokens_per_s_per_device


def test_unfused_attention_computes_the_whole_score_matrix_even_with_a_window():
    local = _windowed("llama3.1-8b", 1024, None)
    glob = get_model("llama3.1-8b")
    kw = dict(micro_batch=1, q_len=4096, kv_len=4096, tp=1, cp=1, flash=False)
    a = sum(o.flops for o in attention_core_ops(local, **kw)[0])
    b = sum(o.flops for o in attention_core_ops(glob, **kw)[0])
    assert a == b


# ---------------------------------------------------------------------------------------
# context-parallel exchange algorithms
# ---------------------------------------------------------------------------------------
SEQ = 131072


def _cp_est(stack_id, *, model_id="llama3.1-8b", n=8, cp=4, recompute="full", algo=None):
    m = get_model(model_id)
    c = Cluster.from_catalog(H100, n)
    job = TrainingJob(seq_len=SEQ, global_batch_tokens=(n // cp) * SEQ)
    plan = make_plan(n_devices=n, global_batch_seqs=n // cp, cp=cp, zero_stage=3, recompute=recompute,
                     precision="bf16")
    st = training_stack(stack_id)
    if algo:
        st = st.model_copy(update={"cp_algorithm": algo})
    return m, c, estimate(m, c, plan, job, stack=st)


def test_stacks_name_their_cp_algorithm():
    assert training_stack("megatron-core").cp_algorithm == "ring"
    assert training_stack("mindspeed").cp_algorithm == "ring"
    assert training_stack("torchtitan").cp_algorithm == "all_gather_async"
    assert training_stack("meta-4d").cp_algorithm == "all_gather"
    assert training_stack("maxtext").cp_algorithm == "all_gather"
    assert training_stack("deepspeed").cp_algorithm == "all_to_all"


def _kv_bytes(m, cp, mb=1):
    return mb * SEQ / cp * m.kv_heads * (m.qk_head_dim + m.v_head_dim) * ACTIVATION_BYTES


def test_all_gather_cp_is_exposed_gather_plus_backward_gather_and_reduce_scatter():
    m, c, e = _cp_est("meta-4d", recompute="none")
    cp, total = 4, _kv_bytes(m, 4) * 4
    ag = coll.time_group_s("all_gather", total, cp, 1, c)
    rs = coll.time_group_s("reduce_scatter", total, cp, 1, c)
    assert e.step.cp_comm_s == pytest.approx(m.n_layers * (ag + ag + rs))
    # full recomputation re-runs the forward, and with it the gather
    _, _, full = _cp_est("meta-4d", recompute="full")
    assert full.step.cp_comm_s == pytest.approx(m.n_layers * (2 * ag + ag + rs))


def test_ring_cp_hides_each_send_under_its_block_when_the_link_is_fast():
    """On NVLink a 32k-token KV block (128 MB) takes well under a block's attention (~30 ms): only the
    interference of the hidden sends remains, (cp-1) x 0.2 x send per pass, and the backward's last
    dK/dV hop home."""
    m, c, e = _cp_est("megatron-core", recompute="none")
    t_kv = coll.time_group_s("p2p", _kv_bytes(m, 4), 4, 1, c)
    expected = m.n_layers * (3 * OVERLAP_INTERFERENCE * (t_kv + 2 * t_kv) + t_kv)
    assert e.step.cp_comm_s == pytest.approx(expected, rel=1e-6)
    _, _, ag = _cp_est("meta-4d", recompute="none")
    assert e.step.cp_comm_s < ag.step.cp_comm_s


def test_ring_cp_exposes_sends_slower_than_their_block():
    """Short blocks (cp = 8 across nodes, so the ring crosses the scale-out network): the send
    outlasts the block and the excess is exposed on every step."""
    m = get_model("llama3.1-8b")
    seq, n, cp = 8192, 16, 16
    c = Cluster.from_catalog(H100, n, domain_size=1)
    job = TrainingJob(seq_len=seq, global_batch_tokens=seq)
    plan = make_plan(n_devices=n, global_batch_seqs=1, cp=cp, zero_stage=1, recompute="none", precision="bf16")
    e = estimate(m, c, plan, job, stack=training_stack("megatron-core"))
    kv = seq / cp * m.kv_heads * (m.qk_head_dim + m.v_head_dim) * ACTIVATION_BYTES
    t_kv = coll.time_group_s("p2p", kv, cp, 1, c)
    assert e.step.cp_comm_s > m.n_layers * (cp - 1) * 0.5 * t_kv


def test_all_to_all_cp_moves_q_k_v_and_o_twice_per_pass():
    m, c, e = _cp_est("deepspeed", recompute="none")
    cp, chunk = 4, SEQ / 4
    qkv = chunk * (m.n_heads * m.qk_head_dim + max(m.kv_heads, cp) * (m.qk_head_dim + m.v_head_dim)) * 2
    o = chunk * m.n_heads * m.v_head_dim * 2
    per_pass = coll.time_group_s("all_to_all", qkv, cp, 1, c) + coll.time_group_s("all_to_all", o, cp, 1, c)
    assert e.step.cp_comm_s == pytest.approx(m.n_layers * 2 * per_pass)


def test_async_all_gather_hides_under_the_local_block():
    _, _, sync = _cp_est("meta-4d")
    _, _, asyn = _cp_est("torchtitan")
    assert asyn.step.cp_comm_s < sync.step.cp_comm_s


@pytest.mark.parametrize("model_id", ["gemma3-27b", "llama4-scout", "gpt-oss-20b", "mistral-7b"])
def test_prefill_ops_count_local_attention_as_perf_flops_does(model_id):
    """A block over its own keys longer than the window (training, a fresh prefill): the ops attend
    mean_local_context keys per query, sliding (causal ramp then w) or chunked (within each chunk)."""
    import numpy as np

    from xpuplan.perf.flops import flops_linear_per_token, flops_prefill
    from xpuplan.perf.ops import layer_ops

    m, s = get_model(model_id), 32768
    attn = flops_prefill(m, s) - flops_linear_per_token(m, include_head=False) * s - 2.0 * m.vocab_size * m.d_model
    one = sum(o.flops for o in layer_ops(m, batch=1, q_len=s, kv_len=s) if o.op_class == "attention")
    assert one * m.n_layers == pytest.approx(attn, rel=1e-3)
    arr = next(o for o in layer_ops(m, batch=np.array([1, 1]), q_len=np.array([s, 64]), kv_len=np.array([s, 64]))
               if o.op_class == "attention")
    assert arr.flops[0] == pytest.approx(one)


def test_all_to_all_context_parallelism_needs_heads_divisible_by_cp():
    """Ulysses splits the heads: cp must divide the heads per TP rank (32 heads / tp 8 = 4: cp 8 is invalid);
    ring CP splits the sequence and accepts it."""
    from xpuplan.errors import UserInputError
    from xpuplan.train.search import SearchSpace, enumerate_plans, search_plans
    from xpuplan.workload.training import TrainingJob

    model = get_model("llama3.1-8b")
    cluster = Cluster.from_catalog("H100", 64)
    job = TrainingJob(seq_len=32768, global_batch_tokens=32768 * 8)
    plan = make_plan(n_devices=64, global_batch_seqs=8, tp=8, cp=8, dp=1, micro_batch=1, model=model)
    with pytest.raises(UserInputError) as e:
        estimate(model, cluster, plan, job, stack=training_stack("deepspeed"))
    assert e.value.field == "cp" and "Ulysses" in e.value.message
    assert estimate(model, cluster, plan, job, stack=training_stack("megatron-core")).step_time_s > 0  # ring CP: valid
    ring = enumerate_plans(model, 64, job, cluster, SearchSpace(tp=[8]), "ring")
    ulysses = enumerate_plans(model, 64, job, cluster, SearchSpace(tp=[8]), "all_to_all")
    assert (ring.cp == 8).any() and not (ulysses.cp == 8).any() and (ulysses.cp == 4).any()
    res = search_plans(model, cluster, job, space=SearchSpace(tp=[8]), top=50, stack=training_stack("deepspeed"),
                       require_feasible=False)
    assert res.best is not None and all((32 // p.plan.tp) % p.plan.cp == 0 for p in res.top)


def test_narrow_heads_slow_the_attention_forward_more_than_its_backward():
    from xpuplan.perf.roofline import attention_head_dim_factor

    dev, eff = _device_eff()
    m = get_model("gpt-oss-120b")  # 64 query heads of dimension 64
    assert m.qk_head_dim == 64
    lc = layer_compute(m, dev, eff, micro_batch=1, seq_len=4096, tp=1, cp=1, ep=8, sp=False, precision="bf16")
    ratio = attention_head_dim_factor(64) / attention_head_dim_factor(64, backward=True)
    assert lc.attn_bwd / lc.attn_fwd == pytest.approx(ATTENTION_BACKWARD_FACTOR * ratio)
    assert ratio < 1.0
    wide = layer_compute(get_model("llama3-8b"), dev, eff, micro_batch=1, seq_len=4096, tp=1, cp=1, ep=1, sp=False,
                         precision="bf16")
    assert wide.attn_bwd / wide.attn_fwd == pytest.approx(ATTENTION_BACKWARD_FACTOR)
