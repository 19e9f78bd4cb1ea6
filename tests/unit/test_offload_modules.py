"""Fine-grained activation offloading (Megatron-Core ``--offload-modules``): which inputs each module moves to host
memory, what that frees on the device and costs on the host link, the checks against the model, the stack and the
recompute mode, and the launch arguments that name the modules."""

from __future__ import annotations

import pytest

from tests.unit.clicheck import assert_user_error, run
from tests.unit.trainrows import train_rows
from xpuplan.catalog.stacks import training_stack
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.memory import activation_bytes_per_layer, training_memory
from xpuplan.train import Cluster, emit_launch, estimate, make_plan
from xpuplan.train.search import SearchSpace, search_plans
from xpuplan.workload.training import TrainingJob, offload_module_list

pytestmark = pytest.mark.usefixtures("no_calibration")

LLAMA = get_model("llama3-8b")
QWEN = get_model("qwen3-235b-a22b")  # every layer MoE, top-8, hidden 4096, expert width 1536
S = 4096


def _layer(model, mods=None, where="device", **kw) -> float:  # noqa: ANN001
    base = dict(tp=4, sp=True, recompute="none", expert_tp=1)
    return activation_bytes_per_layer(model, S, 1, **{**base, **kw}, offload_modules=mods, where=where)


# -- what each module moves -----------------------------------------------------------------------------------------
def test_device_and_host_split_what_the_layer_keeps() -> None:
    kept = _layer(QWEN)
    for mods in (("expert_fc1",), ("moe_act",), ("attn_norm", "mlp_norm"), ("qkv_linear",), ("core_attn", "attn_proj")):
        dev, host = _layer(QWEN, mods), _layer(QWEN, mods, "host")
        assert host > 0 and dev + host == pytest.approx(kept), mods
    assert _layer(QWEN, where="host") == 0.0  # nothing offloaded without modules


def test_module_sizes() -> None:
    k, h, w = QWEN.moe.top_k, QWEN.d_model, QWEN.moe.expert_ffn_dim
    # the dispatched copies of the rank's sequence shard (folded experts), bf16
    assert _layer(QWEN, ("expert_fc1",), "host") == pytest.approx(S * k * h * 2 / 4)
    # the routed experts' activation input: gate and up outputs, bf16
    assert _layer(QWEN, ("moe_act",), "host") == pytest.approx(S * k * w * 2 * 2 / 4)
    # each pre-norm's input: the residual stream, split by SP
    assert _layer(LLAMA, ("attn_norm",), "host") == pytest.approx(S * LLAMA.d_model * 2 / 4)
    assert _layer(LLAMA, ("attn_norm", "mlp_norm"), "host") == pytest.approx(2 * S * LLAMA.d_model * 2 / 4)
    # the attention output, and with FP8 linear inputs also the projection's own FP8 copy
    o = S * LLAMA.n_heads * LLAMA.v_head_dim / 4
    assert _layer(LLAMA, ("core_attn", "attn_proj"), "host") - _layer(LLAMA, ("core_attn",), "host") == pytest.approx(2 * o)
    fp8 = dict(linear_input_bytes=1.0)
    assert (_layer(LLAMA, ("core_attn", "attn_proj"), "host", **fp8) - _layer(LLAMA, ("core_attn",), "host", **fp8)
            == pytest.approx(3 * o))


def test_recomputed_modules_leave_nothing_to_offload() -> None:
    sel = dict(recompute="selective")
    # layernorm recomputation does not keep the norm output that feeds QKV
    assert _layer(LLAMA, ("qkv_linear",), "host", **sel, recompute_modules=("layernorm",)) == 0.0
    assert _layer(LLAMA, ("qkv_linear",), "host", **sel) > 0.0
    # 'moe' re-runs the whole MoE block: its copies and activation inputs are not kept
    assert _layer(QWEN, ("expert_fc1", "moe_act"), "host", **sel, recompute_modules=("moe",)) == 0.0
    # a fully recomputed layer keeps only its input
    assert _layer(QWEN, ("expert_fc1",), "host", recompute="full") == 0.0
    assert _layer(QWEN, ("expert_fc1",), recompute="full") == _layer(QWEN, recompute="full")


def test_training_memory_moves_the_in_flight_layers_to_the_host() -> None:
    kw = dict(seq_len=S, tp=4, pp=8, dp=8, ep=8, vpp=4, zero_stage=1, recompute="none", whole_experts=True,
              n_microbatches=64)
    plain = training_memory(QWEN, **kw)
    off = training_memory(QWEN, **kw, offload_modules=("expert_fc1", "moe_act"))
    per_layer_host = _layer(QWEN, ("expert_fc1", "moe_act"), "host")
    assert plain.host_activations == 0.0
    assert off.activations < plain.activations
    # the host holds the modules' inputs of every layer-micro-batch in flight, the device two layers' in transit
    in_flight = off.host_activations / per_layer_host
    assert in_flight > 8
    assert off.activations == pytest.approx(plain.activations - (in_flight - 2) * per_layer_host)


# -- time -----------------------------------------------------------------------------------------------------------
def _estimate(device: str, mods, n: int = 256, **plan_kw):  # noqa: ANN001, ANN202
    c = Cluster.from_catalog(device, n)
    job = TrainingJob(seq_len=S, global_batch_tokens=1024 * S, offload_modules=mods)
    plan = make_plan(n_devices=n, global_batch_seqs=1024, model=QWEN, uneven_pipeline=True,
                     **{**dict(tp=1, pp=4, vpp=6, ep=64, zero_stage=1, recompute="none", micro_batch=1), **plan_kw})
    return estimate(QWEN, c, plan, job, stack=training_stack("megatron-core"), uneven_pipeline=True)


def test_copies_hide_under_compute_on_a_fast_host_link_and_not_on_pcie() -> None:
    mods = ("expert_fc1", "moe_act")
    gb = _estimate("nvidia-gb200-186gb", mods)
    h100 = _estimate("nvidia-h100-sxm-80gb", mods, tp=4, ep=8)
    assert gb.step.offload_s == 0.0  # NVLink-C2C: hidden under the layers' compute
    assert h100.step.offload_s > 0.0  # PCIe shared by two GPUs: exposed
    assert h100.step_time_s > _estimate("nvidia-h100-sxm-80gb", None, tp=4, ep=8).step_time_s
    assert gb.to_dict()["plan"]["offload_modules"] == ["expert_fc1", "moe_act"]
    assert any("--offload-modules expert_fc1 moe_act" in n for n in gb.notes)
    assert gb.memory.host_offload_bytes > 0
    assert gb.memory.total_bytes < _estimate("nvidia-gb200-186gb", None).memory.total_bytes


# -- checks ---------------------------------------------------------------------------------------------------------
def test_parser_names_the_field() -> None:
    assert offload_module_list("moe_act, expert_fc1", "x") == ("moe_act", "expert_fc1")
    assert offload_module_list(None, "x") is None
    for bad in ("moe", "expert_fc1,expert_fc1", " , "):
        with pytest.raises(UserInputError) as exc:
            offload_module_list(bad, "--offload-modules")
        assert exc.value.field == "--offload-modules"
    with pytest.raises(ValueError, match="twice"):
        TrainingJob(offload_modules=("moe_act", "moe_act"))


@pytest.mark.parametrize(("model", "mods", "stack", "job_kw", "words"), [
    (LLAMA, ("expert_fc1",), "megatron-core", {}, "has none"),
    (LLAMA, ("attn_proj",), "megatron-core", {}, "core_attn"),
    (LLAMA, ("core_attn",), "torchtitan", {}, "no fine-grained"),
    (QWEN, ("moe_act",), "megatron-core", {"recompute_modules": ("moe",)}, "whole MoE block"),
])
def test_model_stack_and_module_checks(model, mods, stack, job_kw, words) -> None:  # noqa: ANN001
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 256)
    job = TrainingJob(seq_len=S, global_batch_tokens=1024 * S, offload_modules=mods, **job_kw)
    with pytest.raises(UserInputError) as exc:
        search_plans(model, c, job, stack=training_stack(stack))
    assert exc.value.field == "offload_modules" and words in str(exc.value)


def test_recompute_modes_that_keep_no_module_inputs_are_refused_and_not_searched() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    job = TrainingJob(seq_len=S, global_batch_tokens=64 * S, offload_modules=("attn_norm",))
    plan = make_plan(n_devices=8, global_batch_seqs=64, tp=1, recompute="full", micro_batch=1)
    with pytest.raises(UserInputError) as exc:
        estimate(LLAMA, c, plan, job)
    assert exc.value.field == "offload_modules"
    with pytest.raises(UserInputError) as exc:
        search_plans(LLAMA, c, job, space=SearchSpace(recompute=("full",)))
    assert exc.value.field == "offload_modules"
    res = search_plans(LLAMA, c, job, space=SearchSpace(tp=(1,), pp=(1,)), top=50)
    assert res.top and all(e.plan.recompute not in ("full", "offload", "layer_offload") for e in res.top)


# -- launch arguments -----------------------------------------------------------------------------------------------
def test_launch_arguments_name_the_modules() -> None:
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    plan = make_plan(n_devices=8, global_batch_seqs=64, tp=1, recompute="none", micro_batch=1)
    job = TrainingJob(seq_len=S, global_batch_tokens=64 * S, offload_modules=("mlp_norm", "attn_norm"))

    def argv(fw: str) -> str:
        return " ".join(" ".join(cmd.argv) for cmd in emit_launch(plan, LLAMA, c, job, fw).commands)

    assert "--fine-grained-activation-offloading --offload-modules attn_norm mlp_norm" in argv("megatron")
    bridge = argv("bridge")
    assert "model.fine_grained_activation_offloading=true" in bridge
    assert "model.offload_modules=[attn_norm,mlp_norm]" in bridge
    plain = TrainingJob(seq_len=S, global_batch_tokens=64 * S)
    assert "offload-modules" not in " ".join(" ".join(x.argv) for x in emit_launch(plan, LLAMA, c, plain, "megatron")
                                              .commands)


# -- front ends -----------------------------------------------------------------------------------------------------
def test_cli_refuses_bad_modules_naming_the_flag() -> None:
    base = ("train", "estimate", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--tp", "1")
    assert_user_error(run(*base, "--offload-modules", "moe"), "--offload-modules", "unknown module")
    assert_user_error(run(*base, "--offload-modules", "expert_fc1"), "--offload-modules", "has none")
    assert_user_error(run(*base, "--recompute", "full", "--offload-modules", "attn_norm"), "--offload-modules")
    assert_user_error(run("memory", "train", "--model", "llama3-8b", "--seq", "4096", "--offload-modules",
                          "attn_proj"), "--offload-modules", "core_attn")
    ok = run(*base, "--offload-modules", "attn_norm,mlp_norm", "--json")
    assert ok.exit_code == 0, ok.output
    mem = run("memory", "train", "--model", "llama3-8b", "--seq", "4096", "--offload-modules", "mlp_norm,attn_norm")
    assert mem.exit_code == 0 and "attn_norm, mlp_norm" in mem.output and "host activations" in mem.output, mem.output


def test_memory_train_suggests_offloading_the_experts_inputs_when_a_moe_layout_does_not_fit() -> None:
    moe = run("memory", "train", "--model", "qwen3-235b-a22b", "--hw", "H100", "--seq", "4096", "--tp", "2", "--pp", "4",
              "--ep", "8", "--dp", "4", "--recompute", "none", "--uneven-pipeline")
    assert moe.exit_code == 3 and "--offload-modules expert_fc1,moe_act" in moe.output, moe.output
    dense = run("memory", "train", "--model", "llama3-70b", "--hw", "H100", "--seq", "8192", "--recompute", "none")
    assert dense.exit_code == 3 and "--offload-modules" not in dense.output, dense.output
    titan = run("memory", "train", "--model", "qwen3-235b-a22b", "--hw", "H100", "--seq", "4096", "--tp", "2", "--pp",
                "4", "--ep", "8", "--dp", "4", "--recompute", "none", "--uneven-pipeline", "--stack", "torchtitan")
    assert titan.exit_code == 3 and "--offload-modules" not in titan.output, titan.output


def test_api_names_the_field(api_client) -> None:  # noqa: ANN001
    body = {"model": "llama3-8b", "hw": "H100", "devices": 8, "tp": 1}
    ok = api_client.post("/api/v1/train/estimate", json=body | {"offload_modules": "attn_norm"})
    assert ok.status_code == 200, ok.text
    assert ok.json()["plan"]["offload_modules"] == ["attn_norm"]
    bad = api_client.post("/api/v1/train/estimate", json=body | {"offload_modules": "expert_fc1"})
    assert bad.status_code == 422 and bad.json()["field"] == "offload_modules", bad.text


def test_validation_rows_carry_their_offloaded_modules(tmp_path) -> None:  # noqa: ANN001
    from xpuplan.validate.train_predictor import predict_estimate

    common = "train,test,B,llama3-8b,nvidia-h100-sxm-80gb,8,bf16,tokens_per_s_per_device,5000,4096,262144,1,1,1,8,1,,1"
    rows = {r.id: r for r in train_rows(tmp_path, "offload_modules", common,
                                        [("none", "attn_norm;mlp_norm"), ("none", "moe_act")])}
    est, _ = predict_estimate(rows["R1"])
    assert est.offload_modules == ("attn_norm", "mlp_norm") and est.memory.host_offload_bytes > 0
    with pytest.raises(UserInputError) as exc:
        predict_estimate(rows["R2"])
    assert exc.value.field == "offload_modules"
