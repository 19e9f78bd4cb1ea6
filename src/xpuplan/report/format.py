"""Human-readable numbers shared by every renderer (terminal tables, HTML and Markdown reports)."""

from __future__ import annotations

from xpuplan import units


def fmt_time(seconds: float | None) -> str:
    """Seconds as d / h / s / ms, one decimal; '-' when unknown."""
    if seconds is None:
        return "-"
    if seconds >= units.DAY:
        return f"{seconds / units.DAY:,.1f} d"
    if seconds >= units.HOUR:
        return f"{seconds / units.HOUR:,.1f} h"
    if seconds >= 1:
        return f"{seconds:,.1f} s"
    return f"{seconds / units.MS:,.0f} ms"


def fmt_usd(usd: float | None) -> str:
    """US dollars, millions above $1M; '?' when no price is known."""
    if usd is None:
        return "?"
    return f"${usd / 1e6:,.2f}M" if usd >= 1e6 else f"${usd:,.0f}"


def fmt_usd_detail(usd: float | None, small: str = ",.2f") -> str:
    """US dollars for tables of rates and totals: millions from $1M, whole dollars from $1,000, and below
    that ``small`` (cents by default; per-query prices pass ",.4g"); '-' when unknown."""
    if usd is None:
        return "-"
    if abs(usd) >= 1e6:
        return f"${usd / 1e6:,.2f}M"
    if abs(usd) >= 1e3:
        return f"${usd:,.0f}"
    return f"${usd:{small}}"


def fmt_energy_j(joules: float | None) -> str:
    """Energy given in joules, shown in kWh (MWh above 1,000 kWh); '-' when unknown."""
    if joules is None:
        return "-"
    kwh = joules / units.KWH
    if 0 < kwh < 1:
        return f"{joules / units.HOUR:,.0f} Wh"
    return f"{kwh / 1e3:,.1f} MWh" if kwh >= 1e3 else f"{kwh:,.1f} kWh"


#: SI unit of a catalog figure -> (display unit, divisor).
_DISPLAY = {"FLOP/s": ("TFLOP/s", 1e12), "OP/s": ("TOP/s", 1e12), "B": ("GB", units.GB), "B/s": ("GB/s", units.GB),
            "W": ("W", 1.0)}


def fmt_figure(value: float, unit: str, path: str = "") -> str:
    """A catalog figure given in SI units, in the unit a datasheet uses (TFLOP/s, GB, GB/s; Gbit/s for a
    figure the catalog keeps in Gbit/s, named by its ``path``)."""
    shown, div = _DISPLAY.get(unit, ("" if unit == "1" else unit, 1.0))  # "1": a ratio (PUE), no unit
    if unit == "B/s" and "gbit" in path:
        shown, div = "Gbit/s", units.GBIT
    return f"{value / div:,.4g} {shown}".rstrip()


def fmt_number(x: float) -> str:
    """A plain quantity: thousands separators from 1,000, else four significant digits."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"
