"""Load, cross-check and index the hardware catalog."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel

from xpuplan.catalog.device import Device, Ecosystem, Figure, Source, canonical_path, unit_for_key
from xpuplan.catalog.schema import DeviceIn, FigureIn, HardwareFileIn
from xpuplan.datafile import line_for, load_model, parse_text, read_text
from xpuplan.errors import UserInputError
from xpuplan.registry import AliasIndex, data_files

DATA_DIR = Path(__file__).parent / "data" / "hardware"
#: Extra catalog directory or file(s) (os.pathsep-separated) layered over the built-in data.
ENV_EXTRA = "XPUPLAN_HARDWARE_PATH"
#: User figures laid over the catalog: ``;``-separated ``DEVICE:PATH=VALUE`` specs or YAML file paths
#: (see :mod:`xpuplan.catalog.overrides`); the jobs layer sets it from ``--hw-figure``.
ENV_FIGURES = "XPUPLAN_HW_FIGURES"
#: User figures of the current run only (same syntax as ``$XPUPLAN_HW_FIGURES``), laid after those:
#: set by :func:`scoped_figures` (``RunContext.applied``), local to the thread or task that set it,
#: so concurrent HTTP requests each see their own figures.
_SCOPED_FIGURES: ContextVar[str] = ContextVar("xpuplan_hw_figures", default="")


@contextmanager
def scoped_figures(text: str) -> Iterator[None]:
    """Within this block (this thread or task only), :func:`load_catalog` also lays ``text``'s
    figures (``;``-separated specs) over the catalog, after ``$XPUPLAN_HW_FIGURES``."""
    outer, text = _SCOPED_FIGURES.get(), text.strip()
    if not text or outer.endswith(text):  # already laid (a nested block of the same run)
        yield
        return
    token = _SCOPED_FIGURES.set(";".join(t for t in (outer, text) if t))
    try:
        yield
    finally:
        _SCOPED_FIGURES.reset(token)


def _iter_figures(obj: BaseModel, prefix: str) -> Iterator[tuple[str, FigureIn]]:
    for name in type(obj).model_fields:
        val = getattr(obj, name)
        path = f"{prefix}.{name}" if prefix else name
        if isinstance(val, FigureIn):
            yield path, val
        elif isinstance(val, BaseModel):
            yield from _iter_figures(val, path)
        elif isinstance(val, dict):
            for k, v in val.items():
                if isinstance(v, FigureIn):
                    yield f"{path}.{k}", v


def _device_from(d: DeviceIn, vendor: str, sources: dict[str, Source], file: str, idx: int, lines) -> Device:
    figures: dict[str, Figure] = {}
    for path, f in _iter_figures(d, ""):
        if f.source not in sources:
            loc = ("devices", idx, *path.split("."), "source")
            raise UserInputError(
                f"unknown source key {f.source!r} (not in this file's 'sources')",
                field=f"devices[{idx}].{path}.source",
                file=file,
                line=line_for(loc, lines),
            )
        scale, unit = unit_for_key(path)
        figures[canonical_path(path)] = Figure(
            path=canonical_path(path),
            value=f.value * scale,
            low=(f.min if f.min is not None else f.value) * scale,
            high=(f.max if f.max is not None else f.value) * scale,
            unit=unit,
            printed_value=f.value,
            printed_unit_key=path.rsplit(".", 1)[-1] if not path.startswith(("dense", "sparse")) else "tflops",
            source=sources[f.source],
            trust=f.trust,
            note=f.note,
            date=f.date,
        )
    for prec, sparse in d.sparse_tflops.items():
        dense = d.dense_tflops.get(prec)
        if dense is not None and dense.value == sparse.value:
            raise UserInputError(
                f"dense {prec} equals the sparse figure ({dense.value}); store the dense peak under dense_tflops",
                field=f"devices[{idx}].dense_tflops.{prec}",
                file=file,
                line=line_for(("devices", idx, "dense_tflops", prec), lines),
            )
    eco = d.ecosystem
    return Device(
        id=d.id,
        name=d.name,
        vendor=vendor,
        kind=d.kind,
        origin_country=d.origin_country.upper(),
        file=file,
        figures=figures,
        ecosystem=Ecosystem(
            software_stack=eco.software_stack,
            pytorch=eco.pytorch,
            serving_engines=tuple(eco.serving_engines),
            training_frameworks=tuple(eco.training_frameworks),
            maturity=eco.maturity,
            pytorch_note=eco.pytorch_note,
            note=eco.note,
        ),
        aliases=tuple(d.aliases),
        architecture=d.architecture,
        launch_year=d.launch_year,
        form_factor=d.form_factor,
        memory_type=d.memory.type,
        scale_up_name=d.scale_up.name if d.scale_up else None,
        scale_up_domain=d.scale_up.domain_size if d.scale_up and not d.scale_up.optional else 1,
        scale_up_optional_domain=d.scale_up.domain_size if d.scale_up and d.scale_up.optional else None,
        scale_up_topology=d.scale_up.topology if d.scale_up else None,
        scale_up_torus_dims=d.scale_up.torus_dims if d.scale_up else None,
        scale_up_torus_wrap_axis=d.scale_up.torus_wrap_axis if d.scale_up else None,
        pcie_generation=d.pcie.generation if d.pcie else None,
        scale_out_name=d.scale_out.name if d.scale_out else None,
        export_control=d.availability.export_control if d.availability else None,
        regions=d.availability.regions if d.availability else None,
        availability_note=d.availability.note if d.availability else None,
        notes=d.notes,
    )


def load_hardware_file(path: str | Path) -> list[Device]:
    """Parse and validate one catalog file; errors name file, line and field."""
    file = str(path)
    data, lines = parse_text(read_text(path), file)
    if data is None:
        raise UserInputError("file is empty", file=file)
    parsed = load_model(HardwareFileIn, data, file, lines)
    sources = {
        key: Source(key=key, title=s.title, date=s.date, kind=s.kind, url=s.url, publisher=s.publisher)
        for key, s in parsed.sources.items()
    }
    return [_device_from(d, parsed.vendor, sources, file, i, lines) for i, d in enumerate(parsed.devices)]


@dataclass(frozen=True)
class Catalog:
    """All devices, indexed by id and by normalised alias."""

    devices: dict[str, Device]
    index: AliasIndex

    def get(self, name: str) -> Device:
        """Device by id or alias (``"H100"``, ``"910B"``, ``"MLU590"``); unknown -> UnknownIdError."""
        if name in self.devices:
            return self.devices[name]
        return self.devices[self.index.resolve(name)]

    def resolve(self, name: str) -> str:
        return self.get(name).id

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def __iter__(self) -> Iterator[Device]:
        return iter(self.devices.values())

    def __len__(self) -> int:
        return len(self.devices)

    def filter(self, vendor: str | None = None, kind: str | None = None, origin: str | None = None) -> list[Device]:
        out = list(self.devices.values())
        if vendor:
            out = [d for d in out if d.vendor.casefold() == vendor.casefold()]
        if kind:
            out = [d for d in out if d.kind.casefold() == kind.casefold()]
        if origin:
            out = [d for d in out if d.origin_country.casefold() == origin.casefold()]
        return out

    @property
    def vendors(self) -> list[str]:
        return sorted({d.vendor for d in self.devices.values()})


def build_catalog(devices: Iterable[Device]) -> Catalog:
    devs = list(devices)
    index = AliasIndex.build("hardware", [(d.id, d.aliases, d.file) for d in devs])
    return Catalog(devices={d.id: d for d in devs}, index=index)


def catalog_files(extra: Iterable[str | Path] = ()) -> list[Path]:
    return data_files(DATA_DIR, ENV_EXTRA, extra)


def load_catalog(extra: Iterable[str | Path] = ()) -> Catalog:
    """The built-in catalog plus user files (``extra`` or ``$XPUPLAN_HARDWARE_PATH``).

    A user file may add devices; reusing a built-in id is an error (copy and rename instead).
    A user figure (``$XPUPLAN_HW_FIGURES``, then those of :func:`scoped_figures`;
    :mod:`xpuplan.catalog.overrides`) adds or replaces one figure of a device.
    """
    extra = tuple(str(p) for p in extra)
    figures = ";".join(t for t in (os.environ.get(ENV_FIGURES, "").strip(), _SCOPED_FIGURES.get()) if t)
    if not extra and not os.environ.get(ENV_EXTRA):
        base = _default_catalog()
    else:
        devices: list[Device] = []
        for f in catalog_files(extra):
            devices += load_hardware_file(f)
        base = build_catalog(devices)
    return _with_figures(base, figures) if figures else base


def with_figures(catalog: Catalog, overrides: list) -> Catalog:
    """``catalog`` with user figures laid over it (pure; see :mod:`xpuplan.catalog.overrides`)."""
    from xpuplan.catalog.overrides import apply_overrides

    return Catalog(devices=apply_overrides(catalog.devices, catalog.resolve, overrides), index=catalog.index)


@lru_cache(maxsize=8)
def _default_with_figures(text: str) -> Catalog:
    from xpuplan.catalog.overrides import parse_override_specs

    return with_figures(_default_catalog(), parse_override_specs(text))


def _with_figures(base: Catalog, text: str) -> Catalog:
    if base is _default_catalog():
        return _default_with_figures(text)
    from xpuplan.catalog.overrides import parse_override_specs

    return with_figures(base, parse_override_specs(text))


@lru_cache(maxsize=1)
def _default_catalog() -> Catalog:
    devices: list[Device] = []
    for f in catalog_files():
        devices += load_hardware_file(f)
    return build_catalog(devices)


def get_device(name: str) -> Device:
    """Shortcut: a device of the default catalog by id or alias."""
    return load_catalog().get(name)
