"""Training jobs: ``train estimate`` and ``train search``, with the advice as data.

Each job takes a typed request (flags as the user typed them, plus an optional scenario file the
flags override), resolves model, hardware and assumptions through the :class:`RunContext`, calls
the training planner and returns a typed result. Advice the CLI printed before — another plan that
fits on the same devices, how many devices it would take, what uneven pipeline stages would give —
is part of the result (``advice``). An infeasible request raises ``InfeasibleError`` carrying the
result (``exc.result``) so front ends can still render it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from pydantic import Field, model_validator

from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.jobs.context import RunContext, default_context
from xpuplan.jobs.requests import (
    MAX_DEVICES,
    MAX_TOP,
    Degree,
    DeviceCount,
    Id,
    ModelRef,
    PositiveFloat,
    Request,
    Reserve,
    SeqLen,
    Share,
    Tokens,
    flag_error,
    int_range,
    names_flags,
    str_list,
)
from xpuplan.jobs.results import TRAIN_FIGURES, Detail, Result, Uncertainty, clean, uncertainty, used
from xpuplan.workload.training import (
    OFFLOAD_MODULES_HELP,
    RECOMPUTE_MODULES_HELP,
    lora_target_list,
    no_offload,
    offload_module_list,
    recompute_module_list,
)
from xpuplan.workload.vocabulary import RECOMPUTE_MODES, TRAIN_PRECISIONS, Kernels, Method, Recompute

if TYPE_CHECKING:
    from xpuplan.models.arch import ModelArch
    from xpuplan.train import Cluster, SearchResult, SearchSpace, TrainEstimate
    from xpuplan.workload.training import TrainingJob, TrainingScenario

#: Frameworks ``--emit`` knows (kept in step with ``xpuplan.train.emit.FRAMEWORKS`` by a test).
FRAMEWORKS: Final = ("megatron", "bridge", "torchtitan", "deepspeed", "gaudi")
#: Throughput gain above which the search suggests --uneven-pipeline.
UNEVEN_HINT_GAIN: Final = 1.10
#: Largest batch of tokens per optimizer step accepted (2**36 ~ 69G tokens; published runs use <= 2**26).
MAX_GLOBAL_BATCH_TOKENS: Final = 1 << 36

#: Training-job fields as the CLI names them.
_JOB_FLAGS: Final = {"seq_len": "--seq-len", "global_batch_tokens": "--global-batch", "train_tokens": "--tokens",
                     "memory_reserve": "--reserve", "lora_rank": "--lora-rank",
                     "lora_targets": "--lora-targets", "recompute_layers": "--recompute-layers",
                     "recompute_modules": "--recompute-modules", "offload_modules": "--offload-modules",
                     "tp_overlap": "--tp-overlap",
                     "ep_overlap": "--ep-overlap", "dp_compression": "--dp-compression", "method": "--method",
                     "kernels": "--kernels", "power_cap_w": "--power-cap-w"}
_CLUSTER_FLAGS: Final = {"scale_out_gbit_per_s": "--scale-out-gbit", "domain_size": "--domain-size"}


# =================================================================================================
# Requests
# =================================================================================================
class _TrainCommon(Request):
    """Inputs shared by estimate and search."""

    FLAGS: ClassVar = {"json_": "--json"}

    model: ModelRef | None = Field(default=None, description="model id, alias or config.json path")
    hw: Id | None = Field(default=None, description="device id or alias")
    devices: DeviceCount | None = Field(default=None, description="number of devices")
    seq_len: SeqLen | None = Field(default=None, description="tokens per sequence")
    global_batch: int | None = Field(default=None, ge=1, le=MAX_GLOBAL_BATCH_TOKENS,
                                     description="tokens per optimizer step")
    tokens: Tokens | None = Field(default=None, description="tokens to train (time, device-hours, energy)")
    method: Method | None = Field(default=None, description="full | lora | qlora")
    lora_rank: int | None = Field(default=None, ge=1, le=65536, description="adapter rank")
    lora_targets: str | None = Field(default=None, max_length=100,
                                     description="matrices LoRA/QLoRA adapts, a comma list of q, k, v, o, gate, up, "
                                                 "down or 'all' (default all)")
    kernels: Kernels | None = Field(default=None, description="fused | eager")
    recompute_layers: int | None = Field(default=None, ge=1, le=100000,
                                         description="layers per pipeline stage a partial plan recomputes in full "
                                                     "(default: the fewest that fit)")
    recompute_modules: str | None = Field(default=None, max_length=200, description=RECOMPUTE_MODULES_HELP)
    offload_modules: str | None = Field(default=None, max_length=200, description=OFFLOAD_MODULES_HELP)
    power_cap_w: PositiveFloat | None = Field(default=None, description="board power limit per device, W")
    reserve: Reserve | None = Field(default=None, description="fraction of device memory kept free")
    uneven_pipeline: bool = Field(default=False, description="allow pp not dividing the layers "
                                  "(uneven first/last stages; the search tries them by default)")
    scale_out_gbit: PositiveFloat | None = Field(default=None, description="scale-out NIC per device, Gbit/s")
    domain_size: DeviceCount | None = Field(default=None, description="devices per scale-up domain")
    scenario: str | None = Field(default=None, max_length=4096, description="training scenario YAML")
    emit: str | None = Field(default=None, description="launch arguments: " + " | ".join(FRAMEWORKS))
    stack: str | None = Field(default=None, max_length=100,
                              description="training stack profile (catalog/data/training_stacks.yaml): what the "
                                          "framework overlaps and how it shards; default megatron-core")

    @model_validator(mode="after")
    def _check_common(self) -> _TrainCommon:
        if self.emit is not None and self.emit not in FRAMEWORKS:
            raise flag_error(type(self), "emit", f"choose one of {', '.join(FRAMEWORKS)}")
        if self.global_batch is not None and self.seq_len is not None:
            _check_batch(type(self), self.global_batch, self.seq_len)
        lora_target_list(self.lora_targets, self.flag("lora_targets"))
        recompute_module_list(self.recompute_modules, self.flag("recompute_modules"))
        offload_module_list(self.offload_modules, self.flag("offload_modules"))
        return self


def _check_batch(cls: type[Request], global_batch: int, seq_len: int) -> None:
    if global_batch < seq_len:
        raise flag_error(cls, "global_batch", f"{global_batch:,} tokens per step is less than one sequence "
                         f"(--seq-len {seq_len:,})", hint="give tokens per step, a multiple of --seq-len")
    if global_batch % seq_len:
        raise flag_error(cls, "global_batch", f"{global_batch:,} tokens per step is not a multiple of --seq-len "
                         f"({seq_len:,})")


class TrainEstimateRequest(_TrainCommon):
    """``xpuplan train estimate``: one parallel plan."""

    tp: Degree | None = Field(default=None, description="tensor-parallel size")
    pp: Degree | None = Field(default=None, description="pipeline stages")
    vpp: Degree | None = Field(default=None, description="virtual pipeline stages per device")
    cp: Degree | None = Field(default=None, description="context-parallel size")
    ep: Degree | None = Field(default=None, description="expert-parallel size (MoE)")
    dp: Degree | None = Field(default=None, description="data-parallel size")
    sp: bool | None = Field(default=None, description="Megatron sequence parallelism")
    zero: int | None = Field(default=None, ge=0, le=3, description="ZeRO stage 0-3")
    recompute: Recompute | None = Field(default=None, description="none | selective | full | offload (full, with the kept layer inputs in host memory) | layer_offload (no recomputation, whole layers' activations in host memory: Megatron-Core, pp 1) | partial (full recomputation of the fewest layers per stage that let the plan fit, the others keeping every activation)")
    micro_batch: int | None = Field(default=None, ge=1, le=1 << 20, description="sequences per micro-batch")
    precision: Literal["bf16", "fp16", "fp8", "fp4"] | None = Field(default=None,
                                                                   description="bf16 | fp16 | fp8 | fp4 (NVFP4)")
    tp_overlap: Share | None = Field(default=None, description="fraction of TP comm hidden")
    ep_overlap: Share | None = Field(default=None, description="fraction of MoE all-to-all hidden")
    dp_compression: Share | None = Field(default=None, description="factor on DP gradient traffic")

    @model_validator(mode="after")
    def _check_compression(self) -> TrainEstimateRequest:
        if self.dp_compression is not None and self.dp_compression <= 0:
            raise flag_error(type(self), "dp_compression", f"must be in (0, 1] (got {self.dp_compression})")
        if self.recompute_layers is not None and self.recompute not in (None, "partial"):
            raise flag_error(type(self), "recompute_layers", "a layer count is for --recompute partial (got "
                             f"--recompute {self.recompute})")
        if self.recompute_modules is not None and self.recompute not in (None, "selective"):
            raise flag_error(type(self), "recompute_modules", "modules are what --recompute selective re-runs (got "
                             f"--recompute {self.recompute})")
        if (self.offload_modules is not None and not no_offload(self.offload_modules)
                and self.recompute in ("full", "offload", "layer_offload")):
            raise flag_error(type(self), "offload_modules", "modules offload inputs a layer keeps; --recompute "
                             f"{self.recompute} keeps none of them (use none, selective or partial)")
        return self


class TrainSearchRequest(_TrainCommon):
    """``xpuplan train search``: every valid plan at one or several device counts."""

    devices_range: str | None = Field(default=None, max_length=200,
                                      description="'16:1024' (doubling), '16:1024:16' or '8,16,64'")
    top: int | None = Field(default=None, ge=1, le=MAX_TOP, description="plans to show")
    uneven_pipeline: bool = Field(default=True, description="also try pp not dividing the layers (uneven "
                                  "first/last stages, as Meta trains Llama 3 405B); --no-uneven-pipeline turns it off")
    precision: str | None = Field(default=None, max_length=100, description="bf16 | fp16 | fp8 | fp4 (comma list)")
    tp: str | None = Field(default=None, max_length=200, description="restrict tp, e.g. '4,8'")
    pp: str | None = Field(default=None, max_length=200, description="restrict pp")
    cp: str | None = Field(default=None, max_length=200, description="restrict cp")
    ep: str | None = Field(default=None, max_length=200, description="restrict ep")
    zero: str | None = Field(default=None, max_length=20, description="restrict ZeRO stages")
    recompute: str | None = Field(default=None, max_length=100, description="restrict recomputation")
    micro_batch: str | None = Field(default=None, max_length=200, description="restrict micro-batch sizes")
    ep_overlap: Share | None = Field(default=None, description="fraction of MoE all-to-all hidden, for every plan "
                                     "(unset: the stack's; plans with and without its opt-in overlap are tried)")

    @model_validator(mode="after")
    def _check_search(self) -> TrainSearchRequest:
        if self.devices is not None and self.devices_range is not None:
            raise flag_error(type(self), "devices", "give --devices or --devices-range, not both")
        if self.devices_range is not None:  # refuse a huge range before anything is loaded
            int_range(self.devices_range, "--devices-range", max_value=MAX_DEVICES)
        for name in ("tp", "pp", "cp", "ep", "micro_batch"):
            text = getattr(self, name)
            if text is not None:
                int_range(text, self.flag(name), max_value=MAX_DEVICES)
        if self.zero is not None:
            try:
                stages = [int(x) for x in self.zero.split(",") if x.strip()]
            except ValueError:
                stages = []
            if not stages or any(s not in (0, 1, 2, 3) for s in stages):
                raise flag_error(type(self), "zero", f"ZeRO stages are 0-3, e.g. '1,3' (got {self.zero!r})")
        for name, allowed in (("recompute", RECOMPUTE_MODES), ("precision", TRAIN_PRECISIONS)):
            vals_s = str_list(getattr(self, name))
            if vals_s is not None and (not vals_s or any(v not in allowed for v in vals_s)):
                raise flag_error(type(self), name, f"choose from {', '.join(allowed)} (got {getattr(self, name)!r})")
        searched = str_list(self.recompute)
        if self.recompute_modules is not None and searched is not None and "selective" not in searched:
            raise flag_error(type(self), "recompute_modules", "modules are what --recompute selective re-runs; "
                             f"--recompute {self.recompute} does not search it")
        return self


# =================================================================================================
# Results
# =================================================================================================
class TrainEstimateOut(Detail):
    """One predicted plan (the planner's ``TrainEstimate.to_dict``)."""

    key: str = Field(description="stable plan key, e.g. tp8-pp2-...-bf16")
    model: str
    hardware: str
    n_devices: int
    plan: dict[str, Any]
    seq_len: int
    global_batch_seqs: int
    tokens_per_step: int
    method: str
    lora: dict[str, Any] | None = Field(default=None, description="LoRA/QLoRA adapters: rank and adapted matrices "
                                        "(absent for full training)")
    feasible: bool = Field(description="fits in device memory")
    reasons: list[str] = Field(description="why it does not fit (empty when it does)")
    step_time_s: float
    step: dict[str, float] = Field(description="exposed step time by part, s")
    tokens_per_s: float
    tokens_per_s_per_device: float
    mfu: float = Field(description="model FLOPs utilisation, fraction of dense peak")
    hfu: float = Field(description="hardware FLOPs utilisation (recomputation counted)")
    memory: dict[str, float] = Field(description="memory per device by part, bytes")
    power_w_per_device: float | None = None
    train_tokens: float | None = None
    time_to_train_s: float | None = None
    device_time_s: float | None = Field(default=None, description="device-seconds to train (devices x time)")
    energy_j: float | None = Field(default=None, description="device energy to train, J (facility: cost.train)")
    efficiency_source: str
    notes: list[str] = Field(default_factory=list)


class Advice(Detail):
    """One piece of advice: what would make the request work, or work better."""

    kind: Literal["fits_on_same_devices", "devices_to_fit", "nothing_fits", "uneven_pipeline"]
    message: str
    plan_key: str | None = None
    n_devices: int | None = None
    tokens_per_s: float | None = None
    memory_bytes_per_device: float | None = None


class TrainEstimateResult(Result, TrainEstimateOut):
    """Result of ``train estimate``."""

    NAME: ClassVar[str] = "train.estimate"
    cluster: dict[str, Any] = Field(description="cluster the plan runs on (links, domain, efficiency)")
    uncertainty: Uncertainty | None = Field(default=None, description="the hardware family's validation band "
                                                                      "around the headline figures")
    launch: dict[str, Any] | None = Field(default=None, description="launch arguments (--emit)")
    advice: list[Advice] = Field(default_factory=list)


class TrainSearchResult(Result, Detail):
    """Result of ``train search``."""

    NAME: ClassVar[str] = "train.search"
    model: str
    hardware: str
    device_counts: list[int]
    plans_evaluated: int
    plans_feasible: int
    elapsed_s: float
    plans_per_s: float | None = None
    efficiency_source: str
    reasons: list[str]
    plans: list[TrainEstimateOut]
    pareto: list[dict[str, Any]] = Field(description="best plan per device count on the time-vs-devices front")
    interrupted: bool = Field(default=False, description="stopped early (Ctrl-C): results so far")
    counts_done: int = Field(default=0, description="device counts searched")
    uncertainty: Uncertainty | None = Field(default=None, description="the hardware family's validation band "
                                                                      "around the best plan's headline figures")
    launch: dict[str, Any] | None = None
    advice: list[Advice] = Field(default_factory=list)


# =================================================================================================
# Resolution: scenario + flags -> model, cluster, job
# =================================================================================================
def _pick(flag: Any, scenario_value: Any) -> Any:
    return flag if flag is not None else scenario_value


def _job(req: _TrainCommon, sc: TrainingScenario | None, **extra: Any) -> TrainingJob:
    """The scenario's job with the request's flags laid over it; errors name the flag."""
    from pydantic import ValidationError

    from xpuplan.workload.training import TrainingJob

    base = sc.job.model_dump() if sc else {}
    flags = dict(seq_len=req.seq_len, global_batch_tokens=req.global_batch, train_tokens=req.tokens,
                 method=req.method, lora_rank=req.lora_rank, kernels=req.kernels, memory_reserve=req.reserve,
                 lora_targets=lora_target_list(req.lora_targets, req.flag("lora_targets")),
                 power_cap_w=req.power_cap_w, recompute_layers=req.recompute_layers,
                 recompute_modules=recompute_module_list(req.recompute_modules, req.flag("recompute_modules")),
                 offload_modules=offload_module_list(req.offload_modules, req.flag("offload_modules")), **extra)
    base.update({k: v for k, v in flags.items() if v is not None})
    if base.get("global_batch_tokens") is not None:
        _check_batch(type(req), int(base["global_batch_tokens"]), int(base.get("seq_len") or 4096))
    try:
        return TrainingJob.model_validate(base)
    except ValidationError as exc:
        e = exc.errors()[0]
        name = str(e["loc"][0]) if e["loc"] else "global_batch_tokens"
        raise UserInputError(str(e["msg"]).removeprefix("Value error, "), field=_JOB_FLAGS.get(name, name)) from None


def _model(ctx: RunContext, req: _TrainCommon, sc: TrainingScenario | None) -> ModelArch:
    name = _pick(req.model, sc.model if sc else None)
    if not name:
        raise UserInputError("give --model (a preset id, alias or config.json) or a scenario with 'model'",
                             field="--model")
    return ctx.model(name)


def _cluster(ctx: RunContext, req: _TrainCommon, n: int, sc: TrainingScenario | None) -> Cluster:
    from pydantic import ValidationError

    from xpuplan.train import Cluster
    from xpuplan.workload.training import ClusterIn

    name = _pick(req.hw, sc.hardware if sc else None)
    if not name:
        raise UserInputError("give --hw (a device id or alias) or a scenario with 'hardware'", field="--hw")
    dev = ctx.device(name)
    over = (sc.cluster if sc else ClusterIn()).model_dump()
    over.update({k: v for k, v in dict(scale_out_gbit_per_s=req.scale_out_gbit, domain_size=req.domain_size).items()
                 if v is not None})
    try:
        over = ClusterIn.model_validate(over).model_dump()
    except ValidationError as exc:
        e = exc.errors()[0]
        name = str(e["loc"][0]) if e["loc"] else "cluster"
        raise UserInputError(str(e["msg"]), field=_CLUSTER_FLAGS.get(name, name)) from None
    return Cluster.from_catalog(dev, n, assumptions=ctx.assumptions([dev]),
                                **{k: v for k, v in over.items() if v is not None})


def _used(ctx: RunContext, cluster: Cluster, precisions: list[str], stack: Any) -> Any:
    """``used`` block of a training result, with the training-stack profile the step model ran
    under (its id, every property and its sources), so a result says which framework defaults
    (SP, TP overlap, pipeline-send overlap, ZeRO-3 granularity, MoE dispatch) it assumed."""
    u = used(ctx.assumptions([cluster.device]), [cluster.device], TRAIN_FIGURES, precisions=precisions)
    u.assumptions["training_stack"] = clean(stack.model_dump(mode="json"))
    return u


def _launch(framework: str | None, e: TrainEstimate, model: ModelArch, cluster: Cluster, job: TrainingJob,
            stack: Any) -> Any:
    if framework is None:
        return None
    from xpuplan.train import emit_launch

    if e.offload_modules is not None and job.offload_modules is None:  # the search chose offloading for this plan
        job = job.model_copy(update={"offload_modules": e.offload_modules})
    if e.recompute_modules is not None and job.recompute_modules is None:  # the stack's own set, or the search's
        job = job.model_copy(update={"recompute_modules": e.recompute_modules})
    return emit_launch(e.plan, model, cluster.with_devices(e.n_devices), job, framework, stack,
                       offload_layers=e.memory.offload_layers, recompute_layers=e.memory.recompute_layers)


def _launch_dict(launch: Any) -> dict[str, Any] | None:
    return None if launch is None else clean(launch.to_dict())


def _uncertainty(e: TrainEstimate, cluster: Cluster, model: ModelArch, job: TrainingJob) -> Uncertainty:
    """The family's training validation band around ``e``'s headline figures (widened where the job lies
    outside the public rows' regime)."""
    from xpuplan.validate.band import model_regime

    regime = model_regime(model, seq_len=job.seq_len, n_devices=e.n_devices, precision=e.plan.precision,
                          method=job.method)
    return uncertainty(cluster.device, "train", e.efficiency_source, {
        "tokens_per_s": (e.tokens_per_s, "up"), "tokens_per_s_per_device": (e.tokens_per_s_per_device, "up"),
        "mfu": (e.mfu, "up"), "step_time_s": (e.step_time_s, "down"), "time_to_train_s": (e.time_to_train_s, "down"),
    }, regime)


def _stack(ctx: RunContext, req: _TrainCommon, device: Any = None) -> Any:
    """The request's training-stack profile, from the context's assumptions (built-in stacks plus
    any an overrides file changes or adds); without --stack the default for ``device`` (MaxText on TPUs,
    MindSpeed-LLM on Ascend, Intel's Megatron-DeepSpeed on Gaudi), else, with --emit, the profile of the framework the
    command launches (``train.emit.FRAMEWORK_STACKS``: the run it starts has that framework's physics), else
    Megatron-Core; UserInputError naming --stack when unknown."""
    from xpuplan.catalog.stacks import load_stacks
    from xpuplan.train.emit import FRAMEWORK_STACKS

    if req.stack is None and req.emit is not None and device is not None:
        f = load_stacks()
        if f.default_stack_for(device) == f.default_stack:  # no vendor stack for this device
            return ctx.assumptions().training_stack(FRAMEWORK_STACKS[req.emit], field="--emit", device=device)
    return ctx.assumptions().training_stack(req.stack, field="--stack", device=device)


def what_it_would_take(model: ModelArch, cluster: Cluster, job: TrainingJob, precision: str,
                       same_count: bool = True, stack: Any = None) -> list[Advice]:
    """Advice for a request that does not fit: another plan on the same devices, else the
    smallest device count on which some plan fits."""
    from xpuplan.train import SearchSpace, devices_to_fit, search_plans

    space = SearchSpace(precision=[precision], uneven_pipeline=True)  # type: ignore[list-item]
    if same_count:
        here = search_plans(model, cluster, job, space=space, top=1, stack=stack).best
        if here is not None:
            return [Advice(kind="fits_on_same_devices", plan_key=here.key, n_devices=here.n_devices,
                           tokens_per_s=here.tokens_per_s, memory_bytes_per_device=here.memory.total_bytes,
                           message=f"another plan fits on the same {cluster.n_devices} devices: {here.key} "
                                   f"({here.tokens_per_s:,.0f} tokens/s, {here.memory.total_bytes / 1e9:.1f} GB per "
                                   "device; `xpuplan train search` ranks them all)")]
    best = devices_to_fit(model, cluster, job, space=space, stack=stack)
    if best is None:
        return [Advice(kind="nothing_fits",
                       message=f"no plan fits on any count of {cluster.device.id} up to the search limit")]
    return [Advice(kind="devices_to_fit", plan_key=best.key, n_devices=best.n_devices, tokens_per_s=best.tokens_per_s,
                   memory_bytes_per_device=best.memory.total_bytes,
                   message=f"what it would take: at least {best.n_devices} x {cluster.device.id} (fastest plan there: "
                           f"{best.key}, {best.tokens_per_s:,.0f} tokens/s, {best.memory.total_bytes / 1e9:.1f} GB "
                           "per device)")]


# =================================================================================================
# estimate
# =================================================================================================
@names_flags
def train_estimate(req: TrainEstimateRequest, ctx: RunContext | None = None) -> TrainEstimateResult:
    """Predict one plan; ``InfeasibleError`` (with ``.result``) when it does not fit."""
    from xpuplan.train import estimate, make_plan
    from xpuplan.workload.training import PlanIn

    ctx = ctx or default_context()
    sc = ctx.training_scenario(req.scenario)
    m = _model(ctx, req, sc)
    n = _pick(req.devices, sc.devices if sc else None)
    if n is None:
        raise UserInputError("give --devices (or 'devices' in the scenario)", field="--devices")
    job = _job(req, sc, dp_compression=req.dp_compression, tp_overlap=req.tp_overlap, ep_overlap=req.ep_overlap)
    cluster = _cluster(ctx, req, n, sc)
    st = _stack(ctx, req, cluster.device)
    pin = (sc.plan if sc and sc.plan else PlanIn()).model_dump()
    pin.update({k: v for k, v in dict(tp=req.tp, pp=req.pp, vpp=req.vpp, cp=req.cp, ep=req.ep, dp=req.dp, sp=req.sp,
                                      zero_stage=req.zero, recompute=req.recompute, micro_batch=req.micro_batch,
                                      precision=req.precision).items() if v is not None})
    pl = PlanIn.model_validate(pin)
    for name in ("tp", "pp", "cp"):
        v = getattr(pl, name) or 1
        if v > n:
            raise UserInputError(f"{name} ({v}) is larger than --devices ({n})", field=f"--{name}")
    plan = make_plan(
        n_devices=n, global_batch_seqs=job.global_batch_seqs, tp=pl.tp or 1, pp=pl.pp or 1, cp=pl.cp or 1, dp=pl.dp,
        vpp=pl.vpp or 1, ep=pl.ep or 1, sp=pl.sp if pl.sp is not None else st.sequence_parallel and (pl.tp or 1) > 1,
        zero_stage=st.default_zero_stage() if pl.zero_stage is None else pl.zero_stage,
        recompute=pl.recompute or "selective", micro_batch=pl.micro_batch or 1, precision=pl.precision or "bf16",
        model=m, uneven_pipeline=req.uneven_pipeline,
    )
    e = estimate(m, cluster, plan, job, uneven_pipeline=req.uneven_pipeline, stack=st)
    launch = _launch(req.emit, e, m, cluster, job, st)
    advice = [] if e.feasible else what_it_would_take(m, cluster, job, plan.precision, stack=st)
    res = TrainEstimateResult(**clean(e.to_dict()), cluster=clean(cluster.to_dict()),
                              launch=_launch_dict(launch), advice=advice, uncertainty=_uncertainty(e, cluster, m, job),
                              used=_used(ctx, cluster, [plan.precision], st))
    if not e.feasible:
        raise InfeasibleError(f"plan {e.key} does not fit on {n} x {cluster.device.id}",
                              reasons=list(e.reasons) + [a.message for a in advice], result=res)
    return res


# =================================================================================================
# search
# =================================================================================================
Progress = Callable[[int, int], None]


def device_counts(req: TrainSearchRequest, sc: TrainingScenario | None) -> list[int]:
    """The device counts a search covers (bounded; see ``requests.MAX_RANGE_POINTS``)."""
    if req.devices is not None:
        return [req.devices]
    if req.devices_range is not None:
        return int_range(req.devices_range, "--devices-range", max_value=MAX_DEVICES)
    if sc and sc.devices:
        return [sc.devices]
    if sc and sc.devices_range:
        return int_range(sc.devices_range, "devices_range", max_value=MAX_DEVICES)
    raise UserInputError("give --devices N or --devices-range A:B", field="--devices")


def _int_list(text: str | None, field: str) -> list[int] | None:
    return None if text is None else int_range(text, field, max_value=MAX_DEVICES)


def _space(req: TrainSearchRequest, sc: TrainingScenario | None) -> SearchSpace:
    from xpuplan.train import SearchSpace
    from xpuplan.train.emit import FRAMEWORK_RECOMPUTE, MODULE_OFFLOAD_FRAMEWORKS, MODULE_RECOMPUTE_FRAMEWORKS
    from xpuplan.workload.training import PlanIn

    pin = sc.plan if sc and sc.plan else PlanIn()
    zero = None if req.zero is None else sorted({int(x) for x in req.zero.split(",") if x.strip()})
    return SearchSpace(
        tp=_int_list(req.tp, "--tp") or ([pin.tp] if pin.tp else None),
        pp=_int_list(req.pp, "--pp") or ([pin.pp] if pin.pp else None),
        cp=_int_list(req.cp, "--cp") or ([pin.cp] if pin.cp else None),
        ep=_int_list(req.ep, "--ep") or ([pin.ep] if pin.ep else None),
        zero_stage=zero or ([pin.zero_stage] if pin.zero_stage is not None else None),
        recompute=str_list(req.recompute) or ([pin.recompute] if pin.recompute else None)  # type: ignore[arg-type]
        or (list(FRAMEWORK_RECOMPUTE[req.emit]) if req.emit in FRAMEWORK_RECOMPUTE else None),
        micro_batch=_int_list(req.micro_batch, "--micro-batch") or ([pin.micro_batch] if pin.micro_batch else None),
        precision=str_list(req.precision) or [pin.precision or "bf16"],  # type: ignore[arg-type]
        uneven_pipeline=req.uneven_pipeline,
        # a launch command for a framework without fine-grained offloading: plans it can run
        offload_sets=() if no_offload(req.offload_modules) or req.emit not in (None, *MODULE_OFFLOAD_FRAMEWORKS) else None,
        recompute_sets=() if req.emit not in (None, *MODULE_RECOMPUTE_FRAMEWORKS) else None,
    )


def _merge(model: ModelArch, cluster: Cluster, parts: list[SearchResult], counts: list[int], top: int,
           elapsed_s: float) -> tuple[list[TrainEstimate], list[TrainEstimate], int, int, list[str]]:
    """Per-count searches merged exactly as one search over all counts ranks them."""
    cands = sorted(((-e.tokens_per_s, f"{e.key}@{e.n_devices}", e) for r in parts for e in r.top),
                   key=lambda c: (round(c[0], 6), c[1]))
    top_ests = [c[2] for c in cands[:top]]
    best_per_count = [r.top[0] for r in parts if r.top]
    evaluated = sum(r.plans_evaluated for r in parts)
    feasible = sum(r.plans_feasible for r in parts)
    reasons: list[str] = []
    if not top_ests:
        done = [r for r in parts if r.plans_evaluated]
        reasons = list(done[-1].reasons) if done else (list(parts[0].reasons) if parts else [])
    return top_ests, best_per_count, evaluated, feasible, reasons


def _pareto(best: list[TrainEstimate]) -> list[dict[str, Any]]:
    """Device counts whose best plan is faster than every smaller count's best."""
    from xpuplan.train import ParetoPoint

    out, fastest = [], 0.0
    for e in sorted(best, key=lambda e: e.n_devices):
        if e.tokens_per_s > fastest:
            fastest = e.tokens_per_s
            out.append(ParetoPoint(e.n_devices, e.key, e.tokens_per_s, e.step_time_s, e.time_to_train_s).to_dict())
    return out


@names_flags
def train_search(req: TrainSearchRequest, ctx: RunContext | None = None, *,
                 progress: Progress | None = None) -> TrainSearchResult:
    """Rank every valid plan at each device count. ``progress(done, total)`` is called after each
    count; Ctrl-C (KeyboardInterrupt) stops the search and returns what was found
    (``interrupted=True``). ``InfeasibleError`` (with ``.result``) when no plan fits."""
    import time

    from xpuplan.train import StepModel, search_plans

    ctx = ctx or default_context()
    sc = ctx.training_scenario(req.scenario)
    counts = device_counts(req, sc)
    m = _model(ctx, req, sc)
    job = _job(req, sc, ep_overlap=req.ep_overlap)
    if job.global_batch_tokens is None and job.method == "full":
        # No batch given: grow it with the cluster as practitioners do (workload.training).
        from xpuplan.workload.training import default_global_batch_tokens

        job = job.model_copy(update={"global_batch_tokens": default_global_batch_tokens(max(counts), job.seq_len)})
    cluster = _cluster(ctx, req, counts[0], sc)
    space = _space(req, sc)
    k = req.top or (sc.top if sc else 10)
    st = _stack(ctx, req, cluster.device)
    if req.emit is not None:  # only plans the framework of the command can launch
        from xpuplan.train.emit import FRAMEWORK_STACKS
        from xpuplan.train.search import stack_space

        space = stack_space(space, ctx.assumptions().training_stack(FRAMEWORK_STACKS[req.emit], field="--emit"))
    sm = StepModel(m, cluster.device, cluster.efficiency, job, stack=st)
    parts: list[SearchResult] = []
    interrupted = False
    t0 = time.perf_counter()
    try:
        for i, n in enumerate(counts):
            if progress:
                progress(i, len(counts))
            parts.append(search_plans(m, cluster, job, device_counts=[n], space=space, top=k, step_model=sm))
        if progress:
            progress(len(counts), len(counts))
    except KeyboardInterrupt:
        interrupted = True
    elapsed = time.perf_counter() - t0
    top_ests, best_per_count, evaluated, feasible, reasons = _merge(m, cluster, parts, counts, k, elapsed)
    best = top_ests[0] if top_ests else None
    advice: list[Advice] = []
    if best is not None and not req.uneven_pipeline and not interrupted:
        advice += uneven_pipeline_advice(m, cluster, job, counts, space, sm, best)
    if best is None and evaluated and not interrupted:
        advice += what_it_would_take(m, cluster.with_devices(max(counts)), job, space.precision[0],
                                     same_count=space.uneven_pipeline is False, stack=st)
    if interrupted:
        reasons.append(f"interrupted after {len(parts)} of {len(counts)} device counts: results so far")
    launch = _launch(req.emit, best, m, cluster, job, st) if best is not None else None
    res = TrainSearchResult(
        model=m.id, hardware=cluster.device.id, device_counts=counts, plans_evaluated=evaluated,
        plans_feasible=feasible, elapsed_s=elapsed, plans_per_s=evaluated / elapsed if elapsed > 0 else None,
        efficiency_source=cluster.efficiency.source, reasons=reasons,
        plans=[TrainEstimateOut(**clean(e.to_dict())) for e in top_ests], pareto=clean(_pareto(best_per_count)),
        interrupted=interrupted, counts_done=len(parts), launch=_launch_dict(launch),
        advice=advice, used=_used(ctx, cluster, list(space.precision), st),
        uncertainty=_uncertainty(best, cluster, m, job) if best is not None else None,
    )
    if best is None and not interrupted:
        raise InfeasibleError(f"no plan of {m.id} fits on {', '.join(map(str, counts))} x {cluster.device.id}",
                              reasons=reasons + [a.message for a in advice], result=res)
    return res


def uneven_pipeline_advice(m: ModelArch, cluster: Cluster, job: TrainingJob, counts: list[int], space: SearchSpace,
                           sm: Any, best: TrainEstimate) -> list[Advice]:
    """When the layer count leaves few pipeline sizes (Llama-3.1-405B's 126 layers allow pp 1 or 2 on
    power-of-two clusters), what uneven stages would give (Meta trains 405B with pp16)."""
    from xpuplan.train import search_plans

    alt = search_plans(m, cluster, job, device_counts=counts, space=dataclasses.replace(space, uneven_pipeline=True),
                       top=1, step_model=sm).best
    if alt is None or alt.tokens_per_s <= UNEVEN_HINT_GAIN * best.tokens_per_s:
        return []
    gain = alt.tokens_per_s / best.tokens_per_s - 1
    return [Advice(kind="uneven_pipeline", plan_key=alt.key, n_devices=alt.n_devices, tokens_per_s=alt.tokens_per_s,
                   memory_bytes_per_device=alt.memory.total_bytes,
                   message=f"{m.n_layers} layers leave few pipeline sizes; with --uneven-pipeline {alt.key} reaches "
                           f"{alt.tokens_per_s:,.0f} tokens/s (+{gain:.0%}, MFU {alt.mfu:.1%})")]
