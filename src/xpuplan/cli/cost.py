"""``xpuplan cost tco|train|serve``: TCO and per-job cost from the shell (parse, call a job, render).

Every figure comes from the price book (``catalog/data/prices``, plus ``--prices FILE`` or
``$XPUPLAN_PRICES_PATH``) unless given as a flag; figures with no public source must be given,
and lines left out are listed under "not included". ``--json`` prints the typed result.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from xpuplan import units
from xpuplan.cli.common import cli_command, console, print_json, table
from xpuplan.errors import UserInputError
from xpuplan.jobs.cost import (
    PowerCapRequest,
    ServeCostRequest,
    TcoRequest,
    TrainCostRequest,
    run_power_cap,
    run_serve_cost,
    run_tco,
    run_train_cost,
)
from xpuplan.jobs.requests import parse_request
from xpuplan.report.format import fmt_usd_detail

app = typer.Typer(help="Cost: TCO over a horizon, cost of a training run, cost of serving a load "
                  "(energy, carbon, failures included).", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add the ``cost`` sub-app to the root CLI."""
    root.add_typer(app, name="cost")


# -- shared options -------------------------------------------------------------------------
Owned = Annotated[bool, typer.Option("--owned", help="buy the hardware (default)")]
Cloud = Annotated[str | None, typer.Option("--cloud", help="rent: provider (aws, lambda, coreweave, ...) or 'any'")]
Term = Annotated[str, typer.Option("--term", help="cloud term: on_demand, reserved_1y, reserved_3y, spot, capacity_block")]
Region = Annotated[str, typer.Option("--region", help="electricity and grid-carbon region (us, us-va, eu, cn, ...)")]
Cooling = Annotated[str, typer.Option("--cooling", help="PUE by cooling: air, liquid, immersion")]
Money = Annotated[float | None, typer.Option(help="USD")]


def _common(owned: bool, cloud: str | None, term: str, region: str, cooling: str, json_: bool,
            **numbers: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"region": region, "cooling": cooling, "term": term}
    if owned and cloud is not None:
        raise UserInputError(f"--owned (buy the hardware) and --cloud {cloud} (rent it) contradict each other; "
                             "give one of them", field="--owned/--cloud")
    if cloud is not None:
        out["mode"] = "cloud"
        if cloud.casefold() != "any":
            out["provider"] = cloud
    elif owned:
        out["mode"] = "owned"
    for k, v in numbers.items():
        if v is None or v == () or v == []:
            continue
        if k == "team_stacks":
            v = tuple(x.strip() for x in str(v).split(",") if x.strip())
        if k == "prices":
            v = tuple(v)
        out[k] = v
    return out


def _usd(x: float | None) -> str:
    return fmt_usd_detail(x, ",.4g")


def _short(text: str, n: int = 70) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _render_lines(title: str, lines: dict[str, float], total: float) -> None:
    rows = [(k.removesuffix("_usd").replace("_", " "), _usd(v), f"{v / total:.0%}" if total else "-")
            for k, v in lines.items()]
    rows.append(("total", _usd(total), "100%"))
    console.print(title, highlight=False)
    console.print(table("", ["line", "USD", "share"], rows))


def _render_provenance(figures: list[dict[str, Any]], missing: list[str], notes: list[str]) -> None:
    if figures:
        console.print("Figures used (--json has the full sources):", highlight=False)
        console.print(table("", ["figure", "value", "unit", "trust", "source"],
                            [(f["name"], f["value"], f["unit"], f["trust"], _short(f["source"])) for f in figures]))
    for m in missing:
        console.print(f"[yellow]not included:[/] {m.removesuffix(': not included')}", highlight=False)
    for n in notes:
        console.print(f"note: {n}", highlight=False)


# -- commands ---------------------------------------------------------------------------------
@app.command("tco")
@cli_command
def tco_cmd(
    hw: Annotated[str, typer.Option("--hw", help="device id or alias")],
    devices: Annotated[int, typer.Option("--devices", help="number of accelerators")],
    years: Annotated[float, typer.Option("--years", help="horizon")] = 3.0,
    busy: Annotated[float, typer.Option("--busy", help="average busy fraction 0-1")] = 1.0,
    compute_bound_fraction: Annotated[float, typer.Option(help="share of busy time that is compute-bound")] = 1.0,
    owned: Owned = False,
    cloud: Cloud = None,
    term: Term = "on_demand",
    region: Region = "us",
    cooling: Cooling = "air",
    fabric: Annotated[str | None, typer.Option(help="network fabric id (infiniband-ndr)")] = None,
    device_price_usd: Money = None,
    node_system_price_usd: Money = None,
    devices_per_node: Annotated[int | None, typer.Option()] = None,
    node_overhead_usd: Money = None,
    network_usd_per_device: Money = None,
    electricity_usd_per_kwh: Annotated[float | None, typer.Option()] = None,
    usd_per_eur: Annotated[float | None, typer.Option()] = None,
    pue: Annotated[float | None, typer.Option()] = None,
    grid_kg_co2e_per_kwh: Annotated[float | None, typer.Option()] = None,
    space_usd_per_kw_year: Money = None,
    operations_usd_per_year: Money = None,
    development_usd: Money = None,
    team: Annotated[str | None, typer.Option("--team", help="software stacks the team knows, e.g. CUDA,ROCm")] = None,
    porting_engineer_months: Annotated[float | None, typer.Option()] = None,
    cloud_usd_per_device_hour: Money = None,
    tdp_w: Annotated[float | None, typer.Option(help="device power, W, when the catalog has none")] = None,
    prices: Annotated[list[str] | None, typer.Option("--prices", help="extra price file (repeatable)")] = None,
    json_: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """Total cost of ownership of a fleet over a horizon, owned or rented."""
    values = _common(owned, cloud, term, region, cooling, json_, fabric=fabric, device_price_usd=device_price_usd,
                     node_system_price_usd=node_system_price_usd, devices_per_node=devices_per_node,
                     node_overhead_usd=node_overhead_usd, network_usd_per_device=network_usd_per_device,
                     electricity_usd_per_kwh=electricity_usd_per_kwh, usd_per_eur=usd_per_eur, pue=pue,
                     grid_kg_co2e_per_kwh=grid_kg_co2e_per_kwh, space_usd_per_kw_year=space_usd_per_kw_year,
                     operations_usd_per_year=operations_usd_per_year, development_usd=development_usd,
                     team_stacks=team, porting_engineer_months=porting_engineer_months,
                     cloud_usd_per_device_hour=cloud_usd_per_device_hour, prices=prices or [], tdp_w=tdp_w)
    req = parse_request(TcoRequest, {"hw": hw, "devices": devices, "years": years, "busy_fraction": busy,
                                     "compute_bound_fraction": compute_bound_fraction, **values})
    res = run_tco(req)
    if json_:
        print_json(res.to_dict())
        return
    _render_lines(f"{res.years:g}-year TCO: {res.devices} x {res.device_id} ({res.mode}, busy {res.busy_fraction:.0%})",
                  res.lines_usd, res.total_usd)
    carbon = "-" if res.carbon_t_co2e is None else f"{res.carbon_t_co2e:,.0f} t CO2e"
    console.print(f"per device-hour: {_usd(res.usd_per_device_hour)}   average power: "
                  f"{res.average_power_w_per_device:.0f} W/device   facility energy: {res.facility_energy_j / units.KWH:,.0f} kWh"
                  f"   carbon: {carbon}", highlight=False)
    _render_provenance(res.figures, res.missing, res.notes)


@app.command("train")
@cli_command
def train_cmd(
    model: Annotated[str, typer.Option("--model", help="model preset id, alias or config.json")],
    hw: Annotated[str, typer.Option("--hw", help="device id or alias")],
    devices: Annotated[int, typer.Option("--devices")],
    tokens: Annotated[float, typer.Option("--tokens", help="training tokens, e.g. 15e12")],
    seq_len: Annotated[int, typer.Option("--seq-len")] = 4096,
    method: Annotated[str, typer.Option("--method", help="full, lora, qlora (fine-tuning)")] = "full",
    checkpoint_bytes: Annotated[float | None, typer.Option(help="checkpoint size; default 14 B/param")] = None,
    storage_gb_per_s: Annotated[float | None, typer.Option(help="checkpoint storage bandwidth")] = None,
    failures_per_device_hour: Annotated[float | None, typer.Option(help="default: Llama 3 405B run")] = None,
    restart_s: Annotated[float | None, typer.Option(help="time to restart after a failure")] = None,
    power_cap_w: Annotated[float | None, typer.Option(help="board power limit (DVFS what-if)")] = None,
    owned: Owned = False,
    cloud: Cloud = None,
    term: Term = "on_demand",
    region: Region = "us",
    cooling: Cooling = "air",
    device_price_usd: Money = None,
    node_system_price_usd: Money = None,
    electricity_usd_per_kwh: Annotated[float | None, typer.Option()] = None,
    usd_per_eur: Annotated[float | None, typer.Option()] = None,
    pue: Annotated[float | None, typer.Option()] = None,
    grid_kg_co2e_per_kwh: Annotated[float | None, typer.Option()] = None,
    operations_usd_per_year: Money = None,
    team: Annotated[str | None, typer.Option("--team", help="stacks the team knows; adds porting cost")] = None,
    porting_engineer_months: Annotated[float | None, typer.Option()] = None,
    cloud_usd_per_device_hour: Money = None,
    tdp_w: Annotated[float | None, typer.Option(help="device power, W, when the catalog has none")] = None,
    prices: Annotated[list[str] | None, typer.Option("--prices")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Cost, energy and carbon of a training (or fine-tuning) run, with failures and checkpoints."""
    values = _common(owned, cloud, term, region, cooling, json_, device_price_usd=device_price_usd,
                     node_system_price_usd=node_system_price_usd, electricity_usd_per_kwh=electricity_usd_per_kwh,
                     usd_per_eur=usd_per_eur, pue=pue, grid_kg_co2e_per_kwh=grid_kg_co2e_per_kwh,
                     operations_usd_per_year=operations_usd_per_year, team_stacks=team,
                     porting_engineer_months=porting_engineer_months,
                     cloud_usd_per_device_hour=cloud_usd_per_device_hour, prices=prices or [], tdp_w=tdp_w,
                     checkpoint_bytes=checkpoint_bytes, storage_gb_per_s=storage_gb_per_s,
                     failures_per_device_hour=failures_per_device_hour, restart_s=restart_s,
                     power_cap_w=power_cap_w)
    req = parse_request(TrainCostRequest, {"model": model, "hw": hw, "devices": devices, "tokens": tokens,
                                           "seq_len": seq_len, "method": method, **values})
    res = run_train_cost(req)
    if json_:
        print_json(res.to_dict())
        return
    rel, c = res.reliability, res.cost
    mtbf = "no failures (rate 0)" if rel.job_mtbf_s is None else f"job MTBF {rel.job_mtbf_s / units.HOUR:.2f} h"
    console.print(f"{res.model} on {res.devices} x {res.hardware}, {res.tokens:.3g} tokens: plan {res.plan['key']} "
                  f"(MFU {res.plan['mfu']:.0%})", highlight=False)
    console.print(f"time: {res.failure_free_time_s / units.DAY:.1f} d failure-free -> "
                  f"{rel.effective_time_s / units.DAY:.1f} d with failures (goodput {rel.goodput:.1%}; {mtbf}, "
                  f"checkpoint {rel.checkpoint_write_s:.1f} s every "
                  f"{rel.interval_s / 60:.1f} min, ~{rel.expected_failures:.0f} failures)", highlight=False)
    if res.power_cap is not None:
        pc = res.power_cap
        console.print(f"power cap {pc['cap_w']:.0f} W: compute-bound clock x{pc['clock_fraction_compute']:.3f}, "
                      f"energy of compute-bound work -{pc['energy_saving_fraction']:.1%} (DVFS model, perf.power); "
                      "the plan is timed at the capped clock", highlight=False)
    _render_lines("Cost of the run", c.lines_usd, c.total_usd)
    carbon = "-" if c.carbon_t_co2e is None else f"{c.carbon_t_co2e:,.0f} t CO2e"
    console.print(f"per million tokens: {_usd(c.usd_per_million_tokens)}   energy: {c.facility_energy_j / units.KWH:,.0f} kWh   "
                  f"carbon: {carbon}", highlight=False)
    _render_provenance(c.figures, c.missing, c.notes + rel.notes)


@app.command("serve")
@cli_command
def serve_cmd(
    model: Annotated[str, typer.Option("--model")],
    hw: Annotated[str, typer.Option("--hw")],
    qps: Annotated[float, typer.Option("--qps", help="requests per second")],
    input_len: Annotated[int, typer.Option("--in", help="input tokens per request")] = 2048,
    output_len: Annotated[int, typer.Option("--out", help="output tokens per request")] = 256,
    ttft_ms: Annotated[float, typer.Option("--ttft-ms")] = 2000.0,
    tpot_ms: Annotated[float, typer.Option("--tpot-ms")] = 50.0,
    hours: Annotated[float, typer.Option("--hours", help="period priced (default one year)")] = 24.0 * 365.25,
    owned: Owned = False,
    cloud: Cloud = None,
    term: Term = "on_demand",
    region: Region = "us",
    cooling: Cooling = "air",
    device_price_usd: Money = None,
    node_system_price_usd: Money = None,
    electricity_usd_per_kwh: Annotated[float | None, typer.Option()] = None,
    usd_per_eur: Annotated[float | None, typer.Option()] = None,
    pue: Annotated[float | None, typer.Option()] = None,
    grid_kg_co2e_per_kwh: Annotated[float | None, typer.Option()] = None,
    operations_usd_per_year: Money = None,
    cloud_usd_per_device_hour: Money = None,
    tdp_w: Annotated[float | None, typer.Option(help="device power, W, when the catalog has none")] = None,
    prices: Annotated[list[str] | None, typer.Option("--prices")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Cost per million output tokens and per query of serving a load under latency SLOs."""
    values = _common(owned, cloud, term, region, cooling, json_, device_price_usd=device_price_usd,
                     node_system_price_usd=node_system_price_usd, electricity_usd_per_kwh=electricity_usd_per_kwh,
                     usd_per_eur=usd_per_eur, pue=pue, grid_kg_co2e_per_kwh=grid_kg_co2e_per_kwh,
                     operations_usd_per_year=operations_usd_per_year,
                     cloud_usd_per_device_hour=cloud_usd_per_device_hour, prices=prices or [], tdp_w=tdp_w)
    req = parse_request(ServeCostRequest, {"model": model, "hw": hw, "qps": qps, "input_len": input_len,
                                           "output_len": output_len, "ttft_ms": ttft_ms, "tpot_ms": tpot_ms,
                                           "hours": hours, **values})
    res = run_serve_cost(req)
    if json_:
        print_json(res.to_dict())
        return
    c = res.cost
    console.print(f"{res.model} at {res.qps:g} req/s on {res.hardware}: {res.replicas} replica(s), {res.devices} "
                  f"devices, for {c.duration_s / units.HOUR:,.0f} h", highlight=False)
    _render_lines("Cost of serving", c.lines_usd, c.total_usd)
    carbon = "-" if c.carbon_t_co2e is None else f"{c.carbon_t_co2e:,.1f} t CO2e"
    console.print(f"per million output tokens: {_usd(c.usd_per_million_tokens)}   per query: {_usd(c.usd_per_query)}"
                  f"   energy: {c.facility_energy_j / units.KWH:,.0f} kWh   carbon: {carbon}", highlight=False)
    _render_provenance(c.figures, c.missing, c.notes)


@app.command("powercap")
@cli_command
def powercap_cmd(
    hw: Annotated[str, typer.Option("--hw", help="device id or alias")],
    power_cap_w: Annotated[float, typer.Option("--power-cap-w", help="board power limit, W")],
    compute_bound_fraction: Annotated[float, typer.Option(help="share of busy time that is compute-bound "
                                                          "(1: training/prefill, 0: decode)")] = 1.0,
    dvfs_exponent: Annotated[float | None, typer.Option(help="k in P_dyn ~ f^k (default 3)")] = None,
    idle_fraction: Annotated[float | None, typer.Option(help="idle draw / TDP")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Power-cap / DVFS what-if: throughput and energy of busy work at a lower power limit."""
    req = parse_request(PowerCapRequest, {"hw": hw, "power_cap_w": power_cap_w,
                                          "compute_bound_fraction": compute_bound_fraction,
                                          "dvfs_exponent": dvfs_exponent, "idle_fraction": idle_fraction})
    res = run_power_cap(req)
    if json_:
        print_json(res.to_dict())
        return
    console.print(f"{req.hw} capped at {res.cap_w:.0f} W (uncapped {res.uncapped_power_w:.0f} W, compute-bound share "
                  f"{res.compute_bound_fraction:.0%}): clock x{res.clock_fraction_compute:.3f}, throughput "
                  f"x{res.throughput_ratio:.3f}, energy per unit of work x{res.energy_ratio:.3f} "
                  f"({res.energy_saving_fraction:+.1%} saved)" + ("" if res.cap_met else "; the cap cannot be met "
                                                                   "above the clock floor"), highlight=False)
    for a in res.assumptions:
        console.print(f"  {a.name} = {a.value:g} (trust {a.trust}): {_short(a.source, 110)}",
                      highlight=False)
