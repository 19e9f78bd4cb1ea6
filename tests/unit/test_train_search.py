"""Search: only valid plans, ranking, stable keys, Pareto front, restrictions, empty spaces."""

from __future__ import annotations

import numpy as np
import pytest

from xpuplan.models import get_model
from xpuplan.train import Cluster, SearchSpace, enumerate_plans, plan_issues
from xpuplan.train import search_plans as search
from xpuplan.workload.training import TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")


JOB = TrainingJob(seq_len=4096, global_batch_tokens=256 * 4096)


def test_enumerated_plans_are_all_valid():
    m = get_model("mixtral-8x7b")
    c = Cluster.from_catalog("H100", 64)
    plans = enumerate_plans(m, 64, JOB, c)
    assert len(plans) > 1000
    for i in np.random.default_rng(0).choice(len(plans), 300, replace=False):
        p = plans.plan(int(i))
        assert plan_issues(p, m, seq_len=4096, global_batch_seqs=256, n_devices=64) == []
        assert p.tp <= c.domain_size


def test_search_returns_valid_feasible_plans_sorted():
    m = get_model("llama3-70b")
    c = Cluster.from_catalog("H100", 128)
    res = search(m, c, JOB, top=15)
    assert res.plans_evaluated > res.plans_feasible > 0 and len(res.top) == 15
    tps = [e.tokens_per_s for e in res.top]
    assert tps == sorted(tps, reverse=True)
    for e in res.top:
        assert e.feasible and e.memory.total_bytes <= e.memory.usable_bytes
        assert plan_issues(e.plan, m, seq_len=4096, global_batch_seqs=256, n_devices=128) == []
    assert len({e.key for e in res.top}) == 15


def test_search_is_deterministic():
    m = get_model("llama3-8b")
    c = Cluster.from_catalog("A100", 32)
    a = search(m, c, JOB, top=20)
    b = search(m, c, JOB, top=20)
    assert [e.key for e in a.top] == [e.key for e in b.top]
    assert a.plans_evaluated == b.plans_evaluated


def test_pareto_front_over_device_counts():
    m = get_model("llama3-8b")
    c = Cluster.from_catalog("H100", 8)
    res = search(m, c, TrainingJob(seq_len=4096, global_batch_tokens=512 * 4096, train_tokens=1e11),
                 device_counts=[8, 16, 32, 64], top=5)
    assert res.device_counts == (8, 16, 32, 64)
    counts = [p.n_devices for p in res.pareto]
    speeds = [p.tokens_per_s for p in res.pareto]
    assert counts == sorted(counts) and speeds == sorted(speeds) and counts[0] == 8
    assert all(p.time_to_train_s is not None for p in res.pareto)
    assert res.to_dict()["plans_evaluated"] == res.plans_evaluated


def test_restricted_space_is_respected():
    m = get_model("llama3-70b")
    c = Cluster.from_catalog("H100", 64)
    space = SearchSpace(tp=[8], zero_stage=[1], recompute=["full"], precision=["fp8"])
    res = search(m, c, JOB, space=space, top=50)
    assert res.top and all(
        e.plan.tp == 8 and e.plan.zero_stage == 1 and e.plan.recompute == "full" and e.plan.precision == "fp8"
        for e in res.top
    )


def test_uneven_pipeline_widens_the_space():
    m = get_model("llama3.1-405b")  # 126 layers: only pp in {1, 2} divides them among powers of two
    c = Cluster.from_catalog("H100", 1024)
    job = TrainingJob(seq_len=8192, global_batch_tokens=2048 * 8192)
    even = enumerate_plans(m, 1024, job, c)
    uneven = enumerate_plans(m, 1024, job, c, SearchSpace(uneven_pipeline=True))
    assert set(np.unique(even.pp)) <= {1, 2}
    assert 16 in set(np.unique(uneven.pp)) and len(uneven) > len(even)


def test_no_valid_layout_gives_reasons():
    m = get_model("llama3-8b")
    c = Cluster.from_catalog("H100", 7)  # 7 devices: no tp/pp divides the heads/layers and dp=7 not the batch
    res = search(m, c, TrainingJob(seq_len=4096, global_batch_tokens=64 * 4096))
    assert res.best is None and res.plans_evaluated == 0 and "no valid plan" in res.reasons[0]


def test_nothing_fits_gives_the_closest_plan():
    m = get_model("gpt3-175b")
    c = Cluster.from_catalog("H100", 8)
    res = search(m, c, TrainingJob(seq_len=2048, global_batch_tokens=1536 * 2048))
    assert res.best is None and res.plans_evaluated > 0 and "no plan fits" in res.reasons[0]


def test_progress_callback_sees_every_count():
    m = get_model("llama3-8b")
    seen: list[tuple[int, int]] = []
    search(m, Cluster.from_catalog("H100", 8), JOB, device_counts=[8, 16], progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (2, 2) and (0, 2) in seen
