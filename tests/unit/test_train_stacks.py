"""Training-stack profiles, collective libraries and the physics they switch on (docs/training.md)."""

from __future__ import annotations

import numpy as np
import pytest

from xpuplan.catalog.stacks import (
    EP_OVERLAP_SM_SHARE,
    collective_library,
    default_training_stack,
    library_for_vendor,
    load_libraries,
    load_stacks,
    stack_for_framework,
    training_stack,
)
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf import collectives as coll
from xpuplan.perf.memory import pipeline_peak_layer_microbatches
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.train.step import PlanArrays, StepModel
from xpuplan.workload.training import TrainingJob


# ---------------------------------------------------------------------------------------
# data files
# ---------------------------------------------------------------------------------------
def test_every_stack_and_library_is_sourced():
    f = load_stacks()
    assert f.default_stack in f.stacks
    for sid, st in f.stacks.items():
        assert st.id == sid and st.sources and all(s.strip() for s in st.sources)
    for lid, lib in load_libraries().libraries.items():
        assert lib.id == lid and lib.source.strip()


@pytest.mark.parametrize(("framework", "year", "stack"), [
    ("Megatron-LM", 2021, "megatron-lm-legacy"),
    ("Megatron-LM", 2024, "megatron-core"),
    ("Megatron-LM", None, "megatron-core"),
    ("Megatron-Bridge (NeMo 25.11 container, Megatron-Core)", 2025, "nemo"),
    ("Megatron-DeepSpeed", 2022, "deepspeed"),
    ("MindSpeed-LLM (Mcore, PyTorch + torch_npu)", 2025, "mindspeed-mcore"),
    ("MindSpeed-LLM (Legacy, PyTorch + torch_npu)", 2024, "mindspeed"),
    ("torchtitan (PyTorch FSDP2, torch.compile)", 2025, "torchtitan"),
    ("llm-foundry (Composer FSDP)", 2023, "llm-foundry"),
    ("PyTorch FSDP (Hugging Face Accelerate)", 2024, "fsdp"),
    ("MaxText (JAX)", 2024, "maxtext"),
    ("DeepSeek HAI-LLM (DualPipe)", 2024, "deepseek-dualpipe"),
])
def test_framework_names_map_to_stacks(framework, year, stack):
    assert stack_for_framework(framework, year).id == stack


def test_unknown_framework_and_stack():
    assert stack_for_framework("my own trainer", 2024) is None
    assert stack_for_framework(None) is None
    with pytest.raises(UserInputError, match="unknown training stack") as exc:
        training_stack("no-such-stack")
    assert exc.value.field == "stack"
    assert default_training_stack().id == load_stacks().default_stack


def test_libraries_by_vendor():
    assert library_for_vendor("NVIDIA").id == "nccl"
    assert library_for_vendor("AMD").id == "rccl"
    assert library_for_vendor("Huawei").id == "hccl"
    assert library_for_vendor("Cambricon").id == "cncl"
    assert library_for_vendor("nobody").id == load_libraries().default_library


# ---------------------------------------------------------------------------------------
# collective latency across domains
# ---------------------------------------------------------------------------------------
def test_inter_domain_latency_steps_by_library():
    nccl, hccl, cncl = collective_library("nccl"), collective_library("hccl"), collective_library("cncl")
    # NCCL: all-gather and reduce-scatter are rings (n-1); all-reduce takes the tree when cheaper
    assert coll.inter_latency_steps("all_gather", 128, nccl) == 127
    assert coll.inter_latency_steps("reduce_scatter", 128, None) == 127
    assert coll.inter_latency_steps("all_reduce", 128, nccl) == 4 * 7
    assert coll.inter_latency_steps("all_reduce", 2, nccl) == 2  # ring cheaper than tree for 2 nodes
    # HCCL: recursive halving-doubling for both
    assert coll.inter_latency_steps("all_gather", 128, hccl) == 7
    assert coll.inter_latency_steps("all_reduce", 128, hccl) == 2 * 7
    # CNCL: ring only
    assert coll.inter_latency_steps("all_reduce", 128, cncl) == 2 * 127


def test_all_gather_latency_grows_linearly_across_domains():
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 1024)
    tiny = np.asarray([8.0])
    t64 = float(coll.time_group_s("all_gather", tiny, 512, 1, c)[0])
    t128 = float(coll.time_group_s("all_gather", tiny, 1024, 1, c)[0])
    alpha = c.scale_out.latency_s
    assert t128 - t64 == pytest.approx(64 * alpha, rel=1e-3)  # 128 vs 64 nodes: 64 more ring steps


# ---------------------------------------------------------------------------------------
# stack physics in the step model
# ---------------------------------------------------------------------------------------
def _eval(model_id, hw, n, plan_kw, stack, seq=8192, gbt=None):
    m = get_model(model_id)
    c = Cluster.from_catalog(hw, n)
    job = TrainingJob(seq_len=seq, global_batch_tokens=gbt or n * seq)
    plan = make_plan(n_devices=n, global_batch_seqs=job.global_batch_seqs, **plan_kw)
    return estimate(m, c, plan, job, stack=training_stack(stack), uneven_pipeline=True)


def test_tp_overlap_hides_tp_comm_under_gemms_but_not_all_of_it():
    kw = dict(tp=8, pp=1, sp=True, zero_stage=1)
    plain = _eval("llama3-70b", "nvidia-h100-sxm-80gb", 8, kw, "megatron-core")
    overlapped = _eval("llama3-70b", "nvidia-h100-sxm-80gb", 8, kw, "nemo")
    assert overlapped.step.tp_comm_s < 0.6 * plain.step.tp_comm_s
    # at least one chunk (1/tp of the traffic) stays exposed
    assert overlapped.step.tp_comm_s >= plain.step.tp_comm_s / 8 * 0.999
    # TE's overlap needs SP: without it nothing is hidden
    no_sp = dict(kw, sp=False)
    assert _eval("llama3-70b", "nvidia-h100-sxm-80gb", 8, no_sp, "nemo").step.tp_comm_s == pytest.approx(
        _eval("llama3-70b", "nvidia-h100-sxm-80gb", 8, no_sp, "megatron-core").step.tp_comm_s)


def test_xla_collective_matmul_overlaps_tp_comm_without_sp():
    """MaxText (XLA collective matmul / async collective fusion) hides TP collectives under the
    adjacent matmuls with no sequence parallelism: the same exposed time as an SP stack with TE's
    overlap, far less than a stack that waits for every TP collective."""
    mt = training_stack("maxtext")
    assert mt.tp_comm_overlap and not mt.tp_overlap_needs_sp and not mt.sequence_parallel
    assert training_stack("nemo").tp_overlap_needs_sp  # TE's overlap keeps needing SP
    kw = dict(tp=16, pp=1, sp=False, zero_stage=3, recompute="full")
    hw, n = "google-tpu-v5p", 256
    xla = _eval("llama3-70b", hw, n, kw, "maxtext", seq=2048)
    waits = _eval("llama3-70b", hw, n, kw, "fsdp", seq=2048)  # no TP overlap at all
    assert waits.step.tp_comm_s > 0
    assert xla.step.tp_comm_s < 0.5 * waits.step.tp_comm_s
    # the first/last ring step has no matmul to hide under: at least 1/tp stays exposed
    assert xla.step.tp_comm_s >= waits.step.tp_comm_s / 16 * 0.999
    assert xla.step_time_s < waits.step_time_s


def test_async_p2p_hides_interleaved_pipeline_sends():
    kw = dict(tp=8, pp=8, vpp=2, zero_stage=1)
    sync = _eval("llama3-70b", "nvidia-h100-sxm-80gb", 256, kw, "megatron-lm-legacy")
    asyn = _eval("llama3-70b", "nvidia-h100-sxm-80gb", 256, kw, "megatron-core")
    assert asyn.step.pp_comm_s < 0.5 * sync.step.pp_comm_s
    # without interleaving the sends stay on the critical path
    kw1 = dict(kw, vpp=1)
    assert _eval("llama3-70b", "nvidia-h100-sxm-80gb", 256, kw1, "megatron-core").step.pp_comm_s == pytest.approx(
        _eval("llama3-70b", "nvidia-h100-sxm-80gb", 256, kw1, "megatron-lm-legacy").step.pp_comm_s)


def test_zero3_collective_count_and_regather():
    kw = dict(tp=1, pp=1, zero_stage=3, recompute="selective")
    # DeepSpeed issues one collective per parameter tensor, FSDP one per block: more latency
    per_param = _eval("llama3-8b", "nvidia-h100-sxm-80gb", 512, kw, "deepspeed", seq=4096, gbt=4096 * 512)
    per_unit = _eval("llama3-8b", "nvidia-h100-sxm-80gb", 512, kw, "fsdp", seq=4096, gbt=4096 * 512)
    assert per_param.step.zero3_comm_s > per_unit.step.zero3_comm_s
    # full recomputation re-gathers the weights for the recomputed forward
    full = _eval("llama3-8b", "nvidia-h100-sxm-80gb", 512, dict(kw, recompute="full"), "fsdp", seq=4096, gbt=4096 * 512)
    assert full.step.zero3_comm_s > per_unit.step.zero3_comm_s


def test_pure_zero3_turns_communication_bound_at_scale():
    """Fixed global batch: every device moves ~3-4x the model's bytes per micro-batch however many
    share the work, so pure ZeRO-3 of a 175B model on ~1,000 GPUs is communication-bound and its
    per-device throughput falls as devices are added (the ring latency grows with the node count)."""
    m = get_model("gpt3-175b")
    job = TrainingJob(seq_len=2048, global_batch_tokens=2048 * 1024)
    per_dev, ests = [], []
    for n in (256, 1024):
        c = Cluster.from_catalog("nvidia-a100-sxm-80gb", n)
        plan = make_plan(n_devices=n, global_batch_seqs=job.global_batch_seqs, zero_stage=3, recompute="full")
        e = estimate(m, c, plan, job, stack=training_stack("deepspeed"))
        per_dev.append(e.tokens_per_s_per_device)
        ests.append(e)
    assert per_dev[1] < 0.8 * per_dev[0]
    big = ests[1].step
    assert big.zero3_comm_s > 0.5 * (big.compute_s + big.recompute_s)  # exposed, after prefetch overlap


def test_stack_ep_overlap_and_job_override():
    m = get_model("mixtral-8x7b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 64)
    plan = make_plan(n_devices=64, global_batch_seqs=256, tp=2, ep=8, zero_stage=1)
    job = TrainingJob(seq_len=4096, global_batch_tokens=256 * 4096)
    # the same dispatch (DualPipe's stack de-duplicates per node), without overlap
    plain = training_stack("megatron-core").model_copy(update={"moe_node_dedup": True})
    a = estimate(m, c, plan, job, stack=plain).step.ep_comm_s
    b = estimate(m, c, plan, job, stack=training_stack("deepseek-dualpipe")).step.ep_comm_s
    # the hidden part costs the compute under it the SMs the exchange kernels hold
    share = training_stack("deepseek-dualpipe").ep_overlap_sm_share
    assert share == EP_OVERLAP_SM_SHARE == pytest.approx(20 / 132)
    # no pipeline: DualPipe's stack pairs a rank's consecutive micro-batches, 7 of its 8 (0.4.25)
    assert plan.grad_accum == 8
    paired = 7 / 8
    assert b == pytest.approx((1 - 0.9 * paired + 0.9 * paired * share) * a)
    job_half = job.model_copy(update={"ep_overlap": 0.5})
    assert estimate(m, c, plan, job_half, stack=training_stack("deepseek-dualpipe")).step.ep_comm_s == pytest.approx(
        (1 - 0.5 * paired + 0.5 * paired * share) * a)
    free = training_stack("deepseek-dualpipe").model_copy(update={"ep_overlap_sm_share": 0.0})
    assert estimate(m, c, plan, job, stack=free).step.ep_comm_s == pytest.approx((1 - 0.9 * paired) * a)
    # a steady overlap of another stack hides its fraction of every pass
    steady = plain.model_copy(update={"ep_overlap": 0.9, "ep_overlap_schedule": "steady"})
    assert estimate(m, c, plan, job, stack=steady).step.ep_comm_s == pytest.approx((0.1 + 0.9 * share) * a)


def test_step_model_defaults_to_the_default_stack():
    m = get_model("llama3-8b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    sm = StepModel(m, c.device, c.efficiency, TrainingJob())
    assert sm.stack == default_training_stack()
    plan = make_plan(n_devices=8, global_batch_seqs=8, tp=8)
    assert sm.evaluate(c, PlanArrays.from_plans([plan])).step_s[0] > 0


# ---------------------------------------------------------------------------------------
# memory: pipeline peak with uneven first/last stages
# ---------------------------------------------------------------------------------------
def test_pipeline_peak_with_uneven_first_and_last_stages():
    # even: 128 layers on 16 stages, 8 each, first stage holds 16 micro-batches
    assert pipeline_peak_layer_microbatches(128, np.asarray([16.0]), np.asarray([32.0]))[0] == 8 * 16
    # Llama 3 405B: 126 layers, first and last stage one layer fewer: max(7·16, 8·15)
    assert pipeline_peak_layer_microbatches(126, np.asarray([16.0]), np.asarray([32.0]))[0] == 8 * 15
    # fewer micro-batches than stages
    assert pipeline_peak_layer_microbatches(128, np.asarray([16.0]), np.asarray([4.0]))[0] == 8 * 4


# ---------------------------------------------------------------------------------------
# MoE parallel folding
# ---------------------------------------------------------------------------------------
def test_moe_parallel_folding_lets_ep_span_tp_ranks():
    from xpuplan.perf.memory import expert_dp_size
    from xpuplan.train.plan import ParallelPlan

    # EP 8 on a TP8 stage with no data parallelism: invalid before folding, valid now
    assert ParallelPlan(tp=8, ep=8, sp=True).ep == 8
    m = get_model("mixtral-8x7b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    job = TrainingJob(seq_len=4096, global_batch_tokens=8 * 4096)
    p = make_plan(n_devices=8, global_batch_seqs=8, tp=8, ep=8)
    folded = estimate(m, c, p, job)
    unfolded = estimate(m, c, make_plan(n_devices=8, global_batch_seqs=8, tp=8, ep=1), job)
    # experts split 8 ways either way: whole experts over EP 8 (folded, expert-TP 1) or each expert
    # over TP 8 (ep 1, expert-TP = TP); the weights on a device are the same
    assert folded.memory.weights_bytes == pytest.approx(unfolded.memory.weights_bytes, rel=1e-6)
    assert folded.step.ep_comm_s > 0 and unfolded.step.ep_comm_s == 0
    # expert-data-parallel group: dp·cp/ep classic, tp·dp·cp/ep folded
    assert expert_dp_size(np.asarray([2.0]), np.asarray([16.0]), np.asarray([4.0]))[0] == 4
    assert expert_dp_size(np.asarray([8.0]), np.asarray([4.0]), np.asarray([8.0]))[0] == 4
    with pytest.raises(UserInputError, match="tp·cp·dp"):
        ParallelPlan(tp=2, dp=2, ep=8)


# ---------------------------------------------------------------------------------------
# MoE dispatch: node de-duplication, node-limited routing, FP8 dispatch
# ---------------------------------------------------------------------------------------
def test_node_dedup_dispatch_crosses_the_network_once_per_node():
    from xpuplan.train.phases import moe_dispatch_dedup_s

    m = get_model("deepseek-v3")  # top-8, node limit 4
    c = Cluster.from_catalog("nvidia-h800-sxm-80gb", 512)
    nbytes = np.asarray([4096 * 8 * 7168 * 2.0])
    ep, stride = np.asarray([64]), np.asarray([1])  # 8 nodes of 8
    t = float(moe_dispatch_dedup_s(nbytes, m, c, ep, stride)[0])
    # network part: 4 copies per token (node limit), 7/8 of them leave the node
    net = nbytes[0] / 8 * 4 * 7 / 8 / c.scale_out.bus_bw
    assert t >= net
    plain = float(coll.time_group_s("all_to_all", nbytes, ep, stride, c)[0])
    assert t < 0.6 * plain  # a plain all-to-all sends all 8 copies, 56/64 of them across nodes
    unlimited = m.model_copy(update={"moe": m.moe.model_copy(update={"node_limit": None})})
    assert float(moe_dispatch_dedup_s(nbytes, unlimited, c, ep, stride)[0]) > t
    # inside one node: the plain all-to-all
    one = float(moe_dispatch_dedup_s(nbytes, m, c, np.asarray([8]), stride)[0])
    assert one == pytest.approx(float(coll.time_group_s("all_to_all", nbytes[0], 8, 1, c)))


def test_fp8_dispatch_only_where_the_stack_does_it():
    m = get_model("deepseek-v3")
    c = Cluster.from_catalog("nvidia-h800-sxm-80gb", 2048)
    job = TrainingJob(seq_len=4096, global_batch_tokens=15360 * 4096, ep_overlap=0.0)
    kw = dict(n_devices=2048, global_batch_seqs=15360, tp=1, pp=16, ep=64, recompute="selective", model=m,
              uneven_pipeline=True)
    ds = training_stack("deepseek-dualpipe")
    bf = estimate(m, c, make_plan(**kw), job, stack=ds, uneven_pipeline=True).step.ep_comm_s
    f8 = estimate(m, c, make_plan(**kw, precision="fp8"), job, stack=ds, uneven_pipeline=True).step.ep_comm_s
    assert 0.6 * bf < f8 < 0.9 * bf  # dispatch halves, combine stays bf16


def test_fp8_saved_activations_only_where_the_stack_keeps_them():
    # Transformer Engine (Megatron-Core, NeMo/Bridge) and DeepSeek keep FP8 linear inputs for backward;
    # torchao's Float8Linear (torchtitan) keeps the bf16 input
    assert training_stack("nemo").fp8_saved_activations and training_stack("megatron-core").fp8_saved_activations
    assert training_stack("deepseek-dualpipe").fp8_saved_activations
    assert not training_stack("torchtitan").fp8_saved_activations
    m = get_model("llama3-70b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 64)
    job = TrainingJob(seq_len=8192, global_batch_tokens=128 * 8192)
    kw = dict(n_devices=64, global_batch_seqs=128, tp=4, pp=4, recompute="selective", zero_stage=0, model=m)

    def acts(stack: str, precision: str, **update: object) -> float:
        st = training_stack(stack).model_copy(update=update)
        return estimate(m, c, make_plan(**kw, precision=precision), job, stack=st).memory.activations_bytes

    assert acts("nemo", "fp8") < 0.95 * acts("nemo", "bf16")
    assert acts("torchtitan", "fp8") == pytest.approx(acts("torchtitan", "bf16"))
    # in BF16 the two keep the same tensors, but for torchtitan's K and V repeated to every query head
    assert acts("nemo", "bf16") == pytest.approx(acts("torchtitan", "bf16", attention_kv_repeat=False))
    assert acts("torchtitan", "bf16") > acts("nemo", "bf16")


def test_fp8_primary_weights_drop_the_16_bit_working_copy_and_gather_in_fp8():
    """Megatron-Bridge's FP8 recipes set fp8_param_gather: the weights live in FP8 (2 B with the column-wise
    copy, no bf16 copy) and ZeRO gathers move 1 B per weight. Other stacks keep bf16 weights plus FP8 caches
    (3 B) and gather in bf16; bf16 plans are untouched."""
    from xpuplan.perf.memory import default_recipe_for, state_recipe

    assert training_stack("nemo").fp8_primary_weights
    assert not training_stack("megatron-core").fp8_primary_weights and not training_stack("torchtitan").fp8_primary_weights
    assert default_recipe_for("fp8", fp8_primary_weights=True) == "fp8-primary-adam"
    assert default_recipe_for("fp8") == "fp8-adam" and default_recipe_for("bf16", fp8_primary_weights=True) == "bf16-adam"
    assert state_recipe("fp8-primary-adam").weights == 2.0 and state_recipe("fp8-adam").weights == 3.0
    m = get_model("llama3-70b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 64)
    job = TrainingJob(seq_len=8192, global_batch_tokens=128 * 8192)

    def est(stack: str, precision: str, zero: int):
        plan = make_plan(n_devices=64, global_batch_seqs=128, tp=4, pp=2, zero_stage=zero, recompute="full",
                         precision=precision, model=m)
        return estimate(m, c, plan, job, stack=training_stack(stack))

    nemo, core = est("nemo", "fp8", 1), est("megatron-core", "fp8", 1)
    assert nemo.memory.weights_bytes == pytest.approx(core.memory.weights_bytes * 2.0 / 3.0, rel=1e-6)
    assert est("nemo", "bf16", 1).memory.weights_bytes == pytest.approx(est("megatron-core", "bf16", 1).memory.weights_bytes)
    # ZeRO-3 gathers the weights every pass: in FP8 they move half the bytes
    z_nemo, z_core = est("nemo", "fp8", 3).step.zero3_comm_s, est("megatron-core", "fp8", 3).step.zero3_comm_s
    assert 0.0 < z_nemo < z_core


def test_cross_domain_all_reduce_runs_on_the_scale_out_network():
    """One rank per ICI slice, slices a domain apart: a ring all-reduce on the DCN alone."""
    from xpuplan.train.phases import cross_domain_all_reduce_s

    c = Cluster.from_catalog("google-tpu-v5e", 8192)
    assert c.domain_size == 256
    n_bytes = np.array([1e9])
    t = cross_domain_all_reduce_s(n_bytes, c, np.array([32]), np.array([256]))
    bw_term = 2.0 * 31 / 32 * 1e9 / c.scale_out.bus_bw
    assert t[0] >= bw_term and t[0] < bw_term * 1.05
    assert cross_domain_all_reduce_s(n_bytes, c, np.array([1]), np.array([256]))[0] == 0.0


def test_maxtext_multislice_shards_inside_the_slice_and_all_reduces_across_slices():
    """MaxText multislice (ici_fsdp inside a slice, dcn_data_parallelism across): a hybrid stack
    gathers over the slice only and pays the gradient shard's all-reduce over the DCN once per step;
    inside one slice it is plain ZeRO-3."""
    mt = training_stack("maxtext")
    assert mt.zero3_hybrid
    flat = mt.model_copy(update={"zero3_hybrid": False})
    kw = dict(tp=1, pp=1, zero_stage=3, recompute="full", micro_batch=4)
    m = get_model("llama3-8b")
    job_for = lambda n: TrainingJob(seq_len=2048, global_batch_tokens=2048 * 4 * n)  # noqa: E731

    def run(n, stack):
        plan = make_plan(n_devices=n, global_batch_seqs=job_for(n).global_batch_seqs, **kw)
        return estimate(m, Cluster.from_catalog("google-tpu-v5e", n), plan, job_for(n), stack=stack)

    one_slice = run(256, mt)
    assert one_slice.step.zero3_comm_s == pytest.approx(run(256, flat).step.zero3_comm_s)
    multi = run(2048, mt)
    # the gradient shard (1/256 of the fp32 gradients) crosses the DCN: more exposed traffic than one slice
    assert multi.step.zero3_comm_s > one_slice.step.zero3_comm_s
    # with the DCN 100x slower the cross-slice all-reduce dominates the hybrid stack's communication
    slow = Cluster.from_catalog("google-tpu-v5e", 2048, scale_out_gbit_per_s=0.25)
    plan = make_plan(n_devices=2048, global_batch_seqs=job_for(2048).global_batch_seqs, **kw)
    shard_bytes = 8.0e9 * 4.0 / 256  # ~8B parameters, fp32 gradients
    ar_s = 2.0 * 7 / 8 * shard_bytes / slow.scale_out.bus_bw
    slow_e = estimate(m, slow, plan, job_for(2048), stack=mt)
    assert slow_e.step.zero3_comm_s > 0.5 * ar_s


def test_maxtext_cross_slice_all_reduce_waits_for_the_backward():
    """MaxText's DCN gradient all-reduce across slices is not hidden under the backward
    (``grad_reduce_overlap`` false): the step pays all of it, where an overlapping stack pays only
    its last bucket and the interference."""
    from xpuplan.train.phases import GRAD_REDUCE_BYTES, cross_domain_all_reduce_s

    mt = training_stack("maxtext")
    assert not mt.grad_reduce_overlap
    hiding = mt.model_copy(update={"grad_reduce_overlap": True})
    m = get_model("llama3-8b")
    kw = dict(tp=1, pp=1, zero_stage=3, recompute="full", micro_batch=4)

    def run(n, stack):
        job = TrainingJob(seq_len=2048, global_batch_tokens=2048 * 4 * n)
        plan = make_plan(n_devices=n, global_batch_seqs=job.global_batch_seqs, **kw)
        return estimate(m, Cluster.from_catalog("google-tpu-v5e", n), plan, job, stack=stack)

    one = run(256, mt)
    assert one.step.zero3_comm_s == pytest.approx(run(256, hiding).step.zero3_comm_s)  # no DCN inside a slice
    c = Cluster.from_catalog("google-tpu-v5e", 2048)
    dense = StepModel(m, c.device, c.efficiency, TrainingJob(seq_len=2048, global_batch_tokens=2048 * 4 * 2048),
                      stack=mt).params_table(PlanArrays.from_plans([make_plan(
                          n_devices=2048, global_batch_seqs=4 * 2048, **kw)]))[0][0]
    ar = cross_domain_all_reduce_s(np.array([dense * GRAD_REDUCE_BYTES / 256]), c, np.array([8]), np.array([256]))[0]
    exposed = run(2048, mt).step.zero3_comm_s - one.step.zero3_comm_s
    assert exposed == pytest.approx(ar, rel=0.05)
    assert run(2048, hiding).step.zero3_comm_s - one.step.zero3_comm_s < 0.5 * ar


def test_expert_tensor_parallel_rule_shared_by_memory_compute_and_launchers():
    from xpuplan.perf.memory import expert_tensor_parallel, training_memory
    from xpuplan.perf.params import param_breakdown

    # EP carved out of dp·cp (ep = 1 included): experts split over TP; EP folding TP ranks: whole experts
    assert expert_tensor_parallel(8, 1, 1) == 8
    assert expert_tensor_parallel(2, 16, 4) == 2
    assert expert_tensor_parallel(2, 16, 32) == 1
    assert list(expert_tensor_parallel(np.asarray([8, 2]), np.asarray([1, 16]), np.asarray([1, 32]))) == [8, 1]
    # MindSpeed's Mixtral 8x7B layout (TP8 PP4 CP2, ep 1, 64 x 64 GB Ascend 910B): its bf16 weights are
    # 46.7e9 x 2 B / 32 per device (~2.9 GB), not the 23 GB of experts replicated across the TP group
    m = get_model("mixtral-8x7b")
    mem = training_memory(m, seq_len=32768, micro_batch=1, tp=8, pp=4, cp=2, dp=1, ep=1, sp=True,
                          recompute="none", zero_stage=1, n_microbatches=128)
    total = param_breakdown(m).total
    assert mem.weights == pytest.approx(2.0 * total / 32, rel=0.1)
    # the Megatron-LM and Megatron-Bridge launch lines carry the same expert-TP
    from xpuplan.train.emit import _etp
    from xpuplan.train.plan import ParallelPlan
    core = training_stack("megatron-core")
    assert _etp(ParallelPlan(tp=8, pp=4, cp=2, dp=1, ep=1, sp=True), core) == 8
    assert _etp(ParallelPlan(tp=2, pp=8, dp=16, ep=32, sp=True), core) == 1
    # Megatron-Bridge's MoE recipes set expert-TP 1 whatever the layout (expert_tp_one)
    assert _etp(ParallelPlan(tp=2, pp=1, dp=128, ep=8, sp=True), core) == 2
    assert _etp(ParallelPlan(tp=2, pp=1, dp=128, ep=8, sp=True), training_stack("nemo")) == 1


def test_whole_experts_fold_tp_into_ep_memory_and_dispatch():
    """A stack that runs its expert layers at expert-TP 1 (Megatron-Bridge's recipes, the Megatron-Core MoE team's
    scripts) keeps whole experts on every EP rank (TP x the expert weights of the TP-split layout, sharded over an
    expert-DP group TP x larger) and takes the EP group from adjacent ranks: EP 8 stays inside an 8-GPU node where
    the TP-split layout strides it over two."""
    from xpuplan.perf.memory import expert_dp_size, expert_tensor_parallel, training_memory

    assert expert_tensor_parallel(2, 128, 8) == 2 and expert_tensor_parallel(2, 128, 8, True) == 1
    assert expert_tensor_parallel(8, 1, 1, True) == 8  # no EP: the experts stay split like a dense MLP
    assert list(expert_tensor_parallel(np.asarray([2, 4]), np.asarray([128, 8]), np.asarray([8, 8]), True)) == [1, 1]
    assert float(expert_dp_size(np.asarray([2]), np.asarray([128]), np.asarray([8]), True)[0]) == 32
    assert float(expert_dp_size(np.asarray([2]), np.asarray([128]), np.asarray([8]))[0]) == 16
    m = get_model("qwen3-235b-a22b")
    kw = dict(seq_len=4096, micro_batch=1, tp=2, pp=2, dp=64, ep=8, zero_stage=0, recompute="none")
    split, whole = training_memory(m, **kw), training_memory(m, **kw, whole_experts=True)
    assert whole.params_on_device > split.params_on_device
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 256)
    job = TrainingJob(seq_len=4096, global_batch_tokens=2048 * 4096)
    plan = make_plan(n_devices=256, global_batch_seqs=2048, tp=2, pp=2, ep=8, zero_stage=1, recompute="none")
    core = training_stack("megatron-core").model_copy(update={"moe_node_dedup": False})
    folded = core.model_copy(update={"expert_tp_one": True})
    e_split = estimate(m, c, plan, job, stack=core).step.ep_comm_s
    e_folded = estimate(m, c, plan, job, stack=folded).step.ep_comm_s
    assert e_folded < 0.5 * e_split  # NVLink inside the node instead of the network across two


# ---------------------------------------------------------------------------------------
# Attention kernel (FlashAttention-2 code vs the device's native kernels)
# ---------------------------------------------------------------------------------------
def test_fa2_stacks_time_attention_at_the_devices_fa2_fraction():
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.catalog.loader import get_device

    a = default_assumptions()
    h100 = a.efficiency(get_device("nvidia-h100-sxm-80gb"))
    a100 = a.efficiency(get_device("nvidia-a100-sxm-80gb"))
    assert h100.attention_fa2_peak_fraction is not None
    assert h100.attention_fa2_peak_fraction < h100.attention_peak_fraction  # FA2 cannot use Hopper's wgmma path
    assert h100.for_attention_kernel("fa2").attention_peak_fraction == h100.attention_fa2_peak_fraction
    assert h100.for_attention_kernel("native") == h100
    assert a100.attention_fa2_peak_fraction is None and a100.for_attention_kernel("fa2") == a100  # FA2 is Ampere's own
    assert training_stack("torchtitan").attention_kernel == "fa2"
    assert training_stack("nemo").attention_kernel == "native"

    # a long-context step: the fa2 stack spends longer in attention on H100, the same on A100
    m = get_model("llama3.1-8b")
    job = TrainingJob(seq_len=65536, global_batch_tokens=8 * 65536)

    def compute_s(hw: str, stack: str) -> float:
        c = Cluster.from_catalog(hw, 8)
        plan = make_plan(n_devices=8, global_batch_seqs=8, tp=1, cp=8, zero_stage=3, recompute="full")
        return estimate(m, c, plan, job, stack=training_stack(stack)).step.compute_s

    assert compute_s("nvidia-h100-sxm-80gb", "torchtitan") > 1.2 * compute_s("nvidia-h100-sxm-80gb", "megatron-core")
    a100_tt, a100_mc = compute_s("nvidia-a100-sxm-80gb", "torchtitan"), compute_s("nvidia-a100-sxm-80gb", "megatron-core")
    assert a100_tt == pytest.approx(a100_mc, rel=0.05)


def test_flashattention_1_generation_kernels_run_at_a_share_of_the_fa2_fraction():
    """llm-foundry's published MPT runs used its Triton FlashAttention (attn_impl triton): the llm-foundry stack
    times attention at fa1_factor x the FlashAttention-2 fraction, on Hopper (FA2 slower than native) and on
    Ampere (FA2 is native) alike; a long-context step of that stack is slower than the fsdp stack's."""
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.catalog.loader import get_device
    from xpuplan.catalog.stacks import stack_for_framework

    a = default_assumptions()
    h100 = a.efficiency(get_device("nvidia-h100-sxm-80gb"))
    a100 = a.efficiency(get_device("nvidia-a100-sxm-80gb"))
    assert 0 < h100.fa1_factor < 1
    assert h100.for_attention_kernel("fa1").attention_peak_fraction == pytest.approx(
        h100.attention_fa2_peak_fraction * h100.fa1_factor)
    assert a100.for_attention_kernel("fa1").attention_peak_fraction == pytest.approx(
        a100.attention_peak_fraction * a100.fa1_factor)
    assert stack_for_framework("llm-foundry (Composer FSDP)").id == "llm-foundry"
    assert stack_for_framework("PyTorch FSDP (Composer)").id == "fsdp"
    assert training_stack("llm-foundry").attention_kernel == "fa1"

    m = get_model("llama3.1-8b")
    # long context, without context parallelism (llm-foundry's Composer FSDP has none)
    job = TrainingJob(seq_len=32768, global_batch_tokens=8 * 32768)
    c = Cluster.from_catalog("nvidia-a100-sxm-80gb", 8)
    plan = make_plan(n_devices=8, global_batch_seqs=8, tp=1, cp=1, zero_stage=3, recompute="full")
    fa1, fa2 = (estimate(m, c, plan, job, stack=training_stack(s)).step.compute_s for s in ("llm-foundry", "fsdp"))
    assert fa1 > 1.2 * fa2


def test_metas_2024_stack_times_attention_as_flashattention_2_on_hopper():
    """Llama 3's pre-training stack (meta-4d) predates FlashAttention-3 and PyTorch's cuDNN attention on H100:
    its attention runs at the FlashAttention-2 fraction, so a 128K-token step (attention-heavy) is slower than the
    same stack with the native (cuDNN) kernels, by more than an 8K step is."""
    from xpuplan.catalog.stacks import stack_for_framework

    meta = training_stack("meta-4d")
    assert meta.attention_kernel == "fa2"
    assert stack_for_framework("Meta internal PyTorch stack (4D parallelism: TP, CP, PP, sharded DP)").id == "meta-4d"
    native = meta.model_copy(update={"attention_kernel": "native"})
    m = get_model("llama3.1-405b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 2048)

    def slowdown(seq: int, cp: int) -> float:
        job = TrainingJob(seq_len=seq, global_batch_tokens=16 * seq * 2048 // (8 * 16 * cp))
        plan = make_plan(n_devices=2048, global_batch_seqs=job.global_batch_tokens // seq, tp=8, pp=16, cp=cp,
                         sp=True, zero_stage=2, recompute="none", micro_batch=1)
        fa2, nat = (estimate(m, c, plan, job, stack=s, uneven_pipeline=True).step.compute_s for s in (meta, native))
        return fa2 / nat

    long_ctx, short_ctx = slowdown(131072, 16), slowdown(8192, 1)
    assert long_ctx > short_ctx > 1.0
    assert long_ctx > 1.1


def test_ep_overlap_cannot_hide_more_than_the_other_micro_batchs_compute():
    # Qwen3-235B with EP 32 across four H100 nodes: the all-to-alls outweigh the compute they could hide under
    m = get_model("qwen3-235b-a22b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 256)
    plan = make_plan(n_devices=256, global_batch_seqs=2048, tp=2, pp=8, ep=32, micro_batch=1, precision="fp8")

    def est(overlap: float):
        job = TrainingJob(seq_len=4096, global_batch_tokens=2048 * 4096, ep_overlap=overlap)
        return estimate(m, c, plan, job, uneven_pipeline=True)

    none, hidden = est(0.0), est(0.9)
    total = none.step.ep_comm_s
    assert total > none.step.compute_s  # communication-bound
    exposed = max(0.1 * total, total - none.step.compute_s)
    share = EP_OVERLAP_SM_SHARE  # the hidden rest costs the compute under it the exchange kernels' SMs
    assert hidden.step.ep_comm_s == pytest.approx(exposed + (total - exposed) * share, rel=0.02)
    assert hidden.step.ep_comm_s > 0.1 * total



def test_combined_1f1b_pairs_all_but_the_warm_up_and_cool_down_passes():
    from xpuplan.train.phases import ep_overlap_paired_fraction

    def paired(m: int, pp: int, vpp: int) -> float:
        return float(ep_overlap_paired_fraction(np.array([float(m)]), np.array([float(pp)]), np.array([float(vpp)]))[0])

    # no pipeline: the first forward and the last backward run alone
    assert paired(5, 1, 1) == pytest.approx(4 / 5)
    assert paired(128, 1, 1) == pytest.approx(127 / 128)
    # interleaved: 2(pp-1-rank) + (vpp-1)·pp + 1 warm-up forwards, (pp-1) + (vpp-1)·pp + 1 on average
    assert paired(64, 4, 12) == pytest.approx(1 - (3 + 11 * 4 + 1) / (64 * 12))
    # more warm-up than passes: nothing pairs
    assert paired(2, 8, 4) == 0.0
    # more micro-batches hide more
    assert paired(8, 1, 1) < paired(16, 1, 1) < paired(64, 1, 1)


def test_megatron_ep_overlap_leaves_the_unpaired_passes_exposed():
    # nemo's batch-level overlap (combined 1F1B) against the same overlap applied to every pass
    m = get_model("qwen3-30b-a3b")
    c = Cluster.from_catalog("nvidia-gb200-186gb", 8)
    plan = make_plan(n_devices=8, global_batch_seqs=40, tp=1, ep=8, micro_batch=1, precision="fp8")
    job = TrainingJob(seq_len=4096, global_batch_tokens=40 * 4096, ep_overlap=1.0)
    nemo = training_stack("nemo")
    assert nemo.ep_overlap_schedule == "combined_1f1b"
    assert training_stack("deepseek-dualpipe").ep_overlap_schedule == "steady"
    none = estimate(m, c, plan, job.model_copy(update={"ep_overlap": 0.0}), stack=nemo).step.ep_comm_s
    combined = estimate(m, c, plan, job, stack=nemo).step.ep_comm_s
    steady = estimate(m, c, plan, job, stack=nemo.model_copy(update={"ep_overlap_schedule": "steady"})).step.ep_comm_s
    share = nemo.ep_overlap_sm_share
    # 5 micro-batches per replica: 1 of 5 forwards and backwards alone
    assert steady == pytest.approx(share * none)
    assert combined == pytest.approx(none / 5 + share * none * 4 / 5)


# ---------------------------------------------------------------------------------------
# op-level selective activation checkpointing (torchtitan)
# ---------------------------------------------------------------------------------------
def test_op_sac_shares_follow_torchtitan_policy():
    from xpuplan.train.compute import op_sac_linear_flops_share, op_sac_linear_shares

    llama = get_model("llama3-8b")  # 32 q heads, 8 kv heads of 128; gated MLP
    qkv, up = op_sac_linear_shares(llama, "bf16")
    assert qkv == pytest.approx(1024 / (4096 + 1024 + 1024)) and up == 0.5  # wk and w3 run again
    assert op_sac_linear_shares(llama, "fp8") == (1.0, 1.0)  # torch._scaled_mm is not saved
    gpt = get_model("gpt3-175b")  # non-gated MLP: w2's output is not needed, w1 is saved
    assert op_sac_linear_shares(gpt, "bf16")[1] == 0.0
    assert 0.2 < op_sac_linear_flops_share(llama, "bf16") < op_sac_linear_flops_share(llama, "fp8") < 1.0
    assert training_stack("torchtitan").selective_recompute == "op_sac"
    assert training_stack("megatron-core").selective_recompute == "attention"


def test_op_sac_recomputes_projections_and_sequence_parallel_all_gathers():
    m = get_model("llama3-8b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 64)
    job = TrainingJob(seq_len=8192, global_batch_tokens=96 * 8192)
    plan = make_plan(n_devices=64, global_batch_seqs=96, tp=8, zero_stage=3, recompute="selective", micro_batch=12)
    core = training_stack("megatron-core")
    sac = core.model_copy(update={"selective_recompute": "op_sac"})
    a, b = estimate(m, c, plan, job, stack=core), estimate(m, c, plan, job, stack=sac)
    assert b.step.recompute_s > a.step.recompute_s > 0  # K and w3 projections + elementwise vs the attention core
    assert b.step.tp_comm_s > a.step.tp_comm_s  # the two all-gathers run again
    assert b.step.compute_s == pytest.approx(a.step.compute_s)  # forward and backward unchanged
    assert b.hfu / b.mfu > a.hfu / a.mfu  # the recomputed projections count as hardware FLOPs (more than attention)
    # without recomputation the two stacks agree
    none = make_plan(n_devices=64, global_batch_seqs=96, tp=8, zero_stage=3, recompute="none", micro_batch=12)
    assert estimate(m, c, none, job, stack=sac).step.step_s == pytest.approx(estimate(m, c, none, job, stack=core).step.step_s)


def test_te_stacks_all_gather_the_quantized_input_in_fp8_and_fp4():
    """Transformer Engine (and torchao's float8 TP) quantizes before the sequence-parallel all-gather (FP8 ~1 B, NVFP4 ~0.56 B per element);
    the reduce-scatter stays 16-bit: without overlap the TP traffic is (q + 2) / 4 of the bf16 volume. Devices that
    do not run TE (Gaudi) gather 16-bit whatever the stack says."""
    m = get_model("llama3-70b")
    job = TrainingJob(seq_len=8192, global_batch_tokens=64 * 8192, tp_overlap=0.0)
    nemo = training_stack("nemo")
    assert nemo.tp_quantized_all_gather and training_stack("megatron-core").tp_quantized_all_gather
    assert training_stack("torchtitan").tp_quantized_all_gather  # torchao's PrepareFloat8ModuleInput
    assert not training_stack("mindspeed-mcore").tp_quantized_all_gather
    plain = nemo.model_copy(update={"tp_quantized_all_gather": False})
    for precision in ("fp8", "fp4"):
        c = Cluster.from_catalog("nvidia-b200-180gb", 8)
        plan = make_plan(n_devices=8, global_batch_seqs=64, tp=8, precision=precision, zero_stage=1)
        with_q = estimate(m, c, plan, job, stack=nemo).step.tp_comm_s
        without = estimate(m, c, plan, job, stack=plain).step.tp_comm_s
        gather = 1.0 + 1.0 / 32.0 if precision == "fp8" else 0.5 + 1.0 / 16.0
        assert with_q < without
        assert with_q / without == pytest.approx((gather + 2.0) / 4.0, rel=0.15)  # latency terms are not scaled
    bf16 = make_plan(n_devices=8, global_batch_seqs=64, tp=8, precision="bf16", zero_stage=1)
    c = Cluster.from_catalog("nvidia-b200-180gb", 8)
    assert estimate(m, c, bf16, job, stack=nemo).step.tp_comm_s == estimate(m, c, bf16, job, stack=plain).step.tp_comm_s
    gaudi = Cluster.from_catalog("intel-gaudi3", 8)
    fp8 = make_plan(n_devices=8, global_batch_seqs=64, tp=8, precision="fp8", zero_stage=1)
    assert estimate(m, gaudi, fp8, job, stack=nemo).step.tp_comm_s == estimate(m, gaudi, fp8, job,
                                                                                stack=plain).step.tp_comm_s


def test_expected_nodes_hit_is_the_hypergeometric_mean():
    """perf.ops.expected_groups_hit, as training uses it for the nodes an EP group spans (scalars too)."""
    from math import comb

    from xpuplan.perf.ops import expected_groups_hit as expected_nodes_hit

    # 8 of 128 experts over 4 nodes of 32: each node is missed with probability C(96, 8) / C(128, 8)
    want = 4 * (1 - comb(96, 8) / comb(128, 8))
    assert float(expected_nodes_hit(128, 8, np.asarray([4.0]))[0]) == pytest.approx(want)
    assert 3.5 < want < 3.7
    # one node is always hit; many nodes: at most top_k of them
    assert float(expected_nodes_hit(128, 8, np.asarray([1.0]))[0]) == pytest.approx(1.0)
    assert float(expected_nodes_hit(256, 8, np.asarray([32.0]))[0]) < 8.0
    # as many nodes as experts: every expert on its own node, exactly top_k of them hit
    assert float(expected_nodes_hit(16, 4, np.asarray([16.0]))[0]) == pytest.approx(4.0)


def test_node_dedup_sends_fewer_copies_when_experts_cluster_on_few_nodes():
    from xpuplan.train.phases import moe_dispatch_dedup_s

    m = get_model("qwen3-235b-a22b")  # 128 experts, top-8, no node limit
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 256)
    nbytes = np.asarray([2048 * 8 * 4096 * 2.0])
    t = float(moe_dispatch_dedup_s(nbytes, m, c, np.asarray([32]), np.asarray([1]))[0])  # 4 nodes of 8
    hit = 4 * (1 - __import__("math").comb(96, 8) / __import__("math").comb(128, 8))
    net = nbytes[0] / 8 * hit * 3 / 4 / c.scale_out.bus_bw
    assert t >= net
    assert t < nbytes[0] / 8 * 4 * 3 / 4 / c.scale_out.bus_bw  # below the one-copy-per-node bound


def test_megatron_fsdp_does_not_gather_again_for_the_recomputed_forward():
    """Megatron-FSDP keeps a unit's weights gathered from the pre-backward gather through the recomputed forward and
    the backward (resharded post-backward); DeepSpeed-style ZeRO-3 gathers them once more for the re-run forward."""
    m = get_model("llama3-70b")
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 256)
    job = TrainingJob(seq_len=4096, global_batch_tokens=512 * 4096)
    base = training_stack("megatron-core").model_copy(update={"zero3_prefetch": False})
    assert base.zero3_regather_on_recompute is False and training_stack("deepspeed").zero3_regather_on_recompute
    again = base.model_copy(update={"zero3_regather_on_recompute": True})
    full = make_plan(n_devices=256, global_batch_seqs=512, tp=1, pp=1, zero_stage=3, recompute="full")
    none = make_plan(n_devices=256, global_batch_seqs=512, tp=1, pp=1, zero_stage=3, recompute="none")
    assert estimate(m, c, full, job, stack=again).step.zero3_comm_s > estimate(m, c, full, job, stack=base).step.zero3_comm_s
    assert estimate(m, c, none, job, stack=again).step.zero3_comm_s == pytest.approx(
        estimate(m, c, none, job, stack=base).step.zero3_comm_s)


def test_grouped_expert_gemm_stacks_pay_no_launch_per_expert():
    """torchtitan (torch._grouped_mm) and DeepSeek (DeepGEMM) run each expert GEMM as one grouped kernel;
    Transformer Engine's GroupedLinear launches one GEMM per local expert, each with the kernel overhead."""
    from xpuplan.catalog import get_device
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.perf.ops import routed_rows
    from xpuplan.train.compute import layer_compute

    assert training_stack("torchtitan").expert_gemm == "grouped"
    assert training_stack("deepseek-dualpipe").expert_gemm == "grouped"
    assert training_stack("nemo").expert_gemm == "per_expert" == training_stack("megatron-core").expert_gemm
    m = get_model("qwen3-30b-a3b")
    dev = get_device("nvidia-h100-sxm-80gb")
    eff = default_assumptions().efficiency(dev)
    kw = dict(micro_batch=1, seq_len=4096, tp=1, cp=1, ep=1, sp=False, precision="bf16")
    loop = layer_compute(m, dev, eff, **kw)
    grouped = layer_compute(m, dev, eff, **kw, grouped_expert_gemm=True)
    touched, _ = routed_rows(128, 8, 4096 * 8)
    assert loop.moe_gemm - grouped.moe_gemm == pytest.approx(2 * (touched - 1) * eff.kernel_overhead_s)
    assert grouped.dense_gemm == loop.dense_gemm
    # the stack property reaches the step: the same torchtitan plan, with the loop instead, is slower
    c = Cluster.from_catalog("nvidia-h100-sxm-80gb", 8)
    job = TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096)
    plan = make_plan(n_devices=8, global_batch_seqs=64, tp=1, pp=1, ep=1, zero_stage=3, model=m)  # FSDP2
    tt = training_stack("torchtitan")
    t_grouped = estimate(m, c, plan, job, stack=tt).step.compute_s
    t_loop = estimate(m, c, plan, job, stack=tt.model_copy(update={"expert_gemm": "per_expert"})).step.compute_s
    assert t_loop > t_grouped


def test_expert_gemm_override_names_its_field(tmp_path):
    from xpuplan.catalog.assumptions import load_assumptions

    f = tmp_path / "a.yaml"
    f.write_text("training_stacks:\n  nemo:\n    expert_gemm: batched\n")
    with pytest.raises(UserInputError, match="training_stacks.nemo.expert_gemm"):
        load_assumptions([f])


def test_expected_groups_hit_takes_scalars():
    from xpuplan.perf.ops import expected_groups_hit

    assert isinstance(expected_groups_hit(128, 8, 2), float)
    assert expected_groups_hit(128, 8, 2) == pytest.approx(2 * (1 - 0.5 ** 8), rel=0.01)
