"""The routed copies of a MoE layer's tokens: what the experts' FC1 keeps for its weight gradient, and how many
copies a rank permutes when the experts are folded (expert-TP below TP)."""

from __future__ import annotations

import pytest

import xpuplan.train.compute as compute
from xpuplan.catalog import load_catalog
from xpuplan.catalog.stacks import training_stack
from xpuplan.models import get_model
from xpuplan.perf.efficiency import efficiency_for
from xpuplan.perf.memory import activation_bytes_per_layer, saved_moe_act_input_bytes, training_memory

pytestmark = pytest.mark.usefixtures("no_calibration")

QWEN = get_model("qwen3-235b-a22b")  # every layer MoE, top-8, hidden 4096
LLAMA = get_model("llama3-8b")
DSV3 = get_model("deepseek-v3")


def _acts(model, **kw) -> float:  # noqa: ANN001
    base = dict(seq_len=4096, micro_batch=1, tp=4, sp=True, recompute="none")
    return activation_bytes_per_layer(model, **{**base, **kw})


def test_moe_layer_keeps_the_dispatched_copies_for_fc1() -> None:
    # etp = tp: each rank holds every copy of its TP group's tokens at full width (gathered over expert-TP);
    # folded (etp = 1): the copies of its own sequence shard, 1/tp of that
    split = _acts(QWEN, expert_tp=4)
    folded = _acts(QWEN, expert_tp=1)
    copies = 4096 * QWEN.moe.top_k * QWEN.d_model * 2.0  # tokens x top-k x hidden x bf16
    assert split - folded == pytest.approx(copies * (1 - 1 / 4))
    # None means etp = tp (experts split like a dense MLP)
    assert _acts(QWEN) == pytest.approx(split)


def test_dense_model_has_no_dispatched_copies() -> None:
    assert _acts(LLAMA, expert_tp=1) == pytest.approx(_acts(LLAMA, expert_tp=4))


def test_recomputing_the_moe_block_frees_the_copies() -> None:
    kept = _acts(QWEN, recompute="selective", recompute_modules=("moe",), expert_tp=4)
    assert kept == pytest.approx(_acts(QWEN, recompute="selective", recompute_modules=("moe",), expert_tp=1))
    # moe_act frees only FC2's input: the copies stay
    act = _acts(QWEN, recompute="selective", recompute_modules=("moe_act",), expert_tp=1)
    assert act > kept


def test_fp8_copies_and_fp8_swiglu_inputs() -> None:
    lin = _acts(DSV3, tp=1, sp=False, expert_tp=1)
    fp8 = _acts(DSV3, tp=1, sp=False, expert_tp=1, linear_input_bytes=1.0)
    both = _acts(DSV3, tp=1, sp=False, expert_tp=1, linear_input_bytes=1.0, moe_act_input_bytes=1.0)
    moe = DSV3.moe
    frac = DSV3.n_moe_layers / DSV3.n_layers
    assert lin > fp8 > both
    # the SwiGLU inputs (gate and up outputs) of the routed experts at 1 byte instead of 2
    assert fp8 - both == pytest.approx(4096 * frac * moe.top_k * moe.expert_ffn_dim * 2 * (2.0 - 1.0))
    assert saved_moe_act_input_bytes("fp8", True) == 1.0
    assert saved_moe_act_input_bytes("bf16", True) is None
    assert saved_moe_act_input_bytes("fp8", False) is None
    assert training_stack("deepseek-dualpipe").fp8_moe_act_inputs
    assert not training_stack("megatron-core").fp8_moe_act_inputs


def test_training_memory_folds_the_copies_by_the_plans_expert_tp() -> None:
    kw = dict(seq_len=4096, tp=4, pp=1, dp=8, ep=8, zero_stage=1, recompute="none")
    # ep 8 divides dp 8: experts split over TP (etp 4); the whole-experts stack folds them (etp 1)
    split = training_memory(QWEN, **kw).activations
    folded = training_memory(QWEN, **kw, whole_experts=True).activations
    assert folded < split


def _permutation_bytes(etp: int, monkeypatch: pytest.MonkeyPatch) -> float:
    seen: list[float] = []
    orig = compute._op_seconds

    def spy(op, device, precision, eff):  # noqa: ANN001, ANN202
        if op.name == "token permutation":
            seen.append(op.bytes)
        return orig(op, device, precision, eff)

    monkeypatch.setattr(compute, "_op_seconds", spy)
    dev = load_catalog().get("nvidia-h100-sxm-80gb")
    compute.layer_compute(QWEN, dev, efficiency_for(dev), micro_batch=1, seq_len=4096, tp=4, cp=1, ep=8, sp=True,
                          precision="bf16", etp=etp)
    assert seen
    return seen[0]


def test_folded_experts_permute_their_own_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    # etp = tp: the TP group's tokens (gathered over expert-TP); etp = 1: the rank's sequence shard, 1/tp of them
    split = _permutation_bytes(4, monkeypatch)
    folded = _permutation_bytes(1, monkeypatch)
    assert split == pytest.approx(4096 * QWEN.moe.top_k * QWEN.d_model * compute.MOE_PERMUTE_BYTES_PER_ELEMENT)
    assert folded == pytest.approx(split / 4)
