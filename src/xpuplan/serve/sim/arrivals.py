"""Arrival times and request lengths of one traffic class, drawn up front with NumPy.

* ``poisson``: exponential inter-arrival times of mean 1/rate.
* ``gamma``: gamma inter-arrival times of mean 1/rate and coefficient of variation ``cv``
  (shape k = 1/cv², scale = 1/(rate·k)); cv > 1 gives bursts, cv = 1 is Poisson.
* ``diurnal``: a non-homogeneous Poisson process whose rate follows a piecewise-linear curve,
  drawn by thinning (Lewis & Shedler 1979): candidates at the curve's peak rate, each kept with
  probability rate(t) / peak.
* ``trace``: the trace's times (rows naming another class go to that class; unlabelled rows of a
  trace several classes share go to the first of them).
* ``burst``: ``requests`` requests at t = 0 (an offline benchmark run of a fixed number of prompts).

Lengths: drawn from the class's length distributions (:func:`xpuplan.workload.lengths.sample_lengths`:
fixed, uniform, normal, lognormal, exponential or an empirical list, cut to their bounds), or pairs drawn
uniformly with replacement from an empirical list of (input, output) pairs.
Each class draws from its own generator seeded by (seed, class index): adding a class does not
change the others' requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from xpuplan.serve.sim.config import TrafficClass
from xpuplan.workload.lengths import sample_lengths


@dataclass(frozen=True)
class ClassArrivals:
    """Requests of one class: arrival times (s, ascending) and token lengths."""

    times_s: np.ndarray
    input_len: np.ndarray
    output_len: np.ndarray


def _inter_arrival_times(rng: np.random.Generator, rate: float, cv: float, duration_s: float) -> np.ndarray:
    n_guess = int(rate * duration_s * 1.2 + 10 * math.sqrt(rate * duration_s + 1) + 10)
    out: list[np.ndarray] = []
    t_end = 0.0
    while t_end <= duration_s:
        if cv == 1.0:
            gaps = rng.exponential(1.0 / rate, n_guess)
        else:
            k = 1.0 / (cv * cv)
            gaps = rng.gamma(k, 1.0 / (rate * k), n_guess)
        times = t_end + np.cumsum(gaps)
        out.append(times)
        t_end = float(times[-1])
    t = np.concatenate(out)
    return t[t < duration_s]


def curve_rate(curve: list[tuple[float, float]], period_s: float | None, t: np.ndarray) -> np.ndarray:
    """Rate (requests/s) of a piecewise-linear curve at times ``t`` (held after the last point,
    or repeating every ``period_s``)."""
    xs = np.array([p[0] for p in curve], dtype=float)
    ys = np.array([p[1] for p in curve], dtype=float)
    order = np.argsort(xs, kind="stable")
    xs, ys = xs[order], ys[order]
    tt = np.mod(t, period_s) if period_s else t
    return np.interp(tt, xs, ys)


def arrival_times(cls: TrafficClass, duration_s: float, rng: np.random.Generator) -> np.ndarray:
    """Arrival times in [0, duration_s) of ``cls`` (module doc)."""
    if cls.arrival == "poisson":
        return _inter_arrival_times(rng, cls.rate_rps, 1.0, duration_s)
    if cls.arrival == "gamma":
        return _inter_arrival_times(rng, cls.rate_rps, cls.cv, duration_s)
    if cls.arrival == "closed":  # the clients' first requests; the next come on completion
        assert cls.clients is not None
        return np.zeros(cls.clients)
    if cls.arrival == "burst":  # every request at once (an offline benchmark run)
        assert cls.requests is not None
        return np.zeros(cls.requests)
    if cls.arrival == "diurnal":
        assert cls.rate_curve
        peak = max(r for _, r in cls.rate_curve)
        if peak <= 0:
            return np.zeros(0)
        cand = _inter_arrival_times(rng, peak, 1.0, duration_s)
        keep = rng.random(cand.size) * peak < curve_rate(cls.rate_curve, cls.curve_period_s, cand)
        return cand[keep]
    raise AssertionError(cls.arrival)


def class_arrivals(cls: TrafficClass, index: int, all_classes: list[TrafficClass], duration_s: float,
                   seed: int) -> ClassArrivals:
    """All requests of class ``index`` over ``duration_s`` (module doc); deterministic in ``seed``."""
    rng = np.random.default_rng([seed, index])
    traces = [(i, c.trace) for i, c in enumerate(all_classes) if c.trace is not None]
    if cls.arrival == "trace":
        tr = cls.trace
        assert tr is not None
        t = np.asarray(tr.times_s, dtype=float)
        mask = t < duration_s
        if tr.classes is not None:
            # unlabelled rows belong to the first class that owns this trace
            owner = next(c.name for c in all_classes if c.arrival == "trace" and c.trace == tr)
            mask &= np.array([(c or owner) == cls.name for c in tr.classes])
        inp = np.asarray(tr.input_len, dtype=np.int64)[mask]
        out = np.asarray(tr.output_len, dtype=np.int64)[mask]
        times = t[mask]
    else:
        times = arrival_times(cls, duration_s, rng)
        n = times.size
        if cls.lengths is not None:
            pick = rng.integers(0, len(cls.lengths.input_len), n)
            inp = np.asarray(cls.lengths.input_len, dtype=np.int64)[pick]
            out = np.asarray(cls.lengths.output_len, dtype=np.int64)[pick]
        else:
            inp = sample_lengths(cls.input_len, n, rng)
            out = sample_lengths(cls.output_len, n, rng)
    # rows of another class's trace that name this class
    # (a trace given to several classes is one trace: each of its rows counts once)
    seen = [cls.trace] if cls.arrival == "trace" else []
    extra = []
    for j, tr in traces:
        if j != index and tr is not None and tr.classes is not None and tr not in seen:
            seen.append(tr)
            extra.append(tr)
    for tr in extra:
        t = np.asarray(tr.times_s, dtype=float)
        mask = (t < duration_s) & np.array([c == cls.name for c in tr.classes or []])
        if mask.any():
            times = np.concatenate([times, t[mask]])
            inp = np.concatenate([inp, np.asarray(tr.input_len, dtype=np.int64)[mask]])
            out = np.concatenate([out, np.asarray(tr.output_len, dtype=np.int64)[mask]])
    order = np.argsort(times, kind="stable")
    return ClassArrivals(times_s=times[order], input_len=inp[order], output_len=out[order])
