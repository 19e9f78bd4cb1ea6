"""Heterogeneous fleets: the cheapest mix of hardware kinds serving request classes within their SLOs
(a MILP solved with SciPy's HiGHS), and parameter sweeps on local processes or Ray.

Typical use (the job layer, :func:`xpuplan.optimize_fleet`, resolves a scenario file, prices and
power into these inputs)::

    from xpuplan.fleet import FleetConstraints, HardwareOption, RequestClass, optimize_mix
    plan = optimize_mix(classes, options, FleetConstraints(max_power_w=50e3), horizon_hours=8766)
    plan.mix, plan.total_cost, plan.best_single, plan.constraints

The formulation is in docs/fleet.md.
"""

from xpuplan.fleet.milp import MixProblem, MixSolution, ResourceRow, solve_mix
from xpuplan.fleet.optimize import (
    FleetConstraints,
    FleetPlan,
    HardwareOption,
    MixRow,
    RequestClass,
    class_capacity,
    optimize_mix,
)
from xpuplan.fleet.sweep import SweepResult, Task, TaskResult, make_tasks, run_sweep, task_seed

__all__ = [
    "FleetConstraints",
    "FleetPlan",
    "HardwareOption",
    "MixProblem",
    "MixRow",
    "MixSolution",
    "RequestClass",
    "ResourceRow",
    "SweepResult",
    "Task",
    "TaskResult",
    "class_capacity",
    "make_tasks",
    "optimize_mix",
    "run_sweep",
    "solve_mix",
    "task_seed",
]
