"""Best published MFU per hardware family at scale (``catalog/data/published_mfu.yaml``): the
training planner's plausibility reference. A plan predicted above its family's reference is flagged
in the estimate's notes with the reference's source, never clipped (``train.estimate``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from xpuplan.catalog.device import Device
from xpuplan.catalog.efficiency import FamilyRule
from xpuplan.datafile import load_file

DATA_FILE: Final = Path(__file__).parent / "data" / "published_mfu.yaml"


class PublishedMfu(BaseModel):
    """The best published MFU of one hardware family at scale, with the run and its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = ""
    vendor: str | list[str] | None = None
    kind: str | None = None
    architecture: str | list[str] | None = None
    mfu: float = Field(gt=0, le=1, description="model FLOPs / (devices x dense peak x seconds)")
    from_devices: int = Field(ge=1, description="smallest device count the reference applies to")
    what: str
    source: str
    note: str = ""

    def matches(self, device: Device) -> bool:
        rule = FamilyRule(vendor=self.vendor, kind=self.kind, architecture=self.architecture)
        return rule.matches(device.vendor, device.kind, device.architecture)


class PublishedMfuFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: Literal[1]
    references: dict[str, PublishedMfu] = Field(default_factory=dict)


@lru_cache(maxsize=4)
def load_published_mfu(path: str | Path = DATA_FILE) -> PublishedMfuFile:
    """The reference file (built-in by default), each entry carrying its id."""
    f = load_file(PublishedMfuFile, path)
    return f.model_copy(update={"references": {k: v.model_copy(update={"id": k}) for k, v in f.references.items()}})


def published_mfu_reference(device: Device, n_devices: int) -> PublishedMfu | None:
    """The family reference that applies to a plan on ``n_devices`` of ``device``, or None."""
    for ref in load_published_mfu().references.values():
        if ref.matches(device) and n_devices >= ref.from_devices:
            return ref
    return None


def plausibility_note(device: Device, n_devices: int, mfu: float) -> str | None:
    """A note when ``mfu`` exceeds the best published MFU of the device's family at this scale."""
    ref = published_mfu_reference(device, n_devices)
    if ref is None or mfu <= ref.mfu:
        return None
    return (f"plausibility: predicted MFU {mfu:.1%} is above the best published for {ref.id} at {ref.from_devices}+ "
            f"devices ({ref.mfu:.1%}: {ref.what}; {ref.source}). The prediction is kept: this plan combines choices "
            "no published run at this scale reports, or a cost term is missing; treat it as optimistic")
