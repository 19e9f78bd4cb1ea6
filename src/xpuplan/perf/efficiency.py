"""Compatibility names for the efficiency parameters (kept so older imports keep working).

The parameters are defined in :mod:`xpuplan.catalog.efficiency` and resolved per device by an
:class:`~xpuplan.catalog.assumptions.Assumptions` bundle (``catalog/data/efficiency.yaml``:
defaults <- family <- device <- calibration profile <- user override). New code takes an
``Assumptions`` argument and calls ``assumptions.efficiency(device)``.
"""

from __future__ import annotations

from xpuplan.catalog.assumptions import Assumptions, default_assumptions
from xpuplan.catalog.device import Device
from xpuplan.catalog.efficiency import Efficiency, EfficiencyOverrides, FamilyRule

__all__ = ["Efficiency", "EfficiencyOverrides", "FamilyRule", "default_efficiency", "efficiency_for"]


def default_efficiency(assumptions: Assumptions | None = None) -> Efficiency:
    """The ``defaults`` layer of ``assumptions`` (built-in when None)."""
    return (assumptions or default_assumptions()).default_efficiency


def efficiency_for(device: Device, profile: Efficiency | None = None, *, assumptions: Assumptions | None = None) -> Efficiency:
    """Efficiency parameters for ``device``: a calibration ``profile`` wins; otherwise what
    ``assumptions`` (built-in when None) resolve for the device."""
    if profile is not None:
        return profile
    return (assumptions or default_assumptions()).efficiency(device)
