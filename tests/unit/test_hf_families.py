"""Hugging Face configs of the families people run now (tests/fixtures/hf/families, sources in its
README): published parameter counts, local/global attention patterns counted in KV cache and
attention FLOPs, interleaved MoE layers, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.models import load_hf_config
from xpuplan.perf.flops import (
    flops_attention_core_per_token,
    flops_prefill,
    flops_training_per_token,
    mean_local_context,
)
from xpuplan.perf.memory import (
    inference_memory,
    kv_cache_bytes_per_token,
    kv_cache_layers_per_token,
    kv_full_equivalent_tokens,
)
from xpuplan.perf.params import param_breakdown

FAMILIES = Path(__file__).resolve().parents[1] / "fixtures" / "hf" / "families"
runner = CliRunner()

#: folder -> (published total, published active or None, relative tolerance); README cites each
PUBLISHED = {
    "gemma-2-9b": (917_962_752 + 8_324_201_984, None, 0.005),
    "gemma-2-27b": (1_180_237_824 + 26_047_480_320, None, 0.005),
    "gemma-3-1b": (1_000e6, None, 0.01),
    "gemma-3-4b": (675e6 + 3_209e6, None, 0.005),  # text model; its text_config omits the head counts
    "gemma-3-27b": (27_016e6, None, 0.005),  # text model; the 417M vision encoder is not counted
    "glm-4-9b": (9.4e9, None, 0.01),
    "glm-4.5": (355e9, None, 0.02),  # 32B active excludes embedding and head: see below
    "gpt-oss-120b": (116.83e9, None, 0.005),
    "gpt-oss-20b": (20.91e9, None, 0.005),
    "qwen1.5-moe-a2.7b": (14.3e9, 2.7e9, 0.01),
    "qwen2-57b-a14b": (57.4e9, 14.2e9, 0.01),
    "qwen3-30b-a3b": (30.5e9, 3.3e9, 0.02),
    "llama-4-scout-17b-16e": (109e9, 17e9, 0.02),  # 109B includes the vision encoder
    "llama-4-maverick-17b-128e": (400e9, 17e9, 0.02),
    "deepseek-v3.2-exp": (671e9, 37e9, 0.02),
    "mistral-7b-v0.1": (7.24e9, None, 0.005),
    "phi-3-mini-4k": (3.8e9, None, 0.01),
    "phi-4": (14.7e9, None, 0.01),
}


def _m(name: str):  # noqa: ANN202
    return load_hf_config(FAMILIES / name)


def test_every_fixture_has_a_published_count() -> None:
    assert {p.name for p in FAMILIES.iterdir() if (p / "config.json").is_file()} == set(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_counts_match_published(name: str) -> None:
    total, active, tol = PUBLISHED[name]
    b = param_breakdown(_m(name))
    assert b.total == pytest.approx(total, rel=tol)
    if active is not None:
        assert b.active == pytest.approx(active, rel=0.03)


def test_gpt_oss_active_excludes_embedding_as_published() -> None:
    # model card: 5.13B / 3.61B active, counting the unembedding but not the embedding
    for name, active in (("gpt-oss-120b", 5.13e9), ("gpt-oss-20b", 3.61e9)):
        b = param_breakdown(_m(name))
        assert b.active - b.embedding == pytest.approx(active, rel=0.01)
    b = param_breakdown(_m("glm-4.5"))  # GLM-4.5: 32B active, without embedding and output head
    assert b.active - b.embedding - b.output_head == pytest.approx(32e9, rel=0.01)


@pytest.mark.parametrize(("name", "n_local", "n_global", "window", "kind"), [
    ("gemma-2-9b", 21, 21, 4096, "sliding"),
    ("gemma-3-27b", 52, 10, 1024, "sliding"),
    ("gemma-3-1b", 22, 4, 512, "sliding"),
    ("gpt-oss-120b", 18, 18, 128, "sliding"),
    ("llama-4-scout-17b-16e", 36, 12, 8192, "chunked"),
    ("mistral-7b-v0.1", 32, 0, 4096, "sliding"),
    ("phi-3-mini-4k", 32, 0, 2047, "sliding"),
    ("phi-4", 0, 40, None, "sliding"),
    ("qwen2-57b-a14b", 0, 28, None, "sliding"),  # use_sliding_window false: the 131072 window is unused
])
def test_attention_patterns(name: str, n_local: int, n_global: int, window: int | None, kind: str) -> None:
    m = _m(name)
    assert (m.n_local_layers, m.n_global_layers, m.sliding_window, m.local_attention) == (n_local, n_global, window,
                                                                                         kind)


def test_gemma_layer_order() -> None:
    g2, g3 = _m("gemma-2-9b"), _m("gemma-3-27b")
    assert g2.local_layer_flags[:4] == (True, False, True, False)  # layer 0 local, as in transformers
    assert g3.local_layer_flags[:6] == (True,) * 5 + (False,)
    assert g2.global_every == 2 and g3.global_every == 6 and g2.layer_types is None


def test_irregular_layer_types_kept_explicit(tmp_path: Path) -> None:
    cfg = json.loads((FAMILIES / "gpt-oss-20b" / "config.json").read_text())
    cfg["layer_types"][5] = "sliding_attention"  # break the alternation
    d = tmp_path / "odd"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    m = load_hf_config(d)
    assert m.layer_types is not None and m.n_local_layers == 13
    cfg["layer_types"] = ["sliding_attention"] * 3
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    with pytest.raises(UserInputError) as ei:
        load_hf_config(d)
    assert ei.value.field == "layer_types" and ei.value.line is not None


def test_llama4_interleaved_moe_layers() -> None:
    mav, scout = _m("llama-4-maverick-17b-128e"), _m("llama-4-scout-17b-16e")
    assert mav.n_moe_layers == 24 and mav.moe_layer_flags[:4] == (False, True, False, True)
    assert mav.ffn_dim == 16384 and mav.moe.expert_ffn_dim == 8192 and mav.moe.n_shared_experts == 1
    assert scout.n_moe_layers == 48
    b = param_breakdown(mav)
    assert b.mlp_dense == 24 * 3 * 5120 * 16384  # the dense layers use intermediate_size_mlp


def test_kv_cache_counts_local_layers() -> None:
    m = _m("gemma-3-27b")
    per_layer = 2 * 16 * 128 * 2  # K and V, 16 KV heads of 128, bf16
    assert kv_cache_bytes_per_token(m) == 62 * per_layer  # no context: every layer in full (upper bound)
    c = 32768
    assert kv_cache_layers_per_token(m, c) == pytest.approx(10 + 52 * 1024 / c)
    assert kv_cache_bytes_per_token(m, context=c) == pytest.approx((10 + 52 * 1024 / c) * per_layer)
    assert kv_cache_bytes_per_token(m, context=512) == 62 * per_layer  # shorter than the window: all kept
    # a sequence of 32k tokens holds the KV of 10/62 of 32k plus 52/62 of 1k full-model tokens
    assert kv_full_equivalent_tokens(m, c) == pytest.approx((10 * c + 52 * 1024) / 62)
    mem = inference_memory(m, batch=4, context=c)
    assert mem.kv_cache == pytest.approx(4 * (10 * c + 52 * 1024) * per_layer)
    mistral = _m("mistral-7b-v0.1")
    assert kv_full_equivalent_tokens(mistral, 16384) == pytest.approx(4096)


def _brute_mean(seq: int, w: int, chunked: bool) -> float:
    keys = [(i % w) + 1 if chunked else min(i + 1, w) for i in range(seq)]
    return sum(keys) / seq


@pytest.mark.parametrize(("seq", "w"), [(10, 4), (4, 10), (4096, 128), (9000, 8192), (8192, 8192)])
def test_mean_local_context_matches_counting(seq: int, w: int) -> None:
    g = _m("gpt-oss-20b").model_copy(update={"sliding_window": w})
    assert mean_local_context(g, seq) == pytest.approx(_brute_mean(seq, w, False))
    ch = g.model_copy(update={"local_attention": "chunked"})
    assert mean_local_context(ch, seq) == pytest.approx(_brute_mean(seq, w, True))
    assert mean_local_context(g, seq, causal=False) == min(seq, w)


def test_attention_flops_count_local_layers() -> None:
    m = _m("gemma-2-9b")
    per_key = 2.0 * m.n_heads * (m.qk_head_dim + m.v_head_dim)  # QK^T and AV per key, per layer
    # decode at 8k context: global layers see 8192 keys, local ones their 4096 window
    assert flops_attention_core_per_token(m, 8192) == pytest.approx(per_key * (21 * 8192 + 21 * 4096))
    s = 8192
    tr = flops_training_per_token(m, s)
    expect = per_key * (21 * (s + 1) / 2 + 21 * _brute_mean(s, 4096, False))
    assert tr.forward_attention == pytest.approx(expect)
    all_global = m.model_copy(update={"sliding_window": None, "global_every": None})
    assert flops_prefill(m, s) < flops_prefill(all_global, s)
    assert flops_prefill(m, 2048) == pytest.approx(flops_prefill(all_global, 2048))  # inside the window


def test_prompt_longer_than_context_is_an_error() -> None:
    res = runner.invoke(app, ["infer", "estimate", "--model", str(FAMILIES / "gemma-2-9b"), "--hw", "L20",
                              "--in", "9000", "--out", "10"])
    assert res.exit_code == 2 and "--in" in res.output and "8192" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["infer", "estimate", "--model", str(FAMILIES / "gemma-2-9b"), "--hw", "L20",
                              "--in", "8000", "--out", "500"])
    assert res.exit_code == 2 and "--out" in res.output
    res = runner.invoke(app, ["infer", "capacity", "--model", "phi-3-mini", "--hw", "L20", "--qps", "1",
                              "--in", "4000", "--out", "200", "--tpot-ms", "50"])
    assert res.exit_code == 2 and "'--out'" in res.output and "4096" in res.output
    with pytest.raises(UserInputError) as ei:
        _m("phi-3-mini-4k").check_context(5000, "input_len")
    assert ei.value.field == "input_len"


def test_sliding_window_raises_serving_capacity() -> None:
    res = runner.invoke(app, ["infer", "estimate", "--model", str(FAMILIES / "gemma-3-27b"), "--hw", "RTX PRO 6000",
                              "--in", "30000", "--out", "500", "--batch", "8", "--json"])
    assert res.exit_code == 0, res.output  # 8 x 30k tokens of all-global KV would need ~120 GB


def test_multimodal_wrapper_needs_text_config(tmp_path: Path) -> None:
    cfg = json.loads((FAMILIES / "gemma-3-27b" / "config.json").read_text())
    del cfg["text_config"]
    d = tmp_path / "g3"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    with pytest.raises(UserInputError, match="text_config") as ei:
        load_hf_config(d)
    assert ei.value.field == "text_config"
    cfg = json.loads((FAMILIES / "gemma-3-27b" / "config.json").read_text())
    cfg["text_config"]["num_hidden_layers"] = "sixty-two"
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    with pytest.raises(UserInputError) as ei:
        load_hf_config(d)
    assert ei.value.field == "text_config.num_hidden_layers" and ei.value.line is not None


def test_qwen_sliding_window_layers(tmp_path: Path) -> None:
    cfg = json.loads((FAMILIES / "qwen1.5-moe-a2.7b" / "config.json").read_text())
    cfg.update(use_sliding_window=True, sliding_window=4096, max_window_layers=20)
    d = tmp_path / "q"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    m = load_hf_config(d)
    assert m.sliding_window == 4096 and m.n_local_layers == 4 and m.local_layer_flags[-1]


def test_model_show_prints_pattern() -> None:
    res = runner.invoke(app, ["model", "show", str(FAMILIES / "gemma-3-27b")])
    assert res.exit_code == 0, res.output
    assert "52 sliding(1024) + 10 global" in res.output


#: family fixture -> preset built from the same published config
PRESET_OF = {"gemma-2-9b": "gemma2-9b", "gemma-2-27b": "gemma2-27b", "gemma-3-1b": "gemma3-1b",
             "gemma-3-27b": "gemma3-27b", "glm-4-9b": "glm-4-9b", "glm-4.5": "glm-4.5", "gpt-oss-120b": "gpt-oss-120b",
             "gpt-oss-20b": "gpt-oss-20b", "qwen2-57b-a14b": "qwen2-57b-a14b", "qwen3-30b-a3b": "qwen3-30b-a3b",
             "llama-4-scout-17b-16e": "llama4-scout", "llama-4-maverick-17b-128e": "llama4-maverick",
             "phi-3-mini-4k": "phi-3-mini", "phi-4": "phi-4", "mistral-7b-v0.1": "mistral-7b"}


@pytest.mark.parametrize("name", sorted(PRESET_OF))
def test_presets_match_their_hf_config(name: str) -> None:
    from xpuplan.models import get_model

    skip = {"id", "name", "family", "aliases", "published", "notes"}
    assert _m(name).model_dump(exclude=skip) == get_model(PRESET_OF[name]).model_dump(exclude=skip)


def test_layer_ops_average_layer_counts_local_attention() -> None:
    from xpuplan.perf.ops import layer_ops

    m = _m("gemma-3-27b")

    def att(**kw):  # noqa: ANN003, ANN202
        return next(o for o in layer_ops(m, batch=4, q_len=1, kv_len=32768, **kw) if o.op_class == "attention")

    glob, loc, avg = att(local=False), att(local=True), att()
    assert loc.bytes < glob.bytes / 10  # a local layer reads its 1024-token window, not 32k tokens
    assert avg.bytes == pytest.approx((10 * glob.bytes + 52 * loc.bytes) / 62)
    assert avg.flops == pytest.approx((10 * glob.flops + 52 * loc.flops) / 62)
    short = next(o for o in layer_ops(m, batch=4, q_len=1, kv_len=512) if o.op_class == "attention")
    assert short.bytes == pytest.approx(
        next(o for o in layer_ops(m, batch=4, q_len=1, kv_len=512, local=False) if o.op_class == "attention").bytes)


def test_serving_tpot_counts_local_attention(tmp_path: Path) -> None:
    def tpot(model: str) -> float:
        res = runner.invoke(app, ["infer", "estimate", "--model", model, "--hw", "H200", "--in", "60000", "--out", "200",
                                  "--batch", "1", "--json"])
        assert res.exit_code == 0, res.output
        return json.loads(res.stdout)["results"][0]["tpot_s"]

    cfg = json.loads((FAMILIES / "gemma-3-27b" / "config.json").read_text())
    cfg["text_config"]["sliding_window_pattern"] = 1  # every layer global: the counterfactual
    d = tmp_path / "gemma-3-27b-all-global"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    assert load_hf_config(d).n_local_layers == 0
    # one 60k-token sequence: decode reads 54 GB of weights plus 60k x 508 kB of KV (all global) or
    # about 60k x 88 kB (52 of 62 layers keep 1024 tokens): ~39 ms vs ~48 ms
    local, glob = tpot(str(FAMILIES / "gemma-3-27b")), tpot(str(d))
    assert local < 0.9 * glob
