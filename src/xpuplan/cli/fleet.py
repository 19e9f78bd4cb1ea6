"""``xpuplan fleet optimize|sweep``: the cheapest mix of hardware for request classes (parse, call a job, render).

``optimize`` prints the mix, cost, constraints (slack, binding) and the best single-hardware fleet;
``--verify`` runs the request-level simulator on the mix; ``--report out.html|out.md`` writes a
self-contained report (inline SVG, no external resources). ``sweep`` runs the optimiser over rate
scales, single-hardware fleets and seeds on local processes or a Ray cluster (``--ray auto|ADDRESS``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from xpuplan.cli.common import cli_command, console, print_json, request, table
from xpuplan.errors import UserInputError
from xpuplan.report.format import fmt_usd_detail
from xpuplan.units import HOUR

app = typer.Typer(help="Fleet mix: which hardware, how many replicas per request class, at least cost "
                  "(MILP over capacities at the SLO); sweeps on local processes or Ray.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add the ``fleet`` sub-app to the root CLI."""
    root.add_typer(app, name="fleet")


def _usd(x: float | None) -> str:
    return fmt_usd_detail(x)


# -- commands -----------------------------------------------------------------------------------
def _render(plan: Any) -> None:
    console.print(table("Fleet mix", ["class", "hardware", "tp", "dtype", "replicas", "devices", "req/s/replica",
                                      "USD/h"],
                        [[r.request_class, r.hardware, r.tp, r.dtype, r.replicas, r.devices,
                          r.max_requests_per_s_per_replica, r.usd_per_hour] for r in plan.mix]))
    console.print(f"total cost: {_usd(plan.total_cost)} over {plan.horizon_s / HOUR:g} h ({_usd(plan.usd_per_hour)}/h), "
                  f"{plan.devices} devices" + (f", {plan.power_w / 1e3:.1f} kW" if plan.power_w else ""),
                  highlight=False)
    if plan.best_single is not None:
        console.print(f"best single hardware: {plan.best_single.hardware} {_usd(plan.best_single.total_cost)} "
                      f"({plan.best_single.devices} devices); the mix saves "
                      f"{100 * (plan.savings_vs_best_single or 0):.1f}%", highlight=False)
    else:
        console.print(f"best single hardware: none — {plan.best_single_reason}", highlight=False)
    console.print(table("Demand", ["class", "req/s", "capacity req/s", "headroom req/s"],
                        [[c.request_class, c.rate_per_s, c.capacity_per_s, c.headroom_per_s] for c in plan.classes]))
    if plan.constraints:
        console.print(table("Constraints", ["constraint", "limit", "used", "slack", "binding"],
                            [[c.label, c.limit, c.used, c.slack, "yes" if c.binding else "no"]
                             for c in plan.constraints]))
    if plan.pruned:
        console.print("pruned: " + "; ".join(plan.pruned), highlight=False)
    for n in plan.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False, soft_wrap=True)
    if plan.training:
        t = plan.training
        console.print(f"training: {t['model']} on {t['devices']} x {t['hardware']}: {_usd(t['total_cost'])}; "
                      f"training + serving: {_usd(plan.combined_total_cost)}", highlight=False)
    if plan.verification:
        console.print(table("Simulated SLO attainment", ["class", "attainment", "target", "meets"],
                            [[v["request_class"], None if v["slo_attainment"] is None else
                              f"{100 * v['slo_attainment']:.2f}%", f"{v['target_percentile']:g}%",
                              {True: "yes", False: "no", None: "-"}[v["meets_target"]]]
                             for v in plan.verification["classes"]]))
        for v in plan.verification["classes"]:
            for m in v.get("misses", []):
                console.print(f"{v['request_class']}: {m}", highlight=False)
        if plan.verification.get("repair"):
            console.print(table("Simulator-guided repair", ["round", "USD/h", "devices", "capacity scale", "attainment"],
                                [[r["round"], r["usd_per_hour"], r["devices"],
                                  ", ".join(f"{k}:{x:.3f}" for k, x in r["capacity_scale"].items()),
                                  ", ".join(f"{k}:{100 * a:.1f}%" for k, a in r["slo_attainment"].items()
                                            if a is not None)] for r in plan.verification["repair"]]))
            if not plan.verification.get("repaired"):
                console.print("repair stopped before every class met its target; see the last round", highlight=False)


@app.command("optimize")
@cli_command
def optimize(
    scenario: Annotated[str, typer.Argument(help="fleet scenario YAML (docs/fleet.md; examples/fleet-*.yaml)")],
    verify: Annotated[bool, typer.Option("--verify", help="simulate the chosen mix and report SLO attainment")] = False,
    repair: Annotated[bool, typer.Option("--repair", help="with the simulator: derate capacities and re-solve "
                                         "until each class's simulated attainment meets its percentile")] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="simulator seed (default: the scenario's)")] = None,
    duration_s: Annotated[float | None, typer.Option("--duration", help="simulated seconds of arrivals")] = None,
    report: Annotated[str | None, typer.Option("--report", help="write out.html or out.md")] = None,
    lang: Annotated[str, typer.Option(help="language of the --report: en or zh")] = "en",
    json_: Annotated[bool, typer.Option("--json", help="print the typed result as JSON")] = False,
) -> None:
    """Cheapest replicas of each hardware/TP/dtype per request class within the SLOs and constraints."""
    from xpuplan.i18n import catalogue
    from xpuplan.jobs.fleet import FleetRequest, run_fleet_optimize
    from xpuplan.report import report_format, write_report

    catalogue(lang)  # an unknown language is refused before the job runs (field --lang)
    if report:
        report_format(report)
    req = request(FleetRequest, scenario=scenario, verify=verify, repair=repair, seed=seed, duration_s=duration_s)
    plan = run_fleet_optimize(req)
    if report:
        write_report(plan, report, lang)
    if json_:
        print_json(plan.to_dict())
        return
    _render(plan)
    if report:
        console.print(f"report: {report}", highlight=False)


def _floats(text: str, field: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserInputError(f"expected numbers separated by commas, got {text[:80]!r}", field=field) from None
    if not vals:
        raise UserInputError("give at least one number", field=field)
    return vals


@app.command("sweep")
@cli_command
def sweep(
    scenario: Annotated[str, typer.Argument(help="fleet scenario YAML")],
    rate_scale: Annotated[str, typer.Option("--rate-scale", help="traffic multipliers, e.g. 0.5,1,2")] = "1",
    each_hardware: Annotated[bool, typer.Option("--each-hardware", help="also one fleet per single hardware")] = False,
    seeds: Annotated[int, typer.Option("--seeds", help="seeds per point (with --verify or --price-jitter)")] = 1,
    base_seed: Annotated[int, typer.Option("--base-seed", help="seed the task seeds derive from")] = 0,
    price_jitter: Annotated[float, typer.Option("--price-jitter", help="Monte Carlo: prices x U(1-f, 1+f)")] = 0.0,
    verify: Annotated[bool, typer.Option("--verify", help="simulate every point")] = False,
    duration_s: Annotated[float | None, typer.Option("--duration", help="simulated seconds")] = None,
    ray: Annotated[str | None, typer.Option("--ray", help="run on Ray: 'auto' or a cluster address")] = None,
    workers: Annotated[int | None, typer.Option("--workers", help="local processes (default: CPU count)")] = None,
    json_: Annotated[bool, typer.Option("--json", help="print the results as JSON")] = False,
) -> None:
    """Optimise the scenario over rate scales x hardware sets x seeds (local processes or Ray)."""
    from xpuplan.jobs.fleet import SweepRequest, run_fleet_sweep

    req = request(SweepRequest, scenario=scenario, rate_scale=_floats(rate_scale, "--rate-scale"),
                  hardware=each_hardware, seeds=seeds, base_seed=base_seed, price_jitter=price_jitter, verify=verify,
                  duration_s=duration_s, ray=ray, workers=workers)
    out = run_fleet_sweep(req)
    if json_:
        print_json(out)
        return
    rows = []
    for r in out["results"]:
        v = r["value"] or {}
        att = v.get("slo_attainment")
        rows.append([*[str(k) for k in r["key"]], v.get("usd_per_hour"), v.get("devices"),
                     ", ".join(f"{m['request_class']}: {m['replicas']}x{m['hardware']}/tp{m['tp']}/{m['dtype']}"
                               for m in v.get("mix", [])) or "-",
                     (v.get("best_single") or {}).get("hardware"),
                     None if not att else ", ".join(f"{k}:{100 * a:.1f}%" for k, a in att.items() if a is not None),
                     r["error"]])
    console.print(table(f"Fleet sweep ({out['backend']}, {out['tasks']} tasks)",
                        ["rate x", "fleet", "seed", "USD/h", "devices", "mix", "best single", "attainment", "error"],
                        rows))
