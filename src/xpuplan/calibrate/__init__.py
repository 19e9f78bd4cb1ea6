"""Calibration: fitting efficiency parameters to measurements (:mod:`~xpuplan.calibrate.fit`,
numpy only) and laying stored profiles over the assumptions' defaults
(:mod:`~xpuplan.calibrate.profile`). Torch measurement stays in ``xpuplan.bench``."""

from xpuplan.calibrate.profile import (
    ENV_USE_CALIBRATION,
    assumptions_with_profiles,
    calibration_enabled,
    profile_from_values,
    resolve_efficiency,
    stored_profile,
)

__all__ = [
    "ENV_USE_CALIBRATION",
    "assumptions_with_profiles",
    "calibration_enabled",
    "profile_from_values",
    "resolve_efficiency",
    "stored_profile",
]
