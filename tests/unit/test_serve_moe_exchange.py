"""The expert-parallel exchange of a serving replica (serve.comm.moe_exchange_s): all-gather + reduce-scatter by
default, a rank-de-duplicated all-to-all where the engine uses one, dispatch in the GEMMs' format where the engine
quantises first."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tests.unit.archs import DEEPSEEK_V3
from xpuplan.catalog import load_catalog
from xpuplan.catalog.assumptions import default_assumptions
from xpuplan.perf import collectives as c
from xpuplan.perf.efficiency import efficiency_for
from xpuplan.perf.links import device_links
from xpuplan.perf.ops import expected_groups_hit
from xpuplan.serve import make_replica, step_time
from xpuplan.serve.comm import moe_dispatch_bytes, moe_exchange_s, moe_uses_alltoall
from xpuplan.serve.precision import resolve_precision


def _setup(dev_id: str = "H100"):
    d = load_catalog().get(dev_id)
    return d, device_links(d, efficiency_for(d))


def _engine(eid: str, **kw):
    return dataclasses.replace(default_assumptions().engines[eid], **kw)


def test_allgather_reducescatter_moves_ep_minus_one_token_sets_whatever_top_k():
    d, links = _setup()
    m = DEEPSEEK_V3
    vllm = _engine("vllm")
    bf16 = resolve_precision("bf16", d, fp8_kv_with_fp8_weights=False)
    tokens = 512
    got = moe_exchange_s(vllm, m, bf16, 1, 8, links, tokens)
    gathered = 8 * tokens * m.d_model
    want = (c.time_group_s("all_gather", gathered * 2, 8, 1, links)
            + c.time_group_s("reduce_scatter", gathered * 2, 8, 1, links))
    assert got == pytest.approx(want)
    # the bytes do not depend on top-k: a top-2 model of the same width moves the same
    assert m.moe is not None
    top2 = m.model_copy(update={"moe": m.moe.model_copy(update={"top_k": 2})})
    assert moe_exchange_s(vllm, top2, bf16, 1, 8, links, tokens) == pytest.approx(got)
    # no EP, no exchange
    assert moe_exchange_s(vllm, m, bf16, 8, 1, links, tokens) == 0.0


def test_two_ranks_exchange_far_less_than_top_k_copies():
    """EP2 with top-8: the gather moves one token set each way; the old per-copy all-to-all moved 8 x 1/2 = 4."""
    d, links = _setup()
    m = DEEPSEEK_V3
    assert m.moe is not None
    bf16 = resolve_precision("bf16", d)
    tokens = 1024
    ag = moe_exchange_s(_engine("vllm"), m, bf16, 1, 2, links, tokens)
    per_copy = 2 * c.time_group_s("all_to_all", tokens * m.moe.top_k * m.d_model * 2, 2, 1, links, all_to_all="direct")
    assert ag < per_copy / 2


def test_alltoall_sends_a_token_once_to_each_rank_its_experts_fall_on():
    d, links = _setup()
    m = DEEPSEEK_V3
    assert m.moe is not None
    deepep = _engine("sglang", moe_ep_exchange="alltoall")
    bf16 = resolve_precision("bf16", d)
    tokens = 256
    hit = expected_groups_hit(m.moe.n_routed_experts, m.moe.top_k, 8)
    assert 1 < hit < m.moe.top_k
    n = tokens * hit * m.d_model * 2
    want = 2 * c.time_group_s("all_to_all", n, 8, 1, links, all_to_all="direct")
    assert moe_exchange_s(deepep, m, bf16, 1, 8, links, tokens) == pytest.approx(want)
    assert moe_uses_alltoall(deepep, m, 8, links)


def test_trtllm_dispatches_in_the_gemm_format_and_uses_its_nvlink_alltoall_only_on_nvl72():
    trt = _engine("trtllm")
    m = DEEPSEEK_V3
    b200, b200_links = _setup("nvidia-b200-180gb")
    assert moe_dispatch_bytes(trt, resolve_precision("nvfp4", b200)) == pytest.approx(0.5 + 1 / 16)
    assert moe_dispatch_bytes(trt, resolve_precision("fp8", b200)) == 1.0
    assert moe_dispatch_bytes(trt, resolve_precision("bf16", b200)) == 2.0
    assert moe_dispatch_bytes(_engine("vllm"), resolve_precision("fp8", b200)) == 2.0
    # weight-only FP8 (no fp8 tensor cores) dispatches 16-bit activations
    a100 = load_catalog().get("A100")
    assert moe_dispatch_bytes(trt, resolve_precision("fp8", a100)) == 2.0
    # an 8-GPU NVLink server gathers; an NVL72 domain uses the all-to-all once ep > top-k
    assert not moe_uses_alltoall(trt, m, 16, b200_links)
    gb200, gb_links = _setup("nvidia-gb200-186gb")
    assert gb_links.domain_size > 8
    assert m.moe is not None and m.moe.top_k == 8
    assert moe_uses_alltoall(trt, m, 16, gb_links)
    assert not moe_uses_alltoall(trt, m, 8, gb_links)


def test_attention_dp_on_a_pcie_server_beats_tensor_parallel_for_a_small_active_moe():
    """Qwen3-30B-A3B-like model on 2 PCIe cards: all-reducing every layer's activations over PCIe (TP2) costs
    more than gathering each rank's tokens once per MoE layer (attention-DP + EP2)."""
    from xpuplan.models import get_model

    m = get_model("qwen3-30b-a3b")
    dev = load_catalog().get("nvidia-rtx-pro-6000-server-96gb")
    tp = make_replica(m, dev, tp=2, ep=1, dtype="nvfp4", engine="trtllm")
    adp = make_replica(m, dev, tp=1, ep=2, dtype="nvfp4", engine="trtllm")
    t_tp = step_time(tp, decode_seqs=1024, decode_context=300)
    t_adp = step_time(adp, decode_seqs=1024, decode_context=300)
    assert t_adp.comm_s < t_tp.comm_s
    assert t_adp.total_s < t_tp.total_s


def test_a_replica_says_which_exchange_it_priced():
    from xpuplan.models import get_model

    m = get_model("qwen3-30b-a3b")
    dev = load_catalog().get("nvidia-rtx-pro-6000-server-96gb")
    trt = make_replica(m, dev, tp=1, ep=2, dtype="nvfp4", engine="trtllm")
    assert any("all-gather" in n and "0.5625 B" in n for n in trt.notes)
    tp_only = make_replica(m, dev, tp=2, ep=1, dtype="nvfp4", engine="trtllm")
    assert not any("expert parallelism" in n for n in tp_only.notes)


def test_an_expert_parallel_step_waits_for_its_busiest_rank():
    """The serving step times the routed experts of the EP rank that receives the most token copies
    (perf.ops.busiest_rank_copies): at a small batch the busiest of 8 ranks holds well above 1/8 of the copies,
    so the expert GEMMs take longer than an even split; a TP-only replica has no such rank."""
    from xpuplan.perf.ops import layer_ops
    from xpuplan.serve.step import EXPERT_OPS, _layer_ops, _Shape

    d, _ = _setup()
    m = DEEPSEEK_V3
    rep = make_replica(m, d, tp=1, ep=8, dtype="fp8")
    one = np.asarray(16.0)
    sh = _Shape(tokens=one, group_tokens=one / 8, decode_seqs=one, decode_context=np.asarray(1024.0),
                prefill_tokens=np.asarray(0.0), prefill_len=np.asarray(1.0), prefill_kv_len=np.asarray(1.0),
                sampled_rows=np.asarray(1.0), has_decode=np.asarray(True), has_prefill=np.asarray(False))
    got = {o.name: o for o, _ in _layer_ops(rep, sh, True, "bf16") if o.name in EXPERT_OPS}
    mean = {o.name: o for o in layer_ops(m, batch=16, q_len=1, kv_len=1, ep=8, dtype=rep.precision.gemm_dtype,
                                         weight_dtype=rep.precision.weight_dtype, moe_layer=True)}
    assert got["experts up/gate"].bytes > mean["experts up/gate"].bytes
