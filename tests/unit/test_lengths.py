"""The one token-length model (workload.lengths): the planner's moments and quantiles describe the same cut
distribution the simulator samples, and the scenario, simulation and fleet files all read it."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from xpuplan.jobs.fleet import ClassIn
from xpuplan.serve.sim import TrafficClass
from xpuplan.workload.lengths import LengthDist, as_length, sample_lengths
from xpuplan.workload.serving import Traffic

SHAPES = [
    LengthDist(dist="fixed", mean=512),
    LengthDist(dist="uniform", min=100, max=900),
    LengthDist(dist="normal", mean=300, std=150),             # ~2% of the mass below one token: cut at 1
    LengthDist(dist="normal", mean=2000, std=800, min=500, max=3000),
    LengthDist(dist="lognormal", mean=500, cv=1.0),
    LengthDist(dist="lognormal", mean=3000, cv=0.5, min=64, max=4096),
    LengthDist(dist="exponential", mean=246.9, max=1024),
    LengthDist(dist="exponential", mean=100, min=20),
    LengthDist(dist="empirical", values=[100, 200, 300, 400, 1000]),
]


@pytest.mark.parametrize("d", SHAPES, ids=lambda d: d.dist)
def test_the_planners_mean_is_the_mean_of_what_the_simulator_draws(d: LengthDist) -> None:
    x = sample_lengths(d, 400_000, np.random.default_rng(7))
    assert x.min() >= max(1, d.low) and x.max() <= d.high
    # whole tokens: rounding moves the mean by well under one token
    assert x.mean() == pytest.approx(d.average, rel=0.01, abs=1.0)


@pytest.mark.parametrize("d", SHAPES, ids=lambda d: d.dist)
def test_quantiles_match_the_drawn_lengths(d: LengthDist) -> None:
    x = sample_lengths(d, 400_000, np.random.default_rng(3))
    for p in (10.0, 50.0, 90.0, 99.0):
        assert np.percentile(x, p) == pytest.approx(d.quantile(p), rel=0.03, abs=2.0)


@pytest.mark.parametrize("d", SHAPES, ids=lambda d: d.dist)
def test_the_integration_nodes_keep_the_mean(d: LengthDist) -> None:
    nodes = d.nodes()
    assert sum(p for _, p in nodes) == pytest.approx(1.0)
    assert sum(x * p for x, p in nodes) == pytest.approx(d.average, rel=0.01)


def test_a_cut_raises_the_mean_of_a_wide_normal_and_a_cap_lowers_an_exponential() -> None:
    assert LengthDist(dist="normal", mean=300, std=150).average > 300          # the mass below 1 token counts as 1
    assert LengthDist(dist="normal", mean=2048, std=10).average == pytest.approx(2048)
    capped = LengthDist(dist="exponential", mean=1000, max=1000)
    assert capped.average == pytest.approx(1 + 1000 * (np.exp(-1 / 1000) - np.exp(-1)), rel=1e-12)
    assert capped.quantile(100) == 1000 and capped.quantile(99.9) == 1000


def test_zero_spread_is_a_point_and_draws_nothing_from_the_generator() -> None:
    for d in (LengthDist(dist="lognormal", mean=700, cv=0), LengthDist(dist="normal", mean=700, std=0),
              LengthDist(dist="uniform", min=700, max=700), as_length(700)):
        assert d.is_fixed and d.average == 700 and d.nodes() == [(700, 1.0)]
        rng = np.random.default_rng(1)
        assert (sample_lengths(d, 5, rng) == 700).all()
        assert rng.random() == np.random.default_rng(1).random()  # the stream did not move


@pytest.mark.parametrize(("spec", "message"), [
    ({"dist": "lognormal", "mean": 500}, "lognormal needs cv"),
    ({"dist": "normal", "mean": 500}, "normal needs std"),
    ({"dist": "uniform", "min": 10}, "uniform needs min <= max"),
    ({"dist": "uniform", "min": 900, "max": 100}, "uniform needs min <= max"),
    ({"dist": "exponential", "mean": 500, "min": 900, "max": 100}, "min <= max"),
    ({"dist": "normal", "mean": 500, "cv": 0.3}, "normal does not take cv"),
    ({"dist": "lognormal", "mean": 500, "cv": 0.3, "std": 9}, "lognormal does not take std"),
    ({"dist": "empirical", "values": [10, 20], "max": 15}, "empirical does not take max"),
    ({"dist": "empirical", "values": [10, -1]}, "positive lengths"),
    ({"dist": "fixed", "mean": -3}, "greater than 0"),
    ({"dist": "gamma", "mean": 3}, "fixed"),
])
def test_an_impossible_distribution_is_refused_with_its_parameter(spec: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        LengthDist(**spec)


def test_every_front_takes_every_shape_and_a_number_as_a_fixed_length() -> None:
    shape = {"dist": "exponential", "mean": 300, "max": 2048}
    sim = TrafficClass(name="chat", rate_rps=1, input_len=shape, output_len=200)
    fleet = ClassIn(name="chat", rate_per_s=1, input_len=shape, output_len=200, slo={"ttft_ms": 1000})
    scenario = Traffic(qps=1, input_len=shape, output_len=200)
    for t in (sim, fleet):
        assert t.input_len == LengthDist(**shape)
        assert t.output_len == LengthDist(dist="fixed", mean=200)
    assert scenario.input == LengthDist(**shape) and scenario.output == LengthDist(dist="fixed", mean=200)
    lognormal = {"dist": "lognormal", "mean": 3000, "cv": 0.5}
    assert Traffic(qps=1, input_len=lognormal, output_len=10).input == LengthDist(**lognormal)


def test_a_files_length_error_is_the_message_itself_at_its_field() -> None:
    from xpuplan.datafile import load_model
    from xpuplan.errors import UserInputError

    bad = {"name": "c", "rate_per_s": 1, "input_len": {"dist": "normal", "mean": 500, "cv": 0.2}, "output_len": 9,
           "slo": {"ttft_ms": 1000}}
    with pytest.raises(UserInputError) as exc:
        load_model(ClassIn, bad, "fleet.yaml", {})
    assert exc.value.message == "normal does not take cv (it takes mean, std, min, max)"  # no "Value error, "
    assert exc.value.field == "input_len" and exc.value.file == "fleet.yaml"
