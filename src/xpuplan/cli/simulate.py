"""``xpuplan simulate scenario.yaml``: request-level simulation of a serving fleet (parse, call the
job, render). ``--json`` prints the typed result; ``--report`` writes an HTML or Markdown report."""

from __future__ import annotations

from typing import Annotated

import typer

from xpuplan.cli.common import cli_command, console, print_json, request, table


def register(root: typer.Typer) -> None:
    """Add ``simulate`` to the root CLI."""
    root.command("simulate")(simulate)


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1e3:,.1f}"


@cli_command
def simulate(
    scenario: Annotated[str, typer.Argument(help="scenario file (YAML/JSON): pools, routing, classes")],
    duration: Annotated[float | None, typer.Option(help="seconds of arrivals (default: the scenario's)")] = None,
    seed: Annotated[int | None, typer.Option(help="random seed (default: the scenario's, else 0)")] = None,
    drain: Annotated[float | None, typer.Option(help="seconds to let requests in flight finish after arrivals stop")] = None,
    price_per_device_hour: Annotated[float | None, typer.Option(
        "--price-per-device-hour", help="USD per device-hour for every pool (cost per million tokens)")] = None,
    json_: Annotated[bool, typer.Option("--json", help="machine-readable result")] = False,
    report: Annotated[str | None, typer.Option(help="write a report: out.html (self-contained) or out.md")] = None,
    lang: Annotated[str, typer.Option(help="language of the --report: en or zh")] = "en",
) -> None:
    """Simulate a serving fleet request by request: latency percentiles per class and pool, SLO
    attainment, goodput, utilisation, KV use, energy and cost."""
    from xpuplan.i18n import catalogue
    from xpuplan.jobs.simulate import SimulateRequest, run_simulate
    from xpuplan.report import report_format, write_report

    catalogue(lang)  # an unknown language is refused before the job runs (field --lang)
    if report:
        report_format(report)

    req = request(SimulateRequest, scenario=scenario, duration=duration, seed=seed, drain=drain,
                  price_per_device_hour=price_per_device_hour)
    if json_ or not console.is_terminal:
        res = run_simulate(req)
    else:
        from rich.progress import Progress

        with Progress(transient=True, console=console) as bar:
            task = bar.add_task("simulating", total=1.0)
            res = run_simulate(req, progress=lambda f: bar.update(task, completed=f))
    if report:
        write_report(res, report, lang)
    if json_:
        print_json(res.to_dict())
        return
    window = (f"served in {res.duration_s:,.2f} s (the makespan: rates are over it)" if res.rate_window == "makespan"
              else f"simulated {res.duration_s:g} s of arrivals")
    console.print(f"{window} (seed {res.seed}): {res.arrived:,} requests, "
                  f"{res.completed:,} completed, {res.dropped:,} dropped, {res.unfinished:,} unfinished")
    rows = [[g.name, g.completed, f"{_ms(g.ttft.p50_s)} / {_ms(g.ttft.p99_s)}",
             f"{_ms(g.tpot.p50_s)} / {_ms(g.tpot.p99_s)}",
             "-" if g.e2e.p50_s is None else f"{g.e2e.p50_s:.2f} / {g.e2e.p99_s:.2f}",
             "-" if g.slo_attainment is None else f"{g.slo_attainment:.1%}",
             g.goodput_requests_per_s, g.output_tokens_per_s] for g in res.classes]
    console.print(table("Traffic classes", ["class", "completed", "TTFT p50/p99 ms", "TPOT p50/p99 ms",
                                            "E2E p50/p99 s", "SLO met", "goodput req/s", "output tok/s"], rows))
    prow = [[p.name, f"{p.replicas}x {p.hardware} tp{p.tp} {p.dtype}", p.engine, p.batching, p.role,
             f"{p.utilisation:.0%}", f"{p.kv_peak_fraction:.0%}", p.preemptions,
             "-" if p.energy_j is None else f"{p.energy_j / 3.6e6:,.2f}",
             "-" if p.cost_usd is None else f"{p.cost_usd:,.2f}"] for p in res.pools]
    console.print(table("Pools", ["pool", "replicas", "engine", "batching", "role", "utilisation", "KV peak",
                                  "preemptions", "energy kWh", "cost $"], prow))
    if res.cost_per_million_output_tokens_usd is not None:
        console.print(f"cost: ${res.cost_usd:,.2f}, ${res.cost_per_million_output_tokens_usd:,.3f} per million "
                      "output tokens")
    for n in res.notes:
        console.print(f"note: {n}", highlight=False)
    if report:
        console.print(f"report written to {report}")
