"""Replica schedulers (policies): continuous batching in the style of vLLM/SGLang, and static batching.

**Continuous batching** (one engine step at a time; each step is one event):

* Every running sequence in the decode phase adds one token per step. The step's token budget
  (``max_batched_tokens``, the engine's prefill chunk) is filled with decode tokens first, then with
  prompt tokens of admitted requests (FCFS), at most ``max_num_seqs`` running requests.
* With chunked prefill the prompt tokens ride in the same step as the decode tokens (Sarathi /
  vLLM V1 style); a long prompt is split over several steps, unless the engine packs whole prompts
  only (``split_prompts: false``: TensorRT-LLM in-flight batching without chunked context, its
  default), where a prompt that does not fit the step's remaining budget waits. Without it (vLLM V0 default, MindIE,
  LMDeploy) a step is either prefill-only (prompts waiting are served first, as vLLM V0 does) or
  decode-only.
* KV cache: paged blocks of ``block_size`` tokens. A request is admitted when its prompt's blocks are
  free, keeping a watermark of ``WATERMARK_FRACTION`` of the blocks free (vLLM's block manager
  default 0.01) unless nothing runs. During decode a sequence takes a new block whenever its next
  token starts one. If a step needs more blocks than are free, the most recently admitted running
  request is **preempted by recompute** (vLLM's default policy): its blocks are freed, it goes to
  the front of the queue, and its prompt plus the tokens generated so far are prefilled again.
  Engines that reserve the whole output at admission (TensorRT-LLM GUARANTEED_NO_EVICT, MindIE;
  ``reserve_full_output``) take prompt+output blocks up front and are never preempted.
* Bookkeeping is O(1) per step, whatever the batch: all decoding sequences advance together, so a
  sequence that entered decode at step s0 with k0 KV tokens needs a new block exactly at steps
  s ≡ s0 − k0 (mod block_size); a count per residue gives the blocks a step needs, a sum of
  (k0 − s0) gives the mean context, and completions are filed under the step they end on.

**Static batching**: a batch of up to ``static_batch_size`` requests starts when it is full or when
its oldest request has waited ``static_wait_ms``; the prompts are prefilled together (forwards of at
most the token budget), then the whole batch decodes in lock-step until its longest output is done
(finished sequences keep their slot: padding). Every request's prompt+output blocks are reserved.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final

from xpuplan.errors import UserInputError
from xpuplan.serve.sim.entities import Request
from xpuplan.serve.sim.events import Event, StaticTimeout, StepDone
from xpuplan.serve.sim.steps import StepTable, blocks_for

if TYPE_CHECKING:
    from xpuplan.serve.sim.engine import Simulation

#: Share of KV blocks kept free when admitting (vLLM block manager ``watermark=0.01``).
WATERMARK_FRACTION: Final = 0.01


class Scheduler:
    """Base of replica schedulers; subclasses register in :data:`SCHEDULERS` under ``name``."""

    name: ClassVar[str] = ""

    def __init__(self, table: StepTable, *, pool: int, index: int, total_blocks: int, block_size: int,
                 budget_tokens: int, max_seqs: int, chunked: bool, reserve_full: bool, prefill_only: bool,
                 static_batch: int, static_wait_s: float, split: bool = True) -> None:
        self.table = table
        self.pool = pool
        self.index = index
        self.total = total_blocks
        self.free = total_blocks
        self.block = block_size
        self.budget = budget_tokens
        self.max_seqs = max_seqs
        self.chunked = chunked
        # whether a prompt may be split across mixed steps (chunked context) or only packed whole
        # (TensorRT-LLM in-flight batching by default); prefill-only steps always split long prompts
        self.split = split or not chunked
        self.reserve_full = reserve_full
        self.prefill_only = prefill_only
        self.static_batch = static_batch
        self.static_wait_s = static_wait_s
        self.waiting: deque[Request] = deque()
        self.busy = False
        self.busy_s = 0.0
        self.compute_s = 0.0
        self.preemptions = 0
        self.steps = 0
        self.peak_used = 0

    def waiting_count(self) -> int:
        return len(self.waiting)

    def used_blocks(self) -> int:
        return self.total - self.free

    def enqueue(self, sim: Simulation, req: Request, now: float) -> list[Event]:
        """Queue ``req``; start a step if the replica is idle."""
        raise NotImplementedError

    def on_step_done(self, sim: Simulation, now: float) -> list[Event]:
        raise NotImplementedError

    def on_timeout(self, sim: Simulation, now: float) -> list[Event]:
        return []

    def check_invariants(self) -> None:
        """Internal consistency (tests): blocks never over capacity, never negative."""
        assert 0 <= self.free <= self.total, (self.free, self.total)


SCHEDULERS: dict[str, type[Scheduler]] = {}


def register_scheduler(cls: type[Scheduler]) -> type[Scheduler]:
    """Add a scheduler to :data:`SCHEDULERS` (one registry; a duplicate name is an error)."""
    if cls.name in SCHEDULERS:
        raise ValueError(f"scheduler {cls.name!r} registered twice")
    SCHEDULERS[cls.name] = cls
    return cls


@register_scheduler
class ContinuousScheduler(Scheduler):
    """Continuous batching with paged KV and preemption by recompute (module doc)."""

    name = "continuous"

    def __init__(self, table: StepTable, **kw: Any) -> None:
        super().__init__(table, **kw)
        self.running: dict[int, Request] = {}  # admission order (dicts keep insertion order)
        self.prefilling: list[Request] = []
        self.n_dec = 0
        self.phase_count = [0] * self.block
        self.ctx_const = 0  # sum over decoding requests of (kv0 - dec_start)
        self.finish_at: dict[int, list[Request]] = {}
        self.dstep = 0  # decode steps done
        self.watermark = int(WATERMARK_FRACTION * self.total)
        self._chunks: list[tuple[Request, int]] = []
        self._did_decode = False

    # -- admission ---------------------------------------------------------------------
    def _blocks_needed(self, req: Request) -> int:
        extra = req.out_len - req.generated if self.reserve_full else 0
        return blocks_for(req.prompt_len + extra, self.block)

    def _admit(self, sim: Simulation, now: float, prompt_room: int) -> None:
        """Admit waiting requests FCFS while sequences, blocks and ``prompt_room`` tokens allow."""
        waiting = self.waiting
        while waiting and len(self.running) < self.max_seqs:
            req = waiting[0]
            need = self._blocks_needed(req)
            if need > self.total:
                waiting.popleft()
                sim.drop(req, now, "needs more KV blocks than the replica has")
                continue
            prefilled = req.prompt_done >= req.prompt_len
            if not prefilled and prompt_room <= 0:
                break
            if need > self.free - (self.watermark if self.running else 0):
                break
            waiting.popleft()
            self.free -= need
            req.blocks = need
            self.running[req.rid] = req
            if prefilled:
                self._enter_decode(req)
            else:
                req.state = 1
                self.prefilling.append(req)
                prompt_room -= req.prompt_len - req.prompt_done

    def _enter_decode(self, req: Request) -> None:
        req.state = 2
        req.kv0 = req.prompt_len
        req.dec_start = s0 = self.dstep
        req.phase = (s0 - req.kv0) % self.block
        self.phase_count[req.phase] += 1
        self.n_dec += 1
        self.ctx_const += req.kv0 - s0
        end = s0 + (req.out_len - req.generated) - 1
        self.finish_at.setdefault(end, []).append(req)

    def _leave_decode(self, req: Request) -> int:
        """Remove a decoding request; returns the blocks it held."""
        self.phase_count[req.phase] -= 1
        self.n_dec -= 1
        self.ctx_const -= req.kv0 - req.dec_start
        done = self.dstep - req.dec_start
        req.generated += done
        if self.reserve_full:
            return req.blocks
        return blocks_for(req.kv0 + done, self.block)

    def _preempt(self, sim: Simulation, now: float) -> None:
        victim = self.running.pop(next(reversed(self.running)))
        if victim.state == 2:
            freed = self._leave_decode(victim)
        else:
            freed = victim.blocks
            self.prefilling.remove(victim)
        self.free += freed
        victim.blocks = 0
        victim.state = 0
        victim.prompt_len = victim.in_len + victim.generated
        victim.prompt_done = 0
        victim.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(victim)

    # -- steps ------------------------------------------------------------------------
    def enqueue(self, sim: Simulation, req: Request, now: float) -> list[Event]:
        req.state = 0
        self.waiting.append(req)
        return [] if self.busy else self._start(sim, now)

    def _start(self, sim: Simulation, now: float) -> list[Event]:
        if not self.waiting and not self.prefilling and self.n_dec:
            return self._decode_only(sim, now)
        return self._start_general(sim, now)

    def _start_general(self, sim: Simulation, now: float) -> list[Event]:
        budget = self.budget
        if self.chunked:
            in_prefill = sum(r.prompt_len - r.prompt_done for r in self.prefilling)
            self._admit(sim, now, budget - self.n_dec - in_prefill)
            left = budget - self.n_dec
            do_decode = self.n_dec > 0
        else:
            in_prefill = sum(r.prompt_len - r.prompt_done for r in self.prefilling)
            self._admit(sim, now, budget - in_prefill)
            left = budget
            do_decode = not self.prefilling and self.n_dec > 0
        chunks: list[tuple[Request, int]] = []
        if self.prefilling and (self.chunked or not do_decode):
            for r in self.prefilling:
                if left <= 0:
                    break
                rest = r.prompt_len - r.prompt_done
                if not self.split and rest > left and chunks:
                    break  # whole prompts only: it waits for the next step
                c = rest if not self.split else min(rest, left)
                chunks.append((r, c))
                left -= c
        if do_decode and not self.reserve_full:
            need = self.phase_count[self.dstep % self.block]
            while need > self.free and self.running:
                self._preempt(sim, now)
                need = self.phase_count[self.dstep % self.block]
            if chunks:
                chunks = [(r, c) for r, c in chunks if r.state == 1]
            self.free -= need
            do_decode = self.n_dec > 0
        used = self.total - self.free
        if used > self.peak_used:
            self.peak_used = used
        if not chunks and not do_decode:
            self.busy = False
            return []
        n = self.n_dec if do_decode else 0
        ctx = (self.ctx_const + n * self.dstep) / n if n else 0.0
        if chunks:
            pt = sum(c for _, c in chunks)
            plen = max(1, round(pt / len(chunks)))
            pkv = max(plen, round(sum(r.prompt_done + c for r, c in chunks) / len(chunks)))
        else:
            pt = plen = pkv = 0
        dt, compute = self.table.time(n, ctx, pt, plen, pkv)
        self.busy = True
        self.busy_s += dt
        if compute:
            self.compute_s += dt
        self.steps += 1
        self._chunks = chunks
        self._did_decode = do_decode
        return [StepDone(now + dt, self)]

    def _decode_only(self, sim: Simulation, now: float) -> list[Event]:
        """The common step under load: only decode tokens (same rules as :meth:`_start`, fewer checks)."""
        if not self.reserve_full:
            need = self.phase_count[self.dstep % self.block]
            if need > self.free:
                return self._start_general(sim, now)
            self.free -= need
            used = self.total - self.free
            if used > self.peak_used:
                self.peak_used = used
        n = self.n_dec
        dt, compute = self.table.time(n, (self.ctx_const + n * self.dstep) / n)
        self.busy = True
        self.busy_s += dt
        if compute:
            self.compute_s += dt
        self.steps += 1
        self._chunks = []
        self._did_decode = True
        return [StepDone(now + dt, self)]

    def on_step_done(self, sim: Simulation, now: float) -> list[Event]:
        events: list[Event] = []
        if self._did_decode:
            s = self.dstep
            ending = self.finish_at.pop(s, None)
            self.dstep = s + 1
            if ending:
                for req in ending:
                    if req.state == 2 and req.dec_start + (req.out_len - req.generated) - 1 == s:
                        self.free += self._leave_decode(req)
                        del self.running[req.rid]
                        req.state = 3
                        sim.complete(req, now)
        chunks = self._chunks
        if not chunks:
            return self._start(sim, now)
        for req, c in chunks:
            if req.state != 1:
                continue
            req.prompt_done += c
            if req.prompt_done < req.prompt_len:
                continue
            self.prefilling.remove(req)
            req.generated += 1
            if self.prefill_only:
                del self.running[req.rid]
                self.free += req.blocks
                req.blocks = 0
                req.state = 3
                events.extend(sim.handoff(req, now, self))
                continue
            if req.first_token_s < 0:
                req.first_token_s = now
            if req.generated >= req.out_len:
                del self.running[req.rid]
                self.free += req.blocks
                req.state = 3
                sim.complete(req, now)
            else:
                self._enter_decode(req)
        self._chunks = []
        events.extend(self._start(sim, now))
        return events

    def check_invariants(self) -> None:
        super().check_invariants()
        held = 0
        writing = 1 if (self.busy and self._did_decode) else 0  # the in-flight step's token has its block
        for r in self.running.values():
            if r.state == 2 and not self.reserve_full:
                held += blocks_for(r.kv0 + self.dstep - r.dec_start + writing, self.block)
            else:
                held += r.blocks
        assert held == self.total - self.free, (held, self.total - self.free)
        assert len(self.running) <= self.max_seqs
        assert self.n_dec == sum(1 for r in self.running.values() if r.state == 2)


@register_scheduler
class StaticScheduler(Scheduler):
    """Static batches: wait to fill (up to a timeout), prefill together, decode in lock-step (module doc)."""

    name = "static"

    def __init__(self, table: StepTable, **kw: Any) -> None:
        super().__init__(table, **kw)
        self.batch: list[Request] = []
        self._timeout_at = -1.0
        self.batches = 0

    def enqueue(self, sim: Simulation, req: Request, now: float) -> list[Event]:
        req.state = 0
        self.waiting.append(req)
        return [] if self.busy else self._try_start(sim, now)

    def on_timeout(self, sim: Simulation, now: float) -> list[Event]:
        self._timeout_at = -1.0
        return [] if self.busy else self._try_start(sim, now)

    def _try_start(self, sim: Simulation, now: float) -> list[Event]:
        w = self.waiting
        if not w:
            return []
        size = min(self.static_batch, self.max_seqs)
        deadline = w[0].arrival_s + self.static_wait_s
        if len(w) < size and now < deadline - 1e-12:
            if self._timeout_at != deadline:
                self._timeout_at = deadline
                return [StaticTimeout(deadline, self)]
            return []
        batch: list[Request] = []
        while w and len(batch) < size:
            req = w[0]
            need = blocks_for(req.in_len + req.out_len, self.block)
            if need > self.total:
                w.popleft()
                sim.drop(req, now, "needs more KV blocks than the replica has")
                continue
            if need > self.free:
                break
            w.popleft()
            self.free -= need
            req.blocks = need
            req.state = 1
            batch.append(req)
        if not batch:
            return []
        self.peak_used = max(self.peak_used, self.total - self.free)
        n = len(batch)
        prompt = sum(r.in_len for r in batch)
        mean_in = prompt / n
        t_pre, left = 0.0, prompt
        while left > 0:
            pt = min(self.budget, left)
            plen = max(1, min(round(mean_in), pt))
            dt, _ = self.table.time(0, 0.0, pt, plen, plen)
            t_pre += dt
            left -= pt
        longest = max(r.out_len for r in batch)
        cum = [0.0]
        t = 0.0
        for j in range(1, longest):
            dt, _ = self.table.time(n, mean_in + j)
            t += dt
            cum.append(t)
        start = now + t_pre
        for r in batch:
            r.first_token_s = start
            r.finish_s = start + cum[r.out_len - 1]
        self.batch = batch
        self.busy = True
        self.busy_s += t_pre + t
        self.compute_s += t_pre
        self.steps += 1 + (longest - 1)
        self.batches += 1
        return [StepDone(start + t, self)]

    def on_step_done(self, sim: Simulation, now: float) -> list[Event]:
        for r in self.batch:
            self.free += r.blocks
            r.blocks = 0
            r.generated = r.out_len
            r.state = 3
            sim.complete(r, r.finish_s)
        self.batch = []
        self.busy = False
        return self._try_start(sim, now)


def make_scheduler(name: str) -> Callable[..., Scheduler]:
    """The registered scheduler class ``name``."""
    try:
        return SCHEDULERS[name]
    except KeyError:
        raise UserInputError(f"unknown batching {name!r}; known: {', '.join(SCHEDULERS)}", field="batching") from None
