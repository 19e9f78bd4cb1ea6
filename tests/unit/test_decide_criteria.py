"""Leaf formulas: normalisation, catalog-fact scores, availability rules, weight sensitivity."""

import itertools

import numpy as np
import pytest

from xpuplan.catalog import get_device
from xpuplan.decide import facts
from xpuplan.decide.scoring import normalise, totals
from xpuplan.decide.sensitivity import weight_sensitivity
from xpuplan.decide.weights import criteria_data


def test_normalise_higher_is_ratio_to_best():
    assert normalise(np.array([2.0, 1.0, 4.0]), "higher").tolist() == [0.5, 0.25, 1.0]


def test_normalise_lower_keeps_relative_distance():
    s = normalise(np.array([100.0, 200.0]), "lower")
    assert s.tolist() == [1.0, 0.5]  # 1 - (x - min) / max
    s = normalise(np.array([0.0, 50.0, 100.0]), "lower")
    assert s.tolist() == [1.0, 0.5, 0.0]


def test_unknown_gets_the_worst_known_score():
    s = normalise(np.array([100.0, np.nan, 200.0]), "lower")
    assert s.tolist() == [1.0, 0.5, 0.5]
    assert normalise(np.array([np.nan, np.nan]), "higher").tolist() == [0.5, 0.5]


def test_normalise_is_vectorised_over_samples():
    x = np.array([[1.0, 2.0], [4.0, 2.0]])
    assert normalise(x, "higher").tolist() == [[0.5, 1.0], [1.0, 0.5]]


def test_ecosystem_formula_from_catalog_facts():
    c = criteria_data().constants
    h100, mlu = get_device("H100"), get_device("cambricon-mlu590")
    mix = c["ecosystem_mix"]
    n = len(mlu.ecosystem.serving_engines)
    expect = (mix["pytorch"] * c["pytorch_level"]["plugin"] + mix["breadth"] * min(1, n / c["frameworks_saturation"])
              + mix["maturity"] * (mlu.ecosystem.maturity - 1) / 4)
    assert facts.ecosystem_score(mlu, training=False) == pytest.approx(expect)
    assert facts.ecosystem_score(h100, training=True) > facts.ecosystem_score(mlu, training=True)
    assert facts.lock_in_score(h100) > facts.lock_in_score(mlu)
    assert facts.debugging_score(h100) > facts.debugging_score(mlu)


def test_technical_score_rewards_calibration_and_trust():
    assert facts.technical_score("A", "calibration:store") > facts.technical_score("A", "defaults")
    assert facts.technical_score("B", "device:x") > facts.technical_score("D", "device:x")
    assert facts.efficiency_sigma("D", "defaults") > facts.efficiency_sigma("B", "calibration")


def test_availability_rules_read_export_control_facts():
    h100, ascend = get_device("H100"), get_device("910B")
    assert facts.unavailable_reason(h100, "cn") is not None and "3A090" in facts.unavailable_reason(h100, "cn")
    assert facts.unavailable_reason(h100, "us") is None
    assert facts.unavailable_reason(ascend, "us") is not None
    assert facts.unavailable_reason(ascend, "cn") is None
    assert facts.unavailable_reason(ascend, "any") is None and facts.unavailable_reason(h100, "any") is None
    risk_us, ids = facts.supply_risk(ascend, "us")
    risk_cn, _ = facts.supply_risk(ascend, "cn")
    assert "entity-list-vendor" in ids and risk_us > risk_cn > 0
    assert facts.supply_risk(h100, "us")[0] == 0


def _winner(scores, w):
    return int(np.argmax(totals(scores, w)))


def test_weight_sensitivity_matches_brute_force():
    rng = np.random.default_rng(0)
    leaves = ["a", "b", "c"]
    scores = {k: rng.random(4) for k in leaves}
    w = {"a": 50.0, "b": 30.0, "c": 20.0}
    keys = ["k0", "k1", "k2", "k3"]
    out = {x["criterion"]: x for x in weight_sensitivity(scores, w, keys)}
    win = _winner(scores, w)
    for leaf in leaves:
        d = out[leaf]["change_points"]
        # brute force: move the weight in small steps, rescaling the others to keep the sum at 100
        found = None
        for step in itertools.chain.from_iterable((s, -s) for s in np.arange(0.01, 100, 0.01)):
            nw = w[leaf] + step
            if not 0 <= nw <= 100:
                continue
            scale = (100 - nw) / (100 - w[leaf])
            ww = {k: (nw if k == leaf else v * scale) for k, v in w.items()}
            if _winner(scores, ww) != win:
                found = step
                break
        if d is None:
            assert found is None
        else:
            assert found is not None and abs(abs(found) - abs(d)) < 0.02


def test_band_sigma_spans_the_p10_p90_band():
    import math

    s = facts.band_sigma(0.2, 0.25)
    assert math.isclose(math.exp(-facts.Z_P90 * s) * math.exp(facts.Z_P90 * s), 1.0)
    assert math.isclose(2 * facts.Z_P90 * s, math.log(1.25) - math.log(0.8))


def test_efficiency_sigma_is_at_least_the_familys_validation_band_unless_calibrated():
    wide = (0.4, 0.6)
    base = facts.efficiency_sigma("B", "family:x")
    assert facts.efficiency_sigma("B", "family:x", wide) == facts.band_sigma(*wide) > base
    narrow = (0.01, 0.01)
    assert facts.efficiency_sigma("B", "family:x", narrow) == base  # the table's floor stays
    cal = facts.efficiency_sigma("B", "calibration:#3", wide)
    assert cal == facts.efficiency_sigma("B", "calibration:#3")  # the user's own measurement wins


def test_a_part_uses_its_familys_training_or_serving_band():
    from xpuplan.catalog import get_device
    from xpuplan.validate.band import validation_band

    dev = get_device("huawei-ascend-910b")
    for role, kind in (("train", "train"), ("serve", "infer")):
        band = validation_band(dev, kind)
        want = facts.efficiency_sigma(dev.min_trust(), "family:huawei-ascend", band)
        assert facts.part_efficiency_sigma(dev, role, "family:huawei-ascend") == want
