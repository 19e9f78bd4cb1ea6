"""Hardware catalog: sourced figures for accelerators, loaded from ``data/hardware/*.yaml``."""

from xpuplan.catalog.device import Device, Ecosystem, Figure, Source
from xpuplan.catalog.loader import (
    Catalog,
    build_catalog,
    get_device,
    load_catalog,
    load_hardware_file,
)
from xpuplan.registry import normalise_alias

__all__ = [
    "Catalog",
    "Device",
    "Ecosystem",
    "Figure",
    "Source",
    "build_catalog",
    "get_device",
    "load_catalog",
    "load_hardware_file",
    "normalise_alias",
]
