"""Stacks whose model code repeats the grouped K/V heads before the attention call (torchtitan before PR #2259):
the attention keeps, and context parallelism exchanges, K and V of every query head."""

from __future__ import annotations

import pytest

from xpuplan.catalog.stacks import training_stack
from xpuplan.models import get_model
from xpuplan.perf.memory import activation_bytes_per_layer, training_memory
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")

LLAMA = get_model("llama3-8b")  # 32 query heads, 8 KV heads
TITAN = training_stack("torchtitan")


def test_the_torchtitan_profile_of_2024_repeats_and_cites_it() -> None:
    assert TITAN.attention_kv_repeat and not training_stack("megatron-core").attention_kv_repeat
    assert any("repeat_kv" in src and "2259" in src for src in TITAN.sources)


def test_the_attention_keeps_k_and_v_of_every_query_head() -> None:
    s, d = 4096, LLAMA.qk_head_dim + LLAMA.v_head_dim
    plain = activation_bytes_per_layer(LLAMA, s, 1, tp=1, sp=False, recompute="none")
    repeated = activation_bytes_per_layer(LLAMA, s, 1, tp=1, sp=False, recompute="none", kv_repeat=True)
    assert repeated - plain == pytest.approx(2 * s * (LLAMA.n_heads - LLAMA.kv_heads) * d)
    # full recomputation keeps the layer input only: nothing to repeat
    assert activation_bytes_per_layer(LLAMA, s, 1, recompute="full", kv_repeat=True) == activation_bytes_per_layer(
        LLAMA, s, 1, recompute="full")
    kw = dict(seq_len=s, dp=8, recompute="none")
    assert training_memory(LLAMA, kv_repeat=True, **kw).activations > training_memory(LLAMA, **kw).activations


def test_context_parallelism_exchanges_the_repeated_heads() -> None:
    n, seq = 32, 65536
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", n)  # CP across hosts
    job = TrainingJob(seq_len=seq, global_batch_tokens=8 * seq)
    plan = make_plan(n_devices=n, global_batch_seqs=8, tp=1, cp=32, dp=1, recompute="full", micro_batch=1,
                     zero_stage=3)
    gqa = TITAN.model_copy(update={"attention_kv_repeat": False})
    rep = estimate(LLAMA, c, plan, job, stack=TITAN).step.cp_comm_s
    plain = estimate(LLAMA, c, plan, job, stack=gqa).step.cp_comm_s
    assert rep > 2.0 * plain > 0
