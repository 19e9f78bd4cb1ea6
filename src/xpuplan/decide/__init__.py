"""Decide: the guide's weighted decision framework over the planners' results.

Criteria tree and default weights (``data/criteria.yaml``), scenario presets (``data/presets``),
hard constraints, options (single hardware and the guide's hybrids), leaf scores normalised across
the options compared, ranking, Monte Carlo uncertainty, weight sensitivity and explanations.
The job that front ends call is :func:`xpuplan.jobs.recommend.recommend`; docs/decide.md has every
formula.
"""

from xpuplan.decide.engine import Evaluation, evaluate
from xpuplan.decide.result import Recommendation
from xpuplan.decide.scenario import (
    DEFAULT_PRESET,
    Scenario,
    list_presets,
    load_scenario,
    preset,
    scenario_from,
)
from xpuplan.decide.weights import Weights, criteria_data, make_weights

__all__ = [
    "DEFAULT_PRESET",
    "Evaluation",
    "Recommendation",
    "Scenario",
    "Weights",
    "criteria_data",
    "evaluate",
    "list_presets",
    "load_scenario",
    "make_weights",
    "preset",
    "scenario_from",
]
