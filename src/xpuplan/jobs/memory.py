"""Memory jobs: ``memory train`` and ``memory infer``, with the planners' own validity checks.

A layout ``train estimate`` refuses (tp not dividing the heads, pp not dividing the layers, ...)
is refused here with the same message (exit 2), because both call ``train.validity``; the same
holds for ``memory infer`` and ``infer estimate`` through ``serve.validity``. The fit verdict of
``memory infer --hw`` is the serving planner's (engine memory fraction, paged KV blocks, weights,
workspace and activations), so the two commands agree on whether a replica fits. A request that
does not fit raises ``InfeasibleError`` carrying the result (exit 3).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final, Literal

from pydantic import Field, model_validator

from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.jobs.context import RunContext, default_context
from xpuplan.jobs.requests import (
    Batch,
    Degree,
    Id,
    ModelRef,
    Request,
    Reserve,
    SeqLen,
    flag_error,
    names_flags,
)
from xpuplan.jobs.results import MEMORY_FIGURES, Result, clean, used
from xpuplan.workload.training import (
    DEFAULT_HOST_MEMORY_RESERVE,
    OFFLOAD_MODULES_HELP,
    RECOMPUTE_MODULES_HELP,
    lora_target_list,
    offload_module_list,
    recompute_module_list,
)
from xpuplan.workload.vocabulary import LORA_TARGETS, Method, Recompute

#: Largest tensor-parallel size tried when looking for the smallest that fits.
MAX_TP_SEARCH: Final = 1024
#: Weight dtypes of ``memory infer`` and the serving precision scheme each stands for.
INFER_DTYPES: Final = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "int8": "int8", "int4": "int4-wo",
                       "fp4": "nvfp4", "nvfp4": "nvfp4", "mxfp4": "mxfp4"}
#: Storage format of each weight dtype for the analytic model (FP4 is NVFP4 unless MXFP4 is named: the
#: block scales are part of the format, as the serving replica counts them).
_WEIGHT_STORAGE: Final = {"fp4": "nvfp4"}
KV_DTYPES: Final = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
#: Tokens per sequence of ``memory infer`` when ``--context`` is not given (the model's context when shorter).
DEFAULT_INFER_CONTEXT: Final = 4096


class MemoryTrainRequest(Request):
    """``xpuplan memory train``."""

    model: ModelRef = Field(description="model id, alias or config.json path")
    hw: Id | None = Field(default=None, description="device to check the fit against")
    seq: SeqLen = Field(default=4096, description="sequence length, tokens")
    micro_batch: int = Field(default=1, ge=1, le=1 << 20, description="sequences per micro-batch")
    tp: Degree = 1
    pp: Degree = 1
    dp: Degree = 1
    cp: Degree = 1
    ep: Degree = 1
    vpp: Degree = 1
    grad_accum: int | None = Field(default=None, ge=1, le=1 << 20,
                                   description="micro-batches per step per pipeline (a plan key's ga): with pp > 1, how "
                                               "many are in flight on the first stage (interleaved schedules keep "
                                               "more the more there are); default pp, the fewest a pipeline runs")
    zero: int | None = Field(default=None, ge=0, le=3, description="ZeRO stage 0-3 (default: 1, or the nearest the "
                                                                    "training stack offers where it has no ZeRO-1)")
    recompute: Recompute = "selective"
    recipe: Id = Field(default="bf16-adam", description="optimizer-state recipe")
    method: Method = "full"
    lora_rank: int = Field(default=16, ge=1, le=65536)
    recompute_layers: int | None = Field(default=None, ge=1, le=100000,
                                         description="layers per pipeline stage --recompute partial recomputes in "
                                                     "full (default: the fewest that fit --hw)")
    recompute_modules: str | None = Field(default=None, max_length=200, description=RECOMPUTE_MODULES_HELP)
    offload_modules: str | None = Field(default=None, max_length=200, description=OFFLOAD_MODULES_HELP)
    lora_targets: str = Field(default="all", max_length=100,
                              description="matrices LoRA/QLoRA adapts, a comma list of q, k, v, o, gate, up, down or "
                                          "'all'")
    reserve: Reserve = Field(default=0.05, description="fraction of device memory kept free")
    ep_overlap: bool = Field(default=False, description="Megatron-Core's MoE all-to-all overlap is on (a plan key's "
                             "-epo): one more layer of activations, pipelined also one model chunk")
    uneven_pipeline: bool = Field(default=False, description="allow pp not dividing the layers (the busiest stage "
                                  "holds ceil(layers/pp); the first and last stages take the missing ones)")
    stack: Id | None = Field(default=None, description="training stack profile whose conventions apply (FP8 linear "
                             "inputs, whole experts, layer offload, DualPipe's two stages per rank); default: the one "
                             "the device's vendor ships")

    @model_validator(mode="after")
    def _check_targets(self) -> MemoryTrainRequest:
        lora_target_list(self.lora_targets, self.flag("lora_targets"))
        if self.recompute_layers is not None and self.recompute != "partial":
            raise flag_error(type(self), "recompute_layers", "a layer count is for --recompute partial (got "
                             f"--recompute {self.recompute})")
        recompute_module_list(self.recompute_modules, self.flag("recompute_modules"))
        if self.recompute_modules is not None and self.recompute != "selective":
            raise flag_error(type(self), "recompute_modules", "modules are what --recompute selective re-runs (got "
                             f"--recompute {self.recompute})")
        offload_module_list(self.offload_modules, self.flag("offload_modules"))
        return self


class MemoryInferRequest(Request):
    """``xpuplan memory infer``."""

    model: ModelRef = Field(description="model id, alias or config.json path")
    hw: Id | None = Field(default=None, description="device to check the fit against")
    dtype: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4", "nvfp4", "mxfp4"] = "bf16"
    kv_dtype: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4"] = "bf16"
    batch: Batch = 1
    context: SeqLen | None = Field(default=None, description="tokens per sequence (prompt + output); default "
                                   f"{DEFAULT_INFER_CONTEXT}, or the model's context when shorter")
    tp: Degree | None = Field(default=None, description="tensor-parallel devices per replica")
    pp: Degree = 1
    engine: Id | None = Field(default=None, description="serving engine whose memory rules apply (with --hw)")
    reserve: Reserve | None = Field(default=None, description="fraction of device memory kept free "
                                    "(default: the engine's, e.g. vLLM uses 90%)")


class MemoryTrainResult(Result):
    """Result of ``memory train``."""

    NAME: ClassVar[str] = "memory.train"
    model: str
    method: str
    recipe: str
    plan: dict[str, Any]
    bytes_per_device: dict[str, float]
    lora: dict[str, Any] | None = Field(default=None, description="LoRA/QLoRA adapters: rank and adapted matrices "
                                        "(absent for full training)")
    hardware: str | None = None
    device_memory_bytes: float | None = None
    usable_bytes: float | None = None
    fits: bool | None = Field(default=None, description="None without --hw")
    headroom_bytes: float | None = None
    host_usable_bytes: float | None = Field(
        default=None, description="host memory per device offloaded activations may take (the catalog's reference "
                                  "system's CPU memory per device less the host reserve); None without --hw or where "
                                  "the catalog has no host-memory figure (not checked)")


class MemoryInferResult(Result):
    """Result of ``memory infer``."""

    NAME: ClassVar[str] = "memory.infer"
    model: str
    weight_dtype: str
    kv_dtype: str
    batch: int
    context: int
    tp: int
    pp: int
    bytes_per_device: dict[str, float]
    bytes_per_replica: dict[str, float]
    hardware: str | None = None
    engine: str | None = None
    fits: bool | None = Field(default=None, description="the serving planner's verdict (None without --hw)")
    devices_per_replica: int | None = None
    usable_bytes: float | None = None
    headroom_bytes: float | None = Field(default=None, description="KV budget left after the batch's cache")
    max_batch_at_context: int | None = None
    serving_memory: dict[str, float] | None = Field(default=None, description="the serving planner's memory plan")
    reasons: list[str] = Field(default_factory=list, description="why it does not fit")


# =================================================================================================
# memory train
# =================================================================================================
def dualpipe_microbatches(pp: int) -> int:
    """Micro-batches per step ``memory train`` assumes under DualPipe (it takes no batch): the fewest DualPipe runs,
    2·pp (``train.validity.rule_dualpipe``), enough for its pp + 1 in flight."""
    return 2 * pp


def _train_layout_issues(req: MemoryTrainRequest, model: Any, stack: Any, modules: tuple[str, ...] | None,
                         offloaded: tuple[str, ...] | None, zero: int) -> None:
    """The training planner's structural rules for this layout and the training stack (UserInputError naming
    the flag)."""
    from xpuplan.train import validity

    sp = req.tp > 1
    issues = validity.model_issues(model, tp=req.tp, pp=req.pp, vpp=req.vpp, ep=req.ep,
                                   uneven_pipeline=req.uneven_pipeline)
    issues += [i for i in (validity.rule_vpp_needs_pp(req.pp, req.vpp), validity.rule_cp_divides_seq(req.cp, req.seq),
                           validity.rule_sp_divides_seq(sp, req.tp, req.cp, req.seq),
                           validity.rule_ep_divides_dp_cp(req.ep, req.dp, req.cp, req.tp),
                           validity.rule_stack_parallelism(stack, tp=req.tp, pp=req.pp, vpp=req.vpp, cp=req.cp,
                                                           ep=req.ep, zero_stage=zero,
                                                           uneven=model.n_layers % (req.pp * req.vpp) != 0),
                           validity.rule_layer_offload(req.recompute, req.pp, stack),
                           validity.rule_partial_recompute(req.recompute, stack),
                           validity.rule_ep_overlap(req.ep_overlap, req.ep, req.pp, req.vpp, req.recompute, modules),
                           validity.rule_recompute_modules(modules, model, stack),
                           validity.rule_offload_modules(offloaded, model, stack, modules),
                           validity.rule_offload_modules_recompute(offloaded, req.recompute),
                           validity.rule_ep_overlap_on_stack(req.ep_overlap, stack),
                           validity.rule_dualpipe(req.pp, req.vpp, req.grad_accum or dualpipe_microbatches(req.pp),
                                                  stack))
              if i is not None]
    if issues:
        first = issues[0]
        field = {"seq_len": "--seq", "micro_batch": "--micro-batch", "zero_stage": "--zero", "stack": "--stack"}.get(
            first.field, "--" + first.field.replace("_", "-"))
        more = f" (and {len(issues) - 1} more: {'; '.join(i.message for i in issues[1:])})" if len(issues) > 1 else ""
        raise UserInputError(first.message + more, field=field)


@names_flags
def memory_train(req: MemoryTrainRequest, ctx: RunContext | None = None) -> MemoryTrainResult:
    """Weights, gradients, optimizer states and activations per device; the fit on ``--hw``."""
    from xpuplan.perf.memory import (
        default_recipe_for,
        host_usable_bytes,
        saved_linear_input_bytes,
        saved_moe_act_input_bytes,
        training_memory,
    )
    from xpuplan.perf.recompute import (
        ordered_offload_modules,
        ordered_selective_modules,
        stack_selective_modules,
    )

    ctx = ctx or default_context()
    m = ctx.model(req.model)
    # the stack asked for, or the default one (for --hw, the one its vendor ships): its conventions and capabilities
    stack = ctx.assumptions().training_stack(req.stack, field="--stack",
                                             device=ctx.device(req.hw) if req.hw else None)
    # ZeRO-1 unless given, or the stack's nearest where it has none (FSDP: SHARD_GRAD_OP)
    zero = stack.default_zero_stage() if req.zero is None else req.zero
    modules = recompute_module_list(req.recompute_modules, req.flag("recompute_modules"))
    if modules is None and req.recompute == "selective":  # the stack's own selective set, where it has one
        modules = stack_selective_modules(m, stack.selective_modules, f"training_stacks.{stack.id}.selective_modules")
    offloaded = offload_module_list(req.offload_modules, req.flag("offload_modules"))
    _train_layout_issues(req, m, stack, modules, offloaded, zero)
    # an FP8/FP4 state recipe means FP8/FP4 GEMMs: their saved inputs follow the default training stack
    gemm_precision = next((p for p in ("fp8", "fp4") if req.recipe in (
        default_recipe_for(p), default_recipe_for(p, fp8_primary_weights=True))), "bf16")
    lin_bytes = saved_linear_input_bytes(gemm_precision, stack.fp8_saved_activations)
    dualpipe = stack.pipeline_schedule == "dualpipe" and req.pp > 1
    dev = ctx.device(req.hw) if req.hw else None
    usable_bytes = dev.memory_bytes * (1 - req.reserve) if dev is not None else None
    targets = lora_target_list(req.lora_targets, req.flag("lora_targets")) or LORA_TARGETS
    mem = training_memory(m, seq_len=req.seq, micro_batch=req.micro_batch, tp=req.tp, pp=req.pp, dp=req.dp, cp=req.cp,
                          ep=req.ep, vpp=req.vpp, zero_stage=zero, recompute=req.recompute, recipe=req.recipe,
                          method=req.method, lora_rank=req.lora_rank, linear_input_bytes=lin_bytes,
                          lora_targets=targets,
                          usable_bytes=usable_bytes, whole_experts=stack.expert_tp_one, ep_overlap=req.ep_overlap,
                          recompute_layers=req.recompute_layers,
                          recompute_modules=modules, kv_repeat=stack.attention_kv_repeat,
                          dualpipe=dualpipe, n_microbatches=(req.grad_accum if req.grad_accum is not None else
                                                             dualpipe_microbatches(req.pp) if dualpipe else None),
                          moe_act_input_bytes=saved_moe_act_input_bytes(gemm_precision, stack.fp8_moe_act_inputs),
                          offload_modules=offloaded)
    plan: dict[str, Any] = {"tp": req.tp, "pp": req.pp, "dp": req.dp, "cp": req.cp, "ep": req.ep, "vpp": req.vpp,
            "zero_stage": zero, "recompute": req.recompute, "seq_len": req.seq, "micro_batch": req.micro_batch,
            "grad_accum": req.grad_accum,
            "ep_overlap": req.ep_overlap, "stack": stack.id, "pipeline_schedule": "dualpipe" if dualpipe else "1f1b"}
    # what a selective plan re-runs, in Megatron-Core's names and order
    plan["recompute_modules"] = ordered_selective_modules(m, modules) if req.recompute == "selective" else None
    plan["offload_modules"] = ordered_offload_modules(offloaded) if offloaded is not None else None
    out: dict[str, Any] = {"model": m.id, "method": req.method, "recipe": req.recipe, "plan": plan,
                           "bytes_per_device": clean(mem.to_dict())}
    if req.method != "full":
        out["lora"] = {"rank": req.lora_rank,
                       "targets": list(targets)}
    host_usable = None
    if dev is not None and usable_bytes is not None:
        host_usable = host_usable_bytes(dev.host_memory_bytes, DEFAULT_HOST_MEMORY_RESERVE)
        out.update(hardware=dev.id, device_memory_bytes=dev.memory_bytes, usable_bytes=usable_bytes,
                   fits=mem.total <= usable_bytes and (host_usable is None or mem.host_activations <= host_usable),
                   headroom_bytes=usable_bytes - mem.total, host_usable_bytes=host_usable)
    res = MemoryTrainResult(**out, used=used(None, [dev] if dev else [], MEMORY_FIGURES, precisions=()))
    if dev is not None and not res.fits:
        why = []
        if mem.total > res.usable_bytes:  # type: ignore[operator]
            why.append(f"{mem.total / 1e9:,.1f} GB per device > {res.usable_bytes / 1e9:,.1f} GB usable "  # type: ignore[operator]
                       f"({1 - req.reserve:.0%} of {dev.memory_bytes / 1e9:,.1f} GB)")
        if host_usable is not None and mem.host_activations > host_usable:
            why.append(f"{mem.host_activations / 1e9:,.1f} GB of offloaded activations per device > "
                       f"{host_usable / 1e9:,.1f} GB of host memory usable ({1 - DEFAULT_HOST_MEMORY_RESERVE:.0%} of "
                       f"{dev.host_memory_bytes / 1e9:,.1f} GB per device; a host with more: --hw-figure "  # type: ignore[operator]
                       f"{dev.id}:host_memory.capacity_gib=N)")
        raise InfeasibleError(
            f"{m.id} does not fit on {dev.id} with this layout",
            reasons=why,
            hint="`xpuplan train search` finds a layout that fits; more tp/pp/dp, ZeRO 3, full recompute or "
                 "activation offload (--recompute offload or layer_offload) help"
                 + (", and so does keeping the experts' inputs in host memory (--offload-modules expert_fc1,moe_act)"
                    if m.moe is not None and m.n_moe_layers and stack.module_offload and offloaded is None
                    and not (modules is not None and "moe" in modules) and req.recompute not in (
                        "full", "offload", "layer_offload") else ""),
            result=res)
    return res


# =================================================================================================
# memory infer
# =================================================================================================
def _replica_fit(model: Any, dev: Any, req: MemoryInferRequest, tp: int, assumptions: Any,
                 context: int) -> tuple[Any, Any, str | None]:
    """(replica, memory plan, None) if the batch fits at ``tp``, else (replica, plan, reason)."""
    from xpuplan.serve import make_replica
    from xpuplan.serve.kv import memory_plan, require_fit

    frac = None if req.reserve is None else 1 - req.reserve
    rep = make_replica(model, dev, tp=tp, pp=req.pp, dtype=INFER_DTYPES[req.dtype], kv_dtype=req.kv_dtype,
                       engine=req.engine, memory_fraction=frac, assumptions=assumptions)
    plan = memory_plan(rep)
    try:
        require_fit(rep, plan, context, req.batch)
    except InfeasibleError as exc:
        return rep, plan, "; ".join([str(exc), *exc.reasons])
    return rep, plan, None


@names_flags
def memory_infer(req: MemoryInferRequest, ctx: RunContext | None = None) -> MemoryInferResult:
    """Weights, KV cache and workspace per device; with ``--hw`` the serving planner's fit verdict
    and, without ``--tp``, the smallest TP (power of two) that fits."""
    from xpuplan.jobs.serve import check_engine
    from xpuplan.perf.memory import inference_memory
    from xpuplan.serve.kv import max_concurrent_sequences
    from xpuplan.serve.validity import layout_issues, raise_first

    ctx = ctx or default_context()
    m = ctx.model(req.model)
    context = req.context if req.context is not None else min(DEFAULT_INFER_CONTEXT, m.max_seq_len)
    if m.type != "encoder":  # as infer estimate checks --in/--out: a sequence beyond the context is the user's mistake
        m.check_context(context, "--context")
    if req.tp is not None:
        raise_first(layout_issues(m, req.tp, req.pp, 1))
    else:
        raise_first(layout_issues(m, 1, req.pp, 1))
    dev = ctx.device(req.hw) if req.hw else None
    if req.engine is not None:  # an unknown engine, or one not built for the device's software stack (with --hw)
        check_engine(ctx, req.engine, [dev] if dev else [])
    tp = req.tp or 1
    fit: tuple[Any, Any, str | None] | None = None
    assumptions = ctx.assumptions([dev]) if dev else None
    if dev is not None:
        if req.tp is None:
            t = 1
            while t <= MAX_TP_SEARCH:
                if not layout_issues(m, t, req.pp, 1):
                    fit = _replica_fit(m, dev, req, t, assumptions, context)
                    if fit[2] is None:
                        break
                t *= 2
            if fit is None or fit[2] is not None:
                raise InfeasibleError(
                    f"{m.id} with batch {req.batch} x {context} tokens does not fit on up to {MAX_TP_SEARCH} "
                    f"{dev.id} per replica (tp a power of two dividing the heads)",
                    reasons=[] if fit is None else [fit[2] or ""])
            tp = fit[0].tp
        else:
            fit = _replica_fit(m, dev, req, tp, assumptions, context)
    mem = inference_memory(m, weight_dtype=_WEIGHT_STORAGE.get(req.dtype, req.dtype), kv_dtype=req.kv_dtype, batch=req.batch, context=context,
                           tp=tp, pp=req.pp)
    out: dict[str, Any] = {
        "model": m.id, "weight_dtype": req.dtype, "kv_dtype": req.kv_dtype, "batch": req.batch, "context": context,
        "tp": tp, "pp": req.pp, "bytes_per_device": clean(mem.to_dict()),
        "bytes_per_replica": {"weights": mem.weights * tp * req.pp,
                              "kv_cache_total": mem.kv_bytes_per_token * req.batch * context * tp * req.pp},
    }
    if dev is not None and fit is not None:
        rep, plan, reason = fit
        need_kv = req.batch * plan.blocks_per_sequence(context) * plan.block_size_tokens * plan.kv_bytes_per_token
        out.update(hardware=dev.id, engine=rep.engine.id, fits=reason is None, devices_per_replica=rep.n_devices,
                   usable_bytes=plan.usable_bytes, headroom_bytes=plan.kv_budget_bytes - need_kv / max(1, rep.ep),
                   max_batch_at_context=max_concurrent_sequences(rep, plan, context),
                   serving_memory=clean(plan.to_dict()), reasons=[reason] if reason else [])
    res = MemoryInferResult(**out, used=used(assumptions, [dev] if dev else [], MEMORY_FIGURES,
                                             precisions=[INFER_DTYPES[req.dtype]],
                                             engines=[out["engine"]] if out.get("engine") else []))
    if res.fits is False:
        raise InfeasibleError(f"{m.id} does not fit on {dev.id if dev else '?'} at tp={tp}", reasons=res.reasons,
                              hint="leave out --tp to find the smallest tp that fits", result=res)
    return res
