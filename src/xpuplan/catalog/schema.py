"""Schema of the hardware catalog files (``data/hardware/*.yaml``), validated at load.

Units are in the key names (``capacity_gb``, ``bandwidth_gb_per_s``, ``tdp_w``); every numeric
figure is a :class:`FigureIn` record with its source and trust grade. Unknown keys are errors so a
typo cannot silently drop a figure.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Trust = Literal["A", "B", "C", "D"]
"""A: vendor datasheet/primary source with the figure; B: primary with some inference;
C: credible third party or partly unknown; D: second-hand, rumour, or the seed guide."""

Precision = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4"]
DeviceKind = Literal["GPU", "NPU", "TPU", "CPU"]
SourceKind = Literal["vendor", "paper", "third-party", "press", "guide", "estimate"]

_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
_ID = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FigureIn(_Strict):
    """One sourced number. ``min``/``max`` give the range where sources disagree."""

    value: float = Field(ge=0)
    min: float | None = Field(default=None, ge=0)
    max: float | None = Field(default=None, ge=0)
    source: str
    trust: Trust
    date: str | None = None
    note: str | None = None

    @field_validator("date", mode="before")
    @classmethod
    def _date(cls, v: object) -> object:
        if v is None:
            return v
        v = str(v)
        if not _DATE.match(v):
            raise ValueError("date must be YYYY, YYYY-MM or YYYY-MM-DD")
        return v

    @model_validator(mode="after")
    def _range(self) -> FigureIn:
        lo = self.min if self.min is not None else self.value
        hi = self.max if self.max is not None else self.value
        if not lo <= self.value <= hi:
            raise ValueError(f"range must satisfy min <= value <= max (min={self.min}, value={self.value}, max={self.max})")
        return self


class SourceIn(_Strict):
    title: str
    url: str | None = None
    date: str
    publisher: str | None = None
    kind: SourceKind

    @field_validator("date", mode="before")
    @classmethod
    def _date(cls, v: object) -> str:
        v = str(v)
        if not _DATE.match(v):
            raise ValueError("date must be YYYY, YYYY-MM or YYYY-MM-DD")
        return v


class MemoryIn(_Strict):
    """Capacity is printed in one unit, named by its key: ``capacity_gib`` (binary, 2**30 B) for
    memory built from power-of-two DRAM dies (HBM stacks, GDDR chips) whose size the driver reports
    in MiB; ``capacity_gb`` (decimal, 1e9 B) for a figure known only as printed in decimal GB. A device
    gives one of the two, never both; at load both become the one figure ``memory.capacity_gb``
    (value in bytes) and the printed key records which unit the file used."""

    capacity_gb: FigureIn | None = None
    capacity_gib: FigureIn | None = None
    type: str | None = None
    bandwidth_gb_per_s: FigureIn | None = None

    @model_validator(mode="after")
    def _one_capacity_unit(self) -> MemoryIn:
        if self.capacity_gb is not None and self.capacity_gib is not None:
            raise ValueError("give memory capacity once: capacity_gib (binary, 2**30 B) or capacity_gb "
                             "(decimal, 1e9 B), not both")
        return self


class OnChipIn(_Strict):
    l2_cache_mb: FigureIn | None = None
    sram_mb: FigureIn | None = None


class ScaleUpIn(_Strict):
    name: str
    bandwidth_gb_per_s_per_direction: FigureIn | None = None
    domain_size: int = Field(default=1, ge=1)
    topology: str | None = None
    #: A torus (TPU ICI): its number of dimensions (2 for v5e/v6e, 3 for v4/v5p; the chip has two links
    #: per dimension, and ``bandwidth_gb_per_s_per_direction`` is the sum over all of them) and the
    #: shortest axis that has wraparound links (a slice's axis shorter than it is an open line).
    torus_dims: int | None = Field(default=None, ge=1, le=4)
    torus_wrap_axis: int | None = Field(default=None, ge=2)
    #: An add-on link not in every server (A100/H100 PCIe NVLink bridges joining card pairs): kept in
    #: the catalog with its source, used only when a run asks for it (``scale_up_kind`` in a
    #: scenario's ``cluster``); by default the device talks over PCIe.
    optional: bool = False


class PcieIn(_Strict):
    generation: int | None = Field(default=None, ge=1, le=7)
    bandwidth_gb_per_s_per_direction: FigureIn | None = None


class HostLinkIn(_Strict):
    """A host link that is not PCIe (NVLink-C2C to a Grace CPU): what activation offload copies run on."""

    name: str | None = None
    bandwidth_gb_per_s_per_direction: FigureIn | None = None


class HostMemoryIn(_Strict):
    """The host CPU memory of the vendor's reference system, per device (its DRAM divided by its accelerators):
    what activations offloaded to the host (recompute offload / layer_offload, fine-grained offloading) must fit in.
    ``capacity_gib`` is binary (2**30 B), as DIMMs and LPDDR packages are sized; ``system`` names the system it is
    read from (DGX H100: 2 TB over 8 GPUs)."""

    system: str | None = None
    capacity_gib: FigureIn | None = None


class ScaleOutIn(_Strict):
    name: str | None = None
    nic_gbit_per_s_per_device: FigureIn | None = None


class PowerIn(_Strict):
    tdp_w: FigureIn | None = None


class PriceIn(_Strict):
    list_usd: FigureIn | None = None
    cloud_usd_per_hour: FigureIn | None = None


class EcosystemIn(_Strict):
    software_stack: str
    pytorch: Literal["native", "plugin", "xla", "limited", "none"]
    pytorch_note: str | None = None
    serving_engines: list[str] = Field(default_factory=list)
    training_frameworks: list[str] = Field(default_factory=list)
    maturity: int = Field(ge=1, le=5)
    note: str | None = None


class AvailabilityIn(_Strict):
    export_control: str | None = None
    regions: str | None = None
    note: str | None = None


class DeviceIn(_Strict):
    id: str
    name: str
    aliases: list[str] = Field(default_factory=list)
    kind: DeviceKind
    architecture: str | None = None
    launch_year: int | None = Field(default=None, ge=1990, le=2035)
    form_factor: str | None = None
    origin_country: str = Field(min_length=2, max_length=2)
    dense_tflops: dict[Precision, FigureIn] = Field(default_factory=dict)
    sparse_tflops: dict[Precision, FigureIn] = Field(default_factory=dict)
    memory: MemoryIn = Field(default_factory=MemoryIn)
    on_chip: OnChipIn | None = None
    scale_up: ScaleUpIn | None = None
    pcie: PcieIn | None = None
    host_link: HostLinkIn | None = None
    host_memory: HostMemoryIn | None = None
    scale_out: ScaleOutIn | None = None
    power: PowerIn = Field(default_factory=PowerIn)
    price: PriceIn | None = None
    ecosystem: EcosystemIn
    availability: AvailabilityIn | None = None
    notes: str | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, v: str) -> str:
        if not _ID.match(v):
            raise ValueError("id must be lowercase letters, digits, '.' and '-'")
        return v


class HardwareFileIn(_Strict):
    schema_version: Literal[1]
    vendor: str
    sources: dict[str, SourceIn]
    devices: list[DeviceIn]
