"""Activation offload (``recompute="offload"``) and XLA's tensor-sharded activations: memory, FLOPs, host copies."""

from __future__ import annotations

import textwrap

import pytest

from xpuplan.catalog import load_hardware_file
from xpuplan.catalog.stacks import training_stack
from xpuplan.models import get_model
from xpuplan.models.arch import ModelArch
from xpuplan.perf.efficiency import default_efficiency
from xpuplan.perf.flops import flops_training_per_token
from xpuplan.perf.links import PCIE_HOST_COPY_SHARE
from xpuplan.perf.memory import (
    OFFLOAD_BUFFER_LAYERS,
    activation_bytes_output,
    activation_bytes_per_layer,
    offload_buffer_bytes,
    offload_layer_input_bytes,
    training_memory,
)
from xpuplan.train import Cluster, StepModel, estimate, make_plan
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")


def _small_vocab() -> ModelArch:
    return ModelArch(id="toy", name="toy", n_layers=16, d_model=2048, n_heads=16, ffn_dim=8192, vocab_size=1000,
                     mlp="gated")


def test_offload_keeps_no_layer_input_on_the_device_only_the_copies_in_flight():
    m = _small_vocab()
    kw = dict(seq_len=4096, micro_batch=2, tp=2, sp=True, zero_stage=1, dp=4)
    assert activation_bytes_per_layer(m, 4096, 2, tp=2, sp=True, recompute="offload") == 0.0
    x = offload_layer_input_bytes(m, 4096, 2, tp=2, sp=True)
    assert x == pytest.approx(2.0 * 4096 * 2 * 2048 / 2)  # 2 B x s x b x h, split over TP by SP
    assert offload_buffer_bytes(m, 4096, 2, tp=2, sp=True) == OFFLOAD_BUFFER_LAYERS * x
    full = training_memory(m, recompute="full", **kw)
    off = training_memory(m, recompute="offload", **kw)
    # the small vocabulary keeps the logits below the rebuilt layer, so the peaks compare layer for layer
    assert full.activations - off.activations == pytest.approx((m.n_layers - OFFLOAD_BUFFER_LAYERS) * x)
    assert off.weights == full.weights and off.optimizer_states == full.optimizer_states
    # what left the device is on the host: every layer's input (no pipeline: one micro-batch in flight)
    assert off.host_activations == pytest.approx(m.n_layers * x) and full.host_activations == 0.0
    assert off.total == pytest.approx(off.states + off.activations + off.workspace)  # host memory is not device memory


def test_logits_and_the_rebuilt_layer_are_not_counted_at_once():
    m = get_model("llama3-8b")  # 128K vocabulary: the logits outweigh one rebuilt layer
    mem = training_memory(m, seq_len=8192, micro_batch=1, recompute="full", zero_stage=3, dp=8)
    kept = m.n_layers * activation_bytes_per_layer(m, 8192, 1, recompute="full")
    rebuilt = activation_bytes_per_layer(m, 8192, 1, recompute="selective")
    logits = activation_bytes_output(m, 8192, 1)
    assert logits > rebuilt
    assert mem.activations == pytest.approx(kept + logits)


def test_offload_recomputes_like_full():
    m = get_model("llama3-8b")
    assert flops_training_per_token(m, 8192, "offload") == flops_training_per_token(m, 8192, "full")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    job = TrainingJob(seq_len=8192, global_batch_tokens=32 * 8192)
    e = {r: estimate(m, c, make_plan(n_devices=8, global_batch_seqs=32, zero_stage=3, micro_batch=2, recompute=r), job)
         for r in ("full", "offload")}
    assert e["offload"].step.recompute_s == pytest.approx(e["full"].step.recompute_s)
    assert e["offload"].hfu == pytest.approx(e["full"].hfu, rel=0.02)
    assert e["offload"].memory.activations_bytes < e["full"].memory.activations_bytes
    assert "-roff-" in e["offload"].plan.key
    assert e["offload"].memory.host_offload_bytes > 0 and e["full"].memory.host_offload_bytes == 0
    assert any("host memory for them" in n for n in e["offload"].notes)


def _slow_host_link(tmp_path, gb_per_s: float):
    f = tmp_path / f"hw{gb_per_s:g}.yaml"
    f.write_text(textwrap.dedent(f"""
        schema_version: 1
        vendor: Acme
        sources:
          s: {{title: "Acme datasheet", date: "2025", kind: vendor}}
        devices:
          - id: acme-x{int(gb_per_s * 10)}
            name: Acme X
            kind: GPU
            origin_country: US
            dense_tflops: {{bf16: {{value: 400, source: s, trust: A}}}}
            memory:
              capacity_gb: {{value: 96, source: s, trust: A}}
              bandwidth_gb_per_s: {{value: 3000, source: s, trust: A}}
            pcie:
              generation: 5
              bandwidth_gb_per_s_per_direction: {{value: {gb_per_s}, source: s, trust: A}}
            power: {{tdp_w: {{value: 500, source: s, trust: A}}}}
            ecosystem: {{software_stack: CUDA, pytorch: native, maturity: 3}}
    """))
    return load_hardware_file(f)[0]


def test_host_copies_hide_under_the_layer_compute_until_the_link_is_too_slow(tmp_path):
    m = get_model("llama3-8b")
    job = TrainingJob(seq_len=4096, global_batch_tokens=16 * 4096)
    plan = make_plan(n_devices=8, global_batch_seqs=16, zero_stage=3, micro_batch=2, recompute="offload")
    fast = estimate(m, Cluster.from_catalog(_slow_host_link(tmp_path, 64), 8, efficiency=default_efficiency()), plan, job)
    slow = estimate(m, Cluster.from_catalog(_slow_host_link(tmp_path, 0.5), 8, efficiency=default_efficiency()), plan,
                    job)
    assert fast.step.offload_s == 0.0
    assert slow.step.offload_s > 0.0
    # what is exposed is what a copy takes beyond its layer's compute window, per layer, pass and micro-batch
    x = offload_layer_input_bytes(m, 4096, 2)
    per_copy = x / (0.5e9 * PCIE_HOST_COPY_SHARE)  # two devices share a PCIe uplink while all copy
    n_copies = 2 * m.n_layers * plan.grad_accum
    assert 0.0 < slow.step.offload_s < n_copies * per_copy
    parts = slow.step.to_dict()
    assert sum(v for k, v in parts.items() if k != "step_s") == pytest.approx(parts["step_s"])


def test_xla_stacks_shard_every_kept_activation_over_tp():
    m = get_model("llama3-8b")
    c = Cluster.from_catalog("google-tpu-v5p", 8)
    job = TrainingJob(seq_len=4096, global_batch_tokens=16 * 4096)
    plan = make_plan(n_devices=8, global_batch_seqs=16, tp=4, sp=False, zero_stage=3, micro_batch=4, recompute="full")
    assert training_stack("maxtext").tp_sharded_activations and not training_stack("megatron-core").tp_sharded_activations
    xla = StepModel(m, c.device, c.efficiency, job, stack=training_stack("maxtext"))
    meg = StepModel(m, c.device, c.efficiency, job, stack=training_stack("megatron-core"))
    a_xla = estimate(m, c, plan, job, step_model=xla).memory.activations_bytes
    a_meg = estimate(m, c, plan, job, step_model=meg).memory.activations_bytes
    kept_meg = m.n_layers * activation_bytes_per_layer(m, 4096, 4, tp=4, sp=False, recompute="full")
    assert a_xla == pytest.approx(a_meg - kept_meg * (1 - 1 / 4), rel=1e-6)
