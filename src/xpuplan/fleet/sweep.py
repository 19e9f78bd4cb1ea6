"""Parameter sweeps on local processes (default) or an existing Ray cluster.

A sweep is a list of tasks, each a stable key (a tuple of strings and numbers: scenario, hardware,
seed, sample...) and a JSON-like parameter mapping; one top-level (picklable) function runs a task.
Every task gets its own random seed derived from the sweep's base seed and its key
(:func:`task_seed`: SHA-256, independent of the order, the worker and the backend), and results come
back sorted by key, so a sweep gives identical results whichever backend ran it.

Backends (no home-made scheduler: the engines do the scheduling):

* ``local``: :class:`concurrent.futures.ProcessPoolExecutor` (``workers=1`` runs in this process);
* ``ray``: Ray tasks (``ray.remote``); ``address`` is ``"auto"`` (a running cluster), a cluster
  address (``ray://host:10001`` or ``host:6379``), or None to use the Ray instance already initialised
  in this process (tests start one with ``ray.init(num_cpus=1)``). Ray is the optional extra
  ``xpuplan[ray]`` and is imported only here, inside :func:`_run_ray`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from xpuplan.errors import UserInputError

Key = tuple[str | int | float, ...]
Backend = Literal["local", "ray"]

#: Largest number of tasks one sweep may hold (a typo in a grid should not start a million runs).
MAX_TASKS = 100_000


@dataclass(frozen=True)
class Task:
    """One run of a sweep: a stable ``key``, its parameters and its seed."""

    key: Key
    params: Mapping[str, Any]
    seed: int


@dataclass(frozen=True)
class TaskResult:
    key: Key
    seed: int
    value: Any = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"key": list(self.key), "seed": self.seed, "value": self.value, "error": self.error}


@dataclass(frozen=True)
class SweepResult:
    backend: str
    results: list[TaskResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "tasks": len(self.results),
                "failed": sum(r.error is not None for r in self.results),
                "results": [r.to_dict() for r in self.results]}


def task_seed(base_seed: int, key: Key) -> int:
    """Seed of the task ``key``: the first 8 bytes of SHA-256 over the base seed and the key's JSON
    (63 bits, so numpy and ``random`` accept it)."""
    text = json.dumps([base_seed, list(key)], separators=(",", ":"), sort_keys=True)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def make_tasks(items: Sequence[tuple[Key, Mapping[str, Any]]], base_seed: int = 0) -> list[Task]:
    """Tasks with seeds from their keys; keys must be unique."""
    if len(items) > MAX_TASKS:
        raise UserInputError(f"{len(items):,} tasks; at most {MAX_TASKS:,} per sweep", field="sweep")
    keys = [k for k, _ in items]
    if len(set(keys)) != len(keys):
        raise UserInputError("sweep task keys must be unique", field="sweep")
    return [Task(key=k, params=dict(p), seed=task_seed(base_seed, k)) for k, p in items]


def _call(fn: Callable[[Mapping[str, Any], int], Any], task: Task) -> TaskResult:
    """Run one task; an xpuplan error (bad input, infeasible) is that task's result, not the sweep's end."""
    from xpuplan.errors import XpuplanError

    try:
        return TaskResult(task.key, task.seed, value=fn(task.params, task.seed))
    except XpuplanError as exc:
        return TaskResult(task.key, task.seed, error=f"{type(exc).__name__}: {exc}")


def _sort_key(r: TaskResult) -> str:
    return json.dumps(list(r.key))


def _run_local(fn: Callable[[Mapping[str, Any], int], Any], tasks: list[Task], workers: int | None) -> list[TaskResult]:
    if workers == 1 or len(tasks) <= 1:
        return [_call(fn, t) for t in tasks]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_call, [fn] * len(tasks), tasks))


def _run_ray(fn: Callable[[Mapping[str, Any], int], Any], tasks: list[Task], address: str | None) -> list[TaskResult]:
    try:
        import ray
    except ImportError:
        raise UserInputError("the Ray backend needs Ray: pip install 'xpuplan[ray]'", field="--ray") from None
    if not ray.is_initialized():
        if address is None:
            raise UserInputError("no Ray instance is running in this process; give --ray auto or an address",
                                 field="--ray")
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise UserInputError(f"cannot connect to Ray at {address!r}: {exc}", field="--ray") from None
    remote = ray.remote(_call)
    return list(ray.get([remote.remote(fn, t) for t in tasks]))


def run_sweep(fn: Callable[[Mapping[str, Any], int], Any], tasks: list[Task], *, backend: Backend = "local",
              address: str | None = None, workers: int | None = None) -> SweepResult:
    """Run ``fn(params, seed)`` for every task on ``backend``; results sorted by key (module doc)."""
    if backend == "local":
        results = _run_local(fn, tasks, workers)
    elif backend == "ray":
        results = _run_ray(fn, tasks, address)
    else:
        raise UserInputError(f"unknown sweep backend {backend!r}; expected local or ray", field="backend")
    return SweepResult(backend=backend, results=sorted(results, key=_sort_key))
