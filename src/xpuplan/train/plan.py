"""``ParallelPlan``: how one training step is split over devices, and the rules a plan must obey.

A plan is a validated value object (checked on construction; mistakes raise ``UserInputError``
naming the field). Rules that need the model or the job (heads divisible by TP, layers by
PP x VPP, experts by EP, batch by DP x micro-batch, ...) live in :func:`plan_issues`, which lists
every broken rule with its field; :func:`check_plan` raises the first one. Memory fit is not a
rule here: it is a feasibility result of the step model (``train.step``).

Rank order (Megatron-LM's default "tp-cp-ep-dp-pp"): tensor-parallel ranks are adjacent, then
context-parallel, then data-parallel (expert-parallel groups are carved out of dp x cp), then
pipeline stages. The collective model uses this order to decide which groups cross scale-up
domains.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Final, Literal

from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch

Recompute = Literal["none", "selective", "full"]
Precision = Literal["bf16", "fp16", "fp8"]

RECOMPUTE_MODES: Final = ("none", "selective", "full")
PRECISIONS: Final = ("bf16", "fp16", "fp8")
ZERO_STAGES: Final = (0, 1, 2, 3)


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
    """expert-parallel size for MoE layers (a divisor of dp · cp)"""
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

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "vpp", "cp", "ep", "micro_batch", "grad_accum"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise UserInputError(f"{name} must be a positive integer (got {v!r})", field=name)
        if self.zero_stage not in ZERO_STAGES:
            raise UserInputError(f"zero_stage must be 0, 1, 2 or 3 (got {self.zero_stage!r})", field="zero_stage")
        if self.recompute not in RECOMPUTE_MODES:
            raise UserInputError(
                f"recompute must be none, selective or full (got {self.recompute!r})", field="recompute"
            )
        if self.precision not in PRECISIONS:
            raise UserInputError(
                f"precision must be one of {', '.join(PRECISIONS)} (got {self.precision!r})", field="precision"
            )
        if self.sp and self.tp == 1:
            raise UserInputError("sequence parallelism (sp) needs tp > 1", field="sp")
        if self.vpp > 1 and self.pp == 1:
            raise UserInputError(f"vpp ({self.vpp}) needs pipeline parallelism (pp > 1)", field="vpp")
        if (self.dp * self.cp) % self.ep:
            raise UserInputError(
                f"ep ({self.ep}) must divide dp·cp ({self.dp * self.cp}): experts are sharded over data-parallel ranks",
                field="ep",
            )

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
            self.micro_batch, self.grad_accum, self.precision,
        )

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["n_devices"] = self.n_devices
        d["key"] = self.key
        return d


def plan_key(
    tp: int, pp: int, dp: int, vpp: int, cp: int, ep: int, sp: bool, zero_stage: int, recompute: str,
    micro_batch: int, grad_accum: int, precision: str,
) -> str:
    """``tp8-pp4-vpp2-dp16-cp1-ep1-sp1-z1-rsel-mb1-ga8-bf16``: every field, fixed order."""
    rec = {"none": "none", "selective": "sel", "full": "full"}[recompute]
    return (
        f"tp{tp}-pp{pp}-vpp{vpp}-dp{dp}-cp{cp}-ep{ep}-sp{int(sp)}-z{zero_stage}-r{rec}"
        f"-mb{micro_batch}-ga{grad_accum}-{precision}"
    )


@dataclass(frozen=True)
class PlanIssue:
    """One broken validity rule: the plan field it concerns and a sentence saying why."""

    field: str
    message: str


def plan_issues(
    plan: ParallelPlan,
    model: ModelArch,
    *,
    seq_len: int,
    global_batch_seqs: int | None = None,
    n_devices: int | None = None,
    uneven_pipeline: bool = False,
) -> list[PlanIssue]:
    """Every structural rule ``plan`` breaks for ``model`` and the job (empty list: valid).

    Rules: heads and KV heads divisible by TP; layers by PP · VPP; routed experts by EP (EP > 1
    only for MoE models); sequence length by 2 · CP (load-balanced causal ring attention) and by
    TP under sequence parallelism; the global batch equal to DP · micro-batch · grad_accum;
    interleaving (VPP > 1) needs the micro-batch count divisible by PP (Megatron's schedule);
    TP · PP · DP · CP equal to the device count. ``uneven_pipeline`` accepts stages of different
    depth (Megatron's --decoder-first/last-pipeline-num-layers): the busiest stage then holds
    ceil(layers / pp) layers.
    """
    out: list[PlanIssue] = []
    if model.n_heads % plan.tp:
        out.append(PlanIssue("tp", f"tp ({plan.tp}) must divide n_heads ({model.n_heads})"))
    elif model.kv_heads % plan.tp and model.mla is None:
        out.append(PlanIssue("tp", f"tp ({plan.tp}) must divide n_kv_heads ({model.kv_heads})"))
    if uneven_pipeline:
        if plan.pp * plan.vpp > model.n_layers:
            out.append(PlanIssue("pp", f"pp·vpp ({plan.pp}·{plan.vpp}) exceeds n_layers ({model.n_layers})"))
    elif model.n_layers % (plan.pp * plan.vpp):
        what = f"pp·vpp ({plan.pp}·{plan.vpp})" if plan.vpp > 1 else f"pp ({plan.pp})"
        out.append(PlanIssue("pp", f"{what} must divide n_layers ({model.n_layers})"))
    if plan.ep > 1:
        if model.moe is None:
            out.append(PlanIssue("ep", f"ep ({plan.ep}) needs an MoE model; {model.id} is dense"))
        elif model.moe.n_routed_experts % plan.ep:
            out.append(PlanIssue("ep", f"ep ({plan.ep}) must divide the routed experts ({model.moe.n_routed_experts})"))
    if plan.cp > 1 and seq_len % (2 * plan.cp):
        out.append(PlanIssue("cp", f"2·cp ({2 * plan.cp}) must divide seq_len ({seq_len}) for load-balanced ring attention"))
    if plan.sp and (seq_len // plan.cp) % plan.tp:
        out.append(PlanIssue("sp", f"tp ({plan.tp}) must divide the per-rank sequence ({seq_len // plan.cp}) under sequence parallelism"))
    if global_batch_seqs is not None and plan.global_batch_seqs != global_batch_seqs:
        out.append(PlanIssue(
            "micro_batch",
            f"dp·micro_batch·grad_accum ({plan.dp}·{plan.micro_batch}·{plan.grad_accum} = {plan.global_batch_seqs}) "
            f"must equal the global batch ({global_batch_seqs} sequences)",
        ))
    if plan.vpp > 1 and plan.grad_accum % plan.pp:
        out.append(PlanIssue(
            "vpp", f"interleaving (vpp {plan.vpp}) needs the micro-batch count ({plan.grad_accum}) divisible by pp ({plan.pp})"
        ))
    if n_devices is not None and plan.n_devices != n_devices:
        out.append(PlanIssue(
            "dp", f"tp·pp·dp·cp ({plan.tp}·{plan.pp}·{plan.dp}·{plan.cp} = {plan.n_devices}) must equal the device count ({n_devices})"
        ))
    return out


def check_plan(
    plan: ParallelPlan, model: ModelArch, *, seq_len: int, global_batch_seqs: int | None = None,
    n_devices: int | None = None, uneven_pipeline: bool = False,
) -> None:
    """Raise ``UserInputError`` (naming the field) for the first rule ``plan`` breaks."""
    issues = plan_issues(plan, model, seq_len=seq_len, global_batch_seqs=global_batch_seqs, n_devices=n_devices,
                         uneven_pipeline=uneven_pipeline)
    if issues:
        first = issues[0]
        more = f" (and {len(issues) - 1} more: {'; '.join(i.message for i in issues[1:])})" if len(issues) > 1 else ""
        raise UserInputError(first.message + more, field=first.field)


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
        if v < 1:
            raise UserInputError(f"{name} must be a positive integer (got {v})", field=name)
    if model is not None:
        if model.n_heads % tp:
            raise UserInputError(f"tp ({tp}) must divide n_heads ({model.n_heads})", field="tp")
        if model.mla is None and model.kv_heads % tp:
            raise UserInputError(f"tp ({tp}) must divide n_kv_heads ({model.kv_heads})", field="tp")
        if model.n_layers % (pp * vpp) and not uneven_pipeline:
            what = f"pp·vpp ({pp}·{vpp})" if vpp > 1 else f"pp ({pp})"
            raise UserInputError(f"{what} must divide n_layers ({model.n_layers}) (or allow an uneven pipeline)",
                                 field="pp")
    model_par = tp * pp * cp
    if dp is None:
        if n_devices % model_par:
            raise UserInputError(
                f"tp·pp·cp ({tp}·{pp}·{cp} = {model_par}) must divide the device count ({n_devices})", field="tp"
            )
        dp = n_devices // model_par
    if global_batch_seqs % (dp * micro_batch):
        raise UserInputError(
            f"dp·micro_batch ({dp}·{micro_batch} = {dp * micro_batch}) must divide the global batch "
            f"({global_batch_seqs} sequences)",
            field="micro_batch",
        )
    return ParallelPlan(
        tp=tp, pp=pp, dp=dp, vpp=vpp, cp=cp, ep=ep, sp=(tp > 1) if sp is None else sp, zero_stage=zero_stage,
        recompute=recompute, micro_batch=micro_batch, grad_accum=global_batch_seqs // (dp * micro_batch),
        precision=precision,
    )
