"""The serving model over arrays equals the scalar estimators point by point (1e-9 relative)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from xpuplan.catalog import load_catalog
from xpuplan.models import get_model
from xpuplan.serve.estimate import continuous_step, estimate_static, time_prefill_s
from xpuplan.serve.replica import make_replica, step_time
from xpuplan.serve.step import EfficiencyArrays
from xpuplan.serve.vectorised import (
    continuous_arrays,
    estimate_static_arrays,
    step_time_arrays,
    time_prefill_arrays,
)

REL = 1e-9

#: (model, device, tp, ep, dtype, engine): dense GQA, MoE with EP, MLA + MoE, int4 weight-only,
#: a point-to-point mesh (MI300X, 910B), a PCIe card, pipeline parallelism.
REPLICAS = [
    ("llama3-8b", "H100", 1, 1, "bf16", "vllm", 1),
    ("llama3-70b", "H100", 8, 1, "fp8", "trtllm", 1),
    ("llama3-70b", "MI300X", 2, 1, "int4-wo", "vllm", 1),
    ("llama3-70b", "910B", 4, 1, "bf16", "mindie", 2),
    ("mixtral-8x7b", "H100", 2, 2, "bf16", "sglang", 1),
    ("deepseek-v3", "H200", 8, 1, "fp8", "sglang", 2),
    ("mistral-7b", "L40S", 1, 1, "int8", "vllm", 1),
]


def _rep(model, hw, tp, ep, dtype, engine, pp):
    return make_replica(get_model(model), load_catalog().get(hw), tp=tp, ep=ep, pp=pp, dtype=dtype, engine=engine)


@pytest.mark.parametrize("spec", REPLICAS, ids=lambda s: f"{s[0]}-{s[1]}-tp{s[2]}")
def test_step_time_arrays_equal_scalar(spec):
    rep = _rep(*spec)
    grid = list(itertools.product([0, 1, 5, 64], [1, 700, 4096], [0, 1, 300, 2048]))
    grid = [(d, c, p) for d, c, p in grid if d + p > 0]
    ds, ctx, pt = (np.asarray(v) for v in zip(*grid, strict=True))
    for flight in (None, 1):  # a full pipeline (the default) and one micro-batch in it
        vec = step_time_arrays(rep, decode_seqs=ds, decode_context=ctx, prefill_tokens=pt, in_flight=flight)
        for j, (d, c, p) in enumerate(grid):
            st = step_time(rep, decode_seqs=d, decode_context=c, prefill_tokens=p, in_flight=flight)
            for f in ("compute_s", "memory_s", "ops_s", "kernels_s", "dequant_s", "comm_s", "pipeline_s", "total_s"):
                got = np.broadcast_to(getattr(vec, f), ds.shape)[j]
                assert got == pytest.approx(getattr(st, f), rel=REL, abs=1e-15), (f, d, c, p, flight)


@pytest.mark.parametrize("spec", REPLICAS, ids=lambda s: f"{s[0]}-{s[1]}-tp{s[2]}")
def test_static_and_continuous_arrays_equal_scalar(spec):
    rep = _rep(*spec)
    points = [(128, 64, 1), (1000, 200, 8), (3000, 2, 3), (9000, 16, 2), (512, 1, 32)]
    i, o, b = (np.asarray(v) for v in zip(*points, strict=True))
    st = estimate_static_arrays(rep, i, o, b)
    co = continuous_arrays(rep, i, o, b)
    for j, (il, ol, bl) in enumerate(points):
        e = estimate_static(rep, il, ol, bl, check_memory=False)
        assert st.ttft_s[j] == pytest.approx(e.ttft_s, rel=REL)
        assert st.tpot_s[j] == pytest.approx(e.tpot_s, rel=REL, abs=1e-15)
        assert st.output_tokens_per_s[j] == pytest.approx(e.output_tokens_per_s, rel=REL)
        tpot, ttft, _ = continuous_step(rep, il, ol, bl)
        assert co.tpot_s[j] == pytest.approx(tpot, rel=REL)
        assert co.ttft_s[j] == pytest.approx(ttft, rel=REL)
        assert time_prefill_arrays(rep, bl, il)[()] == pytest.approx(time_prefill_s(rep, bl, il)[0], rel=REL)


def test_efficiency_samples_broadcast_against_a_grid():
    rep = _rep("llama3-8b", "H100", 1, 1, "bf16", "vllm", 1)
    rng = np.random.default_rng(0)
    samples = [rep.eff.model_copy(update={"gemm_peak_fraction": float(g), "memory_bw_fraction": float(m)})
               for g, m in zip(rng.uniform(0.5, 0.8, 6), rng.uniform(0.6, 0.9, 6), strict=True)]
    eff = EfficiencyArrays.of(samples).reshape((6, 1))
    batch = np.asarray([1, 16, 128])
    res = estimate_static_arrays(rep, 512, 128, batch, eff=eff)
    assert res.tpot_s.shape == (6, 3)
    for s_i, e in enumerate(samples):
        r = make_replica(rep.model, rep.device, tp=1, dtype="bf16", engine="vllm", eff=e)
        for b_i, b in enumerate(batch):
            want = estimate_static(r, 512, 128, int(b), check_memory=False)
            assert res.tpot_s[s_i, b_i] == pytest.approx(want.tpot_s, rel=REL)
            assert res.ttft_s[s_i, b_i] == pytest.approx(want.ttft_s, rel=REL)


def test_bad_arrays_name_the_field():
    from xpuplan.errors import UserInputError

    rep = _rep("llama3-8b", "H100", 1, 1, "bf16", "vllm", 1)
    with pytest.raises(UserInputError) as e:
        estimate_static_arrays(rep, np.asarray([128, np.nan]), 64, 1)
    assert e.value.field == "input_len"
