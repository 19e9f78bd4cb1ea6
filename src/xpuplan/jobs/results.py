"""Result types of the jobs: pydantic models with a ``schema_version``, one JSON schema each.

Every result a job returns derives from :class:`Result`. Front ends render them (``--json`` is
``result.to_dict()``); ``xpuplan schema NAME`` prints ``result_schema(NAME)``; docs/schema.md
describes the conventions:

* keys carry their unit as a suffix and values are SI (``_s``, ``_bytes``, ``_w``, ``_per_s``);
  counts and ratios have no suffix (``mfu`` is a fraction of peak);
* ``used`` lists the catalog figures (each with its trust grade and source) and the assumptions
  (each value with its provenance) that the result depends on;
* the fields declared on a result are stable within a ``schema_version`` major number; results
  that embed a planner's breakdown allow extra keys inside it (``model_config extra="allow"``):
  those are detail and may grow.

No NaN or infinity ever appears: :meth:`Result.to_dict` refuses them (an internal error, not an
answer), because a request's inputs are finite and in range.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from xpuplan.catalog.assumptions import Assumptions
    from xpuplan.catalog.device import Device
    from xpuplan.validate.band import Regime

#: Version of every result's schema: major changes when a declared field is renamed or removed.
SCHEMA_VERSION: Final = "2.0"

#: Result name -> type, for ``xpuplan schema``.
RESULTS: dict[str, type[Result]] = {}


class FigureUsed(BaseModel):
    """One catalog figure a result depends on."""

    device: str = Field(description="catalog device id")
    path: str = Field(description="figure path in the catalog, e.g. memory.bandwidth_gb_per_s")
    value: float = Field(description="value in SI units (FLOP/s, B, B/s, W)")
    unit: str = Field(description="SI unit of value")
    trust: str = Field(description="trust grade A (vendor datasheet) .. D (estimate)")
    source: str = Field(description="title, publisher, date and URL of the source")


class Used(BaseModel):
    """What a result was computed from, besides the request."""

    figures: list[FigureUsed] = Field(default_factory=list, description="catalog figures read, with trust")
    assumptions: dict[str, Any] = Field(default_factory=dict,
                                        description="assumptions used, each value with its source")
    caveats: list[str] = Field(default_factory=list,
                               description="figures the result rests on that need a warning: trust D (estimate or "
                                           "widest credible range), user-supplied (--hw-figure), fp16 used for bf16")


class Uncertainty(BaseModel):
    """How far to trust a prediction: the hardware family's measured validation band around it."""

    kind: str = Field(description="train | infer: which public validation rows the band comes from")
    family: str = Field(description="hardware family the error is pooled over (vendor and architecture)")
    low_fraction: float = Field(description="the measured speed was >= predicted x (1 - low_fraction) on 90% of "
                                            "the family's public rows (P10 of measured/predicted speed; times and "
                                            "device-hours enter inverted)")
    high_fraction: float = Field(description="... and <= predicted x (1 + high_fraction) on 90% (P90)")
    n_rows: int = Field(description="public rows of the family (0: the pooled band of all rows, widened)")
    widened_by: float = Field(description="widening for weak evidence (no rows of its own, mostly trust C/D)")
    calibrated: bool = Field(description="the device's efficiency is the user's calibration; the band is still the "
                                         "family's public error (a calibration usually narrows it)")
    ranges: dict[str, list[float]] = Field(description="metric -> [P10, P90] in the metric's unit: throughput-like "
                                                       "metrics scale with the band, time-like ones inversely")
    source: str = Field(description="where the band comes from (validate/data/bands.json, files, baseline)")
    extrapolation: list[str] = Field(default_factory=list,
                                     description="why the prediction lies outside the regime of the public rows behind "
                                                 "the band (MoE, longer sequence or prompt, more devices, another "
                                                 "precision); non-empty: the band is widened (validate.band."
                                                 "EXTRAPOLATION_WIDENING, included in widened_by)")


#: How a metric moves with the achieved speed: "up" (throughput, MFU: x (1 - low) .. x (1 + high)) or
#: "down" (times, devices needed: / (1 + high) .. / (1 - low)).
Direction = Literal["up", "down"]


def uncertainty(device: Device, kind: str, efficiency_source: str,
                values: dict[str, tuple[float | None, Direction]], regime: Regime | None = None) -> Uncertainty:
    """The validation band of ``device``'s family for ``kind`` (``train``/``infer``) applied to ``values``
    (metric -> (value, direction)); metrics without a value are left out. ``regime``: where the prediction
    sits (widens the band outside the public rows' regime, ``validate.band.Regime``)."""
    from xpuplan.validate.band import band_record

    b = band_record(device, kind, regime)
    lo, hi = b.low_fraction, b.high_fraction
    ranges: dict[str, list[float]] = {}
    for name, (v, direction) in values.items():
        if v is None:
            continue
        ranges[name] = [v * (1 - lo), v * (1 + hi)] if direction == "up" else [v / (1 + hi), v / (1 - lo)]
    return Uncertainty(kind=kind, family=b.family, low_fraction=lo, high_fraction=hi, n_rows=b.n_rows,
                       widened_by=b.widened_by, calibrated="calib" in efficiency_source.casefold(), ranges=ranges,
                       source=b.source, extrapolation=list(b.extrapolation))


class Result(BaseModel):
    """Base of every job result."""

    model_config = ConfigDict(extra="forbid")

    #: Name used by ``xpuplan schema`` (set by subclasses).
    NAME: ClassVar[str] = ""

    schema_version: str = Field(default=SCHEMA_VERSION, description="version of this result's schema")
    used: Used | None = Field(default=None, description="catalog figures and assumptions the result used")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("NAME"):
            RESULTS[cls.NAME] = cls

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; NaN or infinity anywhere is an internal error."""
        data = self.model_dump(mode="python")
        _check_finite(data, self.NAME or type(self).__name__)
        return data


class Detail(BaseModel):
    """A planner's breakdown embedded in a result: declared keys are stable, extra keys are detail."""

    model_config = ConfigDict(extra="allow")


def _check_finite(obj: Any, where: str) -> None:
    if isinstance(obj, float):
        assert math.isfinite(obj), f"non-finite number in {where}"
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _check_finite(v, f"{where}.{k}")
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            _check_finite(v, f"{where}[{i}]")


def finite_or_none(x: float | None) -> float | None:
    """``x`` if finite, else None (a planner's 'unbounded' as JSON null)."""
    return None if x is None or not math.isfinite(x) else x


def clean(obj: Any) -> Any:
    """A planner's dict with NaN/inf replaced by None (they mean 'not applicable' or 'unbounded')."""
    if isinstance(obj, float):
        return finite_or_none(obj)
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    return obj


#: Figures the training planner reads from a device (besides the peak of the chosen precision).
TRAIN_FIGURES: Final = ("memory.capacity_gb", "memory.bandwidth_gb_per_s", "scale_up.bandwidth_gb_per_s_per_direction",
                        "scale_out.nic_gbit_per_s_per_device", "power.tdp_w", "host_link.bandwidth_gb_per_s_per_direction",
                        "host_memory.capacity_gb")
#: Figures the serving planner reads.
SERVE_FIGURES: Final = ("memory.capacity_gb", "memory.bandwidth_gb_per_s", "scale_up.bandwidth_gb_per_s_per_direction")
#: Figures the memory commands read.
MEMORY_FIGURES: Final = ("memory.capacity_gb", "host_memory.capacity_gb")


def figures_used(device: Device, paths: Iterable[str]) -> list[FigureUsed]:
    """The figures ``paths`` of ``device`` that exist, with trust and source."""
    out = []
    for path in dict.fromkeys(paths):
        f = device.figure(path)
        if f is not None:
            out.append(FigureUsed(device=device.id, path=f.path, value=f.value, unit=f.unit, trust=f.trust,
                                  source=f.source.cite()))
    return out


def peak_path(device: Device, precision: str) -> str:
    """Catalog path of the dense peak a precision runs at (bf16 falls back to fp16)."""
    key = {"int8-wo": "bf16", "int4-wo": "bf16", "fp32": "fp32", "nvfp4": "fp4", "mxfp4": "fp4"}.get(precision, precision)
    path = f"dense_tflops.{key}"
    if device.figure(path) is None and key == "bf16":
        return "dense_tflops.fp16"
    return path


def used(assumptions: Assumptions | None, devices: Iterable[Device], paths: Iterable[str], *,
         precisions: Iterable[str] = ("bf16",), **named: Iterable[str]) -> Used:
    """``Used`` block: ``paths`` plus the peak of each precision on each device, and the assumptions
    (efficiency per device and any named link types, engines, state recipes)."""
    devs = list(devices)
    paths = list(paths)
    figs: list[FigureUsed] = []
    for d in devs:
        figs += figures_used(d, [*(peak_path(d, p) for p in precisions), *paths])
    assumed = assumptions.used(devices=devs, **named) if assumptions is not None else {}
    notes = [n for d in devs for p in precisions if p in ("bf16", "fp16") and (n := d.sixteen_bit_note(p))]
    return Used(figures=figs, assumptions=clean(assumed), caveats=list(dict.fromkeys([*notes, *caveats(figs)])))


def caveats(figures: Iterable[FigureUsed]) -> list[str]:
    """Lines that mark a result, one per device and kind: the trust-D figures it used (low-trust
    estimates or widest credible ranges) and the user-supplied ones (``--hw-figure``)."""
    low: dict[str, list[str]] = {}
    user: dict[str, list[str]] = {}
    for f in figures:
        if f.source.startswith("user-supplied"):
            user.setdefault(f.device, []).append(f"{f.path} (trust {f.trust})")
        elif f.trust == "D":
            low.setdefault(f.device, []).append(f.path)
    out = [f"{d} uses trust-D figures (low-trust estimates or widest credible ranges): {', '.join(p)}; the result is "
           f"indicative only (`xpuplan hw show {d}` gives ranges and sources; --hw-figure supplies a better one)"
           for d, p in low.items()]
    out += [f"{d} uses user-supplied figures (--hw-figure): {', '.join(p)}" for d, p in user.items()]
    return out


#: Results defined below the jobs layer (pydantic models with their own ``schema_version``):
#: name -> (module, class).
LOWER_LAYER_RESULTS: Final = {
    "recommend": ("xpuplan.decide.result", "Recommendation"),
    "cost-tco": ("xpuplan.cost.tco", "TcoResult"),
    "fleet.optimize": ("xpuplan.fleet.optimize", "FleetPlan"),
    "simulate": ("xpuplan.serve.sim.result", "SimulationResult"),
}


def result_schema(name: str) -> dict[str, Any]:
    """JSON schema of result ``name`` (see :func:`all_results`)."""
    from xpuplan.errors import UnknownIdError

    results = all_results()
    if name not in results:
        raise UnknownIdError("result", name, list(results), field="NAME")
    schema: dict[str, Any] = results[name].model_json_schema()
    return schema


#: Job modules whose results ``all_results`` collects (a module another helper has not written yet
#: is skipped).
JOB_MODULES: Final = ("train", "serve", "memory", "catalog", "overview", "cost", "recommend", "validate")


def all_results() -> dict[str, type[BaseModel]]:
    """Every result type: those registered by the job modules (imported here) and the lower layers'."""
    import importlib

    for mod in JOB_MODULES:
        try:
            importlib.import_module(f"xpuplan.jobs.{mod}")
        except ModuleNotFoundError as exc:
            if exc.name != f"xpuplan.jobs.{mod}":
                raise
    found: dict[str, type[BaseModel]] = dict(RESULTS)
    for name, (module, cls) in LOWER_LAYER_RESULTS.items():
        found[name] = getattr(importlib.import_module(module), cls)
    return dict(sorted(found.items()))
