"""Economics: TCO, per-job cost, energy, carbon, porting effort and reliability at scale.

Pure functions over a small usage record; this package never runs a planner and never reads
files or the environment (the caller loads the price book with
:func:`xpuplan.catalog.prices.load_prices` and passes it in).

Typical use::

    from xpuplan.catalog import get_device
    from xpuplan.catalog.prices import load_prices
    from xpuplan.cost import CostOptions, Usage, job_cost, resolve_inputs, tco
    from xpuplan.perf.power import power_profile_for

    dev = get_device("H100")
    inputs = resolve_inputs(dev, load_prices(), CostOptions(mode="owned", region="us", cooling="air"))
    t = tco(inputs, power_profile_for(dev), devices=1024, years=3, busy_fraction=0.8)
    t.total_usd, t.lines_usd, t.missing          # USD by line; what was left out and why
    u = Usage(device_id=dev.id, devices=1024, duration_s=30 * 86400, tokens=1e12)
    job_cost(inputs, power_profile_for(dev), u).usd_per_million_tokens

Main entry points:

* :func:`resolve_inputs` (device, price book, :class:`CostOptions`) -> :class:`CostInputs`
* :func:`tco` (inputs, power profile, devices, years, busy fraction) -> :class:`TcoResult`
* :func:`job_cost` (inputs, power profile, :class:`Usage`) -> :class:`JobCostResult`
* :func:`reliability` (devices, failure-free time, checkpoint bytes, ...) -> :class:`ReliabilityResult`
* :func:`porting_estimate` / :func:`porting_for` -> :class:`PortingEstimate`
* energy helpers: :func:`it_energy_j`, :func:`facility_energy_j`, :func:`energy_cost_usd`, :func:`carbon_t_co2e`
"""

from xpuplan.cost.energy import carbon_t_co2e, energy_cost_usd, energy_kwh, facility_energy_j, it_energy_j
from xpuplan.cost.model import SCHEMA_VERSION, CostInputs, Usage
from xpuplan.cost.porting import PortingEstimate, check_team_stacks, porting_estimate, stack_key, team_knows
from xpuplan.cost.reliability import (
    CHECKPOINT_BYTES_PER_PARAM,
    FAILURES_PER_DEVICE_HOUR,
    ReliabilityResult,
    checkpoint_write_s,
    daly_interval_s,
    expected_wall_time_s,
    job_mtbf_s,
    reliability,
    young_interval_s,
)
from xpuplan.cost.resolve import CostOptions, development_for, porting_for, resolve_inputs
from xpuplan.cost.tco import HOURS_PER_YEAR, JobCostResult, TcoResult, job_cost, tco

__all__ = [
    "CHECKPOINT_BYTES_PER_PARAM",
    "FAILURES_PER_DEVICE_HOUR",
    "HOURS_PER_YEAR",
    "SCHEMA_VERSION",
    "CostInputs",
    "CostOptions",
    "JobCostResult",
    "PortingEstimate",
    "ReliabilityResult",
    "TcoResult",
    "Usage",
    "carbon_t_co2e",
    "check_team_stacks",
    "checkpoint_write_s",
    "daly_interval_s",
    "development_for",
    "energy_cost_usd",
    "energy_kwh",
    "expected_wall_time_s",
    "facility_energy_j",
    "it_energy_j",
    "job_cost",
    "job_mtbf_s",
    "porting_estimate",
    "porting_for",
    "reliability",
    "resolve_inputs",
    "stack_key",
    "tco",
    "team_knows",
    "young_interval_s",
]
