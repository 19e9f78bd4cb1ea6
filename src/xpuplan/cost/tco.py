"""Total cost of ownership over a horizon, and the cost of one job, owned or rented.

Owned: ``hardware`` (devices, or whole nodes, amortised linearly over ``amortisation_years``; a
TCO horizon at least that long carries the full purchase), ``network`` (per device), ``energy``
(``devices * P_avg * hours * PUE * USD/kWh``, with ``P_avg`` from ``xpuplan.perf.power``),
``space_cooling`` (USD per kW of device TDP per year), ``operations`` (USD per year) and
``development`` (one-off porting/engineering, see ``xpuplan.cost.porting``).
Cloud: ``cloud`` = USD per device-hour times device-hours billed (every hour for reservations; only
busy hours for on-demand/spot capacity you release when idle), plus operations and development.
Energy and carbon are reported in both modes; in the cloud the bill already includes them.

A line whose inputs are not known is left out and named in ``missing`` with the field to give; a
purchase price for owned hardware and the electricity price are required (an error names them).
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from xpuplan import units
from xpuplan.cost.energy import carbon_t_co2e, energy_cost_usd, facility_energy_j, it_energy_j
from xpuplan.cost.model import SCHEMA_VERSION, CostInputs, Mode, Usage, figures_dicts
from xpuplan.errors import UserInputError
from xpuplan.perf.power import PowerProfile, power_average_w

HOURS_PER_YEAR = units.YEAR / units.HOUR  # 8766 h (365.25 days)


class TcoResult(BaseModel):
    """TCO of ``devices`` over ``years`` (USD, J, t CO2e); ``lines_usd`` sum to ``total_usd``."""

    model_config = ConfigDict(frozen=True)

    schema_version: str = SCHEMA_VERSION
    kind: str = "tco"
    mode: Mode
    device_id: str
    devices: int
    years: float
    busy_fraction: float
    compute_bound_fraction: float
    lines_usd: dict[str, float]
    total_usd: float
    usd_per_device_hour: float
    usd_per_busy_device_hour: float | None
    average_power_w_per_device: float
    it_energy_j: float
    facility_energy_j: float
    carbon_t_co2e: float | None
    figures: list[dict[str, Any]] = Field(default_factory=list)
    assumptions: list[dict[str, Any]] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


class JobCostResult(BaseModel):
    """Cost, energy and carbon of one job (a training run, a fine-tune, a serving period)."""

    model_config = ConfigDict(frozen=True)

    schema_version: str = SCHEMA_VERSION
    kind: str = "job_cost"
    mode: Mode
    device_id: str
    devices: int
    duration_s: float
    device_time_s: float
    lines_usd: dict[str, float]
    total_usd: float
    it_energy_j: float
    facility_energy_j: float
    carbon_t_co2e: float | None
    tokens: float | None = None
    queries: float | None = None
    usd_per_million_tokens: float | None = None
    usd_per_query: float | None = None
    energy_j_per_million_tokens: float | None = None
    figures: list[dict[str, Any]] = Field(default_factory=list)
    assumptions: list[dict[str, Any]] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


# ---------------------------------------------------------------------------------------
# pieces
# ---------------------------------------------------------------------------------------
def nodes_for(devices: int, devices_per_node: int) -> int:
    """Whole nodes needed for ``devices`` (a partly filled node is still bought)."""
    return math.ceil(devices / devices_per_node)


def hardware_capex_usd(inputs: CostInputs, devices: int) -> tuple[float, list[str], list[str]]:
    """Purchase cost of ``devices`` (USD), the missing inputs and notes. Needs a device or node price."""
    missing: list[str] = []
    notes: list[str] = []
    nodes = nodes_for(devices, inputs.devices_per_node)
    if inputs.node_system_price is not None:
        notes.append(f"{nodes} node(s) x {inputs.devices_per_node} devices at the whole-system price")
        return nodes * inputs.node_system_price.value, missing, notes
    if inputs.device_price is None:
        raise UserInputError(
            "no public purchase price for this device; give one (USD per device) or rent it (--cloud)",
            field="device_price_usd",
        )
    usd = devices * inputs.device_price.value
    if inputs.node_overhead is not None:
        usd += nodes * inputs.node_overhead.value
    else:
        missing.append("node_overhead_usd_per_node (host CPUs, memory, NICs, chassis): not included")
    return usd, missing, notes


def network_capex_usd(inputs: CostInputs, devices: int) -> tuple[float, list[str]]:
    """Scale-out network cost (USD); none needed inside one node."""
    if devices <= inputs.devices_per_node:
        return 0.0, []
    if inputs.network_per_device is None:
        return 0.0, ["network_usd_per_device (scale-out fabric): not included"]
    return devices * inputs.network_per_device.value, []


def _amortisation_s(inputs: CostInputs, horizon_s: float) -> float:
    return (inputs.amortisation_years * units.YEAR) if inputs.amortisation_years else horizon_s


def _require(fig: Any, field: str, what: str) -> float:
    if fig is None:
        raise UserInputError(f"no {what} known; give it", field=field)
    return float(fig.value)


def _tdp_kw(power: PowerProfile) -> float:
    return power.tdp_w / units.KILO


# ---------------------------------------------------------------------------------------
# TCO
# ---------------------------------------------------------------------------------------
def tco(
    inputs: CostInputs,
    power: PowerProfile,
    *,
    devices: int,
    years: float = 3.0,
    busy_fraction: float = 1.0,
    compute_bound_fraction: float = 1.0,
) -> TcoResult:
    """Total cost of ownership of ``devices`` over ``years`` at an average ``busy_fraction``.

    Pure: every price is in ``inputs`` (build them with :func:`xpuplan.cost.resolve_inputs` or by
    hand), the power model in ``power`` (:func:`xpuplan.perf.power.power_profile_for`).
    """
    if devices < 1:
        raise UserInputError(f"must be >= 1, got {devices!r}", field="devices")
    if not (math.isfinite(years) and years > 0):
        raise UserInputError(f"must be > 0, got {years!r}", field="years")
    horizon_s = years * units.YEAR
    usage = Usage(device_id=power.device_id, devices=devices, duration_s=horizon_s, busy_fraction=busy_fraction,
                  compute_bound_fraction=compute_bound_fraction)
    lines, missing, notes = _cost_lines(inputs, power, usage, horizon_s, include_development=True)
    it_j = it_energy_j(usage, power)
    pue = inputs.pue.value if inputs.pue is not None else 1.0
    if inputs.pue is None:
        notes.append("no PUE given: facility energy = IT energy (PUE 1.0)")
    fac_j = facility_energy_j(it_j, pue)
    total = sum(lines.values())
    device_hours = devices * horizon_s / units.HOUR
    return TcoResult(
        mode=inputs.mode,
        device_id=power.device_id,
        devices=devices,
        years=years,
        busy_fraction=busy_fraction,
        compute_bound_fraction=compute_bound_fraction,
        lines_usd=lines,
        total_usd=total,
        usd_per_device_hour=total / device_hours,
        usd_per_busy_device_hour=total / (device_hours * busy_fraction) if busy_fraction > 0 else None,
        average_power_w_per_device=power_average_w(power, busy_fraction, compute_bound_fraction),
        it_energy_j=it_j,
        facility_energy_j=fac_j,
        carbon_t_co2e=carbon_t_co2e(fac_j, inputs.grid_carbon.value) if inputs.grid_carbon else None,
        figures=figures_dicts(inputs.figures()),
        assumptions=[a.to_dict() for a in power.assumptions],
        missing=missing + ([] if inputs.grid_carbon else ["grid_kg_co2e_per_kwh: carbon not computed"]),
        notes=notes + list(inputs.notes),
    )


def _cost_lines(
    inputs: CostInputs, power: PowerProfile, usage: Usage, horizon_s: float, *, include_development: bool
) -> tuple[dict[str, float], list[str], list[str]]:
    """Cost lines (USD) of ``usage``; ``horizon_s`` is the period the capex share is taken over."""
    lines: dict[str, float] = {}
    missing: list[str] = []
    notes: list[str] = []
    it_j = it_energy_j(usage, power)
    pue = inputs.pue.value if inputs.pue is not None else 1.0
    fac_j = facility_energy_j(it_j, pue)
    years = usage.duration_s / units.YEAR
    if inputs.mode == "owned":
        capex, m, n = hardware_capex_usd(inputs, usage.devices)
        missing += m
        notes += n
        net, m = network_capex_usd(inputs, usage.devices)
        missing += m
        share = min(1.0, usage.duration_s / _amortisation_s(inputs, horizon_s))
        lines["hardware_usd"] = capex * share
        if usage.devices > inputs.devices_per_node:
            lines["network_usd"] = net * share
        price = _require(inputs.electricity, "electricity_usd_per_kwh", "electricity price")
        if inputs.pue is None:
            raise UserInputError("no PUE known; give one (or a cooling kind)", field="pue")
        lines["energy_usd"] = energy_cost_usd(fac_j, price)
        if inputs.space_per_kw_year is not None:
            lines["space_cooling_usd"] = inputs.space_per_kw_year.value * usage.devices * _tdp_kw(power) * years
        else:
            missing.append("space_usd_per_kw_year (floor space, cooling plant; its energy is in PUE): not included")
    else:
        rate = _require(inputs.cloud_rate, "cloud_usd_per_device_hour", "cloud price for this device")
        billed = 1.0 if inputs.cloud_bills_idle else usage.busy_fraction
        lines["cloud_usd"] = rate * usage.device_hours * billed
        if not inputs.cloud_bills_idle:
            notes.append("on-demand/spot: only busy device-hours are billed (capacity released when idle)")
    if inputs.operations_per_year is not None:
        lines["operations_usd"] = inputs.operations_per_year.value * years
    else:
        missing.append("operations_usd_per_year (staff): not included")
    if include_development:
        if inputs.development is not None:
            lines["development_usd"] = inputs.development.value
        else:
            missing.append("development_usd / porting_engineer_months: not included")
    return lines, missing, notes


# ---------------------------------------------------------------------------------------
# one job
# ---------------------------------------------------------------------------------------
def job_cost(
    inputs: CostInputs,
    power: PowerProfile,
    usage: Usage,
    *,
    amortisation_years: float = 3.0,
    include_development: bool = False,
) -> JobCostResult:
    """Cost, energy and carbon of one job described by ``usage``.

    Owned hardware is charged its amortised share for the job's duration (``amortisation_years``
    unless ``inputs.amortisation_years`` is set), operations for the duration, and the job's own
    energy. Development is a one-off cost of adopting the hardware and is left out unless
    ``include_development``. Per-token and per-query figures need ``usage.tokens`` /
    ``usage.queries``.
    """
    horizon_s = (inputs.amortisation_years or amortisation_years) * units.YEAR
    lines, missing, notes = _cost_lines(inputs, power, usage, horizon_s, include_development=include_development)
    it_j = it_energy_j(usage, power)
    fac_j = facility_energy_j(it_j, inputs.pue.value if inputs.pue is not None else 1.0)
    total = sum(lines.values())
    return JobCostResult(
        mode=inputs.mode,
        device_id=usage.device_id,
        devices=usage.devices,
        duration_s=usage.duration_s,
        device_time_s=usage.device_hours * units.HOUR,
        lines_usd=lines,
        total_usd=total,
        it_energy_j=it_j,
        facility_energy_j=fac_j,
        carbon_t_co2e=carbon_t_co2e(fac_j, inputs.grid_carbon.value) if inputs.grid_carbon else None,
        tokens=usage.tokens,
        queries=usage.queries,
        usd_per_million_tokens=total / usage.tokens * 1e6 if usage.tokens else None,
        usd_per_query=total / usage.queries if usage.queries else None,
        energy_j_per_million_tokens=fac_j / usage.tokens * 1e6 if usage.tokens else None,
        figures=figures_dicts(inputs.figures()),
        assumptions=[a.to_dict() for a in power.assumptions],
        missing=missing + ([] if inputs.grid_carbon else ["grid_kg_co2e_per_kwh: carbon not computed"]),
        notes=notes + list(inputs.notes),
    )
