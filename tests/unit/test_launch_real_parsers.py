"""Emitted commands parsed by the targets' own parsers, where the pinned package installs on CPU.

CI installs torch (torchrun), DeepSpeed (launcher and config classes) and sglang-router (.ci/run);
elsewhere these tests skip. The recorded flag lists (test_launch_targets.py) cover every target.
"""

from __future__ import annotations

import argparse
import json

import pytest

from xpuplan.catalog.loader import get_device
from xpuplan.models import get_model
from xpuplan.perf.efficiency import default_efficiency
from xpuplan.serve import emit_plan, make_replica
from xpuplan.train import Cluster, ParallelPlan, emit_launch
from xpuplan.workload.training import TrainingJob

PLAN = ParallelPlan(tp=8, pp=2, dp=8, sp=True, zero_stage=1, recompute="selective", micro_batch=1, grad_accum=8)
JOB = TrainingJob(seq_len=8192)


def _launch(framework: str, plan: ParallelPlan = PLAN):
    cluster = Cluster.from_catalog("H100", plan.n_devices, efficiency=default_efficiency())
    return emit_launch(plan, get_model("llama3-70b"), cluster, JOB, framework)


@pytest.mark.parametrize("framework", ["megatron", "bridge", "torchtitan"])
def test_torchrun_parses_the_launcher(framework):
    pytest.importorskip("torch")
    from torch.distributed.run import get_args_parser

    lp = _launch(framework)
    argv = lp.commands[0].argv
    ns = get_args_parser().parse_args(list(argv[1:]))
    assert ns.nnodes == "16" and ns.nproc_per_node == "8"
    assert ns.training_script in ("pretrain_gpt.py", "scripts/training/run_recipe.py", "-m") or ns.module


def test_deepspeed_launcher_and_config():
    pytest.importorskip("deepspeed")
    import deepspeed.runtime.config as ds_config
    from deepspeed.launcher.runner import parse_args

    plan = ParallelPlan(tp=1, pp=1, dp=64, zero_stage=3, recompute="selective", micro_batch=2, grad_accum=4)
    lp = _launch("deepspeed", plan)
    ns = parse_args(list(lp.commands[0].argv[1:]))
    assert ns.num_nodes == 8 and ns.num_gpus == 8 and ns.user_script == "train.py"
    assert ns.user_args == ["--deepspeed", "--deepspeed_config", "ds_config.json"]

    class DataParallel:  # the data-parallel size the plan gives DeepSpeed's batch check
        def get_data_parallel_world_size(self) -> int:
            return plan.dp

    cfg = json.loads(dict(lp.files)["ds_config.json"])
    mp = pytest.MonkeyPatch()
    mp.setattr(ds_config.dist, "get_rank", lambda *a, **k: 0)
    try:
        parsed = ds_config.DeepSpeedConfig(cfg, mpu=DataParallel())
        assert parsed.zero_optimization_stage == 3 and parsed.train_batch_size == 512
        bad = {**cfg, "zero_optimization": {"stage": 3, "overlap_com": True}}  # misspelt key is rejected
        with pytest.raises(Exception, match="overlap_com"):
            ds_config.DeepSpeedConfig(bad, mpu=DataParallel())
    finally:
        mp.undo()


def test_sglang_router_parses_the_disaggregated_router():
    router_args = pytest.importorskip("sglang_router.router_args")
    rep = make_replica(get_model("llama3-70b"), get_device("H100"), tp=4)
    lp = emit_plan(rep, "sglang", max_num_seqs=64, max_model_len=4096, disagg=(1, 1))
    router = next(c for c in lp.commands if c.role == "router")
    args = [a.replace("$PREFILL_HOST", "p0").replace("$DECODE_HOST", "d0") for a in router.argv[3:]]
    parser = argparse.ArgumentParser(exit_on_error=False)
    router_args.RouterArgs.add_cli_args(parser, use_router_prefix=False)
    ns = parser.parse_args(args)
    ra = router_args.RouterArgs.from_cli_args(ns, use_router_prefix=False)
    assert ra.pd_disaggregation and ra.prefill_urls == [("http://p0:30000", 8998)]
    assert ra.decode_urls == ["http://d0:30001"] and ra.port == 8000
