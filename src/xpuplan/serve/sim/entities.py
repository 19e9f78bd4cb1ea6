"""Entities of the simulation: requests, replicas (a scheduler each) and pools.

Ids are indices local to one simulation (no global counters): a request's ``rid`` is its arrival
order, a replica's ``index`` its place in its pool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xpuplan.serve.replica import Replica
from xpuplan.serve.sim.config import PoolConfig

if TYPE_CHECKING:
    from xpuplan.serve.sim.schedulers import Scheduler


class Request:
    """One request. Times in seconds of simulated time; ``generated`` output tokens so far."""

    __slots__ = ("arrival_s", "blocks", "cls", "dec_start", "entry", "finish_s", "first_token_s", "generated", "in_len",
                 "kv0", "out_len", "phase", "pool", "preemptions", "prompt_done", "prompt_len", "replica", "rid",
                 "state")

    def __init__(self, rid: int, cls: int, arrival_s: float, in_len: int, out_len: int) -> None:
        self.rid = rid
        self.cls = cls
        self.arrival_s = arrival_s
        self.in_len = in_len
        self.out_len = out_len
        self.generated = 0
        self.first_token_s = -1.0
        self.finish_s = -1.0
        self.prompt_len = in_len  # tokens to (re)compute before decoding: prompt + output kept on preemption
        self.prompt_done = 0
        self.blocks = 0  # KV blocks held (admission and prefill); decode growth is tracked by phase
        self.dec_start = 0  # decode-step index of its first decode step on the current replica
        self.kv0 = 0  # KV tokens when it entered decode
        self.phase = 0  # decode steps at which it needs a new block: dstep % block == phase
        self.preemptions = 0
        self.pool = -1
        self.entry = -1  # pool it was routed to (a disaggregated request finishes in the decode pool)
        self.replica = -1
        self.state = 0  # 0 waiting, 1 prefilling, 2 decoding, 3 done

    @property
    def tokens(self) -> int:
        return self.in_len + self.out_len


@dataclass
class SimReplica:
    """One replica of a pool: its planner replica, its scheduler and its routing state."""

    pool: int
    index: int
    scheduler: Scheduler
    outstanding_tokens: int = 0


@dataclass
class Pool:
    """Replicas of one pool configuration; ``decode_target``: index of its decode pool, or -1."""

    index: int
    config: PoolConfig
    replica: Replica
    replicas: list[SimReplica] = field(default_factory=list)
    decode_target: int = -1
    is_decode_only: bool = False

    @property
    def name(self) -> str:
        return self.config.name

    def waiting(self) -> int:
        return sum(r.scheduler.waiting_count() for r in self.replicas)
