"""The pure parts of benchmarks/mlsysim_compare.py: a row's mapping to mlsysim's inputs, the conversion of a
throughput to the row's metric, the statistics and the doc block. mlsysim is not needed (nor installed in CI):
no mlsysim code runs here, only the inputs this script would hand it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.benchmod import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mc():
    return load_benchmark("mlsysim_compare")


@pytest.fixture()
def dense(mc):
    return mc.ModelFacts(params=70e9, active_params=70e9, layers=80, d_model=8192, heads=64, kv_heads=8,
                         experts=None, top_k=None, model_flops_per_token=4.6e11,
                         hw_flops_per_token={"none": 4.6e11, "selective": 4.8e11, "full": 6.1e11})


def _device(mc, dev_id="nvidia-h100-sxm-80gb", kind="GPU", domain=8):
    return mc.DeviceFacts(id=dev_id, kind=kind, launch_year=2023,
                          peak_flops={"bf16": 989e12, "fp8": 1979e12, "int8": 1979e12}, memory_bytes=80 * 2**30,
                          memory_bw=3.35e12, scale_up_bw=450e9, scale_out_bw=50e9, domain=domain, tdp_w=700.0)


def _row(**cols):
    base = {"id": "R1", "metric": "tokens_per_s_per_device", "precision": "bf16", "n_devices": 64, "seq_len": 8192,
            "global_batch_tokens": 4194304.0, "tp": 4, "pp": 4, "dp": 4, "cp": 1, "micro_batch": 1,
            "zero_stage": 1, "recompute": "selective", "framework": "Megatron-LM"}
    base.update(cols)
    return base


def test_registry_device_maps_to_mlsysim_entry_and_others_are_built_from_catalog_figures(mc):
    assert mc.map_hardware(_device(mc)) == {"registry": "H100"}
    tpu = mc.map_hardware(_device(mc, "google-tpu-v5e", kind="TPU", domain=256))
    c = tpu["custom"]
    assert c["peak_flops"] == 989e12 and c["precision_flops"] == {"bf16": 989e12, "fp8": 1979e12}  # no int8
    assert c["link_bw"] == 450e9 and c["memory_bytes"] == 80 * 2**30
    assert c["dispatch_tax_ms"] == mc.TPU_DISPATCH_TAX_MS  # mlsysim's own TPU entries use 0.04 ms
    npu = mc.map_hardware(_device(mc, "huawei-ascend-910b", kind="NPU"))
    assert npu["custom"]["dispatch_tax_ms"] is None  # mlsysim's HardwareNode default
    reason = mc.map_hardware(_device(mc, "huawei-ascend-910b"), registry_only=True)
    assert isinstance(reason, str) and "registry" in reason
    # GB200 is a whole NVL72 rack in mlsysim, never one accelerator
    assert "nvidia-gb200-186gb" not in mc.MLSYSIM_REGISTRY


def test_pipelined_row_passes_micro_batches_as_microbatch_count(mc, dense):
    case = mc.map_row(_row(), dense, _device(mc), default_batch_tokens=4e6)
    assert isinstance(case, mc.Case)
    (cand,) = case.candidates
    kw = cand["kwargs"]
    # 512 sequences, dp 4 -> 128 per replica, micro-batch 1 -> 128 micro-batches
    assert kw["batch_size"] == 512 and kw["microbatch_count"] == 128 and kw["gradient_accumulation_steps"] == 1
    assert (kw["tp_size"], kw["pp_size"], kw["ep_size"], kw["v_stages"]) == (4, 4, 1, 1)
    assert kw["activation_recomputation"] is False and kw["overlap_comm"] is False
    assert "efficiency" not in kw  # mlsysim's own default unless given
    assert case.fleet == {"per_node": 8, "nodes": 8, "fabric_bw": 50e9, "intra_bw": 450e9}
    assert case.model["params"] == 70e9 and "experts" not in case.model
    assert case.global_tokens == 4194304


def test_unpipelined_row_passes_micro_batches_as_gradient_accumulation(mc, dense):
    row = _row(tp=1, pp=1, dp=64, micro_batch=2, recompute="full", zero_stage=3)
    kw = mc.map_row(row, dense, _device(mc), default_batch_tokens=4e6, efficiency=0.4,
                    overlap=True).candidates[0]["kwargs"]
    # 512 sequences over 64 replicas = 8 each; micro-batch 2 -> 4 accumulation steps (how mlsysim learns it)
    assert kw["gradient_accumulation_steps"] == 4 and kw["microbatch_count"] == 1
    assert kw["activation_recomputation"] is True and kw["zero_stage"] == 3
    assert kw["efficiency"] == 0.4 and kw["overlap_comm"] is True


def test_blank_fields_get_the_validators_inferences(mc, dense):
    row = _row(micro_batch=None, zero_stage=None, recompute=None, global_batch_tokens=None, dp=None,
               framework="torchtitan (PyTorch FSDP2)")
    case = mc.map_row(row, dense, _device(mc), default_batch_tokens=4e6)
    # default batch: round(4e6 / 8192 / 64) = 8 sequences per device -> 512 sequences
    assert case.global_tokens == 8 * 64 * 8192
    # per replica 512 / (64 / 16) = 128: divisors up to 32 are the candidates
    assert [c["micro_batch"] for c in case.candidates] == [1, 2, 4, 8, 16, 32]
    kw = case.candidates[0]["kwargs"]
    assert kw["zero_stage"] == 3 and kw["activation_recomputation"] is False  # FSDP -> 3; selective
    assert any("zero_stage 3" in n for n in case.notes) and any("global batch" in n for n in case.notes)
    row2 = _row(zero_stage=None)
    assert mc.map_row(row2, dense, _device(mc), default_batch_tokens=4e6).candidates[0]["kwargs"]["zero_stage"] == 1


@pytest.mark.parametrize(("cols", "reason"), [
    ({"cp": 2}, "context parallelism"),
    ({"tp": None, "pp": None}, "layout not printed"),
    ({"metric": "ttft_s"}, "metric"),
    ({"precision": "fp4"}, "precision"),
    ({"seq_len": None}, "seq_len"),
    ({"ep": 8, "tp": 4, "pp": 4}, "EP"),  # 4*4*8 = 128 > 64 devices
    ({"metric": "device_hours"}, "train_tokens"),
])
def test_rows_mlsysim_cannot_express_are_skipped_with_the_reason(mc, dense, cols, reason):
    out = mc.map_row(_row(**cols), dense, _device(mc), default_batch_tokens=4e6)
    assert isinstance(out, mc.Skip) and reason in out.reason and out.id == "R1"


def test_moe_model_and_odd_domains(mc):
    moe = mc.ModelFacts(params=47e9, active_params=13e9, layers=32, d_model=4096, heads=32, kv_heads=8, experts=8,
                        top_k=2, model_flops_per_token=1e11, hw_flops_per_token={"selective": 1e11})
    case = mc.map_row(_row(n_devices=24, tp=2, pp=1, dp=12, ep=2, global_batch_tokens=24 * 8192.0), moe,
                      _device(mc), default_batch_tokens=4e6)
    assert case.model["experts"] == 8 and case.model["top_k"] == 2 and case.model["active_params"] == 13e9
    assert case.candidates[0]["kwargs"]["ep_size"] == 2
    assert case.fleet["per_node"] == 8 and case.fleet["nodes"] == 3
    assert mc.node_size(12, 8) == 4 and mc.node_size(4, 256) == 4 and mc.node_size(512, 256) == 256


def test_best_candidate_prefers_feasible_then_fastest(mc):
    res = [{"micro_batch": 1, "samples_per_s": 10.0, "feasible": True},
           {"micro_batch": 2, "samples_per_s": 30.0, "feasible": False},
           {"micro_batch": 4, "samples_per_s": 12.0, "feasible": True},
           {"micro_batch": 8, "error": "ValueError: x"}]
    assert mc.best_candidate(res)["micro_batch"] == 4
    assert mc.best_candidate([{"error": "x"}]) is None


def test_metric_conversions_share_xpuplans_flop_count(mc, dense):
    kw = {"model": dense, "recompute": "full", "peak_flops": 989e12, "n_devices": 64, "global_tokens": 4194304,
          "train_tokens": 1e12}
    t = 1000.0
    assert mc.metric_value("tokens_per_s_per_device", t, **kw) == t
    assert mc.metric_value("model_tflops_per_device", t, **kw) == pytest.approx(460.0)
    assert mc.metric_value("hw_tflops_per_device", t, **kw) == pytest.approx(610.0)
    assert mc.metric_value("mfu", t, **kw) == pytest.approx(4.6e14 / 989e12)
    assert mc.metric_value("step_time_s", t, **kw) == pytest.approx(4194304 / 64000)
    assert mc.metric_value("device_hours", t, **kw) == pytest.approx(1e12 / 1000 / 3600)
    with pytest.raises(ValueError):
        mc.metric_value("ttft_s", t, **kw)


def test_statistics_are_the_validators(mc):
    from xpuplan.validate.core import percentile

    assert mc.percentile is percentile  # one definition of P90
    s = mc.abs_stats([0.1, -0.2, 0.3, -0.4])
    assert s["n"] == 4 and s["median_abs_pct"] == pytest.approx(25.0) and s["p90_abs_pct"] == pytest.approx(37.0)
    assert mc.abs_stats([]) == {"n": 0, "median_abs_pct": None, "p90_abs_pct": None}


def test_recent_subset_is_issue_11s(mc):
    yes = ["google-tpu-v5e", "google-tpu-v5p", "google-tpu-v6e", "huawei-ascend-910b", "huawei-ascend-910c",
           "nvidia-h100-sxm-80gb"]
    no = ["google-tpu-v4", "nvidia-h200-sxm-141gb", "nvidia-h800-sxm-80gb", "nvidia-a100-sxm-80gb", "intel-gaudi2"]
    assert all(mc.in_recent_subset(h) for h in yes) and not any(mc.in_recent_subset(h) for h in no)


def test_group_stats_use_only_rows_both_tools_predicted(mc):
    R = mc.CompareRow
    rows = [R("a", "held-out", "google-tpu-v6e", "Google TPU v6e", "m", 100.0, mlsysim=110.0, xpuplan=95.0),
            R("b", "held-out", "google-tpu-v6e", "Google TPU v6e", "m", 100.0, mlsysim=None, xpuplan=50.0),
            R("c", "held-out", "nvidia-h100-sxm-80gb", "NVIDIA Hopper", "m", 100.0, "fp8", mlsysim=200.0,
              xpuplan=None),
            R("d", "public", "nvidia-a100-sxm-80gb", "NVIDIA Ampere", "m", 100.0, mlsysim=70.0, xpuplan=90.0)]
    stats = {s["group"]: s for s in mc.group_stats(rows)}
    ho = stats["held-out: all"]
    assert ho["n"] == 1 and ho["mlsysim"]["median_abs_pct"] == pytest.approx(10.0)
    assert ho["xpuplan"]["median_abs_pct"] == pytest.approx(5.0)
    assert stats["held-out: recent TPU + Ascend + H100"]["n"] == 1
    assert stats["held-out: recent TPU + Ascend + H100, fp8 rows"]["n"] == 0
    assert stats["public: NVIDIA Ampere"]["mlsysim"]["median_abs_pct"] == pytest.approx(30.0)
    assert stats["public: recent TPU + Ascend + H100"]["n"] == 0


def test_efficiency_fit_helpers(mc):
    grid = mc.efficiency_grid()
    assert grid[0] == 0.2 and grid[-1] == 0.8 and len(grid) == 31
    assert mc.choose_efficiency({0.4: [0.3, -0.1, 0.2], 0.5: [0.05, -0.1, 0.5], 0.6: [0.5, 0.5, 0.5]}, 0.5) == 0.5
    assert mc.choose_efficiency({0.4: [0.1], 0.6: [-0.1]}, 0.55) == 0.6  # tie: nearest the default
    case = mc.Case("x", {}, {}, {}, [{"micro_batch": 1, "kwargs": {"a": 1}}, {"micro_batch": 2, "kwargs": {}}],
                   2048, 8, 16384)
    wide = mc.expand_efficiency(case, [0.3, 0.5])
    assert [(c["micro_batch"], c["kwargs"]["efficiency"]) for c in wide.candidates] == [
        (1, 0.3), (2, 0.3), (1, 0.5), (2, 0.5)]
    assert mc.expand_efficiency(case, [None]) is case


def test_doc_block_is_replaced_between_markers_and_lists_skips(mc):
    R = mc.CompareRow
    rows = [R("a", "held-out", "google-tpu-v6e", "Google TPU v6e", "tokens_per_s_per_device", 100.0, mlsysim=110.0,
              xpuplan=95.0, mlsysim_feasible=False),
            R("b", "held-out", "nvidia-h100-sxm-80gb", "NVIDIA Hopper", "m", 1.0, mlsysim_reason="context | cp")]
    meta = {"date": "2026-01-01", "mlsysim_version": "0.3.0", "efficiency": 0.5, "efficiency_note": "default",
            "overlap": False, "xpuplan_version": "9", "commit": "abc", "command": "cmd"}
    block = mc.render_markdown(rows, mc.group_stats(rows), meta)
    assert "| a | held-out | google-tpu-v6e |" in block and "+10.0%" in block and "| no |" in block
    assert "context / cp" in block  # a pipe in a reason does not break the table
    doc = "# T\n\nintro\n"
    once = mc.replace_block(doc, block)
    twice = mc.replace_block(once, "NEW\n")
    assert once.count(mc.DOC_START) == 1 and "intro" in twice and "NEW" in twice and block not in twice


def test_missing_mlsysim_is_a_clear_message_and_exit_2(mc, capsys):
    assert mc.main(["--mlsysim-python", str(ROOT / "no-such-python")]) == 2
    err = capsys.readouterr().err
    assert "mlsysim is not usable" in err and "pip install mlsysim==0.3.0" in err
    assert mc.main(["--fit-efficiency", "--no-public"]) == 2


def test_plan_key_parses_into_row_columns(mc):
    cols = mc.parse_plan_key("tp8-pp2-vpp1-dp8-cp1-ep1-sp1-z1-rsel-mb2-ga64-fp8")
    assert cols == {"tp": 8, "pp": 2, "vpp": 1, "dp": 8, "cp": 1, "ep": 1, "sp": 1, "zero_stage": 1,
                    "recompute": "selective", "micro_batch": 2}
    assert mc.parse_plan_key("tp1-pp1-z3-rfull")["recompute"] == "full"
    with pytest.raises(ValueError):
        mc.parse_plan_key("dp8-mb2")


def test_groups_follow_the_rows_groups_including_assumed_layouts(mc):
    R = mc.CompareRow
    rows = [R("a", "public, layout not printed", "intel-gaudi2", "Intel Gaudi 2", "m", 100.0, mlsysim=120.0,
              xpuplan=90.0)]
    stats = {s["group"]: s for s in mc.group_stats(rows)}
    assert stats["public, layout not printed: all"]["n"] == 1
    assert stats["public, layout not printed: Intel Gaudi 2"]["mlsysim"]["median_abs_pct"] == pytest.approx(20.0)
