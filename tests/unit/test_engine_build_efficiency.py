"""Efficiencies fitted on one engine build are a property of that build (engines.yaml ``build_fitted``)."""

from __future__ import annotations

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.catalog.assumptions import default_assumptions
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.serve.replica import make_replica

MI300X = "amd-mi300x-192gb"


def _eff(engine: str, hw: str = MI300X, assumptions=None):  # type: ignore[no-untyped-def]
    dev = load_catalog().get(hw)
    rep = make_replica(get_model("llama3.1-70b"), dev, tp=8, dtype="fp8", engine=engine, assumptions=assumptions)
    return rep


def test_a_later_printed_build_takes_the_family_prior_for_the_build_fitted_fields() -> None:
    a = default_assumptions()
    dev = load_catalog().get(MI300X)
    fitted = a.efficiency(dev)
    prior = a.efficiency_prior(dev, "amd-cdna3")
    assert fitted.source == "family:amd-cdna3"
    assert prior.low_precision_factor == a.default_efficiency.low_precision_factor
    assert prior.scale_up_latency_s is None  # the link type decides

    new = _eff("vLLM 0.10.2 (ROCm 7.0.0 build)")
    assert new.eff.low_precision_factor == prior.low_precision_factor
    assert new.eff.scale_up_latency_s is None
    assert new.eff.memory_bw_fraction == fitted.memory_bw_fraction  # not a build-fitted field: kept
    assert "engine build vllm >= 0.9" in new.eff.source
    # the link latency follows: the xGMI link type's, not the fitted alpha
    assert new.device_links.scale_up.latency_s == pytest.approx(a.link_type("xgmi").latency_s)

    for name in ("vLLM (ROCm build; version not stated)", "vllm", "vLLM 0.6.3"):
        old = _eff(name)
        assert old.eff.low_precision_factor == fitted.low_precision_factor, name
        assert old.eff.scale_up_latency_s == fitted.scale_up_latency_s, name


def test_other_families_engines_and_measured_efficiencies_are_untouched() -> None:
    a = default_assumptions()
    h100 = load_catalog().get("H100")
    assert _eff("vLLM 0.10.2", "H100").eff == a.efficiency(h100)
    assert _eff("SGLang 0.5", MI300X).eff == a.efficiency(load_catalog().get(MI300X))
    # a user's own value (or a calibration) is a measurement of their build: left as it is
    mine = a.with_overrides({"efficiency": {"devices": {MI300X: {"low_precision_factor": 0.6}}}})
    assert _eff("vLLM 0.10.2", assumptions=mine).eff.low_precision_factor == 0.6


def test_build_fitted_entries_are_validated_and_name_known_families() -> None:
    a = default_assumptions()
    for prof in a.engines.values():
        for b in prof.build_fitted:
            assert b.family in a.efficiency_layers.families, (prof.id, b.family)
    with pytest.raises(UserInputError) as err:
        a.with_overrides({"engines": {"vllm": {"build_fitted": [
            {"family": "amd-cdna3", "fields": ["gemm_speed"], "from_version": "0.9", "note": "x"}]}}})
    assert "gemm_speed" in str(err.value)
    with pytest.raises(UserInputError):
        a.with_overrides({"engines": {"vllm": {"build_fitted": [
            {"family": "amd-cdna3", "fields": ["low_precision_factor"], "from_version": "latest", "note": "x"}]}}})


def test_an_unversioned_engine_name_says_the_values_are_the_older_builds() -> None:
    note = [n for n in _eff("vllm").notes if "amd-cdna3" in n]
    assert note and "before 0.9" in note[0] and "vllm 0.9" in note[0]
    assert not [n for n in _eff("vLLM 0.10.2").notes if "amd-cdna3" in n]
    assert not [n for n in _eff("vllm", "H100").notes if "fitted on" in n]


def test_a_device_entry_keeps_its_own_field_while_the_family_build_fields_take_the_prior() -> None:
    """MI325X has a device entry (its own GEMM share); the FP8 share it inherits from the amd-cdna3 fit is still
    the 2024 build's and gives way to the prior for a later build, field by field."""
    a = default_assumptions()
    mi325x = load_catalog().get("amd-mi325x-256gb")
    assert a.efficiency(mi325x).source.startswith("device:")
    new = _eff("vLLM 0.10.2", "amd-mi325x-256gb").eff
    assert new.gemm_peak_fraction == a.efficiency(mi325x).gemm_peak_fraction  # the device's measured share
    assert new.low_precision_factor == a.efficiency_prior(mi325x, "amd-cdna3").low_precision_factor


def test_training_plans_take_the_prior_for_fields_fitted_on_a_serving_build() -> None:
    """No training stack runs vLLM's 2024 ROCm kernels, so a training cluster of MI300X/MI325X gets the prior FP8
    share and the link type's all-reduce latency; other families, and measured values, are untouched."""
    from xpuplan.train.cluster import Cluster

    a = default_assumptions()
    for hw in (MI300X, "amd-mi325x-256gb"):
        dev = load_catalog().get(hw)
        eff = Cluster.from_catalog(hw, 8).efficiency
        assert eff.low_precision_factor == a.efficiency_prior(dev, "amd-cdna3").low_precision_factor != \
            a.efficiency(dev).low_precision_factor
        assert eff.scale_up_latency_s is None and "training" in eff.source
        assert eff.memory_bw_fraction == a.efficiency(dev).memory_bw_fraction  # fitted, not a build field: kept
    assert a.serving_build_fields(load_catalog().get(MI300X)) == ("low_precision_factor", "scale_up_latency_s")
    h100 = load_catalog().get("H100")
    assert Cluster.from_catalog("H100", 8).efficiency == a.efficiency(h100)
    mine = a.with_overrides({"efficiency": {"devices": {MI300X: {"low_precision_factor": 0.6}}}})
    assert Cluster.from_catalog(MI300X, 8, assumptions=mine).efficiency.low_precision_factor == 0.6
