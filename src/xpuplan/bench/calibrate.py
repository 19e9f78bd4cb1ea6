"""Compatibility module: the calibration fit moved to :mod:`xpuplan.calibrate.fit` (numpy only).

``xpuplan.bench`` keeps torch measurement and third-party log imports; the names below are
re-exported so older imports keep working.
"""

from __future__ import annotations

from xpuplan.calibrate.fit import (
    BENCH_KINDS,
    COLLECTIVE_KINDS,
    FITTED_COLLECTIVES,
    FRACTION_BOUNDS,
    GRID_POINTS,
    HALF_DIM_BOUNDS,
    LARGE_MESSAGE_BYTES,
    LATENCY_BOUNDS,
    ZOOM_ROUNDS,
    CalibrationFit,
    CalibrationResult,
    ParamFit,
    Point,
    bus_factor,
    calibrate_from_store,
    collective_time,
    collective_time_multinode,
    fit_efficiency,
    grid_minimise,
    point_from_measurement,
    roofline_time,
    select_runs,
)

__all__ = [
    "BENCH_KINDS",
    "COLLECTIVE_KINDS",
    "FITTED_COLLECTIVES",
    "FRACTION_BOUNDS",
    "GRID_POINTS",
    "HALF_DIM_BOUNDS",
    "LARGE_MESSAGE_BYTES",
    "LATENCY_BOUNDS",
    "ZOOM_ROUNDS",
    "CalibrationFit",
    "CalibrationResult",
    "ParamFit",
    "Point",
    "bus_factor",
    "calibrate_from_store",
    "collective_time",
    "collective_time_multinode",
    "fit_efficiency",
    "grid_minimise",
    "point_from_measurement",
    "roofline_time",
    "select_runs",
]
