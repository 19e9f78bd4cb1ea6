"""Monte Carlo over the uncertain inputs: P10/P50/P90 of time and cost, P(rank first).

Sampled per device (shared by every option using it, so options on the same hardware move together):

* achievable efficiency: a log-normal multiplier, median 1, sigma from where the efficiency comes
  from (calibrated, device, family or generic defaults) widened by the worst trust grade of the
  device's figures (``data/criteria.yaml`` ``uncertainty``), and at least the sigma of the device
  family's measured validation band (``validate/data/bands.json``) unless the user calibrated it;
* the catalog's ranges: dense peak (the precision used) and memory bandwidth, uniform over
  ``low..high`` of the figure, as a ratio to the value used;
* prices: the purchase (or cloud) price and the electricity price, uniform over their ranges.

The planners are not re-run per sample (helper B is vectorising the serving model; until then this
is the documented analytic perturbation): a part's speed factor is
``f = eff * peak_ratio ** cb * bw_ratio ** (1 - cb)`` with ``cb`` the compute-bound share of its
time (training: compute / step time; serving: TTFT / (TTFT + output x TPOT)). Training time and step
time scale as ``1 / f``, throughput as ``f``; serving latency as ``1 / f`` and replicas as
``ceil(qps / (rate x f))``. Cost lines follow: hardware with devices (serving) or duration
(training) and the price ratio; energy and operations with devices or duration and the electricity
ratio. Scores are recomputed per sample, vectorised over samples with numpy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from xpuplan.decide import facts
from xpuplan.decide.engine import Candidate, candidate_raw
from xpuplan.decide.parts import Part
from xpuplan.decide.scenario import Scenario
from xpuplan.decide.scoring import PERF_LEAVES, F, leaf_scores, totals

QUANTILES = (10, 50, 90)


def _sigma(cands: list[Candidate], device_id: str, dev: Any) -> float:
    """Efficiency sigma of a device: the widest over the parts that use it (training and serving
    parts have their own validation bands)."""
    return max(facts.part_efficiency_sigma(dev, p.role, p.efficiency_source, p.regime)
               for c in cands for p in c.parts.values() if p.device_id == device_id)


def _ratio_range(fig: Any) -> tuple[float, float]:
    if fig is None or not fig.value:
        return 1.0, 1.0
    return fig.low / fig.value, fig.high / fig.value


def _peak_fig(dev: Any, part: Part) -> Any:
    dtype = str(part.plan.get("dtype") or "bf16")
    dtype = {"int8-wo": "bf16", "int4-wo": "bf16", "nvfp4": "fp4", "mxfp4": "fp4"}.get(dtype, dtype)
    return dev.figure(f"dense_tflops.{dtype}") or dev.figure("dense_tflops.bf16") or dev.figure("dense_tflops.fp16")


def run_monte_carlo(cands: list[Candidate], s: Scenario, share: dict[str, float], weights: dict[str, float],
                    n: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    # per-device draws in sorted id order: same seed -> same draws regardless of option order
    dev_ids = sorted({d for c in cands for d in c.device_ids})
    devs = {d: next(c.device(d) for c in cands if d in c.device_ids) for d in dev_ids}
    eff: dict[str, F] = {}
    peak_u: dict[str, F] = {}
    bw_u: dict[str, F] = {}
    price_u: dict[str, F] = {}
    elec_u: dict[str, F] = {}
    for d in dev_ids:
        dev = devs[d]
        sigma = _sigma(cands, d, dev)
        eff[d] = np.exp(rng.normal(0.0, sigma, n))
        peak_u[d] = rng.random(n)
        bw_u[d] = rng.random(n)
        price_u[d] = rng.random(n)
        elec_u[d] = rng.random(n)

    def lerp(u: F, lo_hi: tuple[float, float]) -> F:
        return lo_hi[0] + u * (lo_hi[1] - lo_hi[0])

    def part_samples(part: Part) -> dict[str, F]:
        dev = devs[part.device_id]
        cb = part.compute_bound_fraction
        pr = lerp(peak_u[part.device_id], _ratio_range(_peak_fig(dev, part)))
        br = lerp(bw_u[part.device_id], _ratio_range(dev.figure("memory.bandwidth_gb_per_s")))
        f = eff[part.device_id] * pr ** cb * br ** (1.0 - cb)
        price = lerp(price_u[part.device_id], _ratio_range(part.main_price))
        elec = lerp(elec_u[part.device_id], _ratio_range(part.electricity))
        out: dict[str, F] = {"speed": f}
        if part.role == "train":
            scale = 1.0 / f
            out["time"] = (part.time_s or math.nan) * scale
            out["compute_fit"] = out["time"]
            out["devices"] = np.full(n, float(part.devices))
        else:
            rate = part.rate_per_replica or math.nan
            replicas = np.ceil((part.target_qps or 0.0) / (rate * f))
            replicas = np.maximum(replicas, 1.0)
            devices = replicas * part.replica_devices
            scale = devices / max(1, part.devices)
            out["devices"] = devices
            out["compute_fit"] = devices
            lat = (part.latency_s or math.nan) / f
            out["time"] = lat if part.time_s == part.latency_s else (part.time_s or math.nan) / f
        out["latency"] = (part.latency_s or math.nan) / f
        out["throughput"] = (part.throughput or math.nan) * f
        out["memory_fit"] = np.full(n, float(part.model_parallel))
        lines = part.lines_usd
        hw = sum(lines.get(k, 0.0) for k in ("hardware_usd", "network_usd", "cloud_usd"))
        out["hardware"] = hw * price * scale if part.hardware_known else np.full(n, math.nan)
        out["operations"] = (lines.get("energy_usd", 0.0) * elec
                             + lines.get("space_cooling_usd", 0.0) + lines.get("operations_usd", 0.0)) * scale
        return out

    cache: dict[tuple[str, str], dict[str, F]] = {}
    K = len(cands)
    role_raw: dict[str, dict[str, F]] = {leaf: {r: np.empty((n, K)) for r in share} for leaf in PERF_LEAVES}
    time_s = np.empty((n, K))
    hw = np.empty((n, K))
    ops = np.empty((n, K))
    for k, c in enumerate(cands):
        t_parts = []
        hw_k = np.zeros(n)
        ops_k = np.zeros(n)
        for role, p in c.parts.items():
            key = (role, p.device_id)
            if key not in cache:
                cache[key] = part_samples(p)
            ps = cache[key]
            for leaf in PERF_LEAVES:
                role_raw[leaf][role][:, k] = ps[leaf]
            t_parts.append(ps["time"])
            hw_k = hw_k + ps["hardware"]
            ops_k = ops_k + ps["operations"]
        time_s[:, k] = np.max(np.vstack(t_parts), axis=0)
        hw[:, k] = hw_k
        ops[:, k] = ops_k
    static = [candidate_raw(c, s) for c in cands]
    raw: dict[str, F] = {}
    for leaf in static[0]:
        raw[leaf] = np.broadcast_to(np.array([r[leaf] for r in static]), (n, K)).copy()
    raw["hardware_cost"] = hw
    raw["operations_cost"] = ops
    scores = leaf_scores(raw, role_raw, share)
    total = totals(scores, weights)
    first = np.argmax(total, axis=1)
    p_first = np.bincount(first, minlength=K) / n
    dev_cost = np.array([c.development_usd if c.development_usd is not None else 0.0 for c in cands])
    cost = hw + ops + dev_cost[None, :]

    def spread(x: F) -> list[dict[str, float] | None]:
        out: list[dict[str, float] | None] = []
        for k in range(K):
            col = x[:, k]
            col = col[~np.isnan(col)]
            if col.size == 0:
                out.append(None)
            else:
                q = np.percentile(col, QUANTILES)
                out.append({"p10": float(q[0]), "p50": float(q[1]), "p90": float(q[2])})
        return out

    return {
        "samples": n,
        "seed": seed,
        "method": "analytic perturbation of the planners' results (module doc of xpuplan.decide.montecarlo)",
        "time_s": spread(time_s),
        "cost_usd": spread(cost),
        "p_rank_first": [float(x) for x in p_first],
        "sigma_by_device": {d: _sigma(cands, d, devs[d]) for d in dev_ids},
    }
