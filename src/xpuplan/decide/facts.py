"""Catalog facts read into numbers for the development and risk criteria (formulas in docs/decide.md).

Every function here reads a :class:`~xpuplan.catalog.device.Device`'s recorded facts (software
stack, PyTorch support, frameworks, maturity grade, trust grades, export-control and region facts)
through the constants in ``data/criteria.yaml`` and the rules in ``data/availability.yaml``. No
number is assigned per chip.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from xpuplan.datafile import parse_text, read_text
from xpuplan.decide.weights import criteria_data

AVAILABILITY_FILE = Path(__file__).parent / "data" / "availability.yaml"
#: Deployment region that skips availability checks (the user can deploy anywhere).
ANY_REGION = "any"


def _c() -> Any:
    return criteria_data().constants


def pytorch_level(device: Any) -> float:
    """0..1: how far PyTorch code runs on the device (``ecosystem.pytorch`` via ``pytorch_level``)."""
    return float(_c()["pytorch_level"].get(device.ecosystem.pytorch, 0.0))


def maturity_level(device: Any) -> float:
    """Catalog maturity grade 1..5 mapped to 0..1."""
    return (device.ecosystem.maturity - 1) / 4.0


def ecosystem_score(device: Any, training: bool) -> float:
    """mix.pytorch*pytorch + mix.breadth*min(1, n/sat) + mix.maturity*maturity, n = frameworks
    (training) or serving engines (serving) listed in the catalog."""
    c = _c()
    mix = c["ecosystem_mix"]
    eco = device.ecosystem
    n = len(eco.training_frameworks if training else eco.serving_engines)
    breadth = min(1.0, n / float(c["frameworks_saturation"]))
    return mix["pytorch"] * pytorch_level(device) + mix["breadth"] * breadth + mix["maturity"] * maturity_level(device)


def debugging_score(device: Any) -> float:
    mix = _c()["debugging_mix"]
    return mix["pytorch"] * pytorch_level(device) + mix["maturity"] * maturity_level(device)


def portable_share(device: Any) -> float:
    """Share of the listed frameworks and engines that are upstream, vendor-neutral projects."""
    names = list(device.ecosystem.training_frameworks) + list(device.ecosystem.serving_engines)
    if not names:
        return 0.0
    portable = {p.casefold() for p in _c()["portable_projects"]}
    return sum(1 for n in names if n.casefold() in portable) / len(names)


def lock_in_score(device: Any) -> float:
    """Higher is less locked in: mix.pytorch*pytorch + mix.portable*portable share."""
    mix = _c()["lock_in_mix"]
    return mix["pytorch"] * pytorch_level(device) + mix["portable"] * portable_share(device)


def trust_score(grade: str) -> float:
    return float(_c()["trust_score"].get(grade, 0.0))


def efficiency_source_kind(source: str) -> str:
    """'calibration', 'device', 'family' or 'defaults' from an efficiency ``.source`` string."""
    s = source.casefold()
    if "calib" in s or "measured" in s or "profile" in s:
        return "calibration"
    if s.startswith("device"):
        return "device"
    if s.startswith("family"):
        return "family"
    return "defaults"


def technical_score(min_trust: str, efficiency_source: str) -> float:
    """mix.trust*trust(worst grade of the figures used) + mix.efficiency*source confidence."""
    c = _c()
    mix = c["technical_mix"]
    eff = float(c["efficiency_source_score"][efficiency_source_kind(efficiency_source)])
    return mix["trust"] * trust_score(min_trust) + mix["efficiency"] * eff


#: z-score of the 90th percentile of a normal distribution: a P10..P90 band spans 2 x 1.2816 sigma.
Z_P90: Final = 1.2815515655446004


def band_sigma(low_fraction: float, high_fraction: float) -> float:
    """Log-normal sigma of a P10..P90 band [p(1 - low), p(1 + high)] around a prediction p:
    (ln(1 + high) - ln(1 - low)) / (2 z90)."""
    return (math.log1p(high_fraction) - math.log1p(-min(low_fraction, 0.95))) / (2.0 * Z_P90)


def efficiency_sigma(min_trust: str, efficiency_source: str, band: tuple[float, float] | None = None) -> float:
    """Log-normal sigma of the efficiency multiplier.

    The floor by where the efficiency comes from (data/criteria.yaml ``uncertainty``), widened by the
    worst trust grade of the device's figures. ``band``: the hardware family's measured validation
    band (``xpuplan.validate.validation_band``, P10..P90 of measured/predicted on the public rows,
    already widened for families without enough rows); when given and the efficiency is not the
    user's own calibration, the sigma is at least that band's (+ the trust widening), so the
    uncertainty of a recommendation is the one the planner has shown on published runs."""
    u = criteria_data().uncertainty
    kind = efficiency_source_kind(efficiency_source)
    widening = float(u["trust_widening"].get(min_trust, 0.1))
    sigma = float(u["efficiency_sigma"][kind]) + widening
    if band is not None and kind != "calibration":
        sigma = max(sigma, band_sigma(*band) + widening)
    return sigma


def part_efficiency_sigma(device: Any, role: str, efficiency_source: str, regime: Any = None) -> float:
    """:func:`efficiency_sigma` of one part of an option: ``device``'s family band for training
    (role ``train``) or serving (any other role), widened where the part's ``regime``
    (``validate.band.Regime``) lies outside the public rows'."""
    from xpuplan.validate.band import validation_band

    band = validation_band(device, "train" if role == "train" else "infer", regime)
    return efficiency_sigma(device.min_trust(), efficiency_source, band)


# -- availability ------------------------------------------------------------------------------
@dataclass(frozen=True)
class AvailabilityRule:
    id: str
    field: str
    pattern: re.Pattern[str]
    unavailable_in: tuple[str, ...]
    only_in: tuple[str, ...]
    supply_risk: float
    risk_in: tuple[str, ...]
    note: str


@cache
def availability_rules() -> tuple[AvailabilityRule, ...]:
    data, _ = parse_text(read_text(AVAILABILITY_FILE), str(AVAILABILITY_FILE))
    return tuple(
        AvailabilityRule(r["id"], r["field"], re.compile(r["pattern"], re.IGNORECASE),
                         tuple(r.get("unavailable_in", ())), tuple(r.get("only_in", ())),
                         float(r.get("supply_risk", 0.0)), tuple(r.get("risk_in", ())), r["note"])
        for r in data["rules"]
    )


def _field_text(device: Any, field: str) -> str:
    return {"export_control": device.export_control, "regions": device.regions}.get(field) or ""


def matching_rules(device: Any) -> list[AvailabilityRule]:
    return [r for r in availability_rules() if r.pattern.search(_field_text(device, r.field))]


def unavailable_reason(device: Any, region: str) -> str | None:
    """Why ``device`` cannot be deployed in ``region`` (None: nothing in the catalog says so).

    Region ``any`` skips these checks: the user states they can deploy anywhere (e.g. they hold
    the export licences); supply risks scoped to particular regions are then not applied either.
    """
    if region == ANY_REGION:
        return None
    for r in matching_rules(device):
        if region in r.unavailable_in:
            return f"{r.note} [{r.id}]"
        if r.only_in and region not in r.only_in:
            return f"{r.note} [{r.id}]"
    return None


def supply_risk(device: Any, region: str) -> tuple[float, list[str]]:
    """Sum of the matching rules' supply risks for ``region`` (capped at 1) and their ids."""
    risk = 0.0
    ids = []
    for r in matching_rules(device):
        if r.supply_risk and (not r.risk_in or region in r.risk_in):
            risk += r.supply_risk
            ids.append(r.id)
    return min(1.0, risk), ids
