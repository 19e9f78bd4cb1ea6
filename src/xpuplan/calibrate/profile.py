"""Calibration profiles: from the store's raw rows to the efficiencies an ``Assumptions`` carries.

The store returns what was saved (:func:`xpuplan.store.calibrations.latest_calibration_row`);
this module lays those fitted values over the device's efficiency under the given assumptions
(only fields ``Efficiency`` still has are taken, so a profile saved by an older xpuplan keeps
working when parameters are added) and hands the result to
:meth:`Assumptions.with_calibration <xpuplan.catalog.assumptions.Assumptions.with_calibration>`.

Jobs call :func:`assumptions_with_profiles` once before they run a planner; planners never look
a profile up themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any, Final

from xpuplan.catalog import Catalog, Device, load_catalog
from xpuplan.catalog.assumptions import Assumptions, default_assumptions
from xpuplan.catalog.efficiency import EFFICIENCY_FIELDS, Efficiency
from xpuplan.errors import UserInputError

#: Set to "0" to make the jobs layer ignore stored calibration profiles (read only by
#: :func:`calibration_enabled`, which front ends call; planners and tests never need it).
ENV_USE_CALIBRATION: Final = "XPUPLAN_USE_CALIBRATION"


def calibration_enabled(flag: bool | None = None) -> bool:
    """Whether a job should look up stored profiles: ``flag`` when given, else
    ``$XPUPLAN_USE_CALIBRATION`` (anything but "0" means yes). For entry points only."""
    if flag is not None:
        return flag
    return os.environ.get(ENV_USE_CALIBRATION, "1").strip() != "0"


def profile_from_values(device: Device, stored: Mapping[str, Any], source: str,
                        base: Assumptions | None = None) -> Efficiency:
    """Stored fitted ``values`` laid over ``device``'s efficiency under ``base`` (built-in when
    None, calibrations left out); ``source`` labels the result (``calibration:#<id> ...``)."""
    a = (base or default_assumptions()).without_calibration()
    known = {k: v for k, v in stored.items() if k in EFFICIENCY_FIELDS}
    try:
        return a.efficiency(device).merged(known, source)
    except ValueError as exc:  # a stored value outside today's ranges
        raise UserInputError(f"stored calibration for {device.id} is invalid: {exc}",
                             field=f"calibration.{device.id}") from None


def stored_profile(device: Device | str, db_url: str | None = None, base: Assumptions | None = None) -> Efficiency | None:
    """The newest stored profile for ``device`` (a Device, or a catalog id or alias) laid over
    ``base`` (built-in when None), or None (no store, no profile, unreadable store)."""
    if not isinstance(device, Device):
        device = load_catalog().get(device)
    try:
        from xpuplan.store.calibrations import latest_calibration_row, profile_source
    except ModuleNotFoundError:  # the store's dependencies are optional at run time
        return None
    row = latest_calibration_row(device.id, db_url=db_url)
    if row is None:
        return None
    source = profile_source(row.id, row.device_id, row.created_at, row.run_ids)
    return profile_from_values(device, row.efficiency, source, base)


def assumptions_with_profiles(base: Assumptions | None, device_ids: Iterable[str | Device], db_url: str | None = None,
                              *, catalog: Catalog | None = None) -> Assumptions:
    """``base`` (built-in when None) with the newest stored calibration profile of each device
    that has one (devices by id, alias or :class:`Device`); devices without a profile keep
    ``base``'s values. ``db_url``: the store (``--db``; default ``$XPUPLAN_DB_URL`` or the data dir)."""
    a = base or default_assumptions()
    cat = catalog
    profiles: dict[str, Efficiency] = {}
    seen: set[str] = set()
    for d in device_ids:
        key = d.id if isinstance(d, Device) else d  # devices hold dicts: dedupe by id, not by hash
        if key in seen:
            continue
        seen.add(key)
        if isinstance(d, Device):
            dev = d
        else:
            cat = cat or load_catalog()
            dev = cat.get(d)
        prof = stored_profile(dev, db_url, a)
        if prof is not None:
            profiles[dev.id] = prof
    return a.with_calibration(profiles) if profiles else a


def resolve_efficiency(device: Device, *, use_calibration: bool | None = None, db_url: str | None = None,
                       assumptions: Assumptions | None = None) -> Efficiency:
    """Efficiency a job would use for ``device``: its stored profile (when enabled and present)
    over ``assumptions`` (built-in when None). For front ends and scripts; planners take an
    ``Assumptions`` instead."""
    a = assumptions or default_assumptions()
    if calibration_enabled(use_calibration):
        a = assumptions_with_profiles(a, [device], db_url)
    return a.efficiency(device)
