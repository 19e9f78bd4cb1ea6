"""Pinned launch targets: the data file, the argv checker, and every serve command against its pinned release."""

from __future__ import annotations

import json

import pytest

from xpuplan.catalog.launch_targets import Command, Segment, check_argv, launch_targets, target
from xpuplan.catalog.loader import get_device
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.serve import EMITTERS, emit_plan, make_replica
from xpuplan.serve.emit import engine_mismatch

#: every target named in the issue has a pin with version, date, source and recorded flags
PINNED = ("torchrun", "megatron", "bridge", "torchtitan", "deepspeed", "vllm", "vllm-ascend", "sglang",
          "sglang-router", "trtllm", "mindie", "lmdeploy")


def test_every_target_is_pinned_with_its_source():
    t = launch_targets()
    assert set(PINNED) <= set(t)
    for key in PINNED:
        pin = t[key]
        assert pin.version and pin.source.startswith("https://") and pin.recorded and pin.released
        assert pin.programs, key
    # the recorded lists are the releases' full parsers, not a hand-picked subset
    assert len(t["megatron"].programs["pretrain_gpt.py"].flags) > 800
    assert len(t["vllm"].programs["vllm serve"].flags) > 400
    assert len(t["sglang"].programs["sglang.launch_server"].flags) > 500


VLLM = target("vllm").programs["vllm serve"].flags


def test_checker_accepts_a_good_command():
    problems, _ = check_argv(VLLM, ["m", "--tensor-parallel-size", "8", "--dtype", "bfloat16",
                                    "--enable-expert-parallel", "--gpu-memory-utilization=0.9"], positionals=1)
    assert problems == []


@pytest.mark.parametrize("args,expect", [
    (["--tensor-paralel-size", "8"], "unknown flag --tensor-paralel-size"),   # misspelt
    (["--quantisation", "fp8"], "unknown flag --quantisation"),               # British spelling
    (["--tp", "8"], "unknown flag --tp"),                                      # another engine's flag
    (["--tensor-parallel-size", "eight"], "expects an integer"),              # wrong type
    (["--gpu-memory-utilization", "most"], "expects a number"),
    (["--dtype", "bf16"], "not one of the recorded choices"),                 # value outside choices
    (["--kv-cache-dtype", "fp8_e4m3fn"], "not one of the recorded choices"),
    (["--enable-expert-parallel=1"], "is a switch"),
    (["--max-num-seqs"], "takes 1 value"),
    (["extra", "--max-num-seqs", "4"], "unexpected argument"),
])
def test_checker_catches_bad_flags(args, expect):
    problems, _ = check_argv(VLLM, ["model"] + args, positionals=1)
    assert any(expect in p for p in problems), problems


def test_checker_reports_the_pinned_version():
    seg = Segment("sglang", "sglang.launch_server", ("python", "-m", "sglang.launch_server"),
                  ("--model-path", "m", "--tp", "4"))
    p = Command("serve", (seg,)).problems()[0]
    assert "sglang 0.5.23" in p and "unknown flag --tp" in p


def test_bridge_overrides_are_checked():
    seg = Segment("bridge", "scripts/training/run_recipe.py", ("scripts/training/run_recipe.py",),
                  ("--recipe", "vanilla_gpt_pretrain_1gpu_h100_bf16_config", "model.sequence_paralel=true",
                   "mixed_precision=bf16_mixd"), overrides=True)
    problems = seg.problems()
    assert any("model.sequence_paralel" in p for p in problems) and any("bf16_mixd" in p for p in problems)


def test_bridge_recipe_mode_and_dataset_must_agree():
    seg = Segment("bridge", "scripts/training/run_recipe.py", ("scripts/training/run_recipe.py",),
                  ("--recipe", "llama3_8b_pretrain_2gpu_h100_bf16_config", "--mode", "lora", "--dataset", "mock"),
                  overrides=True)
    problems = seg.problems()
    assert any("does not match the pretrain recipe" in p for p in problems)
    assert any("does not train in --mode lora" in p for p in problems)


def test_torchtitan_config_must_exist():
    seg = Segment("torchtitan", "torchtitan.train", ("-m", "torchtitan.train"),
                  ("--module", "llama3", "--config", "llama3_7b"))
    assert any("llama3_7b" in p for p in seg.problems())


# -------------------------------------------------------------------------------------------------
# serve commands against their pinned releases
# -------------------------------------------------------------------------------------------------
REPLICAS = [
    ("llama3-70b", "H100", dict(tp=4, dtype="fp8")),
    ("llama3-8b", "A100", dict(tp=1, dtype="int4")),
    ("llama2-70b", "H100", dict(tp=2, pp=2, dtype="bf16")),
    ("deepseek-v3", "H200", dict(tp=8, ep=2, dtype="fp8")),
    ("qwen3-235b-a22b", "ascend-910c", dict(tp=8, ep=2, dtype="bf16")),
    ("llama3-70b", "910B", dict(tp=4, dtype="bf16")),
]


@pytest.mark.parametrize("engine", EMITTERS)
@pytest.mark.parametrize("model_id,hw,kw", REPLICAS, ids=[f"{m}@{h}" for m, h, _ in REPLICAS])
@pytest.mark.parametrize("disagg", [None, (2, 3)], ids=["aggregated", "disaggregated"])
def test_every_serve_command_is_accepted_by_the_pinned_release(engine, model_id, hw, kw, disagg):
    rep = make_replica(get_model(model_id), get_device(hw), **kw)
    if engine_mismatch(rep, engine):  # TensorRT-LLM off NVIDIA, MindIE/vllm-ascend off Ascend: bad input
        with pytest.raises(UserInputError) as e:
            emit_plan(rep, engine, max_num_seqs=64, max_model_len=4096, disagg=disagg)
        assert e.value.field == "--emit" and rep.device.id in str(e.value)
        return
    lp = emit_plan(rep, engine, max_num_seqs=64, max_model_len=4096, disagg=disagg)
    assert lp.problems() == [], lp.to_text()
    assert lp.pinned.version in lp.to_text()
    d = lp.to_dict()
    assert d["version"] == lp.pinned.version and all(c["argv"] for c in d["commands"])


def _argv(lp, role=None):
    c = next(c for c in lp.commands if role is None or c.role.startswith(role))
    return c.argv


def _v(argv, flag):
    return argv[argv.index(flag) + 1]


def test_vllm_realises_the_replica():
    rep = make_replica(get_model("deepseek-v3"), get_device("H200"), tp=8, ep=2, dtype="fp8", kv_dtype="fp8",
                       memory_fraction=0.85)
    a = _argv(emit_plan(rep, "vllm", max_num_seqs=96, max_model_len=6000))
    assert a[:3] == ("vllm", "serve", "deepseek-ai/DeepSeek-V3")
    assert _v(a, "--tensor-parallel-size") == "8" and _v(a, "--data-parallel-size") == "2"
    assert "--enable-expert-parallel" in a and _v(a, "--kv-cache-dtype") == "fp8"
    assert _v(a, "--gpu-memory-utilization") == "0.85" and _v(a, "--max-num-seqs") == "96"
    assert _v(a, "--max-model-len") == "6000" and _v(a, "--block-size") == str(rep.block_size_tokens)
    assert "--quantization" not in a  # the FP8 checkpoint carries its scheme
    online = emit_plan(rep, "vllm", max_num_seqs=96, max_model_len=6000, quantized_checkpoint=False)
    assert _v(_argv(online), "--quantization") == "fp8"


def test_the_ep_exchange_the_estimate_priced_is_the_one_launched():
    """vLLM gets the all2all backend the step model priced; SGLang gets DeepEP only when the estimate priced an
    all-to-all (an assumptions file setting moe_ep_exchange: alltoall)."""
    import dataclasses

    rep = make_replica(get_model("deepseek-v3"), get_device("H200"), tp=1, ep=8, dtype="fp8", engine="vllm")
    a = _argv(emit_plan(rep, "vllm", max_num_seqs=96, max_model_len=6000))
    assert _v(a, "--all2all-backend") == "allgather_reducescatter"
    assert "--moe-a2a-backend" not in _argv(emit_plan(rep, "sglang", max_num_seqs=96, max_model_len=6000))
    a2a = dataclasses.replace(rep, engine=dataclasses.replace(rep.engine, moe_ep_exchange="alltoall"))
    assert _v(_argv(emit_plan(a2a, "vllm", max_num_seqs=96, max_model_len=6000)), "--all2all-backend") == \
        "deepep_high_throughput"
    assert _v(_argv(emit_plan(a2a, "sglang", max_num_seqs=96, max_model_len=6000)), "--moe-a2a-backend") == "deepep"
    dense = make_replica(get_model("llama3-8b"), get_device("H200"), tp=2, engine="vllm")
    assert "--all2all-backend" not in _argv(emit_plan(dense, "vllm", max_num_seqs=96, max_model_len=6000))


def test_vllm_on_ascend_is_vllm_ascend():
    rep = make_replica(get_model("qwen3-235b-a22b"), get_device("ascend-910c"), tp=8, ep=2)
    lp = emit_plan(rep, "vllm", max_num_seqs=32, max_model_len=4096)
    assert lp.target == "vllm-ascend" and _v(_argv(lp), "--block-size") == "128"
    assert "--enforce-eager" not in _argv(lp) and any("ACL graph" in n for n in lp.notes)


def test_sglang_attention_dp_and_ep_layout():
    rep = make_replica(get_model("deepseek-v3"), get_device("H200"), tp=8, ep=2, dtype="fp8", kv_dtype="fp8")
    a = _argv(emit_plan(rep, "sglang", max_num_seqs=64, max_model_len=4096))
    assert _v(a, "--tp-size") == "16" and _v(a, "--dp-size") == "2" and _v(a, "--ep-size") == "16"
    assert "--enable-dp-attention" in a and _v(a, "--kv-cache-dtype") == "fp8_e4m3"


def test_a_16_bit_kv_cache_is_the_engines_default_and_needs_no_flag():
    """FP8 weights on vLLM/SGLang keep the KV cache in the model dtype unless asked: the plan says so and the
    command leaves --kv-cache-dtype at its default (auto), so what runs is what was planned."""
    rep = make_replica(get_model("deepseek-v3"), get_device("H200"), tp=8, dtype="fp8", engine="vllm")
    assert rep.precision.kv_dtype == "bf16"
    for engine in ("vllm", "sglang"):
        a = _argv(emit_plan(rep, engine, max_num_seqs=64, max_model_len=4096))
        assert "--kv-cache-dtype" not in a or _v(a, "--kv-cache-dtype") in ("auto", "bfloat16", "bf16")


def test_disaggregated_sglang_has_both_pools_and_the_router():
    rep = make_replica(get_model("llama3-70b"), get_device("H100"), tp=4)
    lp = emit_plan(rep, "sglang", max_num_seqs=64, max_model_len=4096, disagg=(2, 3))
    roles = [(c.role, c.replicas) for c in lp.commands]
    assert roles == [("prefill pool", 2), ("decode pool", 3), ("router", 1)]
    assert _v(_argv(lp, "prefill"), "--disaggregation-mode") == "prefill"
    assert _v(_argv(lp, "decode"), "--disaggregation-mode") == "decode"
    assert "--pd-disaggregation" in _argv(lp, "router")


def test_trtllm_attention_dp_and_disagg_config():
    rep = make_replica(get_model("deepseek-v3"), get_device("H200"), tp=1, ep=8, dtype="fp8")
    lp = emit_plan(rep, "trtllm", max_num_seqs=64, max_model_len=4096, disagg=(1, 2))
    files = dict(lp.files)
    assert "enable_attention_dp: true" in files["extra-llm-api-config.yml"]
    assert "num_instances: 2" in files["disagg_config.yaml"]
    a = _argv(lp, "context")
    assert _v(a, "--tp_size") == "8" and _v(a, "--ep_size") == "8" and _v(a, "--server_role") == "CONTEXT"
    assert _argv(lp, "router")[:2] == ("trtllm-serve", "disaggregated")


def test_lmdeploy_and_mindie():
    rep = make_replica(get_model("llama3-70b"), get_device("H100"), tp=4)
    a = _argv(emit_plan(rep, "lmdeploy", max_num_seqs=64, max_model_len=4096))
    assert a[:4] == ("lmdeploy", "serve", "api_server", "meta-llama/Meta-Llama-3-70B") and _v(a, "--tp") == "4"
    assert _v(a, "--session-len") == "4096" and _v(a, "--max-batch-size") == "64"
    m = emit_plan(make_replica(get_model("llama3-70b"), get_device("910B"), tp=4), "mindie", max_num_seqs=64,
                  max_model_len=4096)
    cfg = json.loads(dict(m.files)["config-backend.json"])
    assert cfg["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["worldSize"] == 4
    assert cfg["BackendConfig"]["ScheduleConfig"]["maxBatchSize"] == 64


def test_unknown_engine():
    rep = make_replica(get_model("llama3-8b"), get_device("H100"), tp=1)
    with pytest.raises(UserInputError) as e:
        emit_plan(rep, "ollama", max_num_seqs=1, max_model_len=10)
    assert e.value.field == "emit"


def test_jobs_engines_match():
    from xpuplan.jobs.serve import EMITTERS as JOB_EMITTERS

    assert tuple(JOB_EMITTERS) == tuple(EMITTERS)


def test_a_rejected_command_is_flagged_in_the_output():
    from xpuplan.catalog.launch_targets import LaunchPlan

    seg = Segment("vllm", "vllm serve", ("vllm", "serve"), ("m", "--tensor-paralel-size", "2"), positionals=1)
    lp = LaunchPlan("vllm", (Command("serve", (seg,)),))
    assert "WARNING, not accepted by the pinned release" in lp.to_text()
    assert any("--tensor-paralel-size" in p for p in lp.to_dict()["problems"])


@pytest.mark.parametrize(("engine", "hw"), [("trtllm", "910B"), ("trtllm", "MI300X"), ("mindie", "H100"),
                                           ("vllm-ascend", "MI300X")])
def test_an_engine_that_does_not_run_on_the_device_is_bad_input(engine, hw):
    """Was: a TensorRT-LLM command for an Ascend NPU, a MindIE config for an H100, printed without a word."""
    rep = make_replica(get_model("llama3-8b"), get_device(hw), tp=1)
    with pytest.raises(UserInputError) as e:
        emit_plan(rep, engine, max_num_seqs=8, max_model_len=2048)
    assert e.value.field == "--emit" and rep.device.id in str(e.value)
