"""The fleet-mix mixed-integer program, solved with SciPy's HiGHS (:func:`scipy.optimize.milp`).

Framed as Mélange (Griggs et al., "Mélange: Cost Efficient Large Language Model Serving by
Exploiting GPU Heterogeneity", arXiv 2404.14527, 2024) frames GPU selection, here across vendors and
with dedicated pools per request class (the class-based routing of the guide):

* variables ``x[c, o]`` (integer >= 0): replicas of option ``o`` (one hardware x TP x dtype) that
  serve class ``c``;
* objective: minimise ``sum x[c, o] * usd_per_replica_hour[o]``;
* demand: ``sum_o capacity[c][o] * x[c, o] >= rate[c]`` for every class (``capacity`` is the largest
  request rate one replica serves within the class's SLO; 0 means it cannot serve the class);
* optional resource rows: total power (W), cost per hour (budget), devices per hardware kind,
  total devices.

Pure: numbers in, numbers out; nothing here knows about catalogs, prices or files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: Relative cost drop that counts as "removing this constraint lowers the cost" (binding test);
#: HiGHS is run with a zero relative MIP gap, so optimal costs are exact up to float rounding.
BINDING_REL_TOL: float = 1e-9
#: Seconds HiGHS may spend on one solve; fleet instances have tens of variables and solve in
#: milliseconds, so hitting this means something is wrong and is reported as such.
TIME_LIMIT_S: float = 60.0


@dataclass(frozen=True)
class ResourceRow:
    """One linear resource constraint ``sum usage[c][o] * x[c, o] <= limit``.

    ``name`` is a stable key (``power``, ``budget``, ``devices:<hw>``, ``total_devices``);
    ``label`` says it in words with its unit; ``usage`` is per replica of each option (same for
    every class)."""

    name: str
    label: str
    unit: str
    limit: float
    usage: tuple[float, ...]


@dataclass(frozen=True)
class MixProblem:
    """Rates per class (requests/s), capacity per class and option (requests/s per replica),
    cost per replica-hour of each option (USD), resource rows."""

    classes: tuple[str, ...]
    rates: tuple[float, ...]
    capacity: tuple[tuple[float, ...], ...]
    usd_per_replica_hour: tuple[float, ...]
    rows: tuple[ResourceRow, ...] = ()

    def __post_init__(self) -> None:
        n_o = len(self.usd_per_replica_hour)
        assert len(self.rates) == len(self.classes) == len(self.capacity)
        assert all(len(r) == n_o for r in self.capacity)
        assert all(len(r.usage) == n_o for r in self.rows)

    @property
    def n_options(self) -> int:
        return len(self.usd_per_replica_hour)

    def without(self, name: str) -> MixProblem:
        return MixProblem(self.classes, self.rates, self.capacity, self.usd_per_replica_hour,
                          tuple(r for r in self.rows if r.name != name))

    def only_options(self, keep: list[int]) -> MixProblem:
        """The same problem with every option outside ``keep`` unable to serve anything."""
        cap = tuple(tuple(v if o in keep else 0.0 for o, v in enumerate(row)) for row in self.capacity)
        return MixProblem(self.classes, self.rates, cap, self.usd_per_replica_hour, self.rows)

    def only_class(self, c: int) -> MixProblem:
        return MixProblem((self.classes[c],), (self.rates[c],), (self.capacity[c],), self.usd_per_replica_hour,
                          self.rows)


@dataclass(frozen=True)
class MixSolution:
    """Replicas per (class, option); ``status`` is ``optimal``, ``infeasible`` or ``error: ...``."""

    status: str
    replicas: tuple[tuple[int, ...], ...] = ()
    usd_per_hour: float = math.inf
    row_usage: dict[str, float] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.status == "optimal"


def _upper_bounds(p: MixProblem) -> np.ndarray:
    """x[c, o] <= ceil(rate / capacity): more replicas of one option than serve the class alone are
    never cheaper (costs are non-negative); 0 where the option cannot serve the class."""
    ub = np.zeros((len(p.classes), p.n_options))
    for c, rate in enumerate(p.rates):
        for o, cap in enumerate(p.capacity[c]):
            ub[c, o] = math.ceil(rate / cap - 1e-12) if cap > 0 else 0.0
    return ub.ravel()


def solve_mix(p: MixProblem, objective: tuple[float, ...] | None = None) -> MixSolution:
    """Solve ``p`` exactly (HiGHS branch and bound, zero gap). ``objective`` replaces the cost per
    replica-hour (used to ask "how much of a resource does serving the load need at least")."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    n_c, n_o = len(p.classes), p.n_options
    n = n_c * n_o
    per_option = np.asarray(objective if objective is not None else p.usd_per_replica_hour, dtype=float)
    cost = np.tile(per_option, n_c)
    ub = _upper_bounds(p)
    a_rows: list[np.ndarray] = []
    lo: list[float] = []
    hi: list[float] = []
    for c in range(n_c):
        row = np.zeros(n)
        row[c * n_o:(c + 1) * n_o] = p.capacity[c]
        a_rows.append(row)
        lo.append(p.rates[c])
        hi.append(math.inf)
    for r in p.rows:
        a_rows.append(np.tile(np.asarray(r.usage, dtype=float), n_c))
        lo.append(-math.inf)
        hi.append(r.limit)
    if any(p.rates[c] > 0 and not any(v > 0 for v in p.capacity[c]) for c in range(n_c)):
        return MixSolution("infeasible")
    res = milp(cost, integrality=np.ones(n), bounds=Bounds(np.zeros(n), ub),
               constraints=[LinearConstraint(np.vstack(a_rows), np.asarray(lo), np.asarray(hi))],
               options={"disp": False, "mip_rel_gap": 0.0, "time_limit": TIME_LIMIT_S})
    if res.status == 2:
        return MixSolution("infeasible")
    if res.status != 0 or res.x is None:
        return MixSolution(f"error: HiGHS status {res.status}: {res.message}")
    x = np.rint(res.x).astype(int)
    reps = tuple(tuple(int(v) for v in x[c * n_o:(c + 1) * n_o]) for c in range(n_c))
    usd = float(sum(reps[c][o] * p.usd_per_replica_hour[o] for c in range(n_c) for o in range(n_o)))
    usage = {r.name: float(sum(reps[c][o] * r.usage[o] for c in range(n_c) for o in range(n_o))) for r in p.rows}
    return MixSolution("optimal", reps, usd, usage)


def binding_rows(p: MixProblem, sol: MixSolution) -> list[str]:
    """Names of the resource rows that bind: dropping the row alone lowers the optimal cost."""
    out = []
    for r in p.rows:
        relaxed = solve_mix(p.without(r.name))
        if relaxed.feasible and relaxed.usd_per_hour < sol.usd_per_hour * (1 - BINDING_REL_TOL) - 1e-12:
            out.append(r.name)
    return out


@dataclass(frozen=True)
class Diagnosis:
    """Why a problem is infeasible: the class (None: the classes together), the resource row
    (None: no single row explains it), the least that row would need, and its limit."""

    request_class: str | None
    row: ResourceRow | None
    needed: float | None


def least_usage(p: MixProblem, row: ResourceRow) -> float | None:
    """Smallest value of ``row`` that serves the load of ``p`` with every other row kept."""
    sol = solve_mix(p.without(row.name), objective=row.usage)
    return None if not sol.feasible else float(
        sum(sol.replicas[c][o] * row.usage[o] for c in range(len(p.classes)) for o in range(p.n_options)))


def diagnose(p: MixProblem) -> Diagnosis:
    """Find the class and the row that make ``p`` infeasible (first class alone, then together)."""
    for c in range(len(p.classes)):
        alone = p.only_class(c)
        if solve_mix(alone).feasible:
            continue
        for r in alone.rows:
            if solve_mix(alone.without(r.name)).feasible:
                return Diagnosis(p.classes[c], r, least_usage(alone, r))
        return Diagnosis(p.classes[c], None, None)
    for r in p.rows:
        if solve_mix(p.without(r.name)).feasible:
            return Diagnosis(None, r, least_usage(p, r))
    return Diagnosis(None, None, None)
