"""The prediction of the bench model's steps (``xpuplan validate --local``): the training step is the
training planner's layer compute plus what the bench's eager mixed-precision code moves besides; the eager
decode step is paced by the slower of the device and the host issuing its operations."""

from __future__ import annotations

import pytest

from xpuplan.bench.local_validation import (
    CAST_FP32_16_BYTES,
    bench_code_extra_bytes,
    predict_decode_step,
    predict_train_step,
)
from xpuplan.bench.model import ACCEL_MODEL, CPU_MODEL
from xpuplan.catalog import load_catalog
from xpuplan.perf.efficiency import efficiency_for
from xpuplan.train.compute import ATTENTION_BACKWARD_FACTOR, layer_compute

H200 = "nvidia-h200-sxm-141gb"


def test_train_step_uses_the_planner_layer_compute_and_its_backward_factors() -> None:
    dev = load_catalog().get(H200)
    eff = efficiency_for(dev)
    pred = predict_train_step(ACCEL_MODEL, dev, "bf16", eff)
    c = layer_compute(ACCEL_MODEL.to_arch(), dev, eff, micro_batch=ACCEL_MODEL.train_batch,
                      seq_len=ACCEL_MODEL.train_seq, tp=1, cp=1, ep=1, sp=False, precision="bf16")
    assert c.attn_bwd == pytest.approx(ATTENTION_BACKWARD_FACTOR * c.attn_fwd)
    assert c.head_elem > 0  # the loss over the logits is part of the head
    layers = ACCEL_MODEL.layers
    assert pred.breakdown["forward_s"] == pytest.approx(layers * (c.dense_gemm + c.attn_fwd + c.dense_elem)
                                                        + c.head_gemm + c.head_elem)
    assert pred.time_s == pytest.approx(sum(pred.breakdown.values()))


def test_mixed_precision_traffic_only_under_autocast() -> None:
    amp = bench_code_extra_bytes(ACCEL_MODEL, "bf16")
    fp32 = bench_code_extra_bytes(CPU_MODEL, "fp32")
    assert set(amp) == {"layout copies", "autocast weight casts", "fp32 residual stream", "logits upcast"}
    assert set(fp32) == {"layout copies"}
    d, f, v, n = ACCEL_MODEL.d_model, ACCEL_MODEL.ffn, ACCEL_MODEL.vocab, ACCEL_MODEL.layers
    # every linear weight cast to 16 bits in the forward and its gradient back to fp32 in the backward
    assert amp["autocast weight casts"] == pytest.approx(2 * CAST_FP32_16_BYTES * (n * (4 * d * d + 3 * d * f) + v * d))
    tokens = ACCEL_MODEL.train_batch * ACCEL_MODEL.train_seq
    assert amp["logits upcast"] == pytest.approx(2 * CAST_FP32_16_BYTES * tokens * v)
    dev = load_catalog().get(H200)
    eff = efficiency_for(dev)
    with_amp = predict_train_step(ACCEL_MODEL, dev, "bf16", eff)
    assert with_amp.breakdown["autocast_weight_casts_s"] > 0 and with_amp.breakdown["fp32_residual_stream_s"] > 0


def test_eager_decode_is_paced_by_the_slower_of_device_and_host() -> None:
    dev = load_catalog().get(H200)
    eff = efficiency_for(dev)
    device_only = predict_decode_step(ACCEL_MODEL, dev, "bf16", eff)
    assert "host_issue_s" not in device_only.breakdown
    fast_host = predict_decode_step(ACCEL_MODEL, dev, "bf16", eff, host_issue_s=1e-9)
    assert fast_host.time_s == pytest.approx(device_only.time_s)
    slow_host = predict_decode_step(ACCEL_MODEL, dev, "bf16", eff, host_issue_s=50e-6)
    assert slow_host.time_s == pytest.approx(slow_host.breakdown["host_issue_s"])
    assert slow_host.time_s > device_only.time_s


def test_graph_replayed_dispatch_is_measured_on_cuda_and_rocm_only() -> None:
    from xpuplan.bench.detect import Backend
    from xpuplan.bench.model import model_cases
    from xpuplan.bench.timing import TimingPlan

    plan = TimingPlan(target_s=0.01, repeats=1, warmup=0)
    names = {kind: [c.name for c in model_cases(Backend(kind, dev, "x", "x", k), CPU_MODEL, "bf16", plan)]
             for kind, dev, k in (("cuda", "cuda:0", "GPU"), ("rocm", "cuda:0", "GPU"), ("npu", "npu:0", "NPU"),
                                  ("cpu", "cpu", "CPU"))}
    graph = "dispatch tiny-model decode step (graph replay)"
    assert graph in names["cuda"] and graph in names["rocm"]
    assert graph not in names["npu"] and graph not in names["cpu"]
