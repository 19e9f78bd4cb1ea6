"""benchmarks/fused_moe_kernel_compare.py: the planner's time of one fused MoE call, the shipped timings file
and its refusals of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.benchmod import load_benchmark
from xpuplan.catalog import get_device
from xpuplan.catalog.assumptions import default_assumptions
from xpuplan.models import get_model
from xpuplan.perf.ops import layer_ops
from xpuplan.perf.roofline import op_seconds

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fc():
    return load_benchmark("fused_moe_kernel_compare")


def test_a_fused_call_is_timed_like_the_layer_ops_experts(fc):
    """One call of Qwen3-30B-A3B's routed experts on one H100 is exactly the expert part of the planner's layer."""
    q = get_model("qwen3-30b-a3b")
    p = {"device": "nvidia-h100-sxm-80gb", "experts": 128, "expert_width": 768, "hidden": 2048, "top_k": 8,
         "dtype": "bf16", "tokens": 4096}
    dev = get_device(p["device"])
    eff = default_assumptions().efficiency(dev)
    ops = [o for o in layer_ops(q, batch=1, q_len=4096, kv_len=4096, moe_layer=True) if o.name.startswith("experts")]
    expected = 1e6 * sum(float(op_seconds(o, dev, "bf16", eff)[2]) for o in ops)
    assert fc.modelled_us(p) == pytest.approx(expected)


def test_the_shipped_timings_load_and_compare(fc, capsys):
    points = fc.load(fc.DATA)
    assert len(points) >= 20 and all(p["source"].startswith("https://github.com/") for p in points)
    assert fc.main([]) == 0
    out = capsys.readouterr().out
    assert "per source, device, kernel and precision" in out


@pytest.mark.parametrize("doc,field", [
    ({}, "points"),
    ({"points": [{"device": "nvidia-h100-sxm-80gb"}]}, "points[0].kernel"),
    ({"points": [{"device": "x", "kernel": "k", "experts": 8, "expert_width": 64, "hidden": 64, "top_k": 2,
                  "dtype": "int3", "tokens": 8, "time_us": 1.0, "source": "s"}]}, "points[0].dtype"),
    ({"points": [{"device": "x", "kernel": "k", "experts": 8, "expert_width": 64, "hidden": 64, "top_k": 2,
                  "dtype": "bf16", "tokens": 0, "time_us": 1.0, "source": "s"}]}, "points[0].tokens"),
])
def test_bad_files_are_refused_with_their_field(fc, tmp_path, capsys, doc, field):
    f = tmp_path / "t.json"
    f.write_text(json.dumps(doc), encoding="utf-8")
    assert fc.main(["--data", str(f)]) == 2
    assert f"field '{field}'" in capsys.readouterr().err


def test_an_unknown_device_is_refused(fc, tmp_path, capsys):
    f = tmp_path / "t.json"
    f.write_text(json.dumps({"points": [{"device": "no-such-gpu", "kernel": "k", "experts": 8, "expert_width": 64,
                                         "hidden": 64, "top_k": 2, "dtype": "bf16", "tokens": 8, "time_us": 1.0,
                                         "source": "s"}]}), encoding="utf-8")
    assert fc.main(["--data", str(f)]) == 2
    assert "no-such-gpu" in capsys.readouterr().err
