"""The training predictor of ``xpuplan validate``: rows -> model, plan, prediction or a reason."""

from __future__ import annotations

import pytest

from xpuplan.errors import UserInputError
from xpuplan.validate.core import predict_row
from xpuplan.validate.rows import ValidationRow, model_from_row
from xpuplan.validate.train_predictor import conventional_layout, predict, row_method, source_year
from xpuplan.workload.vocabulary import LORA_TARGETS


def row(**cols: str) -> ValidationRow:
    raw = {"id": "T-1", "kind": "train", "source": "Test 2024", "trust": "A", "hardware": "nvidia-a100-sxm-80gb",
           "n_devices": "8", "precision": "bf16", "metric": "tokens_per_s_per_device", "value": "1000"}
    raw.update(cols)
    return ValidationRow(id=raw["id"], kind=raw["kind"], metric=raw["metric"], value=float(raw["value"]),
                         trust=raw["trust"], source=raw["source"], hardware=raw["hardware"],
                         n_devices=int(raw["n_devices"]), precision=raw["precision"], raw=raw)


GPT = dict(layers="24", d_model="2048", heads="16", kv_heads="16", ffn="8192", vocab="50000", gated_mlp="0",
           seq_len="2048", global_batch_tokens="262144", tp="1", pp="1", zero_stage="1", recompute="none")


def test_model_from_architecture_columns():
    m = model_from_row(row(**GPT))
    assert (m.n_layers, m.d_model, m.mlp, m.norm, m.tied_embeddings) == (24, 2048, "classic", "layernorm", True)
    assert model_from_row(row(model="llama2-7b")).id == "llama2-7b"


def test_all_moe_model_needs_no_dense_ffn_width():
    cols = dict(GPT, gated_mlp="1", moe_experts="64", moe_top_k="8", moe_ffn="1024")
    cols.pop("ffn")
    m = model_from_row(row(**cols))
    assert m.moe is not None and m.n_moe_layers == m.n_layers
    # with leading dense layers the dense width is needed
    with pytest.raises(UserInputError, match="ffn"):
        model_from_row(row(**dict(cols, moe_dense_layers="1")))


def test_framework_column_selects_the_training_stack():
    p = predict(row(**dict(GPT, tp="2", framework="Megatron-LM", source="Test 2024")))
    assert p.details["inferred"]["stack"] == "megatron-core" and p.details["inferred"]["sp"] is True
    p = predict(row(**dict(GPT, tp="2", framework="Megatron-LM", source="Narayanan et al. 2021")))
    assert p.details["inferred"]["stack"] == "megatron-lm-legacy" and p.details["inferred"]["sp"] is False
    p = predict(row(**GPT))
    assert p.details["inferred"]["stack"].endswith("(default)")


def test_prediction_with_inferred_fields():
    p = predict(row(**GPT))
    assert p.value is not None and p.value > 0
    assert p.details["inferred"]["dp"] == "n/(tp·pp·cp)" and "micro_batch" in p.details["inferred"]
    assert p.details["plan"].startswith("tp1-pp1-vpp1-dp8")
    assert "conventional" not in p.details  # the row gives its layout


def test_each_metric_is_predicted():
    for metric in ("step_time_s", "mfu", "model_tflops_per_device", "hw_tflops_per_device"):
        assert predict(row(metric=metric, **GPT)).value > 0
    dh = predict(row(metric="device_hours", train_tokens="1e9", **GPT))
    assert dh.value > 0


def test_rows_that_cannot_be_predicted_say_why():
    assert "no architecture" in predict_row(row(params_b="34", seq_len="2048")).reason
    assert "train_tokens" in predict_row(row(metric="device_hours", **GPT)).reason
    assert "not a training metric" in predict_row(row(metric="ttft_ms", **GPT)).reason
    with pytest.raises(UserInputError, match="not a training metric"):
        predict(row(metric="ttft_ms", **GPT))  # the predictor raises; the harness keeps the reason


def test_first_cause_is_reported():
    # a blank seq_len and an unmodelled precision: the missing length is named, not the precision
    r = predict_row(row(**{**GPT, "seq_len": "", "precision": "int4"}))
    assert "seq_len" in r.reason and "precision" not in r.reason
    assert "precision 'int4'" in predict_row(row(**{**GPT, "precision": "int4"})).reason


def test_old_sources_use_unfused_attention():
    assert source_year(row(source="Narayanan et al. 2021 (SC21)")) == 2021
    old = predict(row(source="Someone 2021", **GPT))
    new = predict(row(source="Someone 2024", **GPT))
    assert old.details["inferred"].get("flash_attention") is False
    assert old.value < new.value


def test_missing_layout_predicts_the_conventional_layout_and_reports_the_best_plan():
    r = row(model="llama2-7b", seq_len="4096", n_devices="16", global_batch_tokens="1048576")
    p = predict(r)
    assert conventional_layout(r) == (8, 1)
    assert p.value is not None and p.details["inferred"]["plan"].startswith("conventional: tp8-pp1")
    assert p.details["plan"].startswith("tp8-pp1-")
    assert "conventional layout" in p.details["layout"] and "upper bound" in p.details["layout"]
    best = p.details["best_plan"]
    assert best["predicted"] > 0 and best["error"] == pytest.approx(best["predicted"] / 1000 - 1)
    # the searched plan is the planner's best: the conventional layout is not faster
    assert p.value <= best["predicted"] * (1 + 1e-9)
    # the conventional prediction is the prediction of a row that states tp8-pp1
    stated = predict(row(model="llama2-7b", seq_len="4096", n_devices="16", global_batch_tokens="1048576",
                         tp="8", pp="1"))
    assert p.value == pytest.approx(stated.value) and "best_plan" not in stated.details


def test_conventional_layout_deepens_the_pipeline_until_it_fits():
    # without sequence parallelism (a 2021 Megatron-LM run) 70B at 8k context does not fit on one TP8 stage
    # of 80 GiB devices (at 4k it does since H100 capacity is 80 GiB, not 80 GB)
    tp, pp = conventional_layout(row(model="llama2-70b", seq_len="8192", n_devices="64", sp="0",
                                     global_batch_tokens="4194304", zero_stage="1", recompute="selective"))
    assert tp == 8 and pp > 1


def test_vpp_candidates_follow_the_stack_schedule():
    from xpuplan.catalog.stacks import training_stack
    from xpuplan.validate.train_predictor import inferred_vpp_candidates

    core, legacy = training_stack("megatron-core"), training_stack("megatron-lm-legacy")
    assert core.interleaved_pipeline and not legacy.interleaved_pipeline
    assert inferred_vpp_candidates(32, 4, core) == [1, 2, 4, 8]  # divisors of 32/4, at most MAX_VPP
    assert inferred_vpp_candidates(32, 1, core) == [1]  # no pipeline
    assert inferred_vpp_candidates(32, 4, legacy) == [1]  # plain 1F1B stack
    assert inferred_vpp_candidates(32, 4, core, known=False) == [1]  # unrecognised framework: no assumption
    # uneven stages: a layer per virtual stage, or the embedding's / the loss's slot (30 + 2 = 4 x 8)
    assert inferred_vpp_candidates(30, 4, core) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_blank_vpp_is_inferred_for_an_interleaving_stack_only():
    cols = dict(GPT, tp="2", pp="4", global_batch_tokens=str(64 * 2048), micro_batch="1")
    core = predict(row(**dict(cols, framework="Megatron-Core")))
    legacy = predict(row(**dict(cols, framework="Megatron-LM", source="Narayanan et al. 2021")))
    given = predict(row(**dict(cols, framework="Megatron-Core", vpp="1")))
    assert "vpp" in core.details["inferred"] and "vpp1" not in core.details["plan"]
    assert core.value > given.value  # the fastest valid vpp beats plain 1F1B (smaller bubble)
    assert "vpp" not in legacy.details["inferred"] and "-vpp1-" in legacy.details["plan"]
    assert "vpp" not in given.details["inferred"] and "-vpp1-" in given.details["plan"]


def test_blank_recomputation_is_the_faster_valid_of_selective_and_full():
    """OPT-175B-like: FSDP with TP8 on ~1,000 A100; selective recomputation fits only micro-batch 1, so
    every micro-batch re-gathers the weights; full recomputation fits a large micro-batch and wins."""
    cols = dict(model="opt-175b", n_devices="992", precision="fp16", seq_len="2048", global_batch_tokens="2031616",
                tp="8", pp="1", zero_stage="3")
    p = predict(row(**cols))
    assert p.details["inferred"]["recompute"] == "full"
    sel = predict(row(**dict(cols, recompute="selective")))
    full = predict(row(**dict(cols, recompute="full")))
    assert p.value == pytest.approx(full.value) and full.value > sel.value
    # a printed recomputation is kept
    assert "recompute" not in sel.details["inferred"]


def test_the_row_stack_comes_from_the_assumptions():
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.validate.train_predictor import row_stack

    r = row(**dict(GPT, framework="Megatron-Core 0.9"))
    a = default_assumptions().with_overrides({"training_stacks": {"megatron-core": {"tp_comm_overlap": True}}})
    built_in, known = row_stack(r)
    mine, _ = row_stack(r, a)
    assert known and built_in.id == mine.id == "megatron-core"
    assert mine.tp_comm_overlap and not built_in.tp_comm_overlap


def test_compiled_pytorch_runs_use_fused_kernels():
    from xpuplan.validate.train_predictor import framework_kernels

    fsdp = dict(GPT, framework="torchtitan (PyTorch FSDP2, torch.compile)")
    assert framework_kernels(row(**fsdp, printed="1,000 TPS/GPU (FSDP + torch.compile)")) == "fused"
    # the printed figure saying eager wins over the framework column's general note
    assert framework_kernels(row(**fsdp, printed="1,000 TPS/GPU (FSDP, eager, BF16)")) == "eager"
    assert framework_kernels(row(**dict(GPT, framework="FSDP"))) == "eager"
    assert framework_kernels(row(**dict(GPT, framework="Megatron-LM"))) == "fused"
    p = predict(row(**dict(fsdp, zero_stage="3"), printed="x (torch.compile)"))
    assert "kernels" not in p.details["inferred"]


def test_power_cap_column_slows_the_prediction_and_is_checked():
    fast = predict(row(**GPT, hardware="nvidia-h100-sxm-80gb"))
    slow = predict(row(**GPT, hardware="nvidia-h100-sxm-80gb", power_cap_w="500"))
    assert slow.value < fast.value
    r = predict_row(row(**GPT, hardware="nvidia-h100-sxm-80gb", power_cap_w="-1"))
    assert r.value is None and "power_cap_w" in (r.reason or "")


def test_maxtext_remat_policy_offloading_the_layer_input_is_recompute_offload():
    from xpuplan.catalog.stacks import training_stack
    from xpuplan.validate.train_predictor import maxtext_remat

    maxtext, megatron = training_stack("maxtext"), training_stack("megatron-core")
    base = dict(GPT, framework="MaxText (JAX)", hardware="google-tpu-v6e", recompute="selective", zero_stage="3")
    offloaded = "synthetic data; remat policy custom: decoder_layer_input, q/k/v proj offloaded to host; flash"
    assert maxtext_remat(row(**base, notes=offloaded), maxtext) == "offload"
    # a custom policy keeping the layer input on the device says nothing about what else it keeps
    assert maxtext_remat(row(**base, notes="remat custom: context and mlpwo offloaded to host"), maxtext) is None
    assert maxtext_remat(row(**base, notes="remat_policy full"), maxtext) is None
    # a column that says more than "selective" stands, and other stacks never read MaxText policies
    assert maxtext_remat(row(**dict(base, recompute="full"), notes=offloaded), maxtext) is None
    assert maxtext_remat(row(**base, notes=offloaded), megatron) is None
    p = predict(row(**base, notes=offloaded))
    assert "-roff-" in p.details["plan"] and p.details["inferred"]["recompute"].startswith("offload")
    sel = predict(row(**base, notes="remat policy minimal"))
    assert "-rsel-" in sel.details["plan"] and sel.value > p.value  # the backward re-runs the forward


@pytest.mark.parametrize("policy", ["qkv_proj_offloaded", "save_qkv_proj", "save_out_proj"])
def test_maxtext_policies_keeping_only_attention_projections_are_full_recomputation(policy):
    """MaxText's qkv_proj_offloaded / save_qkv_proj / save_out_proj keep (or offload) only the attention's
    projections and rematerialise every other tensor of the layer: read as full recomputation, not as the
    attention-only recomputation the column's 'selective' would mean."""
    from xpuplan.catalog.stacks import training_stack
    from xpuplan.validate.train_predictor import maxtext_remat

    base = dict(GPT, framework="MaxText (JAX)", hardware="google-tpu-v6e", recompute="selective", zero_stage="3")
    notes = f"synthetic data; remat policy {policy}; flash attention"
    assert maxtext_remat(row(**base, notes=notes), training_stack("maxtext")) == "full"
    assert maxtext_remat(row(**base, notes="remat policy save_qkv_projection_x"), training_stack("maxtext")) is None
    p = predict(row(**base, notes=notes))
    assert "-rfull-" in p.details["plan"] and p.details["inferred"]["recompute"].startswith("full")
    sel = predict(row(**base, notes="remat policy minimal"))
    assert sel.value > p.value


def test_recompute_column_accepts_offload():
    p = predict(row(**dict(GPT, recompute="offload")))
    full = predict(row(**dict(GPT, recompute="full")))
    assert "-roff-" in p.details["plan"] and p.value == pytest.approx(full.value, rel=0.05)


def test_scale_out_column_sets_the_rows_network():
    multi_node = dict(GPT, n_devices="64", hardware="nvidia-h100-sxm-80gb", zero_stage="3",
                      global_batch_tokens=str(64 * 2048 * 4))
    fast = predict(row(**multi_node))
    slow = predict(row(**multi_node, scale_out_gbit_per_s="25"))
    assert slow.value < fast.value and "25 Gbit/s" in slow.details["inferred"]["scale_out"]
    r = predict_row(row(**multi_node, scale_out_gbit_per_s="0"))
    assert r.value is None and "scale_out_gbit_per_s" in (r.reason or "")


def test_scale_out_column_is_checked_when_read(tmp_path):
    from xpuplan.validate.rows import read_rows

    f = tmp_path / "rows.csv"
    f.write_text("id,kind,source,trust,model,hardware,n_devices,precision,metric,value,scale_out_gbit_per_s\n"
                 "T-1,train,Test 2024,B,llama3-8b,nvidia-h100-sxm-80gb,8,bf16,tokens_per_s_per_device,1000,fast\n",
                 encoding="utf-8")
    with pytest.raises(UserInputError) as exc:
        read_rows(f)
    assert exc.value.field == "scale_out_gbit_per_s" and exc.value.line == 2


def test_torchtitan_rows_without_micro_batch_split_each_rank_batch_into_pp_micro_batches():
    # torchtitan: pipeline_parallel_microbatches defaults to the pipeline degree (config_manager.py)
    cols = dict(GPT, tp="1", pp="4", zero_stage="3", global_batch_tokens=str(64 * 2048))  # 32 seqs per replica
    p = predict(row(**dict(cols, framework="torchtitan (FSDP2)")))
    assert p.details["plan"].endswith("-mb8-ga4-bf16")
    assert "pp micro-batches" in str(p.details["inferred"]["micro_batch"])
    # a stack without that default keeps the fastest valid micro-batch
    q = predict(row(**dict(cols, framework="Megatron-LM", source="Test 2024")))
    assert isinstance(q.details["inferred"]["micro_batch"], int)
    # a stated micro-batch wins
    r = predict(row(**dict(cols, framework="torchtitan (FSDP2)", micro_batch="2")))
    assert "-mb2-" in r.details["plan"] and "micro_batch" not in r.details["inferred"]


MOE = dict(GPT, gated_mlp="1", moe_experts="64", moe_top_k="8", moe_ffn="1024", n_devices="16", ep="16",
           hardware="nvidia-h100-sxm-80gb", framework="Megatron-LM", source="Test 2025")


def test_stack_options_column_sets_what_the_run_s_recipe_sets():
    """A row's ``stack_options`` (key=value;...) changes the stack profile for that row only: the recipe's 1F1B
    all-to-all overlap hides the MoE exchange (less its SMs' share), so the run is predicted faster."""
    plain = predict(row(**MOE))
    overlapped = predict(row(**dict(MOE, stack_options="ep_overlap=1; fp8_attention=true")))
    assert overlapped.value > plain.value
    assert overlapped.details["inferred"]["stack_options"] == "ep_overlap=1; fp8_attention=true"
    assert "stack_options" not in plain.details["inferred"]


@pytest.mark.parametrize("text, message", [
    ("bogus=1", "'bogus' is not a training-stack property"),
    ("ep_overlap=2", "ep_overlap"),
    ("ep_overlap", "key=value"),
    ("name=mine", "'name' is not a training-stack property"),
    ("moe_host_sync=perhaps", "moe_host_sync"),
])
def test_bad_stack_options_name_the_column(text: str, message: str):
    p = predict_row(row(**dict(MOE, stack_options=text)))
    assert p.value is None and "stack_options" in (p.reason or "") and message in (p.reason or "")


def test_fine_tuning_columns_set_the_job():
    llama = dict(model="llama3-70b", hardware="nvidia-h100-sxm-80gb", n_devices="8", seq_len="4096",
                 global_batch_tokens=str(32 * 4096), tp="2", pp="4", micro_batch="1", value="2643")
    full = predict(row(**llama))
    lora = predict(row(**llama, method="lora", lora_rank="16", lora_targets="q;k;v"))
    every = predict(row(**llama, method="LoRA"))
    assert lora.value > every.value > full.value  # no weight gradients; fewer adapters, less traffic
    assert lora.details["inferred"]["method"] == "lora, rank 16, adapting q+k+v"
    assert "default" in every.details["inferred"]["method"]
    for cols, field in ((dict(method="dora"), "method"), (dict(lora_rank="8"), "lora_rank"),
                        (dict(method="lora", lora_targets="q;qkv"), "lora_targets"),
                        (dict(lora_targets="q"), "lora_targets")):
        with pytest.raises(UserInputError) as exc:
            predict(row(**llama, **cols))
        assert exc.value.field == field


def test_a_row_whose_text_names_lora_is_read_as_lora():
    llama = dict(model="llama3-70b", hardware="nvidia-h100-sxm-80gb", n_devices="8", seq_len="4096",
                 global_batch_tokens=str(32 * 4096), tp="2", pp="4", micro_batch="1", value="2643")
    assert row_method(row(**llama))[0] == "full"
    assert row_method(row(**llama, notes="MLA with kv_lora_rank 512; head dim 128"))[0] == "full"
    assert row_method(row(**llama, source="Megatron-Bridge 26.06 LoRA Performance table")) == ("lora", 16, LORA_TARGETS)
    assert row_method(row(**llama, notes="QLoRA, rank 64, all-linear")) == ("qlora", 64, LORA_TARGETS)
    assert row_method(row(**llama, notes="LoRA dim=32 on linear_qkv; head dim 128")) == ("lora", 32, ("q", "k", "v"))
    assert row_method(row(**llama, notes="LoRA on q_proj and v_proj", lora_rank="8")) == ("lora", 8, ("q", "v"))
    # the column wins over the text
    assert row_method(row(**llama, notes="compared with LoRA", method="full"))[0] == "full"
    said = predict(row(**llama, notes="LoRA rank 16 on linear_qkv"))
    assert said.details["inferred"]["method"] == "lora (the row's text says so), rank 16, adapting q+k+v"


def test_lora_in_a_benchmark_id_but_not_in_mla_fields():
    llama = dict(model="llama3-70b", hardware="nvidia-h100-sxm-80gb", n_devices="8", seq_len="4096",
                 global_batch_tokens=str(32 * 4096), tp="2", pp="4", micro_batch="1", value="2643")
    assert row_method(row(**llama, source="MLPerf Training v5.0, llama2_70b_lora"))[0] == "lora"
    assert row_method(row(**llama, notes="q_lora_rank 1536, kv_lora_rank 512 (MLA)"))[0] == "full"


def test_recompute_layers_column_reads_as_partial():
    llama = dict(model="llama3-70b", hardware="nvidia-h100-sxm-80gb", n_devices="32", seq_len="16384",
                 global_batch_tokens="4194304", tp="8", pp="4", micro_batch="1", value="800", framework="Megatron-Core")
    five = predict(row(**llama, recompute_layers="5"))
    assert "-rpart-" in five.details["plan"]
    for cols in (dict(recompute_layers="0"), dict(recompute_layers="5", recompute="full")):
        with pytest.raises(UserInputError) as exc:
            predict(row(**llama, **cols))
        assert exc.value.field == "recompute_layers"
