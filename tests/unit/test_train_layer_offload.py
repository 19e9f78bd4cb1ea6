"""Recompute mode layer_offload: whole layers' activations in host memory, no recomputation (Megatron-Core
--cpu-offloading-num-layers), as many layers as the plan needs to fit (docs/training.md)."""

from __future__ import annotations

import numpy as np
import pytest

from xpuplan.catalog import load_catalog
from xpuplan.catalog.stacks import training_stack
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.links import PCIE_HOST_COPY_SHARE, host_copy_bytes_per_s, host_link_bytes_per_s
from xpuplan.perf.memory import OFFLOAD_BUFFER_LAYERS, layer_offload_count, training_memory
from xpuplan.train import Cluster, SearchSpace, emit_launch, estimate, make_plan, search_plans
from xpuplan.train.search import enumerate_plans
from xpuplan.units import GB
from xpuplan.workload.training import TrainingJob

MODEL = "llama3-70b"
HW = "nvidia-gb200-186gb"


def _plan(recompute: str, *, micro_batch: int = 2, pp: int = 1, precision: str = "fp8"):
    m = get_model(MODEL)
    return make_plan(n_devices=64, global_batch_seqs=256, tp=1, pp=pp, zero_stage=3, recompute=recompute,
                     micro_batch=micro_batch, precision=precision, model=m)


def _est(recompute: str, stack: str = "nemo", **kw):
    m = get_model(MODEL)
    return estimate(m, Cluster.from_catalog(HW, 64), _plan(recompute, **kw),
                    TrainingJob(seq_len=8192, global_batch_tokens=256 * 8192), stack=training_stack(stack))


def test_layer_offload_count_is_the_fewest_layers_that_fit():
    layer = np.array([1.0 * GB])
    usable = np.array([100.0 * GB])
    assert layer_offload_count(np.array([90.0 * GB]), layer, usable, 80)[0] == 0  # fits as it is
    # 10 GB over: 10 layers, plus the two in transit once anything moves
    assert layer_offload_count(np.array([110.0 * GB]), layer, usable, 80)[0] == 10 + OFFLOAD_BUFFER_LAYERS
    assert layer_offload_count(np.array([500.0 * GB]), layer, usable, 80)[0] == 79  # at most all layers but one
    assert layer_offload_count(np.array([110.0 * GB]), layer, np.array([0.0]), 80)[0] == 79  # usable unknown


def test_llama3_70b_fsdp_on_gb200_offloads_about_half_its_layers_as_nvidia_does():
    """NVIDIA's Megatron-Bridge recipe for this run offloads 40 of 80 layers (micro-batch 2, FP8)."""
    none, full, lo = _est("none"), _est("full"), _est("layer_offload")
    assert not none.feasible and full.feasible and lo.feasible
    assert 30 <= lo.memory.offload_layers <= 50
    layer = (none.memory.activations_bytes - lo.memory.activations_bytes) / (lo.memory.offload_layers - OFFLOAD_BUFFER_LAYERS)
    assert lo.memory.host_offload_bytes == pytest.approx(lo.memory.offload_layers * layer, rel=1e-6)
    assert lo.step.recompute_s == 0.0 and lo.step.offload_s >= 0.0
    assert lo.tokens_per_s > full.tokens_per_s  # the copies hide under NVLink-C2C; recomputation does not
    assert any("cpu-offloading-num-layers" in n for n in lo.notes)


def test_offload_copies_are_timed_on_the_host_link():
    """GB200's copies run on NVLink-C2C (catalog host_link); a PCIe-only device pays far more for the same bytes."""
    gb200 = load_catalog().get(HW)
    bw, from_catalog = host_link_bytes_per_s(gb200)
    assert from_catalog and bw == gb200.figure("host_link.bandwidth_gb_per_s_per_direction").value
    assert bw > host_link_bytes_per_s(load_catalog().get("nvidia-h100-sxm-80gb"))[0]
    # all GPUs of a server copy at once: two HGX GPUs share a PCIe switch uplink; the C2C figure is per GPU already
    h100 = load_catalog().get("nvidia-h100-sxm-80gb")
    assert host_copy_bytes_per_s(h100) == pytest.approx(PCIE_HOST_COPY_SHARE * h100.pcie_bandwidth)
    assert host_copy_bytes_per_s(gb200) == bw


def test_pure_zero3_with_offload_does_not_displace_3d_parallelism_for_175b_on_1024_a100():
    """Issue 11: pure ZeRO-3 of a 175B model on ~1,000 A100 is not what the search should return; activation
    offload over a shared PCIe uplink does not rescue it."""
    m = get_model("gpt3-175b")
    res = search_plans(m, Cluster.from_catalog("nvidia-a100-sxm-80gb", 1024),
                       TrainingJob(seq_len=2048, global_batch_tokens=2048 * 2048), top=1)
    assert res.best is not None and res.best.plan.zero_stage != 3 and res.best.plan.tp * res.best.plan.pp > 1


def test_layer_offload_needs_a_stack_that_has_it_and_no_pipeline():
    with pytest.raises(UserInputError) as e:
        _est("layer_offload", stack="torchtitan")
    assert e.value.field == "recompute"
    m = get_model(MODEL)
    plan = make_plan(n_devices=64, global_batch_seqs=256, tp=8, pp=2, recompute="layer_offload", micro_batch=1,
                     model=m)
    with pytest.raises(UserInputError) as e:
        estimate(m, Cluster.from_catalog(HW, 64), plan, TrainingJob(seq_len=8192, global_batch_tokens=256 * 8192),
                 stack=training_stack("nemo"))
    assert e.value.field == "pp"


def test_search_offers_layer_offload_only_where_it_can_run():
    m = get_model(MODEL)
    job = TrainingJob(seq_len=8192, global_batch_tokens=256 * 8192)
    c = Cluster.from_catalog(HW, 64)
    lo = 4  # index of layer_offload in RECOMPUTE_MODES
    nemo = enumerate_plans(m, 64, job, c, SearchSpace(), "ring", layer_offload=True)
    assert (nemo.rec == lo).any() and (nemo.pp[nemo.rec == lo] == 1).all()
    titan = enumerate_plans(m, 64, job, c, SearchSpace(), "ring", layer_offload=False)
    assert not (titan.rec == lo).any()
    # a plan that fits without offloading is not returned twice (as none and as layer_offload)
    res = search_plans(get_model("llama3-8b"), Cluster.from_catalog(HW, 8),
                       TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096), top=50, stack=training_stack("nemo"))
    assert all(p.plan.recompute != "layer_offload" or p.memory.offload_layers > 0 for p in res.top)


def test_memory_train_reports_the_offloaded_layers():
    m = get_model(MODEL)
    mem = training_memory(m, seq_len=8192, micro_batch=2, dp=64, zero_stage=3, recompute="layer_offload",
                          recipe="fp8-primary-adam", usable_bytes=189.7 * GB)
    assert 0 < mem.offload_layers < m.n_layers and mem.total <= 189.7 * GB
    assert mem.host_activations > 0.0


def test_emit_turns_on_megatron_cpu_offloading_with_the_count():
    e = _est("layer_offload")
    m = get_model(MODEL)
    cl = Cluster.from_catalog(HW, 64)
    job = TrainingJob(seq_len=8192, global_batch_tokens=256 * 8192)
    n = e.memory.offload_layers
    meg = emit_launch(e.plan, m, cl, job, "megatron", training_stack("nemo"), offload_layers=n)
    assert not meg.problems(), meg.problems()
    args = meg.to_text()
    assert f"--cpu-offloading-num-layers {n}" in args and "--recompute-granularity" not in args
    bridge = emit_launch(e.plan, m, cl, job, "bridge", training_stack("nemo"), offload_layers=n)
    assert not bridge.problems(), bridge.problems()
    bridge = bridge.to_text()
    assert f"model.cpu_offloading_num_layers={n}" in bridge and "model.recompute_granularity=null" in bridge
    with pytest.raises(UserInputError) as err:
        emit_launch(e.plan, m, cl, job, "deepspeed", training_stack("nemo"), offload_layers=n)
    assert err.value.field == "emit"


def test_a_search_for_layer_offload_alone_says_why_it_cannot_run():
    m = get_model("llama3-8b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    job = TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096)
    with pytest.raises(UserInputError) as e:
        search_plans(m, c, job, space=SearchSpace(recompute=["layer_offload"]), stack=training_stack("torchtitan"))
    assert e.value.field == "recompute"
    with pytest.raises(UserInputError) as e:
        search_plans(m, c, job, space=SearchSpace(recompute=["layer_offload"], pp=[2, 4]), stack=training_stack("nemo"))
    assert e.value.field == "pp"


def test_memory_train_applies_the_same_layer_offload_rule():
    from typer.testing import CliRunner

    from xpuplan.cli.main import app

    r = CliRunner().invoke(app, ["memory", "train", "--model", "llama3-8b", "--recompute", "layer_offload", "--pp", "2"])
    assert r.exit_code == 2 and "--pp" in r.output and "pipeline parallelism" in r.output and "Traceback" not in r.output
