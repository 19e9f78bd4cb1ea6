"""Typed inputs of the cost layer: a usage record and the explicit price/site figures.

The cost layer never runs a planner and never reads files or the environment. A job (``xpuplan.jobs``)
or the user builds a :class:`Usage` (devices, duration, busy fraction, energy) from a planner result,
and a :class:`CostInputs` from the price book (:func:`xpuplan.cost.resolve_inputs`) or from plain
numbers; the functions in ``xpuplan.cost`` combine them. Every figure carried here is a
:class:`~xpuplan.catalog.prices.PriceFigure` so results can list what they used, with trust grades.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xpuplan.catalog.prices import PriceFigure

#: Version of every cost result's JSON form.
SCHEMA_VERSION = "2.0"

Mode = Literal["owned", "cloud"]


class Usage(BaseModel):
    """What a deployment or job uses: devices for a duration at a busy fraction (SI units).

    ``compute_bound_fraction`` is the share of busy time spent in compute-bound work (the rest is
    memory-bound; it sets the power draw, see ``xpuplan.perf.power``). ``energy_j`` overrides the
    power model with a measured or externally computed IT energy for the whole usage.
    ``tokens`` and ``queries`` (optional) turn totals into per-million-token and per-query figures.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    device_id: str = Field(min_length=1)
    devices: int = Field(ge=1, description="number of accelerators")
    duration_s: float = Field(gt=0, description="wall-clock duration, seconds")
    busy_fraction: float = Field(default=1.0, ge=0, le=1)
    compute_bound_fraction: float = Field(default=1.0, ge=0, le=1)
    energy_j: float | None = Field(default=None, ge=0, description="IT energy of the whole usage, J")
    tokens: float | None = Field(default=None, gt=0)
    queries: float | None = Field(default=None, gt=0)

    @field_validator("duration_s", "energy_j", "tokens", "queries")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @property
    def device_hours(self) -> float:
        return self.devices * self.duration_s / 3600.0


class CostInputs(BaseModel):
    """Every price and site figure a cost calculation may use; ``None`` means not known.

    Owned hardware: ``device_price`` (USD per device) or ``node_system_price`` (USD per node
    including its ``devices_per_node`` devices), optional ``node_overhead`` (USD per node, host
    and chassis, when the device price excludes them) and ``network_per_device`` (USD).
    Facility: ``electricity`` (USD/kWh), ``pue`` (1), ``grid_carbon`` (kg CO2e/kWh),
    ``space_per_kw_year`` (USD per kW of IT power per year, cooling plant and space).
    People: ``operations_per_year`` (USD per year), ``development`` (USD, one-off).
    Cloud: ``cloud_rate`` (USD per device-hour) and whether idle hours are billed
    (``cloud_bills_idle``: True for reservations, False for on-demand/spot you release when idle).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)

    mode: Mode = "owned"
    device_price: PriceFigure | None = None
    node_system_price: PriceFigure | None = None
    devices_per_node: int = Field(default=8, ge=1)
    node_overhead: PriceFigure | None = None
    network_per_device: PriceFigure | None = None
    amortisation_years: float | None = Field(default=None, gt=0, description="None: the TCO horizon")
    electricity: PriceFigure | None = None
    pue: PriceFigure | None = None
    grid_carbon: PriceFigure | None = None
    space_per_kw_year: PriceFigure | None = None
    operations_per_year: PriceFigure | None = None
    development: PriceFigure | None = None
    cloud_rate: PriceFigure | None = None
    cloud_term: str | None = None
    cloud_bills_idle: bool = True
    notes: tuple[str, ...] = ()

    def figures(self) -> list[PriceFigure]:
        names = ("device_price", "node_system_price", "node_overhead", "network_per_device", "electricity", "pue",
                 "grid_carbon", "space_per_kw_year", "operations_per_year", "development", "cloud_rate")
        return [f for f in (getattr(self, n) for n in names) if f is not None]


def figures_dicts(figs: list[PriceFigure]) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for f in figs:
        seen.setdefault(f.name, f.to_dict())
    return list(seen.values())
