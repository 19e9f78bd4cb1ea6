"""Expert parallelism inside the TP group (``etp`` < tp): attention over tp, the routed experts over tp/etp ranks
(vLLM's --enable-expert-parallel, TensorRT-LLM's --ep_size and SGLang's --ep-size without attention-DP)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from xpuplan.catalog import get_device
from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.serve import make_replica
from xpuplan.serve.capacity import candidate_layouts
from xpuplan.serve.emit import emit_plan
from xpuplan.serve.kv import memory_plan
from xpuplan.serve.plan import ServingPlan
from xpuplan.serve.step import EXPERT_OPS, _comm_s, _layer_ops, _Shape

H200 = "nvidia-h200-sxm-141gb"


def _shape(tokens: float) -> _Shape:
    t = np.asarray(tokens)
    return _Shape(tokens=t, group_tokens=t, decode_seqs=t, decode_context=np.asarray(1000.0),
                  prefill_tokens=np.asarray(0.0), prefill_len=np.asarray(1.0), prefill_kv_len=np.asarray(1.0),
                  sampled_rows=np.asarray(1.0), has_decode=np.asarray(True), has_prefill=np.asarray(False))


def test_layout_rules_name_the_etp_field():
    q, dense = get_model("qwen3-235b-a22b"), get_model("llama3-70b")
    dev = get_device(H200)
    for model, kw, words in ((q, dict(tp=8, etp=3), "must divide tp"),
                             (dense, dict(tp=8, etp=1), "mixture-of-experts"),
                             (q, dict(tp=4, ep=2, etp=1), "attention-DP groups")):
        with pytest.raises(UserInputError, match=words) as exc:
            make_replica(model, dev, dtype="fp8", **kw)
        assert exc.value.field == "etp"
    with pytest.raises(UserInputError, match="must divide the routed experts") as exc:
        make_replica(get_model("mixtral-8x7b"), dev, tp=16, etp=1)  # 16 ranks for 8 experts
    assert exc.value.field in ("etp", "tp")
    assert ServingPlan(tp=8, etp=8).issues(q) == []
    with pytest.raises(UserInputError) as exc:
        ServingPlan(tp=8, etp=0)
    assert exc.value.field == "etp"


def test_same_weights_per_device_wider_expert_gemms_no_exchange():
    q, dev = get_model("qwen3-235b-a22b"), get_device(H200)
    tp_only = make_replica(q, dev, tp=8, dtype="fp8")
    assert make_replica(q, dev, tp=8, etp=8, dtype="fp8").key == tp_only.key  # etp = tp is the default split
    ep = make_replica(q, dev, tp=8, etp=1, dtype="fp8")
    assert "etp1" in ep.key and ep.n_devices == 8 and (ep.expert_tp, ep.expert_ranks) == (1, 8)
    assert ep.to_dict()["etp"] == 1 and "etp" not in tp_only.to_dict()
    assert memory_plan(ep).weights_bytes == pytest.approx(memory_plan(tp_only).weights_bytes)
    sh = _shape(256.0)
    assert float(_comm_s(ep, sh.group_tokens)) == pytest.approx(float(_comm_s(tp_only, sh.group_tokens)))
    ops_tp = {o.name: o for o, _ in _layer_ops(tp_only, sh, True, "bf16") if o.name in EXPERT_OPS}
    ops_ep = {o.name: o for o, _ in _layer_ops(ep, sh, True, "bf16") if o.name in EXPERT_OPS}
    # the same expert FLOPs (give or take the busiest rank), in GEMMs 8x wider: whole experts of 1,536 columns
    assert ops_ep["experts up/gate"].flops == pytest.approx(ops_tp["experts up/gate"].flops, rel=0.25)
    assert ops_ep["experts down"].k_factor < ops_tp["experts down"].k_factor
    assert any("expert parallelism inside the TP group" in n for n in ep.notes)


def test_the_search_tries_it_for_moe_models_only():
    q, dense, dev = get_model("qwen3-235b-a22b"), get_model("llama3-70b"), get_device(H200)
    assert (1, 1) in candidate_layouts(q, dev, 8)
    assert (1, None) in candidate_layouts(q, dev, 8)
    assert candidate_layouts(q, dev, 1) == [(e, None) for e in (1, 2, 4, 8)]
    assert candidate_layouts(dense, dev, 8) == [(1, None)]
    assert candidate_layouts(q, dev, 8, ep=1) == [(1, None)]  # a given ep is kept as given


def test_launch_commands_say_expert_parallel_without_attention_dp():
    q, dev = get_model("qwen3-235b-a22b"), get_device(H200)

    def args(engine: str, **kw: int) -> list[str]:
        lp = emit_plan(make_replica(q, dev, tp=8, dtype="fp8", engine=engine, **kw), engine, max_num_seqs=256,
                       max_model_len=4096)
        assert lp.problems() == []
        return list(lp.commands[0].segments[0].args)

    vllm = args("vllm", etp=1)
    assert "--enable-expert-parallel" in vllm and "--data-parallel-size" not in vllm
    assert "--enable-expert-parallel" not in args("vllm")
    trt = args("trtllm", etp=2)
    assert trt[trt.index("--ep_size") + 1] == "4" and trt[trt.index("--tp_size") + 1] == "8"
    sg = args("sglang", etp=1)
    assert sg[sg.index("--ep-size") + 1] == "8" and "--enable-dp-attention" not in sg


def test_cli_estimate_takes_etp_and_refuses_it_for_dense_models():
    runner = CliRunner()
    r = runner.invoke(app, ["infer", "estimate", "--model", "qwen3-235b-a22b", "--hw", "H200", "--tp", "8", "--etp", "1",
                            "--dtype", "fp8", "--in", "1000", "--out", "200", "--batch", "64", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["etp"] == 1 and "etp1" in doc["results"][0]["replica"]["key"]
    bad = runner.invoke(app, ["infer", "estimate", "--model", "llama3-70b", "--hw", "H200", "--tp", "8", "--etp", "1",
                              "--in", "100", "--out", "10"])
    assert bad.exit_code == 2 and "etp" in bad.output and "Traceback" not in bad.output


def test_capacity_with_a_given_etp_tries_only_that_split():
    runner = CliRunner()
    r = runner.invoke(app, ["infer", "capacity", "--model", "qwen3-235b-a22b", "--hw", "H200", "--qps", "5", "--in", "1000",
                            "--out", "200", "--dtype", "fp8", "--tp", "8", "--etp", "1", "--tpot-ms", "60", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["options"][0]["replica"]["etp"] == 1
    bad = runner.invoke(app, ["infer", "capacity", "--model", "llama3-70b", "--hw", "H200", "--qps", "2", "--in", "100",
                              "--out", "50", "--etp", "1", "--tpot-ms", "50"])
    assert bad.exit_code == 2 and "etp" in bad.output and "dense" in bad.output


def test_simulated_pools_and_validation_rows_carry_etp():
    """``simulate`` pools take etp (a refused layout names the pool's field), and a validation row's ``etp`` column
    reaches the finite-run simulation it is predicted with."""
    import dataclasses

    from xpuplan.serve.sim import SimConfig, Simulation
    from xpuplan.validate.rows import read_rows
    from xpuplan.validate.serve_predictor import predict

    cfg = {"model": "qwen3-235b-a22b", "duration_s": 5,
           "pools": [{"name": "moe", "hardware": "H200", "tp": 8, "etp": 3, "dtype": "fp8"}],
           "classes": [{"name": "c", "arrival": "poisson", "rate_rps": 1, "input_len": 100, "output_len": 10}]}
    with pytest.raises(UserInputError) as exc:
        Simulation(SimConfig.model_validate(cfg), seed=0)
    assert exc.value.field == "pools[0].etp"
    from pathlib import Path
    tables = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "heldout_table_trtllm_v1.csv"
    row = next(r for r in read_rows(str(tables)) if r.id == "TT-135")  # Qwen3-235B-A22B, H200, TP8, 30,000 prompts
    tp_only = predict(row)
    ep = predict(dataclasses.replace(row, raw={**row.raw, "etp": "1"}))
    assert "etp1" in ep.details["replica"] and "etp" not in tp_only.details["replica"]
    assert ep.value > tp_only.value  # the finite run itself, not only its steady state, sees the wider expert GEMMs


def test_the_search_does_not_offer_it_to_an_engine_that_cannot_run_it():
    from xpuplan.serve.capacity import EP_IN_TP_ENGINES, size_for_qps
    from xpuplan.serve.slo import SLO

    assert "lmdeploy" not in EP_IN_TP_ENGINES and "vllm" in EP_IN_TP_ENGINES
    q, dev = get_model("qwen3-235b-a22b"), get_device(H200)
    keys = {eng: size_for_qps(q, [dev], 20, 1000, 500, SLO(tpot_s=0.05), dtypes=["fp8"], engine=eng,
                              tps=[8]).options[0].replica["key"] for eng in ("lmdeploy", "vllm")}
    assert "etp" not in keys["lmdeploy"] and "etp1" in keys["vllm"]
