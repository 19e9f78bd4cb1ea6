"""Plans and step results as arrays (structure of arrays), the currency of the vectorised step model."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from xpuplan.train.plan import PRECISIONS, RECOMPUTE_MODES, ParallelPlan

PREC_INDEX = {p: i for i, p in enumerate(PRECISIONS)}
REC_INDEX = {r: i for i, r in enumerate(RECOMPUTE_MODES)}
_PREC_INDEX = PREC_INDEX
_REC_INDEX = REC_INDEX


_FIELDS = ("tp", "pp", "dp", "vpp", "cp", "ep", "sp", "zero", "rec", "mb", "ga", "prec", "epo")


@dataclass(frozen=True)
class PlanArrays:
    """Many plans as parallel int64 arrays (structure of arrays). ``rec`` and ``prec`` are indices
    into ``RECOMPUTE_MODES`` and ``PRECISIONS``; ``sp`` and ``epo`` (``ParallelPlan.ep_overlap``) are 0/1."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    vpp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    sp: np.ndarray
    zero: np.ndarray
    rec: np.ndarray
    mb: np.ndarray
    ga: np.ndarray
    prec: np.ndarray
    epo: np.ndarray

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_plans(cls, plans: list[ParallelPlan]) -> PlanArrays:
        def arr(values: list[int]) -> np.ndarray:
            return np.asarray(values, dtype=np.int64)

        return cls(
            tp=arr([p.tp for p in plans]), pp=arr([p.pp for p in plans]), dp=arr([p.dp for p in plans]),
            vpp=arr([p.vpp for p in plans]), cp=arr([p.cp for p in plans]), ep=arr([p.ep for p in plans]),
            sp=arr([int(p.sp) for p in plans]), zero=arr([p.zero_stage for p in plans]),
            rec=arr([_REC_INDEX[p.recompute] for p in plans]), mb=arr([p.micro_batch for p in plans]),
            ga=arr([p.grad_accum for p in plans]), prec=arr([_PREC_INDEX[p.precision] for p in plans]),
            epo=arr([int(p.ep_overlap) for p in plans]),
        )

    @classmethod
    def concat(cls, parts: list[PlanArrays]) -> PlanArrays:
        return cls(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS})

    def take(self, idx: np.ndarray) -> PlanArrays:
        return PlanArrays(**{f: getattr(self, f)[idx] for f in _FIELDS})

    def plan(self, i: int) -> ParallelPlan:
        return ParallelPlan(
            tp=int(self.tp[i]), pp=int(self.pp[i]), dp=int(self.dp[i]), vpp=int(self.vpp[i]), cp=int(self.cp[i]),
            ep=int(self.ep[i]), sp=bool(self.sp[i]), zero_stage=int(self.zero[i]),
            recompute=RECOMPUTE_MODES[int(self.rec[i])], micro_batch=int(self.mb[i]),  # type: ignore[arg-type]
            grad_accum=int(self.ga[i]), precision=PRECISIONS[int(self.prec[i])],  # type: ignore[arg-type]
            ep_overlap=bool(self.epo[i]),
        )


@dataclass
class StepArrays:
    """Per-plan results (seconds, bytes, tokens/s...). Breakdown terms sum to ``step_s``."""

    compute_s: np.ndarray
    recompute_s: np.ndarray
    tp_comm_s: np.ndarray
    cp_comm_s: np.ndarray
    ep_comm_s: np.ndarray
    pp_comm_s: np.ndarray
    bubble_s: np.ndarray
    dp_comm_s: np.ndarray
    zero3_comm_s: np.ndarray
    offload_s: np.ndarray
    optimizer_s: np.ndarray
    overhead_s: np.ndarray
    step_s: np.ndarray
    tokens_per_s: np.ndarray
    tokens_per_s_per_device: np.ndarray
    mfu: np.ndarray
    hfu: np.ndarray
    busy_fraction: np.ndarray
    power_w_per_device: np.ndarray
    mem_weights: np.ndarray
    mem_gradients: np.ndarray
    mem_master: np.ndarray
    mem_optimizer: np.ndarray
    mem_activations: np.ndarray
    mem_workspace: np.ndarray
    mem_total: np.ndarray
    mem_usable: float
    fits: np.ndarray
    #: host memory of an offloaded plan's layer inputs per device (0 for other plans; not in mem_total)
    mem_host: np.ndarray
    model_flops_per_token: float
    hardware_flops_per_token: np.ndarray
    #: layers whose activations a layer_offload plan keeps in host memory (0 for other plans)
    mem_offload_layers: np.ndarray | None = None
    #: layers of the busiest stage a partial plan recomputes fully (0 for other plans)
    mem_recompute_layers: np.ndarray | None = None
    #: host memory per device the offloaded activations may take (``Device.host_memory_bytes`` less the job's
    #: ``host_memory_reserve``); None when the catalog has no host-memory figure (not checked)
    mem_host_usable: float | None = None
    extra: dict[str, float] = field(default_factory=dict)
