"""Absurd sizes (a hidden size of 1e30, a memory figure of 1e308 GB) are refused naming the field, not turned
into overflows, NaN conversions or 50-digit parameter counts."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from xpuplan.catalog.overrides import MAX_FIGURE, parse_figure_override
from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.models.arch import MAX_LAYERS, MAX_WIDTH

runner = CliRunner()


def test_model_show_refuses_a_hidden_size_of_1e30(tmp_path):
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 10**30,
           "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
           "num_key_value_heads": 8, "vocab_size": 128256, "max_position_embeddings": 8192}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg), encoding="utf-8")
    r = runner.invoke(app, ["model", "show", str(f)])
    assert r.exit_code == 2, r.output
    assert "d_model" in r.output and str(MAX_WIDTH) in r.output
    assert "kB per token" not in r.output


@pytest.mark.parametrize(("field", "value"), [("n_layers", MAX_LAYERS + 1), ("d_model", MAX_WIDTH + 1),
                                              ("vocab_size", 10**30)])
def test_architecture_ceilings(field, value):
    base = get_model("llama3-8b").model_dump()
    base[field] = value
    with pytest.raises(ValidationError, match=field):
        type(get_model("llama3-8b")).model_validate(base)


def test_the_largest_presets_stay_below_the_ceilings():
    for mid in ("llama3.1-405b", "deepseek-v3", "qwen3-235b-a22b"):
        m = get_model(mid)
        assert m.n_layers < MAX_LAYERS and m.d_model < MAX_WIDTH


def test_hw_figure_of_1e308_is_refused_naming_the_flag():
    with pytest.raises(UserInputError, match="far above") as e:
        parse_figure_override("H100:memory.capacity_gb=1e308")
    assert e.value.field == "--hw-figure"
    assert parse_figure_override(f"H100:memory.capacity_gb={MAX_FIGURE:.0f}").value == MAX_FIGURE
    r = runner.invoke(app, ["--hw-figure", "H100:memory.capacity_gb=1e308", "infer", "estimate", "--model", "llama3-8b",
                            "--hw", "H100", "--batch", "8", "--in", "512", "--out", "64"])
    assert r.exit_code == 2, r.output
    assert "'--hw-figure'" in r.output and "NaN" not in r.output


def test_cost_serve_checks_the_prompt_against_the_models_context():
    r = runner.invoke(app, ["cost", "serve", "--model", "llama3-8b", "--hw", "H100", "--qps", "10", "--in", "100000"])
    assert r.exit_code == 2, r.output
    assert "'--in'" in r.output and "context" in r.output


def test_a_union_fields_other_members_are_not_counted_as_more_problems(tmp_path):
    """A length given as a distribution that fails its own check: pydantic also reports that it is not a plain
    number (the union's other member), which is no problem of the user's; a second real mistake still counts."""
    one = tmp_path / "one.yaml"
    one.write_text("scenario: online-inference\nworkload:\n  routing: null\n  serving:\n"
                   "    input_len: {dist: lognormal, mean: 1800, cv: 0.8, max: 600}\n    output_len: 300\n",
                   encoding="utf-8")
    r = runner.invoke(app, ["recommend", str(one)])
    assert r.exit_code == 2, r.output
    assert "below the mean" in r.output and "more problem" not in r.output
    two = tmp_path / "two.yaml"
    two.write_text(one.read_text(encoding="utf-8").replace("output_len: 300", "output_len: -5"), encoding="utf-8")
    r = runner.invoke(app, ["recommend", str(two)])
    assert r.exit_code == 2 and "(and 1 more problem(s))" in r.output, r.output


def test_a_length_below_one_token_is_refused_not_rounded_up(tmp_path):
    from xpuplan.workload.lengths import LengthDist

    with pytest.raises(ValidationError, match="below one token"):
        LengthDist(dist="fixed", mean=0.5)
    with pytest.raises(ValidationError, match="below one token"):
        LengthDist(dist="lognormal", mean=0.5, cv=0.3)
    f = tmp_path / "traffic.yaml"
    f.write_text("model: llama3-8b\nhardware: [nvidia-h100-sxm-80gb]\ntraffic:\n  batch: 8\n  input_len: 1000\n"
                 "  output_len: 0.5\n", encoding="utf-8")
    r = runner.invoke(app, ["infer", "estimate", "--scenario", str(f)])
    assert r.exit_code == 2, r.output
    assert "traffic.output_len" in r.output
