"""Leaf scores: normalise raw quantities across the options compared, then weight them.

Normalisation (vectorised over Monte Carlo samples; the last axis is the option):

* higher is better: ``s = x / max(x)``
* lower is better:  ``s = 1 - (x - min(x)) / max(x)``

so the best option scores 1 and the others keep their relative distance (a 2x slower option is not
pushed to 0 as min-max scaling would). An option missing the quantity (NaN, e.g. no public price)
gets the ``unknown_score_quantile`` of the known scores (0: the worst known), and 0.5 when no option
knows it. Points = weight x score; an option's total is the sum over the 13 leaves (0..100).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from xpuplan.decide.weights import criteria_data

F = NDArray[np.float64]

#: Leaf -> (direction, unit of the raw quantity). Performance leaves are per role (see parts.roles).
LEAVES: dict[str, tuple[str, str]] = {
    "compute_fit": ("lower", "s to train / devices to serve"),
    "memory_fit": ("lower", "devices per model copy"),
    "latency": ("lower", "s"),
    "throughput": ("higher", "tokens/s per device"),
    "ecosystem": ("higher", "1"),
    "learning_cost": ("lower", "engineer-months"),
    "debugging": ("higher", "1"),
    "hardware_cost": ("lower", "USD"),
    "operations_cost": ("lower", "USD"),
    "development_cost": ("lower", "USD"),
    "technical_risk": ("higher", "1 (confidence)"),
    "supply_chain": ("higher", "1 - supply risk"),
    "lock_in": ("higher", "1 (portability)"),
}
PERF_LEAVES = ("compute_fit", "memory_fit", "latency", "throughput")


def normalise(x: F, direction: str) -> F:
    """Scores in 0..1 along the last axis (module doc); NaN marks an unknown quantity."""
    x = np.asarray(x, dtype=float)
    known = ~np.isnan(x)
    any_known = known.any(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore", all="ignore"):
        hi = np.nanmax(np.where(known, x, -np.inf), axis=-1, keepdims=True)
        lo = np.nanmin(np.where(known, x, np.inf), axis=-1, keepdims=True)
        if direction == "higher":
            s = np.where(hi > 0, x / np.where(hi > 0, hi, 1.0), 1.0)
        else:
            s = np.where(hi > 0, 1.0 - (x - lo) / np.where(hi > 0, hi, 1.0), 1.0)
    s = np.clip(s, 0.0, 1.0)
    q = float(criteria_data().constants["unknown_score_quantile"])
    filled = np.where(known, s, np.nan)
    if known.all():
        return s
    with np.errstate(all="ignore"):
        base = np.where(any_known, filled, 0.5)
        # q == 0 (the default: the worst known score) is a plain minimum, much faster than a quantile
        qv = np.nanmin(base, axis=-1, keepdims=True) if q == 0 else np.nanquantile(base, q, axis=-1, keepdims=True)
        fill = np.where(any_known, qv, 0.5)
    return np.where(known, s, fill)


def leaf_scores(raw: dict[str, F], role_raw: dict[str, dict[str, F]], role_share: dict[str, float]) -> dict[str, F]:
    """Normalised score per leaf; performance leaves averaged over roles with ``role_share``."""
    out: dict[str, F] = {}
    total_share = sum(role_share.values())
    for leaf in PERF_LEAVES:
        direction = LEAVES[leaf][0]
        acc: F | None = None
        for role, share in role_share.items():
            s = normalise(role_raw[leaf][role], direction) * (share / total_share)
            acc = s if acc is None else acc + s
        assert acc is not None
        out[leaf] = acc
    for leaf, x in raw.items():
        out[leaf] = normalise(x, LEAVES[leaf][0])
    return out


def totals(scores: dict[str, F], weights: dict[str, float]) -> F:
    acc: F | None = None
    for leaf, w in weights.items():
        acc = scores[leaf] * w if acc is None else acc + scores[leaf] * w
    assert acc is not None
    return acc
