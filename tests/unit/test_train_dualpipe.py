"""DualPipe (DeepSeek-V3, arXiv 2412.19437 sec. 3.2.1 and Table 2; deepseek-ai/DualPipe README): its bubble
(PP/2 - 1)(F&B + B - 3W) against 1F1B's (PP - 1)(F + B), and its memory: two stages' parameters per rank, the
embedding and the output head on the same rank, PP + 1 micro-batches of activations."""

from __future__ import annotations

import numpy as np
import pytest

from xpuplan.catalog.stacks import training_stack
from xpuplan.models import get_model
from xpuplan.perf.memory import dualpipe_layer_microbatches, params_per_device, training_memory
from xpuplan.perf.params import param_breakdown
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.train.phases import dualpipe_bubble_s
from xpuplan.workload.training import TrainingJob


def test_the_formula():
    # F = 1, B = 2 (full backward), W = 1 (its weight half): (16/2 - 1) * ((1 + 2) + 2 - 3) = 14
    assert float(dualpipe_bubble_s(np.array([16.0]), np.array([1.0]), np.array([2.0]), np.array([1.0]))[0]) == 14.0
    # two stages: none; 1F1B would idle (2 - 1)(1 + 2) = 3
    assert float(dualpipe_bubble_s(np.array([2.0]), np.array([1.0]), np.array([2.0]), np.array([1.0]))[0]) == 0.0


@pytest.mark.parametrize("pp", [2, 16])
def test_the_dualpipe_stack_idles_less_than_1f1b(pp: int):
    m = get_model("deepseek-v3")
    c = Cluster.from_catalog("nvidia-h800-sxm-80gb", 2048)
    job = TrainingJob(seq_len=4096, global_batch_tokens=16384 * 4096)  # an even number of micro-batches >= 2·pp
    plan = make_plan(n_devices=2048, global_batch_seqs=16384, pp=pp, ep=64, zero_stage=1, precision="fp8",
                     recompute="selective", model=m, uneven_pipeline=True, micro_batch=1)
    dual = training_stack("deepseek-dualpipe")
    one = dual.model_copy(update={"pipeline_schedule": "1f1b"})
    d = estimate(m, c, plan, job, stack=dual, uneven_pipeline=True)
    o = estimate(m, c, plan, job, stack=one, uneven_pipeline=True)
    assert d.step.compute_s == pytest.approx(o.step.compute_s)  # the compute is the same; the bubble is not
    assert o.step.bubble_s > 0
    if pp == 2:
        assert d.step.bubble_s == 0.0
    else:  # (pp/2 - 1)(F + 2B - 3W) against (pp - 1)(F + B): well under half
        assert d.step.bubble_s < 0.5 * o.step.bubble_s
    assert d.memory.total_bytes > o.memory.total_bytes  # two stages' parameters, one more micro-batch


def test_a_rank_holds_two_stages_and_the_edge_rank_both_ends():
    m = get_model("llama3.1-8b")  # 32 layers: an even pipeline of 8 stages, 4 layers each
    b = param_breakdown(m)
    one = params_per_device(m, pp=8)
    two = params_per_device(m, pp=8, dualpipe=True)
    layer = (one.dense - max(b.embedding, b.output_head)) / 4
    # the edge rank (stages 0 and 7): 8 layers, the embedding and the output head
    assert two.dense == pytest.approx(8 * layer + b.embedding + b.output_head)
    # two stages: the whole model on each rank, as without pipelining
    assert params_per_device(m, pp=2, dualpipe=True).total == pytest.approx(params_per_device(m, pp=1).total)
    # no pipeline: DualPipe changes nothing
    assert params_per_device(m, pp=1, dualpipe=True) == params_per_device(m, pp=1)


def test_an_uneven_pipeline_leaves_the_missing_layers_on_the_edge_stages():
    m = get_model("deepseek-v3")  # 61 layers on 16 stages of at most 4: 3 missing, on stages 0 and 15
    b = param_breakdown(m)
    inner = params_per_device(m, pp=16, ep=64, dualpipe=True)
    per_layer = params_per_device(m, pp=61, ep=64)  # one layer and the larger end
    layer_dense = per_layer.dense - max(b.embedding, b.output_head)
    edge_total = 5 * (layer_dense + per_layer.expert) + b.embedding + b.output_head
    inner_total = 8 * (layer_dense + per_layer.expert)
    assert inner.total == pytest.approx(max(edge_total, inner_total))


def test_dualpipe_holds_pp_plus_one_micro_batches_and_shards_states_over_both_copies():
    m = get_model("llama3.1-8b")
    kw = dict(seq_len=4096, micro_batch=1, tp=1, pp=8, dp=4, zero_stage=1, recompute="selective", n_microbatches=32)
    one = training_memory(m, **kw)
    two = training_memory(m, **kw, dualpipe=True)
    # 1F1B's first stage: 8 micro-batches of 4 layers; DualPipe: 9
    assert [float(x) for x in dualpipe_layer_microbatches(32, np.asarray(8), np.asarray(32))] == [36.0, 36.0]
    # 61 layers on 16 stages: inner stages of 4; the edge rank's deeper edge stage 4 - floor(3/2) = 3
    assert [float(x) for x in dualpipe_layer_microbatches(61, np.asarray(16), np.asarray(120))] == [68.0, 51.0]
    # the edge rank (stages 0 and 7, 4 layers each) also holds the logits of the direction it ends
    per_layer = one.activations / 32
    logits = 4096 * m.vocab_size * (2 + 4)
    assert two.activations == pytest.approx(36 * per_layer + logits)
    dual_params = params_per_device(m, pp=8, dualpipe=True).total
    assert two.weights == pytest.approx(dual_params * 2)  # bf16, both stages
    # ZeRO-1 shards the fp32 master copy over the stage's two copies' data-parallel ranks: 2·dp
    assert two.master_weights == pytest.approx(dual_params * 4 / (2 * 4))
    # fewer micro-batches than pp + 1: only those
    few = training_memory(m, **{**kw, "n_microbatches": 4}, dualpipe=True)
    assert few.activations == pytest.approx(4 * 4 * per_layer + logits)


def test_deepseeks_published_layout_still_fits_with_dualpipes_memory():
    """DeepSeek: two copies 'does not significantly increase the memory consumption since we use a large EP
    size' (sec. 3.2.1): PP16 EP64 on 2,048 H800 fits with the two stages' parameters and PP + 1 micro-batches,
    recomputing what the report recomputes (RMSNorm, MLA up-projections, the experts' SwiGLU output)."""
    m = get_model("deepseek-v3")
    c = Cluster.from_catalog("nvidia-h800-sxm-80gb", 2048)
    job = TrainingJob(seq_len=4096, global_batch_tokens=15360 * 4096,
                      recompute_modules=("layernorm", "mla_up_proj", "moe_act"))
    plan = make_plan(n_devices=2048, global_batch_seqs=15360, pp=16, ep=64, zero_stage=1, precision="fp8",
                     recompute="selective", model=m, uneven_pipeline=True, micro_batch=1)
    dual = training_stack("deepseek-dualpipe")
    d = estimate(m, c, plan, job, stack=dual, uneven_pipeline=True)
    o = estimate(m, c, plan, job, stack=dual.model_copy(update={"pipeline_schedule": "1f1b"}), uneven_pipeline=True)
    assert d.feasible
    assert d.memory.weights_bytes > 1.3 * o.memory.weights_bytes
    # 1F1B's busiest stage: max(2 layers x 16, 4 layers x 15) = 60 layer-micro-batches; DualPipe's: 4 x 17 = 68
    assert d.memory.activations_bytes == pytest.approx(o.memory.activations_bytes * 68 / 60)


def test_dualpipes_own_asserts_are_plan_rules():
    from xpuplan.train import validity

    dual = training_stack("deepseek-dualpipe")
    assert validity.rule_dualpipe(16, 1, 120, dual) is None
    assert validity.rule_dualpipe(1, 1, 1, dual) is None  # no pipeline: no DualPipe
    assert validity.rule_dualpipe(3, 1, 120, training_stack("megatron-core")) is None  # 1F1B: not its rules
    assert validity.rule_dualpipe(6, 1, 24, dual) is None
    issue = validity.rule_dualpipe(3, 1, 120, dual)
    assert issue is not None and issue.field == "pp"
    issue = validity.rule_dualpipe(4, 2, 120, dual)
    assert issue is not None and issue.field == "vpp"
    for m in (6, 9):  # fewer than 2·pp, or odd
        issue = validity.rule_dualpipe(4, 1, m, dual)
        assert issue is not None and issue.field == "micro_batch" and "2·pp = 8" in issue.message


def test_estimate_and_search_keep_to_dualpipes_rules():
    from xpuplan.errors import UserInputError
    from xpuplan.train import SearchSpace, search_plans

    m = get_model("deepseek-v3")
    c = Cluster.from_catalog("nvidia-h800-sxm-80gb", 256)
    job = TrainingJob(seq_len=4096, global_batch_tokens=1024 * 4096)
    dual = training_stack("deepseek-dualpipe")
    plan = make_plan(n_devices=256, global_batch_seqs=1024, pp=4, ep=64, zero_stage=1, precision="fp8",
                     recompute="selective", model=m, uneven_pipeline=True, micro_batch=16)  # 1024 / (dp 64 · 16): one
    with pytest.raises(UserInputError) as err:
        estimate(m, c, plan, job, stack=dual, uneven_pipeline=True)
    assert err.value.field == "micro_batch"
    c, job = Cluster.from_catalog("nvidia-h800-sxm-80gb", 384), TrainingJob(seq_len=4096, global_batch_tokens=1536 * 4096)
    space = SearchSpace(pp=(2, 3, 4), uneven_pipeline=True, precision=("fp8",))
    res = search_plans(m, c, job, stack=dual, space=space, top=2000, require_feasible=False)
    assert {e.plan.pp for e in res.top} == {2, 4}  # no odd pipeline
    for p in (e.plan for e in res.top):
        assert p.vpp == 1 and p.grad_accum % 2 == 0 and p.grad_accum >= 2 * p.pp
    one_f_one_b = search_plans(m, c, job, stack=dual.model_copy(update={"pipeline_schedule": "1f1b"}), space=space,
                               top=2000, require_feasible=False)
    assert 3 in {e.plan.pp for e in one_f_one_b.top}  # the same space under 1F1B has odd pipelines
    odd = search_plans(m, c, job, stack=dual, space=SearchSpace(pp=(3,), uneven_pipeline=True, precision=("fp8",)))
    assert not odd.top and any("DualPipe" in r and "even pp" in r for r in odd.reasons)  # says why nothing came back


def test_an_unpipelined_overlap_needs_a_second_micro_batch():
    """The DualPipe stack's overlap pairs one micro-batch's passes with another's: a rank running one micro-batch
    per step without a pipeline has nothing to pair, m micro-batches pair m - 1 times."""
    m = get_model("deepseek-v3")
    c = Cluster.from_catalog("nvidia-h800-sxm-80gb", 256)
    dual = training_stack("deepseek-dualpipe")
    none = dual.model_copy(update={"ep_overlap": 0.0})

    def ep_s(stack, ga: int) -> float:
        job = TrainingJob(seq_len=4096, global_batch_tokens=256 * ga * 4096)
        plan = make_plan(n_devices=256, global_batch_seqs=256 * ga, pp=1, ep=64, zero_stage=1, precision="fp8",
                         recompute="selective", model=m, micro_batch=1)
        return estimate(m, c, plan, job, stack=stack).step.ep_comm_s / ga

    assert ep_s(dual, 1) == pytest.approx(ep_s(none, 1))
    assert ep_s(dual, 4) < 0.6 * ep_s(none, 4)


def test_a_launch_command_says_it_runs_1f1b_where_the_estimate_ran_dualpipe():
    from xpuplan.train import emit_launch

    m = get_model("deepseek-v3")
    c = Cluster.from_catalog("nvidia-h800-sxm-80gb", 2048)
    job = TrainingJob(seq_len=4096, global_batch_tokens=15360 * 4096)
    plan = make_plan(n_devices=2048, global_batch_seqs=15360, pp=16, ep=64, zero_stage=1, precision="fp8",
                     recompute="selective", model=m, uneven_pipeline=True, micro_batch=1)
    dual = emit_launch(plan, m, c, job, "megatron", stack=training_stack("deepseek-dualpipe"))
    assert any("no DualPipe" in n and "1F1B" in n for n in dual.notes)
    plain = emit_launch(plan, m, c, job, "megatron", stack=training_stack("megatron-core"))
    assert not any("DualPipe" in n for n in plain.notes)
