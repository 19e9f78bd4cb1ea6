"""Moved to :mod:`xpuplan.jobs.overview` (the application layer); kept so ``xpuplan.overview`` and
``from xpuplan.overview import overview`` keep working."""

from xpuplan.jobs.overview import (
    DEFAULT_HARDWARE,
    DEFAULT_MODEL,
    MAX_REASONS,
    DeviceOverview,
    Overview,
    ServingSummary,
    TrainingSummary,
    overview,
)

__all__ = ["DEFAULT_HARDWARE", "DEFAULT_MODEL", "MAX_REASONS", "DeviceOverview", "Overview", "ServingSummary",
           "TrainingSummary", "overview"]
