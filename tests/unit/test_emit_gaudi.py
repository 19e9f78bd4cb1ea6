"""``--emit gaudi``: Intel's Megatron-DeepSpeed launch for Gaudi (HabanaAI/Megatron-DeepSpeed scripts/run_llama.sh,
pinned in launch_targets.yaml). The script takes HL_* environment variables and builds fixed LLaMA shapes; the
command must set exactly what the plan assumed, name only variables the script reads, and refuse what it cannot say."""

from __future__ import annotations

import json

import pytest

from tests.unit.clicheck import assert_user_error, run
from xpuplan.catalog.launch_targets import Segment
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.efficiency import default_efficiency
from xpuplan.train import Cluster, ParallelPlan, emit_launch
from xpuplan.train.emit import gaudi_llama_shape
from xpuplan.workload.training import TrainingJob

PLAN = ParallelPlan(tp=8, pp=2, dp=4, sp=True, zero_stage=1, recompute="selective", micro_batch=1, grad_accum=32,
                    precision="fp8")
JOB = TrainingJob(seq_len=8192, train_tokens=1e9)


def _env(argv: tuple[str, ...]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in argv if a.startswith("HL_"))


def _launch(plan: ParallelPlan = PLAN, model: str = "llama3.1-70b", hw: str = "gaudi2", job: TrainingJob = JOB):
    cluster = Cluster.from_catalog(hw, plan.n_devices, efficiency=default_efficiency())
    return emit_launch(plan, get_model(model), cluster, job, "gaudi")


def test_the_command_sets_what_the_plan_assumed_and_the_script_reads_it() -> None:
    launch = _launch()
    assert launch.problems() == [], launch.to_text()
    argv = launch.commands[0].argv
    assert argv[0] == "env" and argv[-2:] == ("bash", "scripts/run_llama.sh")
    env = _env(argv)
    assert env["HL_LLAMA_VER"] == "3.1" and env["HL_LLAMA_MODEL_SIZE"] == "70"
    assert (env["HL_TP"], env["HL_PP"], env["HL_DP"]) == ("8", "2", "4")
    # the script's own check: HL_NUM_NODES * HL_DEVICES_PER_NODE == HL_DP * HL_TP * HL_PP
    assert int(env["HL_NUM_NODES"]) * int(env["HL_DEVICES_PER_NODE"]) == 64
    assert env["HL_GBS"] == str(PLAN.global_batch_seqs) and env["HL_MICRO_BATCH"] == "1"
    assert env["HL_SEQ_LEN"] == "8192" and env["HL_ZERO_STAGE"] == "1" and env["HL_SEQ_PARALLEL"] == "1"
    assert env["HL_CKP_ACT"] == "2"  # selective
    assert env["HL_USE_TRANSFORMER_ENGINE"] == "1"  # fp8 through Intel Gaudi's Transformer Engine
    assert env["HL_TOKENIZER_TYPE"] == "Llama3Tokenizer"
    assert any("HL_USE_CACHE_FP8_WEIGHT" in n for n in launch.notes)  # Intel's speed-up named, not silently set
    assert env["HL_TRAIN_ITERS"] == str(int(1e9 // (PLAN.global_batch_seqs * 8192)))
    assert env["HL_HOSTSFILE"] == "hostsfile" and any("hostsfile" in n for n in launch.notes)  # 8 nodes
    assert launch.pinned.version in launch.to_text()


def test_one_node_needs_no_hostsfile_and_bf16_without_recomputation() -> None:
    plan = ParallelPlan(tp=1, pp=1, dp=8, zero_stage=0, recompute="none", micro_batch=2, grad_accum=4,
                        precision="bf16")
    launch = _launch(plan, "llama3.1-8b")
    env = _env(launch.commands[0].argv)
    assert launch.problems() == []
    assert env["HL_NUM_NODES"] == "1" and "HL_HOSTSFILE" not in env
    assert (env["HL_CKP_ACT"], env["HL_USE_TRANSFORMER_ENGINE"], env["HL_SEQ_PARALLEL"]) == ("0", "0", "0")


def test_the_model_is_matched_to_the_shape_the_script_builds() -> None:
    assert gaudi_llama_shape(get_model("llama3.1-405b")) == ("3.1", "405")
    assert gaudi_llama_shape(get_model("llama2-70b")) == ("2", "70")
    assert gaudi_llama_shape(get_model("llama2-7b")) == ("2", "7")  # LLaMA 1 builds the same shape: the id decides
    assert gaudi_llama_shape(get_model("qwen2.5-72b")) is None
    assert gaudi_llama_shape(get_model("mixtral-8x7b")) is None


@pytest.mark.parametrize("plan,model,hw,words", [
    (PLAN, "qwen2.5-72b", "gaudi2", "LLaMA"),
    (PLAN, "llama3.1-70b", "H100", "not a Gaudi"),
    (ParallelPlan(tp=8, pp=2, dp=2, cp=2, sp=True, zero_stage=1, recompute="full", micro_batch=1, grad_accum=32),
     "llama3.1-70b", "gaudi2", "cp 2"),
    (ParallelPlan(tp=8, pp=1, dp=8, sp=True, zero_stage=1, recompute="offload", micro_batch=1, grad_accum=32),
     "llama3.1-70b", "gaudi2", "offload"),
    (ParallelPlan(tp=8, pp=1, dp=8, sp=True, zero_stage=3, recompute="full", micro_batch=1, grad_accum=32),
     "llama3.1-70b", "gaudi3", "zero_stage 3"),
    (ParallelPlan(tp=8, pp=3, dp=1, sp=True, zero_stage=1, recompute="full", micro_batch=1, grad_accum=32),
     "llama3.1-70b", "gaudi2", "divide evenly"),
    (ParallelPlan(tp=4, pp=1, dp=3, sp=True, zero_stage=1, recompute="full", micro_batch=1, grad_accum=32),
     "llama3.1-8b", "gaudi2", "not a multiple of 8"),
])
def test_what_the_script_cannot_say_is_refused_by_name(plan, model, hw, words) -> None:
    with pytest.raises(UserInputError) as e:
        _launch(plan, model, hw)
    assert e.value.field == "emit" and words in str(e.value)


def test_the_checker_catches_a_variable_the_script_does_not_read() -> None:
    seg = Segment("gaudi", "run_llama.sh", ("env",), ("HL_TP=8", "HL_CP=2", "HL_CKP_ACT=3", "bash",
                                                      "scripts/run_llama.sh"), positionals=2, overrides=True)
    problems = seg.problems()
    assert any("HL_CP" in p and "does not read" in p for p in problems)
    assert any("HL_CKP_ACT" in p and "recorded choices" in p for p in problems)
    assert not any("HL_TP" in p for p in problems)


def test_cli_search_for_a_gaudi_command_proposes_what_the_script_runs() -> None:
    r = run("train", "search", "--model", "llama3.1-70b", "--hw", "gaudi2", "--devices", "64", "--seq-len", "8192",
            "--emit", "gaudi", "--top", "5", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["plans"]
    for est in data["plans"]:
        p = est["plan"]
        assert p["cp"] == 1 and p["vpp"] == 1 and p["ep"] == 1 and p["zero_stage"] <= 1
        assert p["recompute"] in ("none", "full", "selective") and 80 % p["pp"] == 0
    launch = data["launch"]
    assert launch["target"] == "gaudi" and launch["problems"] == []
    assert "scripts/run_llama.sh" in launch["commands"][0]["command"]


def test_cli_gaudi_command_for_a_model_the_script_cannot_build_exits_2() -> None:
    assert_user_error(run("train", "search", "--model", "qwen2.5-72b", "--hw", "gaudi2", "--devices", "64",
                          "--emit", "gaudi"), "--emit", "LLaMA")
