"""The MoE combine of the serving layer (perf.ops.MOE_COMBINE_OP): the top-k expert outputs of each token read back
and summed, one pass per MoE layer in every serving engine; the training planner keeps its stack's permutation."""

from __future__ import annotations

import pytest

from xpuplan.models import get_model
from xpuplan.perf.ops import MOE_COMBINE_OP, layer_ops


def _combine(model: str, **kw):
    ops = layer_ops(get_model(model), **kw)
    return [op for op in ops if op.name == MOE_COMBINE_OP]


@pytest.mark.parametrize(("ep", "tp"), [(1, 8), (8, 1), (4, 2)])
def test_the_combine_reads_top_k_copies_and_writes_one_row_per_token_of_the_rank(ep: int, tp: int) -> None:
    m = get_model("qwen3-235b-a22b")
    (op,) = _combine("qwen3-235b-a22b", batch=4, q_len=2048, kv_len=2048, tp=tp, ep=ep)
    tokens = 4 * 2048 / ep
    assert op.op_class == "elementwise"
    assert op.bytes == pytest.approx((m.moe.top_k + 1) * tokens * m.d_model * 2)


def test_dense_layers_and_dense_models_have_no_combine() -> None:
    assert _combine("llama3-8b", batch=1, q_len=128, kv_len=128) == []
    assert _combine("deepseek-v3", batch=1, q_len=128, kv_len=128, moe_layer=False) == []


def test_the_training_planner_keeps_its_permutation_instead_of_the_combine(monkeypatch) -> None:
    """Whatever the combine would cost, the training layer's time does not see it (its stack's permutation,
    MOE_PERMUTE_BYTES_PER_ELEMENT, already moves the copies back)."""
    import dataclasses

    from xpuplan.catalog import get_device
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.train import compute

    device = get_device("H100")
    eff = default_assumptions().efficiency(device)
    kw = dict(micro_batch=1, seq_len=4096, tp=1, cp=1, ep=8, sp=False, precision="bf16")
    model = get_model("qwen3-30b-a3b")
    before = compute.layer_compute(model, device, eff, **kw)
    real = compute.layer_ops

    def costly_combine(*a, **k):
        return [dataclasses.replace(op, bytes=op.bytes * 1e6) if op.name == MOE_COMBINE_OP else op
                for op in real(*a, **k)]

    monkeypatch.setattr(compute, "layer_ops", costly_combine)
    after = compute.layer_compute(model, device, eff, **kw)
    assert after.moe_gemm == before.moe_gemm and after.moe_elem == before.moe_elem


def test_the_combine_probe_compares_the_stored_h200_measurement(capsys) -> None:
    from tests.unit.benchmod import BENCHMARKS, load_probe

    probe = load_probe("moe_combine_probe")
    assert probe.compare(str(BENCHMARKS / "data" / "device_runs" / "h200_moe_combine_2026-11-27.json")) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if "T=" in x]
    assert len(lines) == len(probe.SHAPES) * len(probe.TOKENS)
    assert probe.compare(str(BENCHMARKS / "data" / "README.md")) == 2
