"""The criteria tree and its weights (the guide's 40/30/20/10 split, data in ``data/criteria.yaml``).

Weights are per leaf, in points that sum to 100. A scenario may replace leaf weights (``weights:``)
or shift them (``weight_adjustments:``, deltas that must sum to zero). A replacement may also name a
group (``performance: 50``, as the guide speaks of "performance 40"): its leaves share the group's
points in the proportions they had before (the defaults shifted by the adjustments). The result must be a set of
non-negative numbers summing to 100; anything else is a :class:`UserInputError` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from xpuplan.datafile import parse_text, read_text
from xpuplan.errors import UnknownIdError, UserInputError

CRITERIA_FILE = Path(__file__).parent / "data" / "criteria.yaml"
#: Tolerance on the sum of weights (points).
SUM_TOLERANCE = 1e-6
TOTAL = 100.0


@dataclass(frozen=True)
class CriteriaData:
    groups: Mapping[str, tuple[str, ...]]  # group -> leaves, in order
    defaults: Mapping[str, float]  # leaf -> default weight (points)
    constants: Mapping[str, Any]
    uncertainty: Mapping[str, Any]
    source: str
    file: str

    @property
    def leaves(self) -> tuple[str, ...]:
        return tuple(leaf for g in self.groups.values() for leaf in g)

    def group_of(self, leaf: str) -> str:
        for g, leaves in self.groups.items():
            if leaf in leaves:
                return g
        raise KeyError(leaf)


@cache
def criteria_data() -> CriteriaData:
    """The criteria tree, default weights and formula constants (read once)."""
    data, _ = parse_text(read_text(CRITERIA_FILE), str(CRITERIA_FILE))
    groups = {g: tuple(leaves) for g, leaves in data["groups"].items()}
    defaults = {leaf: float(w) for leaves in data["groups"].values() for leaf, w in leaves.items()}
    assert abs(sum(defaults.values()) - TOTAL) < SUM_TOLERANCE, "default weights must sum to 100"
    return CriteriaData(MappingProxyType(groups), MappingProxyType(defaults), MappingProxyType(data["constants"]),
                        MappingProxyType(data["uncertainty"]), data["source"]["title"], str(CRITERIA_FILE))


@dataclass(frozen=True)
class Weights:
    """Leaf weights in points (sum 100); ``group_totals`` sums them per group."""

    leaf: Mapping[str, float]

    def __getitem__(self, leaf: str) -> float:
        return self.leaf[leaf]

    def group_totals(self) -> dict[str, float]:
        cd = criteria_data()
        return {g: sum(self.leaf[x] for x in leaves) for g, leaves in cd.groups.items()}

    def to_dict(self) -> dict[str, float]:
        return dict(self.leaf)


def _check_name(name: str, field: str, *, groups: bool = False) -> None:
    """``name`` must be a leaf criterion (or, with ``groups``, a group); the error lists the valid names."""
    cd = criteria_data()
    known = [*cd.leaves, *(cd.groups if groups else ())]
    if name not in known:
        err = UnknownIdError("criterion", name, known, field=f"{field}.{name}")
        names = f"criteria: {', '.join(cd.leaves)}" + (f"; groups: {', '.join(cd.groups)}" if groups else "")
        raise UserInputError(f"{err.message} ({names})", field=f"{field}.{name}", hint=err.hint)


def _split_group(group: str, points: float, base: Mapping[str, float]) -> dict[str, float]:
    """``points`` shared by the leaves of ``group`` in their proportions in ``base`` (the defaults if all are 0)."""
    cd = criteria_data()
    leaves = cd.groups[group]
    ref = base if sum(base[x] for x in leaves) > 0 else cd.defaults
    total = sum(ref[x] for x in leaves)
    return {x: points * ref[x] / total for x in leaves}


def _number(v: Any, field: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(float(v)):
        raise UserInputError(f"must be a finite number, got {v!r}", field=field)
    return float(v)


def make_weights(replace: Mapping[str, Any] | None = None, adjust: Mapping[str, Any] | None = None,
                 *, field: str = "weights", adjust_field: str = "weight_adjustments") -> Weights:
    """Default weights shifted by ``adjust`` (a preset's deltas), then leaves replaced by ``replace``."""
    w = dict(criteria_data().defaults)
    replace = dict(replace or {})
    if adjust:
        deltas = {}
        for name, v in adjust.items():
            _check_name(name, adjust_field)
            deltas[name] = _number(v, f"{adjust_field}.{name}")
        s = sum(deltas.values())
        if abs(s) > SUM_TOLERANCE:
            raise UserInputError(f"adjustments must sum to 0 so the weights still sum to 100; they sum to {s:+g}",
                                 field=adjust_field)
        for name, d in deltas.items():
            w[name] += d
            if w[name] < -SUM_TOLERANCE and name not in replace:
                raise UserInputError(f"adjustment makes the weight negative ({w[name]:g})", field=f"{adjust_field}.{name}")
            w[name] = max(0.0, w[name])
    groups = criteria_data().groups
    base = dict(w)
    for name, v in replace.items():
        _check_name(name, field, groups=True)
        x = _number(v, f"{field}.{name}")
        if x < 0:
            raise UserInputError(f"weights must be >= 0, got {x:g}", field=f"{field}.{name}")
        if name in groups:
            both = [leaf for leaf in groups[name] if leaf in replace]
            if both:
                raise UserInputError(f"give the group {name} or its leaves ({', '.join(both)}), not both",
                                     field=f"{field}.{name}")
            w.update(_split_group(name, x, base))
        else:
            w[name] = x
    total = sum(w.values())
    if abs(total - TOTAL) > SUM_TOLERANCE:
        raise UserInputError(
            f"leaf weights must sum to 100; they sum to {total:g} "
            f"({', '.join(f'{g} {sum(w[x] for x in leaves):g}' for g, leaves in groups.items())}; "
            f"leaves {', '.join(f'{k}={v:g}' for k, v in w.items())})",
            field=field,
        )
    return Weights(MappingProxyType(w))


def parse_weight_flags(flags: list[str]) -> dict[str, float]:
    """``["latency=15", "throughput=0"]`` -> mapping (CLI ``--weight``; a group name such as ``performance=50``
    too); errors name ``--weight``."""
    out: dict[str, float] = {}
    for f in flags:
        name, sep, value = f.partition("=")
        if not sep:
            raise UserInputError(f"expected CRITERION=POINTS, got {f!r}", field="--weight")
        _check_name(name.strip(), "--weight", groups=True)
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise UserInputError(f"not a number: {value!r}", field=f"--weight.{name.strip()}") from None
    return out
