"""The jobs layer: requests, context, results and their schemas, search interruption, advice as data."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.jobs.context import offline_context, resolve_context
from xpuplan.jobs.requests import MAX_RANGE_POINTS, count_int_range, int_range, parse_request
from xpuplan.jobs.results import SCHEMA_VERSION, all_results, result_schema
from xpuplan.jobs.train import (
    TrainEstimateRequest,
    TrainSearchRequest,
    train_estimate,
    train_search,
)

CTX = offline_context()
runner = CliRunner()


def test_int_range_counts_before_expanding_and_states_the_bound():
    assert count_int_range("16:1024", "--x") == 7 and count_int_range("8:64:8", "--x") == 8
    assert int_range("1,8,8,2", "--x") == [1, 2, 8]
    with pytest.raises(UserInputError) as exc:
        int_range(f"1:{MAX_RANGE_POINTS + 1}:1", "--devices-range")
    assert exc.value.field == "--devices-range" and str(MAX_RANGE_POINTS) in exc.value.message
    with pytest.raises(UserInputError):
        int_range("8:4", "--x")


def test_request_errors_name_the_flag_as_typed():
    with pytest.raises(UserInputError) as exc:
        parse_request(TrainEstimateRequest, {"global_batch": 0})
    assert exc.value.field == "--global-batch"
    with pytest.raises(UserInputError) as exc:
        parse_request(TrainEstimateRequest, {"seq_len": float("nan")})
    assert exc.value.field == "--seq-len"


def test_context_reads_calibration_switch_from_env(monkeypatch):
    monkeypatch.setenv("XPUPLAN_USE_CALIBRATION", "0")
    assert resolve_context().use_calibration is False
    monkeypatch.setenv("XPUPLAN_USE_CALIBRATION", "1")
    assert resolve_context().use_calibration is True
    assert resolve_context(use_calibration=False).use_calibration is False


def test_offline_context_gives_default_efficiency():
    dev = CTX.device("H100")
    assert CTX.efficiency(dev).source == CTX.base_assumptions.efficiency(dev).source
    assert CTX.calibration(dev) is None


def test_estimate_result_lists_figures_with_trust_and_assumptions():
    res = train_estimate(parse_request(TrainEstimateRequest, dict(model="llama3-8b", hw="H100", devices=8)), CTX)
    d = res.to_dict()
    assert d["schema_version"] == SCHEMA_VERSION and d["feasible"] is True
    paths = {f["path"] for f in d["used"]["figures"]}
    assert {"dense_tflops.bf16", "memory.capacity_gb", "memory.bandwidth_gb_per_s"} <= paths
    assert all(f["trust"] in "ABCD" and f["source"] for f in d["used"]["figures"])
    eff = d["used"]["assumptions"]["efficiency"]["nvidia-h100-sxm-80gb"]
    assert all("source" in v for v in eff.values())


def test_infeasible_estimate_carries_result_and_advice():
    req = parse_request(TrainEstimateRequest, dict(model="llama3-70b", hw="H100", devices=8, tp=8))
    with pytest.raises(InfeasibleError) as exc:
        train_estimate(req, CTX)
    res = exc.value.result
    assert res is not None and res.feasible is False
    assert res.advice and res.advice[0].kind in ("fits_on_same_devices", "devices_to_fit")
    assert res.advice[0].message in exc.value.reasons


def test_search_stops_on_ctrl_c_with_what_it_found():
    req = parse_request(TrainSearchRequest, dict(model="llama3-8b", hw="H100", devices_range="8:64", top=3))

    def progress(done: int, total: int) -> None:
        if done == 2:
            raise KeyboardInterrupt

    res = train_search(req, CTX, progress=progress)
    assert res.interrupted and res.counts_done == 2 and res.plans
    assert {p.n_devices for p in res.plans} <= {8, 16}
    assert "interrupted" in res.reasons[-1]


def test_search_per_count_merge_ranks_like_one_search():
    from xpuplan.train import Cluster, SearchSpace, search_plans
    from xpuplan.workload.training import TrainingJob

    req = parse_request(TrainSearchRequest, dict(model="llama3-8b", hw="H100", devices_range="8:32", top=4))
    res = train_search(req, CTX)
    dev = CTX.device("H100")
    ref = search_plans(CTX.model("llama3-8b"), Cluster.from_catalog(dev, 8, assumptions=CTX.assumptions([dev])),
                       TrainingJob(), device_counts=[8, 16, 32], space=SearchSpace(precision=["bf16"]), top=4)
    assert [p.key + str(p.n_devices) for p in res.plans] == [e.key + str(e.n_devices) for e in ref.top]
    assert res.plans_evaluated == ref.plans_evaluated
    assert [p["n_devices"] for p in res.pareto] == [p.n_devices for p in ref.pareto]


def test_every_result_has_a_json_schema_with_schema_version():
    results = all_results()
    assert {"train.estimate", "train.search", "infer.estimate", "infer.capacity", "memory.train", "memory.infer",
            "hw.list", "model.show", "flops", "roofline", "overview"} <= set(results)
    for name in results:
        schema = result_schema(name)
        assert "schema_version" in schema["properties"], name


def test_schema_command():
    r = runner.invoke(app, ["schema", "memory.infer"])
    assert r.exit_code == 0, r.output
    assert "max_batch_at_context" in json.loads(r.stdout)["properties"]
    r = runner.invoke(app, ["schema"])
    assert r.exit_code == 0 and "train.search" in r.stdout
    r = runner.invoke(app, ["schema", "nope"])
    assert r.exit_code == 2 and "unknown result" in r.output


def test_overview_still_importable_from_the_package():
    import xpuplan as xp
    from xpuplan.jobs.overview import overview

    assert xp.overview is overview


def test_py_typed_is_shipped():
    from importlib.resources import files

    assert files("xpuplan").joinpath("py.typed").is_file()


def test_stored_calibration_reaches_a_result_through_the_context(tmp_path, monkeypatch):
    from xpuplan.jobs.catalog import RooflineRequest, roofline
    from xpuplan.store import paths
    from xpuplan.store.calibrations import save_calibration
    from xpuplan.store.engine import open_store

    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv(paths.ENV_DB_URL, url)
    dev = CTX.device("H100")
    base = CTX.base_assumptions.efficiency(dev)
    cal_id, _ = save_calibration(open_store(), dev.id, base.merged({"gemm_peak_fraction": 0.5}, "fit"), run_ids=[1],
                                 report={})
    req = parse_request(RooflineRequest, dict(hw="H100", m=4096, n=4096, k=4096))
    on = roofline(req, resolve_context(use_calibration=True, db_url=url))
    off = roofline(req, resolve_context(use_calibration=False, db_url=url))
    assert on.efficiency["source"].startswith(f"calibration:#{cal_id}") and on.efficiency["gemm_peak_fraction"] == 0.5
    assert off.efficiency["source"] == base.source
    assert on.total_time_s > off.total_time_s
    eff = on.to_dict()["used"]["assumptions"]["efficiency"][dev.id]
    assert eff["gemm_peak_fraction"]["source"].startswith(f"calibration:#{cal_id}")


def test_training_results_name_the_stack_they_assumed():
    from xpuplan.jobs.context import RunContext
    from xpuplan.jobs.train import TrainEstimateRequest, train_estimate

    res = train_estimate(TrainEstimateRequest(model="llama3-8b", hw="H100", devices=8, stack="nemo"), RunContext())
    stack = res.used.assumptions["training_stack"]
    assert stack["id"] == "nemo" and stack["tp_comm_overlap"] is True and stack["sources"]


def test_estimates_carry_the_familys_validation_band():
    from xpuplan.jobs.context import RunContext
    from xpuplan.jobs.serve import InferEstimateRequest, infer_estimate
    from xpuplan.jobs.train import TrainEstimateRequest, train_estimate
    from xpuplan.validate.band import band_record

    t = train_estimate(TrainEstimateRequest(model="llama3-70b", hw="H100", devices=64, tp=8, pp=2, tokens=1e12),
                       RunContext())
    u = t.uncertainty
    b = band_record("nvidia-h100-sxm-80gb", "train")
    assert u is not None and (u.family, u.low_fraction, u.high_fraction) == (b.family, b.low_fraction, b.high_fraction)
    lo, hi = u.ranges["tokens_per_s_per_device"]
    assert lo == pytest.approx(t.tokens_per_s_per_device * (1 - b.low_fraction))
    assert hi == pytest.approx(t.tokens_per_s_per_device * (1 + b.high_fraction))
    tlo, thi = u.ranges["time_to_train_s"]  # a time moves inversely with the speed
    assert tlo < t.time_to_train_s < thi and tlo == pytest.approx(t.time_to_train_s / (1 + b.high_fraction))
    s = infer_estimate(InferEstimateRequest(model="llama3-8b", hw="H100,910B", tp="1", batch="8", input_len=512,
                                            output_len=128), RunContext())
    bands = {r["replica"]["device"] if "device" in r["replica"] else r["replica"]["key"]: r["uncertainty"]
             for r in s.results}
    assert len(bands) == 2
    nv, asc = (next(v for k, v in bands.items() if x in k) for x in ("h100", "910b"))
    assert nv["n_rows"] > 0 and nv["widened_by"] == 1.0
    assert asc["n_rows"] == 0 and asc["widened_by"] > 1  # no public Ascend serving rows: the pooled band, widened


def test_capacity_options_carry_a_device_range_in_whole_replicas():
    from xpuplan.jobs.context import RunContext
    from xpuplan.jobs.serve import CapacityRequest, infer_capacity

    res = infer_capacity(CapacityRequest(model="llama3-70b", hw="H100", qps=20, ttft_ms=2000, tpot_ms=50), RunContext())
    o = res.options[0]
    lo, hi = o.uncertainty.ranges["devices"]
    per_replica = o.devices // o.replicas
    assert lo <= o.devices <= hi and lo % per_replica == 0 and hi % per_replica == 0


def test_bands_widen_where_the_job_lies_outside_the_public_rows():
    """A MoE training job, or a prompt longer than any public serving row, gets the widened band with
    the reasons named (no public row measured the planner there)."""
    from xpuplan.cli.common import band_line
    from xpuplan.jobs.context import RunContext
    from xpuplan.jobs.serve import InferEstimateRequest, infer_estimate
    from xpuplan.jobs.train import TrainEstimateRequest, train_estimate
    from xpuplan.validate.band import EXTRAPOLATION_WIDENING, band_record

    dense = train_estimate(TrainEstimateRequest(model="llama3-70b", hw="H100", devices=64, tp=8, pp=2), RunContext())
    moe = train_estimate(TrainEstimateRequest(model="mixtral-8x7b", hw="H100", devices=64, tp=2, ep=8), RunContext())
    assert dense.uncertainty is not None and dense.uncertainty.extrapolation == []
    u = moe.uncertainty
    assert u is not None and any("MoE" in w for w in u.extrapolation)
    assert u.widened_by == EXTRAPOLATION_WIDENING
    plain = band_record("nvidia-h100-sxm-80gb", "train")
    assert u.high_fraction > plain.high_fraction
    line = band_line(u, "x") or ""
    assert "outside their regime: MoE" in line and "(their 80% range, widened)" in line
    inside = band_line(dense.uncertainty, "x") or ""
    assert "measured within" in inside and "for 80% of them" in inside and "widened" not in inside
    s = infer_estimate(InferEstimateRequest(model="llama3.1-8b", hw="H100", tp="1", batch="8", input_len=32000,
                                            output_len=128), RunContext())
    assert any("prompt 32,000 tokens" in w for w in s.results[0]["uncertainty"]["extrapolation"])


def test_serving_bands_know_the_running_batch_and_the_model():
    """MI300X serving rows are one model (Llama 3.1 405B FP8) at up to 256 sequences: an estimate of another
    model, or of more sequences running at once, is outside their regime; a batch above the running-sequence
    limit counts as the sequences that actually run (the rest wait)."""
    from xpuplan.jobs.context import RunContext
    from xpuplan.jobs.serve import InferEstimateRequest, infer_estimate

    def why(model: str, batch: str, engine: str = "vllm") -> list[str]:
        s = infer_estimate(InferEstimateRequest(model=model, hw="MI300X", tp="8", batch=batch, dtype="fp8",
                                                input_len=128, output_len=128, engine=engine), RunContext())
        return [w for r in s.results for w in r["uncertainty"]["extrapolation"]]

    assert why("llama3.1-405b", "64") == []
    assert why("llama3.1-70b", "64") == ["model llama3.1-70b (the rows are all llama3.1-405b)"]
    # vLLM's default max_num_seqs (256) runs 256 of 1,024: inside the rows' batches
    assert not any("concurrent sequences" in w for w in why("llama3.1-405b", "1024"))
    # vLLM >= 0.9 admits 1,024 on a device of >= 70 GiB: 1,024 run, more than any row ran
    assert why("llama3.1-405b", "1024", "vllm 0.10.2") == ["1,024 concurrent sequences > the most of any row (256)"]
