"""benchmarks/vllm_host_probe.py without vLLM: bad batches and a missing vLLM give clear messages, and the stored
measurement is what the engine profile's per-request host cost cites."""

from __future__ import annotations

import json
import sys

import pytest

from tests.unit.benchmod import BENCHMARKS, load_benchmark
from xpuplan.catalog.assumptions import default_assumptions


@pytest.fixture(scope="module")
def probe():
    return load_benchmark("vllm_host_probe")


def test_a_batch_below_one_is_refused_with_exit_2(probe, capsys) -> None:
    assert probe.main(["64", "0"]) == 2
    assert "batches" in capsys.readouterr().err


def test_without_vllm_the_probe_says_how_to_install_it(probe, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(SystemExit, match="not importable"):
        probe.main(["64"])


def test_the_engine_profile_uses_the_stored_measurement() -> None:
    """The value is what the lent H200's host measured in its two runs after the warm-up one."""
    runs = [json.loads((BENCHMARKS / "data" / "host_runs" / f"vllm_0.10.2_v1_host_h200-host-xeon_run{i}_2026-11-28.json")
                       .read_text()) for i in (2, 3)]
    per_request_us = sorted(r["per_request_us"] for run in runs for r in run["rows"])
    assert all(run["vllm"] == "0.10.2" for run in runs) and len(per_request_us) == 8
    used_us = default_assumptions().engine("vLLM 0.10.2").host_s_per_sequence * 1e6
    assert per_request_us[0] <= used_us <= per_request_us[-1]
