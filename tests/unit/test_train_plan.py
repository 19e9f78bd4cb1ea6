"""ParallelPlan: construction checks, validity rules with field names, stable keys."""

from __future__ import annotations

import pytest

from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.models.arch import ModelArch, MoEConfig
from xpuplan.train import ParallelPlan, check_plan, make_plan, plan_issues


def _dense(**kw) -> ModelArch:
    base = dict(id="toy", name="toy", n_layers=8, d_model=512, n_heads=8, n_kv_heads=4, ffn_dim=2048,
                vocab_size=1000, mlp="gated")
    base.update(kw)
    return ModelArch(**base)


def _moe() -> ModelArch:
    return _dense(id="toy-moe", moe=MoEConfig(n_routed_experts=8, top_k=2, expert_ffn_dim=1024))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        (dict(tp=0), "tp"),
        (dict(micro_batch=-1), "micro_batch"),
        (dict(zero_stage=4), "zero_stage"),
        (dict(recompute="some"), "recompute"),
        (dict(precision="int4"), "precision"),
        (dict(sp=True, tp=1), "sp"),
        (dict(vpp=2, pp=1), "vpp"),
        (dict(ep=3, dp=4), "ep"),
    ],
)
def test_construction_errors_name_the_field(kwargs, field):
    with pytest.raises(UserInputError) as exc:
        ParallelPlan(**kwargs)
    assert exc.value.field == field


def test_tp_must_divide_heads_message():
    m = get_model("llama3-70b")
    plan = ParallelPlan(tp=3, dp=1)
    with pytest.raises(UserInputError) as exc:
        check_plan(plan, m, seq_len=4096)
    assert exc.value.field == "tp"
    assert "tp (3) must divide n_heads (64)" in str(exc.value)


def test_tp_must_divide_kv_heads_or_replicate_them():
    # tp 6 neither divides nor is a multiple of 4 KV heads (heads 12 so the head rule passes)
    issues = plan_issues(ParallelPlan(tp=6), _dense(n_heads=12, d_model=768), seq_len=1024)
    assert [i.field for i in issues] == ["tp"] and "n_kv_heads (4)" in issues[0].message
    # tp 8 > 4 KV heads: each KV head is copied on two ranks, a valid plan
    assert plan_issues(ParallelPlan(tp=8), _dense(), seq_len=1024) == []


def test_kv_heads_replicated_when_tp_exceeds_them():
    from xpuplan.perf.memory import params_per_device
    from xpuplan.perf.params import kv_replication, params_kv_per_layer, params_norms_per_layer

    m = _dense()  # 8 heads, 4 KV heads, head dim 64
    assert kv_replication(m, 2) == 1.0 and kv_replication(m, 4) == 1.0 and kv_replication(m, 8) == 2.0
    kv = params_kv_per_layer(m)
    assert kv == 2 * 512 * 4 * 64
    # tp 4 -> 8 halves everything TP splits except K and V, which stay at one KV head per device:
    # 2·dense(tp 8) - dense(tp 4) = layers · (kv/4 + norms) (norms are replicated)
    d8, d4 = params_per_device(m, tp=8).dense, params_per_device(m, tp=4).dense
    assert 2 * d8 - d4 == pytest.approx(m.n_layers * (kv / 4 + params_norms_per_layer(m)))


def test_layers_by_pp_times_vpp():
    m = _dense()
    assert plan_issues(ParallelPlan(pp=4, vpp=2, grad_accum=4), m, seq_len=1024) == []
    issues = plan_issues(ParallelPlan(pp=4, vpp=4, grad_accum=4), m, seq_len=1024)
    assert issues[0].field == "pp" and "n_layers (8)" in issues[0].message
    issues = plan_issues(ParallelPlan(pp=3), m, seq_len=1024)
    assert issues and issues[0].field == "pp"
    assert plan_issues(ParallelPlan(pp=3), m, seq_len=1024, uneven_pipeline=True) == []


def test_experts_by_ep_and_ep_needs_moe():
    assert plan_issues(ParallelPlan(ep=4, dp=4), _moe(), seq_len=1024) == []
    assert plan_issues(ParallelPlan(ep=2, dp=2), _dense(), seq_len=1024)[0].field == "ep"
    bad = _dense(id="m6", moe=MoEConfig(n_routed_experts=6, top_k=2, expert_ffn_dim=512))
    assert "routed experts (6)" in plan_issues(ParallelPlan(ep=4, dp=4), bad, seq_len=1024)[0].message


def test_batch_by_dp_times_micro_batch():
    m = _dense()
    ok = ParallelPlan(dp=4, micro_batch=2, grad_accum=8)
    assert plan_issues(ok, m, seq_len=1024, global_batch_seqs=64) == []
    issues = plan_issues(ok, m, seq_len=1024, global_batch_seqs=60)
    assert issues[0].field == "micro_batch" and "60 sequences" in issues[0].message
    with pytest.raises(UserInputError) as exc:
        make_plan(n_devices=4, global_batch_seqs=6, micro_batch=4)
    assert exc.value.field == "micro_batch"


def test_cp_interleaving_and_device_count_rules():
    m = _dense()
    assert plan_issues(ParallelPlan(cp=3), m, seq_len=1024)[0].field == "cp"
    assert plan_issues(ParallelPlan(pp=2, vpp=2, grad_accum=3), m, seq_len=1024)[0].field == "vpp"
    assert plan_issues(ParallelPlan(tp=2, dp=2), m, seq_len=1024, n_devices=8)[0].field == "dp"


def test_make_plan_derives_dp_grad_accum_and_sp():
    p = make_plan(n_devices=64, global_batch_seqs=512, tp=8, pp=2, micro_batch=2)
    assert (p.dp, p.grad_accum, p.sp) == (4, 64, True)
    assert p.n_devices == 64 and p.global_batch_seqs == 512
    with pytest.raises(UserInputError) as exc:
        make_plan(n_devices=64, global_batch_seqs=512, tp=3, model=get_model("llama3-70b"))
    assert "tp (3) must divide n_heads (64)" in str(exc.value)


def test_keys_are_stable_and_distinct():
    a = ParallelPlan(tp=8, pp=4, dp=2, vpp=2, sp=True, zero_stage=1, recompute="full", micro_batch=1, grad_accum=8)
    b = ParallelPlan(tp=8, pp=4, dp=2, vpp=2, sp=True, zero_stage=1, recompute="full", micro_batch=1, grad_accum=8)
    assert a.key == b.key == "tp8-pp4-vpp2-dp2-cp1-ep1-sp1-z1-rfull-mb1-ga8-bf16"
    assert a == b and hash(a) == hash(b)
    assert ParallelPlan(tp=8, pp=4, dp=2, vpp=2, sp=True, zero_stage=2, recompute="full", grad_accum=8).key != a.key
    assert a.to_dict()["key"] == a.key and a.to_dict()["n_devices"] == 64


def test_public_api_is_exported():
    import xpuplan.train as train

    for name in train.__all__:
        assert hasattr(train, name), name
    assert {"ParallelPlan", "Cluster", "estimate", "search_plans", "emit_launch", "TrainEstimate"} <= set(train.__all__)


def test_no_function_shadows_its_module():
    import types

    import xpuplan
    import xpuplan.train as train

    assert isinstance(train.search, types.ModuleType)
    assert xpuplan.search_training is train.search_plans
