"""The search tries fine-grained activation offloading (Megatron-Core ``--offload-modules``) as a plan attribute: the
sets NVIDIA's recipes use, on plans that do not fit without them, one set per plan, never on a stack without the
feature; a job that names its modules, or says none, pins the choice."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.unit.clicheck import assert_user_error, run
from xpuplan.catalog.stacks import training_stack
from xpuplan.models import get_model
from xpuplan.train import Cluster, estimate
from xpuplan.train.estimate import offload_key_suffix
from xpuplan.train.search import SEARCHED_OFFLOAD_SETS, SearchSpace, offload_variants, search_plans
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")

QWEN = get_model("qwen3-235b-a22b")
LLAMA = get_model("llama3-8b")
GB200 = "nvidia-gb200-186gb"
#: a small space where the fastest Qwen3-235B plans on 64 GB200 fit only with offloading
SPACE = SearchSpace(tp=[1], pp=[1], zero_stage=[1])
JOB = TrainingJob(seq_len=4096, global_batch_tokens=4096 * 256)


def _search(job: TrainingJob = JOB, space: SearchSpace = SPACE, stack: str | None = None, top: int = 10):  # noqa: ANN202
    return search_plans(QWEN, Cluster.from_catalog(GB200, 64), job, space=space, top=top,
                        stack=training_stack(stack) if stack else None)


def test_the_search_offers_offloading_where_it_makes_a_faster_plan_fit() -> None:
    res = _search()
    best = res.best
    assert best is not None and best.offload_modules is not None and best.feasible
    assert best.key.endswith(offload_key_suffix(best.offload_modules))
    assert best.to_dict()["plan"]["offload_modules"] == list(best.offload_modules)
    assert any("offload modules" in n for n in best.notes)
    # the same plan estimated with those modules gives the same figures; without them it does not fit
    cl = Cluster.from_catalog(GB200, 64)
    pinned = estimate(QWEN, cl, best.plan, JOB.model_copy(update={"offload_modules": best.offload_modules}))
    assert pinned.tokens_per_s == pytest.approx(best.tokens_per_s)
    assert pinned.memory.total_bytes == pytest.approx(best.memory.total_bytes)
    assert not estimate(QWEN, cl, best.plan, JOB).feasible
    # and it beats the best plan without offloading
    plain = _search(space=dataclasses.replace(SPACE, offload_sets=()))
    assert plain.best is not None and best.tokens_per_s > plain.best.tokens_per_s


def test_only_plans_that_do_not_fit_without_it_are_offered_offloading() -> None:
    cl = Cluster.from_catalog(GB200, 64)
    offloaded = [e for e in _search(top=30).top if e.offload_modules is not None]
    assert offloaded
    for e in offloaded:
        # the same plan re-running the same modules (the search may pair offloading with another selective set)
        plain = estimate(QWEN, cl, e.plan, JOB.model_copy(update={"recompute_modules": e.recompute_modules}))
        assert not plain.feasible, e.key
        assert e.plan.recompute in ("none", "selective")
        # offloading never makes a plan faster (what lets the search retry only plans that could rank)
        assert e.tokens_per_s <= plain.tokens_per_s


def test_one_set_per_plan_the_fastest_then_the_fewest_bytes_moved() -> None:
    res = _search(top=30)
    plans = [e.plan.key for e in res.top]
    assert len(plans) == len(set(plans))  # no plan listed twice with different sets
    cl = Cluster.from_catalog(GB200, 64)
    best = res.best
    assert best is not None and best.offload_modules is not None
    for mods in SEARCHED_OFFLOAD_SETS:
        other = estimate(QWEN, cl, best.plan, JOB.model_copy(update={"offload_modules": mods}))
        if not other.feasible:
            continue
        assert other.tokens_per_s <= best.tokens_per_s * (1 + 1e-6)
        if other.tokens_per_s == pytest.approx(best.tokens_per_s, rel=1e-9):
            assert other.memory.host_offload_bytes >= best.memory.host_offload_bytes


def test_no_offloading_without_the_feature_or_when_the_job_pins_it() -> None:
    # torchtitan (FSDP2: no ZeRO-1) has no fine-grained offloading
    assert all(e.offload_modules is None for e in _search(space=dataclasses.replace(SPACE, zero_stage=[3]),
                                                           stack="torchtitan").top)
    assert all(e.offload_modules is None for e in _search(space=dataclasses.replace(SPACE, offload_sets=())).top)
    pinned = _search(job=JOB.model_copy(update={"offload_modules": ("expert_fc1",)}))
    assert pinned.top and all(e.offload_modules == ("expert_fc1",) for e in pinned.top)
    # full recomputation alone leaves nothing to offload: no variant
    full = _search(space=dataclasses.replace(SPACE, recompute=["full"]))
    assert all(e.offload_modules is None for e in full.top)


def test_the_sets_tried_follow_the_model_and_the_recomputed_modules() -> None:
    mc = training_stack("megatron-core")
    sets = {j.offload_modules for j in offload_variants(QWEN, JOB, mc, SearchSpace())}
    assert sets == set(SEARCHED_OFFLOAD_SETS)
    dense = {j.offload_modules for j in offload_variants(LLAMA, JOB, mc, SearchSpace())}
    assert dense == {("core_attn", "attn_proj")}  # no MoE layer to offload from
    moe_rec = JOB.model_copy(update={"recompute_modules": ("moe",)})
    assert {j.offload_modules for j in offload_variants(QWEN, moe_rec, mc, SearchSpace())} == {("core_attn", "attn_proj")}
    assert offload_variants(QWEN, JOB, training_stack("torchtitan"), SearchSpace()) == []
    assert offload_variants(QWEN, JOB, mc, SearchSpace(recompute=["full", "partial"])) == []


def test_a_space_with_a_malformed_set_is_refused_naming_the_field() -> None:
    from xpuplan.errors import UserInputError

    for bad in ([("bogus",)], [()], [("core_attn", "core_attn")]):
        with pytest.raises(UserInputError) as exc:
            SearchSpace(offload_sets=bad)
        assert exc.value.field == "offload_sets"


def test_key_suffix() -> None:
    assert offload_key_suffix(None) == ""
    assert offload_key_suffix(("moe_act", "expert_fc1")) == "-off:fc1+act"
    assert offload_key_suffix(("attn_proj", "core_attn")) == "-off:ca+ap"


# -- the front end ----------------------------------------------------------------------------------------------------
_CLI = ["train", "search", "--model", "qwen3-235b-a22b", "--hw", "GB200", "--devices", "64", "--tp", "1", "--pp", "1",
        "--zero", "1", "--global-batch", str(4096 * 256), "--seq-len", "4096", "--top", "3"]


def _ok(*args: str) -> str:
    r = run(*args)
    assert r.exit_code == 0, r.output
    return str(r.output)


def test_cli_emits_the_modules_the_search_chose() -> None:
    out = _ok(*_CLI, "--emit", "megatron")
    assert "-off:" in out
    assert "--fine-grained-activation-offloading" in out and "--offload-modules" in out


def test_cli_offload_modules_none_turns_it_off() -> None:
    out = _ok(*_CLI, "--offload-modules", "none", "--emit", "megatron")
    assert "-off:" not in out and "--offload-modules" not in out
    # none combines with any recompute mode, and an estimate takes it as no offloading
    _ok(*_CLI, "--offload-modules", "none", "--recompute", "full")
    assert "offload modules" not in _ok("train", "estimate", "--model", "llama3-8b", "--hw", "H100", "--devices", "8",
                                        "--offload-modules", "NONE")
    assert_user_error(run("train", "search", "--model", "llama3-8b", "--hw", "H100", "--devices", "8",
                          "--offload-modules", "none,core_attn"), "--offload-modules", "stands alone")


def test_a_partial_plan_offloads_only_the_layers_it_does_not_recompute() -> None:
    """Fully recomputed layers keep only their input: their module inputs neither wait on the host nor cross the link."""
    from xpuplan.train import make_plan

    cl = Cluster.from_catalog("nvidia-h100-sxm-80gb", 64)
    mods = JOB.model_copy(update={"offload_modules": ("expert_fc1", "moe_act")})

    def run_plan(rec: str, layers: int | None = None):  # noqa: ANN202
        plan = make_plan(n_devices=cl.n_devices, global_batch_seqs=JOB.global_batch_seqs, ep=64, recompute=rec,
                         model=QWEN)
        return estimate(QWEN, cl, plan, mods.model_copy(update={"recompute_layers": layers}))

    kept = run_plan("none")
    half = run_plan("partial", QWEN.n_layers // 2)
    assert half.memory.recompute_layers == QWEN.n_layers // 2
    assert half.memory.host_offload_bytes == pytest.approx(kept.memory.host_offload_bytes / 2)
    # H100's shared PCIe link: the copies are exposed, in half the layers, under a longer backward (the recomputation)
    assert 0.0 < half.step.offload_s <= kept.step.offload_s / 2


def test_a_launch_command_for_a_framework_without_it_gets_a_plan_it_can_run() -> None:
    # searching for a DeepSpeed command: the search does not choose offloading, which it does otherwise
    gpt3 = ("train", "search", "--model", "gpt3-175b", "--hw", "A100", "--devices", "1024", "--top", "1")
    assert "-off:" in _ok(*gpt3)
    out = _ok(*gpt3, "--emit", "deepspeed")
    assert "-off:" not in out and "--deepspeed_config" in out
    # modules named by the user and a framework that cannot run them (--emit torchtitan without --stack: the
    # torchtitan profile): refused, naming the flag; with the physics of a stack that has them, refused naming --emit
    assert_user_error(run("train", "estimate", "--model", "qwen3-235b-a22b", "--hw", "GB200", "--devices", "64",
                          "--tp", "1", "--ep", "64", "--offload-modules", "expert_fc1", "--emit", "torchtitan"),
                      "--offload-modules", "fine-grained activation offloading")
    assert_user_error(run("train", "estimate", "--model", "qwen3-235b-a22b", "--hw", "GB200", "--devices", "64",
                          "--tp", "1", "--ep", "64", "--offload-modules", "expert_fc1", "--emit", "torchtitan",
                          "--stack", "megatron-core"),
                      "--emit", "fine-grained activation offloading")


def test_a_partial_plan_with_offloaded_modules_launches_with_both() -> None:
    """The Megatron command keeps the partial plan's block recomputation beside the offloaded modules."""
    r = run("train", "estimate", "--model", "qwen3-235b-a22b", "--hw", "GB200", "--devices", "64", "--tp", "1",
            "--ep", "64", "--recompute", "partial", "--recompute-layers", "40", "--offload-modules", "expert_fc1",
            "--emit", "megatron", "--json")
    assert r.exit_code == 0, r.output
    cmd = " ".join(" ".join(c["argv"]) for c in json.loads(r.stdout)["launch"]["commands"])
    assert "--recompute-method block" in cmd and "--offload-modules expert_fc1" in cmd
