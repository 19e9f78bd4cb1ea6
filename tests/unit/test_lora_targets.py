"""LoRA/QLoRA target matrices: which weights get adapters changes the trainable parameters, the adapter traffic of
every step and the memory, and nothing else; every front end names the field when the list is wrong."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.memory import lora_params, lora_target_shapes, training_memory
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.train.compute import LORA_OUTPUT_PASSES, layer_compute
from xpuplan.workload.training import TrainingJob, lora_target_list
from xpuplan.workload.vocabulary import LORA_TARGETS

pytestmark = pytest.mark.usefixtures("no_calibration")

LLAMA = get_model("llama3-70b")
QKV = ("q", "k", "v")


def test_shapes_per_target_unsplit() -> None:
    # Llama 3 70B: d 8192, 64 query heads and 8 KV heads of 128, SwiGLU width 28672
    assert lora_target_shapes(LLAMA, QKV) == [(8192, 8192), (8192, 1024), (8192, 1024)]
    assert lora_target_shapes(LLAMA, ("gate", "down")) == [(8192, 28672), (28672, 8192)]
    assert len(lora_target_shapes(LLAMA)) == len(LORA_TARGETS)
    with pytest.raises(UserInputError) as exc:
        lora_target_shapes(LLAMA, ("qkv",))
    assert exc.value.field == "lora_targets"


def test_non_gated_mlp_has_no_gate_adapter() -> None:
    gpt3 = get_model("gpt3-175b")
    assert lora_target_shapes(gpt3, ("gate",)) == []
    assert lora_params(gpt3, 8, ("gate", "up")) == lora_params(gpt3, 8, ("up",))


def test_params_add_up_over_targets() -> None:
    assert lora_params(LLAMA, 16, QKV) == 80 * 16 * ((8192 + 8192) + 2 * (8192 + 1024))
    assert lora_params(LLAMA, 16) == sum(lora_params(LLAMA, 16, (t,)) for t in LORA_TARGETS)


def _adapter_s(targets: tuple[str, ...]) -> float:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    dev = c.device
    lc = layer_compute(LLAMA, dev, c.efficiency, micro_batch=1, seq_len=4096, tp=8, cp=1, ep=1, sp=True,
                       precision="bf16", lora=True, lora_targets=targets)
    base = layer_compute(LLAMA, dev, c.efficiency, micro_batch=1, seq_len=4096, tp=8, cp=1, ep=1, sp=True,
                         precision="bf16", lora=False)
    return lc.dense_elem - base.dense_elem


def test_adapter_traffic_follows_the_targets() -> None:
    # 2 B x (d_in + LORA_OUTPUT_PASSES x d_out) per token and adapted matrix, over tp
    def bytes_per_token(targets: tuple[str, ...]) -> float:
        return sum(2.0 * (a + LORA_OUTPUT_PASSES * b) for a, b in lora_target_shapes(LLAMA, targets)) / 8
    all_s, qkv_s, q_s = _adapter_s(LORA_TARGETS), _adapter_s(QKV), _adapter_s(("q",))
    assert 0 < q_s < qkv_s < all_s
    # one memory-bound op: a fixed launch cost plus bytes over the bandwidth, so differences scale with the bytes
    b_all, b_qkv, b_q = (bytes_per_token(t) for t in (LORA_TARGETS, QKV, ("q",)))
    assert (all_s - qkv_s) / (all_s - q_s) == pytest.approx((b_all - b_qkv) / (b_all - b_q), rel=1e-6)


def test_fewer_targets_train_faster_with_fewer_trainable_params() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    plan = make_plan(n_devices=8, global_batch_seqs=64, tp=8, recompute="selective")
    every = estimate(LLAMA, c, plan, TrainingJob(seq_len=4096, method="lora", global_batch_tokens=64 * 4096))
    qkv = estimate(LLAMA, c, plan, TrainingJob(seq_len=4096, method="lora", lora_targets=QKV,
                                               global_batch_tokens=64 * 4096))
    assert qkv.tokens_per_s > every.tokens_per_s
    assert qkv.memory.optimizer_states_bytes < every.memory.optimizer_states_bytes
    assert qkv.lora == {"rank": 16, "targets": list(QKV)} and every.lora is not None
    assert estimate(LLAMA, c, plan, TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096)).lora is None


def test_memory_counts_the_targets_adapters() -> None:
    m = training_memory(LLAMA, seq_len=2048, recompute="full", method="lora", lora_targets=QKV)
    assert m.trainable_params_on_device == lora_params(LLAMA, 16, QKV)


def test_job_refuses_bad_target_lists_naming_the_field() -> None:
    for bad in [("q", "q"), ("qkv",), ()]:
        with pytest.raises(ValidationError) as exc:
            TrainingJob(lora_targets=bad)  # type: ignore[arg-type]
        assert exc.value.errors()[0]["loc"][0] == "lora_targets"


def test_request_lists() -> None:
    assert lora_target_list("q, K ,v", "--lora-targets") == QKV
    assert lora_target_list("all", "--lora-targets") == LORA_TARGETS
    assert lora_target_list(None, "--lora-targets") is None
    for bad in ("", "q,q", "q,w"):
        with pytest.raises(UserInputError) as exc:
            lora_target_list(bad, "--lora-targets")
        assert exc.value.field == "--lora-targets"
