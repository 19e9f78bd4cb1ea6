"""benchmarks/attention_bwd_probe.py without a GPU: its kernel choice."""

from __future__ import annotations

from tests.unit.benchmod import load_probe


def test_attention_probe_names_the_backends_it_knows() -> None:
    """benchmarks/attention_bwd_probe.py refuses an unknown --backends name before it needs a GPU."""
    attn = load_probe("attention_bwd_probe")
    assert set(attn.BACKENDS) == {"fa2", "cudnn", "efficient"}
    assert attn.main(["--backends", "fa2,flash1"]) == 2


def test_attention_probe_refuses_an_unwritable_json_path_before_it_needs_a_gpu(tmp_path, capsys) -> None:
    attn = load_probe("attention_bwd_probe")
    assert attn.main(["--json", str(tmp_path / "missing" / "out.json")]) == 2
    assert "field '--json'" in capsys.readouterr().err
