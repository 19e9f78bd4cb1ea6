"""Scheduling defaults an engine picks by device (engines.yaml ``device_defaults``): vLLM from 0.9 gives
devices of >= 70 GiB not named A100 8,192 tokens per step and 1,024 sequences, the others 2,048 and 256."""

from __future__ import annotations

import pytest

from xpuplan.catalog import get_device
from xpuplan.catalog.assumptions import DeviceDefaultsSpec, default_assumptions
from xpuplan.models import get_model
from xpuplan.serve.replica import make_replica


def _rep(hw: str, engine: str, **kw):
    return make_replica(get_model("qwen3-32b"), get_device(hw), tp=2, engine=engine, **kw)


@pytest.mark.parametrize(("hw", "chunk", "seqs"), [
    ("nvidia-h100-sxm-80gb", 8192, 1024),   # >= 70 GiB
    ("amd-mi300x-192gb", 8192, 1024),
    ("nvidia-a100-sxm-80gb", 2048, 256),    # >= 70 GiB but named A100 (vLLM PR #17885)
    ("nvidia-l40s-48gb", 2048, 256),        # under 70 GiB
    ("huawei-ascend-910b", 2048, 256),
])
def test_a_printed_vllm_from_0_9_takes_the_defaults_of_the_device(hw: str, chunk: int, seqs: int) -> None:
    rep = _rep(hw, "vLLM v0.11.0")
    assert (rep.engine.prefill_chunk_tokens, rep.max_num_seqs) == (chunk, seqs)
    assert any(f"{chunk:,} tokens per step and {seqs:,} sequences" in n for n in rep.notes)


@pytest.mark.parametrize("engine", ["vllm", "vLLM 0.8.4"])
def test_an_unversioned_or_older_vllm_keeps_the_profile(engine: str) -> None:
    prof = default_assumptions().engine("vllm")
    rep = _rep("nvidia-a100-sxm-80gb", engine)
    assert (rep.engine.prefill_chunk_tokens, rep.max_num_seqs) == (prof.prefill_chunk_tokens, prof.max_num_seqs)
    assert not any("tokens per step" in n for n in rep.notes)


def test_a_user_sequence_limit_wins_over_the_device_default() -> None:
    rep = _rep("nvidia-h100-sxm-80gb", "vllm 0.11", max_num_seqs=64)
    assert rep.max_num_seqs == rep.engine.max_num_seqs == 64
    assert rep.engine.prefill_chunk_tokens == 8192  # the token budget is still the device's default
    # the note says which limit was given and does not claim the device default of 1,024 sequences
    assert any("8,192 tokens per step" in n and "64 sequences (max_num_seqs as given)" in n for n in rep.notes)
    assert not any("1,024 sequences" in n for n in rep.notes)


def test_the_rule_leaves_kinds_it_does_not_name_alone() -> None:
    rule = default_assumptions().engine("vllm 0.11").device_defaults
    assert rule is not None
    assert rule.pick("Google Cloud TPU v5e", "TPU", 16 * 2**30) is None
    assert rule.pick("NVIDIA A100 SXM4 80GB", "GPU", 80 * 2**30) == rule.small
    assert rule.pick("NVIDIA H100 SXM5 80GB", "GPU", 80 * 2**30) == rule.large


def test_a_malformed_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="version must look like"):
        DeviceDefaultsSpec(from_version="nine", min_memory_gib=70, kinds=["GPU"], note="x",
                           large={"prefill_chunk_tokens": 1, "max_num_seqs": 1},
                           small={"prefill_chunk_tokens": 1, "max_num_seqs": 1})


def test_an_override_changes_one_side_of_the_rule_or_removes_it() -> None:
    a = default_assumptions()
    small_only = a.with_overrides({"engines": {"vllm": {"device_defaults": {
        "small": {"prefill_chunk_tokens": 4096, "max_num_seqs": 128}}}}})
    a100 = make_replica(get_model("qwen3-32b"), get_device("nvidia-a100-sxm-80gb"), tp=2, engine="vllm 0.11",
                        assumptions=small_only)
    h100 = make_replica(get_model("qwen3-32b"), get_device("nvidia-h100-sxm-80gb"), tp=2, engine="vllm 0.11",
                        assumptions=small_only)
    assert (a100.engine.prefill_chunk_tokens, a100.max_num_seqs) == (4096, 128)
    assert (h100.engine.prefill_chunk_tokens, h100.max_num_seqs) == (8192, 1024)  # the rest kept
    removed = a.with_overrides({"engines": {"vllm": {"device_defaults": None}}})
    rep = make_replica(get_model("qwen3-32b"), get_device("nvidia-a100-sxm-80gb"), tp=2, engine="vllm 0.11",
                       assumptions=removed)
    assert (rep.engine.prefill_chunk_tokens, rep.max_num_seqs) == (8192, 256)


def test_a_malformed_override_names_its_field() -> None:
    from xpuplan.errors import UserInputError

    with pytest.raises(UserInputError) as err:
        default_assumptions().with_overrides({"engines": {"vllm": {"device_defaults": {"from_version": "nine"}}}})
    assert "device_defaults.from_version" in str(err.value.field)
