"""The SLO search's concurrency table (array evaluation) gives the scalar path's numbers."""

from __future__ import annotations

import pytest

import xpuplan as xp
from xpuplan.serve.slo import SLO, concurrency_table, load_point, throughput_at_slo

CASES = [
    ("llama3-70b", "H100", 4, "fp8", None),          # vLLM, chunked prefill
    ("llama3-8b", "910B", 1, "bf16", "mindie"),       # C++ runtime
    ("mixtral-8x7b", "MI300X", 2, "bf16", None),      # MoE
    ("llama3-70b", "H100", 4, "bf16", "trtllm"),
]


@pytest.mark.parametrize("model, hw, tp, dtype, engine", CASES)
def test_table_equals_the_scalar_evaluation(model: str, hw: str, tp: int, dtype: str, engine: str | None) -> None:
    rep = xp.make_replica(xp.get_model(model), xp.get_device(hw), tp=tp, dtype=dtype, engine=engine)
    table = concurrency_table(rep, 2048, 256, 3000, 64)
    for rate in (0.05, 0.5, 2.0):
        scalar = load_point(rep, 2048, 256, rate, ttft_input_len=3000, max_concurrency=64)
        tabled = load_point(rep, 2048, 256, rate, ttft_input_len=3000, max_concurrency=64, table=table)
        assert (scalar is None) == (tabled is None)
        if scalar is not None and tabled is not None:
            assert tabled.concurrency == scalar.concurrency
            for a, b in [(tabled.tpot_s, scalar.tpot_s), (tabled.ttft_p_s, scalar.ttft_p_s),
                         (tabled.e2e_mean_s, scalar.e2e_mean_s)]:
                assert a == pytest.approx(b, rel=1e-9)


def test_throughput_at_slo_is_positive_and_meets_the_slo() -> None:
    rep = xp.make_replica(xp.get_model("llama3-8b"), xp.get_device("H100"), tp=1, dtype="bf16")
    res = throughput_at_slo(rep, 1024, 256, SLO(ttft_s=1.0, tpot_s=0.05))
    assert res.max_rate > 0
    assert res.point.tpot_s <= 0.05 and res.point.ttft_p_s <= 1.0
