"""Disaggregated serving: separate prefill and decode pools (DistServe, Splitwise, Mooncake, Dynamo).

Prefill replicas only run prompts; decode replicas only decode. Each pool is sized on its own:

* **prefill pool**: a replica is an M/D/1 server of prompts with service time ``s`` = the prefill of
  one prompt; TTFT_p = wait_p + s + KV transfer. The largest rate per prefill replica with
  TTFT_p <= the SLO is found by bisection (utilisation below ``MAX_STABLE_UTILISATION``).
* **KV transfer**: the prompt's KV cache (all layers) moves from the prefill to the decode replica
  over the scale-out network, every device of the replica sending its shard in parallel: a
  point-to-point send of the one collective model (``perf.collectives``) at the scale-out link
  type's achievable bandwidth and latency (sharing a scale-up domain between pools is not assumed).
* **decode pool**: decode-only steps at concurrency C (context averaging prompt + half the output);
  the largest C with TPOT(C) <= the SLO and within the KV capacity; rate = C / (output_len · TPOT).

For a target rate the pools need ceil(λ / rate_p) and ceil(λ / rate_d) replicas; without a target the
ideal ratio gives requests/s per device = 1 / (devices_p / rate_p + devices_d / rate_d).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from xpuplan.errors import InfeasibleError
from xpuplan.perf.collectives import time_p2p_s
from xpuplan.perf.memory import kv_cache_bytes_per_token
from xpuplan.serve.constants import MAX_STABLE_UTILISATION, SLO_SEARCH_REL_TOL
from xpuplan.serve.estimate import time_prefill_s
from xpuplan.serve.kv import max_concurrent_sequences, memory_plan, require_fit
from xpuplan.serve.replica import Replica, step_time
from xpuplan.serve.slo import SLO, wait_quantile_s


@dataclass(frozen=True)
class DisaggEstimate:
    """Pool rates (requests/s per replica), latencies (s) and, for a target, the pool sizes."""

    prefill_replica: dict[str, Any]
    decode_replica: dict[str, Any]
    prefill_rate: float
    decode_rate: float
    decode_concurrency: int
    kv_transfer_s: float
    ttft_p_s: float
    tpot_s: float
    requests_per_s_per_device: float
    target_qps: float | None
    prefill_replicas: int | None
    decode_replicas: int | None
    devices: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"prefill_replica": self.prefill_replica, "decode_replica": self.decode_replica,
                "prefill_requests_per_s_per_replica": self.prefill_rate,
                "decode_requests_per_s_per_replica": self.decode_rate, "decode_concurrency": self.decode_concurrency,
                "kv_transfer_s": self.kv_transfer_s, "ttft_p_s": self.ttft_p_s,
                "tpot_s": self.tpot_s, "requests_per_s_per_device": self.requests_per_s_per_device,
                "target_qps": self.target_qps, "prefill_replicas": self.prefill_replicas,
                "decode_replicas": self.decode_replicas, "devices": self.devices}


def time_kv_transfer_s(rep: Replica, input_len: float) -> float:
    """Seconds to move one prompt's KV cache from a prefill to a decode replica (module doc): one
    point-to-point send per device over its scale-out link (``perf.collectives.time_p2p_s``, the
    link type's achievable bandwidth and latency), all devices in parallel."""
    total = kv_cache_bytes_per_token(rep.model, rep.precision.kv_dtype) * input_len
    out = rep.device_links.scale_out
    return float(time_p2p_s(total / rep.n_devices, out.bus_bw, out.latency_s))


def prefill_pool_rate(rep: Replica, input_len: float, slo: SLO, kv_transfer_s: float,
                      ttft_input_len: float | None = None) -> tuple[float, float]:
    """(largest prompts/s per prefill replica meeting TTFT_p, TTFT_p there)."""
    s = time_prefill_s(rep, 1, max(1, round(input_len)))[0]
    s_tail = time_prefill_s(rep, 1, max(1, round(ttft_input_len or input_len)))[0]
    limit = slo.ttft_s if slo.ttft_s is not None else math.inf
    floor = s_tail + kv_transfer_s
    if floor > limit:
        raise InfeasibleError("disaggregated prefill cannot meet the TTFT SLO",
                              reasons=[f"prefill + KV transfer of one prompt take {floor * 1e3:.1f} ms > "
                                       f"{limit * 1e3:g} ms on {rep.key}"])
    lo, hi = 1e-9, MAX_STABLE_UTILISATION / s
    if wait_quantile_s(hi * s, s, slo.percentile) + floor <= limit:
        return hi, wait_quantile_s(hi * s, s, slo.percentile) + floor
    while hi / lo - 1 > SLO_SEARCH_REL_TOL:
        mid = math.sqrt(lo * hi)
        if wait_quantile_s(mid * s, s, slo.percentile) + floor <= limit:
            lo = mid
        else:
            hi = mid
    return lo, wait_quantile_s(lo * s, s, slo.percentile) + floor


def decode_pool_rate(rep: Replica, input_len: float, output_len: float, slo: SLO) -> tuple[float, int, float]:
    """(largest requests/s per decode replica, its concurrency, TPOT there) with TPOT <= the SLO."""
    plan = memory_plan(rep)
    tokens = input_len + output_len
    require_fit(rep, plan, tokens, 1)
    cmax = max_concurrent_sequences(rep, plan, tokens)
    ctx = input_len + output_len / 2.0

    def tpot(c: int) -> float:
        return step_time(rep, decode_seqs=max(1, math.ceil(c / rep.pp)), decode_context=ctx,
                         in_flight=c).total_s

    limit = slo.tpot_s if slo.tpot_s is not None else math.inf
    if tpot(1) > limit:
        raise InfeasibleError("disaggregated decode cannot meet the TPOT SLO",
                              reasons=[f"TPOT of one sequence is {tpot(1) * 1e3:.1f} ms > {limit * 1e3:g} ms on {rep.key}"])
    lo, hi = 1, cmax
    if tpot(hi) <= limit:
        lo = hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tpot(mid) <= limit:
            lo = mid
        else:
            hi = mid
    t = tpot(lo)
    return lo / (output_len * t), lo, t


def estimate_disagg(prefill: Replica, decode: Replica, input_len: float, output_len: float, slo: SLO, *,
                    target_qps: float | None = None, ttft_input_len: float | None = None) -> DisaggEstimate:
    """Disaggregated estimate (module doc); ``target_qps`` sizes both pools."""
    xfer = time_kv_transfer_s(prefill, input_len)
    rate_p, ttft_p = prefill_pool_rate(prefill, input_len, slo, xfer, ttft_input_len)
    rate_d, conc, tpot = decode_pool_rate(decode, input_len, output_len, slo)
    per_dev = 1.0 / (prefill.n_devices / rate_p + decode.n_devices / rate_d)
    n_p = n_d = devices = None
    if target_qps is not None:
        n_p = math.ceil(target_qps / rate_p)
        n_d = math.ceil(target_qps / rate_d)
        devices = n_p * prefill.n_devices + n_d * decode.n_devices
    return DisaggEstimate(prefill_replica=prefill.to_dict(), decode_replica=decode.to_dict(), prefill_rate=rate_p,
                          decode_rate=rate_d, decode_concurrency=conc, kv_transfer_s=xfer, ttft_p_s=ttft_p,
                          tpot_s=tpot, requests_per_s_per_device=per_dev, target_qps=target_qps,
                          prefill_replicas=n_p, decode_replicas=n_d, devices=devices)
