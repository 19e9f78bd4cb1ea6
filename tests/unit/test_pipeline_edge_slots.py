"""Uneven pipelines may give the embedding and the loss a virtual stage of their own (Megatron-Core's
account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split): NVIDIA's Llama 3.1 405B
recipes run 126 layers on PP 16 x VP 8 = 128 virtual stages."""

from __future__ import annotations

from xpuplan.models import get_model
from xpuplan.perf.efficiency import default_efficiency
from xpuplan.train import Cluster, ParallelPlan, emit_launch
from xpuplan.train.search import vpp_options
from xpuplan.train.validity import EDGE_PIPELINE_SLOTS, rule_pp_layers
from xpuplan.workload.training import TrainingJob

M405 = get_model("llama3.1-405b")  # 126 layers


def test_pp_vpp_up_to_layers_plus_edge_slots_with_uneven_pipeline():
    assert EDGE_PIPELINE_SLOTS == 2
    assert rule_pp_layers(16, 8, M405, uneven_pipeline=True) is None  # 128 = 126 + 2
    issue = rule_pp_layers(16, 8, M405, uneven_pipeline=False)
    assert issue is not None and issue.field == "pp"
    too_many = rule_pp_layers(43, 3, M405, uneven_pipeline=True)  # 129 virtual stages
    assert too_many is not None and too_many.field == "pp" and "embedding" in too_many.message


def test_search_offers_the_edge_slot_vpp():
    assert 8 in vpp_options(126, 16, uneven=True)
    assert 8 not in vpp_options(126, 16, uneven=False)
    assert max(vpp_options(126, 16, uneven=True)) * 16 <= 128


def _launch(plan: ParallelPlan, framework: str):
    c = Cluster.from_catalog("H100", plan.n_devices, efficiency=default_efficiency())
    return emit_launch(plan, M405, c, TrainingJob(seq_len=8192), framework)


def test_megatron_and_bridge_emit_the_accounting_flags_when_the_slots_divide():
    plan = ParallelPlan(tp=4, pp=16, vpp=8, dp=4, sp=True, zero_stage=1, recompute="none", micro_batch=1,
                        grad_accum=96, precision="bf16")
    argv = _launch(plan, "megatron").commands[0].argv
    assert "--account-for-embedding-in-pipeline-split" in argv and "--account-for-loss-in-pipeline-split" in argv
    assert "--decoder-first-pipeline-num-layers" not in argv  # Megatron-Core refuses both at once
    over = " ".join(_launch(plan, "bridge").commands[0].argv)
    assert "model.account_for_embedding_in_pipeline_split=true" in over
    assert "num_layers_in_first_pipeline_stage" not in over


def test_other_uneven_splits_keep_first_and_last_stage_sizes():
    plan = ParallelPlan(tp=8, pp=16, vpp=1, dp=2, sp=True, zero_stage=1, recompute="none", micro_batch=1,
                        grad_accum=8, precision="bf16")
    # 126 + 2 = 128 divides over 16 stages too: the accounting flags give 7 + 14 x 8 + 7, as first/last would
    argv = _launch(plan, "megatron").commands[0].argv
    assert "--account-for-embedding-in-pipeline-split" in argv
    odd = ParallelPlan(tp=8, pp=5, vpp=1, dp=2, sp=True, zero_stage=1, recompute="none", micro_batch=1,
                       grad_accum=8, precision="bf16")  # 128 % 5 != 0
    a = _launch(odd, "megatron").commands[0].argv
    first = int(a[a.index("--decoder-first-pipeline-num-layers") + 1])
    last = int(a[a.index("--decoder-last-pipeline-num-layers") + 1])
    assert first + last + 3 * 26 == 126


def _titan_virtual_stages(argv: tuple[str, ...], n_layers: int) -> int:
    """torchtitan's count (torchtitan/distributed/pipeline_parallel.py): ceil((L + first + last) / layers_per_stage),
    first/last-stage-less-layers defaulting to 1."""
    def opt(flag: str, default: int) -> int:
        return int(argv[argv.index(flag) + 1]) if flag in argv else default
    lps = opt("--parallelism.pipeline-parallel-layers-per-stage", 0)
    first = opt("--parallelism.pipeline-parallel-first-stage-less-layers", 1)
    last = opt("--parallelism.pipeline-parallel-last-stage-less-layers", 1)
    return -(-(n_layers + first + last) // lps)


def test_torchtitan_gets_exactly_the_plans_virtual_stages():
    from xpuplan.models import get_model as gm
    for model_id, pp, vpp in (("llama3.1-405b", 16, 8), ("llama3-70b", 4, 5), ("llama3-8b", 4, 2)):
        m = gm(model_id)
        plan = ParallelPlan(tp=8, pp=pp, vpp=vpp, dp=8, sp=True, zero_stage=1, recompute="selective", micro_batch=1,
                            grad_accum=pp * 2, precision="bf16")
        c = Cluster.from_catalog("H100", plan.n_devices, efficiency=default_efficiency())
        argv = emit_launch(plan, m, c, TrainingJob(seq_len=8192), "torchtitan").commands[0].argv
        assert _titan_virtual_stages(argv, m.n_layers) == pp * vpp, (model_id, argv)


def test_torchtitan_even_one_f_one_b_split_is_even():
    from xpuplan.models import get_model as gm
    plan = ParallelPlan(tp=8, pp=4, vpp=1, dp=2, sp=True, zero_stage=1, recompute="selective", micro_batch=1,
                        grad_accum=8, precision="bf16")
    c = Cluster.from_catalog("H100", plan.n_devices, efficiency=default_efficiency())
    argv = emit_launch(plan, gm("llama3-8b"), c, TrainingJob(seq_len=8192), "torchtitan").commands[0].argv
    assert "--parallelism.pipeline-parallel-layers-per-stage" not in argv  # one stage per rank
    i = argv.index("--parallelism.pipeline-parallel-first-stage-less-layers")
    assert argv[i + 1] == "0"  # 32 layers as 8 + 8 + 8 + 8, as planned
