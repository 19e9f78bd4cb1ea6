"""Recompute mode ``partial``: full recomputation of the fewest layers per pipeline stage that let the plan fit
(Megatron-Core --recompute-method block --recompute-num-layers N), every other layer keeping its activations."""

from __future__ import annotations

import numpy as np
import pytest

from xpuplan.catalog.stacks import training_stack
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.memory import GB, partial_recompute_layers, training_memory
from xpuplan.train import Cluster, emit_launch, estimate, make_plan
from xpuplan.train.search import SearchSpace, search_plans
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")

LLAMA = get_model("llama3-70b")


def _mem(usable_gb: float | None, recompute: str = "partial"):
    return training_memory(LLAMA, seq_len=8192, tp=8, pp=4, dp=4, recompute=recompute, n_microbatches=16,
                           usable_bytes=None if usable_gb is None else usable_gb * GB)


def test_the_fewest_layers_that_fit() -> None:
    none, full = _mem(None, "none"), _mem(None, "full")
    per_layer = (none.activations - full.activations) / 20  # what recomputing one more layer of the stage saves
    ks = []
    for usable in (35.0, 30.0, 25.0):
        m = _mem(usable)
        assert 0 < m.recompute_layers < 20 and m.total <= usable * GB
        assert usable * GB - m.total < 1.05 * per_layer  # one layer fewer would not fit
        ks.append(m.recompute_layers)
    assert ks == sorted(ks)  # less room, more layers


def test_fits_as_it_is_recomputes_nothing_and_unknown_device_recomputes_all() -> None:
    assert _mem(60.0).recompute_layers == 0 and _mem(60.0).total == pytest.approx(_mem(None, "none").total)
    everything = _mem(None)
    assert everything.recompute_layers == 20 and everything.total == pytest.approx(_mem(None, "full").total)
    hopeless = _mem(10.0)  # even full recomputation does not fit: all layers, still too big
    assert hopeless.recompute_layers == 20 and hopeless.total > 10.0 * GB


def test_layer_count_formula() -> None:
    # one peak falling from 30 to 10 over 20 layers, 21 of room: ceil(20 * (30 - 21) / 20) = 9
    k = partial_recompute_layers(np.array([30.0]), [np.array([30.0])], [np.array([10.0])], np.array([21.0]),
                                 np.array([20.0]))
    assert k[0] == 9
    # the larger of two peaks' needs
    k2 = partial_recompute_layers(np.array([30.0]), [np.array([30.0]), np.array([25.0])],
                                  [np.array([10.0]), np.array([24.0])], np.array([21.0]), np.array([20.0]))
    assert k2[0] == 20


def _estimates(n: int, seq: int = 16384, tp: int = 8, pp: int = 4, mb: int = 1, gb: int = 128):
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", n)
    job = TrainingJob(seq_len=seq, global_batch_tokens=gb * seq)
    return {rec: estimate(LLAMA, c, make_plan(n_devices=n, global_batch_seqs=gb, tp=tp, pp=pp, recompute=rec,
                                              micro_batch=mb), job)
            for rec in ("none", "full", "partial")}


def test_partial_sits_between_none_and_full() -> None:
    e = _estimates(32)
    none, full, part = e["none"], e["full"], e["partial"]
    assert not none.feasible and full.feasible and part.feasible
    k = part.memory.recompute_layers
    assert 0 < k < 20 and "-rpart-" in part.key
    assert full.tokens_per_s < part.tokens_per_s < none.tokens_per_s
    assert part.step.recompute_s == pytest.approx(full.step.recompute_s * k / 20, rel=1e-6)
    # the recomputed forwards count as hardware FLOPs, for the recomputed share of the layers
    assert part.hardware_flops_per_token - part.model_flops_per_token == pytest.approx(
        k / 20 * (full.hardware_flops_per_token - full.model_flops_per_token), rel=1e-9)
    assert any(n.startswith(f"partial: {k} of the busiest stage's 20 layers") and "--recompute-num-layers" in n
               for n in part.notes)


def test_launch_commands_name_the_layers() -> None:
    part = _estimates(32)["partial"]
    k = part.memory.recompute_layers
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 32)
    job = TrainingJob(seq_len=16384, global_batch_tokens=128 * 16384)
    mega = emit_launch(part.plan, LLAMA, c, job, "megatron", recompute_layers=k)
    text = " ".join(" ".join(cmd.argv) for cmd in mega.commands)
    assert f"--recompute-granularity full --recompute-method block --recompute-num-layers {k}" in text
    bridge = emit_launch(part.plan, LLAMA, c, job, "bridge", recompute_layers=k)
    btext = " ".join(" ".join(cmd.argv) for cmd in bridge.commands)
    assert f"model.recompute_num_layers={k}" in btext and "model.recompute_method=block" in btext
    titan = emit_launch(part.plan, LLAMA, c, job, "torchtitan", recompute_layers=k)
    assert any("selective_ac_option" in n for n in titan.notes)


def test_stacks_without_chosen_layers_refuse_it() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 32)
    job = TrainingJob(seq_len=8192, global_batch_tokens=128 * 8192)
    plan = make_plan(n_devices=32, global_batch_seqs=128, tp=8, pp=4, recompute="partial", micro_batch=1)
    with pytest.raises(UserInputError) as exc:
        estimate(LLAMA, c, plan, job, stack=training_stack("maxtext"))
    assert exc.value.field == "recompute"
    res = search_plans(LLAMA, c, job, space=SearchSpace(tp=[8], pp=[4]), stack=training_stack("maxtext"), top=50)
    assert all(e.plan.recompute != "partial" for e in res.top)


def test_search_does_not_list_a_partial_plan_equal_to_none_or_full() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 32)
    job = TrainingJob(seq_len=16384, global_batch_tokens=128 * 16384)
    res = search_plans(LLAMA, c, job, space=SearchSpace(tp=[8], pp=[4], micro_batch=[1]), top=200)
    part = [e for e in res.top if e.plan.recompute == "partial"]
    assert part and all(0 < e.memory.recompute_layers < 20 for e in part)


def test_a_runs_own_layer_count() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 32)
    plan = make_plan(n_devices=32, global_batch_seqs=128, tp=8, pp=4, recompute="partial", micro_batch=1)
    fewest = estimate(LLAMA, c, plan, TrainingJob(seq_len=16384, global_batch_tokens=128 * 16384))
    five = estimate(LLAMA, c, plan, TrainingJob(seq_len=16384, global_batch_tokens=128 * 16384, recompute_layers=5))
    many = estimate(LLAMA, c, plan, TrainingJob(seq_len=16384, global_batch_tokens=128 * 16384, recompute_layers=99))
    assert fewest.memory.recompute_layers < 5 and five.memory.recompute_layers == 5
    assert many.memory.recompute_layers == 20  # capped at the stage's layers
    assert five.tokens_per_s < fewest.tokens_per_s and five.memory.total_bytes < fewest.memory.total_bytes
    assert any("as the job sets it" in n for n in five.notes)
    assert training_memory(LLAMA, seq_len=8192, tp=8, pp=4, recompute="partial", recompute_layers=7).recompute_layers == 7
