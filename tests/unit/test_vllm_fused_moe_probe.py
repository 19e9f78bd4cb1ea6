"""benchmarks/vllm_fused_moe_probe.py without a GPU: the routing alignment it does in PyTorch, vLLM's configuration
choice, the block quantization, and ``--compare`` on the stored H200 measurements."""

from __future__ import annotations

import json

import pytest

from tests.unit.benchmod import BENCHMARKS, load_probe

RUNS = BENCHMARKS / "data" / "device_runs"


@pytest.fixture(scope="module")
def probe():
    return load_probe("vllm_fused_moe_probe")


def test_alignment_puts_every_copy_once_in_a_row_block_of_its_own_expert(probe) -> None:
    torch = pytest.importorskip("torch")
    tokens, experts, top_k, block = 50, 16, 4, 16
    ids = torch.rand(tokens, experts, generator=torch.Generator().manual_seed(1)).topk(top_k, dim=1).indices
    sorted_ids, expert_ids, total, counts = probe._align(torch, ids.to(torch.int32), experts, block)
    copies, padded = tokens * top_k, int(total)
    assert sum(counts) == copies and padded % block == 0
    assert padded == sum(-(-c // block) * block for c in counts)  # each expert padded to whole blocks
    rows = sorted_ids[:padded]
    assert sorted(rows[rows < copies].tolist()) == list(range(copies))  # padding is the masked index `copies`
    flat = ids.flatten()
    for b in range(padded // block):
        members = rows[b * block:(b + 1) * block]
        assert all(int(flat[i]) == int(expert_ids[b]) for i in members[members < copies])


def test_configuration_is_the_nearest_tuned_token_count_else_vllms_default(probe) -> None:
    table = {16: {"BLOCK_SIZE_M": 16}, 1024: {"BLOCK_SIZE_M": 64}, 4096: {"BLOCK_SIZE_M": 128}}
    assert probe._config(table, 3000, 128, "bf16") == {"BLOCK_SIZE_M": 128}
    assert probe._config(table, 20000, 128, "bf16") == {"BLOCK_SIZE_M": 128}
    assert probe._config(table, 200, 128, "bf16") == {"BLOCK_SIZE_M": 16}
    assert probe._config(None, 8192, 256, "fp8_block")["BLOCK_SIZE_N"] == probe.BLOCK  # blocks match the scales
    assert probe._config(None, 64, 128, "bf16")["BLOCK_SIZE_M"] == 16  # fewer tokens than experts
    assert probe._config(None, 4096, 128, "bf16")["BLOCK_SIZE_M"] == 64


def test_block_quantization_keeps_one_scale_per_128_block_and_round_trips(probe) -> None:
    torch = pytest.importorskip("torch")
    w = torch.randn(2, 256, 384, generator=torch.Generator().manual_seed(2))
    q, scale = probe._quant_block(torch, w)
    assert q.dtype == torch.float8_e4m3fn and scale.shape == (2, 2, 3)
    assert float((probe._dequant(torch, q, scale) - w).norm() / w.norm()) < 0.05  # E4M3: 3 mantissa bits
    x = torch.randn(8, 384, generator=torch.Generator().manual_seed(3))
    qx, sx = probe._quant_rows(torch, x)
    assert sx.shape == (8, 3) and float((probe._dequant(torch, qx, sx) - x).norm() / x.norm()) < 0.05


def test_kernel_source_without_the_kernels_is_refused_by_name(probe, tmp_path) -> None:
    (tmp_path / "fused_moe.py").write_text("def unrelated():\n    pass\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="fused_moe_kernel"):
        probe._load_kernel(tmp_path)


def test_compare_sets_the_stored_h200_kernel_timings_against_the_planner(probe, capsys) -> None:
    """Every measured point gets a ratio; the tuned FP8-block DeepSeek-V3 kernel lands near the planner's law at
    prefill sizes, the same shape in BF16 on vLLM's default configuration well above it."""
    assert probe.main(["--compare", str(RUNS / "h200_vllm_fused_moe_2026-11-28.json")]) == 0
    out = capsys.readouterr().out
    doc = json.loads((RUNS / "h200_vllm_fused_moe_2026-11-28.json").read_text(encoding="utf-8"))
    for case in doc["cases"]:
        lines = [ln for ln in out.splitlines() if ln.startswith(case["id"] + " ")]
        assert len(lines) == len(case["points"])

    def both(case_id: str, tokens: int) -> float:
        line = next(ln for ln in out.splitlines() if ln.startswith(case_id + " ") and ln.split()[2] == str(tokens))
        return float(line.split()[-2])

    assert 0.8 < both("deepseek-v3-tp8-fp8block", 8192) < 1.25
    assert both("deepseek-v3-tp8-bf16", 8192) > 1.3


def test_compare_prints_the_block_fp8_dense_gemms(probe, capsys) -> None:
    assert probe.main(["--compare", str(RUNS / "h200_block_fp8_dense_2026-11-28.json")]) == 0
    out = capsys.readouterr().out
    assert "block-FP8 dense GEMMs" in out
    square = [ln for ln in out.splitlines() if ln.startswith("square")]
    assert len(square) == 2 and all(1.0 < float(ln.split()[-2]) < 1.5 for ln in square)


def test_compare_names_the_field_a_file_lacks(probe, tmp_path, capsys) -> None:
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"reference": {"bf16_8192_s": 0.0014}, "cases": [{"id": "a", "experts": 8}]}),
                   encoding="utf-8")
    assert probe.main(["--compare", str(bad)]) == 2
    assert "cases[0].expert_width" in capsys.readouterr().err
    bad.write_text("not json", encoding="utf-8")
    assert probe.main(["--compare", str(bad)]) == 2


def test_compare_names_an_unknown_device_or_engine(probe, capsys) -> None:
    path = str(RUNS / "h200_vllm_fused_moe_2026-11-28.json")
    assert probe.main(["--compare", path, "--device", "nope"]) == 2
    assert "hardware" in capsys.readouterr().err
    assert probe.main(["--compare", path, "--engine", "nope"]) == 2
    assert "engine" in capsys.readouterr().err


def test_an_unwritable_json_path_is_refused_before_any_gpu_time(probe, tmp_path, capsys) -> None:
    src = tmp_path / "vllm"
    src.mkdir()
    assert probe.main(["--vllm-dir", str(src), "--json", str(tmp_path / "missing" / "out.json")]) == 2
    assert "field '--json': the folder" in capsys.readouterr().err
    assert probe.main(["--vllm-dir", str(src), "--json", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
