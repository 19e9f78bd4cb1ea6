"""Routing policies: one base class, one registry (:data:`ROUTERS`), one class per policy.

A router picks the replica for each arriving request among the *entry* pools (every pool that is
not only the decode side of a disaggregated pair). Inside a pool the replica with the fewest
outstanding tokens (prompt + output of its unfinished requests) is taken, ties to the lowest
index; round robin alone cycles over replicas. To add a policy: subclass :class:`Router`, give it a
``name``, decorate it with :func:`register_router`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xpuplan.errors import UserInputError
from xpuplan.serve.sim.config import RoutingConfig
from xpuplan.serve.sim.entities import Pool, Request, SimReplica


def least_loaded(pool: Pool) -> SimReplica:
    """The replica of ``pool`` with the fewest outstanding tokens (lowest index on ties)."""
    best = pool.replicas[0]
    for r in pool.replicas:
        if r.outstanding_tokens < best.outstanding_tokens:
            best = r
    return best


class Router:
    """Base class; ``choose`` returns the replica for a request."""

    name: ClassVar[str] = ""

    def __init__(self, config: RoutingConfig, pools: Sequence[Pool], class_names: Sequence[str]) -> None:
        self.config = config
        self.pools = list(pools)
        self.entry = [p for p in pools if not p.is_decode_only]
        self.class_names = list(class_names)
        self.by_name = {p.name: p for p in pools}
        if not self.entry:
            raise UserInputError("every pool is a decode pool; no pool takes new requests", field="pools")

    def pools_for(self, cls: int) -> list[Pool]:
        """Pools a request of class ``cls`` may reach (used to check SLOs against unloaded latency)."""
        return self.entry

    def choose(self, req: Request) -> SimReplica:
        raise NotImplementedError


ROUTERS: dict[str, type[Router]] = {}


def register_router(cls: type[Router]) -> type[Router]:
    """Add a policy to :data:`ROUTERS` (a duplicate name is an error, not a silent overwrite)."""
    if cls.name in ROUTERS:
        raise ValueError(f"router {cls.name!r} registered twice")
    ROUTERS[cls.name] = cls
    return cls


def _pool(router: Router, name: str | None, field: str) -> Pool:
    if name is None:
        raise UserInputError(f"routing policy {router.name!r} needs {field.split('.')[-1]}", field=field)
    p = router.by_name.get(name)
    if p is None:
        raise UserInputError(f"unknown pool {name!r}; pools: {', '.join(router.by_name)}", field=field)
    if p.is_decode_only:
        raise UserInputError(f"pool {name!r} is a decode pool; route requests to its prefill pool", field=field)
    return p


@register_router
class RoundRobin(Router):
    """Cycle over every replica of the entry pools."""

    name = "round_robin"

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self._all = [r for p in self.entry for r in p.replicas]
        self._next = 0

    def choose(self, req: Request) -> SimReplica:
        r = self._all[self._next]
        self._next = (self._next + 1) % len(self._all)
        return r


@register_router
class LeastOutstanding(Router):
    """The replica with the fewest outstanding tokens over all entry pools."""

    name = "least_outstanding"

    def choose(self, req: Request) -> SimReplica:
        return min((least_loaded(p) for p in self.entry), key=lambda r: r.outstanding_tokens)


@register_router
class ClassBased(Router):
    """Each class goes to the pool its rule names (``rules``), else to ``default``."""

    name = "class_based"

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        cfg = self.config
        default = _pool(self, cfg.default, "routing.default") if cfg.default is not None else None
        self._target: list[Pool] = []
        for name in self.class_names:
            if name in cfg.rules:
                self._target.append(_pool(self, cfg.rules[name], f"routing.rules.{name}"))
            elif default is not None:
                self._target.append(default)
            else:
                raise UserInputError(f"class {name!r} has no rule and there is no default pool",
                                     field=f"routing.rules.{name}")

    def pools_for(self, cls: int) -> list[Pool]:
        return [self._target[cls]]

    def choose(self, req: Request) -> SimReplica:
        return least_loaded(self._target[req.cls])


@register_router
class SpillOver(Router):
    """``primary`` while its waiting requests are at most ``max_queue``, else ``secondary``."""

    name = "spill_over"

    def __init__(self, *args: object, **kw: object) -> None:
        super().__init__(*args, **kw)  # type: ignore[arg-type]
        self._primary = _pool(self, self.config.primary, "routing.primary")
        self._secondary = _pool(self, self.config.secondary, "routing.secondary")
        if self._primary is self._secondary:
            raise UserInputError("primary and secondary are the same pool", field="routing.secondary")
        self.spilled = 0

    def pools_for(self, cls: int) -> list[Pool]:
        return [self._primary, self._secondary]

    def choose(self, req: Request) -> SimReplica:
        if self._primary.waiting() > self.config.max_queue:
            self.spilled += 1
            return least_loaded(self._secondary)
        return least_loaded(self._primary)


def make_router(config: RoutingConfig, pools: Sequence[Pool], class_names: Sequence[str]) -> Router:
    """The router of ``config.policy`` (UserInputError naming ``routing.policy`` if unknown)."""
    cls = ROUTERS.get(config.policy)
    if cls is None:
        raise UserInputError(f"unknown routing policy {config.policy!r}; known: {', '.join(ROUTERS)}",
                             field="routing.policy")
    return cls(config, pools, class_names)
