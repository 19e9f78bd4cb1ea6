"""User-supplied hardware figures: add or override any catalog figure in one line.

Two forms, both naming the device (id or alias), the figure's catalog path and the value in the
unit of the path's key (TFLOPS for ``dense_tflops.*``, GB, GB/s, W...):

* a flag/spec string: ``enflame-s60:dense_tflops.bf16=150`` (several joined by ``;``), optionally
  with a range and a trust grade: ``enflame-s60:dense_tflops.bf16=150[100..200]@C``;
* a YAML file mapping device -> path -> number (or ``{value, min, max, trust, note}``), e.g. the
  one-line file ``enflame-s60: {dense_tflops.bf16: 150}``.

``compute.<prec>_tflops`` is accepted for ``dense_tflops.<prec>`` (``compute.bf16_tflops``).
A user figure's source is "user-supplied" (the flag or the file) and its trust is the grade given
(default C: the catalog cannot vouch for it). :func:`apply_overrides` is pure; the catalog loader
applies the overrides named by ``$XPUPLAN_HW_FIGURES`` (set by the jobs layer from ``--hw-figure``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from xpuplan.catalog.device import Device, Figure, Source, canonical_path, unit_for_key
from xpuplan.errors import UserInputError

#: Field name used in errors about override specs (the CLI flag).
FLAG: Final = "--hw-figure"
DEFAULT_TRUST: Final = "C"
_TRUST = ("A", "B", "C", "D")
_SPEC = re.compile(
    r"^\s*(?P<dev>[^:=]+?)\s*:\s*(?P<path>[A-Za-z0-9_.]+)\s*=\s*(?P<val>[0-9.eE+\-]+)"
    r"(?:\s*\[\s*(?P<lo>[0-9.eE+\-]+)\s*\.\.\s*(?P<hi>[0-9.eE+\-]+)\s*\])?"
    r"(?:\s*@\s*(?P<trust>[A-Da-d]))?\s*$"
)
_COMPUTE = re.compile(r"^compute\.(?P<prec>[a-z0-9]+)_t(?:flops|ops)$")
_SECTIONS = ("dense_tflops", "sparse_tflops", "memory", "on_chip", "scale_up", "pcie", "host_link", "host_memory",
             "scale_out", "power", "price")
_PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")


@dataclass(frozen=True)
class FigureOverride:
    """One user figure: ``device`` (id or alias as typed), catalog ``path``, printed value and range."""

    device: str
    path: str
    value: float
    low: float | None = None
    high: float | None = None
    trust: str = DEFAULT_TRUST
    origin: str = FLAG
    note: str | None = None


def normalise_path(path: str, *, field: str = FLAG) -> str:
    """The catalog path of a figure as the user wrote it (``compute.bf16_tflops`` -> ``dense_tflops.bf16``)."""
    p = path.strip()
    m = _COMPUTE.match(p)
    if m:
        p = f"dense_tflops.{m['prec']}"
    section = p.split(".", 1)[0]
    if section not in _SECTIONS or "." not in p:
        raise UserInputError(
            f"unknown figure path {path!r}; use dense_tflops.<precision> (or compute.<precision>_tflops), "
            "memory.capacity_gb (or memory.capacity_gib), memory.bandwidth_gb_per_s, scale_up.bandwidth_gb_per_s_per_direction, "
            "power.tdp_w, ...", field=field)
    if section in ("dense_tflops", "sparse_tflops") and p.split(".", 1)[1] not in _PRECISIONS:
        raise UserInputError(f"unknown precision in {path!r}; one of {', '.join(_PRECISIONS)}", field=field)
    try:
        unit_for_key(p)
    except AssertionError:
        raise UserInputError(f"figure path {path!r} has no unit suffix (e.g. _gb, _gb_per_s, _w)", field=field) from None
    return p


#: Largest figure value accepted, in the path's own unit (TFLOP/s, GB, GB/s, W): a million times any device's,
#: so a typo or a unit slip (bytes for GB) is caught before it turns into infinite bytes or seconds.
MAX_FIGURE: Final = 1e12


def _number(text: str, what: str, field: str, *, positive: bool = False) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UserInputError(f"{what} {text!r} is not a number", field=field) from None
    if not v >= 0 or v == float("inf"):
        raise UserInputError(f"{what} must be a finite number >= 0 (got {text})", field=field)
    if v > MAX_FIGURE:
        raise UserInputError(f"{what} {text} is far above any device's figure (at most {MAX_FIGURE:.0e} in the "
                             "path's unit: TFLOP/s, GB, GB/s, W); check the unit", field=field)
    if positive and v == 0:
        raise UserInputError(f"{what} must be > 0 (got {text}): a figure the device does not have is left out, "
                             "not set to 0", field=field)
    return v


def _checked(o: FigureOverride, field: str) -> FigureOverride:
    lo = o.value if o.low is None else o.low
    hi = o.value if o.high is None else o.high
    if not lo <= o.value <= hi:
        raise UserInputError(f"range must satisfy low <= value <= high ({lo} <= {o.value} <= {hi})", field=field)
    if o.trust not in _TRUST:
        raise UserInputError(f"trust must be one of {', '.join(_TRUST)} (got {o.trust!r})", field=field)
    return o


def parse_figure_override(text: str, *, field: str = FLAG) -> FigureOverride:
    """``DEVICE:PATH=VALUE[LOW..HIGH]@TRUST`` (range and trust optional) -> :class:`FigureOverride`."""
    m = _SPEC.match(text)
    if not m:
        raise UserInputError(
            f"cannot read {text!r}; write DEVICE:PATH=VALUE, e.g. enflame-s60:dense_tflops.bf16=150 "
            "(optional range and trust: =150[100..200]@D)", field=field)
    lo = None if m["lo"] is None else _number(m["lo"], "low", field)
    hi = None if m["hi"] is None else _number(m["hi"], "high", field)
    return _checked(FigureOverride(device=m["dev"].strip(), path=normalise_path(m["path"], field=field),
                                   value=_number(m["val"], "value", field, positive=True), low=lo, high=hi,
                                   trust=(m["trust"] or DEFAULT_TRUST).upper(), origin=FLAG), field)


def overrides_from_data(data: Any, origin: str) -> list[FigureOverride]:
    """Overrides from a parsed YAML mapping ``device -> path -> number | {value, min, max, trust, note}``."""
    if not isinstance(data, dict):
        raise UserInputError("a hardware-figure file maps device -> {path: value}, e.g. "
                             "'enflame-s60: {dense_tflops.bf16: 150}'", file=origin)
    out: list[FigureOverride] = []
    for dev, figs in data.items():
        if not isinstance(figs, dict):
            raise UserInputError(f"{dev}: expected a mapping of figure path -> value", file=origin, field=str(dev))
        for path, spec in figs.items():
            field = f"{dev}.{path}"
            if isinstance(spec, dict):
                unknown = set(spec) - {"value", "min", "max", "trust", "note"}
                if unknown or "value" not in spec:
                    raise UserInputError("give value (and optionally min, max, trust, note)"
                                         + (f"; unknown key(s) {sorted(unknown)}" if unknown else ""),
                                         file=origin, field=field)
                o = FigureOverride(
                    device=str(dev), path=normalise_path(str(path), field=field),
                    value=_number(str(spec["value"]), "value", field, positive=True),
                    low=None if spec.get("min") is None else _number(str(spec["min"]), "min", field),
                    high=None if spec.get("max") is None else _number(str(spec["max"]), "max", field),
                    trust=str(spec.get("trust", DEFAULT_TRUST)).upper(), origin=origin, note=spec.get("note"))
            else:
                o = FigureOverride(device=str(dev), path=normalise_path(str(path), field=field),
                                   value=_number(str(spec), "value", field, positive=True), origin=origin)
            out.append(_checked(o, field))
    return out


def load_figure_file(path: str | Path) -> list[FigureOverride]:
    """Overrides from a YAML file (see the module doc); errors name the file."""
    from xpuplan.datafile import parse_text, read_text

    file = str(path)
    if not Path(file).is_file():
        raise UserInputError(f"hardware-figure file {file!r} not found", field=FLAG)
    data, _ = parse_text(read_text(file), file)
    return overrides_from_data(data, file)


def parse_override_specs(text: str) -> list[FigureOverride]:
    """``;``- or newline-separated entries, each a spec string or the path of a YAML file."""
    out: list[FigureOverride] = []
    for part in (p.strip() for p in re.split(r"[;\n]", text)):
        if not part:
            continue
        if "=" not in part:
            out += load_figure_file(part)
        else:
            out.append(parse_figure_override(part))
    return out


def apply_overrides(devices: dict[str, Device], resolve: Any, overrides: list[FigureOverride]) -> dict[str, Device]:
    """``devices`` with each override's figure set (pure). ``resolve`` maps a name to a device id
    (raising ``UnknownIdError``); errors name ``--hw-figure`` or the file."""
    from xpuplan.errors import UnknownIdError

    out = dict(devices)
    for o in overrides:
        try:
            dev_id = resolve(o.device)
        except UnknownIdError as exc:
            raise UserInputError(f"{exc.message} (in {o.device}:{o.path})", field=FLAG) from None
        dev = out[dev_id]
        scale, unit = unit_for_key(o.path)
        src = Source(key="user", title=f"user-supplied figure ({o.origin})", date="user", kind="user")
        fig = Figure(
            path=canonical_path(o.path), value=o.value * scale,
            low=(o.value if o.low is None else o.low) * scale, high=(o.value if o.high is None else o.high) * scale,
            unit=unit, printed_value=o.value,
            printed_unit_key="tflops" if o.path.startswith(("dense", "sparse")) else o.path.rsplit(".", 1)[-1],
            source=src, trust=o.trust, note=o.note or "user-supplied (overrides the catalog)")
        out[dev_id] = replace(dev, figures={**dev.figures, canonical_path(o.path): fig})
    return out
