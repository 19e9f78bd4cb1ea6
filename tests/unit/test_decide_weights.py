"""Criteria tree and weights: the guide's defaults, overrides, and clear errors for bad weights."""

import pytest

from xpuplan.decide.weights import criteria_data, make_weights, parse_weight_flags
from xpuplan.errors import UserInputError


def test_default_weights_are_the_guides_40_30_20_10():
    w = make_weights()
    assert w.group_totals() == {"performance": 40, "development": 30, "economics": 20, "risk": 10}
    assert (w["compute_fit"], w["memory_fit"], w["latency"], w["throughput"]) == (15, 10, 10, 5)
    assert (w["ecosystem"], w["learning_cost"], w["debugging"]) == (15, 10, 5)
    assert (w["hardware_cost"], w["operations_cost"], w["development_cost"]) == (8, 7, 5)
    assert (w["technical_risk"], w["supply_chain"], w["lock_in"]) == (5, 3, 2)
    assert len(criteria_data().leaves) == 13


def test_replace_and_adjust():
    w = make_weights({"latency": 5, "throughput": 10})
    assert w["latency"] == 5 and w["throughput"] == 10
    w = make_weights(adjust={"latency": -10, "compute_fit": 10})
    assert w["latency"] == 0 and w["compute_fit"] == 25


def test_negative_weight_names_the_field():
    with pytest.raises(UserInputError) as e:
        make_weights({"latency": -1, "throughput": 16})
    assert e.value.field == "weights.latency" and ">= 0" in e.value.message


def test_weights_that_do_not_sum_to_100():
    with pytest.raises(UserInputError) as e:
        make_weights({"latency": 20})
    assert e.value.field == "weights" and "sum to 110" in e.value.message


def test_adjustments_must_sum_to_zero_and_stay_non_negative():
    with pytest.raises(UserInputError) as e:
        make_weights(adjust={"latency": 5})
    assert e.value.field == "weight_adjustments"
    with pytest.raises(UserInputError) as e:
        make_weights(adjust={"lock_in": -3, "latency": 3})
    assert e.value.field == "weight_adjustments.lock_in"


def test_unknown_criterion_suggests():
    with pytest.raises(UserInputError) as e:
        make_weights({"latancy": 10})
    assert e.value.field == "weights.latancy" and "latency" in e.value.message


def test_weight_flags():
    assert parse_weight_flags(["latency=15", "throughput=0"]) == {"latency": 15.0, "throughput": 0.0}
    with pytest.raises(UserInputError) as e:
        parse_weight_flags(["latency"])
    assert e.value.field == "--weight"
    with pytest.raises(UserInputError) as e:
        parse_weight_flags(["latency=abc"])
    assert e.value.field == "--weight.latency"
