"""Compatibility module: profile look-up moved to :mod:`xpuplan.calibrate.profile`.

Planners no longer call this; jobs resolve calibration into an explicit
:class:`~xpuplan.catalog.assumptions.Assumptions` with
:func:`xpuplan.calibrate.assumptions_with_profiles` and pass it on.
"""

from __future__ import annotations

from xpuplan.calibrate.profile import (
    ENV_USE_CALIBRATION,
    calibration_enabled,
    resolve_efficiency,
    stored_profile,
)

__all__ = ["ENV_USE_CALIBRATION", "calibration_enabled", "resolve_efficiency", "stored_profile"]
