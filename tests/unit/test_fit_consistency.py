"""One validity module and one memory model per planner: the fit functions front ends call agree
with the estimators on every layout (issue 9, section 7: `memory train --tp 1024` said "fits")."""

from __future__ import annotations

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.models import get_model
from xpuplan.perf.memory import inference_memory, training_memory
from xpuplan.serve.estimate import estimate as serve_estimate
from xpuplan.serve.fit import replica_fit
from xpuplan.serve.kv import memory_plan
from xpuplan.serve.plan import ServingPlan
from xpuplan.serve.replica import make_replica
from xpuplan.train import Cluster, ParallelPlan, estimate
from xpuplan.train.fit import training_fit
from xpuplan.train.validity import PlanIssue, plan_issues, rule_global_batch
from xpuplan.workload.training import TrainingJob


@pytest.mark.parametrize("tp", [1024, 65, 3])
def test_training_fit_rejects_what_estimate_rejects(tp):
    m = get_model("llama3-70b")
    dev = load_catalog().get("H100")
    plan = ParallelPlan(tp=tp)
    job = TrainingJob(seq_len=4096, global_batch_tokens=4096 * 8)
    with pytest.raises(UserInputError) as a:
        training_fit(m, dev, plan, job)
    with pytest.raises(UserInputError) as b:
        estimate(m, Cluster.from_catalog(dev, tp), plan, job)
    assert a.value.field == b.value.field == "tp"


@pytest.mark.parametrize("plan", [
    ParallelPlan(tp=8, pp=4, dp=2, micro_batch=1, grad_accum=8, zero_stage=1),
    ParallelPlan(tp=8, pp=1, dp=8, micro_batch=2, grad_accum=4, zero_stage=3, recompute="full"),
    ParallelPlan(tp=4, pp=2, dp=8, vpp=2, micro_batch=1, grad_accum=8, zero_stage=2, recompute="none"),
])
def test_training_fit_equals_estimate_memory(plan):
    m = get_model("llama3-70b")
    dev = load_catalog().get("H100")
    job = TrainingJob(seq_len=4096, global_batch_tokens=4096 * plan.global_batch_seqs)
    fit = training_fit(m, dev, plan, job, n_devices=plan.n_devices, check_global_batch=True)
    est = estimate(m, Cluster.from_catalog(dev, plan.n_devices), plan, job)
    assert fit.memory == est.memory
    assert fit.fits == est.feasible


def test_scalar_training_memory_is_the_vectorised_model():
    m = get_model("mixtral-8x7b")
    dev = load_catalog().get("H100")
    plan = ParallelPlan(tp=2, pp=4, dp=4, ep=4, micro_batch=1, grad_accum=4, zero_stage=1, sp=True, recompute="full")
    job = TrainingJob(seq_len=4096, global_batch_tokens=4096 * plan.global_batch_seqs)
    fit = training_fit(m, dev, plan, job)
    scalar = training_memory(m, seq_len=4096, micro_batch=1, tp=2, pp=4, dp=4, ep=4, zero_stage=1, sp=True,
                             recompute="full", n_microbatches=4)
    assert scalar.total == pytest.approx(fit.memory.total_bytes, rel=1e-12)
    assert scalar.activations == pytest.approx(fit.memory.activations_bytes, rel=1e-12)


def test_global_batch_smaller_than_dp_names_the_batch():
    issue = rule_global_batch(dp=8, micro_batch=1, grad_accum=1, global_batch_seqs=1)
    assert isinstance(issue, PlanIssue) and issue.field == "global_batch"
    m = get_model("llama3-8b")
    issues = plan_issues(ParallelPlan(dp=8), m, seq_len=4096, global_batch_seqs=1)
    assert [i.field for i in issues] == ["global_batch"]


@pytest.mark.parametrize("hw,tp", [("910B", 3), ("H100", 5)])
def test_serving_layouts_rejected_everywhere(hw, tp):
    m = get_model("llama3-70b")
    dev = load_catalog().get(hw)
    with pytest.raises(UserInputError) as e:
        make_replica(m, dev, tp=tp)
    assert e.value.field == "tp"
    assert [i.field for i in ServingPlan(tp=tp).issues(m)] == ["tp"]


@pytest.mark.parametrize("hw,tp,batch,context", [("H100", 1, 1, 4096), ("H100", 4, 64, 8192), ("910B", 8, 512, 8192),
                                                 ("A100", 2, 256, 4096)])
def test_replica_fit_agrees_with_estimate(hw, tp, batch, context):
    m = get_model("llama3-70b")
    rep = ServingPlan(tp=tp, dtype="bf16").replica(m, load_catalog().get(hw))
    out_len = 128
    in_len = context - out_len
    fit = replica_fit(rep, sequences=batch, tokens_per_sequence=context,
                      tokens_per_forward=min(batch * in_len, rep.engine.prefill_chunk_tokens))
    try:
        serve_estimate(rep, in_len, out_len, batch, mode="static")
        ok = True
    except InfeasibleError:
        ok = False
    assert fit.fits == ok
    if ok:
        assert fit.max_sequences >= batch


def test_perf_inference_memory_is_the_serving_memory_model():
    m = get_model("mixtral-8x7b")
    rep = make_replica(m, load_catalog().get("H100"), tp=2, ep=2, dtype="fp8")
    plan = memory_plan(rep)
    mem = inference_memory(m, weight_dtype=rep.precision.weight_dtype, kv_dtype=rep.precision.kv_dtype, tp=2, ep=2,
                           prefill_chunk=rep.engine.prefill_chunk_tokens)
    assert mem.weights == pytest.approx(plan.weights_bytes, rel=1e-12)
    assert mem.activations == pytest.approx(plan.activation_bytes, rel=1e-12)
    assert mem.kv_bytes_per_token == pytest.approx(plan.kv_bytes_per_token, rel=1e-12)


def test_serving_plan_is_a_validated_value_object():
    with pytest.raises(UserInputError) as e:
        ServingPlan(tp=0)
    assert e.value.field == "tp"
    with pytest.raises(UserInputError) as e:
        ServingPlan(memory_fraction=1.5)
    assert e.value.field == "memory_fraction"
    with pytest.raises(UserInputError):
        ServingPlan(batching="eager")  # type: ignore[arg-type]
    rep = ServingPlan(tp=8, dtype="fp8").replica(get_model("llama3-70b"), load_catalog().get("H100"))
    assert rep.plan.tp == 8 and rep.plan.engine == rep.engine.id
    assert rep.plan.replica(rep.model, rep.device).key == rep.key
