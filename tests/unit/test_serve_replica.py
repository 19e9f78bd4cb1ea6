"""Per-formula tests of the serving model: step time, KV capacity, precision, engines, estimates."""

from __future__ import annotations

import dataclasses
import math

import pytest

from tests.unit.archs import LLAMA3_70B
from tests.unit.hwfixture import device
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.flops import flops_prefill
from xpuplan.perf.memory import kv_cache_bytes_per_token
from xpuplan.perf.params import param_breakdown
from xpuplan.serve import estimate_static, make_replica, memory_plan, step_time
from xpuplan.serve.comm import time_allreduce_s
from xpuplan.serve.constants import SERVING_WORKSPACE_BYTES, engine_profile
from xpuplan.serve.estimate import estimate_continuous, max_batch
from xpuplan.serve.kv import max_concurrent_sequences
from xpuplan.serve.precision import resolve_precision

#: Ideal efficiencies: full bandwidth, no kernel overheads, a flat GEMM efficiency, so times are exact formulas.
IDEAL = Efficiency(gemm_peak_fraction=0.8, gemm_half_dim=0, low_precision_factor=1.0, attention_peak_fraction=0.5,
                   memory_bw_fraction=1.0, kernel_overhead_s=0.0, scale_up_bw_fraction=0.8, scale_out_bw_fraction=0.8,
                   scale_up_latency_s=0.0, scale_out_latency_s=0.0, source="test")

#: A 7B-like decoder (MHA, gated MLP) for formula checks independent of the preset files.
SEVEN_B = ModelArch(id="t-7b", name="7B shape", n_layers=32, d_model=4096, n_heads=32, ffn_dim=11008, vocab_size=32000,
                    mlp="gated", max_seq_len=4096)


def _rep(tmp_path, model=SEVEN_B, *, overhead: float = 0.0, **kw):
    rep = make_replica(model, device(tmp_path), eff=IDEAL, engine=kw.pop("engine", "vllm"), **kw)
    return dataclasses.replace(rep, engine=dataclasses.replace(rep.engine, step_overhead_s=overhead))


def test_decode_step_is_bytes_over_bandwidth_when_memory_bound(tmp_path):
    rep = _rep(tmp_path)
    st = step_time(rep, decode_seqs=1, decode_context=1000)
    weights = param_breakdown(SEVEN_B).total - SEVEN_B.vocab_size * SEVEN_B.d_model  # input embedding not read
    kv = kv_cache_bytes_per_token(SEVEN_B, "bf16") * 1000
    expected = (2.0 * weights + kv) / 4000e9  # testco-x1: 4000 GB/s, memory_bw_fraction 1
    assert st.bound == "memory"
    assert st.memory_s == pytest.approx(expected, rel=0.02)
    assert st.total_s == pytest.approx(st.memory_s, rel=0.02)  # no overheads, compute hidden


def test_decode_step_grows_linearly_with_context(tmp_path):
    rep = _rep(tmp_path)
    t = [step_time(rep, decode_seqs=8, decode_context=c).total_s for c in (1000, 2000, 3000)]
    assert t[2] - t[1] == pytest.approx(t[1] - t[0], rel=0.01)
    per_token = kv_cache_bytes_per_token(SEVEN_B, "bf16") * 8 / 4000e9
    assert t[1] - t[0] == pytest.approx(1000 * per_token, rel=0.02)


def test_prefill_is_compute_bound_and_matches_flops(tmp_path):
    rep = _rep(tmp_path)
    st = step_time(rep, prefill_tokens=4096, prefill_len=4096)
    assert st.bound == "compute"
    # GEMMs at 80% of 1000 TFLOP/s; attention (causal) at 50%
    flops = flops_prefill(SEVEN_B, 4096)
    assert st.compute_s == pytest.approx(flops / 800e12, rel=0.12)
    assert st.total_s >= flops / 1000e12


def test_attention_cost_grows_quadratically_in_prefill(tmp_path):
    rep = _rep(tmp_path)
    lin = step_time(rep, prefill_tokens=8192, prefill_len=512).total_s  # 16 prompts of 512
    long = step_time(rep, prefill_tokens=8192, prefill_len=8192).total_s  # one prompt of 8192
    assert long > lin * 1.1


def test_tp_allreduce_is_added_and_zero_at_tp1(tmp_path):
    d = device(tmp_path)
    assert time_allreduce_s(1e6, 1, d, IDEAL) == 0.0
    # ring volume 2(n-1)/n · bytes at 80% of 400 GB/s, no latency in IDEAL
    assert time_allreduce_s(1e6, 4, d, IDEAL) == pytest.approx(1.5e6 / 320e9)
    rep1, rep4 = _rep(tmp_path, tp=1), _rep(tmp_path, tp=4)
    assert step_time(rep1, decode_seqs=4, decode_context=100).comm_s == 0.0
    st4 = step_time(rep4, decode_seqs=4, decode_context=100)
    assert st4.comm_s == pytest.approx(2 * 32 * time_allreduce_s(4 * 4096 * 2, 4, d, IDEAL))


def test_engine_step_overhead_is_added_once_per_step(tmp_path):
    a = step_time(_rep(tmp_path), decode_seqs=1, decode_context=10).total_s
    b = step_time(_rep(tmp_path, overhead=0.002), decode_seqs=1, decode_context=10).total_s
    assert b - a == pytest.approx(0.002)


def test_kv_capacity_with_paged_blocks(tmp_path):
    rep = _rep(tmp_path, block_size_tokens=16, memory_fraction=0.9)
    plan = memory_plan(rep)
    kv_tok = kv_cache_bytes_per_token(SEVEN_B, "bf16")
    assert plan.kv_bytes_per_token == kv_tok
    budget = 80e9 * 0.9 - plan.weights_bytes - SERVING_WORKSPACE_BYTES - plan.activation_bytes
    assert plan.kv_budget_bytes == pytest.approx(budget)
    assert plan.kv_blocks == int(budget // (kv_tok * 16))
    # 17 tokens need two 16-token blocks; 16 tokens one
    assert plan.max_sequences(17) == plan.kv_blocks // 2
    assert plan.max_sequences(16) == plan.kv_blocks
    assert max_concurrent_sequences(rep, plan, 17) == min(rep.max_num_seqs, plan.kv_blocks // 2)


def test_kv_heads_split_over_tp_and_replicated_beyond(tmp_path):
    gqa = LLAMA3_70B  # 8 KV heads
    p8 = memory_plan(_rep(tmp_path, gqa, tp=8, dtype="fp8", kv_dtype="fp8"))
    full = kv_cache_bytes_per_token(gqa, "fp8")
    assert p8.kv_bytes_per_token == pytest.approx(full / 8)


def test_the_engine_decides_the_kv_dtype_of_fp8_weights_when_none_is_given(tmp_path):
    """TensorRT-LLM's FP8 checkpoints quantise the KV cache too; vLLM and SGLang keep it in the model's
    dtype (``--kv-cache-dtype auto``) unless told, which halves the sequences the cache holds."""
    assert _rep(tmp_path, LLAMA3_70B, tp=8, dtype="fp8", engine="trtllm").precision.kv_dtype == "fp8"
    for engine in ("vllm", "vLLM 0.10.2", "sglang", "lmdeploy"):
        assert _rep(tmp_path, LLAMA3_70B, tp=8, dtype="fp8", engine=engine).precision.kv_dtype == "bf16"
    assert _rep(tmp_path, LLAMA3_70B, tp=8, dtype="fp8", kv_dtype="fp8").precision.kv_dtype == "fp8"
    vllm = memory_plan(_rep(tmp_path, LLAMA3_70B, tp=8, dtype="fp8"))
    trt = memory_plan(_rep(tmp_path, LLAMA3_70B, tp=8, dtype="fp8", engine="trtllm"))
    assert vllm.kv_bytes_per_token == pytest.approx(2 * trt.kv_bytes_per_token)


def test_does_not_fit_is_infeasible_with_a_hint(tmp_path):
    rep = make_replica(LLAMA3_70B, device(tmp_path), eff=IDEAL)
    with pytest.raises(InfeasibleError) as e:
        estimate_static(rep, 512, 128, 1)
    msg = " ".join(e.value.reasons)
    # 141 GB of bf16 weights: tp=2 leaves 70.5 GB + 2 GB workspace + activations > 72 GB usable, so tp>=4
    assert "weights 141" in msg and "80.0 GB" in msg and "tp>=4" in msg and "int4-wo" in msg


def test_max_batch_is_the_largest_that_fits(tmp_path):
    rep = _rep(tmp_path, engine="pytorch")
    b = max_batch(rep, 1000, 1000)
    plan = memory_plan(rep)
    assert b == min(rep.max_num_seqs, plan.max_sequences(2000))
    estimate_static(rep, 1000, 1000, b)  # fits
    if b < rep.max_num_seqs:
        with pytest.raises(InfeasibleError):
            estimate_static(rep, 1000, 1000, b + 1)


def test_static_estimate_identities(tmp_path):
    rep = _rep(tmp_path, overhead=0.001)
    e = estimate_static(rep, 512, 128, 16)
    assert e.e2e_latency_s == pytest.approx(e.ttft_s + 127 * e.tpot_s)
    assert e.output_tokens_per_s == pytest.approx(16 * 128 / e.e2e_latency_s)
    assert e.total_tokens_per_s == pytest.approx(16 * 640 / e.e2e_latency_s)
    assert e.requests_per_s == pytest.approx(16 / e.e2e_latency_s)
    assert e.metric("ttft_ms") == pytest.approx(e.ttft_s * 1e3)


def test_throughput_grows_and_tpot_grows_with_batch(tmp_path):
    rep = _rep(tmp_path, overhead=0.001)
    es = [estimate_static(rep, 512, 128, b) for b in (1, 8, 64)]
    assert es[0].output_tokens_per_s < es[1].output_tokens_per_s < es[2].output_tokens_per_s
    assert es[0].tpot_s <= es[1].tpot_s <= es[2].tpot_s


def test_continuous_steady_state(tmp_path):
    rep = _rep(tmp_path, overhead=0.001)
    e = estimate_continuous(rep, 512, 128, 32)
    assert e.output_tokens_per_s == pytest.approx(32 / e.tpot_s)
    assert e.requests_per_s == pytest.approx(e.output_tokens_per_s / 128)
    # chunked prefill: the running decode step carries 32·512/128 prompt tokens, so it is slower than pure decode
    assert e.tpot_s > step_time(rep, decode_seqs=32, decode_context=512 + 64).total_s


def test_int4_weight_only_faster_at_batch1_slower_when_compute_bound(tmp_path):
    bf16 = _rep(tmp_path)
    int4 = _rep(tmp_path, dtype="int4-wo")
    assert int4.precision.weight_only and int4.precision.gemm_dtype == "bf16"
    d1 = step_time(int4, decode_seqs=1, decode_context=100).total_s / step_time(bf16, decode_seqs=1, decode_context=100).total_s
    assert d1 < 0.4  # a quarter of the weight bytes
    big = step_time(int4, prefill_tokens=8192, prefill_len=1024)
    assert big.dequant_s > 0
    assert big.total_s > step_time(bf16, prefill_tokens=8192, prefill_len=1024).total_s


def test_precision_resolution(tmp_path):
    d = device(tmp_path)  # bf16 + fp8, no int8
    p = resolve_precision("fp8", d)
    assert (p.weight_dtype, p.gemm_dtype, p.kv_dtype, p.weight_only) == ("fp8", "fp8", "fp8", False)
    assert resolve_precision("awq", d).scheme == "int4-wo"
    assert resolve_precision("bf16", d, "fp8").kv_dtype == "fp8"
    with pytest.raises(UserInputError, match="int8"):
        resolve_precision("int8", d)
    with pytest.raises(UserInputError) as e:
        resolve_precision("fp7", d)
    assert e.value.field == "dtype"


def test_fp8_on_a_device_without_fp8_runs_weight_only():
    from xpuplan.catalog import load_catalog

    p = resolve_precision("fp8", load_catalog().get("nvidia-a100-sxm-80gb"))
    assert p.weight_only and p.gemm_dtype in ("bf16", "fp16") and p.note and "weight-only" in p.note


def test_parallelism_errors_name_the_field(tmp_path):
    with pytest.raises(UserInputError) as e:
        make_replica(LLAMA3_70B, device(tmp_path), tp=3, eff=IDEAL)
    assert e.value.field == "tp" and "tp (3) must divide n_heads (64)" in str(e.value)
    with pytest.raises(UserInputError) as e:
        make_replica(LLAMA3_70B, device(tmp_path), ep=2, eff=IDEAL)
    assert e.value.field == "ep"
    with pytest.raises(UserInputError) as e:
        make_replica(LLAMA3_70B, device(tmp_path), tp=0, eff=IDEAL)
    assert e.value.field == "tp"


def test_input_lengths_must_be_positive(tmp_path):
    rep = _rep(tmp_path)
    with pytest.raises(UserInputError, match="--in must be positive"):
        estimate_static(rep, 0, 10, 1)
    with pytest.raises(UserInputError, match="--out must be positive"):
        estimate_static(rep, 10, 0, 1)


def test_engine_names_and_versions():
    assert engine_profile("TensorRT-LLM v0.6.1").id == "trtllm"
    assert not engine_profile("TensorRT-LLM v0.6.1").gqa_shared_kv_load  # before XQA (v0.8)
    assert engine_profile("TensorRT-LLM v0.9.0").gqa_shared_kv_load
    assert engine_profile("vLLM (CI build 9515)").id == "vllm"
    assert engine_profile("LMDeploy v0.2.0 (TurboMind)").id == "lmdeploy"
    assert engine_profile("MindIE 1.0").id == "mindie"
    assert engine_profile(None).id == "vllm"
    with pytest.raises(UserInputError) as e:
        engine_profile("my-engine")
    assert e.value.field == "engine"


def test_vllm_schedules_asynchronously_from_014_only():
    """vLLM turns asynchronous scheduling on by default from 0.14.0 (0.13 and earlier: off); a name
    without a version is a current build. Its per-request host cost is data, not zero; C++ runtimes
    have none."""
    assert not engine_profile("vLLM 0.10.2 (ROCm 7.0.0 build)").async_scheduling
    assert not engine_profile("vLLM v0.13.0").async_scheduling
    assert engine_profile("vLLM v0.14.0").async_scheduling
    assert engine_profile("vllm").async_scheduling
    assert engine_profile("vLLM-Ascend v0.9.1").host_s_per_sequence == pytest.approx(9e-6)
    assert engine_profile("TensorRT-LLM v0.9.0").host_s_per_sequence == 0.0


def test_synchronous_engine_loop_adds_host_time_per_scheduled_request(tmp_path):
    rep = _rep(tmp_path, engine="vLLM 0.10.2")
    assert any("synchronously (asynchronous from 0.14)" in n and "9 µs" in n for n in rep.notes)
    assert not any("synchronously" in n for n in _rep(tmp_path, engine="vllm").notes)
    per_seq = rep.engine.host_s_per_sequence
    small = step_time(rep, decode_seqs=128, decode_context=1000)
    big = step_time(rep, decode_seqs=256, decode_context=1000)
    assert small.overhead_s == pytest.approx(128 * per_seq)
    assert big.overhead_s - small.overhead_s == pytest.approx(128 * per_seq)
    # a prompt split into chunks is one request per chunk in the step, beside the decoding ones
    mixed = step_time(rep, decode_seqs=10, decode_context=1000, prefill_tokens=2048, prefill_len=1024)
    assert mixed.overhead_s == pytest.approx(12 * per_seq)


def test_asynchronous_scheduling_hides_host_time_under_the_device_step(tmp_path):
    rep = _rep(tmp_path, engine="vLLM v0.14.0")
    st = step_time(rep, decode_seqs=256, decode_context=1000)
    assert st.overhead_s == 0.0  # 2.3 ms of host work under a longer device step
    slow_host = dataclasses.replace(rep, engine=dataclasses.replace(rep.engine, host_s_per_sequence=1e-3))
    st2 = step_time(slow_host, decode_seqs=256, decode_context=1000)
    device_s = st2.ops_s + st2.dequant_s + st2.comm_s
    assert 0.256 > device_s  # the host is now the bottleneck: the step lasts as long as the host work
    assert st2.total_s == pytest.approx(0.256)


def test_tensorrt_llms_pytorch_executor_pays_host_time_per_request_its_cpp_executor_none():
    """TensorRT-LLM's PyTorch backend (the default from 1.0, --backend pytorch before) runs a Python executor loop:
    each scheduled request costs host time (PR #10273's GB200 measurement, 29 µs), hidden by the overlap scheduler
    from 0.20 on. The TensorRT backend's C++ executor (older releases) and products that print their own version
    (NIM) pay none; a name without a version is a current build."""
    current = engine_profile("TensorRT-LLM v1.0 (PyTorch backend)")
    assert current.host_s_per_sequence == pytest.approx(29e-6)
    assert current.async_scheduling
    assert engine_profile("trtllm").host_s_per_sequence == pytest.approx(29e-6)
    assert engine_profile("TRT-LLM 1.2").host_s_per_sequence == pytest.approx(29e-6)
    opt_in = engine_profile("TensorRT-LLM v0.19 (PyTorch backend)")
    assert opt_in.host_s_per_sequence == pytest.approx(29e-6) and not opt_in.async_scheduling
    assert engine_profile("TensorRT-LLM v0.6.1").host_s_per_sequence == 0.0
    assert engine_profile("TensorRT-LLM v0.21").host_s_per_sequence == 0.0
    assert engine_profile("NVIDIA NIM 1.8.0 (Llama-3.3-70b-Instruct)").host_s_per_sequence == 0.0
    # a release that names PyTorch only as its framework version still runs the C++ executor
    assert engine_profile("TensorRT-LLM v0.9.0 (PyTorch 2.2 container)").host_s_per_sequence == 0.0


def test_a_small_model_at_a_large_batch_is_host_bound_under_the_pytorch_executor(tmp_path):
    """With the overlap scheduler the step lasts max(device, host): a 7B model's decode step at 2,048 sequences
    on the ideal test device is shorter than 2,048 x 29 µs, so the PyTorch executor's step is the host time and
    the C++ executor's the device time."""
    py = _rep(tmp_path, engine="TensorRT-LLM v1.0")
    cpp = _rep(tmp_path, engine="TensorRT-LLM v0.9.0")
    st_py, st_cpp = (step_time(r, decode_seqs=2048, decode_context=16) for r in (py, cpp))
    host = 2048 * py.engine.host_s_per_sequence
    assert st_cpp.total_s < host
    assert st_py.total_s == pytest.approx(host, rel=0.02)
    # at a small batch the host work hides under the device step: both executors take the device time
    small_py, small_cpp = (step_time(r, decode_seqs=8, decode_context=16) for r in (py, cpp))
    assert small_py.total_s == pytest.approx(small_cpp.total_s)


def test_gqa_without_kv_sharing_reads_kv_per_query_head(tmp_path):
    new = _rep(tmp_path, LLAMA3_70B, tp=8, engine="trtllm")
    old = _rep(tmp_path, LLAMA3_70B, tp=8, engine="TensorRT-LLM v0.6.1")
    kv_new = step_time(new, decode_seqs=64, decode_context=4000).memory_s
    kv_old = step_time(old, decode_seqs=64, decode_context=4000).memory_s
    per_tok = kv_cache_bytes_per_token(LLAMA3_70B, "bf16") / 8 * 64 * 4000 / 4000e9
    assert kv_old - kv_new == pytest.approx(per_tok * (64 // 8 - 1), rel=0.02)


def test_moe_expert_parallel_devices_and_memory(tmp_path):
    from tests.unit.archs import MIXTRAL

    rep = _rep(tmp_path, MIXTRAL, tp=1, ep=2)
    assert rep.n_devices == 2
    one = memory_plan(_rep(tmp_path, MIXTRAL, tp=2))
    two = memory_plan(rep)
    assert two.weights_bytes > one.weights_bytes  # attention replicated on each EP group
    assert math.isfinite(step_time(rep, decode_seqs=16, decode_context=100).total_s)


def test_pipeline_parallel_splits_weights_and_runs(tmp_path):
    one = _rep(tmp_path, LLAMA3_70B, tp=4)
    two = _rep(tmp_path, LLAMA3_70B, tp=4, pp=2)
    assert two.n_devices == 8
    assert memory_plan(two).weights_bytes == pytest.approx(memory_plan(one).weights_bytes / 2, rel=0.05)
    e1, e2 = estimate_static(one, 512, 64, 32), estimate_static(two, 512, 64, 32)
    # each of the 2 micro-batches of 16 crosses both stages: more devices, a similar token rate
    assert 0.5 < e2.output_tokens_per_s / e1.output_tokens_per_s < 2.0
    assert step_time(two, decode_seqs=16, decode_context=500).comm_s > step_time(one, decode_seqs=16, decode_context=500).comm_s


def test_public_api_is_curated():
    import xpuplan.serve as serve

    expected = {
        "EMITTERS", "ENGINES", "SLO", "CapacityOption", "CapacityPlan", "DisaggEstimate", "EncoderEstimate",
        "EngineProfile", "LoadPoint", "MemoryPlan", "Precision", "Replica", "SLOResult", "ServingEstimate", "StepTime",
        "emit", "emit_plan", "engine_profile", "estimate", "estimate_continuous", "estimate_disagg", "estimate_encoder",
        "estimate_static", "load_point", "make_replica", "max_batch", "max_concurrent_sequences", "max_throughput",
        "memory_plan", "resolve_precision", "size_for_qps", "step_time", "throughput_at_slo",
        # one validity module / memory model / vectorised serving (issue 9)
        "ServingPlan", "ReplicaFit", "replica_fit", "EfficiencyArrays", "ServingArrays", "continuous_arrays",
        "estimate_static_arrays", "step_time_arrays",
    }
    assert set(serve.__all__) == expected
    assert all(hasattr(serve, name) for name in serve.__all__)


def test_vllm_ascend_0_9_1_prefills_whole_prompts_first_for_models_without_mla():
    # vllm-ascend v0.9.1 platform.py (PR #2659) turns chunked prefill off for non-MLA models and raises the token
    # budget to max_model_len; its release candidates and later releases keep vLLM's chunked prefill
    from xpuplan.catalog import load_catalog
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.models import get_model
    from xpuplan.serve.replica import make_replica

    a = default_assumptions()
    assert a.engine("vLLM-Ascend v0.9.1").prefill_first_non_mla.active
    assert not a.engine("vLLM-Ascend v0.9.1rc3").prefill_first_non_mla.active
    assert not a.engine("vLLM 0.9.1").prefill_first_non_mla.active  # the CUDA build
    assert not a.engine("vllm-ascend v0.11.0").prefill_first_non_mla.active
    npu = load_catalog().get("huawei-ascend-910b")
    qwen = get_model("qwen3-8b")
    rep = make_replica(qwen, npu, engine="vLLM-Ascend v0.9.1")
    assert not rep.engine.chunked_prefill and rep.engine.prefill_chunk_tokens == qwen.max_seq_len
    assert any("without chunked prefill" in n for n in rep.notes)
    later = make_replica(qwen, npu, engine="vLLM-Ascend v0.11.0")
    assert later.engine.chunked_prefill and later.engine.prefill_chunk_tokens < qwen.max_seq_len
    mla = make_replica(get_model("deepseek-v3"), npu, tp=8, dtype="int8-wo", engine="vLLM-Ascend v0.9.1")
    assert mla.engine.chunked_prefill


def test_vllm_ascend_before_0_12_computes_the_full_square_in_steps_of_fresh_prompts():
    # vllm-ascend < 0.12: PrefillNoCache steps call torch_npu._npu_flash_attention, an ATB SelfAttention with
    # isTriuMask 0 (every tile of the square computed and masked); 0.12.0rc1 uses the causal sparse mode
    from xpuplan.catalog import load_catalog
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.models import get_model
    from xpuplan.serve.replica import make_replica

    a = default_assumptions()
    assert a.engine("vLLM-Ascend v0.9.1").masked_prefill_attention.active
    assert a.engine("vllm-ascend 0.11.0rc1").masked_prefill_attention.active
    assert not a.engine("vllm-ascend 0.12.0rc1").masked_prefill_attention.active
    assert not a.engine("vLLM v0.11.0").masked_prefill_attention.active  # the CUDA build
    assert not a.engine("vllm-ascend").masked_prefill_attention.active  # no version: the current build
    npu = load_catalog().get("huawei-ascend-910b")
    qwen = get_model("qwen3-8b")
    old, new = (make_replica(qwen, npu, engine=e) for e in ("vLLM-Ascend v0.11.0", "vLLM-Ascend v0.12.0rc1"))
    assert any("computes every attention score of the square" in n for n in old.notes)
    assert not any("square" in n for n in new.notes)
    # a fresh 16K-token prompt: the same GEMMs and twice the attention compute
    fresh_old = step_time(old, prefill_tokens=16384, prefill_len=16384, prefill_kv_len=16384)
    fresh_new = step_time(new, prefill_tokens=16384, prefill_len=16384, prefill_kv_len=16384)
    short_old = step_time(old, prefill_tokens=16, prefill_len=16, prefill_kv_len=16)
    short_new = step_time(new, prefill_tokens=16, prefill_len=16, prefill_kv_len=16)
    assert fresh_old.compute_s > fresh_new.compute_s * 1.3  # attention is most of a 16K prefill's work
    assert short_old.compute_s == pytest.approx(short_new.compute_s, rel=0.02)  # and nothing of a short one's
    # a later chunk (cached context) or a step with decodes runs another kernel: the causal cost
    for kw in ({"prefill_tokens": 4096, "prefill_len": 4096, "prefill_kv_len": 16384},
               {"decode_seqs": 4, "decode_context": 1000, "prefill_tokens": 4096, "prefill_len": 4096,
                "prefill_kv_len": 4096}):
        assert step_time(old, **kw).compute_s == pytest.approx(step_time(new, **kw).compute_s)
    # MLA models run the build's MLA backend
    dsv3 = get_model("deepseek-v3")
    mla = make_replica(dsv3, npu, tp=16, dtype="int8-wo", engine="vLLM-Ascend v0.11.0")
    assert not any("square" in n for n in mla.notes)


def test_a_layout_beyond_the_devices_domain_is_noted_with_the_domain_it_leaves():
    """A PCIe card's TP group stays on the server's PCIe-connected cards (8) before it crosses the network; an NVLink
    part's stays in its NVLink domain. The note names the domain the replica's own links have."""
    from xpuplan.catalog import get_device
    from xpuplan.models import get_model
    from xpuplan.serve import make_replica

    m = get_model("llama3.1-70b")

    def crossing(hw: str, tp: int) -> list[str]:
        return [n for n in make_replica(m, get_device(hw), tp=tp).notes if "cross the scale-out network" in n]

    assert crossing("nvidia-rtx-pro-6000-server-96gb", 8) == []  # eight PCIe cards in one server
    assert crossing("nvidia-l40s-48gb", 8) == []
    assert "server of PCIe-connected cards (8)" in crossing("nvidia-l40s-48gb", 16)[0]
    assert crossing("nvidia-h100-sxm-80gb", 8) == []
    assert "scale-up domain (8)" in crossing("nvidia-h100-sxm-80gb", 16)[0]


def test_each_attention_dp_group_schedules_its_own_share_of_the_requests():
    """With attention data-parallel groups (ep > 1) every group runs its own scheduler over its requests, in parallel:
    a step's host time is that of one group's share, not of the whole batch."""
    from xpuplan.catalog import get_device
    from xpuplan.models import get_model

    m, dev = get_model("qwen3-30b-a3b"), get_device("nvidia-h100-sxm-80gb")
    sync = "vLLM v0.10.2"  # schedules synchronously: the per-request host time is exposed whole
    tp_only = make_replica(m, dev, tp=2, ep=1, engine=sync)
    adp = make_replica(m, dev, tp=1, ep=2, engine=sync)
    per_seq = tp_only.engine.host_s_per_sequence
    assert per_seq > 0 and adp.engine.host_s_per_sequence == per_seq
    base = tp_only.engine.step_overhead_s
    a = step_time(tp_only, decode_seqs=256, decode_context=1000)
    b = step_time(adp, decode_seqs=256, decode_context=1000)
    assert a.overhead_s == pytest.approx(base + 256 * per_seq)
    assert b.overhead_s == pytest.approx(base + 128 * per_seq)


def test_a_full_pipeline_waits_for_its_busiest_stage():
    """pp stages, each with its own micro-batch: a round takes pp x the busiest stage. The engines split the layers
    evenly (the remainder on the first stages) and the last stage also runs the output head, so with an even split
    the round is the stages' sum plus (pp - 1) heads; with one micro-batch in the pipeline it is the sum."""
    from xpuplan.catalog import get_device
    from xpuplan.models import get_model
    from xpuplan.serve.step import pipeline_wait_s

    m, dev = get_model("llama3.3-70b"), get_device("nvidia-rtx-pro-6000-server-96gb")
    rep8 = make_replica(m, dev, pp=8, dtype="nvfp4")
    assert m.n_layers % 8 == 0
    layers, head = 80e-3, 2e-3  # seconds: all layers, the head
    assert pipeline_wait_s(rep8, layers, head) == pytest.approx(7 * head)
    assert pipeline_wait_s(rep8, layers, head, in_flight=1) == 0.0
    assert pipeline_wait_s(rep8, layers, head, in_flight=4) == pytest.approx(max(0.0, 4 * (10e-3 + head) - 82e-3))
    assert pipeline_wait_s(make_replica(m, dev, pp=1, dtype="nvfp4"), layers, head) == 0.0
    rep3 = make_replica(m, dev, pp=3, dtype="nvfp4")  # 80 layers on 3 stages: 27, 27, 26 (+ head)
    assert pipeline_wait_s(rep3, layers, 0.0) == pytest.approx(3 * 27e-3 - 80e-3)
    # in the step model: a loaded PP8 decode round is longer than one sequence's pass by the head's share
    full = step_time(rep8, decode_seqs=64, decode_context=1000)
    one = step_time(rep8, decode_seqs=64, decode_context=1000, in_flight=1)
    assert one.pipeline_s == 0.0 and full.pipeline_s > 0
    assert full.total_s == pytest.approx(one.total_s + full.pipeline_s)
    assert full.to_dict()["pipeline_s"] == full.pipeline_s
