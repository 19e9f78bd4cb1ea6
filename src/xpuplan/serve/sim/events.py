"""Events of the simulation. Each has a time and a ``handle(sim)`` that changes the entities it
concerns and returns the new events it causes (it never pushes onto the queue itself)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from xpuplan.serve.sim.engine import Simulation
    from xpuplan.serve.sim.entities import Request, SimReplica
    from xpuplan.serve.sim.schedulers import Scheduler


class Event:
    """Base event: ``time`` in seconds of simulated time."""

    __slots__ = ("time",)

    def __init__(self, time: float) -> None:
        self.time = time

    def handle(self, sim: Simulation) -> list[Event]:
        raise NotImplementedError


class Arrival(Event):
    """Request number ``index`` (arrival order) arrives; returns its routing's events and the next arrival."""

    __slots__ = ("index",)

    def __init__(self, time: float, index: int) -> None:
        super().__init__(time)
        self.index = index

    def handle(self, sim: Simulation) -> list[Event]:
        return sim.arrive(self.index, self.time)


class ClientRequest(Event):
    """A closed-loop client of class ``cls`` sends its next request."""

    __slots__ = ("cls",)

    def __init__(self, time: float, cls: int) -> None:
        super().__init__(time)
        self.cls = cls

    def handle(self, sim: Simulation) -> list[Event]:
        return sim.client_request(self.cls, self.time)


class StepDone(Event):
    """A replica's engine step (or static batch) ends."""

    __slots__ = ("scheduler",)

    def __init__(self, time: float, scheduler: Scheduler) -> None:
        super().__init__(time)
        self.scheduler = scheduler

    def handle(self, sim: Simulation) -> list[Event]:
        return self.scheduler.on_step_done(sim, self.time)


class StaticTimeout(Event):
    """A static-batching replica's wait-to-fill timeout expires."""

    __slots__ = ("scheduler",)

    def __init__(self, time: float, scheduler: Scheduler) -> None:
        super().__init__(time)
        self.scheduler = scheduler

    def handle(self, sim: Simulation) -> list[Event]:
        return self.scheduler.on_timeout(sim, self.time)


class KVArrived(Event):
    """A prefilled request's KV cache reaches its decode replica (disaggregated serving)."""

    __slots__ = ("replica", "request")

    def __init__(self, time: float, request: Request, replica: SimReplica) -> None:
        super().__init__(time)
        self.request = request
        self.replica = replica

    def handle(self, sim: Simulation) -> list[Event]:
        return self.replica.scheduler.enqueue(sim, self.request, self.time)


class Sample(Event):
    """Record the time series (queue length, KV use, utilisation); returns the next sample."""

    __slots__ = ()

    def handle(self, sim: Simulation) -> list[Event]:
        return sim.sample(self.time)
