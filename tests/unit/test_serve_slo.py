"""SLO search, queueing formulas, capacity sizing, disaggregation, encoders and emitted commands."""

from __future__ import annotations

import dataclasses
import math

import pytest

from tests.unit.archs import BERT_BASE, LLAMA3_70B
from tests.unit.hwfixture import device
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.serve import (
    SLO,
    emit,
    estimate_disagg,
    estimate_encoder,
    load_point,
    make_replica,
    size_for_qps,
    throughput_at_slo,
)
from xpuplan.serve.slo import wait_mean_s, wait_quantile_s

from .test_serve_replica import IDEAL, SEVEN_B


def _rep(tmp_path, model=SEVEN_B, **kw):
    return make_replica(model, device(tmp_path), eff=IDEAL, engine=kw.pop("engine", "vllm"), **kw)


def test_md1_wait_formulas():
    assert wait_mean_s(0.5, 1.0) == pytest.approx(0.5)  # ρ·s/(2(1-ρ))
    assert wait_quantile_s(0.0, 1.0, 99) == 0.0
    assert wait_quantile_s(1.0, 1.0, 99) == math.inf
    # P(W > t) = ρ·exp(-2(1-ρ)t/s) = 1%  ->  t = s/(2(1-ρ))·ln(100ρ)
    assert wait_quantile_s(0.5, 1.0, 99) == pytest.approx(math.log(50))
    assert wait_quantile_s(0.9, 1.0, 99) > wait_quantile_s(0.5, 1.0, 99) > wait_quantile_s(0.5, 1.0, 90)


def test_latency_grows_monotonically_with_load(tmp_path):
    rep = _rep(tmp_path)
    points = [load_point(rep, 512, 128, lam) for lam in (0.5, 2, 8, 16)]
    points = [p for p in points if p is not None]
    assert len(points) >= 3
    for a, b in zip(points, points[1:], strict=False):
        assert b.ttft_p_s >= a.ttft_p_s
        assert b.tpot_s >= a.tpot_s
        assert b.concurrency >= a.concurrency
    p = points[-1]
    # Little's law: concurrency ≈ λ · E2E (the smallest integer that holds it)
    assert p.concurrency >= p.arrival_rate * p.e2e_mean_s - 1e-9
    assert p.ttft_p_s >= p.ttft_mean_s


def test_overload_is_reported_as_none(tmp_path):
    assert load_point(_rep(tmp_path), 512, 128, 1e6) is None


def test_slo_search_is_monotonic_in_the_slo(tmp_path):
    rep = _rep(tmp_path)
    tight = throughput_at_slo(rep, 512, 128, SLO(ttft_s=0.2, tpot_s=0.02))
    loose = throughput_at_slo(rep, 512, 128, SLO(ttft_s=1.0, tpot_s=0.05))
    assert loose.max_rate >= tight.max_rate > 0
    for r, slo in ((tight, tight.slo), (loose, loose.slo)):
        assert r.point.ttft_p_s <= slo.ttft_s and r.point.tpot_s <= slo.tpot_s
    # just above the found rate the SLO (or capacity) breaks
    above = load_point(rep, 512, 128, tight.max_rate * 1.05)
    assert above is None or above.ttft_p_s > 0.2 or above.tpot_s > 0.02 or above.concurrency >= tight.point.concurrency


def test_unmeetable_slo_is_infeasible_with_reasons(tmp_path):
    with pytest.raises(InfeasibleError) as e:
        throughput_at_slo(_rep(tmp_path), 512, 128, SLO(ttft_s=0.2, tpot_s=1e-5))
    assert "TPOT" in " ".join(e.value.reasons)


def test_slo_validation():
    with pytest.raises(UserInputError) as e:
        SLO(ttft_s=-1.0)
    assert e.value.field == "ttft_ms"
    with pytest.raises(UserInputError):
        SLO(percentile=100)


def test_capacity_devices_needed(tmp_path):
    d = device(tmp_path)
    slo = SLO(ttft_s=1.0, tpot_s=0.05)
    plan = size_for_qps(SEVEN_B, [d], 40, 512, 128, slo, tps=[1], engine="vllm")
    (opt,) = plan.options
    assert opt.replicas == math.ceil(40 / opt.rate_per_replica)
    assert opt.devices == opt.replicas * opt.replica["n_devices"]
    assert opt.at_target is not None and opt.at_target.ttft_p_s <= 1.0 and opt.at_target.tpot_s <= 0.05
    # four times the load: same replica rate, ceil(4x / rate) replicas
    plan4 = size_for_qps(SEVEN_B, [d], 160, 512, 128, slo, tps=[1], engine="vllm")
    assert plan4.options[0].rate_per_replica == pytest.approx(opt.rate_per_replica, rel=1e-6)
    assert plan4.options[0].devices == math.ceil(160 / opt.rate_per_replica) > opt.devices


def test_capacity_reports_infeasible_hardware(tmp_path):
    plan = size_for_qps(LLAMA3_70B, [device(tmp_path)], 1, 512, 128, SLO(tpot_s=1e-4), tps=[8], engine="vllm")
    assert not plan.options and "testco-x1" in plan.infeasible
    with pytest.raises(UserInputError):
        size_for_qps(SEVEN_B, [device(tmp_path)], 0, 512, 128, SLO(tpot_s=0.1))


def test_capacity_searches_tp_for_a_large_model(tmp_path):
    plan = size_for_qps(LLAMA3_70B, [device(tmp_path)], 5, 1024, 256, SLO(ttft_s=2.0, tpot_s=0.1), engine="vllm",
                        disagg=True)
    (opt,) = plan.options
    assert opt.replica["tp"] >= 2  # 141 GB of bf16 weights do not fit one 80 GB device
    assert opt.disagg is not None and opt.disagg.devices is not None and opt.disagg.devices > 0


def test_disaggregated_pools(tmp_path):
    rep = _rep(tmp_path, LLAMA3_70B, tp=4)
    slo = SLO(ttft_s=1.0, tpot_s=0.05)
    d = estimate_disagg(rep, rep, 2048, 256, slo, target_qps=10)
    assert d.prefill_rate > 0 and d.decode_rate > 0 and d.kv_transfer_s > 0
    assert d.ttft_p_s <= 1.0 and d.tpot_s <= 0.05
    assert d.prefill_replicas == math.ceil(10 / d.prefill_rate)
    assert d.devices == (d.prefill_replicas + d.decode_replicas) * 4
    assert d.requests_per_s_per_device == pytest.approx(1 / (4 / d.prefill_rate + 4 / d.decode_rate))


def test_encoder_latency_and_qps(tmp_path):
    rep = _rep(tmp_path, BERT_BASE, engine="tensorrt")
    e1, e64 = estimate_encoder(rep, 1, 128), estimate_encoder(rep, 64, 128)
    assert e1.qps == pytest.approx(1 / e1.latency_s)
    assert e64.qps == pytest.approx(64 / e64.latency_s)
    assert e64.latency_s > e1.latency_s and e64.qps > e1.qps
    with pytest.raises(UserInputError):
        estimate_encoder(rep, 1, 1024)  # beyond BERT's 512 positions


def test_encoder_attention_is_bidirectional(tmp_path):
    rep = _rep(tmp_path, BERT_BASE, engine="tensorrt")
    st = estimate_encoder(rep, 1, 512).step
    # 12 layers · 2·h·s²·(d_qk + d_v) FLOP at 50% of 1000 TFLOP/s (no causal halving)
    att = 12 * 2 * 12 * 512 * 512 * 128 / 500e12
    assert st.compute_s > att


def test_emit_commands(tmp_path):
    rep = _rep(tmp_path, LLAMA3_70B, tp=4, dtype="fp8", kv_dtype="fp8")
    v = emit(rep, "vllm", max_num_seqs=128, max_model_len=4096)
    assert "--tensor-parallel-size 4" in v and "--quantization" not in v and "--max-num-seqs 128" in v
    assert "--kv-cache-dtype fp8" in v and "--gpu-memory-utilization 0.90" in v
    s = emit(rep, "sglang", max_num_seqs=128, max_model_len=4096)
    assert "--tp-size 4" in s and "--mem-fraction-static" in s
    for engine in ("trtllm", "mindie"):  # NVIDIA-only / Ascend-only: not on this test vendor's device
        with pytest.raises(UserInputError) as e:  # (their commands: tests/unit/test_launch_targets.py)
            emit(rep, engine, max_num_seqs=128, max_model_len=4096)
        assert e.value.field == "--emit"
    with pytest.raises(UserInputError) as e:
        emit(rep, "ollama", max_num_seqs=1, max_model_len=10)
    assert e.value.field == "emit"


def test_int4_expects_an_awq_checkpoint(tmp_path):
    rep = _rep(tmp_path, LLAMA3_70B, tp=2, dtype="int4-wo")
    text = emit(rep, "vllm", max_num_seqs=8, max_model_len=1024)
    assert "AWQ or GPTQ" in text and "--quantization" not in text  # vLLM reads the scheme from the checkpoint
    assert dataclasses.asdict(rep.precision)["weight_dtype"] == "int4"
