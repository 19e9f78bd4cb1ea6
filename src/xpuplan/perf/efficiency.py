"""Achievable-efficiency parameters: the named assumptions that turn peaks into times.

Peaks come from the catalog; what software really reaches is a fraction of them. These few
physical parameters are the only knobs the performance models have. Defaults live in
``perf/data/efficiency.yaml`` (per hardware family, with per-device overrides), each explained
there; ``xpuplan calibrate`` fits them to a device's measurements and a calibration profile then
takes precedence. Resolution order: ``defaults`` <- family (vendor/kind) <- device id <- profile.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from xpuplan.catalog.device import Device
from xpuplan.datafile import load_model, parse_text, read_text

DATA_FILE = Path(__file__).parent / "data" / "efficiency.yaml"


class Efficiency(BaseModel):
    """Achievable fractions of peak and fixed overheads for one device (dimensionless / seconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    gemm_peak_fraction: float = Field(gt=0, le=1, description="fraction of dense peak a large GEMM reaches")
    gemm_half_dim: float = Field(ge=0, description="smallest GEMM dimension at which efficiency halves")
    low_precision_factor: float = Field(
        gt=0, le=1, description="fp8/int8/fp4 GEMMs reach this fraction of the bf16 fraction (of their own peak)"
    )
    attention_peak_fraction: float = Field(gt=0, le=1, description="fused attention kernels vs dense peak")
    memory_bw_fraction: float = Field(gt=0, le=1, description="achievable fraction of peak memory bandwidth")
    kernel_overhead_s: float = Field(ge=0, description="fixed launch/dispatch cost per kernel, seconds")
    # Links: None means the link type's default (perf.collectives.LINK_TYPES, via perf.links);
    # a calibration profile sets them from this device's own collective measurements.
    scale_up_bw_fraction: float | None = Field(
        default=None, gt=0, le=1, description="collective bus bandwidth vs scale-up link peak (None: link-type default)"
    )
    scale_out_bw_fraction: float | None = Field(
        default=None, gt=0, le=1, description="collective bus bandwidth vs NIC peak (None: link-type default)"
    )
    scale_up_latency_s: float | None = Field(
        default=None, ge=0, description="per-hop latency (alpha) on the scale-up link (None: link-type default)"
    )
    scale_out_latency_s: float | None = Field(
        default=None, ge=0, description="per-hop latency (alpha) on the scale-out network (None: link-type default)"
    )
    source: str = Field(default="defaults", description="where these values came from")

    def merged(self, overrides: dict[str, Any], source: str) -> Efficiency:
        data = self.model_dump()
        data.update(overrides)
        data["source"] = source
        return Efficiency.model_validate(data)


class _Overrides(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    gemm_peak_fraction: float | None = Field(default=None, gt=0, le=1)
    gemm_half_dim: float | None = Field(default=None, ge=0)
    low_precision_factor: float | None = Field(default=None, gt=0, le=1)
    attention_peak_fraction: float | None = Field(default=None, gt=0, le=1)
    memory_bw_fraction: float | None = Field(default=None, gt=0, le=1)
    kernel_overhead_s: float | None = Field(default=None, ge=0)
    scale_up_bw_fraction: float | None = Field(default=None, gt=0, le=1)
    scale_out_bw_fraction: float | None = Field(default=None, gt=0, le=1)
    scale_up_latency_s: float | None = Field(default=None, ge=0)
    scale_out_latency_s: float | None = Field(default=None, ge=0)
    note: str | None = None

    def values(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump(exclude={"note"}).items() if v is not None}


class _FamilyRule(_Overrides):
    """Overrides applied to every device of a vendor and/or kind."""

    vendor: str | None = None
    kind: str | None = None

    def values(self) -> dict[str, float]:
        return {k: v for k, v in self.model_dump(exclude={"note", "vendor", "kind"}).items() if v is not None}


class _EfficiencyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    schema_version: int
    defaults: Efficiency
    families: dict[str, _FamilyRule] = Field(default_factory=dict)
    devices: dict[str, _Overrides] = Field(default_factory=dict)


@lru_cache(maxsize=4)
def _load(path: str = str(DATA_FILE)) -> _EfficiencyFile:
    data, lines = parse_text(read_text(path), path)
    return load_model(_EfficiencyFile, data, path, lines)


def default_efficiency() -> Efficiency:
    return _load().defaults


def efficiency_for(device: Device, profile: Efficiency | None = None) -> Efficiency:
    """Efficiency parameters for ``device``: a calibration ``profile`` wins; otherwise the
    built-in defaults refined by the device's family and by a per-device entry."""
    if profile is not None:
        return profile
    f = _load()
    eff = f.defaults
    for name, rule in f.families.items():
        if (rule.vendor is None or rule.vendor.casefold() == device.vendor.casefold()) and (
            rule.kind is None or rule.kind.casefold() == device.kind.casefold()
        ):
            eff = eff.merged(rule.values(), f"family:{name}")
    if device.id in f.devices:
        eff = eff.merged(f.devices[device.id].values(), f"device:{device.id}")
    return eff
