"""Energy, its cost, and carbon: small pure functions in SI units (J, W, s) with kWh at the edges."""

from __future__ import annotations

from xpuplan import units
from xpuplan.cost.model import Usage
from xpuplan.errors import UserInputError
from xpuplan.perf.power import PowerProfile, power_average_w


def it_energy_j(usage: Usage, power: PowerProfile) -> float:
    """IT (device) energy of a usage in J: ``devices * P_avg(busy, compute share) * duration``.

    A measured ``usage.energy_j`` wins over the power model.
    """
    if usage.energy_j is not None:
        return usage.energy_j
    p_w = power_average_w(power, usage.busy_fraction, usage.compute_bound_fraction)
    return usage.devices * p_w * usage.duration_s


def facility_energy_j(it_j: float, pue: float) -> float:
    """Facility energy in J: IT energy times PUE (power usage effectiveness, >= 1)."""
    if not pue >= 1.0:
        raise UserInputError(f"PUE must be >= 1, got {pue!r}", field="pue")
    return it_j * pue


def energy_kwh(energy_j: float) -> float:
    """J -> kWh."""
    return energy_j / units.KWH


def energy_cost_usd(facility_j: float, usd_per_kwh: float) -> float:
    """Electricity bill in USD for ``facility_j`` joules at ``usd_per_kwh``."""
    if usd_per_kwh < 0:
        raise UserInputError(f"must be >= 0, got {usd_per_kwh!r}", field="electricity_usd_per_kwh")
    return energy_kwh(facility_j) * usd_per_kwh


def carbon_t_co2e(facility_j: float, kg_co2e_per_kwh: float) -> float:
    """Operational emissions in tonnes CO2e (location-based grid average; no embodied carbon)."""
    if kg_co2e_per_kwh < 0:
        raise UserInputError(f"must be >= 0, got {kg_co2e_per_kwh!r}", field="grid_kg_co2e_per_kwh")
    return energy_kwh(facility_j) * kg_co2e_per_kwh / 1000.0
