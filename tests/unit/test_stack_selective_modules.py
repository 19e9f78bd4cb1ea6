"""A training stack's own selective recomputation set (``TrainingStack.selective_modules``): DeepSeek-V3's framework
recomputes the RMSNorms, MLA's up-projections and the experts' SwiGLU (arXiv 2412.19437 sections 3.2.3, 3.3.3), so
its published layout fits as published without naming them; a job's own modules win; the stack's set follows the
model and reaches the results, the launch command and ``memory train``."""

from __future__ import annotations

import json

import pytest

from tests.unit.clicheck import run
from xpuplan.catalog.stacks import training_stack
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.recompute import stack_selective_modules
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")

DSV3 = get_model("deepseek-v3")
DUAL = training_stack("deepseek-dualpipe")
JOB = TrainingJob(seq_len=4096, global_batch_tokens=15360 * 4096)
CLUSTER = Cluster.from_catalog("nvidia-h800-sxm-80gb", 2048)
PLAN = make_plan(n_devices=2048, global_batch_seqs=15360, pp=16, ep=64, zero_stage=1, precision="fp8",
                 recompute="selective", model=DSV3, uneven_pipeline=True, micro_batch=1)
DEEPSEEK_SET = ("mla_up_proj", "layernorm", "moe_act")  # Megatron-Core's order


def test_the_stacks_set_follows_the_model() -> None:
    assert stack_selective_modules(DSV3, DUAL.selective_modules) == DEEPSEEK_SET
    assert stack_selective_modules(get_model("llama3-8b"), DUAL.selective_modules) == ("layernorm",)  # no MLA, no MoE
    assert stack_selective_modules(get_model("qwen3-235b-a22b"), DUAL.selective_modules) == ("layernorm", "moe_act")
    assert training_stack("megatron-core").selective_modules is None
    assert stack_selective_modules(DSV3, None) is None
    assert stack_selective_modules(DSV3, []) is None
    with pytest.raises(UserInputError) as exc:
        stack_selective_modules(DSV3, ["layernorm", "bogus"])
    assert exc.value.field == "selective_modules"


def test_deepseeks_published_layout_fits_as_published() -> None:
    own = estimate(DSV3, CLUSTER, PLAN, JOB, stack=DUAL, uneven_pipeline=True)
    named = estimate(DSV3, CLUSTER, PLAN, JOB.model_copy(update={"recompute_modules": DEEPSEEK_SET}), stack=DUAL,
                     uneven_pipeline=True)
    assert own.feasible and own.recompute_modules == DEEPSEEK_SET
    assert own.memory.total_bytes == pytest.approx(named.memory.total_bytes)
    assert own.tokens_per_s == pytest.approx(named.tokens_per_s)
    # the planner's default set (the attention core and MLA's up-projections) does not fit there
    default = estimate(DSV3, CLUSTER, PLAN, JOB.model_copy(update={"recompute_modules": ("core_attn", "mla_up_proj")}),
                       stack=DUAL, uneven_pipeline=True)
    assert not default.feasible


def test_a_jobs_own_modules_win_and_other_stacks_keep_the_planners_default() -> None:
    mine = estimate(DSV3, CLUSTER, PLAN, JOB.model_copy(update={"recompute_modules": ("core_attn", "mla_up_proj")}),
                    stack=DUAL, uneven_pipeline=True)
    assert mine.recompute_modules == ("core_attn", "mla_up_proj")
    mc = estimate(DSV3, CLUSTER, PLAN, JOB, stack=training_stack("megatron-core"), uneven_pipeline=True)
    assert mc.recompute_modules is None  # the planner's default, not named


def test_search_launch_command_and_memory_train_use_the_stacks_set() -> None:
    args = ("train", "estimate", "--model", "deepseek-v3", "--hw", "H800", "--devices", "2048", "--pp", "16", "--ep",
            "64", "--precision", "fp8", "--seq-len", "4096", "--global-batch", str(15360 * 4096), "--uneven-pipeline",
            "--stack", "deepseek-dualpipe")
    r = run(*args, "--emit", "megatron")
    assert r.exit_code == 0, r.output
    assert "--recompute-modules mla_up_proj layernorm moe_act" in " ".join(r.output.split())
    r = run("memory", "train", "--model", "deepseek-v3", "--hw", "H800", "--pp", "16", "--dp", "128", "--ep", "64",
            "--recipe", "fp8-adam", "--uneven-pipeline", "--stack", "deepseek-dualpipe", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["plan"]["recompute_modules"] == list(DEEPSEEK_SET) and out["fits"] is True
    e = estimate(DSV3, CLUSTER, PLAN, JOB, stack=DUAL, uneven_pipeline=True)
    assert out["bytes_per_device"]["total"] == pytest.approx(e.memory.total_bytes, rel=1e-6)


def test_an_overridden_stack_with_an_unknown_module_names_its_field() -> None:
    from xpuplan.train.estimate import with_stack_modules

    bad = DUAL.model_copy(update={"selective_modules": ["layernorm", "bogus"]})
    with pytest.raises(UserInputError) as exc:
        with_stack_modules(JOB, DSV3, bad)
    assert exc.value.field == f"training_stacks.{DUAL.id}.selective_modules" and "bogus" in str(exc.value)
