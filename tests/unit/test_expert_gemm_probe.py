"""benchmarks/expert_gemm_probe.py without a GPU: the serving section's groups and ``--compare`` on the stored H200
measurement (the serving planner's expert ops against measured grouped GEMMs)."""

from __future__ import annotations

import sys

import pytest

from tests.unit.benchmod import BENCHMARKS, load_benchmark


@pytest.fixture(scope="module")
def probe():
    sys.path.insert(0, str(BENCHMARKS))  # the probe imports its sibling gpu_timing
    try:
        yield load_benchmark("expert_gemm_probe")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_serving_groups_spread_token_copies_and_pad_rows_to_the_kernel_alignment(probe) -> None:
    assert probe.serve_groups(128, 8, 16) == (128, 16)       # 128 copies, one row each, padded to 16
    assert probe.serve_groups(256, 8, 16) == (128, 16)       # fewer copies than experts: only those touched
    assert probe.serve_groups(128, 8, 8192) == (128, 512)    # 65,536 copies over 128 experts
    touched, rows = probe.serve_groups(8, 2, 100)
    assert touched == 8 and rows % probe.GROUP_ALIGN == 0 and rows * touched >= 200


def test_compare_reads_the_stored_h200_serving_measurement(probe, capsys) -> None:
    path = BENCHMARKS / "data" / "device_runs" / "h200_serve_moe_gemm_2026-11-27.json"
    sys.argv = ["expert_gemm_probe.py", "--compare", str(path)]
    assert probe.main() == 0
    out = capsys.readouterr().out
    assert "serving: routed experts of one MoE layer" in out
    rows = [line for line in out.splitlines() if line.strip().startswith("qwen3-235b-a22b") and " 8 " in line]
    assert len(rows) >= len(probe.SERVE_TOKENS)


def test_compare_refuses_a_file_that_is_not_a_measurement(probe, tmp_path, capsys) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("{}", encoding="utf-8")
    sys.argv = ["expert_gemm_probe.py", "--compare", str(bad)]
    assert probe.main() == 2
    assert "missing field" in capsys.readouterr().err
