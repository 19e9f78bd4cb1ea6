"""Which efficiency parameters a planner uses for a device: a stored calibration profile when one
exists (``xpuplan calibrate``), else the built-in defaults. Planners call :func:`resolve_efficiency`
and report ``Efficiency.source`` in their results so users see which one applied."""

from __future__ import annotations

import os

from xpuplan.catalog.device import Device
from xpuplan.perf.efficiency import Efficiency, efficiency_for

#: Set to "0" to ignore stored calibration profiles (tests and reproducible runs).
ENV_USE_CALIBRATION = "XPUPLAN_USE_CALIBRATION"


def stored_profile(device_id: str, db_url: str | None = None) -> Efficiency | None:
    """The latest stored calibration profile for ``device_id``, or None (no store, no profile)."""
    try:
        from xpuplan.store.calibrations import latest_profile  # the store is optional at run time
    except ModuleNotFoundError:
        return None
    return latest_profile(device_id, db_url=db_url)


def resolve_efficiency(device: Device, *, use_calibration: bool | None = None, db_url: str | None = None) -> Efficiency:
    """Efficiency for ``device``: stored profile (if enabled and present) else defaults."""
    if use_calibration is None:
        use_calibration = os.environ.get(ENV_USE_CALIBRATION, "1") != "0"
    profile = stored_profile(device.id, db_url) if use_calibration else None
    return efficiency_for(device, profile)
