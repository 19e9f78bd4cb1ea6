"""Price and site data (``data/prices/*.yaml``): schema, loading, lookup. Validated at load.

Every figure is a :class:`~xpuplan.catalog.schema.FigureIn` (value, min/max, source key, trust,
date, note); a figure without a source or trust, an unknown source key, or an unknown field is an
error naming file, line and field. User files from ``$XPUPLAN_PRICES_PATH`` (read here, in
:func:`load_prices`, and nowhere else) are layered over the built-in file: an entry with the same
key replaces the built-in one. The cost math never reads files or the environment; it takes the
:class:`PriceBook` (or plain numbers) as arguments.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from xpuplan.catalog.schema import FigureIn, SourceIn
from xpuplan.datafile import line_for, load_model, parse_text, read_text
from xpuplan.errors import UserInputError
from xpuplan.registry import data_files, normalise_alias

DATA_DIR = Path(__file__).parent / "data" / "prices"
#: Extra price files or directories (os.pathsep-separated) layered over the built-in data.
ENV_EXTRA = "XPUPLAN_PRICES_PATH"

CloudTerm = Literal["on_demand", "reserved_1y", "reserved_3y", "spot", "capacity_block"]
CLOUD_TERMS: tuple[str, ...] = ("on_demand", "reserved_1y", "reserved_3y", "spot", "capacity_block")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DevicePriceIn(_Strict):
    device: str = Field(min_length=1, description="catalog device id or alias")
    purchase_usd: FigureIn


class PlatformIn(_Strict):
    id: str = Field(min_length=1)
    name: str
    devices_per_node: int = Field(ge=1)
    devices: list[str] = Field(default_factory=list)
    system_usd_per_node: FigureIn | None = None
    overhead_usd_per_node: FigureIn | None = None
    rental_only: bool = False
    note: str | None = None


class FabricIn(_Strict):
    id: str = Field(min_length=1)
    name: str
    usd_per_device: FigureIn | None = None
    usd_per_switch_port: FigureIn | None = None
    note: str | None = None


class CloudOfferIn(_Strict):
    provider: str = Field(min_length=1)
    region: str = Field(min_length=1)
    device: str = Field(min_length=1)
    instance: str | None = None
    on_demand_usd_per_device_hour: FigureIn | None = None
    reserved_1y_usd_per_device_hour: FigureIn | None = None
    reserved_3y_usd_per_device_hour: FigureIn | None = None
    spot_usd_per_device_hour: FigureIn | None = None
    capacity_block_usd_per_device_hour: FigureIn | None = None
    note: str | None = None


class RegionIn(_Strict):
    id: str = Field(min_length=1)
    name: str
    electricity_usd_per_kwh: FigureIn | None = None
    electricity_eur_per_kwh: FigureIn | None = None
    grid_kg_co2e_per_kwh: FigureIn | None = None
    note: str | None = None


class CoolingIn(_Strict):
    id: str = Field(min_length=1)
    pue: FigureIn


class LaborIn(_Strict):
    id: str = Field(min_length=1)
    name: str
    usd_per_year: FigureIn


class PortingIn(_Strict):
    """Engineer-months to bring one workload to a device whose PyTorch support is ``to_pytorch``
    (catalog ``ecosystem.pytorch``) for a team that does not yet know that device's stack."""

    to_pytorch: Literal["native", "plugin", "xla", "limited", "none"]
    engineer_months: FigureIn


class PricesFileIn(_Strict):
    schema_version: Literal[1]
    sources: dict[str, SourceIn]
    devices: list[DevicePriceIn] = Field(default_factory=list)
    platforms: list[PlatformIn] = Field(default_factory=list)
    fabrics: list[FabricIn] = Field(default_factory=list)
    cloud: list[CloudOfferIn] = Field(default_factory=list)
    regions: list[RegionIn] = Field(default_factory=list)
    cooling: list[CoolingIn] = Field(default_factory=list)
    labor: list[LaborIn] = Field(default_factory=list)
    porting: list[PortingIn] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------
# runtime objects
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PriceFigure:
    """One sourced price/site number (``value`` with ``low``..``high``) in the unit its name says."""

    name: str
    value: float
    low: float
    high: float
    unit: str
    source: str
    trust: str
    date: str | None = None
    note: str | None = None
    file: str | None = None

    def with_value(self, value: float) -> PriceFigure:
        return PriceFigure(self.name, value, value, value, self.unit, self.source, self.trust, self.date, self.note)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "unit": self.unit,
            "source": self.source,
            "trust": self.trust,
            "date": self.date,
            "note": self.note,
        }


def user_figure(name: str, value: float, unit: str) -> PriceFigure:
    """A figure the user gave on the command line or in a request (trust A: their own number)."""
    return PriceFigure(name, value, value, value, unit, "given by the user", "A")


@dataclass(frozen=True)
class Platform:
    id: str
    name: str
    devices_per_node: int
    devices: tuple[str, ...]
    system_usd_per_node: PriceFigure | None
    overhead_usd_per_node: PriceFigure | None
    rental_only: bool
    note: str | None


@dataclass(frozen=True)
class Fabric:
    id: str
    name: str
    usd_per_device: PriceFigure | None
    usd_per_switch_port: PriceFigure | None
    note: str | None


@dataclass(frozen=True)
class CloudOffer:
    provider: str
    region: str
    device: str
    instance: str | None
    rates: dict[str, PriceFigure]  # term -> USD per device-hour
    note: str | None


@dataclass(frozen=True)
class Region:
    id: str
    name: str
    electricity_usd_per_kwh: PriceFigure | None
    electricity_eur_per_kwh: PriceFigure | None
    grid_kg_co2e_per_kwh: PriceFigure | None
    note: str | None


@dataclass(frozen=True)
class PriceBook:
    """All price and site figures, keyed for lookup. Built by :func:`load_prices`."""

    device_prices: dict[str, PriceFigure] = field(default_factory=dict)  # normalised device name ->
    platforms: dict[str, Platform] = field(default_factory=dict)
    fabrics: dict[str, Fabric] = field(default_factory=dict)
    cloud: dict[tuple[str, str, str], CloudOffer] = field(default_factory=dict)  # (provider, region, device)
    regions: dict[str, Region] = field(default_factory=dict)
    cooling: dict[str, PriceFigure] = field(default_factory=dict)
    labor: dict[str, PriceFigure] = field(default_factory=dict)  # role id -> USD per year
    porting: dict[str, PriceFigure] = field(default_factory=dict)  # pytorch support level -> engineer-months
    files: tuple[str, ...] = ()

    # -- lookups (``names`` are a device's id and aliases) ---------------------------------
    def device_price(self, names: Iterable[str]) -> PriceFigure | None:
        for n in names:
            fig = self.device_prices.get(normalise_alias(n))
            if fig is not None:
                return fig
        return None

    def platform_for(self, names: Iterable[str]) -> Platform | None:
        keys = {normalise_alias(n) for n in names}
        for p in self.platforms.values():
            if keys & {normalise_alias(d) for d in p.devices}:
                return p
        return None

    def cloud_offers(self, names: Iterable[str], provider: str | None = None) -> list[CloudOffer]:
        keys = {normalise_alias(n) for n in names}
        out = [o for o in self.cloud.values() if normalise_alias(o.device) in keys]
        if provider is not None:
            out = [o for o in out if o.provider.casefold() == provider.casefold()]
        return out

    def region(self, region_id: str) -> Region:
        if region_id not in self.regions:
            from xpuplan.errors import UnknownIdError

            raise UnknownIdError("region", region_id, list(self.regions), field="region")
        return self.regions[region_id]

    def pue(self, cooling: str) -> PriceFigure:
        if cooling not in self.cooling:
            from xpuplan.errors import UnknownIdError

            raise UnknownIdError("cooling", cooling, list(self.cooling), field="cooling")
        return self.cooling[cooling]

    def all_figures(self) -> list[PriceFigure]:
        figs: list[PriceFigure] = list(self.device_prices.values()) + list(self.cooling.values())
        figs += list(self.labor.values()) + list(self.porting.values())
        for p in self.platforms.values():
            figs += [f for f in (p.system_usd_per_node, p.overhead_usd_per_node) if f is not None]
        for fb in self.fabrics.values():
            figs += [f for f in (fb.usd_per_device, fb.usd_per_switch_port) if f is not None]
        for o in self.cloud.values():
            figs += list(o.rates.values())
        for r in self.regions.values():
            figs += [f for f in (r.electricity_usd_per_kwh, r.electricity_eur_per_kwh, r.grid_kg_co2e_per_kwh) if f]
        return figs


# ---------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------
def _unit(name: str) -> str:
    for suffix, unit in (
        ("usd_per_device_hour", "USD/device-h"),
        ("usd_per_kwh", "USD/kWh"),
        ("eur_per_kwh", "EUR/kWh"),
        ("kg_co2e_per_kwh", "kgCO2e/kWh"),
        ("usd_per_node", "USD/node"),
        ("usd_per_device", "USD/device"),
        ("usd_per_switch_port", "USD/port"),
        ("purchase_usd", "USD"),
        ("pue", "1"),
        ("usd_per_year", "USD/year"),
        ("engineer_months", "engineer-months"),
    ):
        if name.endswith(suffix):
            return unit
    raise AssertionError(f"price key without a unit suffix: {name}")


class _Ctx:
    def __init__(self, file: str, lines: dict[Any, int], sources: dict[str, SourceIn]) -> None:
        self.file, self.lines, self.sources = file, lines, sources

    def fig(self, f: FigureIn | None, name: str, loc: tuple[Any, ...]) -> PriceFigure | None:
        if f is None:
            return None
        src = self.sources.get(f.source)
        if src is None:
            path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in loc).replace(".[", "[")
            raise UserInputError(
                f"unknown source key {f.source!r} (not in this file's 'sources')",
                field=f"{path}.source",
                file=self.file,
                line=line_for((*loc, "source"), self.lines),
            )
        cite = ", ".join(x for x in (src.title, src.publisher, src.date, src.url) if x)
        return PriceFigure(
            name=name,
            value=f.value,
            low=f.min if f.min is not None else f.value,
            high=f.max if f.max is not None else f.value,
            unit=_unit(name),
            source=cite,
            trust=f.trust,
            date=f.date,
            note=f.note,
            file=self.file,
        )


def _need(fig: PriceFigure | None) -> PriceFigure:
    assert fig is not None
    return fig


def load_prices_file(path: str | Path, into: PriceBook | None = None) -> PriceBook:
    """Parse and validate one price file; entries replace same-keyed entries of ``into``."""
    file = str(path)
    data, lines = parse_text(read_text(path), file)
    if data is None:
        raise UserInputError("file is empty", file=file)
    parsed = load_model(PricesFileIn, data, file, lines)
    c = _Ctx(file, lines, parsed.sources)
    book = into or PriceBook()
    dev = dict(book.device_prices)
    for i, d in enumerate(parsed.devices):
        dev[normalise_alias(d.device)] = _need(
            c.fig(d.purchase_usd, f"{d.device}.purchase_usd", ("devices", i, "purchase_usd"))
        )
    plats = dict(book.platforms)
    for i, p in enumerate(parsed.platforms):
        plats[p.id] = Platform(
            id=p.id,
            name=p.name,
            devices_per_node=p.devices_per_node,
            devices=tuple(p.devices),
            system_usd_per_node=c.fig(p.system_usd_per_node, f"{p.id}.system_usd_per_node",
                                      ("platforms", i, "system_usd_per_node")),
            overhead_usd_per_node=c.fig(p.overhead_usd_per_node, f"{p.id}.overhead_usd_per_node",
                                        ("platforms", i, "overhead_usd_per_node")),
            rental_only=p.rental_only,
            note=p.note,
        )
    fabs = dict(book.fabrics)
    for i, fb in enumerate(parsed.fabrics):
        fabs[fb.id] = Fabric(
            id=fb.id,
            name=fb.name,
            usd_per_device=c.fig(fb.usd_per_device, f"{fb.id}.usd_per_device", ("fabrics", i, "usd_per_device")),
            usd_per_switch_port=c.fig(fb.usd_per_switch_port, f"{fb.id}.usd_per_switch_port",
                                      ("fabrics", i, "usd_per_switch_port")),
            note=fb.note,
        )
    cloud = dict(book.cloud)
    for i, o in enumerate(parsed.cloud):
        rates: dict[str, PriceFigure] = {}
        for term in CLOUD_TERMS:
            key = f"{term}_usd_per_device_hour"
            fig = c.fig(getattr(o, key), f"{o.provider}.{o.region}.{o.device}.{key}", ("cloud", i, key))
            if fig is not None:
                rates[term] = fig
        if not rates:
            raise UserInputError("a cloud offer needs at least one *_usd_per_device_hour rate",
                                 field=f"cloud[{i}]", file=file, line=line_for(("cloud", i), lines))
        k = (o.provider.casefold(), o.region.casefold(), normalise_alias(o.device))
        cloud[k] = CloudOffer(o.provider, o.region, o.device, o.instance, rates, o.note)
    regs = dict(book.regions)
    for i, r in enumerate(parsed.regions):
        regs[r.id] = Region(
            id=r.id,
            name=r.name,
            electricity_usd_per_kwh=c.fig(r.electricity_usd_per_kwh, f"{r.id}.electricity_usd_per_kwh",
                                          ("regions", i, "electricity_usd_per_kwh")),
            electricity_eur_per_kwh=c.fig(r.electricity_eur_per_kwh, f"{r.id}.electricity_eur_per_kwh",
                                          ("regions", i, "electricity_eur_per_kwh")),
            grid_kg_co2e_per_kwh=c.fig(r.grid_kg_co2e_per_kwh, f"{r.id}.grid_kg_co2e_per_kwh",
                                       ("regions", i, "grid_kg_co2e_per_kwh")),
            note=r.note,
        )
    cool = dict(book.cooling)
    for i, co in enumerate(parsed.cooling):
        cool[co.id] = _need(c.fig(co.pue, f"{co.id}.pue", ("cooling", i, "pue")))
    labor = dict(book.labor)
    for i, lb in enumerate(parsed.labor):
        labor[lb.id] = _need(c.fig(lb.usd_per_year, f"{lb.id}.usd_per_year", ("labor", i, "usd_per_year")))
    porting = dict(book.porting)
    for i, pt in enumerate(parsed.porting):
        porting[pt.to_pytorch] = _need(
            c.fig(pt.engineer_months, f"porting.{pt.to_pytorch}.engineer_months", ("porting", i, "engineer_months"))
        )
    return PriceBook(dev, plats, fabs, cloud, regs, cool, labor, porting, (*book.files, file))


def price_files(extra: Iterable[str | Path] = ()) -> list[Path]:
    return data_files(DATA_DIR, ENV_EXTRA, extra)


def load_prices(extra: Iterable[str | Path] = ()) -> PriceBook:
    """Built-in price data plus user files (``extra`` or ``$XPUPLAN_PRICES_PATH``), later files winning."""
    extra = tuple(str(p) for p in extra)
    if not extra and not os.environ.get(ENV_EXTRA):
        return _default_prices()
    book = PriceBook()
    for f in price_files(extra):
        book = load_prices_file(f, book)
    return book


@lru_cache(maxsize=1)
def _default_prices() -> PriceBook:
    book = PriceBook()
    for f in price_files():
        book = load_prices_file(f, book)
    return book


__all__ = [
    "CLOUD_TERMS",
    "ENV_EXTRA",
    "CloudOffer",
    "Fabric",
    "Platform",
    "PriceBook",
    "PriceFigure",
    "PricesFileIn",
    "Region",
    "load_prices",
    "load_prices_file",
    "user_figure",
]
