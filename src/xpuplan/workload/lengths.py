"""Token-length distributions of prompts and outputs: the one length model of the planner, the
request-level simulator and the fleet optimizer.

``dist``:

* ``fixed`` (``mean``): every request has that length;
* ``uniform`` (``min``, ``max``): equally likely between the two;
* ``normal`` (``mean``, ``std``);
* ``lognormal`` (``mean``, ``cv`` = std / mean of the lengths themselves: σ² = ln(1 + cv²), μ = ln(mean) − σ²/2);
* ``exponential`` (``mean``: the scale of the exponential);
* ``empirical`` (``values``: measured lengths, each equally likely, e.g. a dataset's prompt lengths).

``mean``, ``std`` and ``cv`` describe the distribution before it is cut: lengths are whole tokens of at least
one, so every continuous shape is cut to [``min``, ``max``] (``min`` default 1, ``max`` default none; a value
outside counts as the bound, as a benchmark tool's length filter or an engine's context limit does). A ``max``
below the ``mean``, a ``min`` above it, or a ``max`` or ``mean`` below one token is refused: the cut would move much of the
distribution onto the bound, the mean given saying little about the lengths. The planner uses
:attr:`LengthDist.average` (the mean after the cut) for throughput and KV sizing, :meth:`LengthDist.quantile` for
latency tails and :meth:`LengthDist.nodes` to integrate over the lengths; the simulator draws requests with
:func:`sample_lengths`. All of them describe the same cut distribution.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

Dist = Literal["fixed", "uniform", "normal", "lognormal", "exponential", "empirical"]

#: The parameters each distribution takes (``min``/``max`` cut every shape but ``empirical``; they are the
#: range of ``uniform``).
PARAMETERS: dict[str, tuple[str, ...]] = {
    "fixed": ("mean", "min", "max"),
    "uniform": ("min", "max"),
    "normal": ("mean", "std", "min", "max"),
    "lognormal": ("mean", "cv", "min", "max"),
    "exponential": ("mean", "min", "max"),
    "empirical": ("values",),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "fixed": ("mean",), "uniform": ("min", "max"), "normal": ("mean", "std"), "lognormal": ("mean", "cv"),
    "exponential": ("mean",), "empirical": ("values",),
}
_BIG: float = 1e12
_STD_NORMAL = NormalDist()


class LengthDist(BaseModel):
    """A token-length distribution (module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dist: Dist = "fixed"
    mean: float | None = Field(default=None, gt=0, le=_BIG, allow_inf_nan=False,
                               description="mean tokens before the cut (fixed, normal, lognormal, exponential)")
    std: float | None = Field(default=None, ge=0, le=_BIG, allow_inf_nan=False,
                              description="standard deviation (normal)")
    cv: float | None = Field(default=None, ge=0, le=100, allow_inf_nan=False,
                             description="coefficient of variation, std / mean (lognormal)")
    min: float | None = Field(default=None, gt=0, le=_BIG, allow_inf_nan=False,
                              description="smallest length (uniform; a lower cut otherwise, default 1)")
    max: float | None = Field(default=None, gt=0, le=_BIG, allow_inf_nan=False,
                              description="largest length (uniform; a cap otherwise, default none)")
    values: list[float] | None = Field(default=None, min_length=1, max_length=100_000,
                                       description="measured lengths, each equally likely (empirical)")

    @model_validator(mode="after")
    def _check(self) -> LengthDist:
        given = [k for k in ("mean", "std", "cv", "min", "max", "values") if getattr(self, k) is not None]
        extra = [k for k in given if k not in PARAMETERS[self.dist]]
        if extra:
            takes = ", ".join(PARAMETERS[self.dist])
            raise ValueError(f"{self.dist} does not take {', '.join(extra)} (it takes {takes})")
        missing = [k for k in _REQUIRED[self.dist] if getattr(self, k) is None]
        if self.dist == "empirical":
            if missing or any(not (v > 0 and math.isfinite(v)) for v in self.values or ()):
                raise ValueError("empirical needs values: a list of positive lengths")
            return self
        if self.dist == "uniform" and missing:
            raise ValueError("uniform needs min <= max")
        if missing:
            raise ValueError(f"{self.dist} needs {' and '.join(missing)}")
        if self.min is not None and self.max is not None and self.max < self.min:
            raise ValueError(f"{'uniform needs' if self.dist == 'uniform' else 'the cut needs'} min <= max "
                             f"(got min {self.min:g}, max {self.max:g})")
        if self.max is not None and self.max < 1:
            raise ValueError(f"max ({self.max:g}) is below one token: lengths are whole tokens, at least 1")
        if self.mean is not None and self.mean < 1:
            what = "a length" if self.dist == "fixed" else "the mean"
            raise ValueError(f"{what} of {self.mean:g} tokens is below one token: lengths are whole tokens, at least 1")
        if self.mean is not None and self.max is not None and self.max < self.mean:
            raise ValueError(f"max ({self.max:g}) is below the mean ({self.mean:g}): every length would be cut to "
                             f"{self.max:g}; raise max or lower the mean")
        if self.mean is not None and self.min is not None and self.min > self.mean:
            raise ValueError(f"min ({self.min:g}) is above the mean ({self.mean:g}): the lengths below it would be "
                             f"raised to {self.min:g}; lower min or raise the mean")
        return self

    # -- the cut --------------------------------------------------------------------------------------
    @property
    def low(self) -> float:
        """Lower bound of the lengths (``min``, else one token)."""
        return self.min if self.min is not None else 1.0

    @property
    def high(self) -> float:
        """Upper bound of the lengths (``max``, else unbounded)."""
        return self.max if self.max is not None else math.inf

    def _cut(self, x: float) -> float:
        return min(max(x, self.low), self.high)

    # -- moments and quantiles ------------------------------------------------------------------------
    @property
    def average(self) -> float:
        """Mean tokens of the cut distribution."""
        a, b = self.low, self.high
        if self.dist == "empirical":
            assert self.values is not None
            return sum(self.values) / len(self.values)
        if self.dist == "uniform":
            assert self.min is not None and self.max is not None
            return (self.min + self.max) / 2.0
        assert self.mean is not None
        m = self.mean
        if self.is_fixed:
            return self._cut(m)
        if self.dist == "exponential":
            # E[clip(X, a, b)] = a + ∫_a^b P(X > t) dt = a + m·(e^(-a/m) - e^(-b/m))
            return a + m * (math.exp(-a / m) - (math.exp(-b / m) if b < math.inf else 0.0))
        if self.dist == "normal":
            assert self.std is not None
            s = self.std
            lo, hi = (a - m) / s, (b - m) / s
            p_lo, p_hi = _STD_NORMAL.cdf(lo), (_STD_NORMAL.cdf(hi) if b < math.inf else 1.0)
            d_lo, d_hi = _STD_NORMAL.pdf(lo), (_STD_NORMAL.pdf(hi) if b < math.inf else 0.0)
            return a * p_lo + (b * (1.0 - p_hi) if b < math.inf else 0.0) + m * (p_hi - p_lo) + s * (d_lo - d_hi)
        mu, s = self._log_params()  # lognormal
        p_lo = _STD_NORMAL.cdf((math.log(a) - mu) / s)
        p_hi = _STD_NORMAL.cdf((math.log(b) - mu) / s) if b < math.inf else 1.0
        inside = math.exp(mu + s * s / 2.0) * (
            (_STD_NORMAL.cdf((math.log(b) - mu - s * s) / s) if b < math.inf else 1.0)
            - _STD_NORMAL.cdf((math.log(a) - mu - s * s) / s))
        return a * p_lo + (b * (1.0 - p_hi) if b < math.inf else 0.0) + inside

    def _log_params(self) -> tuple[float, float]:
        assert self.mean is not None and self.cv is not None
        s2 = math.log1p(self.cv * self.cv)
        return math.log(self.mean) - s2 / 2.0, math.sqrt(s2)

    def quantile(self, percentile: float) -> float:
        """Length at ``percentile`` (0-100) of the cut distribution."""
        q = percentile / 100.0
        if self.dist == "empirical":
            assert self.values is not None
            xs = sorted(self.values)
            return xs[min(len(xs) - 1, max(0, math.ceil(q * len(xs)) - 1))]
        if self.dist == "uniform":
            assert self.min is not None and self.max is not None
            return self.min + q * (self.max - self.min)
        assert self.mean is not None
        if self.is_fixed:
            return self._cut(self.mean)
        if q >= 1.0:
            return self.high
        if q <= 0.0:
            return self.low
        if self.dist == "normal":
            assert self.std is not None
            return self._cut(NormalDist(self.mean, self.std).inv_cdf(q))
        if self.dist == "lognormal":
            mu, s = self._log_params()
            return self._cut(math.exp(mu + s * _STD_NORMAL.inv_cdf(q)))
        return self._cut(-self.mean * math.log(1.0 - q))  # exponential

    @property
    def is_fixed(self) -> bool:
        """Whether every length is the same (a point: fixed, std or cv 0, one distinct value, min = max)."""
        if self.dist == "empirical":
            return len(set(self.values or ())) == 1
        if self.dist == "uniform":
            return self.min == self.max
        return self.dist == "fixed" or (self.dist == "normal" and self.std == 0) or (
            self.dist == "lognormal" and self.cv == 0)

    def nodes(self, n: int = 8) -> list[tuple[float, float]]:
        """(length, probability) pairs that integrate a function of the length over the distribution:
        the mean of each of ``n`` equal-probability bins (an empirical list: its values, grouped into
        at most ``n`` bins of sorted values). A fixed length is one node."""
        if self.is_fixed:
            return [(self.average, 1.0)]
        if self.dist == "empirical":
            assert self.values is not None
            xs = sorted(self.values)
            k = min(n, len(xs))
            out = []
            for i in range(k):
                part = xs[i * len(xs) // k:(i + 1) * len(xs) // k]
                out.append((sum(part) / len(part), len(part) / len(xs)))
            return out
        # bin i's representative: its conditional mean, from SUB quantiles at the midpoints of equal
        # sub-bins (so the nodes keep the distribution's mean, tail included)
        sub = 32
        return [(sum(self.quantile(100.0 * (i + (j + 0.5) / sub) / n) for j in range(sub)) / sub, 1.0 / n)
                for i in range(n)]


def as_length(value: int | float | LengthDist) -> LengthDist:
    """A length given as a number is a fixed length."""
    return value if isinstance(value, LengthDist) else LengthDist(dist="fixed", mean=float(value))


def number_to_fixed(value: Any) -> Any:
    """Input coercion for a length field: a plain number means ``{dist: fixed, mean: number}``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return {"dist": "fixed", "mean": value}
    return value


def sample_lengths(dist: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` token lengths (integers >= 1) drawn from ``dist``, cut to its bounds. A fixed length draws
    nothing from ``rng``."""
    if dist.is_fixed:
        x = np.full(n, float(dist.average))
    elif dist.dist == "empirical":
        assert dist.values is not None
        x = np.asarray(dist.values, dtype=float)[rng.integers(0, len(dist.values), n)]
    elif dist.dist == "uniform":
        x = rng.uniform(dist.low, dist.high, n)
    elif dist.dist == "lognormal":
        mu, s = dist._log_params()
        x = rng.lognormal(mu, s, n)
    else:
        m = float(dist.mean or 0.0)
        x = rng.normal(m, float(dist.std or 0.0), n) if dist.dist == "normal" else rng.exponential(m, n)
    lo = max(1.0, math.ceil(dist.low))
    out = np.clip(np.rint(x), lo, dist.high if dist.high < math.inf else None)
    return out.astype(np.int64)
