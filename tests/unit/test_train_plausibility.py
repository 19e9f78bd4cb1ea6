"""The training planner's plausibility check: a plan predicted above its hardware family's best published
MFU at scale is flagged in the notes with the source, never clipped."""

from __future__ import annotations

import pytest

from xpuplan.catalog.published import load_published_mfu, plausibility_note, published_mfu_reference
from xpuplan.models import get_model
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")


def _a100(n: int) -> Cluster:
    return Cluster.from_catalog("nvidia-a100-sxm-80gb", n)


def test_every_reference_names_its_run_and_source():
    refs = load_published_mfu().references
    assert refs, "the reference file lists at least one family"
    for ref in refs.values():
        assert 0 < ref.mfu < 1 and ref.what and ref.source and ref.from_devices >= 1


def test_note_only_above_the_reference_and_at_its_scale():
    dev = _a100(1024).device
    ref = published_mfu_reference(dev, 1024)
    assert ref is not None and ref.id == "nvidia-ampere" and ref.mfu == pytest.approx(0.563)
    note = plausibility_note(dev, 1024, 0.64)
    assert note is not None and "Korthikanti" in note and "56.3%" in note and "64.0%" in note
    assert plausibility_note(dev, 1024, 0.50) is None  # below the best published: silent
    assert plausibility_note(dev, 8, 0.70) is None  # small runs reach more (FlashAttention-2: 72% on 8 A100)
    h100 = Cluster.from_catalog("nvidia-h100-sxm-80gb", 1024).device
    assert published_mfu_reference(h100, 1024) is None  # no reference listed: the check says nothing


def test_a100_plan_above_the_best_published_is_flagged_not_clipped():
    m = get_model("gpt3-175b")
    job = TrainingJob(seq_len=4096, global_batch_tokens=4 * 1024 * 1024)
    fast = make_plan(n_devices=1024, global_batch_seqs=job.global_batch_seqs, tp=4, pp=8, vpp=6, cp=2, sp=True,
                     zero_stage=1, recompute="none", micro_batch=2)
    e = estimate(m, _a100(1024), fast, job)
    assert e.mfu > 0.563  # the prediction is kept as the physics gives it
    assert any(n.startswith("plausibility:") and "Korthikanti" in n for n in e.notes)
    # the layout of the published runs (TP8, selective recomputation, unfused attention) stays below: no note
    job21 = TrainingJob(seq_len=2048, global_batch_tokens=4 * 1024 * 1024, flash_attention=False)
    published = make_plan(n_devices=1024, global_batch_seqs=job21.global_batch_seqs, tp=8, pp=8, sp=True,
                          zero_stage=1, recompute="selective", micro_batch=1)
    e21 = estimate(m, _a100(1024), published, job21)
    assert e21.mfu < 0.563 and not any(n.startswith("plausibility:") for n in e21.notes)


def test_volta_plans_are_checked_against_the_published_v100_runs():
    """V100 has a reference too (ZeRO-100B, Megatron-LM 2019: ~30% of peak at scale): the search's Ampere-style
    defaults give V100 plans far above it, and the note says so."""
    dev = Cluster.from_catalog("nvidia-v100-sxm-32gb", 64).device
    ref = published_mfu_reference(dev, 64)
    assert ref is not None and ref.id == "nvidia-volta" and ref.mfu == pytest.approx(0.30)
    note = plausibility_note(dev, 64, 0.65)
    assert note is not None and "ZeRO" in note and "30.0%" in note
    assert published_mfu_reference(dev, 8) is None
