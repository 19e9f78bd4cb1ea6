"""Turn a device, a price book and the user's choices into explicit :class:`CostInputs`.

Resolution, first found wins: the user's number -> the price book (``catalog/data/prices`` plus
``$XPUPLAN_PRICES_PATH``, loaded by the caller) -> the hardware catalog's own ``price.*`` figures.
Nothing here reads files or the environment: the caller passes the :class:`PriceBook`.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xpuplan.catalog.prices import CLOUD_TERMS, Platform, PriceBook, PriceFigure, user_figure
from xpuplan.cost.model import CostInputs, Mode
from xpuplan.cost.porting import PortingEstimate, porting_estimate
from xpuplan.errors import UnknownIdError, UserInputError

#: Most accelerators one server holds whatever its interconnect: 16 (NVIDIA DGX-2 / HGX-2, 16 V100 on
#: NVSwitch; 4U PCIe servers take 8 to 10 cards). A larger node is a rack-scale scale-up domain, which the
#: catalog records as the device's ``scale_up_domain`` (GB200 NVL72: 72).
MAX_DEVICES_PER_SERVER = 16


class CostOptions(BaseModel):
    """The user's choices and numbers; every ``None`` means 'use the price book'."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Mode = "owned"
    region: str = "us"
    cooling: str = "air"
    provider: str | None = None
    term: str = "on_demand"
    fabric: str | None = Field(default=None, description="network fabric id; default from the device's NIC")
    usd_per_eur: float | None = Field(default=None, gt=0)
    device_price_usd: float | None = Field(default=None, ge=0)
    node_system_price_usd: float | None = Field(default=None, ge=0)
    devices_per_node: int | None = Field(default=None, ge=1)
    node_overhead_usd: float | None = Field(default=None, ge=0)
    network_usd_per_device: float | None = Field(default=None, ge=0)
    amortisation_years: float | None = Field(default=None, gt=0)
    electricity_usd_per_kwh: float | None = Field(default=None, ge=0)
    pue: float | None = Field(default=None, ge=1)
    grid_kg_co2e_per_kwh: float | None = Field(default=None, ge=0)
    space_usd_per_kw_year: float | None = Field(default=None, ge=0)
    operations_usd_per_year: float | None = Field(default=None, ge=0)
    development_usd: float | None = Field(default=None, ge=0)
    team_stacks: tuple[str, ...] | None = None
    porting_engineer_months: float | None = Field(default=None, ge=0)
    engineer_usd_per_year: float | None = Field(default=None, ge=0)
    cloud_usd_per_device_hour: float | None = Field(default=None, ge=0)

    @field_validator("*")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @field_validator("term")
    @classmethod
    def _term(cls, v: str) -> str:
        if v not in CLOUD_TERMS:
            raise ValueError(f"unknown term {v!r}; expected one of {', '.join(CLOUD_TERMS)}")
        return v


def _names(device: Any) -> list[str]:
    return [device.id, *device.aliases]


def _catalog_figure(device: Any, path: str, name: str, unit: str) -> PriceFigure | None:
    fig = device.figures.get(path)
    if fig is None:
        return None
    return PriceFigure(name, fig.value, fig.low, fig.high, unit, f"hardware catalog: {fig.source.cite()}", fig.trust,
                       fig.date, fig.note, device.file)


def _default_fabric(device: Any) -> str | None:
    """Fabric priced by default, from the catalog's scale-out NIC name (InfiniBand NDR, else RoCE)."""
    nic = (device.scale_out_name or "").casefold()
    if "infiniband ndr" in nic:
        return "infiniband-ndr"
    if "roce" in nic:
        return "roce-400g"
    return None


def _check_devices_per_node(device: Any, platform: Platform | None, o: CostOptions) -> None:
    """The user's node size must fit one server of ``device`` and match the server a per-node price on file is for."""
    n = o.devices_per_node
    assert n is not None
    limit = max(MAX_DEVICES_PER_SERVER, device.scale_up_domain, platform.devices_per_node if platform else 1)
    if n > limit:
        raise UserInputError(f"no {device.id} node holds {n:,} devices: at most {limit} (the largest servers hold "
                             f"{MAX_DEVICES_PER_SERVER}; its scale-up domain is {device.scale_up_domain})",
                             field="devices_per_node")
    if platform is None or n == platform.devices_per_node:
        return
    if o.node_system_price_usd is None and o.device_price_usd is None and platform.system_usd_per_node is not None:
        what = f"the whole-server price on file ({platform.system_usd_per_node.value:,.0f} USD)"
        fix = ("your node's price (node_system_price_usd, --node-system-price-usd) or a per-device price "
               "(device_price_usd, --device-price-usd)")
    elif o.node_system_price_usd is None and o.node_overhead_usd is None and platform.overhead_usd_per_node is not None:
        what = f"the per-server overhead on file ({platform.overhead_usd_per_node.value:,.0f} USD)"
        fix = "your node's overhead (node_overhead_usd, --node-overhead-usd)"
    else:
        return
    raise UserInputError(
        f"{what} is for the {platform.name} with {platform.devices_per_node} devices, not {n}: give {fix}, or leave "
        "devices_per_node out", field="devices_per_node")


def resolve_inputs(device: Any, book: PriceBook, options: CostOptions | None = None) -> CostInputs:
    """Explicit cost inputs for ``device`` (a catalog ``Device``) under ``options``."""
    o = options or CostOptions()
    names = _names(device)
    notes: list[str] = []
    kw: dict[str, Any] = {"mode": o.mode}
    platform = book.platform_for(names)
    if o.mode == "owned":
        if platform is not None and platform.rental_only:
            raise UserInputError(f"{device.id} is not sold ({platform.name}); rent it with --cloud", field="mode")
        if o.devices_per_node:
            _check_devices_per_node(device, platform, o)
            kw["devices_per_node"] = o.devices_per_node
        elif platform is not None:
            kw["devices_per_node"] = platform.devices_per_node
        else:
            kw["devices_per_node"] = max(1, device.scale_up_domain)
        if o.node_system_price_usd is not None:
            kw["node_system_price"] = user_figure("node_system_price_usd", o.node_system_price_usd, "USD/node")
        elif o.device_price_usd is not None:
            kw["device_price"] = user_figure("device_price_usd", o.device_price_usd, "USD")
        elif platform is not None and platform.system_usd_per_node is not None:
            kw["node_system_price"] = platform.system_usd_per_node
        else:
            kw["device_price"] = book.device_price(names) or _catalog_figure(
                device, "price.list_usd", f"{device.id}.price.list_usd", "USD")
        if o.node_overhead_usd is not None:
            kw["node_overhead"] = user_figure("node_overhead_usd", o.node_overhead_usd, "USD/node")
        elif platform is not None and platform.overhead_usd_per_node is not None:
            kw["node_overhead"] = platform.overhead_usd_per_node
        if o.network_usd_per_device is not None:
            kw["network_per_device"] = user_figure("network_usd_per_device", o.network_usd_per_device, "USD/device")
        else:
            fabric_id = o.fabric or _default_fabric(device)
            if fabric_id is not None:
                if fabric_id not in book.fabrics:
                    raise UnknownIdError("fabric", fabric_id, list(book.fabrics), field="fabric")
                kw["network_per_device"] = book.fabrics[fabric_id].usd_per_device
        kw["amortisation_years"] = o.amortisation_years
    else:
        kw.update(_cloud(device, book, o, notes))
    # site
    region = book.region(o.region) if (o.electricity_usd_per_kwh is None or o.grid_kg_co2e_per_kwh is None) else None
    if o.mode == "cloud":
        pass  # the cloud price includes electricity; energy and carbon are still reported
    elif o.electricity_usd_per_kwh is not None:
        kw["electricity"] = user_figure("electricity_usd_per_kwh", o.electricity_usd_per_kwh, "USD/kWh")
    elif region is not None and region.electricity_usd_per_kwh is not None:
        kw["electricity"] = region.electricity_usd_per_kwh
    elif region is not None and region.electricity_eur_per_kwh is not None:
        eur = region.electricity_eur_per_kwh
        if o.usd_per_eur is None:
            if o.mode == "owned":
                raise UserInputError(f"region {region.id} prices electricity in EUR ({eur.value:g} EUR/kWh); give "
                                     "usd_per_eur (--usd-per-eur) or electricity_usd_per_kwh", field="usd_per_eur")
        else:
            kw["electricity"] = PriceFigure(eur.name.replace("eur", "usd"), eur.value * o.usd_per_eur,
                                            eur.low * o.usd_per_eur, eur.high * o.usd_per_eur, "USD/kWh",
                                            eur.source + f" (x {o.usd_per_eur:g} USD/EUR, given)", eur.trust, eur.date,
                                            eur.note)
    elif o.mode == "owned":
        raise UserInputError(f"no public electricity price for region {o.region!r}; give electricity_usd_per_kwh",
                             field="electricity_usd_per_kwh")
    if o.grid_kg_co2e_per_kwh is not None:
        kw["grid_carbon"] = user_figure("grid_kg_co2e_per_kwh", o.grid_kg_co2e_per_kwh, "kgCO2e/kWh")
    elif region is not None and region.grid_kg_co2e_per_kwh is not None:
        kw["grid_carbon"] = region.grid_kg_co2e_per_kwh
    kw["pue"] = user_figure("pue", o.pue, "1") if o.pue is not None else book.pue(o.cooling)
    if o.space_usd_per_kw_year is not None:
        kw["space_per_kw_year"] = user_figure("space_usd_per_kw_year", o.space_usd_per_kw_year, "USD/(kW*year)")
    if o.operations_usd_per_year is not None:
        kw["operations_per_year"] = user_figure("operations_usd_per_year", o.operations_usd_per_year, "USD/year")
    dev = development_for(device, book, o)
    if dev is not None:
        kw["development"] = dev
    kw["notes"] = tuple(notes)
    return CostInputs(**kw)


def porting_for(device: Any, book: PriceBook, options: CostOptions) -> PortingEstimate | None:
    """Porting estimate for ``device`` when the team's stacks are known (None otherwise)."""
    if options.team_stacks is None:
        return None
    return porting_estimate(device.ecosystem.software_stack, device.ecosystem.pytorch, options.team_stacks, book,
                            engineer_months=options.porting_engineer_months,
                            engineer_usd_per_year=options.engineer_usd_per_year)


def development_for(device: Any, book: PriceBook, options: CostOptions) -> PriceFigure | None:
    """Development cost: the user's USD, else the porting estimate from the team's skills."""
    if options.development_usd is not None:
        return user_figure("development_usd", options.development_usd, "USD")
    est = porting_for(device, book, options)
    if est is None or est.usd is None:
        return None
    months = est.engineer_months or 0.0
    trust = max((f.trust for f in est.figures), default="A")
    src = "; ".join(f"{f.name}: {f.source}" for f in est.figures) or "no porting needed"
    return PriceFigure("development_usd", est.usd, est.usd, est.usd, "USD",
                       f"porting estimate {months:g} engineer-months ({est.reason}); {src}", trust)


def _cloud(device: Any, book: PriceBook, o: CostOptions, notes: list[str]) -> dict[str, Any]:
    kw: dict[str, Any] = {"cloud_term": o.term, "cloud_bills_idle": o.term not in ("on_demand", "spot")}
    if o.cloud_usd_per_device_hour is not None:
        kw["cloud_rate"] = user_figure("cloud_usd_per_device_hour", o.cloud_usd_per_device_hour, "USD/device-h")
        return kw
    offers = book.cloud_offers(_names(device), o.provider)
    rates = [(off, off.rates[o.term]) for off in offers if o.term in off.rates]
    if rates:
        off, fig = min(rates, key=lambda t: t[1].value)
        kw["cloud_rate"] = fig
        notes.append(f"cloud: {off.provider} {off.region} {off.instance or ''} {o.term} (cheapest published)".strip())
        return kw
    if o.provider is None and o.term == "on_demand":
        cat = _catalog_figure(device, "price.cloud_usd_per_hour", f"{device.id}.price.cloud_usd_per_hour",
                              "USD/device-h")
        if cat is not None:
            kw["cloud_rate"] = cat
            notes.append("cloud: the hardware catalog's on-demand range (no provider-specific price on file)")
            return kw
    have = sorted({f"{off.provider}:{t}" for off in offers for t in off.rates})
    raise UserInputError(
        f"no published {o.term} price for {device.id}"
        + (f" at {o.provider}" if o.provider else "")
        + (f" (on file: {', '.join(have)})" if have else "")
        + "; give cloud_usd_per_device_hour",
        field="cloud_usd_per_device_hour",
    )
