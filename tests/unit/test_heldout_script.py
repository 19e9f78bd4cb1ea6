"""benchmarks/heldout.py: rows whose layout the source leaves uncertain are scored at the recorded layout and their
``alt_layout`` reading is reported beside it, through the same ``xpuplan validate``."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _heldout():
    spec = importlib.util.spec_from_file_location("heldout_script", ROOT / "benchmarks" / "heldout.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses resolve their annotations through the module
    spec.loader.exec_module(mod)
    return mod


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    fields = list(rows[0])
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


def _row(rid: str, alt: str) -> dict[str, str]:
    return {"id": rid, "kind": "infer", "source": "test", "trust": "B", "model": "qwen3-30b-a3b",
            "hardware": "nvidia-rtx-pro-6000-server-96gb", "n_devices": "2", "precision": "fp4",
            "metric": "output_tokens_per_s", "value": "20000", "engine": "TensorRT-LLM v1.0 (PyTorch backend)",
            "weight_dtype": "fp4", "tp": "2", "pp": "1", "ep": "", "input_len": "128", "output_len": "2048",
            "scenario": "offline", "num_prompts": "3000", "alt_layout": alt}


def test_alternative_readings_predict_the_other_layout(tmp_path: Path) -> None:
    mod = _heldout()
    src = tmp_path / "table.csv"
    _write(src, [_row("X-1", "tp=1;ep=2"), _row("X-2", "")])
    recorded = mod.run_validate(src, "t")
    alt = mod.alternative_readings(src, tmp_path)
    assert alt is not None and [r.id for r in alt.rows] == ["X-1"]
    assert alt.rows[0].group.endswith("tp1pp1ep2")
    assert recorded.rows[0].group.endswith("tp2pp1ep1")
    table = mod.layout_sensitivity(recorded, alt)
    assert table["all"]["recorded"]["rows"] == 1 and table["all"]["alternative"]["rows"] == 1
    assert table["all"]["alternative_layout"] == ["tp1pp1ep2"]


def test_a_file_without_alternatives_gives_none_and_a_bad_key_is_named(tmp_path: Path) -> None:
    mod = _heldout()
    plain = tmp_path / "plain.csv"
    _write(plain, [_row("X-1", "")])
    assert mod.alternative_readings(plain, tmp_path) is None
    bad = tmp_path / "bad.csv"
    _write(bad, [_row("X-1", "tpp=1")])
    with pytest.raises(SystemExit, match="alt_layout"):
        mod.alternative_readings(bad, tmp_path)
