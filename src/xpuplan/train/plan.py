"""``ParallelPlan``: how one training step is split over devices.

A plan is a validated value object (checked on construction; mistakes raise ``UserInputError``
naming the field). Every rule lives in :mod:`xpuplan.train.validity`: those of the plan alone run
on construction; those that need the model or the job (heads divisible by TP, layers by PP x VPP,
experts by EP, batch by DP x micro-batch, ...) in :func:`~xpuplan.train.validity.plan_issues`
(re-exported here with :func:`~xpuplan.train.validity.check_plan`). Memory fit is not a rule: it
is a feasibility result of the step model (``train.step``).

Rank order (Megatron-LM's default "tp-cp-ep-dp-pp"): tensor-parallel ranks are adjacent, then
context-parallel, then data-parallel (expert-parallel groups are carved out of dp x cp), then
pipeline stages. The collective model uses this order to decide which groups cross scale-up
domains.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from xpuplan.models.arch import ModelArch
from xpuplan.train import validity
from xpuplan.train.validity import ZERO_STAGES, PlanIssue, check_plan, plan_issues
from xpuplan.workload.vocabulary import RECOMPUTE_MODES, Recompute
from xpuplan.workload.vocabulary import TRAIN_PRECISIONS as PRECISIONS
from xpuplan.workload.vocabulary import TrainPrecision as Precision

__all__ = ["PRECISIONS", "RECOMPUTE_MODES", "ZERO_STAGES", "ParallelPlan", "PlanIssue", "Precision", "Recompute",
           "check_plan", "make_plan", "plan_issues"]


@dataclass(frozen=True, kw_only=True)
class ParallelPlan:
    """One parallel configuration of a training step.

    Sizes multiply to the device count: n = tp · pp · dp · cp. Expert parallelism is carved out of
    dp · cp (it does not add devices). ``grad_accum`` is the number of micro-batches each
    data-parallel rank runs per optimizer step, so the global batch is dp · micro_batch · grad_accum
    sequences.
    """

    tp: int = 1
    """tensor-parallel size (Megatron column/row-parallel linears)"""
    pp: int = 1
    """pipeline-parallel stages"""
    dp: int = 1
    """data-parallel replicas (ZeRO/FSDP shards over dp · cp)"""
    vpp: int = 1
    """virtual pipeline stages per device (interleaved 1F1B); 1 = plain 1F1B"""
    cp: int = 1
    """context-parallel size (ring attention over sequence chunks)"""
    ep: int = 1
    """expert-parallel size for MoE layers: a divisor of dp · cp, or, folded (MoE parallel folding), of tp · cp · dp"""
    sp: bool = False
    """Megatron sequence parallelism (needs tp > 1)"""
    zero_stage: int = 1
    """0 plain DDP, 1 optimizer states sharded (Megatron distributed optimizer), 2 + gradients, 3 + weights (FSDP)"""
    recompute: Recompute = "selective"
    """activation recomputation: none, selective (attention core), full (whole layer)"""
    micro_batch: int = 1
    """sequences per micro-batch"""
    grad_accum: int = 1
    """micro-batches per data-parallel rank per optimizer step"""
    precision: Precision = "bf16"
    """GEMM precision: bf16/fp16 mixed precision, or fp8 (Transformer Engine style, bf16 elsewhere)"""
    ep_overlap: bool = False
    """the training stack's opt-in batch-level MoE all-to-all overlap is on (Megatron-Core
    --overlap-moe-expert-parallel-comm: one micro-batch's dispatch and combine under another's compute;
    ``TrainingStack.ep_overlap_opt_in``); needs ep > 1, vpp > 1 when pp > 1, no full recomputation"""

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "vpp", "cp", "ep", "micro_batch", "grad_accum"):
            validity.positive_int(name, getattr(self, name))
        validity.check_zero_stage(self.zero_stage)
        validity.check_recompute(self.recompute)
        validity.check_precision(self.precision)
        validity.raise_first([i for i in (validity.rule_sp_needs_tp(self.tp, self.sp),
                                          validity.rule_vpp_needs_pp(self.pp, self.vpp),
                                          validity.rule_ep_divides_dp_cp(self.ep, self.dp, self.cp, self.tp),
                                          validity.rule_ep_overlap(self.ep_overlap, self.ep, self.pp, self.vpp,
                                                                   self.recompute)) if i])

    # -- derived ------------------------------------------------------------------------------
    @property
    def n_devices(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def global_batch_seqs(self) -> int:
        return self.dp * self.micro_batch * self.grad_accum

    @property
    def key(self) -> str:
        """Stable, human-readable identity of the plan (same fields -> same key, in any process)."""
        return plan_key(
            self.tp, self.pp, self.dp, self.vpp, self.cp, self.ep, self.sp, self.zero_stage, self.recompute,
            self.micro_batch, self.grad_accum, self.precision, self.ep_overlap,
        )

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["n_devices"] = self.n_devices
        d["key"] = self.key
        return d


def plan_key(
    tp: int, pp: int, dp: int, vpp: int, cp: int, ep: int, sp: bool, zero_stage: int, recompute: str,
    micro_batch: int, grad_accum: int, precision: str, ep_overlap: bool = False,
) -> str:
    """``tp8-pp4-vpp2-dp16-cp1-ep1-sp1-z1-rsel-mb1-ga8-bf16``: every field, fixed order; ``-epo`` at the end
    when the MoE all-to-all overlap is on (keys of plans without it are unchanged)."""
    rec = {"none": "none", "selective": "sel", "full": "full", "offload": "off", "layer_offload": "loff",
           "partial": "part"}[recompute]
    return (
        f"tp{tp}-pp{pp}-vpp{vpp}-dp{dp}-cp{cp}-ep{ep}-sp{int(sp)}-z{zero_stage}-r{rec}"
        f"-mb{micro_batch}-ga{grad_accum}-{precision}" + ("-epo" if ep_overlap else "")
    )


def make_plan(
    *,
    n_devices: int,
    global_batch_seqs: int,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    dp: int | None = None,
    vpp: int = 1,
    ep: int = 1,
    sp: bool | None = None,
    zero_stage: int = 1,
    recompute: Recompute = "selective",
    micro_batch: int = 1,
    precision: Precision = "bf16",
    model: ModelArch | None = None,
    uneven_pipeline: bool = False,
) -> ParallelPlan:
    """A plan from the sizes a user usually gives: dp defaults to n / (tp·pp·cp), grad_accum to
    global_batch / (dp·micro_batch); sp defaults to on whenever tp > 1. With ``model``, the model's
    own rules (heads, KV heads and layers divisible) are checked first, so errors name the root cause."""
    for name, v in (("tp", tp), ("pp", pp), ("cp", cp), ("vpp", vpp), ("ep", ep), ("micro_batch", micro_batch)):
        validity.positive_int(name, v)
    validity.positive_int("devices", n_devices)
    validity.positive_int("global_batch", global_batch_seqs)
    if model is not None:
        validity.raise_first(validity.model_issues(model, tp=tp, pp=pp, vpp=vpp, uneven_pipeline=uneven_pipeline))
    if dp is None:
        validity.raise_first([i for i in (validity.rule_model_parallel_divides_devices(tp, pp, cp, n_devices),) if i])
        dp = n_devices // (tp * pp * cp)
    validity.raise_first([i for i in (validity.rule_dp_micro_batch_divides_batch(dp, micro_batch, global_batch_seqs),)
                          if i])
    return ParallelPlan(
        tp=tp, pp=pp, dp=dp, vpp=vpp, cp=cp, ep=ep, sp=(tp > 1) if sp is None else sp, zero_stage=zero_stage,
        recompute=recompute, micro_batch=micro_batch, grad_accum=global_batch_seqs // (dp * micro_batch),
        precision=precision,
    )
