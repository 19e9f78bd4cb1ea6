"""Sweeps: deterministic per-task seeds, results ordered by key, identical on every backend
(one process, a local process pool, a local Ray instance started here)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from xpuplan.errors import UserInputError
from xpuplan.fleet.sweep import make_tasks, run_sweep, task_seed
from xpuplan.jobs.fleet import SweepRequest, fleet_sweep_task, run_fleet_sweep, sweep_tasks

SCENARIO = """\
model: llama3-8b
horizon_hours: 10
classes:
  - name: chat
    rate_per_s: 6
    input_len: 512
    output_len: 128
    slo: {ttft_ms: 2000, tpot_ms: 50}
candidates:
  - hardware: nvidia-h100-sxm-80gb
    tp: 1
    usd_per_hour: 2.0
  - hardware: nvidia-a100-sxm-80gb
    tp: 1
    usd_per_hour: 1.0
"""


@pytest.fixture
def scenario(tmp_path: Path) -> str:
    p = tmp_path / "fleet.yaml"
    p.write_text(SCENARIO, encoding="utf-8")
    return str(p)


def _request(scenario: str, **kw) -> SweepRequest:
    return SweepRequest(scenario=scenario, rate_scale=[0.5, 2.0], hardware=True, seeds=2, price_jitter=0.3, **kw)


def test_task_seed_is_stable_and_key_dependent():
    assert task_seed(0, (1.0, "mix", 0)) == task_seed(0, (1.0, "mix", 0))
    assert task_seed(0, (1.0, "mix", 0)) != task_seed(0, (1.0, "mix", 1))
    assert task_seed(0, (1.0, "mix", 0)) != task_seed(1, (1.0, "mix", 0))
    assert 0 <= task_seed(7, ("a",)) < 2**63


def test_make_tasks_refuses_duplicate_keys():
    with pytest.raises(UserInputError, match="unique"):
        make_tasks([(("a",), {}), (("a",), {})])


def test_sweep_grid_seeds_and_order(scenario):
    tasks = sweep_tasks(_request(scenario))
    assert len(tasks) == 2 * 3 * 2  # rate scales x (mix + each hardware) x seeds
    res = run_sweep(fleet_sweep_task, tasks, workers=1)
    keys = [r.key for r in res.results]
    assert keys == sorted(keys, key=lambda k: json.dumps(list(k))) and len(set(keys)) == len(tasks)
    assert run_sweep(fleet_sweep_task, list(reversed(tasks)), workers=1).results == res.results
    by_key = {r.key: r for r in res.results}
    assert all(r.error is None for r in res.results), [r.error for r in res.results if r.error]
    # the jittered prices differ between seeds of the same point, so the costs do
    assert by_key[(0.5, "mix", 0)].value["usd_per_hour"] != by_key[(0.5, "mix", 1)].value["usd_per_hour"]
    # a mix is never dearer than the single-hardware fleets of the same point and seed
    for scale in (0.5, 2.0):
        for s in (0, 1):
            mix = by_key[(scale, "mix", s)].value
            assert mix["best_single"]["total_cost"] >= mix["total_cost"] - 1e-9


def test_errors_are_task_results_not_sweep_failures(scenario, tmp_path):
    # at 2000x the traffic the 2-device cap makes every point infeasible: the sweep reports each error
    p = tmp_path / "capped.yaml"
    p.write_text(SCENARIO + "constraints: {max_total_devices: 2}\n", encoding="utf-8")
    req = SweepRequest(scenario=str(p), rate_scale=[0.1, 2000.0])
    out = run_fleet_sweep(req)
    errs = {tuple(r["key"]): r["error"] for r in out["results"]}
    assert errs[(0.1, "mix", 0)] is None
    assert "InfeasibleError" in errs[(2000.0, "mix", 0)] and "total devices <= 2" in errs[(2000.0, "mix", 0)]


def test_local_pool_matches_single_process(scenario):
    tasks = sweep_tasks(_request(scenario))
    one = run_sweep(fleet_sweep_task, tasks, workers=1)
    pool = run_sweep(fleet_sweep_task, tasks, workers=2)
    assert [r.to_dict() for r in one.results] == [r.to_dict() for r in pool.results]


@pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                    reason="Ray is not installed (optional extra: pip install 'xpuplan[ray]')")
def test_ray_matches_local(scenario):
    import ray

    tasks = sweep_tasks(_request(scenario))
    local = run_sweep(fleet_sweep_task, tasks, workers=1)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = run_sweep(fleet_sweep_task, tasks, backend="ray")
    finally:
        ray.shutdown()
    assert on_ray.backend == "ray"
    assert [r.to_dict() for r in on_ray.results] == [r.to_dict() for r in local.results]


def test_ray_backend_without_ray_or_cluster_is_a_clear_error(scenario, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # simulate Ray not installed
    with pytest.raises(UserInputError, match="xpuplan\\[ray\\]"):
        run_sweep(fleet_sweep_task, sweep_tasks(_request(scenario)), backend="ray", address="auto")
