"""benchmarks/expert_gemm_probe.py without a GPU: the serving section's groups and ``--compare`` on the stored H200
measurement (the serving planner's expert ops against measured grouped GEMMs)."""

from __future__ import annotations

import sys

import pytest

from tests.unit.benchmod import BENCHMARKS, load_probe


@pytest.fixture(scope="module")
def probe():
    return load_probe("expert_gemm_probe")


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


def test_fp8_quantized_tensors_are_the_forward_inputs_and_backward_output_gradients(probe) -> None:
    q = probe.quantized_tensors(4096, 2048, 768)
    assert q == {"x_up": (4096, 2048), "x_down": (4096, 768), "dy_down": (4096, 2048), "dy_up": (4096, 1536)}
    for model, ep, tokens in probe.FP8_EXPERT_CASES:  # every case is a layout rows_per_expert can split evenly
        d, f, n_exp, top_k = {m[0]: m[1:] for m in probe.MOE_SHAPES}[model]
        local, r = probe.rows_per_expert(n_exp, top_k, ep, tokens)
        assert local * ep == n_exp and r * local == tokens * top_k


def test_compare_prints_the_fp8_expert_section_against_the_planner(probe, tmp_path, capsys) -> None:
    """A measurement with an fp8_experts section: --compare prints measured and modelled times per case, and the
    modelled FP8 + quantization over BF16 ratio."""
    import json

    data = json.loads((BENCHMARKS / "data" / "device_runs" / "h200_expert_gemm_2026-11-27.json").read_text())
    six = dict.fromkeys(probe.EXPERT_GEMMS, 1e-4)
    data["fp8_experts"] = [{"model": "qwen3-30b-a3b", "ep": 16, "tokens": 4096, "local_experts": 8, "rows": 4096,
                            "bf16_s": six, "fp8_s": dict.fromkeys(six, 0.7e-4),
                            "quant_s": dict.fromkeys(("x_up", "x_down", "dy_down", "dy_up"), 2e-5)}]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    sys.argv = ["expert_gemm_probe.py", "--compare", str(path)]
    assert probe.main() == 0
    out = capsys.readouterr().out
    assert "fp8_experts:" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("qwen3-30b-a3b") and " 16 " in ln
                and "(" in ln)
    measured_ratio, modelled = line.split()[-2:]
    assert float(measured_ratio) == pytest.approx((6 * 0.7e-4 + 4 * 2e-5) / (6 * 1e-4), abs=0.01)
    assert 0.3 < float(modelled.strip("()")) < 1.5


@pytest.mark.parametrize(("row", "field"), [
    ({"model": "qwen3-30b-a3b"}, "fp8_experts[0].ep"),
    ({"model": "nope", "ep": 1, "tokens": 1, "local_experts": 1, "rows": 1, "bf16_s": {}, "fp8_s": {},
      "quant_s": {}}, "fp8_experts[0].model"),
])
def test_compare_names_the_field_of_a_malformed_fp8_row(probe, tmp_path, capsys, row, field) -> None:
    import json

    data = json.loads((BENCHMARKS / "data" / "device_runs" / "h100_fp8_experts_2026-11-27.json").read_text())
    data["fp8_experts"] = [row]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    sys.argv = ["expert_gemm_probe.py", "--compare", str(path)]
    assert probe.main() == 2
    assert field in capsys.readouterr().err
