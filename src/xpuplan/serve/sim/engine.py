"""The event loop and the measurements of a simulation.

A plain binary heap of ``(time, sequence, event)`` drives it. SimPy was not used: its generator
processes and ``Environment.step`` add a Python frame switch and several allocations per event, and
this simulator has no process that waits on anything but time — each replica's next step is one
event, computed in one call. With the O(1)-per-step bookkeeping of the schedulers, a heap loop keeps
the cost near one heap operation plus one step-table lookup per event (``benchmarks/simulate_speed.py``
prints the rate). Ties in time are broken by the order events were created (the sequence number
belongs to the simulation, not to a global counter), so a seed gives one result.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from xpuplan.catalog.assumptions import Assumptions
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.serve.disagg import time_kv_transfer_s
from xpuplan.serve.kv import memory_plan, require_fit
from xpuplan.serve.replica import Replica, make_replica
from xpuplan.serve.sim.arrivals import class_arrivals, sample_lengths
from xpuplan.serve.sim.config import SimConfig, TrafficClass
from xpuplan.serve.sim.entities import Pool, Request, SimReplica
from xpuplan.serve.sim.events import Arrival, ClientRequest, Event, KVArrived, Sample
from xpuplan.serve.sim.result import GroupStats, LatencyStats, PoolStats, Series, SimulationResult
from xpuplan.serve.sim.routing import Router, least_loaded, make_router
from xpuplan.serve.sim.schedulers import make_scheduler
from xpuplan.serve.sim.steps import StepTable, bucket

#: Events between two calls of the progress callback.
PROGRESS_EVERY = 20_000

Progress = Callable[[float], None]


def build_replica(config: SimConfig, index: int, catalog: Any, assumptions: Assumptions | None,
                  models: Mapping[str, ModelArch] | None = None) -> Replica:
    """The planner replica of pool ``index`` with the pool's engine overrides applied; ``models``
    maps names to architectures ahead of the presets."""
    from xpuplan.models import get_model

    p = config.pools[index]
    where = f"pools[{index}]"
    name = p.model or config.model or ""
    try:
        model = models[name] if models and name in models else get_model(name)
    except UserInputError as exc:
        raise UserInputError(exc.message, field=f"{where}.model" if p.model else "model", hint=exc.hint) from None
    try:
        device = catalog.get(p.hardware)
    except UserInputError as exc:
        raise UserInputError(exc.message, field=f"{where}.hardware", hint=exc.hint) from None
    try:
        rep = make_replica(model, device, tp=p.tp, pp=p.pp, ep=p.ep, etp=p.etp, dtype=p.dtype, kv_dtype=p.kv_dtype,
                           engine=p.engine, memory_fraction=p.memory_fraction, block_size_tokens=p.block_size,
                           max_num_seqs=p.max_num_seqs, assumptions=assumptions)
    except UserInputError as exc:  # a layout or precision the model or device refuses: name the pool's field
        pool_fields = {"tp", "pp", "ep", "etp", "dtype", "kv_dtype", "engine", "memory_fraction", "max_num_seqs"}
        if exc.field in pool_fields:
            raise UserInputError(exc.message, field=f"{where}.{exc.field}", hint=exc.hint) from None
        raise
    eng = rep.engine
    changes: dict[str, Any] = {}
    if p.max_batched_tokens is not None:
        changes["prefill_chunk_tokens"] = p.max_batched_tokens
    if p.chunked_prefill is not None:
        changes["chunked_prefill"] = p.chunked_prefill
    if p.reserve_full_output is not None:
        changes["reserve_full_output"] = p.reserve_full_output
    if p.batching is not None:
        changes["batching"] = p.batching
    if changes:
        rep = dataclasses.replace(rep, engine=dataclasses.replace(eng, **changes))
    return rep


class Simulation:
    """One run: entities, the event queue and the records of finished requests."""

    def __init__(self, config: SimConfig, *, seed: int, progress: Progress | None = None, catalog: Any = None,
                 assumptions: Assumptions | None = None, models: Mapping[str, ModelArch] | None = None) -> None:
        if catalog is None:
            from xpuplan.catalog import load_catalog

            catalog = load_catalog()
        self.config = config
        self.seed = seed
        self.progress = progress
        self.now = 0.0
        self._heap: list[tuple[float, int, Event]] = []
        self._seq = 0
        self.events = 0
        self.pools: list[Pool] = []
        names = [p.name for p in config.pools]
        decode_targets = {p.decode_pool for p in config.pools if p.decode_pool}
        for i, pc in enumerate(config.pools):
            rep = build_replica(config, i, catalog, assumptions, models)
            plan = memory_plan(rep)
            require_fit(rep, plan, rep.block_size_tokens, 1)
            pool = Pool(index=i, config=pc, replica=rep, is_decode_only=pc.name in decode_targets,
                        decode_target=names.index(pc.decode_pool) if pc.decode_pool else -1)
            table = StepTable(rep)
            batching = rep.engine.batching if rep.engine.batching in ("continuous", "static") else "continuous"
            if pool.decode_target >= 0 or pool.is_decode_only:
                batching = "continuous"  # disaggregated pools hand requests over step by step
            sched_cls = make_scheduler(batching)
            total = plan.kv_blocks * rep.ep if plan.kv_bytes_per_token > 0 else 1 << 40
            for j in range(pc.replicas):
                sched = sched_cls(table, pool=i, index=j, total_blocks=total, block_size=rep.block_size_tokens,
                                  budget_tokens=max(1, rep.engine.prefill_chunk_tokens), max_seqs=rep.max_num_seqs,
                                  chunked=rep.engine.chunked_prefill, reserve_full=rep.engine.reserve_full_output,
                                  prefill_only=pool.decode_target >= 0, static_batch=pc.static_batch_size,
                                  static_wait_s=pc.static_wait_ms / 1e3, split=rep.engine.split_prompts)
                pool.replicas.append(SimReplica(pool=i, index=j, scheduler=sched))
            self.pools.append(pool)
        self.table_of = {id(p): p.replicas[0].scheduler.table for p in self.pools}
        self.router: Router = make_router(config.routing, self.pools, [c.name for c in config.classes])
        self.replica_of = {id(r.scheduler): r for p in self.pools for r in p.replicas}
        # arrivals of every class, merged in time order (stable: class order breaks ties)
        per = [class_arrivals(c, i, config.classes, config.duration_s, seed) for i, c in enumerate(config.classes)]
        times = np.concatenate([a.times_s for a in per]) if per else np.zeros(0)
        cls = np.concatenate([np.full(a.times_s.size, i, dtype=np.int64) for i, a in enumerate(per)])
        order = np.lexsort((cls, times))
        self.arr_t = times[order].tolist()
        self.arr_cls = cls[order].tolist()
        self.arr_in = np.concatenate([a.input_len for a in per])[order].tolist()
        self.arr_out = np.concatenate([a.output_len for a in per])[order].tolist()
        self.n_arrivals = len(self.arr_t)
        self.closed = [c.arrival == "closed" for c in config.classes]
        self._rngs = [np.random.default_rng([seed, i, 1]) for i in range(len(config.classes))]
        self._next_rid = self.n_arrivals
        self.extra_arrivals: list[int] = []
        # records: one row per finished request
        self.rec_cls: list[int] = []
        self.rec_pool: list[int] = []
        self.rec_ttft: list[float] = []
        self.rec_tpot: list[float] = []
        self.rec_e2e: list[float] = []
        self.rec_out: list[int] = []
        self.rec_in: list[int] = []
        self.rec_pre: list[int] = []
        self.rec_finish: list[float] = []
        self.dropped_cls = [0] * len(config.classes)
        self.dropped_pool = [0] * len(config.pools)
        self.arrived_pool = [0] * len(config.pools)
        self.drop_reasons: dict[str, int] = {}
        self._xfer_cache: dict[tuple[int, int], float] = {}
        self.end_s = config.duration_s + (config.duration_s if config.drain_s is None else config.drain_s)
        self.sample_dt = config.duration_s / config.sample_points
        self.series_t: list[float] = []
        self.series_q: list[list[int]] = [[] for _ in self.pools]
        self.series_kv: list[list[float]] = [[] for _ in self.pools]
        self.series_u: list[list[float]] = [[] for _ in self.pools]
        self._last_busy = [0.0] * len(self.pools)
        self.inflight = 0

    # -- queue -----------------------------------------------------------------------------
    def push(self, events: list[Event]) -> None:
        heap = self._heap
        for e in events:
            self._seq += 1
            heapq.heappush(heap, (e.time, self._seq, e))

    def run(self) -> SimulationResult:
        if self.n_arrivals:
            self.push([Arrival(self.arr_t[0], 0)])
        self.push([Sample(0.0)])
        heap = self._heap
        end = self.end_s
        pop, push = heapq.heappop, heapq.heappush
        progress = self.progress
        n = 0
        while heap and heap[0][0] <= end:
            t, _, ev = pop(heap)
            self.now = t
            for e in ev.handle(self):
                self._seq += 1
                push(heap, (e.time, self._seq, e))
            n += 1
            if progress is not None and n % PROGRESS_EVERY == 0:
                progress(min(1.0, t / self.config.duration_s))
        self.events = n
        if progress is not None:
            progress(1.0)
        return self.result()

    # -- callbacks from events and schedulers ---------------------------------------------
    def arrive(self, i: int, now: float) -> list[Event]:
        req = Request(i, self.arr_cls[i], now, self.arr_in[i], self.arr_out[i])
        out = self._route(req, now)
        if i + 1 < self.n_arrivals:
            out.append(Arrival(self.arr_t[i + 1], i + 1))
        return out

    def _route(self, req: Request, now: float) -> list[Event]:
        rep = self.router.choose(req)
        req.pool, req.replica, req.entry = rep.pool, rep.index, rep.pool
        rep.outstanding_tokens += req.in_len + req.out_len
        self.arrived_pool[rep.pool] += 1
        self.inflight += 1
        return rep.scheduler.enqueue(self, req, now)

    def _release(self, req: Request) -> None:
        self.pools[req.pool].replicas[req.replica].outstanding_tokens -= req.in_len + req.out_len
        self.inflight -= 1
        if self.closed[req.cls]:
            t = max(req.finish_s, self.now) + self.config.classes[req.cls].think_time_s
            if t < self.config.duration_s:
                self.push([ClientRequest(t, req.cls)])

    def client_request(self, cls: int, now: float) -> list[Event]:
        """A closed-loop client's next request (lengths from its class's own generator)."""
        c = self.config.classes[cls]
        rng = self._rngs[cls]
        if c.lengths is not None:
            k = int(rng.integers(0, len(c.lengths.input_len)))
            inp, out = c.lengths.input_len[k], c.lengths.output_len[k]
        else:
            inp = int(sample_lengths(c.input_len, 1, rng)[0])
            out = int(sample_lengths(c.output_len, 1, rng)[0])
        req = Request(self._next_rid, cls, now, inp, out)
        self._next_rid += 1
        self.extra_arrivals.append(cls)
        return self._route(req, now)

    def complete(self, req: Request, t: float) -> None:
        """Record a finished request."""
        req.finish_s = t
        self._release(req)
        self.rec_cls.append(req.cls)
        self.rec_pool.append(req.entry)
        self.rec_ttft.append(req.first_token_s - req.arrival_s)
        self.rec_tpot.append((t - req.first_token_s) / (req.out_len - 1) if req.out_len > 1 else math.nan)
        self.rec_e2e.append(t - req.arrival_s)
        self.rec_out.append(req.out_len)
        self.rec_in.append(req.in_len)
        self.rec_pre.append(req.preemptions)
        self.rec_finish.append(t)

    def drop(self, req: Request, now: float, reason: str) -> None:
        """A request no replica of its pool can ever hold (e.g. longer than the KV cache)."""
        self._release(req)
        self.dropped_cls[req.cls] += 1
        self.dropped_pool[req.entry] += 1
        self.drop_reasons[reason] = self.drop_reasons.get(reason, 0) + 1

    def handoff(self, req: Request, now: float, sched: Any) -> list[Event]:
        """A prefill replica is done with ``req``: send its KV cache to the decode pool."""
        src = self.replica_of[id(sched)]
        pool = self.pools[src.pool]
        key = (src.pool, bucket(req.in_len))
        xfer = self._xfer_cache.get(key)
        if xfer is None:
            xfer = time_kv_transfer_s(pool.replica, key[1])
            self._xfer_cache[key] = xfer
        req.first_token_s = now + xfer
        if req.generated >= req.out_len:
            self.complete(req, now + xfer)
            return []
        target = least_loaded(self.pools[pool.decode_target])
        src.outstanding_tokens -= req.in_len + req.out_len
        target.outstanding_tokens += req.in_len + req.out_len
        req.replica, req.pool = target.index, target.pool
        req.prompt_len = req.in_len
        req.prompt_done = req.in_len
        req.state = 0
        return [KVArrived(now + xfer, req, target)]

    def sample(self, t: float) -> list[Event]:
        self.series_t.append(t)
        for i, p in enumerate(self.pools):
            q = used = total = 0
            busy = 0.0
            for r in p.replicas:
                s = r.scheduler
                q += s.waiting_count()
                used += s.used_blocks()
                total += s.total
                busy += s.busy_s
            self.series_q[i].append(q)
            self.series_kv[i].append(used / total if total else 0.0)
            span = self.sample_dt * len(p.replicas)
            self.series_u[i].append(min(1.0, (busy - self._last_busy[i]) / span) if t > 0 else 0.0)
            self._last_busy[i] = busy
        if len(self.series_t) >= 2 * self.config.sample_points:
            self._coarsen_series()
        nxt = t + self.sample_dt
        if nxt <= self.end_s and (nxt <= self.config.duration_s or self.inflight > 0):
            return [Sample(nxt)]
        return []

    def _coarsen_series(self) -> None:
        """Halve the time series and double the sampling interval: a drain far longer than the arrival
        window (a burst of requests at t = 0 served for minutes) keeps at most twice ``sample_points``
        samples instead of one per ``duration_s / sample_points`` of the drain. Queue length and KV use
        keep every other sample; utilisation averages each pair of intervals."""
        self.series_t = self.series_t[1::2]
        for i in range(len(self.pools)):
            self.series_q[i] = self.series_q[i][1::2]
            self.series_kv[i] = self.series_kv[i][1::2]
            u = self.series_u[i]
            self.series_u[i] = [(u[j - 1] + u[j]) / 2 for j in range(1, len(u), 2)]
        self.sample_dt *= 2

    # -- result --------------------------------------------------------------------------
    def result(self) -> SimulationResult:
        return summarise(self)


def _lat(x: np.ndarray) -> LatencyStats:
    x = x[~np.isnan(x)]
    if x.size == 0:
        return LatencyStats(count=0, mean_s=None, p50_s=None, p90_s=None, p99_s=None)
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return LatencyStats(count=int(x.size), mean_s=float(x.mean()), p50_s=float(p50), p90_s=float(p90),
                        p99_s=float(p99))


def _met(cls: TrafficClass, ttft: np.ndarray, tpot: np.ndarray, e2e: np.ndarray) -> np.ndarray:
    ok = np.ones(ttft.size, dtype=bool)
    s = cls.slo
    if s.ttft_ms is not None:
        ok &= ttft <= s.ttft_ms / 1e3
    if s.tpot_ms is not None:
        ok &= np.isnan(tpot) | (tpot <= s.tpot_ms / 1e3)
    if s.e2e_ms is not None:
        ok &= e2e <= s.e2e_ms / 1e3
    return ok


def _makespan(sim: Simulation) -> float:
    """First request to last completion of a run of bursts (every request sent at t = 0): the last completion when
    every request finished; else the clock where the run stopped (its drain ran out first). ``duration_s`` plays
    no part: a burst has no arrival window, and a longer one must not dilute the rates."""
    finished = len(sim.rec_finish)
    if sim.rec_finish and finished + sum(sim.dropped_cls) >= sim.n_arrivals + len(sim.extra_arrivals):
        return max(sim.rec_finish)
    return max(sim.now, 1e-9)


def summarise(sim: Simulation) -> SimulationResult:
    """Statistics of a finished run (see :class:`SimulationResult`)."""
    cfg = sim.config
    # rates are per second of the arrival window; a run of bursts only (an offline benchmark of a fixed number of
    # prompts) has no such window: its rates are over the makespan, as offline benchmarks print them
    bursts_only = all(c.arrival == "burst" for c in cfg.classes)
    span = _makespan(sim) if bursts_only else max(sim.now, cfg.duration_s)
    dur = span if bursts_only else cfg.duration_s
    cls_arr = np.asarray(sim.rec_cls, dtype=np.int64)
    pool_arr = np.asarray(sim.rec_pool, dtype=np.int64)
    ttft = np.asarray(sim.rec_ttft, dtype=float)
    tpot = np.asarray(sim.rec_tpot, dtype=float)
    e2e = np.asarray(sim.rec_e2e, dtype=float)
    outs = np.asarray(sim.rec_out, dtype=np.int64)
    pre = np.asarray(sim.rec_pre, dtype=np.int64)
    met = np.zeros(ttft.size, dtype=bool)
    has_slo = [any(v is not None for v in (c.slo.ttft_ms, c.slo.tpot_ms, c.slo.e2e_ms)) for c in cfg.classes]
    for i, c in enumerate(cfg.classes):
        m = cls_arr == i
        met[m] = _met(c, ttft[m], tpot[m], e2e[m])
    arrived_cls = np.bincount(np.asarray(sim.arr_cls + sim.extra_arrivals, dtype=np.int64), minlength=len(cfg.classes))

    def group(name: str, mask: np.ndarray, arrived: int, dropped: int, slo: bool) -> GroupStats:
        done = int(mask.sum())
        good = int((met & mask).sum())
        return GroupStats(
            name=name, arrived=arrived, completed=done, dropped=dropped, unfinished=max(0, arrived - done - dropped),
            ttft=_lat(ttft[mask]), tpot=_lat(tpot[mask]), e2e=_lat(e2e[mask]),
            slo_attainment=(good / arrived if arrived else None) if slo else None,
            goodput_requests_per_s=good / dur if slo else None,
            goodput_output_tokens_per_s=float(outs[met & mask].sum()) / dur if slo else None,
            output_tokens_per_s=float(outs[mask].sum()) / dur, preemptions=int(pre[mask].sum()))

    classes = [group(c.name, cls_arr == i, int(arrived_cls[i]), sim.dropped_cls[i], has_slo[i])
               for i, c in enumerate(cfg.classes)]
    from xpuplan.perf.power import power_average_w, power_profile_for

    pools: list[PoolStats] = []
    total_energy: float | None = 0.0
    total_cost: float | None = 0.0
    any_price = False
    notes: list[str] = []
    if bursts_only and sim.rec_finish:
        notes.append(f"every class is a burst: rates are over the makespan ({span:,.1f} s, first request to last "
                     f"completion), as offline benchmarks print them")
    elif bursts_only:
        notes.append(f"every class is a burst and no request completed: rates are over the {span:,.1f} s the run "
                     f"lasted")
    for i, p in enumerate(sim.pools):
        rep = p.replica
        scheds = [r.scheduler for r in p.replicas]
        busy = sum(s.busy_s for s in scheds)
        util = min(1.0, busy / (span * len(scheds)))
        comp = sum(s.compute_s for s in scheds) / busy if busy > 0 else 0.0
        devices = rep.n_devices * len(scheds)
        energy = power = None
        try:
            prof = power_profile_for(rep.device)
            power = power_average_w(prof, util, min(1.0, comp))
            energy = power * devices * span
        except UserInputError as exc:
            notes.append(f"pool {p.name}: no energy ({exc.render()})")
        if energy is None or total_energy is None:
            total_energy = None
        else:
            total_energy += energy
        cost = None
        price = p.config.price_per_device_hour
        if price is not None:
            any_price = True
            cost = price * devices * span / 3600.0
            if total_cost is not None:
                total_cost += cost
        else:
            total_cost = None
        mask = pool_arr == i
        pools.append(PoolStats(
            name=p.name, hardware=rep.device.id, model=rep.model.id, tp=rep.tp, dtype=rep.precision.scheme,
            kv_dtype=rep.precision.kv_dtype, engine=rep.engine.id, batching=type(scheds[0]).name, replicas=len(scheds), devices=devices,
            role="prefill" if p.decode_target >= 0 else "decode" if p.is_decode_only else "serve",
            kv_blocks_per_replica=scheds[0].total if scheds[0].total < (1 << 40) else 0,
            kv_peak_fraction=max(s.peak_used / s.total for s in scheds) if scheds[0].total else 0.0,
            utilisation=util, compute_bound_fraction=comp, steps=sum(s.steps for s in scheds),
            preemptions=sum(s.preemptions for s in scheds), mean_power_w=power, energy_j=energy, cost_usd=cost,
            requests=group(p.name, mask, sim.arrived_pool[i], sim.dropped_pool[i], any(has_slo)),
            step_cache_entries=len(scheds[0].table)))
    out_tokens = int(outs.sum())
    any_slo = any(has_slo)
    good = int(met.sum())
    arrived = sim.n_arrivals + len(sim.extra_arrivals)
    dropped = sum(sim.dropped_cls)
    for reason, k in sorted(sim.drop_reasons.items()):
        notes.append(f"{k} request(s) dropped: {reason}")
    if not any_price:
        total_cost = None
    per_m = (total_cost / out_tokens * 1e6) if (total_cost is not None and out_tokens) else None
    quant: dict[str, dict[str, list[float]]] = {}
    qs = np.arange(101)
    for i, c in enumerate(cfg.classes):
        m = cls_arr == i
        d: dict[str, list[float]] = {}
        for key, arr in (("ttft_s", ttft[m]), ("tpot_s", tpot[m]), ("e2e_s", e2e[m])):
            a = arr[~np.isnan(arr)]
            d[key] = np.percentile(a, qs).tolist() if a.size else []
        quant[c.name] = d
    names = [p.name for p in sim.pools]
    return SimulationResult(
        seed=sim.seed, duration_s=dur, rate_window="makespan" if bursts_only else "arrivals", simulated_s=sim.now, arrived=arrived, completed=int(ttft.size),
        dropped=dropped, unfinished=max(0, arrived - int(ttft.size) - dropped), classes=classes, pools=pools,
        output_tokens=out_tokens, output_tokens_per_s=out_tokens / dur,
        slo_attainment=(good / arrived if arrived else None) if any_slo else None,
        goodput_requests_per_s=good / dur if any_slo else None, energy_j=total_energy, cost_usd=total_cost,
        cost_per_million_output_tokens_usd=per_m,
        series=Series(times_s=sim.series_t, queue_len=dict(zip(names, sim.series_q, strict=True)),
                      kv_used_fraction=dict(zip(names, sim.series_kv, strict=True)),
                      utilisation=dict(zip(names, sim.series_u, strict=True))),
        events=sim.events, notes=notes, quantiles=quant)
