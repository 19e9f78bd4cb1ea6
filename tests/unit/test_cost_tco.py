"""TCO, per-job cost, energy, carbon and porting: formulas and resolution from the price book."""

from __future__ import annotations

import pytest

import xpuplan as xp
from xpuplan import units
from xpuplan.catalog.prices import load_prices
from xpuplan.catalog.prices import user_figure as given
from xpuplan.cost import (
    CostInputs,
    CostOptions,
    Usage,
    carbon_t_co2e,
    energy_cost_usd,
    facility_energy_j,
    it_energy_j,
    job_cost,
    porting_estimate,
    resolve_inputs,
    stack_key,
    tco,
    team_knows,
)
from xpuplan.errors import UnknownIdError, UserInputError
from xpuplan.perf.power import power_profile, power_profile_for


def _inputs(**kw):
    base = dict(device_price=given("device_price_usd", 10_000, "USD"), devices_per_node=8,
                node_overhead=given("node_overhead_usd", 20_000, "USD/node"),
                network_per_device=given("network_usd_per_device", 1_000, "USD/device"),
                electricity=given("electricity_usd_per_kwh", 0.10, "USD/kWh"), pue=given("pue", 1.5, "1"),
                grid_carbon=given("grid_kg_co2e_per_kwh", 0.4, "kgCO2e/kWh"))
    base.update(kw)
    return CostInputs(**base)


def test_energy_helpers():
    p = power_profile("x", 1000.0, idle_fraction=0.1)
    u = Usage(device_id="x", devices=2, duration_s=3600.0, busy_fraction=0.5)
    assert it_energy_j(u, p) == pytest.approx(2 * 550.0 * 3600.0)  # (100 + 0.5 * 900) W
    assert it_energy_j(u.model_copy(update={"energy_j": 42.0}), p) == 42.0  # a measurement wins
    fac = facility_energy_j(units.KWH, 1.5)
    assert energy_cost_usd(fac, 0.2) == pytest.approx(0.3)
    assert carbon_t_co2e(1000 * units.KWH, 0.5) == pytest.approx(0.5)
    with pytest.raises(UserInputError) as exc:
        facility_energy_j(1.0, 0.9)
    assert exc.value.field == "pue"


def test_owned_tco_lines():
    p = power_profile("x", 1000.0, idle_fraction=0.0)
    res = tco(_inputs(operations_per_year=given("operations_usd_per_year", 1e5, "USD/year")), p,
              devices=16, years=2.0, busy_fraction=1.0)
    hours = 2 * units.YEAR / units.HOUR
    assert res.lines_usd["hardware_usd"] == pytest.approx(16 * 10_000 + 2 * 20_000)
    assert res.lines_usd["network_usd"] == pytest.approx(16 * 1_000)
    assert res.lines_usd["energy_usd"] == pytest.approx(16 * 1.0 * hours * 1.5 * 0.10)
    assert res.lines_usd["operations_usd"] == pytest.approx(2e5)
    assert res.total_usd == pytest.approx(sum(res.lines_usd.values()))
    assert res.carbon_t_co2e == pytest.approx(16 * hours * 1.5 * 0.4 / 1000)
    assert res.usd_per_device_hour == pytest.approx(res.total_usd / (16 * hours))
    assert any("space" in m for m in res.missing) and any("development" in m for m in res.missing)
    assert {f["name"] for f in res.figures} >= {"device_price_usd", "pue"}
    assert res.schema_version == "2.0"


def test_amortisation_longer_than_horizon_charges_a_share():
    p = power_profile("x", 1000.0)
    res = tco(_inputs(amortisation_years=4.0), p, devices=8, years=2.0)
    assert res.lines_usd["hardware_usd"] == pytest.approx((8 * 10_000 + 20_000) / 2)
    assert "network_usd" not in res.lines_usd  # one node: no scale-out fabric


def test_owned_without_price_or_electricity_names_the_field():
    p = power_profile("x", 1000.0)
    with pytest.raises(UserInputError) as exc:
        tco(_inputs(device_price=None), p, devices=8)
    assert exc.value.field == "device_price_usd"
    with pytest.raises(UserInputError) as exc:
        tco(_inputs(electricity=None), p, devices=8)
    assert exc.value.field == "electricity_usd_per_kwh"


def test_cloud_bills_busy_hours_on_demand_and_all_hours_reserved():
    p = power_profile("x", 700.0)
    od = CostInputs(mode="cloud", cloud_rate=given("cloud_usd_per_device_hour", 2.0, "USD/device-h"),
                    cloud_bills_idle=False)
    res = tco(od, p, devices=10, years=1.0, busy_fraction=0.5)
    assert res.lines_usd["cloud_usd"] == pytest.approx(2.0 * 10 * units.YEAR / units.HOUR * 0.5)
    rs = tco(od.model_copy(update={"cloud_bills_idle": True}), p, devices=10, years=1.0, busy_fraction=0.5)
    assert rs.lines_usd["cloud_usd"] == pytest.approx(2 * res.lines_usd["cloud_usd"])
    with pytest.raises(UserInputError) as exc:
        tco(CostInputs(mode="cloud"), p, devices=1)
    assert exc.value.field == "cloud_usd_per_device_hour"


def test_job_cost_per_token_and_query():
    p = power_profile("x", 1000.0, idle_fraction=0.0)
    u = Usage(device_id="x", devices=8, duration_s=units.DAY, tokens=1e9, queries=1e6)
    res = job_cost(_inputs(), p, u, amortisation_years=3.0)
    share = units.DAY / (3 * units.YEAR)
    assert res.lines_usd["hardware_usd"] == pytest.approx((8 * 10_000 + 20_000) * share)
    assert res.usd_per_million_tokens == pytest.approx(res.total_usd / 1e3)
    assert res.usd_per_query == pytest.approx(res.total_usd / 1e6)
    assert res.energy_j_per_million_tokens == pytest.approx(res.facility_energy_j / 1e3)
    assert "development_usd" not in res.lines_usd


def test_resolve_from_price_book():
    book = load_prices()
    h100 = xp.get_device("H100")
    inp = resolve_inputs(h100, book, CostOptions())
    assert inp.node_system_price is not None and inp.devices_per_node == 8
    assert inp.network_per_device.name.startswith("infiniband-ndr")  # from the device's NIC
    assert resolve_inputs(xp.get_device("910B"), book, CostOptions()).network_per_device.name.startswith("roce-400g")
    assert inp.electricity.value == pytest.approx(0.0835) and inp.pue.value == pytest.approx(1.58)
    cloud = resolve_inputs(h100, book, CostOptions(mode="cloud", provider="aws"))
    assert cloud.cloud_rate.value == pytest.approx(12.29) and not cloud.cloud_bills_idle
    assert cloud.electricity is None
    cheapest = resolve_inputs(h100, book, CostOptions(mode="cloud"))
    assert cheapest.cloud_rate.value <= cloud.cloud_rate.value
    with pytest.raises(UserInputError) as exc:
        resolve_inputs(xp.get_device("TPU v5p"), book, CostOptions())
    assert exc.value.field == "mode"
    with pytest.raises(UserInputError) as exc:
        resolve_inputs(h100, book, CostOptions(region="eu"))
    assert exc.value.field == "usd_per_eur"
    eu = resolve_inputs(h100, book, CostOptions(region="eu", usd_per_eur=1.1))
    assert eu.electricity.value == pytest.approx(0.22)
    with pytest.raises(UnknownIdError):
        resolve_inputs(h100, book, CostOptions(region="atlantis"))
    with pytest.raises(UserInputError) as exc:
        resolve_inputs(h100, book, CostOptions(mode="cloud", provider="aws", term="spot"))
    assert exc.value.field == "cloud_usd_per_device_hour" and "on file" in exc.value.message


def test_device_without_public_price_must_be_given():
    book = load_prices()
    mlu = xp.get_device("MLU590")
    inp = resolve_inputs(mlu, book, CostOptions())
    with pytest.raises(UserInputError) as exc:
        tco(inp, power_profile_for(mlu), devices=8)
    assert exc.value.field == "device_price_usd"
    ok = resolve_inputs(mlu, book, CostOptions(device_price_usd=20_000))
    assert tco(ok, power_profile_for(mlu), devices=8).lines_usd["hardware_usd"] == pytest.approx(160_000)


def test_porting_from_stack_facts_and_team_skills():
    book = load_prices()
    assert stack_key("Neuware (CNToolkit, CNNL)") == "neuware" and stack_key("XLA/JAX") == "xla"
    assert team_knows("CUDA", ["cuda"]) and not team_knows("CANN", ["CUDA"])
    same = porting_estimate("CUDA", "native", ("CUDA",), book)
    assert same.engineer_months == 0 and same.usd == 0
    npu = porting_estimate("CANN", "plugin", ("CUDA",), book)
    assert npu.engineer_months == pytest.approx(16.6)
    assert npu.usd == pytest.approx(16.6 * 144_570 / 12)
    unknown = porting_estimate("ROCm", "native", ("CUDA",), book)
    assert unknown.usd is None and "porting_engineer_months" in unknown.reason
    given_months = porting_estimate("ROCm", "native", ("CUDA",), book, engineer_months=3, engineer_usd_per_year=120_000)
    assert given_months.usd == pytest.approx(30_000)
    inp = resolve_inputs(xp.get_device("910B"), book, CostOptions(team_stacks=("CUDA",)))
    assert inp.development.value == pytest.approx(npu.usd) and inp.development.trust == "D"


def test_public_tco_api():
    res = xp.tco("H100", 16, years=1, busy_fraction=0.5, operations_usd_per_year=1e5)
    assert isinstance(res, xp.TcoResult) and res.lines_usd["operations_usd"] == pytest.approx(1e5)
    with pytest.raises(UserInputError) as exc:
        xp.tco("H100", 16, busy_fraction=1.5)
    assert exc.value.field == "--busy"
    with pytest.raises(UserInputError) as exc:
        xp.tco("H100", 16, pue=float("nan"))
    assert exc.value.field == "--pue"
