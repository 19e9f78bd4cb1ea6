"""Activations offloaded to the host must fit the host's memory: the catalog's reference system's CPU memory per
device (DGX H100: 2 TB over 8 GPUs) less the job's host reserve. A plan that needs more does not fit; where the catalog
has no figure the plan says the host is not checked, and a user's figure (--hw-figure) replaces the catalog's."""

from __future__ import annotations

import json

import pytest

from tests.unit.clicheck import assert_user_error, run
from xpuplan.catalog import load_catalog
from xpuplan.models import get_model
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.train.search import SearchSpace, search_plans
from xpuplan.units import GiB
from xpuplan.workload.training import DEFAULT_HOST_MEMORY_RESERVE, TrainingJob

pytestmark = pytest.mark.usefixtures("no_calibration")

L405 = get_model("llama3.1-405b")
H100 = "nvidia-h100-sxm-80gb"
JOB = TrainingJob(seq_len=8192, global_batch_tokens=8192 * 1024)
#: pure ZeRO-3 over 256 H100 keeps most of the 126 layers' activations on the host: about 1 TB per GPU
ZERO3 = dict(n_devices=256, global_batch_seqs=JOB.global_batch_seqs, zero_stage=3, recompute="layer_offload",
             micro_batch=2)


def test_the_catalog_gives_the_reference_systems_host_memory_per_device() -> None:
    cat = load_catalog()
    assert cat.get("nvidia-h100-sxm-80gb").host_memory_bytes == 256 * GiB  # DGX H100: 2 TB / 8
    assert cat.get("nvidia-a100-sxm-40gb").host_memory_bytes == 128 * GiB  # DGX A100 320GB: 1 TB / 8
    assert cat.get("nvidia-gb200-186gb").host_memory_bytes == 240 * GiB  # one Grace (480 GB) per two GPUs
    fig = cat.get("nvidia-b200-180gb").figure("host_memory.capacity_gib")
    assert fig is not None and fig.high == 512 * GiB and fig.source.url  # upgradable to 4 TB; sourced
    assert cat.get("google-tpu-v5e").host_memory_bytes == 64 * GiB  # 512 GiB per 8-chip host
    assert cat.get("google-tpu-v6e").host_memory_bytes == 192 * GiB  # 1,536 GiB per 8-chip host
    assert cat.get("amd-mi300x-192gb").host_memory_bytes == 192 * GiB  # AMD's MLPerf system: 1.5 TiB / 8
    assert cat.get("amd-mi355x-288gb").host_memory_bytes == 384 * GiB  # AMD's MLPerf nodes: 3 TiB / 8
    assert cat.get("intel-gaudi2").host_memory_bytes == 128 * GiB  # HLS-Gaudi2: 1 TB / 8
    assert cat.get("intel-gaudi3").host_memory_bytes == 128 * GiB  # HLS-Gaudi3: 1 TB / 8
    assert cat.get("amd-mi325x-256gb").host_memory_bytes is None  # no reference system in the catalog


def test_a_plan_whose_offloaded_activations_exceed_the_host_does_not_fit() -> None:
    cl = Cluster.from_catalog(H100, 256)
    e = estimate(L405, cl, make_plan(model=L405, **ZERO3), JOB)
    host_usable = 256 * GiB * (1 - DEFAULT_HOST_MEMORY_RESERVE)
    assert e.memory.total_bytes <= e.memory.usable_bytes  # the device side fits ...
    assert e.memory.host_offload_bytes > host_usable  # ... the host side does not
    assert not e.feasible and e.memory.host_usable_bytes == pytest.approx(host_usable)
    assert any("host memory" in r and "--hw-figure nvidia-h100-sxm-80gb:host_memory.capacity_gib" in r
               for r in e.reasons)
    # a host with enough memory (the user's figure, or no reserve on a larger host) lets it fit
    roomy = estimate(L405, cl, make_plan(model=L405, **ZERO3), JOB.model_copy(update={"host_memory_reserve": 0.0}))
    assert roomy.memory.host_usable_bytes == pytest.approx(256 * GiB)


def test_the_search_never_returns_a_plan_the_host_cannot_hold() -> None:
    res = search_plans(L405, Cluster.from_catalog(H100, 256), JOB, top=10)
    assert res.top
    for e in res.top:
        assert e.memory.host_offload_bytes <= (e.memory.host_usable_bytes or 0.0) or e.memory.host_offload_bytes == 0
    only = search_plans(L405, Cluster.from_catalog(H100, 256), JOB, top=5,
                        space=SearchSpace(recompute=["layer_offload"]))
    assert all(e.memory.host_offload_bytes <= e.memory.host_usable_bytes for e in only.top)  # type: ignore[operator]
    assert not any(e.plan.tp == 1 and e.plan.pp == 1 and e.plan.dp == 256 for e in only.top)


def test_a_device_without_a_host_figure_says_the_host_is_not_checked() -> None:
    cl = Cluster.from_catalog("amd-mi325x-256gb", 64)
    plan = make_plan(model=L405, n_devices=64, global_batch_seqs=JOB.global_batch_seqs, zero_stage=3,
                     recompute="layer_offload", micro_batch=1)
    e = estimate(L405, cl, plan, JOB)
    assert e.memory.host_usable_bytes is None and "host_usable_bytes" not in e.memory.to_dict()
    assert any("not checked" in n and "host_memory.capacity_gib" in n for n in e.notes)


# -- the front end ----------------------------------------------------------------------------------------------------
_SEARCH = ["train", "search", "--model", "llama3.1-405b", "--hw", "H100", "--devices", "256", "--seq-len", "8192",
           "--recompute", "layer_offload", "--top", "1", "--json"]


def test_cli_host_figure_override_changes_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from xpuplan.catalog.loader import ENV_FIGURES

    monkeypatch.setenv(ENV_FIGURES, "")  # --hw-figure lays its figure for the process: undone after the test
    r = run(*_SEARCH)
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    plan = out["plans"][0]
    assert plan["memory"]["host_offload_bytes"] <= plan["memory"]["host_usable_bytes"]
    # the result lists the host figure it used, with its source
    used = {f["path"]: f for f in out["used"]["figures"]}
    # held as host_memory.capacity_gb (bytes, as device memory is), read from the file key host_memory.capacity_gib
    assert used["host_memory.capacity_gb"]["value"] == 256 * GiB and "DGX" in used["host_memory.capacity_gb"]["source"]
    r = run("--hw-figure", "H100:host_memory.capacity_gib=4096", *_SEARCH)
    assert r.exit_code == 0, r.output
    roomy = json.loads(r.stdout)["plans"][0]
    assert roomy["memory"]["host_usable_bytes"] == pytest.approx(4096 * GiB * (1 - DEFAULT_HOST_MEMORY_RESERVE))
    assert roomy["memory"]["host_offload_bytes"] > plan["memory"]["host_usable_bytes"]  # a plan the DGX cannot hold
    assert roomy["tokens_per_s"] > plan["tokens_per_s"]


def test_cli_memory_train_names_the_host_when_it_is_the_limit() -> None:
    r = run("memory", "train", "--model", "llama3.1-405b", "--hw", "H100", "--tp", "1", "--pp", "1", "--dp", "256",
            "--zero", "3", "--recompute", "layer_offload", "--micro-batch", "1", "--seq", "8192")
    assert r.exit_code == 3, r.output
    assert "of host memory usable" in r.output and "host_memory.capacity_gib" in r.output
    assert "Traceback" not in r.output
    # a malformed host figure is refused naming the flag
    assert_user_error(run("--hw-figure", "H100:host_memory.capacity=12", "memory", "train", "--model", "llama3-8b",
                          "--hw", "H100"), "--hw-figure", "unit suffix")


def test_host_usable_bytes_is_the_hosts_memory_less_the_reserve() -> None:
    from xpuplan.perf.memory import host_usable_bytes

    assert host_usable_bytes(256 * GiB, 0.25) == pytest.approx(192 * GiB)
    assert host_usable_bytes(256 * GiB, 0.0) == 256 * GiB
    assert host_usable_bytes(None, 0.25) is None  # unknown host: not checked
