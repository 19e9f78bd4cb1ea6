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
