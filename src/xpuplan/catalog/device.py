"""Runtime hardware objects: figures converted once to SI base units, with provenance."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xpuplan import units
from xpuplan.errors import UserInputError

#: Scale factor and SI unit for each key suffix used in the catalog files.
_SUFFIX_UNITS: tuple[tuple[str, float, str], ...] = (
    ("_gbit_per_s_per_device", units.GBIT, "B/s"),
    ("_gb_per_s_per_direction", units.GB_PER_S, "B/s"),
    ("_gb_per_s", units.GB_PER_S, "B/s"),
    ("_usd_per_hour", 1.0, "USD/h"),
    ("_usd", 1.0, "USD"),
    ("_gib", units.GiB, "B"),
    ("_gb", units.GB, "B"),
    ("_mb", units.MB, "B"),
    ("_w", 1.0, "W"),
)


#: File keys that print one runtime figure in another unit: the figure is held (in SI bytes) under
#: the canonical path, and ``Figure.printed_unit_key`` keeps the key the file or user used.
CANONICAL_PATH: dict[str, str] = {"memory.capacity_gib": "memory.capacity_gb",
                                   "host_memory.capacity_gib": "host_memory.capacity_gb"}


def canonical_path(path: str) -> str:
    """The runtime figure path for a file or override key (``memory.capacity_gib`` -> ``memory.capacity_gb``)."""
    return CANONICAL_PATH.get(path, path)


def unit_for_key(path: str) -> tuple[float, str]:
    """(scale to SI, SI unit) for a figure's field path such as ``memory.capacity_gb``."""
    if path.startswith(("dense_tflops.", "sparse_tflops.")):
        prec = path.split(".", 1)[1]
        return units.TFLOPS, ("OP/s" if prec.startswith("int") else "FLOP/s")
    leaf = path.rsplit(".", 1)[-1]
    for suffix, scale, unit in _SUFFIX_UNITS:
        if leaf.endswith(suffix):
            return scale, unit
    raise AssertionError(f"catalog key without a unit suffix: {path}")


@dataclass(frozen=True)
class Source:
    key: str
    title: str
    date: str
    kind: str
    url: str | None = None
    publisher: str | None = None

    def cite(self) -> str:
        parts = [self.title]
        if self.publisher:
            parts.append(self.publisher)
        parts.append(self.date)
        if self.url:
            parts.append(self.url)
        return ", ".join(parts)


@dataclass(frozen=True)
class Figure:
    """A sourced number in SI units (``value``, ``low``, ``high``) plus the value as printed."""

    path: str
    value: float
    low: float
    high: float
    unit: str
    printed_value: float
    printed_unit_key: str
    source: Source
    trust: str
    note: str | None = None
    date: str | None = None

    @property
    def is_range(self) -> bool:
        return self.low != self.high

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "unit": self.unit,
            "printed_value": self.printed_value,
            "printed_key": self.printed_unit_key,
            "source": self.source.cite(),
            "source_key": self.source.key,
            "source_kind": self.source.kind,
            "trust": self.trust,
            "note": self.note,
            "date": self.date,
        }


@dataclass(frozen=True)
class Ecosystem:
    software_stack: str
    pytorch: str
    serving_engines: tuple[str, ...]
    training_frameworks: tuple[str, ...]
    maturity: int
    pytorch_note: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Device:
    """One accelerator (or CPU) with its figures in SI units.

    Accessors return SI floats (FLOP/s, bytes, bytes/s, W); ``figures`` keeps every figure with
    its source and trust for display and audit.
    """

    id: str
    name: str
    vendor: str
    kind: str
    origin_country: str
    file: str
    figures: dict[str, Figure]
    ecosystem: Ecosystem
    aliases: tuple[str, ...] = ()
    architecture: str | None = None
    launch_year: int | None = None
    form_factor: str | None = None
    memory_type: str | None = None
    scale_up_name: str | None = None
    scale_up_domain: int = 1
    #: Domain of an optional add-on link (NVLink bridge pairs: 2); None when the scale-up link, if
    #: any, is always there. An optional link's bandwidth is :attr:`optional_scale_up_bandwidth`.
    scale_up_optional_domain: int | None = None
    scale_up_topology: str | None = None
    #: Torus scale-up (TPU ICI): dimensions, and the shortest slice axis with wraparound links
    #: (``perf.collectives.torus_group_share``); None for switched and mesh domains.
    scale_up_torus_dims: int | None = None
    scale_up_torus_wrap_axis: int | None = None
    pcie_generation: int | None = None
    scale_out_name: str | None = None
    export_control: str | None = None
    regions: str | None = None
    availability_note: str | None = None
    notes: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    # -- figure access ------------------------------------------------------------------
    def figure(self, path: str) -> Figure | None:
        """The figure at ``path``, a runtime path or the file key that prints it in another unit (``*_gib``)."""
        return self.figures.get(canonical_path(path))

    def missing_figure(self, path: str, what: str, *, also: str = "", field: str | None = None) -> UserInputError:
        """The one error a planner raises when ``path`` is missing: names the figure and how to
        supply it (``--hw-figure``); ``also`` adds an alternative that works with the figures present."""
        unit = "TFLOPS" if path.startswith("dense_tflops.") else path.rsplit(".", 1)[-1].split("_", 1)[-1].upper()
        msg = (f"{self.id} has no {what} in the catalog (figure {path}); supply it with "
               f"--hw-figure {self.id}:{path}=<{unit}>")
        return UserInputError(msg + (f", {also}" if also else ""), field=field or path)

    def _require(self, path: str, what: str) -> Figure:
        fig = self.figures.get(path)
        if fig is None:
            raise self.missing_figure(path, what)
        return fig

    @property
    def dense_precisions(self) -> tuple[str, ...]:
        return tuple(p.split(".", 1)[1] for p in self.figures if p.startswith("dense_tflops."))

    def supports(self, dtype: str) -> bool:
        """True when the catalog lists a dense peak for ``dtype``."""
        return f"dense_tflops.{dtype}" in self.figures

    def compute_dtype(self, dtype: str) -> str:
        """The precision whose peak ``dtype`` runs at: ``dtype`` itself, or for bf16/fp16 the other
        16-bit format when only that one is listed (an fp16-only chip such as the Ascend 310P runs
        bf16 work as fp16; planners say so, see :meth:`sixteen_bit_note`)."""
        if dtype in ("bf16", "fp16") and not self.supports(dtype):
            other = "fp16" if dtype == "bf16" else "bf16"
            if self.supports(other):
                return other
        return dtype

    def sixteen_bit_note(self, dtype: str) -> str | None:
        """A note when ``dtype`` (bf16/fp16) runs at the other 16-bit format's peak, else None."""
        used = self.compute_dtype(dtype)
        if used == dtype:
            return None
        return (f"{self.id} lists no {dtype} peak ({'fp16-only' if used == 'fp16' else 'bf16-only'} in the catalog): "
                f"{dtype} work is planned at its {used} rate (dense_tflops.{used})")

    def peak_flops(self, dtype: str) -> float:
        """Dense peak FLOP/s (OP/s for integers) for ``dtype``.

        bf16 and fp16 stand in for each other when only one is listed (:meth:`compute_dtype`).
        Sparse figures are never used. Missing: one error naming the figure and ``--hw-figure``.
        """
        fig = self.figures.get(f"dense_tflops.{self.compute_dtype(dtype)}")
        if fig is None:
            have = ", ".join(self.dense_precisions) or "none"
            what = "16-bit (bf16/fp16) compute peak" if dtype in ("bf16", "fp16") else f"dense {dtype} peak"
            raise self.missing_figure(f"dense_tflops.{dtype}", f"{what} (it lists: {have})", field="precision")
        return fig.value

    def peak_flops_range(self, dtype: str) -> tuple[float, float]:
        fig = self.figures.get(f"dense_tflops.{self.compute_dtype(dtype)}")
        if fig is None:
            v = self.peak_flops(dtype)
            return v, v
        return fig.low, fig.high

    @property
    def memory_bytes(self) -> float:
        """Device memory capacity in bytes (decimal, as the vendor prints)."""
        return self._require("memory.capacity_gb", "memory capacity").value

    @property
    def memory_bandwidth(self) -> float:
        """Peak device-memory bandwidth in bytes/s."""
        return self._require("memory.bandwidth_gb_per_s", "memory bandwidth").value

    @property
    def scale_up_bandwidth(self) -> float | None:
        """Scale-up link bandwidth per direction per device in bytes/s (None: PCIe only, or the
        link is an optional add-on such as an NVLink bridge)."""
        fig = self.figures.get("scale_up.bandwidth_gb_per_s_per_direction")
        return fig.value if fig and self.scale_up_optional_domain is None else None

    @property
    def optional_scale_up_bandwidth(self) -> float | None:
        """Bandwidth per direction of an optional add-on link (NVLink bridge), bytes/s; else None."""
        fig = self.figures.get("scale_up.bandwidth_gb_per_s_per_direction")
        return fig.value if fig and self.scale_up_optional_domain is not None else None

    @property
    def pcie_bandwidth(self) -> float | None:
        fig = self.figures.get("pcie.bandwidth_gb_per_s_per_direction")
        return fig.value if fig else None

    @property
    def host_link_bandwidth(self) -> float | None:
        """Bandwidth per direction between the device and its host CPU's memory, bytes/s: the catalog's
        non-PCIe host link (NVLink-C2C) where it has one, else its PCIe figure; None when neither is known."""
        fig = self.figures.get("host_link.bandwidth_gb_per_s_per_direction")
        return fig.value if fig else self.pcie_bandwidth

    @property
    def host_memory_bytes(self) -> float | None:
        """Host CPU memory per device in the catalog's reference system, bytes (file key ``host_memory.capacity_gib``,
        held as ``host_memory.capacity_gb`` like device memory: the system's DRAM over its devices); None when the
        catalog has no figure (then nothing checks it)."""
        fig = self.figures.get("host_memory.capacity_gb")
        return fig.value if fig else None

    @property
    def scale_out_bandwidth(self) -> float | None:
        """Scale-out NIC bandwidth per device in bytes/s."""
        fig = self.figures.get("scale_out.nic_gbit_per_s_per_device")
        return fig.value if fig else None

    @property
    def tdp_w(self) -> float | None:
        fig = self.figures.get("power.tdp_w")
        return fig.value if fig else None

    @property
    def price_usd(self) -> float | None:
        fig = self.figures.get("price.list_usd")
        return fig.value if fig else None

    @property
    def cloud_usd_per_hour(self) -> float | None:
        fig = self.figures.get("price.cloud_usd_per_hour")
        return fig.value if fig else None

    @property
    def ridge_point(self) -> float:
        """bf16 roofline ridge point in FLOP/byte (peak FLOP/s over peak bytes/s)."""
        return self.peak_flops("bf16") / self.memory_bandwidth

    def min_trust(self) -> str:
        """Worst trust grade among the technical figures (prices, always soft, excluded)."""
        return max((f.trust for p, f in self.figures.items() if not p.startswith("price.")), default="D")

    def summary(self) -> dict[str, Any]:
        """Compact JSON-able view used by ``hw list --json``."""

        def v(path: str, scale: float) -> float | None:
            f = self.figures.get(path)
            return None if f is None else f.value / scale

        return {
            "id": self.id,
            "name": self.name,
            "vendor": self.vendor,
            "kind": self.kind,
            "origin_country": self.origin_country,
            "launch_year": self.launch_year,
            "aliases": list(self.aliases),
            # bf16 only when the catalog lists bf16: an fp16-only chip (Ascend 310P, MLU370-X4) has None
            # here and its 16-bit figure under dense_fp16_flops_per_s / dense_16bit_flops_per_s
            "dense_bf16_flops_per_s": v("dense_tflops.bf16", 1.0),
            "dense_fp16_flops_per_s": v("dense_tflops.fp16", 1.0),
            "dense_16bit_flops_per_s": v(f"dense_tflops.{self.compute_dtype('bf16')}", 1.0),
            "dense_16bit_format": self.compute_dtype("bf16") if self.supports(self.compute_dtype("bf16")) else None,
            "dense_fp8_flops_per_s": v("dense_tflops.fp8", 1.0),
            "dense_int8_ops_per_s": v("dense_tflops.int8", 1.0),
            "memory_bytes": v("memory.capacity_gb", 1.0),
            "memory_bandwidth_bytes_per_s": v("memory.bandwidth_gb_per_s", 1.0),
            "scale_up": self.scale_up_name,
            "scale_up_bytes_per_s_per_direction": v("scale_up.bandwidth_gb_per_s_per_direction", 1.0),
            "scale_up_domain": self.scale_up_domain,
            "tdp_w": v("power.tdp_w", 1.0),
            "software_stack": self.ecosystem.software_stack,
            "min_trust": self.min_trust(),
        }

    def to_dict(self) -> dict[str, Any]:
        d = self.summary()
        d.update(
            {
                "architecture": self.architecture,
                "form_factor": self.form_factor,
                "memory_type": self.memory_type,
                "scale_up_topology": self.scale_up_topology,
                "scale_up_torus_dims": self.scale_up_torus_dims,
                "scale_out": self.scale_out_name,
                "ecosystem": {
                    "software_stack": self.ecosystem.software_stack,
                    "pytorch": self.ecosystem.pytorch,
                    "pytorch_note": self.ecosystem.pytorch_note,
                    "serving_engines": list(self.ecosystem.serving_engines),
                    "training_frameworks": list(self.ecosystem.training_frameworks),
                    "maturity": self.ecosystem.maturity,
                    "note": self.ecosystem.note,
                },
                "availability": {
                    "export_control": self.export_control,
                    "regions": self.regions,
                    "note": self.availability_note,
                },
                "notes": self.notes,
                "figures": {k: f.to_dict() for k, f in self.figures.items()},
                "file": self.file,
            }
        )
        return d
