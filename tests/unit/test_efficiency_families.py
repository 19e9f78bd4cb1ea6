"""Every catalog device resolves to an efficiency family with its own entry or a documented prior."""

from __future__ import annotations

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.catalog.assumptions import default_assumptions
from xpuplan.catalog.efficiency import FamilyRule, architecture_name


def _devices():
    return list(load_catalog().devices.values())


@pytest.mark.parametrize("dev", _devices(), ids=lambda d: d.id)
def test_every_device_has_a_family_with_values_or_a_documented_prior(dev):
    a = default_assumptions()
    fam = a.efficiency_family(dev)
    assert fam is not None, f"{dev.id} ({dev.vendor} {dev.architecture}) matches no family of efficiency.yaml"
    rule = a.efficiency_layers.families[fam]
    assert rule.values() or (rule.note and rule.note.strip()), f"{fam}: neither values nor a documented note"
    assert rule.note, f"{fam}: every family says where its values come from (note)"


def test_gaudi_is_its_own_family_not_a_chinese_npu():
    a = default_assumptions()
    cat = load_catalog()
    for dev_id in ("intel-gaudi2", "intel-gaudi3"):
        dev = cat.get(dev_id)
        assert "npu-cn" not in a.efficiency_families(dev)
        assert a.efficiency_family(dev) == "intel-gaudi"
        prov = a.efficiency_provenance(dev)
        assert prov["memory_bw_fraction"] == "family:intel-gaudi"
    assert a.efficiency_provenance(cat.get("intel-gaudi2"))["gemm_peak_fraction"] == "family:intel-gaudi"
    assert a.efficiency_provenance(cat.get("intel-gaudi3"))["gemm_peak_fraction"] == "device:intel-gaudi3"


def test_gaudi3_gemm_fraction_is_the_family_fit_scaled_by_the_measured_matmul_ratio():
    """The family is fitted on Gaudi 2 (FP8) rows; Gaudi 3's entry scales its GEMM fraction by the two chips' maximum
    achievable matmul FLOPS in the same sweep (FP8: Gaudi 3 1289.5 of 1835, Gaudi 2 826.5 of 865 TFLOP/s;
    stas00/ml-engineering, 2025-09). A refit of the family must carry over to the device entry."""
    a = default_assumptions()
    cat = load_catalog()
    family = a.efficiency_layers.families["intel-gaudi"].gemm_peak_fraction
    assert family is not None
    ratio = (1289.5 / 1835.0) / (826.5 / 865.0)
    g3 = a.efficiency(cat.get("intel-gaudi3"))
    assert g3.gemm_peak_fraction == pytest.approx(family * ratio, abs=0.001)
    assert g3.gemm_peak_fraction < a.efficiency(cat.get("intel-gaudi2")).gemm_peak_fraction
    # the rest of Gaudi 3's parameters are the family's
    assert g3.memory_bw_fraction == a.efficiency(cat.get("intel-gaudi2")).memory_bw_fraction


def test_blackwell_has_its_own_entry_not_ampere_defaults():
    a = default_assumptions()
    cat = load_catalog()
    hopper = a.efficiency(cat.get("nvidia-h100-sxm-80gb"))
    for dev_id in ("nvidia-b200-180gb", "nvidia-gb200-186gb", "nvidia-gb300"):
        dev = cat.get(dev_id)
        assert a.efficiency_family(dev) == "nvidia-blackwell"
        prov = a.efficiency_provenance(dev)
        assert prov["gemm_peak_fraction"] == "family:nvidia-blackwell"
        eff = a.efficiency(dev)
        # the documented prior: Hopper's fitted fractions, not the (Ampere-fitted) defaults
        assert eff.gemm_peak_fraction == hopper.gemm_peak_fraction
        if dev_id != "nvidia-gb300":
            assert eff.attention_peak_fraction == hopper.attention_peak_fraction
    rule = a.efficiency_layers.families["nvidia-blackwell"]
    assert "prior" in (rule.note or "") and "nvidia-hopper" in (rule.note or "")


def test_blackwell_ultra_attention_gains_from_its_doubled_softmax_exponential_rate():
    """Blackwell Ultra doubles the SFU exponential rate; the FP8 attention forward runs ~1.35x faster on GB300 than
    GB200 (NVIDIA, 2026-02), so exposed exponentials are s = 2 (1 - 1/1.35) of that kernel. In BF16 forward+backward
    (tensor part 2 x (1 - s) x 3.5, exponentials 2 s) the kernel takes 1 - s'/2 of Blackwell's time."""
    a = default_assumptions()
    cat = load_catalog()
    family = a.efficiency_layers.families["nvidia-blackwell"].attention_peak_fraction
    assert family is not None
    s = 2 * (1 - 1 / 1.35)
    tensor, exps = 2 * (1 - s) * 3.5, s * 2
    s_train = exps / (tensor + exps)
    expected = family / (1 - s_train / 2)
    for dev_id in ("nvidia-b300-288gb", "nvidia-gb300"):
        eff = a.efficiency(cat.get(dev_id))
        assert eff.attention_peak_fraction == pytest.approx(expected, abs=0.005)
        assert a.efficiency_provenance(cat.get(dev_id))["attention_peak_fraction"] == f"device:{dev_id}"
        # only attention differs from the family
        assert eff.gemm_peak_fraction == a.efficiency(cat.get("nvidia-b200-180gb")).gemm_peak_fraction
    assert a.efficiency(cat.get("nvidia-b200-180gb")).attention_peak_fraction == family


def test_fitted_families_say_how_they_were_fitted():
    fams = default_assumptions().efficiency_layers.families
    for name in ("google-tpu-v5e", "google-tpu-v5p", "google-tpu-v6e", "intel-gaudi", "amd-cdna3", "huawei-ascend",
                 "nvidia-hopper"):
        note = fams[name].note or ""
        assert note.startswith("fitted: benchmarks/fit_families.py on "), (name, note)
        assert " rows), " in note


def test_specific_family_refines_the_broad_one():
    a = default_assumptions()
    cat = load_catalog()
    v4, v6e = cat.get("google-tpu-v4"), cat.get("google-tpu-v6e")
    assert a.efficiency_families(v4) == ["tpu"]
    assert a.efficiency_families(v6e) == ["tpu", "google-tpu-v6e"]
    assert a.efficiency(v6e).gemm_peak_fraction != a.efficiency(v4).gemm_peak_fraction
    ascend = cat.get("huawei-ascend-910b")
    assert a.efficiency_families(ascend) == ["npu-cn", "huawei-ascend"]


def test_family_rule_matching():
    rule = FamilyRule.model_validate({"vendor": ["Huawei", "Hygon"], "architecture": ["Gaudi 2", "Da Vinci"]})
    assert rule.matches("huawei", "NPU", "Da Vinci (AI Core v220, split cube/vector cores)")
    assert not rule.matches("Intel", "NPU", "Gaudi 2")
    assert not rule.matches("Hygon", "GPU", "gfx936 'BOWEN'")
    assert FamilyRule(kind="TPU").matches("Google", "TPU", None)
    assert architecture_name("Da Vinci (32 AI cores)") == "Da Vinci" and architecture_name(None) == ""


def test_user_override_of_a_family_keeps_its_match():
    a = default_assumptions().with_overrides({"efficiency": {"families": {"google-tpu-v6e": {"gemm_peak_fraction": 0.3}}}})
    cat = load_catalog()
    assert a.efficiency(cat.get("google-tpu-v6e")).gemm_peak_fraction == 0.3
    assert a.efficiency(cat.get("google-tpu-v5e")).gemm_peak_fraction != 0.3


def test_amd_parts_with_a_measured_matmul_sweep_use_it():
    """MI325X and CDNA 4 (MI355X/MI350X) take their measured maximum achievable bf16 matmul share of peak; the
    MI300X keeps the AMD prior its family is built on, and CDNA 2 keeps the prior."""
    a = default_assumptions()
    cat = load_catalog()
    mi300x, mi325x = cat.get("amd-mi300x-192gb"), cat.get("amd-mi325x-256gb")
    assert a.efficiency(mi325x).gemm_peak_fraction == pytest.approx(784.9 / 1307.4, abs=0.005)
    assert a.efficiency_provenance(mi325x)["gemm_peak_fraction"] == "device:amd-mi325x-256gb"
    # the rest of the MI325X is its family's (the FP8 factor fitted on MI300X rows)
    assert a.efficiency(mi325x).low_precision_factor == a.efficiency(mi300x).low_precision_factor
    for dev_id in ("amd-mi355x-288gb", "amd-mi350x-288gb"):
        dev = cat.get(dev_id)
        assert a.efficiency_family(dev) == "amd-cdna4"
        assert a.efficiency(dev).gemm_peak_fraction == pytest.approx(1565.0 / 2516.6, abs=0.005)
    assert a.efficiency(cat.get("amd-mi250x")).gemm_peak_fraction == a.efficiency(mi300x).gemm_peak_fraction == 0.50
