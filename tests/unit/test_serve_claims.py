"""The seed guide's inference claims, recomputed by the inference planner (ids from docs/guide-claims.md).

Each test states the guide's figure and asserts what the planner finds, so the documented table in
docs/inference.md ("The guide's inference claims") cannot drift from the code.
"""

from __future__ import annotations

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.errors import InfeasibleError
from xpuplan.models import get_model
from xpuplan.serve import estimate_continuous, estimate_encoder, estimate_static, make_replica
from xpuplan.serve.kv import max_concurrent_sequences, memory_plan

H100 = "nvidia-h100-sxm-80gb"


def _dev(name: str):
    return load_catalog().get(name)


def _npu(name: str):
    """An NPU replica needs the NPU efficiency family; skip with the reason while it fails to resolve."""
    from xpuplan.calibrate.profile import resolve_efficiency

    dev = _dev(name)
    try:
        resolve_efficiency(dev)
    except Exception as exc:  # pragma: no cover - depends on perf/data/efficiency.yaml
        pytest.skip(f"efficiency for {name} does not resolve ({type(exc).__name__}); see perf/efficiency.py family rules")
    return dev


def test_g142_h100_gpt7b_at_batch64_is_not_180_tokens_per_s():
    """Guide: H100 runs GPT-7B at 180-220 tokens/s, FP16, batch 64, sequence 2048."""
    rep = make_replica(get_model("llama2-7b"), _dev(H100), dtype="fp16", engine="vllm")
    with pytest.raises(InfeasibleError):  # 64 x 2048 fp16 KV (68.7 GB) + 13.5 GB weights exceed 80 GB
        estimate_static(rep, 1024, 1024, 64)
    cont = estimate_continuous(rep, 1024, 1024, 64)  # paged cache: sequences hold 1536 tokens on average
    assert cont.output_tokens_per_s > 10 * 220  # total: an order of magnitude above the claim
    assert cont.tokens_per_s_per_user < 180  # per sequence: below the claim
    one = estimate_static(rep, 1024, 1024, 1)
    assert one.output_tokens_per_s > 100  # ~120 tokens/s at batch 1 (memory-bound bound 248)


def test_g139_bert_base_batch1_latency_on_h100_is_about_a_millisecond():
    """Guide: BERT-base at batch 1 takes 1.2 ms on H100 (plausible) and 0.8 ms on Ascend 310."""
    rep = make_replica(get_model("bert-base"), _dev(H100), dtype="fp16")
    e = estimate_encoder(rep, 1, 128)
    assert 0.3e-3 < e.latency_s < 1.2e-3  # launch-bound: ~0.7 ms with TensorRT


def test_g139_ascend310_bert_base_batch1_is_slower_than_claimed():
    """Ascend 310 (0.8 ms claimed): with its per-chip LPDDR4X (51.2 GB/s, Atlas 300I model 3000 / 4)
    reading BERT-base's int8 weights alone takes ~2 ms, so the claim cannot hold."""
    dev = _npu("huawei-ascend-310")
    e = estimate_encoder(make_replica(get_model("bert-base"), dev, dtype="int8"), 1, 128)
    assert e.latency_s > 0.8e-3 * 2


def test_g138_g141_h100_bert_qps():
    """Guide: H100 BERT-base at 2000+ QPS (000 §2.3.3) and 12,000 QPS (§5.4)."""
    rep = make_replica(get_model("bert-base"), _dev(H100), dtype="fp16")
    e = estimate_encoder(rep, 128, 128)
    assert 10_000 < e.qps < 40_000  # batched: consistent with 12,000, far above 2,000
    int8 = estimate_encoder(make_replica(get_model("bert-base"), _dev(H100), dtype="int8"), 128, 128)
    assert int8.qps > e.qps


def test_g149_h100_does_not_hold_1024_requests_at_4k_context():
    """Guide: H100 'can process 1024 concurrent requests'."""
    rep = make_replica(get_model("llama3-8b"), _dev(H100), engine="vllm", max_num_seqs=4096)
    n = max_concurrent_sequences(rep, memory_plan(rep), 4096)
    assert 60 < n < 200  # ~100 sequences of 4k tokens in the bf16 KV cache left beside 16 GB of weights


def test_g143_ascend910b_gpt7b_int8():
    """Guide: 910B runs GPT-7B at about 150 tokens/s in INT8 (unverifiable; the planner's figure)."""
    dev = _npu("huawei-ascend-910b")
    rep = make_replica(get_model("llama2-7b"), dev, dtype="int8")
    e = estimate_static(rep, 1024, 1024, 1)
    assert 60 < e.output_tokens_per_s < 150  # batch 1: ~90 tokens/s per sequence
    batched = estimate_static(rep, 1024, 1024, 32)
    assert batched.output_tokens_per_s > 5 * 150


def test_g146_ascend310p_gpt7b_int8_batch32_does_not_fit():
    """Guide: Ascend 310P runs GPT-7B at 200-250 tokens/s, INT8, batch 32, sequence 2048."""
    dev = _npu("huawei-ascend-310p")
    rep = make_replica(get_model("llama2-7b"), dev, dtype="int8")
    with pytest.raises(InfeasibleError):  # 32 x 2048 tokens of 16-bit KV = 34 GB > 24 GB card
        estimate_static(rep, 1024, 1024, 32)
    one = estimate_static(rep, 1024, 1024, 1)
    assert one.output_tokens_per_s < 30  # 204.8 GB/s bounds one stream at ~29 tokens/s
