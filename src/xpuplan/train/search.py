"""Search: enumerate every valid plan, evaluate them all at once (NumPy), keep the best.

For each device count: enumerate the (tp, pp, cp) layouts whose sizes divide the count and obey the
model's rules, then every combination of the remaining choices (virtual stages, expert
parallelism, sequence parallelism, ZeRO stage, recomputation, micro-batch, precision) as arrays;
prune the combinations that break a rule; evaluate the survivors with the vectorised step model
(:class:`xpuplan.train.step.StepModel`), the ones that do not fit again with fine-grained activation offloading
where the stack has it; keep the top-N feasible plans by throughput and the Pareto
front of time-to-train vs device count. Every plan has a stable key (``ParallelPlan.key``); ties are
broken by the key so the ranking never depends on enumeration order.

The bounds of the space are named constants below; a :class:`SearchSpace` can pin or restrict
any dimension.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

import numpy as np

from xpuplan.catalog.stacks import PARALLEL_DIMS, TrainingStack
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.memory import default_recipe_for, state_recipe
from xpuplan.perf.params import param_breakdown
from xpuplan.perf.recompute import (
    default_selective_modules,
    ordered_selective_modules,
    recompute_modules_problem,
)
from xpuplan.train import validity
from xpuplan.train.cluster import Cluster
from xpuplan.train.estimate import TrainEstimate, estimate_from_arrays, with_stack_modules
from xpuplan.train.plan import PRECISIONS, RECOMPUTE_MODES, ZERO_STAGES
from xpuplan.train.step import PlanArrays, StepArrays, StepModel
from xpuplan.workload.training import TrainingJob
from xpuplan.workload.vocabulary import OFFLOAD_MODULES, RECOMPUTE_MODULES

#: Largest micro-batch (sequences) the search tries; beyond it activations dominate with no speed gain.
MAX_MICRO_BATCH: Final = 32

#: Largest number of virtual pipeline stages per device tried (Megatron configurations rarely go beyond).
MAX_VPP: Final = 8

#: Fewest tokens per context-parallel rank: below ~1k tokens the ring-attention chunks are too small
#: to hide their KV exchange.
MIN_TOKENS_PER_CP_RANK: Final = 1024

#: Largest tensor-parallel size when it must span scale-up domains (TP across the scale-out network
#: is never competitive; within a domain TP may use the whole domain).
MAX_TP_ACROSS_DOMAINS: Final = 1

#: Device count up to which :func:`devices_to_fit` looks for a feasible plan.
MAX_DEVICES_TO_FIT: Final = 1 << 17

#: Fine-grained activation offloading sets (Megatron-Core ``--offload-modules``) the search tries, besides none, on a
#: stack that has the feature (``TrainingStack.module_offload``) when the job names no modules: the sets NVIDIA's
#: published recipes run. ``expert_fc1``: the dispatched copies (Megatron-Bridge ``perf_recipes/deepseek/gb200/
#: deepseek_v3.py``, 256 GB200; ``perf_recipes/nemotronh/h100/nemotronh.py``; the MoE team's Kimi-K2 GB200 script,
#: yanring/Megatron-MoE-ModelZoo ``best_practice/kimi-k2``); ``expert_fc1`` + ``moe_act``: also the experts' FC1
#: output (the ModelZoo's Qwen3-235B on 256 GB200, ``best_practice/qwen3/run_gb200_235b.sh``); ``core_attn`` +
#: ``attn_proj``: the attention core's inputs and output (Megatron-Bridge ``perf_recipes/deepseek/common.py``,
#: DeepSeek-V3 under Megatron-FSDP). A set the model or the job's ``recompute_modules`` excludes is skipped
#: (:func:`~xpuplan.train.validity.rule_offload_modules`).
SEARCHED_OFFLOAD_SETS: Final[tuple[tuple[str, ...], ...]] = (
    ("expert_fc1",), ("expert_fc1", "moe_act"), ("core_attn", "attn_proj"))

#: What selective recomputation re-runs (Megatron-Core ``--recompute-modules``), the sets the search tries besides
#: the planner's default (:func:`xpuplan.perf.recompute.default_selective_modules`) on a stack that lets a run choose
#: them (``TrainingStack.module_recompute``) when the job names no modules: the sets NVIDIA's published recipes run
#: (Megatron-Bridge ``src/megatron/bridge/perf_recipes``, 2026-11). ``mla_up_proj``: DeepSeek-V3 on every GPU
#: (``deepseek/*/deepseek_v3.py``); ``mla_up_proj`` + ``mlp``: DeepSeek-V3 and Kimi-K2 on H100 and B200
#: (``deepseek/h100``, ``deepseek/b200``, ``kimi/h100``); ``layernorm`` + ``mla_up_proj`` + ``moe_act``:
#: ``deepseek/common.py`` and ``deepseek/b200`` (DeepSeek-V3's own choice, arXiv 2412.19437 sec. 3.3.3);
#: ``layernorm``: ``nemotronh/h100``; ``layernorm`` + ``moe``: ``nemotronh/h100`` (and the Nemotron 3 Nano recipe);
#: ``layernorm`` + ``moe_act``: GPT-OSS on H100/B200/GB200, Qwen3 MoE on H100, Nemotron-H on B200/B300/H100;
#: ``mlp``: DeepSeek-V3 on GB200 and VR200 (its dense first layers); ``moe_act``: DeepSeek-V3 on GB300, Nemotron-H
#: on GB200/GB300, GPT-OSS on H100 (``recipes/gpt_oss/h100``). A set with a module the model lacks
#: (:func:`~xpuplan.perf.recompute.recompute_modules_problem`) is skipped.
SEARCHED_RECOMPUTE_SETS: Final[tuple[tuple[str, ...], ...]] = (
    ("mla_up_proj",), ("mla_up_proj", "mlp"), ("mla_up_proj", "layernorm", "moe_act"), ("layernorm",),
    ("layernorm", "moe"), ("layernorm", "moe_act"), ("mlp",), ("moe_act",))

#: The recompute modes the offloading sets are tried with: they move what a layer keeps, so they compete with
#: recomputing it; under full (or partial) recomputation a layer keeps no module's inputs.
OFFLOAD_SEARCH_RECOMPUTE: Final = ("none", "selective")


@dataclass(frozen=True)
class SearchSpace:
    """Restrictions of the search; ``None`` means every valid value."""

    tp: Sequence[int] | None = None
    pp: Sequence[int] | None = None
    vpp: Sequence[int] | None = None
    cp: Sequence[int] | None = None
    ep: Sequence[int] | None = None
    dp: Sequence[int] | None = None
    sp: Sequence[bool] | None = None
    zero_stage: Sequence[int] | None = None
    recompute: Sequence[str] | None = None
    micro_batch: Sequence[int] | None = None
    precision: Sequence[str] = ("bf16",)
    uneven_pipeline: bool = False
    """also try pipeline sizes that do not divide the layers (busiest stage: ceil(layers/pp))"""
    ep_overlap: Sequence[bool] | None = None
    """the stack's opt-in MoE all-to-all overlap (``ParallelPlan.ep_overlap``): None = with and without it where
    the stack has one (``TrainingStack.ep_overlap_opt_in`` > 0) and the job does not set ``ep_overlap``"""
    pipeline_zero_stage: Sequence[int] | None = None
    """the ZeRO stages plans with pp > 1 may use (None: any the space allows): the stack's
    ``pipeline_zero_stages``, set by :func:`stack_space`"""
    offload_sets: Sequence[tuple[str, ...]] | None = None
    """fine-grained activation offloading sets tried besides none when the job names no ``offload_modules``: None =
    :data:`SEARCHED_OFFLOAD_SETS` where the stack has the feature; empty: never offload modules"""
    recompute_sets: Sequence[tuple[str, ...]] | None = None
    """what selective recomputation re-runs, the sets tried besides the default when the job names no
    ``recompute_modules``: None = :data:`SEARCHED_RECOMPUTE_SETS` where the stack lets a run choose
    (``TrainingStack.module_recompute``); empty: only the default set"""

    def __post_init__(self) -> None:
        for p in self.precision:
            validity.check_precision(p)
        for r in self.recompute or ():
            validity.check_recompute(r)
        for z in self.zero_stage or ():
            validity.check_zero_stage(z)
        _check_module_sets(self.offload_sets, OFFLOAD_MODULES, "offloading set", "offload_sets")
        _check_module_sets(self.recompute_sets, RECOMPUTE_MODULES, "recompute set", "recompute_sets")


def _check_module_sets(sets: Sequence[tuple[str, ...]] | None, vocabulary: Sequence[str], what: str,
                       field: str) -> None:
    """Each set of a search space's module sets is non-empty and names distinct modules of ``vocabulary``."""
    for mods in sets or ():
        if not mods or any(m not in vocabulary for m in mods) or len(set(mods)) != len(mods):
            raise UserInputError(f"{what} {list(mods)}: give distinct modules of {', '.join(vocabulary)}", field=field)


def stack_space(space: SearchSpace, stack: TrainingStack) -> SearchSpace:
    """``space`` narrowed to what ``stack`` can run (``TrainingStack.parallelism``, ``TrainingStack.zero_stages``):
    size 1 on every model-parallel dimension the stack lacks, its ZeRO stages only (with pp > 1 its
    ``pipeline_zero_stages``), even pipelines only where it needs them (``TrainingStack.uneven_pipeline``), the
    recompute modes it runs (``layer_offload``, ``partial_recompute``). A restriction the job gave that
    the stack cannot honour at all (``tp`` 2 on a stack without tensor parallelism) is an error naming the field
    (:func:`~xpuplan.train.validity.rule_stack_parallelism`)."""
    updates: dict[str, Any] = {}
    for dim in PARALLEL_DIMS:
        if not stack.lacks(dim):
            continue
        given = getattr(space, dim)
        if given is not None and 1 not in set(given):
            validity.raise_first([i for i in (validity.rule_stack_parallelism(stack, **{dim: min(given)}),) if i])
        updates[dim] = (1,)
    given_z = space.zero_stage
    zeros = tuple(z for z in (ZERO_STAGES if given_z is None else given_z) if z in stack.zero_stages)
    if not zeros:
        validity.raise_first([i for i in (validity.rule_stack_parallelism(stack, zero_stage=min(given_z or (0,))),)
                              if i])
    if len(zeros) < len(ZERO_STAGES if given_z is None else given_z):
        updates["zero_stage"] = zeros
    if space.uneven_pipeline and not stack.uneven_pipeline:
        updates["uneven_pipeline"] = False
    # recompute modes only some stacks run: Megatron-Core's whole-layer offloading, recomputing chosen layers
    rec = list(space.recompute or RECOMPUTE_MODES)
    lacking = {m for m, has in (("layer_offload", stack.layer_offload), ("partial", stack.partial_recompute)) if not has}
    if lacking & set(rec):
        kept = tuple(r for r in rec if r not in lacking)
        if not kept:
            validity.raise_first([i for i in (validity.rule_layer_offload(rec[0], 1, stack),
                                              validity.rule_partial_recompute(rec[0], stack)) if i])
        updates["recompute"] = kept
    if stack.pipeline_zero_stages is not None:
        had = space.pipeline_zero_stage
        piped = tuple(z for z in stack.pipeline_zero_stages if had is None or z in set(had))
        if had is None or len(piped) < len(had):
            updates["pipeline_zero_stage"] = piped
    return replace(space, **updates) if updates else space


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _allowed(values: list[int], restrict: Sequence[int] | None) -> list[int]:
    return values if restrict is None else [v for v in values if v in set(restrict)]


def vpp_options(n_layers: int, pp: int, *, uneven: bool) -> list[int]:
    """Virtual pipeline stages per device worth trying: 1 without PP; the divisors of layers/pp up to
    :data:`MAX_VPP` when pp divides the layers; with uneven stages allowed and pp not dividing the
    layers, any vpp up to :data:`MAX_VPP` that leaves every virtual stage a layer, or the embedding or
    the loss (:data:`~xpuplan.train.validity.EDGE_PIPELINE_SLOTS`)."""
    if pp <= 1:
        return [1]
    if n_layers % pp == 0:
        return [v for v in _divisors(n_layers // pp) if v <= MAX_VPP]
    if not uneven:
        return []
    return [v for v in range(1, MAX_VPP + 1) if pp * v <= n_layers + validity.EDGE_PIPELINE_SLOTS]


def enumerate_plans(model: ModelArch, n_devices: int, job: TrainingJob, cluster: Cluster,
                    space: SearchSpace | None = None, cp_algorithm: str = "ring",
                    layer_offload: bool = False, ep_overlap_opt_in: bool = False, dualpipe: bool = False,
                    partial_recompute: bool = True) -> PlanArrays:
    """Every plan for ``n_devices`` that obeys the structural rules (``train.plan.plan_issues``, and
    :func:`~xpuplan.train.validity.rule_cp_all_to_all_heads` for the stack's ``cp_algorithm``); recompute
    ``layer_offload`` only where the stack can (``layer_offload``) and without pipelining
    (:func:`~xpuplan.train.validity.rule_layer_offload`); every MoE plan with expert parallelism also with the
    stack's opt-in all-to-all overlap (``ep_overlap_opt_in``) where :func:`~xpuplan.train.validity.rule_ep_overlap`
    allows it, unless the job sets its own ``ep_overlap`` fraction. ``dualpipe``: the stack's schedule is DualPipe,
    whose pipelined plans :func:`~xpuplan.train.validity.rule_dualpipe` restricts (even pp, vpp 1, an even number of
    micro-batches per step of at least 2·pp). ``partial_recompute``: the stack can recompute chosen layers
    (:func:`~xpuplan.train.validity.rule_partial_recompute`); recompute ``partial`` otherwise not enumerated."""
    space = space or SearchSpace()
    B = job.global_batch_seqs
    s = job.seq_len
    L = model.n_layers
    kv = model.kv_heads if model.mla is None else model.n_heads
    tp_cap = max(cluster.domain_size, MAX_TP_ACROSS_DOMAINS)
    tps = [t for t in _divisors(n_devices) if t <= tp_cap and model.n_heads % t == 0 and (kv % t == 0 or t % kv == 0)]
    tps = _allowed(tps, space.tp)
    sp_opts = [0, 1] if space.sp is None else sorted({int(bool(x)) for x in space.sp})
    zero_all = list(ZERO_STAGES) if space.zero_stage is None else list(space.zero_stage)
    # fine-grained activation offloading moves the inputs of modules a layer keeps: not with whole-layer CPU
    # offloading (Megatron-Core refuses it), and moot under full recomputation (validity.rule_offload_modules_recompute)
    no_module_offload = ("layer_offload", "full", "offload") if job.offload_modules is not None else ()
    rec_all = [RECOMPUTE_MODES.index(r) for r in (space.recompute or RECOMPUTE_MODES)
               if (r != "layer_offload" or layer_offload) and (r != "partial" or partial_recompute)
               and r not in no_module_offload]
    rec_layer_offload = RECOMPUTE_MODES.index("layer_offload")
    prec_all = [PRECISIONS.index(p) for p in space.precision]
    if space.ep_overlap is not None:
        epo_all = sorted({int(bool(x)) for x in space.ep_overlap})
    else:
        epo_all = [0, 1] if ep_overlap_opt_in and job.ep_overlap is None and model.moe is not None else [0]
    rec_full = {RECOMPUTE_MODES.index("full"), RECOMPUTE_MODES.index("offload"), RECOMPUTE_MODES.index("partial")}
    if job.recompute_modules is not None and "moe" in job.recompute_modules:  # re-running the MoE block: no overlap
        rec_full.add(RECOMPUTE_MODES.index("selective"))
    parts: list[PlanArrays] = []
    for tp in tps:
        rest_tp = n_devices // tp
        pps = [d for d in _divisors(rest_tp) if L % d == 0 or (space.uneven_pipeline and d <= L)]
        for pp in _allowed(pps, space.pp):
            rest_pp = rest_tp // pp
            cps = [c for c in _divisors(rest_pp) if c == 1 or (s % (2 * c) == 0 and s // c >= MIN_TOKENS_PER_CP_RANK)]
            for cp in _allowed(cps, space.cp):
                if validity.rule_cp_all_to_all_heads(cp, tp, model, cp_algorithm) is not None:
                    continue
                dp = rest_pp // cp
                if B % dp or (space.dp is not None and dp not in space.dp):
                    continue
                per_rank = B // dp
                mbs = _allowed([d for d in _divisors(per_rank) if d <= MAX_MICRO_BATCH], space.micro_batch)
                vpps = _allowed(vpp_options(L, pp, uneven=space.uneven_pipeline), space.vpp)
                if model.moe is not None:
                    # EP carved out of dp·cp, or folded over tp·cp·dp (MoE parallel folding)
                    eps = [e for e in _divisors(tp * dp * cp) if model.moe.n_routed_experts % e == 0]
                else:
                    eps = [1]
                eps = _allowed(eps, space.ep)
                sps = [x for x in sp_opts if not (x and tp == 1)]
                if tp > 1 and 1 in sps and (s // cp) % tp:
                    sps = [x for x in sps if x == 0]
                zeros = [z for z in zero_all if dp * cp > 1 or z == 0]
                if pp > 1 and space.pipeline_zero_stage is not None:  # the stack's pipeline asserts these stages
                    zeros = [z for z in zeros if z in set(space.pipeline_zero_stage)]
                if pp > 1 and 1 in zeros and 2 in zeros:
                    # pipelined ZeRO-2 accumulates full gradients and reduce-scatters once per step:
                    # the same plan as ZeRO-1 (perf.memory.gradients_sharded), so it is not searched twice
                    zeros.remove(2)
                if not (mbs and vpps and eps and sps and zeros):
                    continue
                recs = [r for r in rec_all if r != rec_layer_offload or pp == 1]
                if not recs:
                    continue
                grid = np.meshgrid(vpps, eps, sps, zeros, recs, mbs, prec_all, epo_all, indexing="ij")
                vpp_a, ep_a, sp_a, z_a, r_a, mb_a, pr_a, epo_a = (g.ravel().astype(np.int64) for g in grid)
                ga_a = per_rank // mb_a
                keep = (vpp_a == 1) | (ga_a % pp == 0)
                if dualpipe and pp > 1:  # validity.rule_dualpipe, over the arrays
                    keep &= (pp % 2 == 0) & (vpp_a == 1) & (ga_a % 2 == 0) & (ga_a >= 2 * pp)
                if 1 in epo_all:  # validity.rule_ep_overlap, over the arrays
                    keep &= (epo_a == 0) | ((ep_a > 1) & ((pp == 1) | (vpp_a > 1)) & ~np.isin(r_a, list(rec_full)))
                k = int(keep.sum())
                if not k:
                    continue

                def full(v: int, k: int = k) -> np.ndarray:
                    return np.full(k, v, dtype=np.int64)

                parts.append(PlanArrays(
                    tp=full(tp), pp=full(pp), dp=full(dp), vpp=vpp_a[keep], cp=full(cp), ep=ep_a[keep], sp=sp_a[keep],
                    zero=z_a[keep], rec=r_a[keep], mb=mb_a[keep], ga=ga_a[keep], prec=pr_a[keep], epo=epo_a[keep],
                ))
    if not parts:
        empty = np.zeros(0, dtype=np.int64)
        return PlanArrays(*(empty for _ in range(13)))
    return PlanArrays.concat(parts)


def offload_variants(model: ModelArch, job: TrainingJob, stack: TrainingStack,
                     space: SearchSpace) -> list[TrainingJob]:
    """The job once per fine-grained offloading set the search tries (``space.offload_sets``, by default
    :data:`SEARCHED_OFFLOAD_SETS`): none when the job names its own ``offload_modules``, the stack has no
    fine-grained offloading, or the space allows no recompute mode the sets combine with; sets the model or the
    job's ``recompute_modules`` exclude are skipped."""
    if job.offload_modules is not None or not stack.module_offload:
        return []
    if space.recompute is not None and not set(space.recompute) & set(OFFLOAD_SEARCH_RECOMPUTE):
        return []
    sets = SEARCHED_OFFLOAD_SETS if space.offload_sets is None else space.offload_sets
    return [job.model_copy(update={"offload_modules": tuple(s)}) for s in sets
            if validity.rule_offload_modules(s, model, stack, job.recompute_modules) is None]


def recompute_variants(model: ModelArch, job: TrainingJob, stack: TrainingStack,
                       space: SearchSpace) -> list[TrainingJob]:
    """The job once per selective recomputation set the search tries (``space.recompute_sets``, by default
    :data:`SEARCHED_RECOMPUTE_SETS`): none when the job names its own ``recompute_modules``, the stack does not let a
    run choose them (``module_recompute``), or the space excludes selective recomputation; sets the model lacks a
    module of, that equal the default set, or that the job's ``offload_modules`` exclude are skipped."""
    if job.recompute_modules is not None or not stack.module_recompute:
        return []
    if space.recompute is not None and "selective" not in space.recompute:
        return []
    sets = SEARCHED_RECOMPUTE_SETS if space.recompute_sets is None else space.recompute_sets
    default = default_selective_modules(model)
    out: list[TrainingJob] = []
    for mods in sets:
        if (recompute_modules_problem(model, mods) is None and frozenset(mods) != default
                and validity.rule_offload_modules(job.offload_modules, model, stack, mods) is None):
            out.append(job.model_copy(update={"recompute_modules": tuple(ordered_selective_modules(model, mods))}))
    return out


def rank_order(r: StepArrays, p: PlanArrays, idx: np.ndarray) -> np.ndarray:
    """``idx`` sorted by tokens/s (descending), ties broken by the plan fields in key order."""
    keys = (p.epo[idx], p.prec[idx], p.ga[idx], p.mb[idx], p.rec[idx], p.zero[idx], p.sp[idx], p.ep[idx], p.cp[idx],
            p.dp[idx], p.vpp[idx], p.pp[idx], p.tp[idx], -np.round(r.tokens_per_s[idx], 6))
    return idx[np.lexsort(keys)]


@dataclass(frozen=True)
class ParetoPoint:
    """Best feasible plan at one device count on the time-vs-devices Pareto front."""

    n_devices: int
    key: str
    tokens_per_s: float
    step_time_s: float
    time_to_train_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"n_devices": self.n_devices, "key": self.key, "tokens_per_s": self.tokens_per_s,
                "step_time_s": self.step_time_s, "time_to_train_s": self.time_to_train_s}


@dataclass(frozen=True)
class SearchResult:
    """Ranked plans of a search and how much was evaluated."""

    model_id: str
    device_id: str
    device_counts: tuple[int, ...]
    plans_evaluated: int
    plans_feasible: int
    top: tuple[TrainEstimate, ...]
    pareto: tuple[ParetoPoint, ...]
    elapsed_s: float
    efficiency_source: str
    reasons: tuple[str, ...] = field(default_factory=tuple)

    @property
    def best(self) -> TrainEstimate | None:
        return self.top[0] if self.top else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model_id,
            "hardware": self.device_id,
            "device_counts": list(self.device_counts),
            "plans_evaluated": self.plans_evaluated,
            "plans_feasible": self.plans_feasible,
            "elapsed_s": self.elapsed_s,
            "plans_per_s": self.plans_evaluated / self.elapsed_s if self.elapsed_s > 0 else None,
            "efficiency_source": self.efficiency_source,
            "reasons": list(self.reasons),
            "plans": [e.to_dict() for e in self.top],
            "pareto": [pt.to_dict() for pt in self.pareto],
        }


Progress = Callable[[int, int], None]


def search_plans(
    model: ModelArch,
    cluster: Cluster,
    job: TrainingJob | None = None,
    *,
    device_counts: Sequence[int] | None = None,
    space: SearchSpace | None = None,
    top: int = 10,
    progress: Progress | None = None,
    step_model: StepModel | None = None,
    require_feasible: bool = True,
    stack: TrainingStack | None = None,
) -> SearchResult:
    """Search every valid plan of ``model`` on ``cluster`` (at its device count, or at each of
    ``device_counts``); return the ``top`` plans by tokens/s and the time-vs-devices Pareto front.

    ``require_feasible=False`` ranks plans that do not fit too (used to predict measured runs whose
    memory our model overestimates); the result still flags them. ``stack``: the training stack's
    profile (the default stack when None), unless ``step_model`` carries one. Precisions the device
    has no tensor cores for (FP8 on A100) are not searched; asking for nothing else is an error.

    Fine-grained activation offloading (:func:`offload_variants`) is a plan attribute too: plans that do not fit
    without it and would rank are evaluated again with each set, and keep the fastest set that fits (of equally fast
    ones, the one moving the fewest bytes); the estimate names it (``offload_modules``, key suffix ``-off:``).
    """
    job = job or TrainingJob()
    validity.check_top(top)
    if device_counts:
        validity.check_device_counts(list(device_counts))
    counts = tuple(sorted(set(device_counts))) if device_counts else (cluster.n_devices,)
    space = space or SearchSpace()
    issues = [validity.rule_precision_on_device(pr, cluster.device) for pr in space.precision]
    if all(issues):
        validity.raise_first([i for i in issues if i])
    if any(issues):
        space = replace(space, precision=tuple(pr for pr, i in zip(space.precision, issues, strict=True) if i is None))
    sm = step_model or StepModel(model, cluster.device, cluster.efficiency, job, stack=stack)
    space = stack_space(space, sm.stack)  # only what the stack can run
    if (own := with_stack_modules(job, model, sm.stack)) is not job:  # the stack's own selective set
        job, sm = own, sm.with_job(own)
    validity.raise_first([i for i in (validity.rule_ep_overlap_on_stack(any(space.ep_overlap or ()), sm.stack),
                                      validity.rule_recompute_modules(job.recompute_modules, model, sm.stack),
                                      validity.rule_offload_modules(job.offload_modules, model, sm.stack,
                                                                    job.recompute_modules)) if i])
    if space.recompute is not None and set(space.recompute) == {"layer_offload"}:
        # only Megatron-Core's activation offloading asked for: say why nothing could be enumerated
        pp = 1 if space.pp is None or 1 in space.pp else min(space.pp)
        validity.raise_first([i for i in (validity.rule_layer_offload("layer_offload", pp, sm.stack),) if i])
    if space.recompute is not None and set(space.recompute) == {"partial"}:
        validity.raise_first([i for i in (validity.rule_partial_recompute("partial", sm.stack),) if i])
    if job.offload_modules is not None and space.recompute is not None and set(space.recompute) <= {
            "layer_offload", "full", "offload"}:  # every recompute mode asked for excludes the offloaded modules
        validity.raise_first([i for i in (validity.rule_offload_modules_recompute(
            job.offload_modules, sorted(space.recompute)[0]),) if i])
    searched = set(space.recompute or RECOMPUTE_MODES)
    off_variants = [sm.with_job(j) for j in offload_variants(model, job, sm.stack, space)]
    # another selective set, alone: pairing it with an offloading set (as NVIDIA's Qwen3-235B GB200 script does) is
    # left to jobs that name both. On PCIe hosts the pairs win by 1-3% through offloaded attention inputs (turning
    # 1,000-GPU presets to pure ZeRO-3), an edge resting on the host-link model that no public run on a PCIe host
    # checks (the one validation row that offloads runs on GB200's NVLink-C2C)
    rm_variants = [sm.with_job(j) for j in recompute_variants(model, job, sm.stack, space)]
    variants = off_variants + rm_variants
    rec_offloadable = [RECOMPUTE_MODES.index(x) for x in OFFLOAD_SEARCH_RECOMPUTE]
    rec_selective = RECOMPUTE_MODES.index("selective")
    t0 = time.perf_counter()
    evaluated = feasible = 0
    candidates: list[tuple[float, str, TrainEstimate]] = []
    best_per_count: list[TrainEstimate] = []
    closest: tuple[float, TrainEstimate] | None = None
    for i, n in enumerate(counts):
        cl = cluster.with_devices(n)
        plans = enumerate_plans(model, n, job, cl, space, sm.stack.cp_algorithm, sm.stack.layer_offload,
                                sm.stack.ep_overlap_opt_in > 0 and sm.stack.ep_overlap == 0,
                                sm.stack.pipeline_schedule == "dualpipe", sm.stack.partial_recompute)
        if progress:
            progress(i, len(counts))
        if not len(plans):
            continue
        r = sm.evaluate(cl, plans)
        evaluated += len(plans)
        # a layer_offload plan that offloads nothing is the same plan as recompute none, a partial plan that
        # recomputes no layer or all of them the same as none or full: not searched twice
        redundant = ((plans.rec == RECOMPUTE_MODES.index("layer_offload")) & (r.mem_offload_layers == 0)
                     if r.mem_offload_layers is not None else np.zeros(len(plans), dtype=bool))
        if r.mem_recompute_layers is not None:
            part = plans.rec == RECOMPUTE_MODES.index("partial")
            stage = np.where(plans.pp > 1, np.ceil(model.n_layers / plans.pp), float(model.n_layers))
            redundant |= part & (((r.mem_recompute_layers == 0) & ("none" in searched))
                                 | ((r.mem_recompute_layers >= stage) & ("full" in searched)))
        # fine-grained offloading only helps a plan that does not fit without it (else it only adds copies), and it
        # never makes a plan faster: those plans again, with each offloading set, where they would rank among the
        # top ones and moving that share of every kept activation could fit them. Another selective set re-runs more
        # (to fit) or less (to go faster): selective plans again, with each set, where the plan without any
        # recomputation would rank and the set's share of the kept activations could fit them
        ok_base = (r.fits if require_feasible else np.ones(len(plans), dtype=bool)) & ~redundant
        bar = (np.partition(r.tokens_per_s[ok_base], -top)[-top] if int(ok_base.sum()) >= top else -np.inf)
        want_off = (~r.fits & np.isin(plans.rec, rec_offloadable) & (r.tokens_per_s >= bar)
                    if off_variants else np.zeros(len(plans), dtype=bool))
        if rm_variants:
            # the step without the recomputation, and the bubble's share of it: what no set can beat
            busy = r.compute_s + r.recompute_s
            step_no_recompute_s = r.step_s - r.recompute_s * (1.0 + r.bubble_s / np.maximum(busy, 1e-30))
            want_rm = ((plans.rec == rec_selective) & ~redundant
                       & (r.tokens_per_s * r.step_s / np.maximum(step_no_recompute_s, 1e-30) >= bar))
        else:
            want_rm = np.zeros(len(plans), dtype=bool)
        retry = np.flatnonzero(want_off | want_rm)
        could: list[np.ndarray] = []
        if len(retry):
            sub = plans.take(retry)
            kept = np.maximum(sm.activation_table(sub, sub.rec), 1.0)
            acts, total = r.mem_activations[retry], r.mem_total[retry]
            could = [want_off[retry] & (total - r.mem_usable <= acts * smv.activation_table(sub, sub.rec, host=True) / kept)
                     for smv in off_variants]
            # the device's share: an offloading set's modules wait on the host; re-running the whole MoE block
            # excludes the MoE all-to-all overlap (Megatron-Core asserts it; validity.rule_ep_overlap)
            could += [want_rm[retry] & (total + acts * (smv.activation_table(sub, sub.rec) / kept - 1.0) <= r.mem_usable)
                      & ~((sub.epo == 1) & ("moe" in (smv.job.recompute_modules or ())))
                      for smv in rm_variants]
            keep = np.flatnonzero(np.any(could, axis=0))
            retry, sub, could = retry[keep], sub.take(keep), [c[keep] for c in could]
        rounds = [(sm.job, plans, r, redundant)]
        if len(retry):
            rvs = [smv.evaluate(cl, sub) for smv in variants]
            evaluated += len(sub) * len(rvs)
            # one variant per plan, the plan as it was among them: the fastest that fits, of equal speed the one
            # moving the fewest bytes to the host
            base_ok = r.fits[retry] & ~redundant[retry]
            speed = np.stack([np.where(base_ok, np.round(r.tokens_per_s[retry], 6), -1.0)]
                             + [np.where(rv.fits & c, np.round(rv.tokens_per_s, 6), -1.0) for rv, c in zip(rvs, could, strict=True)])
            moved = np.stack([r.mem_host[retry]] + [rv.mem_host for rv in rvs])
            chosen = np.lexsort((moved.T, -speed.T))[:, 0]
            replaced = redundant.copy()
            replaced[retry[(chosen != 0) & (speed.max(axis=0) > 0)]] = True
            rounds = [(sm.job, plans, r, replaced)]
            rounds.extend((smv.job, sub, rv, chosen != v + 1) for v, (smv, rv) in enumerate(zip(variants, rvs, strict=True)))
        ests: list[TrainEstimate] = []
        for jb, pl, rr, red in rounds:
            ok = (rr.fits if require_feasible else np.ones(len(pl), dtype=bool)) & ~red
            feasible += int((rr.fits & ~red).sum())
            idx = np.flatnonzero(ok)
            if not len(idx):
                continue
            k = min(top, len(idx))
            part = idx[np.argpartition(-rr.tokens_per_s[idx], k - 1)[:k]] if len(idx) > k else idx
            ests.extend(estimate_from_arrays(rr, int(j), pl, model, cl, jb) for j in rank_order(rr, pl, part))
        if not ests:
            j = int(np.argmin(r.mem_total / r.mem_usable))
            est = estimate_from_arrays(r, j, plans, model, cl, job)
            ratio = float(r.mem_total[j] / r.mem_usable)
            if closest is None or ratio < closest[0]:
                closest = (ratio, est)
            continue
        ests.sort(key=lambda e: (round(-e.tokens_per_s, 6), e.key))  # the same tie-break as across counts
        best_per_count.append(ests[0])
        candidates.extend((-e.tokens_per_s, e.key + f"@{n}", e) for e in ests[:top])
    if progress:
        progress(len(counts), len(counts))
    candidates.sort(key=lambda c: (round(c[0], 6), c[1]))
    top_ests = tuple(c[2] for c in candidates[:top])
    pareto = _pareto(best_per_count)
    reasons: list[str] = []
    if not top_ests:
        if evaluated == 0:
            reasons.append(
                f"no valid plan: no tp·pp·dp·cp layout of {', '.join(map(str, counts))} device(s) satisfies the model's "
                f"rules (heads {model.n_heads}, KV heads {model.kv_heads}, layers {model.n_layers}) and the global batch "
                f"({job.global_batch_seqs} sequences)"
                + (f" under DualPipe's own rules ({sm.stack.id}: a pipeline needs an even pp, vpp 1 and an even number of "
                   "micro-batches per step of at least 2·pp)" if sm.stack.pipeline_schedule == "dualpipe" else "")
            )
        elif closest is not None:
            reasons.append(f"no plan fits in memory; the closest ({closest[1].key} on {closest[1].n_devices} devices):")
            reasons.extend(closest[1].reasons)
    return SearchResult(
        model_id=model.id, device_id=cluster.device.id, device_counts=counts, plans_evaluated=evaluated,
        plans_feasible=feasible, top=top_ests, pareto=pareto, elapsed_s=time.perf_counter() - t0,
        efficiency_source=cluster.efficiency.source, reasons=tuple(reasons),
    )


#: Former name of :func:`search_plans`, kept for callers importing it from this module
#: (``xpuplan.train`` itself no longer exports it, so ``xpuplan.train.search`` is the module).
search = search_plans


def _pareto(best: list[TrainEstimate]) -> tuple[ParetoPoint, ...]:
    """Device counts whose best plan is faster than every smaller count's best."""
    out: list[ParetoPoint] = []
    fastest = 0.0
    for e in sorted(best, key=lambda e: e.n_devices):
        if e.tokens_per_s > fastest:
            fastest = e.tokens_per_s
            out.append(ParetoPoint(e.n_devices, e.key, e.tokens_per_s, e.step_time_s, e.time_to_train_s))
    return tuple(out)


def min_devices_for_states(model: ModelArch, cluster: Cluster, job: TrainingJob, precision: str = "bf16",
                           stack: TrainingStack | None = None) -> int:
    """Lower bound on the device count: model states (weights, gradients, master weights, optimizer)
    fully sharded, before activations, against each device's usable memory."""
    primary = stack.fp8_primary_weights if stack is not None else False
    recipe = state_recipe(job.optimizer_recipe or default_recipe_for(precision, fp8_primary_weights=primary))
    total = param_breakdown(model).total
    if job.method == "full":
        states = total * recipe.total
    else:
        states = total * (0.55 if job.method == "qlora" else 2.0)
    usable = cluster.device.memory_bytes * (1.0 - job.memory_reserve)
    return max(1, math.ceil(states / usable))


def devices_to_fit(
    model: ModelArch, cluster: Cluster, job: TrainingJob, *, space: SearchSpace | None = None,
    max_devices: int = MAX_DEVICES_TO_FIT, step_model: StepModel | None = None, stack: TrainingStack | None = None,
) -> TrainEstimate | None:
    """The fastest plan at the smallest device count (a multiple of the scale-up domain, doubling)
    on which some plan fits; None if nothing fits up to ``max_devices``."""
    precision = (space.precision[0] if space else "bf16")
    sm = step_model or StepModel(model, cluster.device, cluster.efficiency, job, stack=stack)
    lower = min_devices_for_states(model, cluster, job, precision, sm.stack)
    n = max(1, cluster.domain_size)
    while n < lower:
        n *= 2
    while n <= max_devices:
        res = search_plans(model, cluster.with_devices(n), job, space=space, top=1, step_model=sm)
        if res.best is not None:
            return res.best
        n *= 2
    return None
