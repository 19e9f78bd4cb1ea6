"""The inference predictor of ``xpuplan validate``: first causes, no-layout rows, shared model builder."""

from __future__ import annotations

import pytest

from xpuplan.validate.core import predict_row
from xpuplan.validate.rows import ValidationRow, model_from_row
from xpuplan.validate.serve_predictor import predict


def row(**cols: str) -> ValidationRow:
    raw = {"id": "I-1", "kind": "infer", "source": "Test 2024", "trust": "A", "hardware": "nvidia-h100-sxm-80gb",
           "n_devices": "1", "precision": "fp8", "metric": "output_tokens_per_s_per_device", "value": "1000",
           "model": "llama2-7b", "tp": "1", "input_len": "128", "output_len": "128", "batch": "64",
           "engine": "TensorRT-LLM v0.9"}
    raw.update(cols)
    return ValidationRow(id=raw["id"], kind=raw["kind"], metric=raw["metric"], value=float(raw["value"]),
                         trust=raw["trust"], source=raw["source"], hardware=raw["hardware"],
                         n_devices=int(raw["n_devices"]), precision=raw["precision"], raw=raw)


def test_a_static_batch_row_is_predicted():
    p = predict(row())
    assert p.value > 0 and p.details["mode"] == "static" and p.details["replicas"] == 1


def test_lengths_not_fixed_is_reported_before_a_precision_complaint():
    # a dataset-driven row with a precision the serving planner refuses: the real first cause is the lengths
    bad_precision = predict_row(row(precision="fp64", weight_dtype="fp64"))
    assert bad_precision.value is None and "fp64" in bad_precision.reason
    both = predict_row(row(precision="fp64", weight_dtype="fp64", input_len=""))
    assert "lengths" in both.reason and "input_len" in both.reason and "fp64" not in both.reason
    out = predict_row(row(precision="fp64", weight_dtype="fp64", output_len=""))
    assert "output length not fixed" in out.reason


def test_metric_is_checked_first():
    assert "not an inference metric" in predict_row(row(metric="mfu", input_len="")).reason


def test_device_count_not_a_multiple_of_the_replica():
    r = predict_row(row(tp="2", n_devices="3"))
    assert r.value is None and "n_devices" in r.reason


def test_row_without_tp_reports_the_conventional_layout_too():
    p = predict(row(tp="", n_devices="8", metric="output_tokens_per_s"))
    assert p.details["replicas"] == 8 and "tp=1" in p.details["layout"]
    conv = p.details["conventional"]
    assert conv["layout"].startswith("tp8") and conv["predicted"] > 0
    assert conv["error"] == pytest.approx(conv["predicted"] / 1000 - 1)


def test_one_model_builder_for_both_kinds():
    arch = dict(model="", layers="32", d_model="4096", heads="32", kv_heads="8", ffn="14336", vocab="128256",
                gated_mlp="1")
    m = model_from_row(row(**arch))
    assert (m.mlp, m.norm, m.tied_embeddings, m.n_kv_heads) == ("gated", "rmsnorm", False, 8)
    assert predict(row(**arch)).value > 0
    assert "gated_mlp" in predict_row(row(**{**arch, "gated_mlp": ""})).reason


# ---------------------------------------------------------------------------------------------------------------
# dataset-driven rows (workload/data/datasets.yaml)
# ---------------------------------------------------------------------------------------------------------------
def _ds_row(**cols: str) -> ValidationRow:
    base = {"model": "llama3-8b", "precision": "bf16", "engine": "vLLM", "batch": "", "input_len": "",
            "output_len": "", "scenario": "offline", "metric": "requests_per_s", "value": "20",
            "notes": "lengths not fixed: input 'ShareGPT prompts', output 'ShareGPT reference lengths'"}
    return row(**{**base, **cols})


def test_a_row_naming_sharegpt_takes_its_mean_lengths_for_the_models_tokenizer():
    p = predict(_ds_row())
    ds = p.details["dataset"]
    assert p.value > 0 and ds["dataset"] == "sharegpt" and ds["tokenizer"] == "llama-3"
    assert "named" in ds["found"]
    # the same run of a 32K-vocabulary model counts more tokens per request: fewer requests per second
    llama2 = predict(_ds_row(model="llama2-7b", notes="ShareGPT"))
    assert llama2.details["dataset"]["tokenizer"] == "llama-2"


def test_a_dataset_column_wins_and_an_unknown_one_names_the_field():
    p = predict(_ds_row(dataset="ShareGPT_V3_unfiltered_cleaned_split", notes=""))
    assert p.details["dataset"]["found"] == "the row's dataset column"
    bad = predict_row(_ds_row(dataset="alpaca"))
    assert bad.value is None and "dataset" in bad.reason and "alpaca" in bad.reason


def test_a_dataset_driven_row_without_a_known_dataset_cannot_be_predicted():
    r = predict_row(_ds_row(notes="lengths not fixed: dataset prompts", engine="TensorRT-LLM v0.9"))
    assert r.value is None and "input_len" in r.reason and "dataset" in r.reason


def test_an_engines_own_benchmark_dataset_applies_when_the_row_names_none():
    p = predict(_ds_row(notes="dataset prompts (dataset not named)", engine="LMDeploy v0.2.0 (TurboMind)",
                        precision="fp16", model="llama2-7b"))
    assert p.details["dataset"]["dataset"] == "sharegpt" and "LMDeploy" in p.details["dataset"]["found"]


def test_the_wait_of_an_offline_run_of_unknown_size_is_not_predicted():
    r = predict_row(_ds_row(metric="ttft_ms", value="500", notes="ShareGPT; LMDeploy-style closed loop",
                            engine="LMDeploy v0.2.0"))
    assert r.value is None and "num_prompts" in r.reason


def test_the_notes_run_size_makes_a_finite_run_whose_tail_sets_the_rate():
    steady = predict(_ds_row())
    finite = predict(_ds_row(notes="lengths not fixed: input 'ShareGPT (200 sampled prompts)'"))
    assert "200 prompts" in finite.details["dataset"]["found"] and "finite run" in finite.details["method"]
    # 200 prompts all at once: the run ends with its longest replies decoding at a small batch
    assert finite.value < 0.7 * steady.value


def test_a_closed_loop_benchmark_does_not_read_the_prompt_count_as_a_burst():
    p = predict(_ds_row(notes="dataset prompts; 3000 prompts", engine="LMDeploy v0.2.0", precision="fp16",
                        model="llama2-7b"))
    assert "prompts sent at once" not in p.details["dataset"]["found"] and "method" not in p.details


def test_request_lengths_represent_the_dataset():
    from xpuplan.workload.datasets import dataset_lengths
    from xpuplan.workload.serving import dataset_request_lengths as request_lengths

    d = dataset_lengths("sharegpt", 128256)
    ins, outs = request_lengths(d, 400)
    assert len(ins) == len(outs) == 400
    assert sum(ins) / 400 == pytest.approx(d.input_mean, rel=0.03)
    assert max(ins) <= d.input_max and all(i + o <= d.total_max for i, o in zip(ins, outs, strict=True))
    assert request_lengths(d, 400) == (ins, outs)  # seeded


def test_a_max_batch_in_the_notes_caps_the_engines_running_sequences():
    # a model whose KV cache holds far more than 64 sequences: the cap binds
    free = predict(row(batch="", scenario="offline", precision="fp16", weight_dtype="fp16", notes="",
                       metric="output_tokens_per_s", engine="LMDeploy v0.2.0"))
    capped = predict(row(batch="", scenario="offline", precision="fp16", weight_dtype="fp16",
                         notes="batch/concurrency: max batch 64", metric="output_tokens_per_s",
                         engine="LMDeploy v0.2.0"))
    assert capped.details["batch"] <= 64 < free.details["batch"] and capped.value < free.value


def test_a_finite_dataset_run_counts_each_requests_own_prompt():
    from xpuplan.workload.datasets import dataset_lengths
    from xpuplan.workload.serving import dataset_request_lengths as request_lengths

    notes = "ShareGPT (200 sampled prompts)"
    total = predict(_ds_row(metric="total_tokens_per_s", notes=notes)).value
    out = predict(_ds_row(metric="output_tokens_per_s", notes=notes)).value
    ins, outs = request_lengths(dataset_lengths("sharegpt", 128256), 200)
    assert total / out == pytest.approx((sum(ins) + sum(outs)) / sum(outs), rel=1e-9)
