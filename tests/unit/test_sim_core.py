"""The simulator as a whole: determinism, agreement with the analytic planner at low load,
disaggregation, closed loops, energy and cost, the SLO floor, validation rows."""

from __future__ import annotations

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.serve import estimate, make_replica
from xpuplan.serve.disagg import time_kv_transfer_s
from xpuplan.serve.sim import SimConfig, simulate


def _one_pool(pool: dict, cls: dict, duration: float = 30, model: str = "llama3-8b") -> SimConfig:
    return SimConfig.model_validate({"model": model, "pools": [{"name": "p", **pool}],
                                     "classes": [{"name": "c", **cls}], "duration_s": duration})


MIXED = {"input_len": {"dist": "lognormal", "mean": 400, "cv": 1}, "output_len": {"dist": "lognormal", "mean": 100,
                                                                                    "cv": 1}}


def test_a_pool_reports_the_kv_dtype_its_engine_runs_by_default_or_as_given():
    base = {"hardware": "nvidia-h100-sxm-80gb", "dtype": "fp8", "tp": 1}
    cls = {"rate_rps": 2, "input_len": 128, "output_len": 16}
    assert simulate(_one_pool({**base, "engine": "vllm"}, cls, duration=2), seed=1).pools[0].kv_dtype == "bf16"
    assert simulate(_one_pool({**base, "engine": "trtllm"}, cls, duration=2), seed=1).pools[0].kv_dtype == "fp8"
    given = _one_pool({**base, "engine": "vllm", "kv_dtype": "fp8"}, cls, duration=2)
    assert simulate(given, seed=1).pools[0].kv_dtype == "fp8"


def test_same_seed_same_result_other_seed_other_result():
    cfg = _one_pool({"hardware": "nvidia-h100-sxm-80gb", "replicas": 2}, {"rate_rps": 20, **MIXED}, duration=10)
    a, b = simulate(cfg, seed=5).to_dict(), simulate(cfg, seed=5).to_dict()
    assert a == b
    c = simulate(cfg, seed=6).to_dict()
    assert c["arrived"] != a["arrived"] or c["classes"] != a["classes"]


@pytest.mark.parametrize(("model", "hw", "tp", "dtype", "engine"), [
    ("llama2-70b", "nvidia-h100-sxm-80gb", 4, "fp8", "vllm"),        # chunked prefill
    ("llama2-70b", "huawei-ascend-910b", 8, "int8", "mindie"),       # separate prefill steps, 128-token blocks
    ("llama3-8b", "amd-mi300x-192gb", 1, "bf16", None),
])
def test_low_load_latencies_match_the_analytic_planner_within_5_percent(model, hw, tp, dtype, engine):
    """At low load requests do not meet: each is served alone, which is the planner's batch-1 estimate."""
    cfg = _one_pool({"hardware": hw, "tp": tp, "dtype": dtype, "engine": engine},
                    {"rate_rps": 0.05, "input_len": 1000, "output_len": 200}, duration=300, model=model)
    res = simulate(cfg, seed=1)
    c = res.classes[0]
    assert c.completed >= 5
    rep = make_replica(get_model(model), load_catalog().get(hw), tp=tp, dtype=dtype, engine=engine)
    est = estimate(rep, 1000, 200, 1, mode="static")
    assert c.ttft.p50_s == pytest.approx(est.ttft_s, rel=0.05)
    assert c.tpot.p50_s == pytest.approx(est.tpot_s, rel=0.05)
    assert c.e2e.p50_s == pytest.approx(est.e2e_latency_s, rel=0.05)


def test_latency_grows_with_load():
    pool = {"hardware": "nvidia-h100-sxm-80gb"}
    lo = simulate(_one_pool(pool, {"rate_rps": 1, **MIXED}, duration=20), seed=0).classes[0]
    hi = simulate(_one_pool(pool, {"rate_rps": 40, **MIXED}, duration=20), seed=0).classes[0]
    assert hi.tpot.p50_s > lo.tpot.p50_s
    assert hi.e2e.mean_s > lo.e2e.mean_s


def test_disaggregated_ttft_includes_the_kv_transfer():
    raw = {"model": "llama3-8b", "duration_s": 200,
           "pools": [{"name": "pre", "hardware": "nvidia-h100-sxm-80gb", "decode_pool": "dec"},
                     {"name": "dec", "hardware": "nvidia-h100-sxm-80gb"}],
           "classes": [{"name": "c", "rate_rps": 0.05, "input_len": 2000, "output_len": 50}]}
    res = simulate(SimConfig.model_validate(raw), seed=0)
    rep = make_replica(get_model("llama3-8b"), load_catalog().get("nvidia-h100-sxm-80gb"), engine="vllm")
    alone = estimate(rep, 2000, 50, 1, mode="static")
    xfer = time_kv_transfer_s(rep, 2000)
    assert xfer > 0
    assert res.classes[0].ttft.p50_s == pytest.approx(alone.ttft_s + xfer, rel=0.05)
    roles = {p.name: p.role for p in res.pools}
    assert roles == {"pre": "prefill", "dec": "decode"}
    assert res.pools[1].steps > 0 and res.completed == res.arrived


def test_closed_loop_keeps_the_client_count_in_flight():
    cfg = _one_pool({"hardware": "nvidia-h100-sxm-80gb"},
                    {"arrival": "closed", "clients": 16, "input_len": 256, "output_len": 64}, duration=20)
    from xpuplan.serve.sim.engine import Simulation

    sim = Simulation(cfg, seed=0)
    res = sim.run()
    assert res.arrived > 16 * 5
    assert max(r.scheduler.peak_used for r in sim.pools[0].replicas) > 0
    # requests are sent only when one finishes: never more than 16 in the system
    assert res.arrived - res.completed <= 16


def test_energy_and_cost_per_million_tokens():
    cfg = _one_pool({"hardware": "nvidia-h100-sxm-80gb", "price_per_device_hour": 2.0, "replicas": 2},
                    {"rate_rps": 5, **MIXED}, duration=20)
    res = simulate(cfg, seed=0)
    p = res.pools[0]
    tdp = load_catalog().get("nvidia-h100-sxm-80gb").tdp_w
    assert 0 < p.mean_power_w <= tdp
    assert p.energy_j == pytest.approx(p.mean_power_w * p.devices * max(res.simulated_s, res.duration_s))
    assert res.cost_usd == pytest.approx(2.0 * 2 * max(res.simulated_s, res.duration_s) / 3600)
    assert res.cost_per_million_output_tokens_usd == pytest.approx(res.cost_usd / res.output_tokens * 1e6)
    assert res.schema_version == "2"


def test_slo_attainment_and_goodput():
    cls = {"rate_rps": 5, "input_len": 256, "output_len": 64, "slo": {"ttft_ms": 10_000, "tpot_ms": 1_000}}
    res = simulate(_one_pool({"hardware": "nvidia-h100-sxm-80gb"}, cls, duration=20), seed=0)
    assert res.slo_attainment == pytest.approx(1.0)
    assert res.goodput_requests_per_s == pytest.approx(res.arrived / 20)
    tight = {**cls, "slo": {"e2e_ms": res.classes[0].e2e.p50_s * 1e3}}
    res2 = simulate(_one_pool({"hardware": "nvidia-h100-sxm-80gb"}, tight, duration=20), seed=0)
    assert 0.3 <= res2.slo_attainment <= 0.7  # about half the requests beat the median


def test_slo_below_unloaded_latency_is_refused():
    cls = {"rate_rps": 1, "input_len": 4000, "output_len": 64, "slo": {"ttft_ms": 1}}
    with pytest.raises(UserInputError, match="below the unloaded TTFT") as e:
        simulate(_one_pool({"hardware": "nvidia-h100-sxm-80gb"}, cls), seed=0)
    assert e.value.field == "classes[0].slo.ttft_ms"
    cls = {"rate_rps": 1, "input_len": 400, "output_len": 64, "slo": {"tpot_ms": 0.5}}
    with pytest.raises(UserInputError, match="TPOT") as e:
        simulate(_one_pool({"hardware": "nvidia-h100-sxm-80gb"}, cls), seed=0)
    assert e.value.field == "classes[0].slo.tpot_ms"


def test_progress_callback_reaches_one():
    seen: list[float] = []
    simulate(_one_pool({"hardware": "nvidia-h100-sxm-80gb"}, {"rate_rps": 2, **MIXED}, duration=5), seed=0,
             progress=seen.append)
    assert seen and seen[-1] == 1.0 and all(0 <= f <= 1 for f in seen)


def test_simulate_row_closed_loop_matches_the_analytic_steady_state_roughly():
    from xpuplan.serve.sim.validation import is_simulated_row, simulate_row
    from xpuplan.validate.rows import ValidationRow

    raw = {"model": "llama3-8b", "input_len": "512", "output_len": "128", "concurrency": "32", "tp": "1",
           "engine": "vLLM", "scenario": "server"}
    row = ValidationRow(id="T1", kind="infer", metric="output_tokens_per_s", value=1.0, trust="A", source="test",
                        hardware="nvidia-h100-sxm-80gb", n_devices=2, precision="bf16", raw=raw)
    assert is_simulated_row(row)
    sim = simulate_row(row)
    rep = make_replica(get_model("llama3-8b"), load_catalog().get("nvidia-h100-sxm-80gb"), engine="vLLM")
    est = estimate(rep, 512, 128, 16, mode="continuous")
    # 2 replicas x 16 clients; the closed loop keeps ~16 sequences running per replica
    assert sim == pytest.approx(2 * est.output_tokens_per_s, rel=0.25)
    tpot = simulate_row(ValidationRow(**{**row.__dict__, "metric": "tpot_ms"}))
    assert tpot == pytest.approx(est.tpot_s * 1e3, rel=0.25)


def test_a_burst_served_over_a_long_drain_keeps_a_bounded_time_series():
    """Every request at t = 0 and a drain far longer than the arrival window: the series is coarsened as the
    drain goes on (at most twice sample_points samples) and still spans the whole run."""
    n = 200
    cfg = SimConfig.model_validate({
        "model": "llama3-8b", "pools": [{"name": "p", "hardware": "nvidia-h100-sxm-80gb"}],
        "classes": [{"name": "c", "arrival": "trace",
                     "trace": {"times_s": [0.0] * n, "input_len": [2000] * n, "output_len": [500] * n}}],
        "duration_s": 0.01, "drain_s": 3600, "sample_points": 50})
    res = simulate(cfg, seed=0)
    assert res.classes[0].completed == n
    times = res.series.times_s
    assert len(times) <= 2 * 50
    assert times[-1] >= 0.5 * max(res.classes[0].e2e.p99_s or 0, 0.0)
    assert all(0.0 <= u <= 1.0 for u in res.series.utilisation["p"])


def test_a_run_of_bursts_reports_rates_over_its_makespan():
    """An offline benchmark of N prompts prints tokens over the makespan: a burst-only run does the same (its
    arrival window is one instant), and says so."""
    n = 64
    cfg = SimConfig.model_validate({
        "model": "llama3-8b", "pools": [{"name": "p", "hardware": "nvidia-h100-sxm-80gb"}],
        "classes": [{"name": "c", "arrival": "burst", "requests": n, "input_len": 512, "output_len": 128}],
        "duration_s": 1, "drain_s": 3600})
    res = simulate(cfg, seed=0)
    assert res.classes[0].completed == n
    makespan = res.classes[0].e2e.p99_s
    assert makespan is not None and makespan > 1.0
    rate = res.classes[0].output_tokens_per_s
    assert n * 128 / (1.05 * makespan) < rate < n * 128 / (0.95 * max(res.classes[0].e2e.p50_s or 0, 1e-9))
    assert any("makespan" in note for note in res.notes)


def test_a_burst_run_rate_does_not_depend_on_the_arrival_window_it_was_given():
    """A burst has no arrival window: a duration_s longer than the makespan must not dilute the rates (it did:
    they were divided by duration_s), nor the utilisation or the makespan the notes print."""
    def run(duration_s: float):
        cfg = SimConfig.model_validate({
            "model": "llama3-8b", "pools": [{"name": "p", "hardware": "nvidia-h100-sxm-80gb"}],
            "classes": [{"name": "c", "arrival": "burst", "requests": 32, "input_len": 256, "output_len": 64}],
            "duration_s": duration_s, "drain_s": 600})
        return simulate(cfg, seed=0)

    short, long = run(0.001), run(600.0)
    assert long.rate_window == short.rate_window == "makespan"
    assert long.output_tokens_per_s == pytest.approx(short.output_tokens_per_s)
    assert long.duration_s == pytest.approx(short.duration_s) and long.duration_s < 60.0
    assert long.duration_s == pytest.approx(max(c.e2e.p99_s or 0.0 for c in long.classes), rel=0.05)
    assert long.pools[0].utilisation == pytest.approx(short.pools[0].utilisation)
    assert [n for n in long.notes if "makespan" in n] == [n for n in short.notes if "makespan" in n]


def test_a_burst_of_requests_none_of_which_fits_says_so_instead_of_naming_a_makespan():
    # within the model's context (131,072 tokens; longer is refused up front) but not within the KV cache an
    # H100 has left beside Llama 3.1 70B's FP8 weights
    cfg = SimConfig.model_validate({
        "model": "llama3.1-70b", "pools": [{"name": "p", "hardware": "nvidia-h100-sxm-80gb", "dtype": "fp8"}],
        "classes": [{"name": "c", "arrival": "burst", "requests": 2, "input_len": 120_000, "output_len": 8}],
        "duration_s": 1, "drain_s": 10})
    res = simulate(cfg, seed=0)
    assert res.completed == 0 and res.dropped == 2
    assert res.output_tokens_per_s == 0.0
    assert any("no request completed" in n for n in res.notes)
    assert not any("last completion" in n for n in res.notes)


def test_a_class_whose_typical_request_exceeds_the_models_context_is_refused():
    base = {"hardware": "nvidia-h100-sxm-80gb", "replicas": 1}
    # llama3-8b's context is 8,192 tokens: a median prompt of ~69K (an exponential of scale 100K) cannot run
    long = {"name": "c", "rate_rps": 1, "input_len": {"dist": "exponential", "mean": 100_000}, "output_len": 10}
    with pytest.raises(UserInputError, match="exceed llama3-8b's context of 8192") as exc:
        simulate(_one_pool(base, long, duration=2), seed=1)
    assert exc.value.field == "classes[0].input_len"
    # a prompt that fits with an output that does not: the output's field
    with pytest.raises(UserInputError) as exc:
        simulate(_one_pool(base, {"name": "c", "rate_rps": 1, "input_len": 6000, "output_len": 4000}, duration=2),
                 seed=1)
    assert exc.value.field == "classes[0].output_len"
    # a long tail is simulated as given when the typical request fits
    ok = {"name": "c", "rate_rps": 1, "input_len": {"dist": "lognormal", "mean": 1000, "cv": 2.0}, "output_len": 10}
    assert simulate(_one_pool(base, ok, duration=2), seed=1).completed > 0
