"""Does a training plan fit in device memory? The answer every front end gives.

:func:`training_fit` applies the plan's validity rules (:mod:`xpuplan.train.validity`, the same as
``estimate`` and ``search``) and then the one training-memory model
(:func:`xpuplan.perf.memory.training_memory_arrays`, through the same step model ``estimate``
uses), so ``memory train`` and ``train estimate`` cannot disagree on a layout: a layout one
rejects the other rejects with the same message, and "fits" means the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xpuplan.catalog.assumptions import Assumptions, default_assumptions
from xpuplan.catalog.device import Device
from xpuplan.models.arch import ModelArch
from xpuplan.perf.memory import host_usable_bytes
from xpuplan.train.estimate import MemoryBreakdown, memory_reasons
from xpuplan.train.plan import ParallelPlan
from xpuplan.train.step import PlanArrays, StepModel
from xpuplan.train.validity import check_plan
from xpuplan.workload.training import TrainingJob


@dataclass(frozen=True)
class TrainingFit:
    """Memory per device of one plan against the device's usable memory."""

    model_id: str
    device_id: str
    plan: ParallelPlan
    memory: MemoryBreakdown
    fits: bool
    reasons: tuple[str, ...]

    @property
    def headroom_bytes(self) -> float:
        return self.memory.usable_bytes - self.memory.total_bytes

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model_id, "hardware": self.device_id, "plan": self.plan.to_dict(),
                "memory": self.memory.to_dict(), "fits": self.fits, "headroom_bytes": self.headroom_bytes,
                "reasons": list(self.reasons)}


def training_fit(
    model: ModelArch,
    device: Device,
    plan: ParallelPlan,
    job: TrainingJob | None = None,
    *,
    n_devices: int | None = None,
    check_global_batch: bool = False,
    uneven_pipeline: bool = False,
    assumptions: Assumptions | None = None,
    step_model: StepModel | None = None,
) -> TrainingFit:
    """Memory fit of ``plan`` for ``job`` on ``device``.

    ``UserInputError`` (naming the field) for a plan that breaks a rule (tp not dividing the heads,
    pp not dividing the layers, ...); ``n_devices`` also checks tp·pp·dp·cp against it, and
    ``check_global_batch`` the job's global batch against dp·micro_batch·grad_accum. The activations
    of a pipeline's first stage depend on the micro-batches in flight, min(pp, plan.grad_accum).
    """
    job = job or TrainingJob()
    check_plan(plan, model, seq_len=job.seq_len, n_devices=n_devices, uneven_pipeline=uneven_pipeline,
               global_batch_seqs=job.global_batch_seqs if check_global_batch else None)
    a = assumptions or default_assumptions()
    sm = step_model or StepModel(model, device, a.efficiency(device), job)
    mem = sm.memory(PlanArrays.from_plans([plan]))
    breakdown = MemoryBreakdown(
        weights_bytes=float(mem["weights"][0]), gradients_bytes=float(mem["grads"][0]),
        master_weights_bytes=float(mem["master"][0]), optimizer_states_bytes=float(mem["opt"][0]),
        activations_bytes=float(mem["acts"][0]), workspace_bytes=float(mem["workspace"][0]),
        total_bytes=float(mem["total"][0]), capacity_bytes=device.memory_bytes,
        usable_bytes=device.memory_bytes * (1.0 - job.memory_reserve), host_offload_bytes=float(mem["host"][0]),
        offload_layers=int(mem["offload_layers"][0]), recompute_layers=int(mem["recompute_layers"][0]),
        host_usable_bytes=host_usable_bytes(device.host_memory_bytes, job.host_memory_reserve),
    )
    reasons = memory_reasons(breakdown, plan.n_devices, device.id)
    return TrainingFit(model_id=model.id, device_id=device.id, plan=plan, memory=breakdown, fits=not reasons,
                       reasons=tuple(reasons))
