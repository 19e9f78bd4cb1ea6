"""Step-time and memory model: formulas, breakdown consistency, memory vs perf.memory, feasibility."""

from __future__ import annotations

import textwrap

import pytest

from xpuplan.catalog import load_hardware_file
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.models.arch import ModelArch
from xpuplan.perf import collectives as coll
from xpuplan.perf.efficiency import default_efficiency
from xpuplan.perf.memory import training_memory
from xpuplan.train import (
    Cluster,
    ParallelPlan,
    PlanArrays,
    StepModel,
    devices_to_fit,
    estimate,
    make_plan,
    min_devices_for_states,
    pipeline_bubble_fraction,
)
from xpuplan.train.cluster import DEFAULT_SCALE_OUT_BYTES_PER_S, PCIE_SERVER_DEVICES
from xpuplan.train.search import SearchSpace, search_plans
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")


def _cluster(hw: str, n: int, **kw) -> Cluster:
    return Cluster.from_catalog(hw, n, efficiency=kw.pop("efficiency", None) or None, **kw)


def _toy() -> ModelArch:
    return ModelArch(id="toy", name="toy", n_layers=8, d_model=1024, n_heads=16, ffn_dim=4096, vocab_size=32000,
                     mlp="gated")


# ---------------------------------------------------------------------------------------
# small formulas
# ---------------------------------------------------------------------------------------
def test_bubble_formula():
    assert pipeline_bubble_fraction(1, 8) == 0.0
    assert pipeline_bubble_fraction(8, 64) == pytest.approx(7 / 64)
    assert pipeline_bubble_fraction(8, 64, vpp=4) == pytest.approx(7 / 256)
    with pytest.raises(ValueError):
        pipeline_bubble_fraction(0, 8)


def test_bubble_in_estimate_is_pp_minus_1_over_vpp_micro_batches():
    m = get_model("gpt3-175b")
    c = _cluster("nvidia-a100-sxm-80gb", 64)
    job = TrainingJob(seq_len=2048, global_batch_tokens=64 * 2048)
    for vpp in (1, 3):
        p = make_plan(n_devices=64, global_batch_seqs=64, tp=8, pp=8, vpp=vpp, recompute="selective", zero_stage=0)
        e = estimate(m, c, p, job).step
        per_mb = (e.compute_s + e.recompute_s + e.tp_comm_s + e.cp_comm_s + e.ep_comm_s) / p.grad_accum
        assert e.bubble_s == pytest.approx(7 / vpp * per_mb)


def test_breakdown_sums_to_step_time():
    m = get_model("llama3-70b")
    c = _cluster("nvidia-h100-sxm-80gb", 256)
    job = TrainingJob(seq_len=8192, global_batch_tokens=512 * 8192)
    p = make_plan(n_devices=256, global_batch_seqs=512, tp=8, pp=4, cp=2, vpp=5, recompute="selective")
    e = estimate(m, c, p, job)
    parts = {k: v for k, v in e.step.to_dict().items() if k != "step_s"}
    assert sum(parts.values()) == pytest.approx(e.step_time_s)
    assert all(v >= 0 for v in parts.values())
    assert e.tokens_per_s == pytest.approx(512 * 8192 / e.step_time_s)
    assert e.tokens_per_s_per_device == pytest.approx(e.tokens_per_s / 256)
    assert 0 < e.mfu <= e.hfu < 1


def test_tp_comm_matches_hand_calculation():
    m = _toy()
    c = _cluster("nvidia-a100-sxm-80gb", 2)
    job = TrainingJob(seq_len=1024, global_batch_tokens=4 * 1024)
    p = ParallelPlan(tp=2, dp=1, micro_batch=2, grad_accum=2, recompute="none", zero_stage=0)
    e = estimate(m, c, p, job)
    msg = 2 * 1024 * 1024 * 2.0  # micro_batch · seq · d_model · 2 B
    one = coll.time_all_reduce_s(msg, 2, c.scale_up.bus_bw, c.scale_up.latency_s)
    # 8 layers x 2 collectives (attention, MLP) x 2 passes (forward, backward) x 2 micro-batches
    assert e.step.tp_comm_s == pytest.approx(8 * 2 * 2 * 2 * one)
    full = estimate(m, c, ParallelPlan(tp=2, micro_batch=2, grad_accum=2, recompute="full", zero_stage=0), job)
    assert full.step.tp_comm_s == pytest.approx(8 * 2 * 3 * 2 * one)  # the recomputed forward communicates again


def test_dp_group_across_nodes_uses_the_nic():
    m = _toy()
    job = TrainingJob(seq_len=1024, global_batch_tokens=64 * 1024)
    c = _cluster("nvidia-a100-sxm-80gb", 64)
    p = make_plan(n_devices=64, global_batch_seqs=64, tp=8, zero_stage=0, recompute="none")
    e = estimate(m, c, p, job)
    assert e.step.dp_comm_s > 0  # the last bucket always waits
    slow = Cluster.from_catalog("nvidia-a100-sxm-80gb", 64, scale_out_gbit_per_s=10)
    assert estimate(m, slow, p, job).step.dp_comm_s > e.step.dp_comm_s


def test_zero2_reduce_scatters_every_micro_batch_without_pipelining_once_per_step_with_it():
    m = get_model("llama3-8b")
    job = TrainingJob(seq_len=4096, global_batch_tokens=256 * 4096)
    c = _cluster("nvidia-h100-sxm-80gb", 64)

    def est(pp: int, zero: int):
        return estimate(m, c, make_plan(n_devices=64, global_batch_seqs=256, tp=2, pp=pp, zero_stage=zero,
                                        recompute="selective", micro_batch=1), job)

    # no pipeline: ZeRO-2 keeps a gradient shard, so it reduce-scatters every micro-batch (ga of them)
    z1, z2 = est(1, 1), est(1, 2)
    assert z2.plan.grad_accum > 1
    assert z2.step.dp_comm_s > 2.0 * z1.step.dp_comm_s
    assert z2.memory.gradients_bytes == pytest.approx(z1.memory.gradients_bytes / 32)  # dp = 32
    # pipelined: gradients accumulate in a full-size buffer and are reduce-scattered once per step, as ZeRO-1
    p1, p2 = est(4, 1), est(4, 2)
    assert p2.step.dp_comm_s == pytest.approx(p1.step.dp_comm_s)
    assert p2.step_time_s == pytest.approx(p1.step_time_s)
    assert p2.memory.gradients_bytes == pytest.approx(p1.memory.gradients_bytes)
    assert p2.memory.total_bytes == pytest.approx(p1.memory.total_bytes)
    assert any("ZeRO-2 with pipelining" in n for n in p2.notes)
    assert not any("ZeRO-2 with pipelining" in n for n in z2.notes)


def test_gradients_sharded_only_by_zero3_or_unpipelined_zero2():
    import numpy as np

    from xpuplan.perf.memory import gradients_sharded

    zero = np.array([0, 1, 2, 2, 3, 3])
    pp = np.array([1, 1, 1, 4, 1, 4])
    assert gradients_sharded(zero, pp).tolist() == [False, False, True, False, True, True]
    # the scalar memory model agrees: pipelined ZeRO-2 holds the full buffer
    m = get_model("llama3-8b")
    kw = dict(seq_len=4096, tp=2, dp=8, recompute="selective")
    assert training_memory(m, pp=4, zero_stage=2, **kw).gradients == pytest.approx(
        training_memory(m, pp=4, zero_stage=1, **kw).gradients)
    assert training_memory(m, pp=1, zero_stage=2, **kw).gradients == pytest.approx(
        training_memory(m, pp=1, zero_stage=1, **kw).gradients / 8)


def test_search_does_not_enumerate_pipelined_zero2_twice():
    m = get_model("llama3-8b")
    job = TrainingJob(seq_len=4096, global_batch_tokens=256 * 4096)
    c = _cluster("nvidia-h100-sxm-80gb", 64)
    from xpuplan.train.search import enumerate_plans

    plans = enumerate_plans(m, 64, job, c, SearchSpace(tp=[2], recompute=["selective"]))
    assert ((plans.zero == 2) & (plans.pp > 1)).sum() == 0
    assert ((plans.zero == 2) & (plans.pp == 1)).sum() > 0
    only2 = enumerate_plans(m, 64, job, c, SearchSpace(tp=[2], pp=[4], zero_stage=[2], recompute=["selective"]))
    assert len(only2) and (only2.zero == 2).all()  # asked for explicitly: kept


def test_recompute_trades_time_for_memory():
    m = get_model("llama3-8b")
    c = _cluster("nvidia-a100-sxm-80gb", 8)
    job = TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096)
    ests = {r: estimate(m, c, make_plan(n_devices=8, global_batch_seqs=64, micro_batch=2, zero_stage=3, recompute=r), job)
            for r in ("none", "selective", "full")}
    assert ests["none"].step_time_s < ests["selective"].step_time_s < ests["full"].step_time_s
    # with flash attention selective recomputation saves no memory (no s x s scores are kept either way)
    assert ests["none"].memory.activations_bytes >= ests["selective"].memory.activations_bytes > ests["full"].memory.activations_bytes
    assert ests["full"].hfu > ests["full"].mfu


def test_fp8_speeds_up_hopper():
    m = get_model("llama3-8b")
    job = TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096)
    c = _cluster("nvidia-h100-sxm-80gb", 8)
    bf = estimate(m, c, make_plan(n_devices=8, global_batch_seqs=64, zero_stage=3), job)
    f8 = estimate(m, c, make_plan(n_devices=8, global_batch_seqs=64, zero_stage=3, precision="fp8"), job)
    assert f8.step_time_s < 0.9 * bf.step_time_s


def test_fp8_training_refused_without_fp8_hardware():
    m = get_model("llama3-8b")
    job = TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096)
    c = _cluster("nvidia-a100-sxm-80gb", 8)
    with pytest.raises(UserInputError, match="no FP8 tensor cores") as exc:
        estimate(m, c, make_plan(n_devices=8, global_batch_seqs=64, precision="fp8"), job)
    assert exc.value.field == "precision"
    with pytest.raises(UserInputError, match="no FP8"):
        search_plans(m, c, job, space=SearchSpace(precision=("fp8",)), top=1)
    both = search_plans(m, c, job, space=SearchSpace(precision=("bf16", "fp8")), top=1)
    assert both.best is not None and both.best.plan.precision == "bf16"


# ---------------------------------------------------------------------------------------
# memory: the vectorised model equals perf.memory.training_memory
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("model_id", "n", "kw", "method"),
    [
        ("llama3-70b", 64, dict(tp=8, pp=4, zero_stage=1, recompute="selective"), "full"),
        ("llama3-70b", 64, dict(tp=4, pp=2, vpp=5, zero_stage=2, recompute="full", micro_batch=2), "full"),
        ("llama3-8b", 16, dict(tp=1, zero_stage=3, recompute="none", micro_batch=2), "full"),
        ("llama3-8b", 16, dict(tp=2, cp=2, zero_stage=0, recompute="selective"), "full"),
        ("mixtral-8x7b", 32, dict(tp=2, ep=4, zero_stage=1, recompute="full"), "full"),
        ("llama3-70b", 64, dict(tp=4, pp=4, vpp=2, zero_stage=1, recompute="offload", micro_batch=2), "full"),
        ("llama3-8b", 16, dict(tp=1, zero_stage=3, recompute="offload", micro_batch=4), "full"),
        ("llama3-70b", 8, dict(tp=2, pp=2, zero_stage=3, recompute="full"), "lora"),
        ("llama3-70b", 2, dict(tp=1, pp=1, zero_stage=3, recompute="full"), "qlora"),
    ],
)
def test_vectorised_memory_equals_training_memory(model_id, n, kw, method):
    m = get_model(model_id)
    c = _cluster("nvidia-h100-sxm-80gb", n)
    job = TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096, method=method)
    p = make_plan(n_devices=n, global_batch_seqs=64, **kw)
    e = estimate(m, c, p, job)
    ref = training_memory(m, seq_len=4096, micro_batch=p.micro_batch, tp=p.tp, pp=p.pp, dp=p.dp, cp=p.cp, ep=p.ep,
                          vpp=p.vpp, sp=p.sp, zero_stage=p.zero_stage, recompute=p.recompute, recipe="bf16-adam",
                          n_microbatches=p.grad_accum, method=method)
    assert e.memory.total_bytes == pytest.approx(ref.total, rel=1e-9)
    assert e.memory.weights_bytes == pytest.approx(ref.weights, rel=1e-9)
    assert e.memory.activations_bytes == pytest.approx(ref.activations, rel=1e-9)
    assert e.memory.host_offload_bytes == pytest.approx(ref.host_activations, rel=1e-9)
    assert (ref.host_activations > 0) == (p.recompute == "offload")


# ---------------------------------------------------------------------------------------
# feasibility, fine-tuning, MoE
# ---------------------------------------------------------------------------------------
def test_gpt3_175b_does_not_fit_on_8_h100_and_says_what_it_takes():
    m = get_model("gpt3-175b")
    c = _cluster("nvidia-h100-sxm-80gb", 8)
    job = TrainingJob(seq_len=2048, global_batch_tokens=1536 * 2048)
    p = make_plan(n_devices=8, global_batch_seqs=1536, tp=8, zero_stage=3, recompute="full")
    e = estimate(m, c, p, job)
    assert not e.feasible and "model states" in e.reasons[0]
    assert min_devices_for_states(m, c, job) >= 35  # 175e9 x 16 B / 81.6 GB usable (95% of 80 GiB)
    best = devices_to_fit(m, c, job)
    assert best is not None and best.feasible and best.n_devices >= 40


def test_qlora_fits_70b_on_one_h100_full_training_does_not():
    m = get_model("llama3-70b")
    c = _cluster("nvidia-h100-sxm-80gb", 1)
    plan = make_plan(n_devices=1, global_batch_seqs=16, zero_stage=0, recompute="full")
    q = estimate(m, c, plan, TrainingJob(seq_len=2048, method="qlora", global_batch_tokens=16 * 2048))
    full = estimate(m, c, plan, TrainingJob(seq_len=2048, global_batch_tokens=16 * 2048))
    lora = estimate(m, c, plan, TrainingJob(seq_len=2048, method="lora", global_batch_tokens=16 * 2048))
    assert q.feasible and not full.feasible and not lora.feasible
    assert q.memory.optimizer_states_bytes < 0.01 * full.memory.optimizer_states_bytes  # adapters only
    assert q.model_flops_per_token < full.model_flops_per_token  # no weight gradients for the frozen base


def test_moe_expert_parallel_all_to_all():
    m = get_model("mixtral-8x7b")
    c = _cluster("nvidia-h100-sxm-80gb", 16)
    job = TrainingJob(seq_len=4096, global_batch_tokens=128 * 4096)
    e1 = estimate(m, c, make_plan(n_devices=16, global_batch_seqs=128, tp=2, ep=1), job)
    e8 = estimate(m, c, make_plan(n_devices=16, global_batch_seqs=128, tp=2, ep=8), job)
    assert e1.step.ep_comm_s == 0 and e8.step.ep_comm_s > 0
    assert e8.memory.weights_bytes < e1.memory.weights_bytes


def test_deepseek_v3_estimate_runs():
    m = get_model("deepseek-v3")
    c = _cluster("nvidia-h800-sxm-80gb", 2048)
    job = TrainingJob(seq_len=4096, global_batch_tokens=15360 * 4096)
    p = make_plan(n_devices=2048, global_batch_seqs=15360, pp=16, ep=64, zero_stage=1, recompute="full",
                  precision="fp8", uneven_pipeline=True, model=m)
    e = estimate(m, c, p, job, uneven_pipeline=True)
    assert e.step.ep_comm_s > 0 and e.tokens_per_s_per_device > 0
    with pytest.raises(UserInputError):
        estimate(m, c, p, job)  # 61 layers on 16 stages needs an uneven pipeline


def test_time_energy_and_device_hours():
    m = get_model("llama3-8b")
    c = _cluster("nvidia-h100-sxm-80gb", 64)
    job = TrainingJob(seq_len=8192, global_batch_tokens=256 * 8192, train_tokens=1e12)
    e = estimate(m, c, make_plan(n_devices=64, global_batch_seqs=256, zero_stage=1), job)
    assert e.time_to_train_s == pytest.approx(1e12 / e.tokens_per_s)
    assert e.device_hours == pytest.approx(e.time_to_train_s * 64 / 3600)
    assert 0.35 * 700 <= e.power_w_per_device <= 700
    assert e.energy_kwh == pytest.approx(e.power_w_per_device * 64 * e.time_to_train_s / 3.6e6)


def test_evaluate_arrays_match_single_estimates():
    m = get_model("llama3-8b")
    c = _cluster("nvidia-a100-sxm-80gb", 16)
    job = TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096)
    plans = [make_plan(n_devices=16, global_batch_seqs=64, tp=t, zero_stage=z, recompute=r)
             for t in (1, 2) for z in (1, 3) for r in ("none", "full")]
    arr = StepModel(m, c.device, c.efficiency, job).evaluate(c, PlanArrays.from_plans(plans))
    for i, p in enumerate(plans):
        assert arr.step_s[i] == pytest.approx(estimate(m, c, p, job).step_time_s)


# ---------------------------------------------------------------------------------------
# clusters
# ---------------------------------------------------------------------------------------
def test_cluster_defaults_from_catalog():
    h = _cluster("H100", 16)
    assert (h.domain_size, h.topology, h.scale_up.kind, h.scale_out.kind) == (8, "switch", "nvlink", "infiniband")
    assert h.scale_up.bus_bw == pytest.approx(450e9 * 0.8)
    nvl = _cluster("nvidia-gb200-186gb", 144)
    assert nvl.domain_size == 72 and nvl.topology == "switch"
    l40 = _cluster("nvidia-l40s-48gb", 8)
    assert (l40.topology, l40.domain_size, l40.scale_up.kind) == ("pcie", PCIE_SERVER_DEVICES, "pcie")
    assert l40.scale_out.bandwidth == DEFAULT_SCALE_OUT_BYTES_PER_S


def test_ascend_hccs_board_is_a_mesh():
    c = Cluster.from_catalog("huawei-ascend-910b", 16, efficiency=default_efficiency())
    assert (c.topology, c.domain_size, c.scale_up.kind) == ("mesh", 8, "hccs")
    assert c.scale_up_bus_bw(2) == pytest.approx(c.scale_up.bus_bw / 7)  # one of seven links
    assert c.scale_up_bus_bw(8) == pytest.approx(c.scale_up.bus_bw)


def test_cluster_overrides_and_errors():
    c = Cluster.from_catalog("H100", 16, domain_size=4, scale_out_gbit_per_s=100, scale_up_latency_us=2.0)
    assert c.domain_size == 4 and c.scale_out.bandwidth == pytest.approx(12.5e9) and c.scale_up.latency_s == 2e-6
    with pytest.raises(UserInputError):
        Cluster.from_catalog("H100", 0)
    with pytest.raises(UserInputError):
        Cluster.from_catalog("H100", 8, scale_up_kind="smoke-signals")
    with pytest.raises(UserInputError):
        Cluster.from_catalog("no-such-accelerator", 8)


def test_cluster_from_a_custom_hardware_file(tmp_path):
    f = tmp_path / "hw.yaml"
    f.write_text(textwrap.dedent("""
        schema_version: 1
        vendor: Acme
        sources:
          s: {title: "Acme datasheet", date: "2025", kind: vendor}
        devices:
          - id: acme-x1
            name: Acme X1
            kind: GPU
            origin_country: US
            dense_tflops: {bf16: {value: 400, source: s, trust: A}}
            memory:
              capacity_gb: {value: 96, source: s, trust: A}
              bandwidth_gb_per_s: {value: 3000, source: s, trust: A}
            pcie:
              generation: 5
              bandwidth_gb_per_s_per_direction: {value: 64, source: s, trust: A}
            power: {tdp_w: {value: 500, source: s, trust: A}}
            ecosystem: {software_stack: CUDA, pytorch: native, maturity: 3}
    """))
    dev = load_hardware_file(f)[0]
    c = Cluster.from_catalog(dev, 16, efficiency=default_efficiency())
    assert c.topology == "pcie" and c.scale_up.bandwidth == 64e9
    e = estimate(_toy(), c, make_plan(n_devices=16, global_batch_seqs=32), TrainingJob(seq_len=1024, global_batch_tokens=32 * 1024))
    assert e.feasible and e.power_w_per_device is not None
