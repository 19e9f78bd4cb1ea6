"""Block-scaled FP4 (NVFP4) training: FP4 GEMMs on Blackwell, its own casts, bf16 layers and state recipe."""

from __future__ import annotations

import pytest

from xpuplan.catalog.stacks import training_stack
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.memory import default_recipe_for, state_recipe
from xpuplan.train import Cluster, emit_launch, estimate, make_plan
from xpuplan.train.compute import (
    CAST_BYTES_PER_ELEMENT,
    FP4_BF16_LAYER_FRACTION,
    FP4_CAST_BYTES_PER_ELEMENT,
    FP8_CAST_BYTES_PER_ELEMENT,
)
from xpuplan.train.search import SearchSpace, search_plans
from xpuplan.workload.training import TrainingJob

MODEL = get_model("llama3-70b")
JOB = TrainingJob(seq_len=8192, global_batch_tokens=8192 * 64)


def _est(hw: str, precision: str):
    plan = make_plan(n_devices=64, global_batch_seqs=64, tp=8, pp=2, micro_batch=1, precision=precision, model=MODEL)
    return estimate(MODEL, Cluster.from_catalog(hw, 64), plan, JOB)


def test_nvfp4_cast_bytes_count_the_block_scales():
    assert FP4_CAST_BYTES_PER_ELEMENT == pytest.approx(2.0 + 0.5 + 1.0 / 16.0)
    assert CAST_BYTES_PER_ELEMENT["fp4"] < CAST_BYTES_PER_ELEMENT["fp8"] == FP8_CAST_BYTES_PER_ELEMENT
    assert 0 < FP4_BF16_LAYER_FRACTION < 0.5


def test_fp4_is_faster_than_fp8_on_blackwell_but_not_by_the_peak_ratio():
    bf16, fp8, fp4 = (_est("B200", p) for p in ("bf16", "fp8", "fp4"))
    assert bf16.tokens_per_s < fp8.tokens_per_s < fp4.tokens_per_s
    # attention stays bf16, the recipe's bf16 layers run at the bf16 rate, and casts/communication do not shrink
    assert fp4.tokens_per_s / fp8.tokens_per_s < 1.5
    assert fp4.step.compute_s < fp8.step.compute_s


def test_fp4_training_needs_fp4_tensor_cores():
    with pytest.raises(UserInputError) as e:
        _est("H100", "fp4")
    assert e.value.field == "precision" and "FP4" in e.value.message
    res = search_plans(MODEL, Cluster.from_catalog("H100", 64), JOB, space=SearchSpace(precision=("fp8", "fp4")), top=3)
    assert res.best is not None and all(p.plan.precision == "fp8" for p in res.top)


def test_fp4_state_recipe_holds_the_nvfp4_weight_copy():
    assert default_recipe_for("fp4") == "fp4-adam"
    r = state_recipe("fp4-adam")
    assert r.weights == pytest.approx(2.0 + 0.5 + 1.0 / 16.0)
    assert r.total < state_recipe("fp8-adam").total


def test_fp4_launch_commands():
    e = _est("B200", "fp4")
    c = Cluster.from_catalog("B200", 64)
    argv = emit_launch(e.plan, MODEL, c, JOB, "megatron", training_stack("megatron-core")).commands[0].argv
    assert argv[argv.index("--fp4-format") + 1] == "e2m1" and argv[argv.index("--fp4-recipe") + 1] == "nvfp4"
    bridge = emit_launch(e.plan, MODEL, c, JOB, "bridge").commands[0].argv
    assert "mixed_precision=bf16_with_nvfp4_mixed" in bridge
    for fw in ("megatron", "bridge"):
        assert emit_launch(e.plan, MODEL, c, JOB, fw).problems() == []
    for fw in ("torchtitan", "deepspeed"):
        with pytest.raises(UserInputError) as err:
            emit_launch(e.plan, MODEL, c, JOB, fw)
        assert err.value.field == "emit"


def test_the_share_of_bf16_layers_in_fp4_training_is_the_stacks():
    """Megatron-Core's and Megatron-Bridge's NVFP4 recipes keep no layer in BF16 (first_last_layers_bf16 off); NVIDIA's
    pre-training recipe keeps ~15% (the default for other stacks). The BF16 share slows an FP4 step's GEMMs, and only
    an FP4 step's."""
    assert training_stack("megatron-core").fp4_bf16_layer_fraction == 0.0
    assert training_stack("nemo").fp4_bf16_layer_fraction == 0.0
    assert training_stack("torchtitan").fp4_bf16_layer_fraction == FP4_BF16_LAYER_FRACTION
    c = Cluster.from_catalog("B200", 64)
    mc = training_stack("megatron-core")
    paper = mc.model_copy(update={"fp4_bf16_layer_fraction": FP4_BF16_LAYER_FRACTION})
    plan = make_plan(n_devices=64, global_batch_seqs=64, tp=8, pp=2, micro_batch=1, precision="fp4", model=MODEL)
    fast, slow = (estimate(MODEL, c, plan, JOB, stack=s) for s in (mc, paper))
    assert fast.step.compute_s < slow.step.compute_s
    p8 = make_plan(n_devices=64, global_batch_seqs=64, tp=8, pp=2, micro_batch=1, precision="fp8", model=MODEL)
    assert estimate(MODEL, c, p8, JOB, stack=mc).step.compute_s == estimate(MODEL, c, p8, JOB, stack=paper).step.compute_s
