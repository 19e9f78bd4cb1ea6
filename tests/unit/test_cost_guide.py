"""The guide's 3-year TCO example (guide 000 §6.2.2), recomputed by the block in docs/cost.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "cost.md"


@pytest.fixture(scope="module")
def ns() -> dict[str, object]:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"## The guide's 3-year TCO example.*?```python\n(.*?)```", text, re.S)
    assert block, "docs/cost.md lost its executable TCO block"
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), str(DOC), "exec"), namespace)
    return namespace


def test_guide_sums_reproduce_at_its_own_inputs(ns):
    gpu, npu = ns["gpu"], ns["npu"]
    assert gpu.total_usd == pytest.approx(3_160_000, rel=1e-9)
    assert gpu.lines_usd["energy_usd"] == pytest.approx(360_000, rel=1e-9)
    assert gpu.lines_usd["operations_usd"] == pytest.approx(300_000, rel=1e-9)
    # one electricity price for both fleets gives $38,571 (not $40,000) for the NPU line
    assert npu.total_usd == pytest.approx(1_738_571, abs=1)
    assert 1 - npu.total_usd / gpu.total_usd == pytest.approx(0.45, abs=0.005)


def test_guide_electricity_lines_imply_inconsistent_prices(ns):
    assert ns["gpu_usd_per_kwh"] == pytest.approx(0.489, abs=0.001)
    assert ns["npu_usd_per_kwh"] == pytest.approx(0.507, abs=0.001)
    assert ns["claim_usd_per_kwh"] == pytest.approx(0.365, abs=0.001)
    # the guide's price is ~6x the US industrial average on file
    from xpuplan.catalog.prices import load_prices

    us = load_prices().region("us").electricity_usd_per_kwh.value
    assert ns["gpu_usd_per_kwh"] / us > 5


def test_public_figures_shrink_the_gap_and_workloads_differ(ns):
    gpu, npu = ns["gpu_pub"], ns["npu_pub"]
    assert gpu.total_usd == pytest.approx(1.997e6, rel=1e-3)
    assert npu.total_usd == pytest.approx(1.710e6, rel=1e-3)
    assert 0.10 < 1 - npu.total_usd / gpu.total_usd < 0.20
    assert ns["compute_ratio"] == pytest.approx(14.1, abs=0.1)
    assert round(ns["npu_cards_same_peak"]) == 565
