"""Selective recomputation by module (Megatron-Core ``--recompute-modules``): what each module saves in memory and
costs in the backward, the checks against the model and the stack, and the launch arguments that name them."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.clicheck import assert_user_error, run
from tests.unit.trainrows import train_rows
from xpuplan.catalog.stacks import training_stack
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.memory import activation_bytes_per_layer, training_memory
from xpuplan.perf.recompute import (
    default_selective_modules,
    recompute_modules_problem,
    selective_forward_flops_per_token,
    selective_modules,
)
from xpuplan.train import Cluster, emit_launch, estimate, make_plan
from xpuplan.train.search import SearchSpace, search_plans
from xpuplan.workload.training import TrainingJob, recompute_module_list

pytestmark = pytest.mark.usefixtures("no_calibration")

LLAMA = get_model("llama3-8b")
QWEN_MOE = get_model("qwen3-30b-a3b")
DSV3 = get_model("deepseek-v3")


def _argv(launch) -> str:  # noqa: ANN001
    return " ".join(" ".join(cmd.argv) for cmd in launch.commands)


# -- the module set -------------------------------------------------------------------------------------------------
def test_default_set_is_the_attention_core_and_mla_up_projections() -> None:
    assert default_selective_modules(LLAMA) == {"core_attn"}
    assert default_selective_modules(DSV3) == {"core_attn", "mla_up_proj"}
    assert selective_modules(LLAMA, None) == {"core_attn"}
    assert selective_modules(LLAMA, ["mlp"]) == {"mlp"}


@pytest.mark.parametrize(("model", "mods", "words"), [
    (LLAMA, ["mla_up_proj"], "multi-latent attention"),
    (LLAMA, ["moe_act"], "MoE layer"),
    (QWEN_MOE, ["shared_experts"], "shared experts"),
    (QWEN_MOE, ["mlp"], "every layer"),
    (LLAMA, ["zz"], "unknown module"),
    (LLAMA, ["mlp", "mlp"], "named twice"),
])
def test_modules_the_model_does_not_have_are_refused(model, mods, words) -> None:  # noqa: ANN001
    problem = recompute_modules_problem(model, mods)
    assert problem is not None and words in problem


def test_modules_the_model_has_pass() -> None:
    assert recompute_modules_problem(DSV3, ["mla_up_proj", "mlp", "moe", "shared_experts", "layernorm"]) is None
    assert recompute_modules_problem(QWEN_MOE, ["layernorm", "moe_act"]) is None
    assert recompute_modules_problem(LLAMA, None) is None


def test_comma_list_parsing() -> None:
    assert recompute_module_list("layernorm, moe_act", "--recompute-modules") == ("layernorm", "moe_act")
    assert recompute_module_list("core_attn mla_up_proj", "f") == ("core_attn", "mla_up_proj")  # Megatron's spelling
    for bad in ("", "mlp,mlp", "attention"):
        with pytest.raises(UserInputError) as exc:
            recompute_module_list(bad, "--recompute-modules")
        assert exc.value.field == "--recompute-modules"


# -- memory ---------------------------------------------------------------------------------------------------------
def _act(model, mods=None, **kw) -> float:  # noqa: ANN001
    args = dict(tp=1, sp=False, recompute="selective", recompute_modules=mods) | kw
    return activation_bytes_per_layer(model, 4096, 1, **args)


def test_explicit_default_set_keeps_what_the_default_keeps() -> None:
    assert _act(LLAMA, ["core_attn"]) == _act(LLAMA)
    assert _act(DSV3, ["core_attn", "mla_up_proj"]) == _act(DSV3)


def test_each_module_frees_its_own_tensors() -> None:
    s, h, f = 4096, LLAMA.d_model, LLAMA.ffn_dim
    base = _act(LLAMA, ["core_attn"])
    # the two norm outputs (the QKV and FC1 inputs), 2 bytes each
    assert base - _act(LLAMA, ["core_attn", "layernorm"]) == pytest.approx(2 * 2 * s * h)
    # the dense MLP's gate and up outputs and the activation output (gated: 2 + 1 tensors of width f)
    assert base - _act(LLAMA, ["core_attn", "mlp"]) == pytest.approx(3 * 2 * s * f)
    # without fused attention the s x s scores are kept unless the attention core is re-run
    unfused = dict(flash_attention=False)
    assert _act(LLAMA, ["mlp"], **unfused) > _act(LLAMA, ["core_attn", "mlp"], **unfused) * 2


def test_moe_modules_nest() -> None:
    full_block = _act(QWEN_MOE, ["moe"])
    act_only = _act(QWEN_MOE, ["moe_act"])
    nothing = _act(QWEN_MOE, ["core_attn"])
    assert full_block < act_only < nothing
    e = QWEN_MOE.moe
    assert nothing - act_only == pytest.approx(2 * 4096 * e.top_k * e.expert_ffn_dim)  # the FC2 inputs
    assert _act(DSV3, ["mla_up_proj", "shared_experts"]) < _act(DSV3, ["mla_up_proj"])


def test_training_memory_takes_the_modules() -> None:
    kw = dict(seq_len=4096, tp=1, pp=1, dp=8, ep=8, recompute="selective")
    assert (training_memory(QWEN_MOE, recompute_modules=["moe"], **kw).activations
            < training_memory(QWEN_MOE, **kw).activations)


# -- time and FLOPs -------------------------------------------------------------------------------------------------
def _est(model, n, job: TrainingJob, **plan):  # noqa: ANN001, ANN003
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", n)
    return estimate(model, c, make_plan(n_devices=n, global_batch_seqs=job.global_batch_seqs, **plan), job)


def _job(**kw) -> TrainingJob:  # noqa: ANN003
    return TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096, **kw)


def test_recomputing_more_costs_more_time_and_more_hardware_flops() -> None:
    plan = dict(tp=1, dp=8, recompute="selective", micro_batch=1)
    attn = _est(LLAMA, 8, _job(), **plan)
    mlp = _est(LLAMA, 8, _job(recompute_modules=("core_attn", "mlp")), **plan)
    norms = _est(LLAMA, 8, _job(recompute_modules=("layernorm",)), **plan)
    assert mlp.step.recompute_s > attn.step.recompute_s > norms.step.recompute_s > 0
    assert mlp.model_flops_per_token == attn.model_flops_per_token
    extra = mlp.hardware_flops_per_token - attn.hardware_flops_per_token
    assert extra == pytest.approx(2 * LLAMA.n_layers * 3 * LLAMA.d_model * LLAMA.ffn_dim, rel=1e-6)
    assert norms.hardware_flops_per_token == norms.model_flops_per_token  # elementwise re-runs count no FLOPs
    assert mlp.memory.activations_bytes < attn.memory.activations_bytes


def test_flops_of_the_moe_block_are_the_active_expert_flops() -> None:
    flops = selective_forward_flops_per_token(QWEN_MOE, ["moe"], 0.0)
    e = QWEN_MOE.moe
    per_expert = 3 * QWEN_MOE.d_model * e.expert_ffn_dim
    router = QWEN_MOE.d_model * e.n_routed_experts
    assert flops == pytest.approx(2 * QWEN_MOE.n_layers * (e.top_k * per_expert + router))


def test_recomputing_the_moe_block_dispatches_again() -> None:
    plan = dict(tp=1, dp=16, ep=16, recompute="selective", micro_batch=1)
    base = _est(QWEN_MOE, 16, _job(), **plan)
    moe = _est(QWEN_MOE, 16, _job(recompute_modules=("moe",)), **plan)
    act = _est(QWEN_MOE, 16, _job(recompute_modules=("moe_act",)), **plan)
    # three all-to-all passes instead of two (forward, recomputed forward, backward); the count exchange twice
    assert 1.45 < moe.step.ep_comm_s / base.step.ep_comm_s <= 2.0
    assert act.step.ep_comm_s == pytest.approx(base.step.ep_comm_s)
    assert moe.step.recompute_s > act.step.recompute_s


# -- checks ---------------------------------------------------------------------------------------------------------
def test_the_ep_overlap_refuses_the_moe_module() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 16)
    plan = replace(make_plan(n_devices=16, global_batch_seqs=64, tp=1, ep=16, recompute="selective", micro_batch=1),
                   ep_overlap=True)
    with pytest.raises(UserInputError) as exc:
        estimate(QWEN_MOE, c, plan, _job(recompute_modules=("moe",)))
    assert exc.value.field == "ep_overlap" and "'moe'" in str(exc.value)
    res = search_plans(QWEN_MOE, c, _job(recompute_modules=("moe",)), space=SearchSpace(tp=[1], ep=[16]), top=400)
    assert res.top and not any(e.plan.ep_overlap and e.plan.recompute == "selective" for e in res.top)


def test_model_and_stack_checks_name_the_field() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    plan = make_plan(n_devices=8, global_batch_seqs=64, tp=1, recompute="selective", micro_batch=1)
    with pytest.raises(UserInputError) as exc:
        estimate(LLAMA, c, plan, _job(recompute_modules=("moe",)))
    assert exc.value.field == "recompute_modules"
    with pytest.raises(UserInputError) as exc:
        search_plans(LLAMA, c, _job(recompute_modules=("mlp",)), stack=training_stack("torchtitan"))
    assert exc.value.field == "recompute_modules" and "op" in str(exc.value)
    with pytest.raises(ValueError, match="twice"):
        TrainingJob(recompute_modules=("mlp", "mlp"))


# -- launch arguments -----------------------------------------------------------------------------------------------
def test_launch_arguments_name_the_modules_the_estimate_assumed() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    plan = make_plan(n_devices=8, global_batch_seqs=64, tp=1, recompute="selective", micro_batch=1)
    assert "--recompute-granularity selective --recompute-modules core_attn " in _argv(
        emit_launch(plan, LLAMA, c, _job(), "megatron"))
    text = _argv(emit_launch(plan, LLAMA, c, _job(recompute_modules=("mlp", "layernorm")), "megatron"))
    assert "--recompute-modules layernorm mlp " in text  # Megatron-Core's order
    bridge = _argv(emit_launch(plan, LLAMA, c, _job(recompute_modules=("layernorm",)), "bridge"))
    assert "model.recompute_granularity=selective" in bridge and "model.recompute_modules=[layernorm]" in bridge


def test_mla_models_ask_for_the_up_projections_they_are_planned_with() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 256)
    plan = make_plan(n_devices=256, global_batch_seqs=1024, tp=1, pp=16, ep=16, recompute="selective",
                     micro_batch=1, zero_stage=1)
    job = TrainingJob(seq_len=4096, global_batch_tokens=1024 * 4096)
    mega = _argv(emit_launch(plan, DSV3, c, job, "megatron"))
    assert "--recompute-modules core_attn mla_up_proj " in mega
    bridge = _argv(emit_launch(plan, DSV3, c, job, "bridge"))
    assert "model.recompute_modules=[core_attn,mla_up_proj]" in bridge


# -- front ends -----------------------------------------------------------------------------------------------------
def test_cli_runs_and_refuses_naming_the_flag() -> None:
    ok = run("train", "estimate", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--tp", "1",
             "--recompute", "selective", "--recompute-modules", "core_attn,mlp", "--emit", "megatron")
    assert ok.exit_code == 0, ok.output
    assert "--recompute-modules core_attn mlp" in ok.output
    estimate = ("train", "estimate", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--tp", "1")
    for extra, words in ((["--recompute-modules", "zz"], "unknown module"),
                         (["--recompute", "full", "--recompute-modules", "mlp"], "--recompute selective"),
                         (["--recompute-modules", "moe"], "MoE layer")):
        assert_user_error(run(*estimate, *extra), "--recompute-modules", words)
    assert_user_error(run("train", "search", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--recompute",
                          "full", "--recompute-modules", "mlp"), "--recompute-modules", "does not search it")
    mem = run("memory", "train", "--model", "qwen3-30b-a3b", "--seq", "4096", "--ep", "8", "--dp", "8",
              "--recompute-modules", "moe", "--json")
    assert mem.exit_code == 0, mem.output
    assert '"recompute_modules": [' in mem.output and '"moe"' in mem.output
    assert_user_error(run("memory", "train", "--model", "llama3-8b", "--recompute-modules", "mla_up_proj"),
                      "--recompute-modules", "multi-latent")


def test_api_names_the_field(api_client) -> None:  # noqa: ANN001
    body = {"model": "llama3-8b", "hw": "H100", "devices": 8, "tp": 1, "recompute": "selective"}
    ok = api_client.post("/api/v1/train/estimate", json=body | {"recompute_modules": "layernorm,mlp"})
    assert ok.status_code == 200, ok.text
    bad = api_client.post("/api/v1/train/estimate", json=body | {"recompute_modules": "moe"})
    assert bad.status_code == 422 and bad.json()["field"] == "recompute_modules", bad.text


def test_validation_rows_carry_their_modules(tmp_path) -> None:  # noqa: ANN001
    from xpuplan.validate.train_predictor import predict_estimate

    common = "train,test,B,qwen3-30b-a3b,nvidia-h100-sxm-80gb,16,bf16,tokens_per_s_per_device,5000,4096,4194304,1,1,1,16,1,16,1"
    rows = train_rows(tmp_path, "recompute_modules", common,
                      [("", "layernorm;moe_act"), ("selective", ""), ("full", "moe"), ("", "attention")])
    named, _ = predict_estimate(rows[0])
    default, _ = predict_estimate(rows[1])
    assert named.plan.recompute == "selective" and default.plan.recompute == "selective"
    assert named.memory.activations_bytes < default.memory.activations_bytes
    for row in rows[2:]:
        with pytest.raises(UserInputError) as exc:
            predict_estimate(row)
        assert exc.value.field == "recompute_modules"
