"""Training planner: parallel plans, clusters, the step-time model, search, launch arguments.

``estimate(model, cluster, plan, job)`` predicts one plan; ``search_plans(model, cluster, job)`` ranks
every valid plan; ``emit_launch(...)`` turns a plan into framework arguments.
"""

from xpuplan.train.cluster import Cluster, Link
from xpuplan.train.emit import FRAMEWORKS, emit_launch
from xpuplan.train.estimate import MemoryBreakdown, StepBreakdown, TrainEstimate, estimate
from xpuplan.train.fit import TrainingFit, training_fit
from xpuplan.train.plan import ParallelPlan, PlanIssue, check_plan, make_plan, plan_issues
from xpuplan.train.search import (
    ParetoPoint,
    SearchResult,
    SearchSpace,
    devices_to_fit,
    enumerate_plans,
    min_devices_for_states,
    search_plans,
)
from xpuplan.train.step import PlanArrays, StepModel, pipeline_bubble_fraction

__all__ = [
    "FRAMEWORKS",
    "Cluster",
    "Link",
    "MemoryBreakdown",
    "ParallelPlan",
    "ParetoPoint",
    "PlanArrays",
    "PlanIssue",
    "SearchResult",
    "SearchSpace",
    "StepBreakdown",
    "StepModel",
    "TrainEstimate",
    "TrainingFit",
    "check_plan",
    "devices_to_fit",
    "emit_launch",
    "enumerate_plans",
    "estimate",
    "make_plan",
    "min_devices_for_states",
    "pipeline_bubble_fraction",
    "plan_issues",
    "search_plans",
    "training_fit",
]
