"""Every rule a training plan must obey, in one place: one small function per rule.

A rule function returns ``None`` when the rule holds, else a :class:`PlanIssue` naming the field the
user typed (``tp``, ``pp``, ``global_batch``, ...) and saying why. :func:`plan_issues` lists every
broken rule of a plan for a model and job; :func:`check_plan` raises the first as
``UserInputError``. ``ParallelPlan`` (construction), ``make_plan``, the search's enumeration and
:func:`xpuplan.train.fit.training_fit` all call these functions, so a layout one command rejects
is rejected by every other.

Memory fit is not a rule: it is a result of the step model (``train.step``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from xpuplan.catalog.stacks import PARALLEL_DIM_NAMES
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.recompute import recompute_modules_problem
from xpuplan.workload.vocabulary import RECOMPUTE_MODES, TRAIN_PRECISIONS

if TYPE_CHECKING:
    from xpuplan.train.plan import ParallelPlan

ZERO_STAGES = (0, 1, 2, 3)


@dataclass(frozen=True)
class PlanIssue:
    """One broken validity rule: the field it concerns and a sentence saying why."""

    field: str
    message: str


# ---------------------------------------------------------------------------------------
# Values on their own
# ---------------------------------------------------------------------------------------
def positive_int(field: str, value: object) -> int:
    """``value`` as a positive integer, else ``UserInputError`` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserInputError(f"{field} must be a positive integer (got {value!r})", field=field)
    return value


def check_zero_stage(value: object, field: str = "zero_stage") -> None:
    if value not in ZERO_STAGES:
        raise UserInputError(f"{field} must be 0, 1, 2 or 3 (got {value!r})", field=field)


def check_recompute(value: object, field: str = "recompute") -> None:
    if value not in RECOMPUTE_MODES:
        raise UserInputError(f"{field} must be one of {', '.join(RECOMPUTE_MODES)} (got {value!r})", field=field)


def check_precision(value: object, field: str = "precision") -> None:
    if value not in TRAIN_PRECISIONS:
        raise UserInputError(f"{field} must be one of {', '.join(TRAIN_PRECISIONS)} (got {value!r})", field=field)


#: Training precisions that need the device's own tensor-core format (a device without it cannot
#: run Transformer-Engine-style FP8 training: there is no FP8 GEMM to call).
HARDWARE_PRECISIONS: Final = ("fp8", "fp4")


def rule_precision_on_device(precision: str, device: Any) -> PlanIssue | None:
    """FP8 (and any format in :data:`HARDWARE_PRECISIONS`) training only on devices whose catalog
    entry lists that format's dense peak (FP8: H100/H200/B200, MI300, Gaudi 2/3...; not A100, V100 or
    Ascend 910B. FP4: Blackwell, MI355X)."""
    if precision in HARDWARE_PRECISIONS and not device.supports(precision):
        have = ", ".join(device.dense_precisions) or "none listed"
        return PlanIssue("precision", f"{device.id} has no {precision.upper()} tensor cores (its dense formats: {have}): "
                                      f"{precision} training cannot run there; use bf16")
    return None


def check_device_counts(counts: Sequence[int], field: str = "devices") -> None:
    """Every device count a positive integer."""
    for c in counts:
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise UserInputError(f"device counts must be positive integers (got {c!r})", field=field)


def check_top(top: int) -> None:
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise UserInputError(f"top must be a positive integer (got {top!r})", field="top")


# ---------------------------------------------------------------------------------------
# Rules of the plan alone (checked when a ParallelPlan is built)
# ---------------------------------------------------------------------------------------
def rule_sp_needs_tp(tp: int, sp: bool) -> PlanIssue | None:
    if sp and tp == 1:
        return PlanIssue("sp", "sequence parallelism (sp) needs tp > 1")
    return None


def rule_vpp_needs_pp(pp: int, vpp: int) -> PlanIssue | None:
    if vpp > 1 and pp == 1:
        return PlanIssue("vpp", f"vpp ({vpp}) needs pipeline parallelism (pp > 1)")
    return None


def rule_ep_overlap(ep_overlap: bool, ep: int, pp: int, vpp: int, recompute: str,
                    recompute_modules: Sequence[str] | None = None) -> PlanIssue | None:
    """Megatron-Core's batch-level MoE all-to-all overlap (--overlap-moe-expert-parallel-comm) merges one
    micro-batch's forward with another's backward: it needs expert parallelism, a virtual pipeline when
    pp > 1, no full recomputation and no selective recomputation of the MoE block (``recompute_modules`` with
    ``moe``; megatron/core/transformer/transformer_config.py asserts each)."""
    if not ep_overlap:
        return None
    if ep <= 1:
        return PlanIssue("ep_overlap", "ep_overlap (the MoE all-to-all overlap) needs expert parallelism (ep > 1)")
    if pp > 1 and vpp <= 1:
        return PlanIssue("ep_overlap", f"ep_overlap with pipeline parallelism (pp {pp}) needs a virtual pipeline "
                                       "(vpp > 1), as Megatron-Core asserts")
    if recompute in ("full", "offload", "partial"):
        return PlanIssue("ep_overlap", f"ep_overlap excludes full recomputation (recompute {recompute!r}): "
                                       "Megatron-Core asserts recompute_granularity != 'full'")
    if recompute == "selective" and recompute_modules is not None and "moe" in recompute_modules:
        return PlanIssue("ep_overlap", "ep_overlap excludes selective recomputation of the MoE block (recompute_modules "
                                       "with 'moe'): Megatron-Core asserts 'moe' not in recompute_modules")
    return None


def rule_recompute_modules(modules: Sequence[str] | None, model: ModelArch, stack: Any) -> PlanIssue | None:
    """The job's ``recompute_modules`` must name modules ``model`` has (:func:`xpuplan.perf.recompute.
    recompute_modules_problem`), on a stack whose selective recomputation is Megatron-style (``TrainingStack.
    selective_recompute`` attention); op-level checkpointing (torchtitan) chooses its ops itself."""
    if modules is None:
        return None
    if getattr(stack, "selective_recompute", "attention") != "attention":
        return PlanIssue("recompute_modules", f"the training stack {getattr(stack, 'id', '') or ''!r} checkpoints by "
                                              "op (selective_recompute op_sac), not by module: leave "
                                              "recompute_modules blank")
    problem = recompute_modules_problem(model, modules)
    return PlanIssue("recompute_modules", problem) if problem else None


def rule_offload_modules(modules: Sequence[str] | None, model: ModelArch, stack: Any,
                         recompute_modules: Sequence[str] | None = None) -> PlanIssue | None:
    """The job's ``offload_modules`` (fine-grained activation offloading) need a stack that has it
    (``TrainingStack.module_offload``: Megatron-Core, Megatron-Bridge) and modules ``model`` has; Megatron-Core
    asserts that ``attn_proj`` comes with ``core_attn`` (the projection's input is the attention output, which the
    attention's backward needs) and that nothing inside the MoE block is offloaded when selective recomputation
    re-runs the whole block (``moe`` in ``recompute_modules``; megatron/core/transformer/transformer_config.py)."""
    if modules is None:
        return None
    if not getattr(stack, "module_offload", False):
        return PlanIssue("offload_modules", f"the training stack {getattr(stack, 'id', '') or ''!r} has no fine-grained "
                                            "activation offloading (Megatron-Core --offload-modules): leave "
                                            "offload_modules blank or use --stack megatron-core")
    if "attn_proj" in modules and "core_attn" not in modules:
        return PlanIssue("offload_modules", "'attn_proj' needs 'core_attn' too: the projection's input is the "
                                            "attention output, which the attention's backward needs (Megatron-Core)")
    inside = [x for x in ("expert_fc1", "moe_act") if x in modules]
    if inside and (model.moe is None or not model.n_moe_layers):
        return PlanIssue("offload_modules", f"{', '.join(map(repr, inside))} offload(s) part of a MoE layer; "
                                            f"{model.name or 'the model'} has none")
    if inside and recompute_modules is not None and "moe" in recompute_modules:
        return PlanIssue("offload_modules", f"cannot offload {', '.join(map(repr, inside))} while selective "
                                            "recomputation re-runs the whole MoE block ('moe' in recompute_modules), "
                                            "as Megatron-Core asserts")
    return None


def rule_offload_modules_recompute(modules: Sequence[str] | None, recompute: str) -> PlanIssue | None:
    """Fine-grained activation offloading moves the inputs of modules a layer keeps: Megatron-Core refuses it with
    whole-layer CPU offloading (``layer_offload``), and a fully recomputed layer keeps no module inputs
    (``full``, ``offload``)."""
    if modules is None or recompute not in ("layer_offload", "full", "offload"):
        return None
    why = ("Megatron-Core refuses fine-grained activation offloading with CPU offloading of whole layers"
           if recompute == "layer_offload" else "a fully recomputed layer keeps only its input, no module's")
    return PlanIssue("offload_modules", f"offload_modules with recompute {recompute!r}: {why}")


def rule_ep_overlap_on_stack(ep_overlap: bool, stack: Any) -> PlanIssue | None:
    """A plan turns on its training stack's opt-in MoE all-to-all overlap (``TrainingStack.ep_overlap_opt_in``):
    a stack without one (torchtitan, DeepSpeed, MaxText, ...) cannot."""
    if ep_overlap and not stack.ep_overlap_opt_in > 0:
        return PlanIssue("ep_overlap", f"the training stack {stack.name!r} has no opt-in MoE all-to-all overlap "
                                       "(ep_overlap_opt_in 0); megatron-core and nemo have one")
    return None


def rule_ep_divides_dp_cp(ep: int, dp: int, cp: int, tp: int = 1) -> PlanIssue | None:
    """Expert parallelism over the ranks of one pipeline stage. Classic layouts carve EP out of
    dp·cp; MoE parallel folding (Liu et al. 2025, arXiv 2504.14960; Megatron-Core >= 0.10) lets the
    expert layers regroup all tp·cp·dp ranks of a stage (expert-TP 1), so EP up to tp·cp·dp is valid
    when it divides that product."""
    if (tp * dp * cp) % ep:
        return PlanIssue("ep", f"ep ({ep}) must divide tp·cp·dp ({tp * dp * cp}): expert layers regroup the "
                               "ranks of a pipeline stage (MoE parallel folding)")
    return None


# ---------------------------------------------------------------------------------------
# Rules of the plan against the model and the job
# ---------------------------------------------------------------------------------------
def rule_tp_divides_heads(tp: int, model: ModelArch) -> PlanIssue | None:
    if model.n_heads % tp:
        return PlanIssue("tp", f"tp ({tp}) must divide n_heads ({model.n_heads})")
    return None


def rule_tp_divides_kv_heads(tp: int, model: ModelArch) -> PlanIssue | None:
    """KV heads split over TP, or replicated when TP exceeds them (Megatron-LM and vLLM give each
    group of tp/kv ranks a copy of one KV head: tp must then be a multiple of the KV heads). MLA's
    latent is replicated, so it has no such rule."""
    if model.mla is None and model.kv_heads % tp and tp % model.kv_heads:
        return PlanIssue("tp", f"tp ({tp}) must divide n_kv_heads ({model.kv_heads}) or be a multiple of it "
                               "(KV heads replicated)")
    return None


#: Pipeline slots the embedding and the loss may take in an uneven split: Megatron-Core's
#: account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split count each as one layer,
#: so L + 2 slots are divided over pp·vpp virtual stages and the first (last) virtual stage may hold the
#: embedding (loss) alone (megatron/core/transformer/transformer_block.py get_num_layers_to_build;
#: NVIDIA's Llama 3.1 405B recipes: 126 layers on PP 16 x VP 8 = 128 virtual stages).
EDGE_PIPELINE_SLOTS = 2


def rule_pp_layers(pp: int, vpp: int, model: ModelArch, *, uneven_pipeline: bool = False) -> PlanIssue | None:
    """pp·vpp divides the layers; with ``uneven_pipeline`` it need only not exceed them plus the
    embedding's and the loss's slots (:data:`EDGE_PIPELINE_SLOTS`)."""
    if uneven_pipeline:
        if pp * vpp > model.n_layers + EDGE_PIPELINE_SLOTS:
            return PlanIssue("pp", f"pp·vpp ({pp}·{vpp}) exceeds n_layers ({model.n_layers}) plus the embedding's "
                                   f"and the loss's pipeline slots ({EDGE_PIPELINE_SLOTS})")
        return None
    if model.n_layers % (pp * vpp):
        what = f"pp·vpp ({pp}·{vpp})" if vpp > 1 else f"pp ({pp})"
        return PlanIssue("pp", f"{what} must divide n_layers ({model.n_layers}) (or allow an uneven pipeline)")
    return None


def rule_ep_experts(ep: int, model: ModelArch) -> PlanIssue | None:
    if ep <= 1:
        return None
    if model.moe is None:
        return PlanIssue("ep", f"ep ({ep}) needs an MoE model; {model.id} is dense")
    if model.moe.n_routed_experts % ep:
        return PlanIssue("ep", f"ep ({ep}) must divide the routed experts ({model.moe.n_routed_experts})")
    return None


def rule_cp_divides_seq(cp: int, seq_len: int) -> PlanIssue | None:
    if cp > 1 and seq_len % (2 * cp):
        return PlanIssue("cp", f"2·cp ({2 * cp}) must divide seq_len ({seq_len}) for load-balanced ring attention")
    return None


def rule_cp_all_to_all_heads(cp: int, tp: int, model: ModelArch, cp_algorithm: str) -> PlanIssue | None:
    """All-to-all context parallelism (DeepSpeed Ulysses, Jacobs et al. 2023, arXiv 2309.14509) hands
    each rank 1/cp of the attention heads for the whole sequence: the heads per TP rank must divide by
    cp (ring and all-gather CP split the sequence, not the heads, and have no such rule)."""
    heads = model.n_heads // max(tp, 1)
    if cp > 1 and cp_algorithm == "all_to_all" and heads % cp:
        return PlanIssue("cp", f"cp ({cp}) must divide the attention heads per TP rank ({heads}) for all-to-all "
                               "(Ulysses) context parallelism, which splits the heads")
    return None


def rule_sp_divides_seq(sp: bool, tp: int, cp: int, seq_len: int) -> PlanIssue | None:
    if sp and (seq_len // cp) % tp:
        return PlanIssue("sp", f"tp ({tp}) must divide the per-rank sequence ({seq_len // cp}) under sequence parallelism")
    return None


def rule_global_batch(dp: int, micro_batch: int, grad_accum: int, global_batch_seqs: int) -> PlanIssue | None:
    """dp · micro_batch · grad_accum equals the job's global batch; blames the batch when it is
    smaller than dp (no micro-batch size can help), the micro-batch otherwise."""
    got = dp * micro_batch * grad_accum
    if got == global_batch_seqs:
        return None
    if global_batch_seqs < dp:
        return PlanIssue("global_batch", f"the global batch ({global_batch_seqs} sequences) is smaller than dp ({dp}): "
                         "every data-parallel rank needs at least one sequence")
    return PlanIssue("micro_batch", f"dp·micro_batch·grad_accum ({dp}·{micro_batch}·{grad_accum} = {got}) must equal "
                     f"the global batch ({global_batch_seqs} sequences)")


def rule_interleaved_schedule(pp: int, vpp: int, grad_accum: int) -> PlanIssue | None:
    if vpp > 1 and grad_accum % pp:
        return PlanIssue("vpp", f"interleaving (vpp {vpp}) needs the micro-batch count ({grad_accum}) divisible by pp ({pp})")
    return None


def rule_device_count(tp: int, pp: int, dp: int, cp: int, n_devices: int) -> PlanIssue | None:
    n = tp * pp * dp * cp
    if n != n_devices:
        return PlanIssue("dp", f"tp·pp·dp·cp ({tp}·{pp}·{dp}·{cp} = {n}) must equal the device count ({n_devices})")
    return None


def rule_model_parallel_divides_devices(tp: int, pp: int, cp: int, n_devices: int) -> PlanIssue | None:
    if n_devices % (tp * pp * cp):
        return PlanIssue("tp", f"tp·pp·cp ({tp}·{pp}·{cp} = {tp * pp * cp}) must divide the device count ({n_devices})")
    return None


def rule_dp_micro_batch_divides_batch(dp: int, micro_batch: int, global_batch_seqs: int) -> PlanIssue | None:
    if global_batch_seqs % (dp * micro_batch) == 0:
        return None
    if global_batch_seqs < dp:
        return rule_global_batch(dp, micro_batch, 1, global_batch_seqs)
    return PlanIssue("micro_batch", f"dp·micro_batch ({dp}·{micro_batch} = {dp * micro_batch}) must divide the global "
                     f"batch ({global_batch_seqs} sequences)")


def model_issues(model: ModelArch, *, tp: int, pp: int, vpp: int = 1, ep: int = 1,
                 uneven_pipeline: bool = False) -> list[PlanIssue]:
    """The rules that need only the model: heads, KV heads, layers, experts."""
    heads = rule_tp_divides_heads(tp, model) or rule_tp_divides_kv_heads(tp, model)
    rules = (heads, rule_pp_layers(pp, vpp, model, uneven_pipeline=uneven_pipeline), rule_ep_experts(ep, model))
    return [r for r in rules if r is not None]


def rule_layer_offload(recompute: str, pp: int, stack: Any) -> PlanIssue | None:
    """``layer_offload`` (whole layers' activations in host memory, no recomputation) needs a stack that can do it
    (``TrainingStack.layer_offload``: Megatron-Core's CPU offloading) and no pipeline parallelism (Megatron-Core
    refuses cpu_offloading with pipeline_model_parallel_size > 1)."""
    if recompute != "layer_offload":
        return None
    if not getattr(stack, "layer_offload", False):
        return PlanIssue("recompute", f"recompute layer_offload needs a training stack that offloads whole layers "
                                      f"(megatron-core, nemo); {getattr(stack, 'id', '') or 'this stack'} does not: use "
                                      "offload, full or selective")
    if pp > 1:
        return PlanIssue("pp", f"recompute layer_offload needs pp = 1 (got {pp}): Megatron-Core cannot offload "
                               "activations with pipeline parallelism")
    return None


def rule_partial_recompute(recompute: str, stack: Any) -> PlanIssue | None:
    """``partial`` (full recomputation of some layers, every activation of the others) needs a stack that can choose
    layers (``TrainingStack.partial_recompute``: Megatron-Core's block method, torchtitan's layer checkpointing; not
    MaxText's one remat policy for every scanned layer)."""
    if recompute != "partial" or getattr(stack, "partial_recompute", True):
        return None
    return PlanIssue("recompute", f"recompute partial needs a training stack that recomputes chosen layers; "
                                  f"{getattr(stack, 'id', '') or 'this stack'} applies one policy to every layer: use "
                                  "full, selective or none")


def rule_stack_parallelism(stack: Any, *, tp: int = 1, pp: int = 1, vpp: int = 1, cp: int = 1, ep: int = 1,
                           zero_stage: int = 0, uneven: bool = False) -> PlanIssue | None:
    """A plan uses only the model-parallel dimensions and the ZeRO stage its training stack can run
    (``TrainingStack.parallelism``, ``TrainingStack.zero_stages``): PyTorch FSDP and Composer have no pipeline or
    context parallelism and no ZeRO-1, DeepSpeed's pipeline engine no virtual stages. ``uneven``: the plan's stages
    hold different layer counts, which a stack without ``uneven_pipeline`` cannot run (Intel's Gaudi scripts, legacy
    Megatron-LM). The first dimension the stack lacks, in the order tp, pp, vpp, cp, ep, then uneven stages, then
    the ZeRO stage."""
    dims = getattr(stack, "parallelism", None)
    zeros = getattr(stack, "zero_stages", None)
    name = getattr(stack, "id", "") or "this stack"
    if dims is not None:
        for dim, size in (("tp", tp), ("pp", pp), ("vpp", vpp), ("cp", cp), ("ep", ep)):
            if size > 1 and dim not in dims:
                can = ", ".join(dims) if dims else "data parallelism only"
                return PlanIssue(dim, f"{dim} {size}: the training stack {name} has no {PARALLEL_DIM_NAMES[dim]} "
                                      f"(it runs {can}); use {dim} 1 or another stack")
    if uneven and pp > 1 and not getattr(stack, "uneven_pipeline", True):
        what = f"pp·vpp ({pp}·{vpp})" if vpp > 1 else f"pp ({pp})"
        return PlanIssue("pp", f"{what}: the training stack {name} needs the layers to divide evenly over the pipeline "
                               "stages (no uneven first/last stages)")
    if zeros is not None and zero_stage not in zeros:
        return PlanIssue("zero_stage", f"zero_stage {zero_stage}: the training stack {name} offers ZeRO stages "
                                       f"{', '.join(map(str, zeros))}")
    piped = getattr(stack, "pipeline_zero_stages", None)
    if pp > 1 and piped is not None and zero_stage not in piped:
        return PlanIssue("zero_stage", f"zero_stage {zero_stage} with pp {pp}: the training stack {name} pipelines "
                                       f"only with ZeRO stages {', '.join(map(str, piped))}")
    return None


def rule_dualpipe(pp: int, vpp: int, n_microbatches: int, stack: Any) -> PlanIssue | None:
    """A pipelined plan on a stack whose schedule is DualPipe (``TrainingStack.pipeline_schedule``) obeys DualPipe's
    own asserts (deepseek-ai/DualPipe ``dualpipe/dualpipe.py``, ``DualPipe.step``: ``num_ranks % 2 == 0``,
    ``num_chunks % 2 == 0 and num_chunks >= num_ranks * 2``): an even pp, an even number of micro-batches per step of
    at least 2·pp (half enter from each end); each rank holds two stages, not virtual stages (vpp 1)."""
    if pp <= 1 or getattr(stack, "pipeline_schedule", "1f1b") != "dualpipe":
        return None
    name = getattr(stack, "id", "") or "this stack"
    if pp % 2:
        return PlanIssue("pp", f"DualPipe ({name}) needs an even pp (got {pp}): half the micro-batches enter at each "
                               "end of the pipeline")
    if vpp > 1:
        return PlanIssue("vpp", f"DualPipe ({name}) has no virtual stages (got vpp {vpp}): each rank holds two "
                                "stages, i and pp-1-i")
    if n_microbatches % 2 or n_microbatches < 2 * pp:
        return PlanIssue("micro_batch", f"DualPipe ({name}) needs an even number of micro-batches per step, at least "
                                        f"2·pp = {2 * pp} (got {n_microbatches}): use a smaller micro_batch or a "
                                        "larger global batch")
    return None


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
    out = model_issues(model, tp=plan.tp, pp=plan.pp, vpp=plan.vpp, ep=plan.ep, uneven_pipeline=uneven_pipeline)
    rules = [rule_cp_divides_seq(plan.cp, seq_len), rule_sp_divides_seq(plan.sp, plan.tp, plan.cp, seq_len)]
    if global_batch_seqs is not None:
        rules.append(rule_global_batch(plan.dp, plan.micro_batch, plan.grad_accum, global_batch_seqs))
    rules.append(rule_interleaved_schedule(plan.pp, plan.vpp, plan.grad_accum))
    if n_devices is not None:
        rules.append(rule_device_count(plan.tp, plan.pp, plan.dp, plan.cp, n_devices))
    return out + [r for r in rules if r is not None]


def raise_first(issues: list[PlanIssue]) -> None:
    """``UserInputError`` for the first issue (naming its field), mentioning the others."""
    if issues:
        first = issues[0]
        more = f" (and {len(issues) - 1} more: {'; '.join(i.message for i in issues[1:])})" if len(issues) > 1 else ""
        raise UserInputError(first.message + more, field=first.field)


def check_plan(
    plan: ParallelPlan, model: ModelArch, *, seq_len: int, global_batch_seqs: int | None = None,
    n_devices: int | None = None, uneven_pipeline: bool = False,
) -> None:
    """Raise ``UserInputError`` (naming the field) for the first rule ``plan`` breaks."""
    raise_first(plan_issues(plan, model, seq_len=seq_len, global_batch_seqs=global_batch_seqs, n_devices=n_devices,
                            uneven_pipeline=uneven_pipeline))


def check_finite_positive(field: str, value: float | None) -> None:
    """A finite, positive number (None allowed: not given)."""
    if value is not None and not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise UserInputError(f"{field} must be a finite positive number (got {value!r})", field=field)
