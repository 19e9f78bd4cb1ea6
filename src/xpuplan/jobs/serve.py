"""Serving jobs: ``infer estimate`` (a sweep over devices × TP × batch) and ``infer capacity``.

Requests hold the flags as the user typed them (``--in``, ``--out``, ``--ttft-ms``...), a serving
scenario file the flags override, and are checked once: every number finite and in range, every
list or range bounded (:data:`MAX_SWEEP_POINTS` estimates per request).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

from pydantic import Field, model_validator

from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.jobs.context import RunContext, default_context
from xpuplan.jobs.requests import (
    MAX_BATCH,
    MAX_PARALLEL,
    Degree,
    Fraction,
    Id,
    LatencyMs,
    ModelRef,
    Percentile,
    Rate,
    Request,
    SeqLen,
    flag_error,
    int_range,
    names_flags,
    str_list,
)
from xpuplan.jobs.results import SERVE_FIGURES, Detail, Result, Uncertainty, clean, uncertainty, used
from xpuplan.workload.datasets import dataset_lengths, find_dataset, load_datasets
from xpuplan.workload.serving import LengthDist, as_length, dataset_length_dists, percentile_message

if TYPE_CHECKING:
    from xpuplan.catalog.device import Device
    from xpuplan.serve import SLO
    from xpuplan.workload.serving import ServingScenario

#: Most (device, tp, batch) points one ``infer estimate`` evaluates.
MAX_SWEEP_POINTS: Final = 1024
#: Most hardware options in one request.
MAX_HARDWARE: Final = 128
#: Engines ``--emit`` writes commands for.
EMITTERS: Final = ("vllm", "vllm-ascend", "sglang", "trtllm", "mindie", "lmdeploy")


class _ServeCommon(Request):
    FLAGS: ClassVar = {"input_len": "--in", "output_len": "--out", "emit_": "--emit", "spec_tokens": "--spec-tokens",
                       "spec_accept": "--spec-accept", "spec_draft_cost": "--spec-draft-cost",
                       "prefix_hit_rate": "--prefix-hit-rate"}

    model: ModelRef | None = Field(default=None, description="model id, alias or config.json path")
    hw: str | None = Field(default=None, max_length=4096, description="device ids or aliases, comma-separated")
    pp: Degree | None = Field(default=None, description="pipeline stages")
    ep: Degree | None = Field(default=None, description="expert-parallel groups (MoE)")
    input_len: SeqLen | None = Field(default=None, description="prompt tokens per request")
    output_len: SeqLen | None = Field(default=None, description="generated tokens per request")
    dataset: str | None = Field(default=None, min_length=1, max_length=200,
                                description="benchmark dataset whose mean lengths the requests have where --in / --out "
                                            "are not given (sharegpt; workload/data/datasets.yaml)")
    kv_dtype: Id | None = Field(default=None, description="KV-cache dtype")
    engine: Id | None = Field(default=None, description="serving engine")
    memory_fraction: Fraction | None = Field(default=None, description="device memory the engine may use (0-1]")
    ttft_ms: LatencyMs | None = Field(default=None, description="TTFT limit at --percentile, ms")
    tpot_ms: LatencyMs | None = Field(default=None, description="TPOT limit, ms")
    percentile: Percentile | None = Field(default=None, description="percentile of the TTFT limit")
    scenario: str | None = Field(default=None, max_length=4096, description="serving scenario YAML")
    emit_: str | None = Field(default=None, description="print the serve command: " + ", ".join(EMITTERS))
    spec_tokens: int | None = Field(default=None, ge=0, le=64,
                                    description="speculative decoding: draft tokens proposed per step (MTP/EAGLE/draft model)")
    spec_accept: float | None = Field(default=None, ge=1, le=65,
                                      description="speculative decoding: tokens accepted per step, bonus token included")
    spec_draft_cost: float | None = Field(default=None, ge=0, le=10,
                                          description="draft cost per proposed token, as a fraction of one decode step")
    prefix_hit_rate: float | None = Field(default=None, ge=0, lt=1,
                                          description="fraction of each prompt served from the prefix cache")

    @model_validator(mode="after")
    def _check_hw(self) -> _ServeCommon:
        names = str_list(self.hw) or []
        if len(names) > MAX_HARDWARE:
            raise flag_error(type(self), "hw", f"{len(names)} hardware options; at most {MAX_HARDWARE} per request")
        for n in names:
            if len(n) > 200:
                raise flag_error(type(self), "hw", f"{len(n):,}-character id; ids are at most 200 characters")
        if self.emit_ is not None and self.emit_ not in EMITTERS:
            raise flag_error(type(self), "emit_", f"--emit must be one of {', '.join(EMITTERS)} (got {self.emit_!r})")
        if self.dataset is not None and find_dataset(self.dataset) is None:
            raise flag_error(type(self), "dataset", f"unknown dataset {self.dataset!r}; known: "
                             + ", ".join(sorted(load_datasets().datasets)))
        if self.percentile is not None and self.percentile < 1:
            raise flag_error(type(self), "percentile", percentile_message(self.percentile, "--percentile"))
        return self


class InferEstimateRequest(_ServeCommon):
    """``xpuplan infer estimate``."""

    tp: str | None = Field(default=None, max_length=200, description="tensor-parallel size(s): 4, '1,2,4' or '1:8'")
    etp: Degree | None = Field(default=None, description="MoE: ranks each routed expert is split over (None: tp); "
                               "below tp, expert parallelism over tp/etp ranks inside the TP group")
    batch: str | None = Field(default=None, max_length=400, description="batch: 64, '1,8,64', '1:256' or 'max'")
    dtype: Id | None = Field(default=None, description="precision scheme")
    mode: Literal["static", "continuous"] | None = Field(default=None, description="batching mode")
    disagg: bool = Field(default=False, description="also estimate disaggregated prefill/decode")

    @model_validator(mode="after")
    def _check_lists(self) -> InferEstimateRequest:
        if self.tp is not None:
            int_range(self.tp, "--tp", max_value=MAX_PARALLEL)
        if self.batch is not None:
            _batch_parts(self.batch)
        return self


class CapacityRequest(_ServeCommon):
    """``xpuplan infer capacity``."""

    qps: Rate | None = Field(default=None, description="target requests/s")
    tp: str | None = Field(default=None, max_length=200, description="tensor-parallel sizes to try")
    etp: Degree | None = Field(default=None, description="MoE: ranks each routed expert is split over, the only "
                               "split tried (default: the search tries tp, and 1 inside the TP group)")
    dtype: str | None = Field(default=None, max_length=200, description="precision schemes to try, comma-separated")
    disagg: bool | None = Field(default=None, description="disaggregated estimate (default: >= 30B)")

    @model_validator(mode="after")
    def _check_tp(self) -> CapacityRequest:
        if self.tp is not None:
            int_range(self.tp, "--tp", max_value=MAX_PARALLEL)
        return self


def _batch_parts(text: str) -> list[str | list[int]]:
    """'max' stays a word; everything else a bounded int list."""
    parts: list[str | list[int]] = []
    total = 0
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if part.casefold() == "max":
            parts.append("max")
            total += 1
        else:
            vals = int_range(part, "--batch", max_value=MAX_BATCH)
            parts.append(vals)
            total += len(vals)
    if not parts:
        raise UserInputError("give --batch", field="--batch")
    if total > MAX_SWEEP_POINTS:
        raise UserInputError(f"--batch lists {total:,} values; at most {MAX_SWEEP_POINTS}", field="--batch")
    return parts


# =================================================================================================
# Results
# =================================================================================================
class InferEstimateResult(Result):
    """Result of ``infer estimate``: one entry per (device, tp, batch) that fits."""

    NAME: ClassVar[str] = "infer.estimate"
    model: str
    results: list[dict[str, Any]] = Field(description="serving estimates (ServingEstimate/EncoderEstimate.to_dict)")
    infeasible: list[str] = Field(description="points that do not fit, and why")
    commands: list[str] = Field(default_factory=list, description="serve commands (--emit), as printed")
    launches: list[dict[str, Any]] = Field(default_factory=list, description="serve commands (--emit): target, "
                                           "pinned version, argv of each command, files, notes")
    slo: dict[str, Any] | None = None
    pp: int = 1
    ep: int = 1
    etp: int | None = Field(default=None, description="ranks each routed expert is split over, when not tp "
                            "(expert parallelism inside the TP group)")
    input_len: int
    output_len: int
    dtype: str
    encoder: bool = False
    dataset: dict[str, Any] | None = Field(default=None, description="the benchmark dataset whose mean lengths "
                                           "were used (--dataset or the scenario's), its tokenizer entry and source, "
                                           "used_for: which lengths it gave")


class CapacityOptionOut(Detail):
    hardware: str
    replica: dict[str, Any]
    max_requests_per_s_per_replica: float
    replicas: int
    devices: int
    limited_by: str
    at_target: dict[str, Any] | None = None
    uncertainty: Uncertainty | None = Field(default=None, description="the hardware family's serving validation band "
                                                                      "around the rate per replica and the devices")
    disaggregated: dict[str, Any] | None = None
    disaggregated_error: str | None = None


class CapacityResult(Result, Detail):
    """Result of ``infer capacity``: devices per hardware option to serve the load."""

    NAME: ClassVar[str] = "infer.capacity"
    model: str
    target_qps: float
    input_len: float
    output_len: float
    slo: dict[str, Any]
    options: list[CapacityOptionOut]
    infeasible: dict[str, list[str]]
    assumed_lengths: bool = Field(default=False, description="--in/--out were defaults, not given")
    dataset: dict[str, Any] | None = Field(default=None, description="the benchmark dataset whose lengths were used "
                                           "(--dataset or the scenario's), its tokenizer entry and source, used_for: "
                                           "which lengths it gave")
    commands: list[str] = Field(default_factory=list, description="serve commands (--emit), as printed")
    launches: list[dict[str, Any]] = Field(default_factory=list, description="serve commands (--emit): target, "
                                           "pinned version, argv of each command, files, notes")


# =================================================================================================
# Resolution
# =================================================================================================
def serving_inputs(req: _ServeCommon) -> dict[str, Any]:
    """Speculative decoding and prefix caching of a request, as ``make_replica`` keywords."""
    from xpuplan.serve.plan import Speculation

    out: dict[str, Any] = {}
    if req.spec_tokens:
        if req.spec_accept is None:
            raise flag_error(type(req), "spec_accept", "--spec-tokens needs --spec-accept: the mean tokens accepted per "
                             "step, bonus token included (e.g. 2.4 for EAGLE-3 or MTP with 3 draft tokens)")
        try:
            out["speculation"] = Speculation(req.spec_tokens, req.spec_accept, req.spec_draft_cost or 0.0)
        except UserInputError as exc:
            raise flag_error(type(req), exc.field or "spec_accept", exc.message) from None
    elif req.spec_accept is not None or req.spec_draft_cost is not None:
        raise flag_error(type(req), "spec_tokens", "--spec-accept/--spec-draft-cost need --spec-tokens (draft tokens per step)")
    if req.prefix_hit_rate:
        out["prefix_hit_rate"] = req.prefix_hit_rate
    return out


def check_engine(ctx: RunContext, name: str | None, devices: list[Device]) -> dict[str, str]:
    """The serving engine a request names, against its hardware: an unknown name, or an engine that runs on the
    software stack of none of ``devices`` (``serve.replica.engine_stack_issue``), is a UserInputError naming
    ``engine``; otherwise {device id: why} for the devices it does not run on (when comparing hardware those are
    infeasible, the others are planned). Without a name each device serves with its default engine: nothing to check."""
    from xpuplan.serve.constants import engine_profile
    from xpuplan.serve.replica import engine_stack_issue

    if name is None or not name.strip():
        return {}
    a = ctx.base_assumptions
    prof = engine_profile(name, assumptions=a)
    catalog = list(ctx.catalog)
    refused = {d.id: why for d in devices if (why := engine_stack_issue(prof, d, catalog, a)) is not None}
    if devices and len(refused) == len(devices):
        first = next(iter(refused.values()))
        raise UserInputError(first if len(devices) == 1 else f"{prof.name} runs on none of the hardware given: {first}",
                             field="engine")
    return refused


def check_precisions(dtypes: list[str], kv_dtype: str | None) -> None:
    """Precision scheme and KV-cache dtype names (UserInputError naming ``dtype`` / ``kv_dtype``): a name no
    planner knows is the user's mistake on any hardware (whether a device runs a known scheme is the device's
    matter, ``serve.precision.resolve_precision``, which accepts the same KV names)."""
    from xpuplan.serve.precision import KV_DTYPES, normalise_scheme

    for d in dtypes:
        normalise_scheme(d)
    if kv_dtype is not None and kv_dtype.strip().casefold() not in (*KV_DTYPES, "auto", "bfloat16"):
        raise UserInputError(f"unknown KV-cache dtype {kv_dtype!r}; choose one of {', '.join(KV_DTYPES)}",
                             field="kv_dtype")


def length_cap_issue(m: Any, d_in: LengthDist, d_out: LengthDist) -> tuple[tuple[str, str], str] | None:
    """The longest prompt (and prompt + output) a file's length distributions allow, their ``max`` (an empirical
    list's largest value), against the model's context (``ModelArch.check_context``, as ``--in``/``--out`` are):
    (where, why) when a cap exceeds it (where: ``("input_len", "max")``, ``("output_len", "values")``...), else
    None."""
    if m.type == "encoder":
        return None

    def cap(d: LengthDist) -> tuple[str, float | None]:
        return ("values", max(d.values)) if d.values else ("max", d.max)

    (key_in, top_in), (key_out, top_out) = cap(d_in), cap(d_out)
    if top_in is None:
        return None
    checks = [(("input_len", key_in), top_in)]
    if top_out is not None:
        checks.append((("output_len", key_out), top_in + top_out))
    for where, tokens in checks:
        try:
            m.check_context(tokens)
        except UserInputError as exc:
            return where, exc.message
    return None


def check_layout(m: Any, tps: list[int] | None, pp: int, ep: int, etp: int | None = None) -> None:
    """The layout flags against the model before any search (``serve.validity``, UserInputError naming the flag):
    ep or etp on a dense model, a given tp that does not divide the heads, more stages than layers are the user's
    mistakes, not an infeasible plan. ``tps``: the tp sizes given (None: searched); ``etp`` is checked against
    each of them."""
    from xpuplan.serve.validity import check_parallelism

    if etp is not None and m.moe is None:
        raise UserInputError(f"etp ({etp}) splits the routed experts; {m.id} is dense", field="etp")
    for t in tps or [1]:
        check_parallelism(m, t, pp, ep, etp if tps else None)


def _pick(flag: Any, scenario_value: Any, default: Any = None) -> Any:
    if flag is not None:
        return flag
    if scenario_value is not None:
        return scenario_value
    return default


def _devices(ctx: RunContext, hw: str | None, sc: ServingScenario | None) -> list[Device]:
    names = str_list(hw) if hw else (sc.hardware if sc else [])
    if not names:
        raise UserInputError("give --hw (a device id or alias; several separated by commas)", field="--hw")
    if names == ["all"]:
        return [d for d in ctx.catalog if d.kind.upper() in ("GPU", "NPU", "TPU") and d.figure("memory.bandwidth_gb_per_s")
                and d.figure("memory.capacity_gb")]
    return [ctx.device(n) for n in names]


def _model(ctx: RunContext, req: _ServeCommon, sc: ServingScenario | None) -> Any:
    name = _pick(req.model, sc.model if sc else None)
    if not name:
        raise UserInputError("give --model (or a --scenario file)", field="--model")
    return ctx.model(name)


def _slo(req: _ServeCommon, sc: ServingScenario | None) -> SLO:
    from xpuplan.serve import SLO
    from xpuplan.units import MS

    ttft = _pick(req.ttft_ms, sc.slo.ttft_ms if sc else None)
    tpot = _pick(req.tpot_ms, sc.slo.tpot_ms if sc else None)
    return SLO(ttft_s=None if ttft is None else ttft * MS, tpot_s=None if tpot is None else tpot * MS,
               percentile=_pick(req.percentile, sc.slo.percentile if sc else None, 99.0))


def _length(value: float | None, flag: str) -> float:
    if value is None:
        raise UserInputError(f"give {flag}", field=flag)
    if not value > 0:
        raise UserInputError(f"{flag} must be positive (got {value:g})", field=flag)
    return value


def _lengths(req: _ServeCommon, sc: ServingScenario | None, m: Any
             ) -> tuple[LengthDist | None, LengthDist | None, dict[str, Any] | None]:
    """Prompt and output length distributions of a request: --in / --out (fixed) first, then --dataset,
    then the scenario's lengths, then the scenario's dataset; a dataset's means are those of the model's
    tokenizer (``workload.datasets``). None where nothing gives a length (the caller's default applies).
    The third item is the dataset's entry with ``used_for``: the lengths it gave (None if none)."""
    traffic = sc.traffic if sc else None
    name, flag = ((req.dataset, "--dataset") if req.dataset else
                  (traffic.dataset, "traffic.dataset") if traffic and traffic.dataset else (None, ""))
    ds = dataset_lengths(name, m.vocab_size, field=flag) if name else None
    ds_in, ds_out = dataset_length_dists(ds) if ds else (None, None)
    file_in, file_out = (traffic.input, traffic.output) if traffic else (None, None)
    d_in = as_length(req.input_len) if req.input_len is not None else (ds_in if req.dataset else file_in or ds_in)
    d_out = as_length(req.output_len) if req.output_len is not None else (ds_out if req.dataset else file_out or ds_out)
    used_for = [name for name, d, dd in (("input_len", d_in, ds_in), ("output_len", d_out, ds_out))
                if dd is not None and d is dd]
    return d_in, d_out, ({**ds.to_dict(), "used_for": used_for} if ds and used_for else None)


def _assumptions_kw(planner: Any, ctx: RunContext, devices: list[Device]) -> dict[str, Any]:
    """``assumptions=`` for a planner that takes it (the planners are gaining the argument one by one)."""
    import inspect

    return {"assumptions": ctx.assumptions(devices)} if "assumptions" in inspect.signature(planner).parameters else {}


# =================================================================================================
# infer estimate
# =================================================================================================
def _engine_refused(rep: Any, target: str, n_devices: int, commands: list[str]) -> bool:
    """True when ``--emit`` names an engine ``rep``'s device cannot run: an error for one device, a comment
    line in ``commands`` when comparing hardware (the engine serves some of it)."""
    from xpuplan.serve.emit import engine_key, engine_mismatch

    why = engine_mismatch(rep, engine_key(target))
    if why and n_devices == 1:
        raise UserInputError(why, field="--emit")
    if why:
        commands.append(f"# {why}")
    return bool(why)


def smallest_fitting_tp(model: Any, device: Any, input_len: float, output_len: float, **replica: Any) -> int:
    """The smallest tensor-parallel size (``serve.capacity.candidate_tps``: powers of two the heads allow, up to the
    scale-up domain) at which the weights and one sequence of ``input_len`` + ``output_len`` tokens fit on
    ``device``; the largest size tried when none does (its error then names the shortfall). What ``infer estimate``
    uses when neither ``--tp`` nor the scenario gives one."""
    from xpuplan.serve import make_replica
    from xpuplan.serve.capacity import candidate_tps
    from xpuplan.serve.kv import memory_plan, require_fit

    sizes = candidate_tps(model, device)
    for t in sizes:
        try:
            rep = make_replica(model, device, tp=t, **replica)
            require_fit(rep, memory_plan(rep), input_len + output_len)
        except (InfeasibleError, UserInputError):
            continue
        return t
    return sizes[-1]


@names_flags
def infer_estimate(req: InferEstimateRequest, ctx: RunContext | None = None) -> InferEstimateResult:
    """TTFT, TPOT, throughput of each (device, tp, batch) point; ``InfeasibleError`` when none fits."""
    from xpuplan.serve import (
        emit_plan,
        estimate,
        estimate_disagg,
        estimate_encoder,
        make_replica,
        max_batch,
        throughput_at_slo,
    )

    ctx = ctx or default_context()
    sc = ctx.serving_scenario(req.scenario)
    rs = sc.replica if sc else None
    m = _model(ctx, req, sc)
    devices = _devices(ctx, req.hw, sc)
    auto_tp = not req.tp and not (rs and rs.tp)
    tps = int_range(req.tp, "--tp", max_value=MAX_PARALLEL) if req.tp else [_pick(None, rs.tp if rs else None, 1)]
    pp = _pick(req.pp, rs.pp if rs else None, 1)
    ep = _pick(req.ep, rs.ep if rs else None, 1)
    etp = _pick(req.etp, rs.etp if rs else None)
    dt = _pick(req.dtype, rs.dtype if rs else None, "bf16")
    kv = _pick(req.kv_dtype, rs.kv_dtype if rs else None)
    eng = _pick(req.engine, rs.engine if rs else None)
    frac = _pick(req.memory_fraction, rs.memory_fraction if rs else None)
    traffic = sc.traffic if sc else None
    is_encoder = m.type == "encoder"
    d_in, d_out, ds = _lengths(req, sc, m)
    in_len = int(round(_length(d_in.average if d_in else None, "--in")))
    out_len = int(round(_length(d_out.average if d_out else (1 if is_encoder else None), "--out")))
    if not is_encoder:  # a prompt (plus its output) longer than the model's context is the user's mistake
        m.check_context(in_len, "--in")
        m.check_context(in_len + out_len, "--out")
    check_precisions([dt], kv)
    check_layout(m, None if auto_tp else tps, pp, ep, etp)
    refused = check_engine(ctx, eng, devices)
    batch_parts = _batch_parts(req.batch or (str(traffic.batch) if traffic and traffic.batch else "1"))
    n_batches = sum(1 if p == "max" else len(p) for p in batch_parts)
    if len(devices) * len(tps) * n_batches > MAX_SWEEP_POINTS:
        raise UserInputError(f"{len(devices)} devices x {len(tps)} tp x {n_batches} batches = "
                             f"{len(devices) * len(tps) * n_batches:,} estimates; at most {MAX_SWEEP_POINTS} per request",
                             field="--batch")
    if req.emit_ and is_encoder:
        raise UserInputError("--emit writes LLM serving commands; encoders are served with TensorRT/ONNX Runtime",
                             field="--emit")
    slo = _slo(req, sc)
    if req.disagg and slo.ttft_s is None and slo.tpot_s is None:
        raise UserInputError("--disagg needs an SLO: give --ttft-ms and/or --tpot-ms", field="--disagg")
    results: list[dict[str, Any]] = []
    failures: list[str] = []
    commands: list[str] = []
    launches: list[dict[str, Any]] = []
    single = len(devices) * len(tps) == 1
    assumptions = ctx.assumptions(devices)
    extra = serving_inputs(req)
    for dev in devices:
        if dev.id in refused:
            failures.append(f"{dev.id}: {refused[dev.id]}")
            continue
        layout = dict(pp=pp, ep=ep, etp=etp, dtype=dt, kv_dtype=kv, engine=eng, memory_fraction=frac,
                      assumptions=assumptions, **extra)
        dev_tps = [smallest_fitting_tp(m, dev, in_len, out_len, **layout)] if auto_tp and not is_encoder else tps
        for t in dev_tps:
            try:
                rep = make_replica(m, dev, tp=t, **layout)
                if auto_tp and not is_encoder and t > 1:
                    rep = dataclasses.replace(rep, notes=(
                        f"tp {t}: the smallest tensor-parallel size at which the weights and one {in_len + out_len:,}-token "
                        f"sequence fit on {dev.id} (give --tp to choose)",) + rep.notes)
                batches: list[int] = []
                for p in batch_parts:
                    batches += ([rep.max_num_seqs if is_encoder else max_batch(rep, in_len, out_len, mode=req.mode)]
                                if isinstance(p, str) else list(p))
            except InfeasibleError as exc:
                if single:
                    raise
                failures.append(f"{dev.id} tp={t}: {exc}; " + "; ".join(exc.reasons))
                continue
            fitted: list[int] = []
            for b in batches:
                try:
                    if is_encoder:
                        results.append(clean(estimate_encoder(rep, b, in_len).to_dict()))
                        continue
                    e = estimate(rep, in_len, out_len, b, mode=req.mode)
                except InfeasibleError as exc:
                    if single and len(batches) == 1:
                        raise
                    failures.append(f"{dev.id} tp={t} batch {b}: {exc}; " + "; ".join(exc.reasons))
                    continue
                fitted.append(b)
                results.append(clean(e.to_dict()))
                results[-1]["uncertainty"] = clean(_serving_uncertainty(
                    dev, results[-1], _serving_regime(m, t * pp, in_len, rep.precision.gemm_dtype,
                                                      _running(b, results[-1]))).model_dump())
            if is_encoder or not fitted:
                continue
            disagg_pools: tuple[int, int] | None = None
            seqs: dict[tuple[int, int] | None, int] = {None: max(fitted)}  # running sequences the engine must admit, per layout
            if slo.ttft_s or slo.tpot_s:
                try:
                    at = throughput_at_slo(rep, in_len, out_len, slo)
                    results[-1]["at_slo"] = clean(at.to_dict())
                    seqs[None] = max(seqs[None], at.point.concurrency)
                    if req.disagg:
                        dis = estimate_disagg(rep, rep, in_len, out_len, slo)
                        results[-1]["disaggregated"] = clean(dis.to_dict())
                        disagg_pools = (1, 1)
                        seqs[disagg_pools] = max(seqs[None], dis.decode_concurrency)
                except InfeasibleError as exc:
                    failures.append(f"{rep.key} at the SLO: {exc}; " + "; ".join(exc.reasons))
            if req.emit_:
                if _engine_refused(rep, req.emit_, len(devices), commands):
                    continue
                for pools in (None, disagg_pools) if disagg_pools else (None,):
                    lp = emit_plan(rep, req.emit_, max_num_seqs=seqs.get(pools, max(fitted)),
                                   max_model_len=in_len + out_len, disagg=pools)
                    launches.append(clean(lp.to_dict()))
                    commands.append(lp.to_text())
    if not results:
        raise InfeasibleError("no configuration fits", reasons=failures)
    engines = [r["replica"]["engine"] for r in results if isinstance(r.get("replica"), dict) and "engine" in r["replica"]]
    return InferEstimateResult(
        model=m.id, results=results, infeasible=failures, commands=commands, launches=launches,
        slo=slo.to_dict() if (slo.ttft_s or slo.tpot_s) else None, pp=pp, ep=ep, etp=etp, input_len=in_len,
        output_len=out_len, dtype=dt, encoder=is_encoder, dataset=ds,
        used=used(assumptions, devices, SERVE_FIGURES, precisions=[dt], engines=[e for e in engines if e]),
    )


def _running(batch: int, r: dict[str, Any]) -> int:
    """Sequences one replica runs at once for an estimate at ``batch``: the batch, or the running-sequence limit
    (KV capacity, max_num_seqs) when the batch exceeds it (the rest wait)."""
    limit = r.get("max_concurrency")
    return min(batch, int(limit)) if isinstance(limit, int | float) and limit > 0 else batch


def _serving_regime(m: Any, devices: int | None, input_len: float | None, dtype: str | None,
                    batch: float | None = None) -> Any:
    """Where a serving prediction sits (``validate.band.Regime``): the model, MoE or not, prompt length, devices
    of one replica, compute precision, sequences the replica runs at once."""
    from xpuplan.validate.band import model_regime

    return model_regime(m, seq_len=input_len, n_devices=devices, precision=dtype, batch=batch)


def _serving_uncertainty(dev: Device, r: dict[str, Any], regime: Any = None) -> Any:
    """The family's serving validation band around one estimate's headline figures (widened outside the
    public rows' ``regime``)."""
    from xpuplan.jobs.results import uncertainty

    def g(k: str) -> float | None:
        v = r.get(k)
        return float(v) if isinstance(v, int | float) else None

    return uncertainty(dev, "infer", str(r.get("efficiency_source", "")), {
        "output_tokens_per_s": (g("output_tokens_per_s"), "up"),
        "output_tokens_per_s_per_device": (g("output_tokens_per_s_per_device"), "up"),
        "requests_per_s": (g("requests_per_s"), "up"), "ttft_s": (g("ttft_s"), "down"),
        "tpot_s": (g("tpot_s"), "down"), "e2e_latency_s": (g("e2e_latency_s"), "down"),
    }, regime)


# =================================================================================================
# infer capacity
# =================================================================================================
@names_flags
def infer_capacity(req: CapacityRequest, ctx: RunContext | None = None) -> CapacityResult:
    """Devices of each hardware option needed to serve ``--qps`` within the SLO."""
    from xpuplan.serve import emit_plan, size_for_qps
    from xpuplan.serve.estimate import kv_tokens_per_sequence
    from xpuplan.serve.kv import max_concurrent_sequences, memory_plan
    from xpuplan.workload.serving import DEFAULT_INPUT_LEN, DEFAULT_OUTPUT_LEN

    ctx = ctx or default_context()
    sc = ctx.serving_scenario(req.scenario)
    rs = sc.replica if sc else None
    m = _model(ctx, req, sc)
    devices = _devices(ctx, req.hw, sc)
    traffic = sc.traffic if sc else None
    target = _pick(req.qps, traffic.qps if traffic else None)
    if target is None:
        raise UserInputError("give --qps (target requests/s)", field="--qps")
    d_in, d_out, ds = _lengths(req, sc, m)
    in_len = _length(d_in.average if d_in else DEFAULT_INPUT_LEN, "--in")
    out_len = _length(d_out.average if d_out else DEFAULT_OUTPUT_LEN, "--out")
    if m.type != "encoder":  # a prompt (plus its output) longer than the model's context is the user's mistake
        m.check_context(in_len, "--in")
        m.check_context(in_len + out_len, "--out")
    slo = _slo(req, sc)
    if slo.ttft_s is None and slo.tpot_s is None:
        raise UserInputError("give --ttft-ms and/or --tpot-ms", field="--ttft-ms")
    tail_len = d_in.quantile(slo.percentile) if d_in and req.input_len is None else None
    dtypes = str_list(req.dtype) or [rs.dtype if rs else "bf16"]
    if len(dtypes) > 16:
        raise UserInputError(f"{len(dtypes)} precision schemes; at most 16", field="--dtype")
    tps = int_range(req.tp, "--tp", max_value=MAX_PARALLEL) if req.tp else ([rs.tp] if rs and rs.tp else None)
    engine = _pick(req.engine, rs.engine if rs else None)
    kv = _pick(req.kv_dtype, rs.kv_dtype if rs else None)
    pp = _pick(req.pp, rs.pp if rs and rs.pp > 1 else None)
    ep = _pick(req.ep, rs.ep if rs and rs.ep > 1 else None)
    check_precisions(dtypes, kv)
    check_layout(m, tps, pp or 1, ep or 1)
    refused = check_engine(ctx, engine, devices)
    plan = size_for_qps(m, [d for d in devices if d.id not in refused], target, in_len, out_len, slo, dtypes=dtypes,
                        engine=engine, kv_dtype=kv, tps=tps, pp=pp, ep=ep,
                        etp=_pick(req.etp, rs.etp if rs else None),
                        memory_fraction=_pick(req.memory_fraction, rs.memory_fraction if rs else None),
                        ttft_input_len=tail_len, disagg=req.disagg, **serving_inputs(req),
                        input_lengths=d_in.nodes() if d_in and req.input_len is None else None,
                        **_assumptions_kw(size_for_qps, ctx, devices))
    commands: list[str] = []
    launches: list[dict[str, Any]] = []
    if req.emit_:
        for o in plan.options:
            rep = o.replica_obj
            assert rep is not None
            if _engine_refused(rep, req.emit_, len(devices), commands):
                continue
            cmax = max_concurrent_sequences(rep, memory_plan(rep), kv_tokens_per_sequence(rep, in_len, out_len))
            pools: list[tuple[int, int] | None] = [None]
            if o.disagg is not None and o.disagg.prefill_replicas and o.disagg.decode_replicas:
                pools.append((o.disagg.prefill_replicas, o.disagg.decode_replicas))
            for pool in pools:
                lp = emit_plan(rep, req.emit_, max_num_seqs=max(1, cmax), max_model_len=int(in_len + out_len), disagg=pool)
                head = f"# {o.replicas} replicas of this command\n" if pool is None else "# disaggregated prefill/decode\n"
                commands.append(head + lp.to_text())
                launches.append({**clean(lp.to_dict()), "replicas": o.replicas if pool is None else None})
    engines = [o.replica.get("engine") for o in plan.options]
    out = clean(plan.to_dict())
    out["infeasible"] = {**out["infeasible"], **{hw_id: [why] for hw_id, why in refused.items()}}
    res = CapacityResult(**out, commands=commands, launches=launches,
                         assumed_lengths=d_in is None and d_out is None, dataset=ds,
                         used=used(ctx.assumptions(devices), devices, SERVE_FIGURES, precisions=dtypes,
                                   engines=[e for e in engines if isinstance(e, str)]))
    by_id = {d.id: d for d in devices}
    for opt in res.options:
        if opt.hardware in by_id:
            # replicas scale inversely with the achieved rate, so the device count does too (rounded up)
            per_replica = max(opt.devices // max(opt.replicas, 1), 1)
            prec = opt.replica.get("precision")
            dtype = prec.get("gemm_dtype") if isinstance(prec, dict) else None
            u = uncertainty(by_id[opt.hardware], "infer", str(opt.replica.get("efficiency_source", "")), {
                "max_requests_per_s_per_replica": (opt.max_requests_per_s_per_replica, "up"),
                "devices": (float(opt.devices), "down")},
                _serving_regime(m, per_replica, in_len, dtype if isinstance(dtype, str) else None,
                                (opt.at_target or {}).get("concurrency")))
            u.ranges["devices"] = [float(math.ceil(x / per_replica - 1e-9) * per_replica) for x in u.ranges["devices"]]
            opt.uncertainty = u
    if not plan.options:
        reasons = [f"{hw_id}: {r}" for hw_id, rs_ in res.infeasible.items() for r in rs_[:3]]
        raise InfeasibleError(f"no hardware option serves {m.id} within the SLO", reasons=reasons, result=res)
    return res
