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
