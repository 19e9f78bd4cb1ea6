"""Serving physics of issue 11 §3: block-scaled FP4, packaged engines, engine KV-sizing conventions,
static batches that do not fit, full-mesh collectives on Ascend."""

from __future__ import annotations

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.memory import inference_weight_bytes, weight_bytes_per_param
from xpuplan.serve import make_replica
from xpuplan.serve.constants import engine_profile
from xpuplan.serve.precision import normalise_scheme, resolve_precision
from xpuplan.units import bytes_per_element


def _dev(name: str):
    return load_catalog().get(name)


# --- block-scaled FP4 ---------------------------------------------------------------------------
def test_block_scaled_fp4_bytes_include_their_scales():
    # NVFP4: 4-bit E2M1 + one 1-byte FP8 scale per 16 elements; MXFP4: + one 1-byte E8M0 per 32
    assert bytes_per_element("nvfp4") == pytest.approx(0.5 + 1 / 16)
    assert bytes_per_element("mxfp4") == pytest.approx(0.5 + 1 / 32)
    assert weight_bytes_per_param("nvfp4") == pytest.approx(4.5 / 8)  # no int4 group overhead on top
    m = get_model("llama3-70b")
    ratio = inference_weight_bytes(m, "nvfp4") / inference_weight_bytes(m, "fp8")
    assert 0.55 < ratio < 0.6  # body at 4.5/8 of fp8's byte, embeddings/head stay 16-bit


def test_fp4_schemes_resolve_on_blackwell_and_are_refused_elsewhere():
    b200 = _dev("nvidia-b200-180gb")
    p = resolve_precision("fp4", b200)
    assert normalise_scheme("fp4") == "nvfp4"
    assert (p.scheme, p.weight_dtype, p.gemm_dtype, p.kv_dtype, p.weight_only) == ("nvfp4", "nvfp4", "fp4", "fp8", False)
    assert resolve_precision("mxfp4", b200).weight_dtype == "mxfp4"
    with pytest.raises(UserInputError) as e:
        resolve_precision("nvfp4", _dev("nvidia-h100-sxm-80gb"))
    assert e.value.field == "dtype" and "no FP4 tensor cores" in str(e.value)


def test_fp4_decode_reads_fewer_bytes_than_fp8():
    from xpuplan.serve.replica import step_time

    m = get_model("llama3-70b")
    b200 = _dev("nvidia-b200-180gb")
    fp4 = step_time(make_replica(m, b200, dtype="nvfp4"), decode_seqs=1, decode_context=1024)
    fp8 = step_time(make_replica(m, b200, dtype="fp8"), decode_seqs=1, decode_context=1024)
    assert fp4.memory_s < 0.7 * fp8.memory_s


# --- packaged products -> the engine they embed -------------------------------------------------
@pytest.mark.parametrize("printed, engine", [
    ("NVIDIA NIM 1.8.0 (Llama-3.3-70b-Instruct)", "trtllm"),
    ("TensorRT-LLM v1.0 (PyTorch backend)", "trtllm"),
    ("vLLM 0.10.2 (ROCm 7.0.0 build, rocm/vllm container 20251006)", "vllm"),
    ("vLLM-Ascend v0.9.1", "vllm"),
    ("Triton Inference Server + TensorRT-LLM backend", "trtllm"),
])
def test_packaged_products_map_to_the_engine_they_embed(printed, engine):
    assert engine_profile(printed).id == engine


# --- each engine sizes its KV cache by its own convention ---------------------------------------
def _plan(engine: str, fraction: float = 0.9):
    from xpuplan.serve import memory_plan

    rep = make_replica(get_model("llama3-8b"), _dev("nvidia-h100-sxm-80gb"), engine=engine, memory_fraction=fraction)
    return rep, memory_plan(rep)


def test_vllm_fraction_is_of_total_memory():
    rep, p = _plan("vllm")
    assert rep.engine.memory_fraction_of == "total"
    fixed = p.weights_bytes + p.workspace_bytes + p.activation_bytes
    assert p.kv_budget_bytes == pytest.approx(0.9 * p.device_bytes - fixed)


def test_trtllm_fraction_is_of_free_memory_after_loading():
    rep, p = _plan("trtllm")
    assert rep.engine.memory_fraction_of == "free"
    fixed = p.weights_bytes + p.workspace_bytes + p.activation_bytes
    assert p.kv_budget_bytes == pytest.approx(0.9 * (p.device_bytes - fixed))
    # free-fraction keeps 10% of what is free, not 10% of the device: more KV than vLLM's 0.9 of total
    assert p.kv_budget_bytes > _plan("vllm")[1].kv_budget_bytes


def test_sglang_static_fraction_covers_weights_and_kv_pool():
    rep, p = _plan("sglang", 0.85)
    assert rep.engine.memory_fraction_of == "static"
    assert p.kv_budget_bytes == pytest.approx(0.85 * p.device_bytes - p.weights_bytes)


def test_kv_capacity_error_is_a_throughput_error_one_for_one():
    """At the max-throughput point the batch is what the KV pool holds: halve the pool, halve the batch."""
    from xpuplan.serve.kv import kv_budget

    usable, full = kv_budget("free", 80e9, 0.9, 20e9, 4e9)
    _, half = kv_budget("free", 80e9, 0.45, 20e9, 4e9)
    assert usable == 80e9 and half == pytest.approx(full / 2)


# --- closed loop above the running-sequence limit (Little's law) --------------------------------
def test_closed_loop_saturates_at_the_running_sequence_limit():
    from xpuplan.serve.estimate import estimate_continuous

    rep = make_replica(get_model("llama3-8b"), _dev("nvidia-h100-sxm-80gb"), engine="vllm", max_num_seqs=32)
    at = estimate_continuous(rep, 2048, 256, 32)
    above = estimate_continuous(rep, 2048, 256, 96)
    assert above.tpot_s == pytest.approx(at.tpot_s)  # TPOT stops growing
    assert above.requests_per_s == pytest.approx(at.requests_per_s)  # throughput saturates
    # the 64 extra clients wait for slots freed at the completion rate: N = X·R
    assert above.ttft_s - at.ttft_s == pytest.approx(64 / at.requests_per_s)
    assert any("running-sequence limit 32" in n for n in above.notes)


def test_below_the_limit_more_clients_raise_tpot():
    from xpuplan.serve.estimate import estimate_continuous

    rep = make_replica(get_model("llama3-8b"), _dev("nvidia-h100-sxm-80gb"), engine="vllm")
    assert estimate_continuous(rep, 1024, 256, 64).tpot_s > estimate_continuous(rep, 1024, 256, 8).tpot_s


# --- static batches never bypass the memory check ----------------------------------------------
def test_a_static_batch_that_does_not_fit_says_so():
    from xpuplan.serve.estimate import estimate_static

    rep = make_replica(get_model("llama2-7b"), _dev("nvidia-h100-sxm-80gb"), engine="trtllm")
    est = estimate_static(rep, 2048, 2048, 512, check_memory=False)
    assert not est.fits
    note = next(n for n in est.notes if n.startswith("memory check"))
    assert "KV cache needs" in note and "memory model is wrong" in note


def test_validation_row_reports_the_memory_check(tmp_path):
    import csv

    from xpuplan.validate import read_rows
    from xpuplan.validate.data_files import public_file
    from xpuplan.validate.serve_predictor import predict

    with open(public_file("inference_public.csv"), encoding="utf-8") as f:
        header = next(csv.reader(f))
    fields = {"id": "T-1", "kind": "infer", "source": "test", "trust": "B", "model": "llama2-7b",
              "hardware": "nvidia-h100-sxm-80gb", "n_devices": "1", "precision": "bf16",
              "metric": "output_tokens_per_s", "value": "1000", "engine": "TensorRT-LLM v0.9", "tp": "1",
              "input_len": "2048", "output_len": "2048", "batch": "512", "printed": "1000", "notes": "test"}
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        w.writerow({k: fields.get(k, "") for k in header})
    (row,) = read_rows(path)
    pred = predict(row)
    assert pred.details["fits"] is False
    assert "memory model is wrong" in pred.details["memory_check"]


# --- decode KV reads per query head: a continuous engine parameter -------------------------------
def test_gqa_kv_reuse_interpolates_between_shared_and_per_query_head_loads():
    import dataclasses

    from xpuplan.serve.replica import step_time

    m = get_model("llama3-70b")  # 64 query heads, 8 KV heads
    rep = make_replica(m, _dev("nvidia-h100-sxm-80gb"), tp=8, engine="trtllm")

    def attn_bytes(reuse: float) -> float:
        r = dataclasses.replace(rep, engine=dataclasses.replace(rep.engine, gqa_kv_reuse=reuse))
        return step_time(r, decode_seqs=64, decode_context=4096).memory_s

    full, half, none = attn_bytes(1.0), attn_bytes(0.5), attn_bytes(0.0)
    assert full < half < none
    assert half - full == pytest.approx((none - full) / 2, rel=1e-6)  # linear in (1 - reuse)
    old = make_replica(m, _dev("nvidia-h100-sxm-80gb"), tp=8, engine="TensorRT-LLM v0.6.1")
    assert step_time(old, decode_seqs=64, decode_context=4096).memory_s == pytest.approx(none)


# --- MoE serving layout is searched -----------------------------------------------------------
def test_moe_layouts_searched_and_attention_replicas_cost_memory():
    from xpuplan.serve import memory_plan
    from xpuplan.serve.capacity import candidate_eps

    m = get_model("qwen3-235b-a22b")
    h100 = _dev("nvidia-h100-sxm-80gb")
    assert candidate_eps(m, h100, 2) == [1, 2, 4]  # tp·ep within the 8-GPU domain
    assert candidate_eps(m, h100, 2, ep=1) == [1]  # given: not searched
    assert candidate_eps(get_model("llama3-70b"), h100, 2) == [1]  # dense model
    # 8 devices either way: attention-DP + EP replicates attention (and dense) weights in each of the
    # ep groups, so each device holds more weight bytes and less KV than TP over all 8
    tp8 = memory_plan(make_replica(m, h100, tp=8, dtype="fp8"))
    dp_ep = memory_plan(make_replica(m, h100, tp=1, ep=8, dtype="fp8"))
    assert dp_ep.weights_bytes > tp8.weights_bytes and dp_ep.kv_budget_bytes < tp8.kv_budget_bytes


# --- speculative decoding and prefix caching are serving inputs --------------------------------
def test_speculation_verifies_k_plus_1_positions_and_divides_by_accepted_tokens():
    from xpuplan.serve.estimate import estimate_static
    from xpuplan.serve.plan import Speculation
    from xpuplan.serve.replica import step_time

    m, d = get_model("llama3-70b"), _dev("nvidia-h100-sxm-80gb")
    plain = make_replica(m, d, tp=4, dtype="fp8")
    spec = make_replica(m, d, tp=4, dtype="fp8", speculation=Speculation(3, 2.5, 0.0))
    st_plain = step_time(plain, decode_seqs=1, decode_context=1000)
    st_spec = step_time(spec, decode_seqs=1, decode_context=1000)
    assert st_spec.tokens == 4 and st_plain.tokens == 1  # 3 drafts + 1 verified per sequence
    # memory-bound at batch 1: verifying 4 positions costs little more than 1 (weights read once)
    assert st_plain.total_s < st_spec.total_s < 1.2 * st_plain.total_s
    a, b = estimate_static(plain, 1000, 200, 1), estimate_static(spec, 1000, 200, 1)
    assert 1.9 < a.tpot_s / b.tpot_s < 2.5  # ~accepted tokens per step, less the verification cost
    # drafting cost: draft_cost of a plain decode step per proposed token
    costly = make_replica(m, d, tp=4, dtype="fp8", speculation=Speculation(3, 2.5, 0.1))
    assert estimate_static(costly, 1000, 200, 1).tpot_s > b.tpot_s


def test_speculation_inputs_are_validated():
    from xpuplan.serve.plan import Speculation

    with pytest.raises(UserInputError) as e:
        Speculation(3, 5.0)
    assert e.value.field == "spec_accept"
    with pytest.raises(UserInputError):
        Speculation(-1, 1.0)


def test_prefix_cache_hits_are_not_prefilled_again():
    from xpuplan.serve.estimate import estimate_continuous, estimate_static

    m, d = get_model("llama3-8b"), _dev("nvidia-h100-sxm-80gb")
    cold = make_replica(m, d)
    warm = make_replica(m, d, prefix_hit_rate=0.75)
    assert estimate_static(warm, 4096, 128, 1).ttft_s < 0.4 * estimate_static(cold, 4096, 128, 1).ttft_s
    assert estimate_continuous(warm, 4096, 128, 64).requests_per_s > estimate_continuous(cold, 4096, 128, 64).requests_per_s
    with pytest.raises(UserInputError) as e:
        make_replica(m, d, prefix_hit_rate=1.0)
    assert e.value.field == "prefix_hit_rate"


def test_cli_flags_for_speculation_need_the_acceptance():
    from xpuplan.jobs.serve import InferEstimateRequest, infer_estimate

    with pytest.raises(UserInputError) as e:
        infer_estimate(InferEstimateRequest(model="llama3-8b", hw="H100", input_len=128, output_len=64, spec_tokens=3))
    assert e.value.field == "--spec-accept"
    res = infer_estimate(InferEstimateRequest(model="llama3-8b", hw="H100", input_len=128, output_len=64, spec_tokens=3,
                                              spec_accept=2.0))
    assert res.results[0]["replica"]["speculation"]["draft_tokens"] == 3


# --- dataset-driven lengths: integrate over the distribution ------------------------------------
def test_empirical_length_distribution_and_its_nodes():
    from xpuplan.workload.serving import LengthDist

    d = LengthDist(dist="empirical", values=[100, 200, 300, 400, 1000])
    assert d.average == 400 and d.quantile(99) == 1000 and d.quantile(50) == 300
    nodes = d.nodes(3)
    assert sum(p for _, p in nodes) == pytest.approx(1.0)
    assert sum(x * p for x, p in nodes) == pytest.approx(d.average)  # the nodes keep the mean
    u = LengthDist(dist="uniform", min=100, max=900)
    assert sum(x * p for x, p in u.nodes(8)) == pytest.approx(u.average)
    assert LengthDist(dist="fixed", mean=512).nodes() == [(512, 1.0)]
    with pytest.raises(ValueError):
        LengthDist(dist="empirical", values=[100, -1])


def test_prompt_queue_is_m_g_1_over_the_length_distribution():
    from xpuplan.serve.slo import SLO, prefill_service_moments, prefill_service_s, throughput_at_slo
    from xpuplan.workload.serving import LengthDist

    rep = make_replica(get_model("llama3-70b"), _dev("nvidia-h100-sxm-80gb"), tp=4)
    spread = LengthDist(dist="exponential", mean=2048, max=16384)
    nodes = spread.nodes()
    m1, s_eff = prefill_service_moments(rep, spread.average, 16, nodes)
    s_fixed = prefill_service_s(rep, spread.average, 16)
    # one length: both moments are s; a spread: E[s²]/E[s] > E[s] (variance), E[s(L)] >= s(E[L]) (convexity)
    assert prefill_service_moments(rep, 2048, 16) == (pytest.approx(prefill_service_s(rep, 2048, 16)),) * 2
    assert s_eff > m1 >= 0.99 * s_fixed
    slo = SLO(ttft_s=2.0, tpot_s=0.05)
    fixed = throughput_at_slo(rep, spread.average, 256, slo)
    mixed = throughput_at_slo(rep, spread.average, 256, slo, input_lengths=nodes)
    assert mixed.max_rate < fixed.max_rate  # spread lengths queue longer for prefill


def test_memory_infer_counts_fp4_as_the_serving_replica_does():
    from xpuplan.jobs.memory import MemoryInferRequest, memory_infer

    fp4 = memory_infer(MemoryInferRequest(model="llama3-70b", dtype="fp4", hw="B200"))
    mx = memory_infer(MemoryInferRequest(model="llama3-70b", dtype="mxfp4", hw="B200"))
    assert fp4.weight_dtype == "fp4" and mx.bytes_per_device["weights"] < fp4.bytes_per_device["weights"]
    from xpuplan.serve import memory_plan

    rep = make_replica(get_model("llama3-70b"), _dev("nvidia-b200-180gb"), dtype="fp4")
    assert fp4.bytes_per_device["weights"] == pytest.approx(memory_plan(rep).weights_bytes, rel=1e-6)


# --- whole prompts vs split prompts in mixed steps ---------------------------------------------
def test_trtllm_packs_whole_prompts_vllm_splits_them():
    from xpuplan.serve.estimate import split_budget

    m, d = get_model("llama3-8b"), _dev("nvidia-h100-sxm-80gb")
    trt = make_replica(m, d, engine="trtllm")
    vll = make_replica(m, d, engine="vllm")
    assert not trt.engine.split_prompts and vll.engine.split_prompts
    assert split_budget(vll, 20000) == vll.engine.prefill_chunk_tokens
    assert split_budget(trt, 20000) == 20000  # one context step for the whole prompt
    assert split_budget(trt, 1000) == trt.engine.prefill_chunk_tokens  # short prompts: the budget packs several


def test_sim_does_not_split_a_prompt_when_the_engine_packs_whole_prompts(monkeypatch):
    from xpuplan.serve.sim import schedulers
    from xpuplan.serve.sim.config import SimConfig
    from xpuplan.serve.sim.engine import Simulation

    seen: list[list[int]] = []
    orig = schedulers.ContinuousScheduler._start_general

    def record(self, sim, now):
        out = orig(self, sim, now)
        seen.append([c for _, c in self._chunks])
        return out

    monkeypatch.setattr(schedulers.ContinuousScheduler, "_start_general", record)

    def chunks(engine: str) -> list[list[int]]:
        seen.clear()
        cfg = SimConfig.model_validate({
            "model": "llama3-8b",
            "pools": [{"name": "p", "hardware": "nvidia-h100-sxm-80gb", "tp": 1, "replicas": 1, "dtype": "bf16",
                       "engine": engine, "batching": "continuous"}],
            "classes": [{"name": "c", "arrival": "closed", "clients": 3, "input_len": 6000, "output_len": 4}],
            "duration_s": 0.3, "drain_s": 0.0})
        Simulation(cfg, seed=0).run()
        return list(seen)

    # step 2 finds two 6000-token prompts waiting beside one decode, budget 8192: vLLM fills the budget
    # with the first and a piece of the second; TensorRT-LLM runs the first whole and the second waits
    assert chunks("vllm")[1] == [6000, 8192 - 1 - 6000]
    assert chunks("trtllm")[1] == [6000]


def test_chunks_of_a_long_prompt_attend_every_key_before_them():
    from xpuplan.serve.estimate import continuous_tpot, mean_chunk_keys

    # 16384 tokens in two 8192 chunks: half the tokens see 8192 keys, half 16384
    assert mean_chunk_keys(0, 16384, 8192) == pytest.approx(12288)
    assert mean_chunk_keys(0, 4096, 8192) == pytest.approx(4096)  # one chunk: the prompt
    assert mean_chunk_keys(1000, 3000, 1000) == pytest.approx((1000 * 2000 + 1000 * 3000) / 2000)  # after a cached prefix
    rep = make_replica(get_model("qwen3-8b"), _dev("nvidia-h100-sxm-80gb"), engine="vllm")
    from xpuplan.serve.replica import step_time

    # the mixed step of a 32K prompt chunked at 8192: its chunks attend ~20K keys on average, not 8192
    _, st = continuous_tpot(rep, 32768, 128, 16)
    pt = round(16 / 128 * 32768)
    own_chunk_only = step_time(rep, decode_seqs=16, decode_context=32768 + 64, prefill_tokens=min(pt, 8192),
                               prefill_len=8192)
    with_keys = step_time(rep, decode_seqs=16, decode_context=32768 + 64, prefill_tokens=min(pt, 8192),
                          prefill_len=8192, prefill_kv_len=round(mean_chunk_keys(0, 32768, 8192)))
    assert st.total_s == pytest.approx(with_keys.total_s) and st.total_s > own_chunk_only.total_s


# --- narrow attention heads in prefill --------------------------------------------------------------
def test_prefill_attention_pays_the_narrow_head_factor(monkeypatch):
    from xpuplan.perf import roofline
    from xpuplan.serve.replica import _step_cached, step_time

    rep = make_replica(get_model("falcon-180b"), _dev("nvidia-h100-sxm-80gb"), tp=8, dtype="fp8")
    assert rep.model.qk_head_dim == 64

    def prefill_s() -> float:
        _step_cached.cache_clear()
        return step_time(rep, prefill_tokens=32768, prefill_len=32768).total_s

    narrow = prefill_s()
    monkeypatch.setattr(roofline, "ATTENTION_EXP_HEAD_DIM", 0.0)  # no softmax cost: every head dim at the 128 rate
    wide = prefill_s()
    _step_cached.cache_clear()
    assert narrow > wide * 1.01  # the 32K prompt's attention is a visible share and runs at 0.77 of the 128 rate


def test_tp_split_experts_pay_the_short_k_rate_in_serving(monkeypatch):
    """The serving step times the expert down projection with the same short-K factor as training: splitting
    Qwen3-235B-A22B's 1,536-wide experts over TP 8 leaves K = 192 per rank, so a prefill-heavy step takes longer
    than the same step timed without the factor; a dense model's step does not change."""
    import xpuplan.perf.ops as ops
    from xpuplan.serve.step import step_arrays

    h100 = _dev("nvidia-h100-sxm-80gb")

    def prefill_s(model_id: str) -> float:
        rep = make_replica(get_model(model_id), h100, tp=8)
        return float(step_arrays(rep, 0, 1, 8192, 2048, 2048, 4).total_s)

    moe, dense = prefill_s("qwen3-235b-a22b"), prefill_s("llama3-70b")
    monkeypatch.setattr(ops, "short_k_factor", lambda k, d, dtype="bf16": 1.0)
    assert prefill_s("qwen3-235b-a22b") < moe
    assert prefill_s("llama3-70b") == pytest.approx(dense)
