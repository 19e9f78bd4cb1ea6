"""The fleet MILP on instances small enough to solve by hand.

One class at 10 requests/s; option A serves 4 req/s per replica at 3 USD/h, option B 3 req/s at
2 USD/h. Every way to cover 10 req/s with the fewest wasted replicas:
  B x4 = 12 req/s, 8 USD/h;  A x1 + B x2 = 10 req/s, 7 USD/h;  A x2 + B x1 = 11 req/s, 8 USD/h;  A x3 = 12, 9 USD/h.
The optimum is A x1 + B x2 at 7 USD/h; the best single kind is B x4 at 8 USD/h.
With power A = 100 W, B = 300 W per replica and a 500 W limit, A x1 + B x2 (700 W) is out and the
optimum is A x2 + B x1 (500 W, 8 USD/h); with a 200 W limit nothing fits (A x3 needs 300 W at least).
"""

from __future__ import annotations

from xpuplan.fleet.milp import MixProblem, ResourceRow, binding_rows, diagnose, least_usage, solve_mix


def problem(power_limit: float | None = None, rate: float = 10.0) -> MixProblem:
    rows = () if power_limit is None else (ResourceRow("power", f"power <= {power_limit} W", "W", power_limit,
                                                       (100.0, 300.0)),)
    return MixProblem(classes=("c",), rates=(rate,), capacity=((4.0, 3.0),), usd_per_replica_hour=(3.0, 2.0),
                      rows=rows)


def test_hand_checked_optimum():
    sol = solve_mix(problem())
    assert sol.feasible
    assert sol.replicas == ((1, 2),)
    assert sol.usd_per_hour == 7.0


def test_best_single_is_a_restriction_and_costs_more():
    p = problem()
    only_a, only_b = solve_mix(p.only_options([0])), solve_mix(p.only_options([1]))
    assert only_a.replicas == ((3, 0),) and only_a.usd_per_hour == 9.0
    assert only_b.replicas == ((0, 4),) and only_b.usd_per_hour == 8.0
    assert min(only_a.usd_per_hour, only_b.usd_per_hour) >= solve_mix(p).usd_per_hour


def test_power_constraint_binds_when_it_should():
    p = problem(power_limit=500.0)
    sol = solve_mix(p)
    assert sol.replicas == ((2, 1),) and sol.usd_per_hour == 8.0
    assert sol.row_usage["power"] == 500.0
    assert binding_rows(p, sol) == ["power"]
    loose = problem(power_limit=10_000.0)
    sol = solve_mix(loose)
    assert sol.usd_per_hour == 7.0 and binding_rows(loose, sol) == []


def test_infeasible_names_class_row_and_least_need():
    p = problem(power_limit=200.0)
    assert solve_mix(p).status == "infeasible"
    d = diagnose(p)
    assert d.request_class == "c" and d.row is not None and d.row.name == "power"
    assert d.needed == 300.0  # A x3
    assert least_usage(p, p.rows[0]) == 300.0


def test_two_classes_jointly_infeasible_names_no_single_class():
    # each class alone fits 400 W (A x1 = 100 W serves 4 req/s... class needs 4 req/s: A x1), together 2 x A
    rows = (ResourceRow("power", "power <= 150 W", "W", 150.0, (100.0, 300.0)),)
    p = MixProblem(classes=("x", "y"), rates=(4.0, 4.0), capacity=((4.0, 3.0), (4.0, 3.0)),
                   usd_per_replica_hour=(3.0, 2.0), rows=rows)
    assert not solve_mix(p).feasible
    d = diagnose(p)
    assert d.request_class is None and d.row is not None and d.row.name == "power" and d.needed == 200.0


def test_option_that_cannot_serve_is_never_used():
    p = MixProblem(classes=("c",), rates=(5.0,), capacity=((0.0, 1.0),), usd_per_replica_hour=(0.0, 1.0))
    sol = solve_mix(p)
    assert sol.replicas == ((0, 5),)
    assert not solve_mix(p.only_options([0])).feasible


def test_deterministic():
    p = problem(power_limit=500.0)
    assert solve_mix(p) == solve_mix(p)
