"""Megatron-Core's opt-in batch-level MoE all-to-all overlap as a plan attribute the search explores
(``ParallelPlan.ep_overlap``, ``TrainingStack.ep_overlap_opt_in``; docs/training.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from xpuplan.catalog.stacks import training_stack
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.train import Cluster, ParallelPlan, SearchSpace, emit_launch, search_plans
from xpuplan.train.arrays import PlanArrays
from xpuplan.train.search import enumerate_plans
from xpuplan.train.step import StepModel
from xpuplan.workload.training import TrainingJob

MODEL = "qwen3-30b-a3b"
JOB = TrainingJob(seq_len=4096, global_batch_tokens=256 * 4096)


def _plan(**kw) -> ParallelPlan:
    base = dict(tp=1, pp=1, dp=16, ep=16, zero_stage=1, recompute="none", micro_batch=1, grad_accum=16)
    base.update(kw)
    return ParallelPlan(**base)


def test_a_plan_with_the_overlap_follows_megatron_cores_rules():
    assert _plan(ep_overlap=True).key.endswith("-epo")
    assert not _plan().key.endswith("-epo")  # keys of plans without it are unchanged
    for bad in (dict(ep=1), dict(recompute="full"), dict(pp=2, dp=8, ep=8, grad_accum=32)):
        with pytest.raises(UserInputError) as err:
            _plan(ep_overlap=True, **bad)
        assert err.value.field == "ep_overlap"
    assert _plan(ep_overlap=True, pp=2, vpp=2, dp=8, ep=8, grad_accum=32).ep_overlap  # interleaved: allowed


def test_the_search_tries_it_only_where_the_stack_has_it_and_the_job_does_not_fix_it():
    m = get_model(MODEL)
    c = Cluster.from_catalog("H100", 16)
    with_it = enumerate_plans(m, 16, JOB, c, SearchSpace(), ep_overlap_opt_in=True)
    on = with_it.epo == 1
    assert on.any() and (~on).any()
    # every overlapped plan obeys validity.rule_ep_overlap: it builds as a ParallelPlan
    for i in np.flatnonzero(on)[:: max(1, int(on.sum()) // 50)]:
        p = with_it.plan(int(i))
        assert p.ep > 1 and p.recompute not in ("full", "offload") and (p.pp == 1 or p.vpp > 1)
    assert not (enumerate_plans(m, 16, JOB, c, SearchSpace()).epo == 1).any()
    fixed = TrainingJob(seq_len=4096, global_batch_tokens=256 * 4096, ep_overlap=0.0)
    assert not (enumerate_plans(m, 16, fixed, c, SearchSpace(), ep_overlap_opt_in=True).epo == 1).any()
    assert not (enumerate_plans(get_model("llama3-8b"), 16, JOB, c, SearchSpace(), ep_overlap_opt_in=True).epo
                == 1).any()  # dense: nothing to overlap
    with pytest.raises(UserInputError) as err:
        search_plans(m, c, JOB, space=SearchSpace(ep_overlap=[True]), stack=training_stack("torchtitan"))
    assert err.value.field == "ep_overlap"


@pytest.mark.parametrize("pp,vpp", [(1, 1), (2, 2)])
def test_it_hides_the_all_to_all_and_holds_one_more_micro_batch(pp: int, vpp: int):
    m = get_model(MODEL)
    c = Cluster.from_catalog("H100", 16)
    plans = [_plan(pp=pp, vpp=vpp, dp=16 // pp, ep=16 // pp, grad_accum=16 * pp, ep_overlap=e) for e in (False, True)]
    p = PlanArrays.from_plans(plans)
    sm = StepModel(m, c.device, c.efficiency, JOB, stack=training_stack("nemo"))
    r = sm.evaluate(c, p)
    assert r.ep_comm_s[1] < 0.5 * r.ep_comm_s[0]
    assert r.step_s[1] < r.step_s[0]
    per_layer = sm.activation_table(p, p.rec)[0]
    # the merged forward and backward hold one micro-batch plus the layer pair in flight; pipelined, also the
    # extra warm-up forward of one model chunk
    extra_layers = 1 + (0 if pp == 1 else math.ceil(m.n_layers / pp) / vpp)
    assert r.mem_activations[1] - r.mem_activations[0] == pytest.approx(extra_layers * per_layer, rel=1e-9)


def test_the_best_moe_plan_may_use_it_and_its_launch_switches_it_on():
    m = get_model("qwen3-235b-a22b")
    c = Cluster.from_catalog("H100", 256)
    nemo = training_stack("nemo")
    res = search_plans(m, c, JOB, top=5, stack=nemo)
    without = search_plans(m, c, TrainingJob(seq_len=4096, global_batch_tokens=256 * 4096, ep_overlap=0.0), top=5,
                           stack=nemo)
    assert res.best is not None and without.best is not None
    assert res.best.tokens_per_s >= without.best.tokens_per_s
    assert not any(e.key.endswith("-epo") for e in without.top)
    est = next(e for e in res.top if e.plan.ep_overlap)
    assert any(n.startswith("-epo:") for n in est.notes)  # the key's suffix is explained where the plan is shown
    plan = est.plan
    assert "--overlap-moe-expert-parallel-comm" in emit_launch(plan, m, c, JOB, "megatron", nemo).commands[0].argv
    bridge = emit_launch(plan, m, c, JOB, "bridge", nemo)
    assert "model.overlap_moe_expert_parallel_comm=true" in bridge.commands[0].argv and bridge.problems() == []
    with pytest.raises(UserInputError) as err:
        emit_launch(plan, m, c, JOB, "torchtitan", nemo)
    assert err.value.field == "emit"


def test_the_command_line_can_fix_the_overlap_for_every_plan():
    from typer.testing import CliRunner

    from xpuplan.cli.main import app

    args = ["train", "search", "--model", "qwen3-30b-a3b", "--hw", "H100", "--devices", "16", "--seq-len", "4096",
            "--stack", "nemo", "--top", "5"]
    tried = CliRunner().invoke(app, args)
    assert tried.exit_code == 0 and "-epo" in tried.output
    fixed = CliRunner().invoke(app, [*args, "--ep-overlap", "0"])
    assert fixed.exit_code == 0 and "-epo" not in fixed.output
    bad = CliRunner().invoke(app, [*args, "--ep-overlap", "1.5"])
    assert bad.exit_code == 2 and "--ep-overlap" in bad.output and "Traceback" not in bad.output


def test_memory_train_counts_the_same_extra_activations_as_the_step_model():
    from typer.testing import CliRunner

    from xpuplan.cli.main import app
    from xpuplan.perf.memory import training_memory

    m = get_model(MODEL)
    kw = dict(seq_len=4096, micro_batch=1, tp=1, pp=2, vpp=2, dp=8, ep=8, zero_stage=1, recompute="none")
    plain = training_memory(m, **kw)
    over = training_memory(m, **kw, ep_overlap=True)
    c = Cluster.from_catalog("H100", 16)
    sm = StepModel(m, c.device, c.efficiency, JOB, stack=training_stack("nemo"))
    p = PlanArrays.from_plans([_plan(pp=2, vpp=2, dp=8, ep=8, grad_accum=32, ep_overlap=e) for e in (False, True)])
    r = sm.evaluate(c, p)
    assert over.activations - plain.activations == pytest.approx(
        float(r.mem_activations[1] - r.mem_activations[0]), rel=0.02)
    args = ["memory", "train", "--model", MODEL, "--tp", "1", "--dp", "16", "--ep", "16", "--recompute", "none"]
    assert CliRunner().invoke(app, [*args, "--ep-overlap"]).exit_code == 0
    bad = CliRunner().invoke(app, ["memory", "train", "--model", MODEL, "--ep-overlap"])  # ep 1
    assert bad.exit_code == 2 and "ep-overlap" in bad.output


def test_memory_train_refuses_the_overlap_where_the_devices_stack_has_none():
    from typer.testing import CliRunner

    from xpuplan.cli.main import app

    r = CliRunner().invoke(app, ["memory", "train", "--model", MODEL, "--dp", "8", "--ep", "8", "--recompute", "none",
                                 "--ep-overlap", "--hw", "tpu-v5p"])  # MaxText, the TPU default, has none
    assert r.exit_code == 2 and "ep-overlap" in r.output and "Traceback" not in r.output
