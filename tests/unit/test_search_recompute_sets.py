"""The search tries what selective recomputation re-runs (Megatron-Core ``--recompute-modules``) as a plan attribute:
the sets NVIDIA's recipes use, on selective plans that could rank, one set per plan, only on a stack that lets a run
choose them; a job that names its modules pins the choice."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from tests.unit.clicheck import run
from xpuplan.catalog.stacks import training_stack
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.train import Cluster, estimate
from xpuplan.train.estimate import offload_key_suffix, recompute_key_suffix
from xpuplan.train.search import SEARCHED_RECOMPUTE_SETS, SearchSpace, recompute_variants, search_plans
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")

MIXTRAL = get_model("mixtral-8x22b")
H100 = "nvidia-h100-sxm-80gb"
#: Mixtral-8x22B on 32 H100: the fastest layouts keep too much with the attention core recomputed, and fit by
#: re-running the experts' activation (and the norms) instead
SPACE = SearchSpace(tp=[2, 4], pp=[4], cp=[2, 4], ep=[8], zero_stage=[1], micro_batch=[1])
JOB = TrainingJob()


def _search(job: TrainingJob = JOB, space: SearchSpace = SPACE, stack: str | None = None, top: int = 10):  # noqa: ANN202
    return search_plans(MIXTRAL, Cluster.from_catalog(H100, 32), job, space=space, top=top,
                        stack=training_stack(stack) if stack else None)


def test_the_search_picks_a_set_where_it_makes_a_faster_plan() -> None:
    res = _search()
    best = res.best
    assert best is not None and best.feasible and best.plan.recompute == "selective"
    assert best.recompute_modules is not None and tuple(best.recompute_modules) != ("core_attn",)
    # the key names the set, then any offloading set the plan combines with it
    assert best.key.endswith(recompute_key_suffix(best.recompute_modules) + offload_key_suffix(best.offload_modules))
    assert best.to_dict()["plan"]["recompute_modules"] == list(best.recompute_modules)
    # the same plan estimated with those modules gives the same figures
    cl = Cluster.from_catalog(H100, 32)
    chosen = JOB.model_copy(update={"recompute_modules": best.recompute_modules, "offload_modules": best.offload_modules})
    pinned = estimate(MIXTRAL, cl, best.plan, chosen)
    assert pinned.tokens_per_s == pytest.approx(best.tokens_per_s)
    assert pinned.memory.total_bytes == pytest.approx(best.memory.total_bytes)
    # with the default set it does not fit, or is slower
    default = estimate(MIXTRAL, cl, best.plan, chosen.model_copy(update={"recompute_modules": None}))
    assert not default.feasible or default.tokens_per_s < best.tokens_per_s
    # and it beats the best plan of the search that keeps the default set
    plain = _search(space=dataclasses.replace(SPACE, recompute_sets=()))
    assert plain.best is not None and best.tokens_per_s > plain.best.tokens_per_s
    assert all(e.recompute_modules is None for e in plain.top)
    # without offloading the search still picks a set, alone
    alone = _search(space=dataclasses.replace(SPACE, offload_sets=())).best
    assert alone is not None and alone.recompute_modules is not None and alone.offload_modules is None
    assert alone.tokens_per_s <= best.tokens_per_s * (1 + 1e-9)


def test_one_set_per_plan_the_fastest_that_fits() -> None:
    res = _search(top=30)
    plans = [e.plan.key for e in res.top]
    assert len(plans) == len(set(plans))  # no layout listed twice with different sets
    best = res.best
    assert best is not None
    cl = Cluster.from_catalog(H100, 32)
    for job in recompute_variants(MIXTRAL, JOB, training_stack("megatron-core"), SPACE):
        if best.plan.ep_overlap and "moe" in (job.recompute_modules or ()):
            continue  # Megatron-Core refuses re-running the MoE block with the all-to-all overlap
        other = estimate(MIXTRAL, cl, best.plan, job.model_copy(update={"offload_modules": best.offload_modules}))
        if other.feasible:
            assert other.tokens_per_s <= best.tokens_per_s * (1 + 1e-6), job.recompute_modules


def test_no_set_searched_without_the_feature_or_when_the_job_pins_it() -> None:
    # MindSpeed-LLM's profile lets no run choose the modules (every parallelism of the space, though)
    assert all(e.recompute_modules is None for e in _search(stack="mindspeed-mcore").top)
    pinned = _search(job=JOB.model_copy(update={"recompute_modules": ("core_attn",)}))
    assert pinned.top and all(e.recompute_modules in (None, ("core_attn",)) for e in pinned.top)
    assert all(e.recompute_modules is None for e in _search(space=dataclasses.replace(SPACE, recompute=["none", "full"])).top)


def test_the_sets_tried_follow_the_model() -> None:
    mc = training_stack("megatron-core")
    moe = {j.recompute_modules for j in recompute_variants(MIXTRAL, JOB, mc, SearchSpace())}
    # every Mixtral layer is MoE, without MLA or shared experts
    assert moe == {("layernorm",), ("layernorm", "moe"), ("layernorm", "moe_act"), ("moe_act",)}
    dense = {j.recompute_modules for j in recompute_variants(get_model("llama3-70b"), JOB, mc, SearchSpace())}
    assert dense == {("layernorm",), ("mlp",)}
    mla = {j.recompute_modules for j in recompute_variants(get_model("deepseek-v3"), JOB, mc, SearchSpace())}
    assert mla == {tuple(s) for s in SEARCHED_RECOMPUTE_SETS}  # DeepSeek-V3 has every module the recipes name
    # the set equal to the default is not tried twice
    own = recompute_variants(MIXTRAL, JOB, mc, SearchSpace(recompute_sets=[("core_attn",), ("moe_act",)]))
    assert [j.recompute_modules for j in own] == [("moe_act",)]
    # offloaded modules exclude re-running the whole MoE block (Megatron-Core asserts it)
    off = JOB.model_copy(update={"offload_modules": ("expert_fc1",)})
    assert ("layernorm", "moe") not in {j.recompute_modules for j in recompute_variants(MIXTRAL, off, mc, SearchSpace())}
    assert recompute_variants(MIXTRAL, JOB, training_stack("torchtitan"), SearchSpace()) == []


def test_a_space_with_a_malformed_set_is_refused_naming_the_field() -> None:
    for bad in ([("bogus",)], [()], [("layernorm", "layernorm")]):
        with pytest.raises(UserInputError) as exc:
            SearchSpace(recompute_sets=bad)
        assert exc.value.field == "recompute_sets"


def test_key_suffix() -> None:
    assert recompute_key_suffix(None) == ""
    assert recompute_key_suffix(("moe_act", "layernorm")) == "-rm:ln+act"
    assert recompute_key_suffix(("mlp", "mla_up_proj")) == "-rm:up+mlp"


# -- the front end ----------------------------------------------------------------------------------------------------
_CLI = ["train", "search", "--model", "mixtral-8x22b", "--hw", "H100", "--devices", "32", "--tp", "2,4", "--pp", "4",
        "--cp", "2,4", "--ep", "8", "--zero", "1", "--micro-batch", "1", "--top", "1", "--json"]


def _search_json(*args: str) -> dict:
    r = run(*_CLI, *args)
    assert r.exit_code == 0, r.output
    return dict(json.loads(r.stdout))


def test_cli_emits_the_modules_the_search_chose() -> None:
    out = _search_json("--emit", "megatron")
    best = out["plans"][0]
    mods = best["plan"]["recompute_modules"]
    assert best["key"].endswith(recompute_key_suffix(mods) + offload_key_suffix(best["plan"].get("offload_modules")))
    argv = " ".join(" ".join(c["argv"]) for c in out["launch"]["commands"])
    assert "--recompute-modules " + " ".join(mods) in argv


def test_a_launch_command_for_a_framework_without_it_keeps_the_default_set() -> None:
    assert "recompute_modules" not in _search_json("--emit", "deepspeed")["plans"][0]["plan"]
    # naming the set pins it
    pinned = _search_json("--recompute-modules", "core_attn")["plans"][0]["plan"]
    assert pinned.get("recompute_modules") in (None, ["core_attn"])


def test_a_recommended_training_part_names_the_set_and_the_memory_job_agrees() -> None:
    from xpuplan.catalog import get_device
    from xpuplan.decide.parts import plan_training
    from xpuplan.decide.scenario import preset
    from xpuplan.jobs.memory import MemoryTrainRequest, memory_train

    s = preset("pretraining", {"model": "mixtral-8x22b", "workload": {
        "kind": "training", "training": {"train_tokens": 1e12, "devices": 32, "seq_len": 4096}}})
    part = plan_training(MIXTRAL, get_device(H100), s)
    assert part.ok and part.plan["recompute_modules"]
    offloaded = part.plan.get("offload_modules")
    assert part.plan["key"].endswith(recompute_key_suffix(part.plan["recompute_modules"]) + offload_key_suffix(offloaded))
    # what the web page asks the memory API for this part (recommend.js memoryOf) gives the part's bytes
    k = {m.group(1): int(m.group(2)) for m in re.finditer(r"(tp|pp|vpp|dp|cp|ep|z|mb|ga)(\d+)", part.plan["key"])}
    req = MemoryTrainRequest(model="mixtral-8x22b", hw=H100, seq=4096, micro_batch=k["mb"], tp=k["tp"], pp=k["pp"],
                             dp=k["dp"], cp=k["cp"], ep=k["ep"], vpp=k["vpp"], zero=k["z"], recompute="selective",
                             ep_overlap="-epo" in part.plan["key"], grad_accum=k["ga"],
                             recompute_modules=",".join(part.plan["recompute_modules"]),
                             offload_modules=",".join(offloaded) if offloaded else None)
    assert memory_train(req).bytes_per_device["total"] == pytest.approx(part.plan["memory_bytes_per_device"])


def test_no_plan_pairs_the_moe_block_recomputation_with_the_all_to_all_overlap() -> None:
    """Megatron-Core asserts 'moe' not in recompute_modules with the MoE all-to-all overlap: the search's variants
    keep to it, so every plan it returns is one an estimate accepts."""
    space = SearchSpace(tp=[2, 4], pp=[4], cp=[1, 2, 4], ep=[8], zero_stage=[1], micro_batch=[1], recompute=["selective"],
                        offload_sets=(), recompute_sets=[("layernorm", "moe")])
    res = _search(space=space, top=30)
    cl = Cluster.from_catalog(H100, 32)
    assert any(e.recompute_modules == ("layernorm", "moe") for e in res.top)
    for e in res.top:
        assert not (e.plan.ep_overlap and "moe" in (e.recompute_modules or ())), e.key
        job = JOB.model_copy(update={"recompute_modules": e.recompute_modules, "offload_modules": e.offload_modules})
        assert estimate(MIXTRAL, cl, e.plan, job).tokens_per_s == pytest.approx(e.tokens_per_s)
