"""The decision engine: constraints -> rejected with reasons, infeasible scenarios, determinism,
hybrids, per-option provenance, scenario files and i18n completeness."""

import pytest

from xpuplan.decide import list_presets, load_scenario, preset
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.i18n import catalogue, t
from xpuplan.jobs.recommend import recommend

# QLoRA on two cards: the fastest preset to plan (a fraction of a second).
QLORA = "finetuning-qlora"


def _qlora(**over):
    return preset(QLORA, over)


def test_ranking_is_complete_and_explained():
    r = recommend(QLORA)
    assert r.schema_version == 2 and r.scenario == QLORA
    scores = [o.score for o in r.options]
    assert scores == sorted(scores, reverse=True) and [o.rank for o in r.options] == list(range(1, len(scores) + 1))
    for o in r.options:
        assert set(o.criteria) == set(r.weights) and 0 <= o.score <= 100
        assert o.score == pytest.approx(sum(c.points for c in o.criteria.values()))
        assert o.figures and all(f.trust in "ABCD" for f in o.figures)
        assert o.parts[0].plan["kind"] == "training" and o.time_s > 0
    # two 24 GB RTX 4090 hold a 70B QLoRA run only with the layer inputs in host memory (activation offload,
    # as Answer.AI's FSDP + QLoRA did on two 24 GB cards)
    ranked = {o.key: o for o in r.options}
    assert "-roff-" in ranked["nvidia-rtx-4090-24gb"].parts[0].plan["key"]
    assert r.explanation.summary and r.explanation.why and r.explanation.benchmark_first
    # on one card the 4-bit base alone (~37 GB) does not fit: rejected with the planner's reason
    one = recommend(_qlora(workload={"kind": "training", "training": {"train_tokens": 5.0e7, "devices": 1,
                                                                      "method": "qlora", "seq_len": 2048}}))
    rej = {x.key: x for x in one.rejected}
    assert rej["nvidia-rtx-4090-24gb"].constraint == "workload" and rej["nvidia-rtx-4090-24gb"].reasons


def test_fact_constraints_reject_with_reasons():
    s = _qlora(constraints={"denied_vendors": ["AMD"], "max_power_w_per_device": 650, "region": "any"})
    r = recommend(s)
    rej = {x.key: x for x in r.rejected}
    assert rej["amd-mi300x-192gb"].constraint == "denied_vendors"
    assert rej["nvidia-h100-sxm-80gb"].constraint == "max_power_w_per_device"
    assert "700 W > 650 W" in rej["nvidia-h100-sxm-80gb"].reasons[0]
    assert all(o.hardware not in rej for o in r.options)


def test_domestic_only_and_region():
    r = recommend(_qlora(constraints={"domestic_only": True, "region": "cn"}))
    assert [o.hardware for o in r.options] == ["huawei-ascend-910b"]
    rej = {x.key: x.constraint for x in r.rejected}
    assert rej["nvidia-h100-sxm-80gb"] == "domestic_only"
    # in the US the Ascend part is not available (catalog: sold in mainland China only)
    r = recommend(_qlora(constraints={"region": "us"}))
    rej = {x.key: x for x in r.rejected}
    assert rej["huawei-ascend-910b"].constraint == "region" and "mainland China" in rej["huawei-ascend-910b"].reasons[0]


def test_option_constraints_and_binding():
    r = recommend(_qlora(constraints={"region": "any", "max_budget_usd": 1000}))
    assert all(o.cost_usd is not None and o.cost_usd <= 1000 for o in r.options)
    budget = [x for x in r.rejected if x.constraint == "max_budget_usd"]
    assert budget and any("unknown" in x.reasons[0] or "> budget" in x.reasons[0] for x in budget)


def test_impossible_constraint_names_what_eliminated_what():
    with pytest.raises(InfeasibleError) as e:
        recommend(_qlora(constraints={"region": "any", "max_power_w_per_device": 10}))
    text = " ".join(e.value.reasons)
    assert "max_power_w_per_device eliminated" in text and "nvidia-h100-sxm-80gb" in text


def test_same_seed_same_result_and_seed_matters():
    a = recommend(QLORA, samples=300, seed=11).to_dict()
    b = recommend(QLORA, samples=300, seed=11).to_dict()
    c = recommend(QLORA, samples=300, seed=12).to_dict()
    for d in (a, b, c):
        d.pop("elapsed_s")
    assert a == b
    ua = [o["uncertainty"] for o in a["options"]]
    uc = [o["uncertainty"] for o in c["options"]]
    assert ua != uc
    for o in a["options"]:
        u = o["uncertainty"]
        assert u["time_s"]["p10"] <= u["time_s"]["p50"] <= u["time_s"]["p90"]
    assert sum(o["uncertainty"]["p_rank_first"] for o in a["options"]) == pytest.approx(1.0)


def test_low_trust_hardware_gets_a_wider_band():
    r = recommend(_qlora(constraints={"region": "any"}), samples=2000, seed=1)
    width = {o.hardware: o.uncertainty.time_s.p90 / o.uncertainty.time_s.p10 for o in r.options}
    assert width["huawei-ascend-910b"] > width["nvidia-h100-sxm-80gb"]


def test_weights_override_changes_the_ranking_and_is_validated():
    base = recommend(QLORA)
    # all weight on hardware cost: the cheapest known purchase wins
    w = {k: 0.0 for k in base.weights}
    w["hardware_cost"] = 100.0
    r = recommend(QLORA, weights=w)
    costs = {o.key: o.criteria["hardware_cost"].raw for o in r.options}
    known = {k: v for k, v in costs.items() if v is not None}
    assert r.options[0].key == min(known, key=known.get)
    with pytest.raises(UserInputError) as e:
        recommend(QLORA, weights={"latency": -5})
    assert e.value.field.startswith("--weight")


def test_routed_hybrid_is_an_option_with_both_pools_sized():
    sc = {"scenario": "custom", "model": "llama3-8b", "hardware": ["nvidia-h100-sxm-80gb", "huawei-ascend-910b"],
          "workload": {"kind": "serving",
                       "serving": {"qps": 4, "input_len": 1024, "output_len": 128, "ttft_ms": 2000, "tpot_ms": 60},
                       "routing": {"complex_fraction": 0.3, "complex": {"input_len": 4096, "output_len": 512},
                                   "standard": {"input_len": 512, "output_len": 64}}},
          "constraints": {"region": "any"}}
    r = recommend(sc)
    mixes = [o for o in r.options if o.kind == "mix"]
    assert len(mixes) == 1
    m = mixes[0]
    assert m.mix == {"complex": "nvidia-h100-sxm-80gb", "standard": "huawei-ascend-910b"}
    assert {p.role for p in m.parts} == {"complex", "standard"} and all(p.devices >= 1 for p in m.parts)
    assert m.devices == sum(p.devices for p in m.parts)


def test_scenario_file_errors_name_file_line_and_field(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("scenario: pretraining\nworkload:\n  training: {train_tokens: -5, devices: 8}\n", encoding="utf-8")
    with pytest.raises(UserInputError) as e:
        load_scenario(p)
    assert e.value.file == str(p) and e.value.line == 3 and "train_tokens" in e.value.field
    p.write_text("scenario: pretraning\n", encoding="utf-8")
    with pytest.raises(UserInputError) as e:
        load_scenario(p)
    assert e.value.field == "scenario" and "pretraining" in e.value.message and e.value.line == 1
    p.write_text("scenario: pretraining\nconstraints: {max_devices: many}\n", encoding="utf-8")
    with pytest.raises(UserInputError) as e:
        load_scenario(p)
    assert e.value.field == "constraints.max_devices" and e.value.line == 2


def test_every_preset_is_valid_and_documents_a_title():
    for name in list_presets():
        s = preset(name)
        assert s.scenario == name and s.title and s.title_zh


def test_every_english_message_has_a_chinese_entry():
    en, zh = catalogue("en"), catalogue("zh")
    assert set(en) == set(zh)
    for k in en:
        assert zh[k].strip(), k
        # the same placeholders in both languages
        import string

        fields = lambda s: {f for _, f, _, _ in string.Formatter().parse(s) if f}  # noqa: E731
        assert fields(en[k]) == fields(zh[k]), k
    assert t("criterion.latency", "zh") == "延迟性能"


def test_chinese_explanation():
    r = recommend(QLORA, lang="zh")
    assert r.explanation.lang == "zh" and "排名第一" in r.explanation.summary


def test_unknown_vendor_is_a_field_error():
    with pytest.raises(UserInputError) as e:
        recommend(_qlora(constraints={"denied_vendors": ["Nvidai"]}))
    assert e.value.field == "constraints.denied_vendors[0]" and "NVIDIA" in e.value.message


def test_binding_constraints_are_reported():
    r = recommend(_qlora(constraints={"region": "any", "max_devices": 2, "max_power_w_per_device": 760}))
    top = r.options[0]
    assert any(b.startswith("max_devices: 2 of 2") for b in top.binding)
    h100 = next(o for o in r.options if o.hardware == "nvidia-h100-sxm-80gb")
    assert any("max_power_w_per_device" in b and "700 W of 760 W" in b for b in h100.binding)


def test_every_example_file_is_a_valid_scenario():
    from pathlib import Path

    import yaml

    # examples/ also holds other commands' inputs (e.g. fleet-*.yaml); recommend scenarios name a scenario
    files = [f for f in sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))
             if "scenario" in (yaml.safe_load(f.read_text(encoding="utf-8")) or {})]
    assert len(files) >= 10
    names = {load_scenario(f).scenario for f in files}
    assert set(list_presets()) <= names | {"custom"}
    domestic = load_scenario(files[0].parent / "pretraining-domestic.yaml")
    assert domestic.constraints.domestic_only and domestic.region == "cn"
    hybrid = load_scenario(files[0].parent / "online-hybrid.yaml")
    assert hybrid.workload.routing is not None


def test_a_complete_mapping_is_still_merged_over_its_preset():
    # A mapping with every required key (as the HTTP API and the web page send) must keep the preset's
    # other keys (here the edge preset's int8 dtype, without which the Ascend 310P cannot serve).
    from xpuplan.jobs.recommend import RecommendRequest

    body = {"scenario": "edge-inference", "model": "llama3-8b",
            "hardware": ["huawei-ascend-310p", "nvidia-rtx-4090-24gb"],
            "workload": {"kind": "serving", "serving": {"qps": 2}}}
    assert isinstance(RecommendRequest(scenario=body).scenario, dict)
    rec = recommend(body, samples=0)
    assert rec.workload["serving"]["dtypes"] == preset("edge-inference").workload.serving.dtypes
    assert [o.key for o in rec.options] == [o.key for o in recommend(
        {"scenario": "edge-inference", "hardware": body["hardware"]}, samples=0).options]


def test_memory_fit_counts_the_devices_the_training_state_needs_not_the_plan_split():
    """A ZeRO-3 plan that offloads activations (tp = pp = 1) does not make an 80 GB part "fit" a 70B model on one
    device: memory_fit counts the devices whose usable memory holds the training state, so a 141 GB part needs
    fewer than an 80 GB one whatever plans the search picks for them."""
    r = recommend("pretraining", samples=0)
    raw = {o.key: o.criteria["memory_fit"].raw for o in r.options}
    assert raw["nvidia-h200-sxm-141gb"] < raw["nvidia-h100-sxm-80gb"]
    assert raw["nvidia-b200-180gb"] <= raw["nvidia-h200-sxm-141gb"]
    assert all(v is not None and v >= 1 for v in raw.values())


def test_requests_longer_than_the_models_context_name_their_field():
    """prompt + output above the model's context (Llama-3-70B: 8,192) is refused with the scenario field,
    as `xpuplan infer` refuses it, instead of pricing requests the model cannot serve."""
    from xpuplan.decide.engine import evaluate

    s = preset("online-inference", {"hardware": ["nvidia-h100-sxm-80gb"], "workload": {"routing": {
        "complex": {"input_len": 8192, "output_len": 1024}}}})
    with pytest.raises(UserInputError, match=r"workload\.routing\.complex\.output_len"):
        evaluate(s, samples=0)
    s = preset("online-inference", {"hardware": ["nvidia-h100-sxm-80gb"], "workload": {"serving": {"input_len": 9000}}})
    with pytest.raises(UserInputError, match=r"workload\.serving\.input_len"):
        evaluate(s, samples=0)


def test_a_ttft_limit_met_only_near_idle_is_noted_on_the_part():
    from xpuplan.catalog import get_device
    from xpuplan.decide.parts import TTFT_NEAR_IDLE_SHARE, Load, plan_serving
    from xpuplan.models import get_model
    from xpuplan.workload.lengths import as_length

    m = get_model("llama3-70b")
    dev = get_device("huawei-ascend-910b")
    tight = plan_serving(m, dev, "complex", Load(qps=2.0, input_len=as_length(7168), output_len=as_length(256), ttft_s=2.0, tpot_s=0.05,
                                                 dtypes=("bf16",), batch=False))
    loose = plan_serving(m, dev, "complex", Load(qps=2.0, input_len=as_length(7168), output_len=as_length(256), ttft_s=20.0, tpot_s=0.05,
                                                 dtypes=("bf16",), batch=False))
    assert tight.ok and loose.ok
    assert tight.ttft_s is not None and tight.plan["limited_by"].startswith("TTFT")
    assert any("binds near idle" in n for n in tight.notes)
    assert not any("binds near idle" in n for n in loose.notes)
    assert loose.devices < tight.devices
    assert 0 < TTFT_NEAR_IDLE_SHARE < 1


@pytest.mark.parametrize("lang,words", [("en", "nearly idle"), ("zh", "副本几乎空闲")])
def test_the_near_idle_ttft_pool_is_a_caveat_in_both_languages(lang, words):
    rec = recommend(preset("online-inference", {"hardware": ["huawei-ascend-910b"], "mixes": False}),
                    samples=0, lang=lang)
    near = [c for c in rec.explanation.caveats if words in c]
    assert len(near) == 1 and "huawei-ascend-910b" in near[0] and "7,168" in near[0]


def _one_pool(serving: dict, hw: str = "nvidia-h100-sxm-80gb") -> dict:
    return {"hardware": [hw], "mixes": False, "workload": {"routing": None, "serving": serving}}


def test_serving_lengths_may_be_a_distribution_whose_tail_sets_the_ttft():
    """A prompt-length distribution is planned as `infer capacity` plans it: throughput on its (cut) mean, the P99 TTFT
    on its P99 prompt. The same mean as a fixed length needs fewer devices under a TTFT limit."""
    from xpuplan.workload.lengths import LengthDist

    dist = {"dist": "lognormal", "mean": 1800, "cv": 0.8, "max": 6000}
    mean = LengthDist(**dist).average
    spread = recommend(preset("online-inference", _one_pool({"input_len": dist, "output_len": 300, "ttft_ms": 800})),
                       samples=0)
    fixed = recommend(preset("online-inference", _one_pool({"input_len": mean, "output_len": 300, "ttft_ms": 800})),
                      samples=0)
    p, q = spread.options[0].parts[0], fixed.options[0].parts[0]
    assert p.plan["input_len"] == pytest.approx(mean, abs=0.05) and mean < 1800  # the cut mean, not the uncut
    assert p.plan["input_dist"] == {"dist": "lognormal", "mean": 1800.0, "cv": 0.8, "max": 6000.0}
    assert "input_dist" not in q.plan and "output_dist" not in p.plan  # fixed lengths carry no distribution
    assert p.plan["limited_by"].startswith("TTFT") and p.devices > q.devices
    used = next(a for a in spread.assumptions if a["name"] == "serving_lengths")
    assert used["value"] == {"serve": f"prompts lognormal, mean {p.plan['input_len']:,} tokens (scenario); "
                                      "outputs 300 tokens (scenario)"}


def test_a_dataset_gives_the_serving_lengths_for_the_models_tokenizer_and_replaces_the_presets():
    from xpuplan.models import get_model
    from xpuplan.workload.datasets import dataset_lengths

    ds = dataset_lengths("sharegpt", get_model("llama3-70b").vocab_size)
    rec = recommend(preset("online-inference", _one_pool({"dataset": "ShareGPT"})), samples=0)
    p = rec.options[0].parts[0]
    assert p.plan["dataset"] == "sharegpt"
    assert p.plan["input_len"] == pytest.approx(ds.input_mean, abs=0.05)  # not the preset's 2,048
    assert p.plan["output_len"] == pytest.approx(ds.output_mean, abs=0.05)
    assert p.plan["input_dist"]["dist"] == ds.shape
    used = next(a for a in rec.assumptions if a["name"] == "serving_lengths")
    assert used["value"]["serve"].count("(sharegpt)") == 2 and ds.source in used["source"]
    # a length the file gives wins over the dataset's
    mixed = recommend(preset("online-inference", _one_pool({"dataset": "sharegpt", "output_len": 500})), samples=0)
    q = mixed.options[0].parts[0]
    assert q.plan["output_len"] == 500 and q.plan["input_len"] == pytest.approx(ds.input_mean, abs=0.05)
    used = next(a for a in mixed.assumptions if a["name"] == "serving_lengths")
    assert used["value"]["serve"].endswith("outputs 500 tokens (scenario)") and "(sharegpt)" in used["value"]["serve"]


@pytest.mark.parametrize("serving,routing,field,words", [
    ({"dataset": "no-such-set"}, None, "workload.serving", "unknown dataset 'no-such-set'"),
    ({"dataset": "sharegpt"}, {}, "workload", "serving.dataset is not used with routing"),
    ({"input_len": {"dist": "lognormal", "mean": 1800}}, None, "workload.serving.input_len", "lognormal needs cv"),
    ({"output_len": 0}, None, "workload.serving.output_len", ""),
])
def test_bad_serving_lengths_name_their_field(tmp_path, serving, routing, field, words):
    import yaml

    wl = {"serving": serving} if routing is not None else {"routing": None, "serving": serving}
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"scenario": "online-inference", "workload": wl}))
    with pytest.raises(UserInputError) as err:
        load_scenario(f)
    assert err.value.field is not None and err.value.field.startswith(field)
    assert words in err.value.message


def test_serving_lengths_left_out_are_the_stated_default():
    rec = recommend({"scenario": "custom", "model": "llama3-8b", "hardware": ["nvidia-h100-sxm-80gb"],
                     "workload": {"kind": "serving", "serving": {"qps": 5}}}, samples=0)
    used = next(a for a in rec.assumptions if a["name"] == "serving_lengths")
    assert used["value"] == {"serve": "prompts 2,048 tokens (default); outputs 256 tokens (default)"}
    assert used["trust"] == "D" and "default" in used["source"] and "scenario" not in used["source"]
    plan = rec.options[0].parts[0].plan
    assert (plan["input_len"], plan["output_len"]) == (2048, 256) and "input_dist" not in plan
