"""Benchmark datasets' request lengths (workload/data/datasets.yaml): per-tokenizer means, the assumed
shape around them, and `--dataset` / `traffic.dataset` in the serving jobs."""

from __future__ import annotations

import math

import pytest

from xpuplan.catalog.assumptions import default_assumptions
from xpuplan.errors import UserInputError
from xpuplan.workload.datasets import DATA_FILE, dataset_lengths, find_dataset, load_datasets
from xpuplan.workload.lengths import LengthDist
from xpuplan.workload.serving import capped_exponential_scale, dataset_length_dists


def test_the_tokenizer_is_matched_by_vocabulary_size():
    l3 = dataset_lengths("sharegpt", 128256)
    l2 = dataset_lengths("sharegpt", 32000)
    assert (l3.tokenizer, l3.tokenizer_assumed) == ("llama-3", False)
    assert (l2.tokenizer, l2.tokenizer_assumed) == ("llama-2", False)
    # the same text is fewer tokens for Llama 3's larger vocabulary
    assert l3.input_mean < l2.input_mean and l3.output_mean < l2.output_mean


def test_a_vocabulary_without_an_entry_gets_the_default_tokenizer_and_says_so():
    d = dataset_lengths("sharegpt", 151936)
    assert d.tokenizer == load_datasets().datasets["sharegpt"].default_tokenizer and d.tokenizer_assumed
    assert "assumed" in d.describe()


def test_names_and_aliases_are_matched_case_insensitively():
    assert find_dataset("ShareGPT") == find_dataset("ShareGPT_V3_unfiltered_cleaned_split") == "sharegpt"
    assert find_dataset("alpaca") is None


def test_an_unknown_dataset_names_the_field():
    with pytest.raises(UserInputError) as exc:
        dataset_lengths("alpaca", 128256, field="--dataset")
    assert exc.value.field == "--dataset" and "sharegpt" in str(exc.value)


def test_every_entry_has_a_source_and_lies_within_the_tools_caps():
    for ds in load_datasets().datasets.values():
        assert ds.sampling
        for t in ds.tokenizers.values():
            assert t.source and t.vocab_sizes
            assert t.input_mean < (ds.input_max or math.inf)
            assert t.input_mean + t.output_mean < (ds.total_max or math.inf)


def test_a_mean_at_or_over_the_cap_is_refused(tmp_path):
    text = DATA_FILE.read_text(encoding="utf-8").replace("input_mean: 215.2", "input_mean: 1500")
    bad = tmp_path / "datasets.yaml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(UserInputError) as exc:
        load_datasets(bad)
    assert "input_max" in str(exc.value)


def test_every_engine_benchmark_dataset_is_a_known_dataset():
    known = set(load_datasets().datasets)
    for eng in default_assumptions().engines.values():
        assert eng.benchmark_dataset is None or eng.benchmark_dataset in known


@pytest.mark.parametrize(("mean", "cap"), [(215.2, 1024), (203.0, 1833), (900.0, 1024)])
def test_the_capped_exponential_keeps_the_mean(mean, cap):
    m = capped_exponential_scale(mean, cap)
    # lengths are cut to [1 token, cap]: mean 1 + m·(e^(-1/m) - e^(-cap/m)), the distribution's own average
    assert 1 + m * (math.exp(-1 / m) - math.exp(-cap / m)) == pytest.approx(mean, rel=1e-9)
    # built as serving.dataset_length_dists builds it: a solved scale above the cap is not a user's max < mean
    assert LengthDist.model_construct(dist="exponential", mean=m, max=cap).average == pytest.approx(mean, rel=1e-9)
    assert m >= mean - 1  # the cap cuts the tail, so the scale sits near or above the mean


def test_the_shape_keeps_the_dataset_means_and_caps():
    d = dataset_lengths("sharegpt", 128256)
    d_in, d_out = dataset_length_dists(d)
    assert d_in.average == pytest.approx(d.input_mean, rel=1e-6)
    assert d_out.average == pytest.approx(d.output_mean, rel=1e-6)
    assert d_in.quantile(100) == d.input_max
    # skewed: most prompts are shorter than the mean, the tail reaches far past it
    assert d_in.quantile(50) < d.input_mean < d_in.quantile(95)


def test_capped_exponential_refuses_a_mean_past_the_cap():
    with pytest.raises(ValueError):
        capped_exponential_scale(1024, 1024)


# ---------------------------------------------------------------------------------------------------------------
# the serving jobs
# ---------------------------------------------------------------------------------------------------------------
def _estimate(**kw):
    from xpuplan.jobs.serve import InferEstimateRequest, infer_estimate

    return infer_estimate(InferEstimateRequest(**{"model": "llama3-8b", "hw": "nvidia-h100-sxm-80gb", **kw}))


def test_infer_estimate_takes_the_datasets_means_for_the_models_tokenizer():
    res = _estimate(dataset="sharegpt")
    assert (res.input_len, res.output_len) == (215, 203)
    assert res.dataset and res.dataset["tokenizer"] == "llama-3" and res.dataset["source"]


def test_given_lengths_win_over_the_dataset():
    res = _estimate(dataset="sharegpt", input_len=1000)
    assert (res.input_len, res.output_len) == (1000, 203)
    assert res.dataset["used_for"] == ["output_len"]
    assert _estimate(input_len=128, output_len=128).dataset is None
    assert _estimate(dataset="sharegpt", input_len=128, output_len=128).dataset is None


def test_an_unknown_dataset_is_a_request_error_naming_the_flag():
    from xpuplan.jobs.requests import parse_request
    from xpuplan.jobs.serve import InferEstimateRequest

    with pytest.raises(UserInputError) as exc:
        parse_request(InferEstimateRequest, {"model": "llama3-8b", "dataset": "alpaca"})
    assert exc.value.field == "--dataset" and "sharegpt" in str(exc.value)


def test_a_scenario_may_give_a_dataset_instead_of_lengths(tmp_path):
    from xpuplan.jobs.serve import CapacityRequest, infer_capacity

    sc = tmp_path / "sc.yaml"
    sc.write_text("model: llama3-8b\nhardware: nvidia-h100-sxm-80gb\n"
                  "traffic: {qps: 5, dataset: sharegpt}\nslo: {ttft_ms: 2000, tpot_ms: 100}\n", encoding="utf-8")
    res = infer_capacity(CapacityRequest(scenario=str(sc)))
    assert (res.input_len, res.output_len) == pytest.approx((215.2, 203.0))
    assert res.dataset and not res.assumed_lengths
    # the report says where the lengths came from
    from xpuplan.report.capacity import render_markdown

    assert "lengths from sharegpt: mean prompt 215.2, mean output 203 tokens" in render_markdown(res)


def test_a_scenario_with_neither_lengths_nor_dataset_names_the_field(tmp_path):
    from xpuplan.workload.serving import load_serving_scenario

    sc = tmp_path / "sc.yaml"
    sc.write_text("model: llama3-8b\ntraffic: {qps: 5}\n", encoding="utf-8")
    with pytest.raises(UserInputError) as exc:
        load_serving_scenario(sc)
    assert "traffic" in str(exc.value) and "dataset" in str(exc.value)
    sc.write_text("model: llama3-8b\ntraffic: {qps: 5, dataset: alpaca}\n", encoding="utf-8")
    with pytest.raises(UserInputError) as exc:
        load_serving_scenario(sc)
    assert "alpaca" in str(exc.value)


def test_lmdeploy_all_reduces_with_nccl_at_every_version():
    # TurboMind's custom all-reduce is opt-in in every release (engines.yaml cites the sources), so its TP
    # decode steps pay NCCL's all-reduce, and more than the same replica under vLLM's custom one
    from xpuplan.catalog import load_catalog
    from xpuplan.models import get_model
    from xpuplan.serve.replica import make_replica, step_time

    a = default_assumptions()
    assert not a.engine("LMDeploy v0.2.0").custom_allreduce and not a.engine("lmdeploy v0.16").custom_allreduce
    m, dev = get_model("llama2-70b"), load_catalog().get("nvidia-a100-sxm-80gb")
    lmd = step_time(make_replica(m, dev, tp=4, dtype="fp16", engine="lmdeploy"), decode_seqs=64, decode_context=512)
    vll = step_time(make_replica(m, dev, tp=4, dtype="fp16", engine="vllm"), decode_seqs=64, decode_context=512)
    assert lmd.comm_s > vll.comm_s


def _sim_scenario(**cls):
    return {"model": "llama3-8b", "duration_s": 10,
            "pools": [{"name": "p", "hardware": "nvidia-h100-sxm-80gb", "tp": 1, "replicas": 1}],
            "classes": [{"name": "c", "arrival": "poisson", "rate_rps": 5, **cls}]}


def test_a_simulated_class_may_draw_its_lengths_from_a_dataset():
    from xpuplan.jobs.simulate import load_scenario
    from xpuplan.workload.serving import DATASET_SAMPLE_PAIRS as DATASET_SAMPLE

    cfg, _ = load_scenario(_sim_scenario(dataset="sharegpt"))
    lengths = cfg.classes[0].lengths
    assert lengths is not None and len(lengths.input_len) == DATASET_SAMPLE
    assert sum(lengths.input_len) / DATASET_SAMPLE == pytest.approx(215.2, rel=0.02)
    assert "sharegpt" in lengths.source and "llama-3" in lengths.source


@pytest.mark.parametrize(("cls", "words"), [
    ({"dataset": "sharegpt", "input_len": 100}, "not both"),
    ({"dataset": "alpaca"}, "unknown dataset"),
    ({"dataset": 3}, "dataset name"),
])
def test_a_simulated_class_dataset_error_names_the_field(cls, words):
    from xpuplan.jobs.simulate import load_scenario

    with pytest.raises(UserInputError) as exc:
        load_scenario(_sim_scenario(**cls))
    assert exc.value.field == "classes[0].dataset" and words in str(exc.value)


@pytest.mark.parametrize(("traffic", "field"), [
    ("{qps: 5, input_len: -4}", "traffic.input_len"),
    ("{qps: 5, input_len: 0}", "traffic.input_len"),
    ("{qps: 5, input_len: {dist: fixed, mean: -2}}", "traffic.input_len.mean"),
])
def test_an_impossible_length_is_reported_by_its_own_field(tmp_path, traffic, field):
    # the value's own problem, not the union's "not a number" / "not a dictionary" for the other member
    from xpuplan.workload.serving import load_serving_scenario

    sc = tmp_path / "sc.yaml"
    sc.write_text(f"model: llama3-8b\ntraffic: {traffic}\n", encoding="utf-8")
    with pytest.raises(UserInputError) as exc:
        load_serving_scenario(sc)
    # a plain number is at least one token; a distribution's mean must be positive (and below one token is refused)
    assert exc.value.field == field and ("greater than or equal to 1" in str(exc.value) or
                                         "greater than 0" in str(exc.value)) and exc.value.line == 2
