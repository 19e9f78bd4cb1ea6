"""Engine step times for the simulator: the inference planner's step model, cached on buckets.

Every step time is :func:`xpuplan.serve.replica.step_time` (the one serving step model) evaluated at
bucketed inputs, so a replica can be any catalog hardware, TP size, dtype and engine. Buckets keep
the number of distinct evaluations small: integers up to ``EXACT_UP_TO`` are exact; above, values
are rounded to ``BUCKETS_PER_OCTAVE`` steps per power of two (a relative error of at most
1/(2·32) ≈ 1.6%, well inside the 5% the low-load check allows). With pipeline parallelism a step
carries one of ``pp`` micro-batches, so the batch and prefill tokens are divided by ``pp`` (as in
``serve.estimate.continuous_step``).
"""

from __future__ import annotations

import math
from typing import Any, Final

import numpy as np

from xpuplan.serve.replica import Replica, step_time
from xpuplan.serve.vectorised import step_time_arrays

#: Integers kept exact by the buckets.
EXACT_UP_TO: Final = 64
#: Bucket resolution (steps per doubling) of decode-only and prefill-only steps: at most 1/64 ≈ 1.6%
#: from the true value, inside the 5% the low-load check allows.
FINE_BITS: Final = 6  # 2**(6-1) = 32 buckets per octave
#: Resolution of the context and prompt dimensions of *mixed* steps (decode + prompt chunks, chunked
#: prefill under load): 8 per octave, at most 1/16 ≈ 6% on the prompt tokens and context, less on
#: the step time (which grows sub-linearly in both); the decode batch stays at the fine resolution.
COARSE_BITS: Final = 4


def bucket(x: int, bits: int = FINE_BITS) -> int:
    """``x`` rounded to the bucket grid: exact up to 2**bits, then ``2**(bits-1)`` steps per octave."""
    if x <= (1 << bits):
        return x
    shift = x.bit_length() - bits
    return ((x + (1 << (shift - 1))) >> shift) << shift


def bucket_index(x: int) -> int:
    """Position of ``x``'s fine bucket in the ascending list of fine buckets (0, 1, 2, ...)."""
    if x <= EXACT_UP_TO:
        return x
    shift = x.bit_length() - FINE_BITS
    m = (x + (1 << (shift - 1))) >> shift  # 32..64
    return EXACT_UP_TO + (shift - 1) * 32 + (m - 32)


def fine_buckets(upto: int) -> list[int]:
    """Every fine bucket value up to (and including the bucket of) ``upto``."""
    out = list(range(min(upto, EXACT_UP_TO) + 1))
    x = EXACT_UP_TO
    while out[-1] < bucket(upto):
        x += 1
        b = bucket(x)
        if b > out[-1]:
            out.append(b)
    return out


class StepTable:
    """Cached step times (s) and whether each step is compute-bound, for one replica.

    Decode-bearing steps are computed a *slab* at a time: on a miss, every decode-batch bucket up to
    the replica's sequence limit is evaluated in one vectorised call of the step model
    (``serve.vectorised.step_time_arrays``, equal to ``step_time`` point by point) for the step's
    context and prompt buckets. Prefill-only steps are computed one at a time (``step_time``).
    """

    __slots__ = ("_ds_values", "_prefill", "_slabs", "max_seqs", "pp", "rep")

    def __init__(self, rep: Replica, max_seqs: int | None = None) -> None:
        self.rep = rep
        self.pp = rep.pp
        self.max_seqs = -(-(max_seqs or rep.max_num_seqs) // rep.pp)
        self._ds_values = np.array(fine_buckets(max(1, self.max_seqs)), dtype=float)
        self._ds_values[0] = 1.0  # index 0 (no decode) is served by the prefill-only cache; keep it valid
        self._slabs: dict[tuple[int, int, int, int], tuple[list[float], list[bool]]] = {}
        self._prefill: dict[tuple[int, int, int], tuple[float, bool]] = {}

    def __len__(self) -> int:
        return len(self._slabs) * len(self._ds_values) + len(self._prefill)

    def time(self, decode_seqs: int, context: float, prefill_tokens: int = 0, prefill_len: int = 0,
             prefill_kv_len: int = 0) -> tuple[float, bool]:
        """(seconds, compute-bound?) of a step decoding ``decode_seqs`` sequences at mean context
        ``context`` plus ``prefill_tokens`` prompt tokens in chunks of ``prefill_len`` attending
        ``prefill_kv_len`` keys."""
        pp = self.pp
        if pp > 1:
            in_flight = decode_seqs + (-(-prefill_tokens // max(prefill_len, 1)) if prefill_tokens else 0)
            decode_seqs = -(-decode_seqs // pp)
            prefill_tokens = -(-prefill_tokens // pp)
            if in_flight < pp:  # fewer sequences than stages: a round of that many micro-batches (not cached here)
                st = step_time(self.rep, decode_seqs=decode_seqs, decode_context=context,
                               prefill_tokens=prefill_tokens, prefill_len=prefill_len or None,
                               prefill_kv_len=max(prefill_kv_len, prefill_len) or None, in_flight=max(1, in_flight))
                return st.total_s, st.bound == "compute"
        if decode_seqs == 0:
            key3 = (bucket(prefill_tokens), bucket(max(prefill_len, 1)), bucket(max(prefill_kv_len, prefill_len, 1)))
            hit = self._prefill.get(key3)
            if hit is None:
                pt, plen, pkv = key3
                st = step_time(self.rep, prefill_tokens=pt, prefill_len=plen, prefill_kv_len=pkv)
                hit = (st.total_s, st.bound == "compute")
                self._prefill[key3] = hit
            return hit
        ctx = int(context + 0.5) or 1
        if not prefill_tokens:  # decode-only: the hot path (bucket() inlined)
            if ctx > 64:
                sh = ctx.bit_length() - 6
                ctx = ((ctx + (1 << (sh - 1))) >> sh) << sh
            slab = self._slabs.get((ctx, 0, 0, 0))
            if slab is None:
                slab = self._slab((ctx, 0, 0, 0))
            i = decode_seqs if decode_seqs <= EXACT_UP_TO else bucket_index(decode_seqs)
            if i < len(slab[0]):
                return slab[0][i], slab[1][i]
            return self._point(decode_seqs, (ctx, 0, 0, 0))
        if prefill_tokens:
            key = (bucket(ctx, COARSE_BITS), bucket(prefill_tokens, COARSE_BITS),
                   bucket(max(prefill_len, 1), COARSE_BITS), bucket(max(prefill_kv_len, prefill_len, 1), COARSE_BITS))
        else:
            key = (bucket(ctx), 0, 0, 0)
        slab = self._slabs.get(key)
        if slab is None:
            slab = self._slab(key)
        i = bucket_index(decode_seqs)
        if i >= len(slab[0]):  # beyond the sequence limit (a caller's override): one more point
            return self._point(decode_seqs, key)
        return slab[0][i], slab[1][i]

    def _slab(self, key: tuple[int, int, int, int]) -> tuple[list[float], list[bool]]:
        ctx, pt, plen, pkv = key
        ds = self._ds_values
        kw: dict[str, Any] = {"decode_seqs": ds, "decode_context": float(ctx)}
        if pt:
            kw.update(prefill_tokens=float(pt), prefill_len=float(plen), prefill_kv_len=float(max(pkv, plen)))
        st = step_time_arrays(self.rep, **kw)
        total = np.broadcast_to(st.total_s, ds.shape)
        compute = np.broadcast_to(st.compute_s + st.dequant_s, ds.shape)
        other = np.maximum.reduce([np.broadcast_to(a, ds.shape) for a in (
            st.memory_s, st.comm_s, st.kernels_s + st.overhead_s)])
        slab = (total.tolist(), (compute >= other).tolist())
        self._slabs[key] = slab
        return slab

    def _point(self, decode_seqs: int, key: tuple[int, int, int, int]) -> tuple[float, bool]:
        ctx, pt, plen, pkv = key
        st = step_time(self.rep, decode_seqs=bucket(decode_seqs), decode_context=ctx, prefill_tokens=pt,
                       prefill_len=plen if pt else None, prefill_kv_len=max(pkv, plen) if pt else None)
        return st.total_s, st.bound == "compute"


def blocks_for(tokens: int, block_size: int) -> int:
    """KV blocks (pages) that ``tokens`` tokens occupy."""
    return max(1, math.ceil(tokens / block_size)) if tokens > 0 else 0
