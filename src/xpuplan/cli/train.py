"""``xpuplan train estimate|search``: the training planner from the shell (a thin layer over ``xpuplan.train``).

Both commands take flags, a scenario YAML (``--scenario``), or both (flags win). ``estimate`` exits 3
when the requested plan does not fit; ``search`` exits 3 when no plan fits, and both say what it
would take.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from xpuplan import units
from xpuplan.cli.common import cli_command, console, err_console, print_json, table
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.models import get_model
from xpuplan.models.arch import ModelArch
from xpuplan.train import (
    FRAMEWORKS,
    Cluster,
    SearchSpace,
    TrainEstimate,
    devices_to_fit,
    emit_launch,
    estimate,
    make_plan,
    search,
)
from xpuplan.train.step import StepModel
from xpuplan.workload.training import (
    ClusterIn,
    PlanIn,
    TrainingJob,
    TrainingScenario,
    load_training_scenario,
    parse_device_range,
)

app = typer.Typer(help="Training planner: estimate a parallel plan or search for the best one.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add the ``train`` sub-app to the root CLI."""
    root.add_typer(app, name="train")


# ---------------------------------------------------------------------------------------
# shared option handling
# ---------------------------------------------------------------------------------------
def _int_list(text: str | None, field: str) -> list[int] | None:
    if text is None:
        return None
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserInputError(f"expected an integer or a comma-separated list, got {text!r}", field=field) from None
    if not vals or any(v < 0 for v in vals):
        raise UserInputError(f"expected non-negative integers, got {text!r}", field=field)
    return vals


def _str_list(text: str | None) -> list[str] | None:
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]


def _scenario(path: str | None) -> TrainingScenario | None:
    return load_training_scenario(path) if path else None


def _job(sc: TrainingScenario | None, **flags: Any) -> TrainingJob:
    """The scenario's job with every flag that was given laid over it."""
    base = sc.job.model_dump() if sc else {}
    base.update({k: v for k, v in flags.items() if v is not None})
    return TrainingJob.model_validate(base)


def _cluster(hw: str | None, n: int, sc: TrainingScenario | None, **flags: Any) -> Cluster:
    name = hw or (sc.hardware if sc else None)
    if not name:
        raise UserInputError("give --hw (a device id or alias) or a scenario with 'hardware'", field="hw")
    over = (sc.cluster if sc else ClusterIn()).model_dump()
    over.update({k: v for k, v in flags.items() if v is not None})
    over = ClusterIn.model_validate(over).model_dump()
    return Cluster.from_catalog(name, n, **{k: v for k, v in over.items() if v is not None})


def _model(name: str | None, sc: TrainingScenario | None) -> ModelArch:
    name = name or (sc.model if sc else None)
    if not name:
        raise UserInputError("give --model (a preset id, alias or config.json) or a scenario with 'model'", field="model")
    return get_model(name)


def _gb(x: float) -> str:
    return f"{x / units.GB:.1f} GB"


def _days(s: float | None) -> str:
    return "-" if s is None else f"{s / units.DAY:.1f} d"


def _what_it_would_take(model: ModelArch, cluster: Cluster, job: TrainingJob, precision: str,
                        same_count: bool = True) -> list[str]:
    space = SearchSpace(precision=[precision], uneven_pipeline=True)
    if same_count:
        here = search(model, cluster, job, space=space, top=1).best
        if here is not None:
            return [f"another plan fits on the same {cluster.n_devices} devices: {here.key} "
                    f"({here.tokens_per_s:,.0f} tokens/s, {here.memory.total_bytes / units.GB:.1f} GB per device; "
                    "`xpuplan train search` ranks them all)"]
    best = devices_to_fit(model, cluster, job, space=space)
    if best is None:
        return [f"no plan fits on any count of {cluster.device.id} up to the search limit"]
    return [
        f"what it would take: at least {best.n_devices} x {cluster.device.id} "
        f"(fastest plan there: {best.key}, {best.tokens_per_s:,.0f} tokens/s, "
        f"{best.memory.total_bytes / units.GB:.1f} GB per device)"
    ]


def _render_estimate(e: TrainEstimate, cluster: Cluster) -> None:
    p = e.plan
    console.print(f"[bold]{e.model_id}[/] on {e.n_devices} x {e.device_id} — plan [bold]{e.key}[/]")
    console.print(f"  {cluster.hint}; efficiency: {e.efficiency_source}", highlight=False)
    rows = [
        ["step time", f"{e.step_time_s:.3f} s"],
        ["tokens/s (global)", f"{e.tokens_per_s:,.0f}"],
        ["tokens/s per device", f"{e.tokens_per_s_per_device:,.1f}"],
        ["MFU / HFU", f"{e.mfu:.1%} / {e.hfu:.1%}"],
        ["global batch", f"{e.global_batch_seqs} x {e.seq_len} tokens (micro-batch {p.micro_batch}, {p.grad_accum} per step)"],
        ["memory per device", f"{_gb(e.memory.total_bytes)} of {_gb(e.memory.usable_bytes)} usable"],
        ["power per device", "-" if e.power_w_per_device is None else f"{e.power_w_per_device:.0f} W"],
    ]
    if e.train_tokens is not None:
        rows += [["time to train", f"{_days(e.time_to_train_s)} for {units.format_count(e.train_tokens)} tokens"],
                 ["device-hours", f"{e.device_hours:,.0f}"],
                 ["energy (devices only)", "-" if e.energy_kwh is None else f"{e.energy_kwh / 1e3:,.1f} MWh"]]
    console.print(table("estimate", ["quantity", "value"], rows))
    st = e.step.to_dict()
    console.print(table("step time breakdown (exposed)", ["part", "seconds", "share"],
                        [[k.removesuffix("_s"), v, f"{v / e.step_time_s:.1%}"] for k, v in st.items() if k != "step_s" and v > 0]))
    m = e.memory
    mem_rows: list[tuple[str, float]] = [("weights", m.weights_bytes), ("gradients", m.gradients_bytes),
                                         ("master weights", m.master_weights_bytes),
                                         ("optimizer states", m.optimizer_states_bytes),
                                         ("activations", m.activations_bytes), ("workspace", m.workspace_bytes),
                                         ("total", m.total_bytes)]
    console.print(table("memory per device", ["part", "GB"], [[k, v / units.GB] for k, v in mem_rows]))
    for r in e.reasons:
        console.print(f"[bold red]does not fit:[/] {r}", highlight=False)


def _emit(framework: str | None, e: TrainEstimate, model: ModelArch, cluster: Cluster, job: TrainingJob) -> Any:
    if framework is None:
        return None
    return emit_launch(e.plan, model, cluster.with_devices(e.n_devices), job, framework)


# ---------------------------------------------------------------------------------------
# estimate
# ---------------------------------------------------------------------------------------
@app.command("estimate")
@cli_command
def estimate_cmd(
    model: Annotated[str | None, typer.Option(help="model id, alias or config.json path")] = None,
    hw: Annotated[str | None, typer.Option(help="device id or alias")] = None,
    devices: Annotated[int | None, typer.Option(help="number of devices")] = None,
    tp: Annotated[int | None, typer.Option(help="tensor-parallel size")] = None,
    pp: Annotated[int | None, typer.Option(help="pipeline stages")] = None,
    vpp: Annotated[int | None, typer.Option(help="virtual pipeline stages per device (interleaving)")] = None,
    cp: Annotated[int | None, typer.Option(help="context-parallel size")] = None,
    ep: Annotated[int | None, typer.Option(help="expert-parallel size (MoE)")] = None,
    dp: Annotated[int | None, typer.Option(help="data-parallel size (default devices / (tp·pp·cp))")] = None,
    sp: Annotated[bool | None, typer.Option("--sp/--no-sp", help="Megatron sequence parallelism (default: on when tp > 1)")] = None,
    zero: Annotated[int | None, typer.Option(help="ZeRO stage 0-3 (3 = FSDP)")] = None,
    recompute: Annotated[str | None, typer.Option(help="none | selective | full")] = None,
    micro_batch: Annotated[int | None, typer.Option(help="sequences per micro-batch")] = None,
    precision: Annotated[str | None, typer.Option(help="bf16 | fp16 | fp8")] = None,
    seq_len: Annotated[int | None, typer.Option(help="tokens per sequence")] = None,
    global_batch: Annotated[int | None, typer.Option(help="tokens per optimizer step")] = None,
    tokens: Annotated[float | None, typer.Option(help="tokens to train (time, device-hours, energy)")] = None,
    method: Annotated[str | None, typer.Option(help="full | lora | qlora")] = None,
    lora_rank: Annotated[int | None, typer.Option(help="adapter rank")] = None,
    kernels: Annotated[str | None, typer.Option(help="fused | eager")] = None,
    reserve: Annotated[float | None, typer.Option(help="fraction of device memory kept free")] = None,
    tp_overlap: Annotated[float | None, typer.Option(help="fraction of TP comm hidden (TE tp-comm-overlap ~0.8)")] = None,
    ep_overlap: Annotated[float | None, typer.Option(help="fraction of MoE all-to-all hidden (DualPipe ~0.9)")] = None,
    uneven_pipeline: Annotated[bool, typer.Option(help="allow pp not dividing the layers (busiest stage: ceil)")] = False,
    dp_compression: Annotated[float | None, typer.Option(help="factor on DP gradient traffic (e.g. 0.1 PowerSGD)")] = None,
    scale_out_gbit: Annotated[float | None, typer.Option(help="scale-out NIC per device, Gbit/s")] = None,
    domain_size: Annotated[int | None, typer.Option(help="devices per scale-up domain")] = None,
    scenario: Annotated[str | None, typer.Option(help="training scenario YAML")] = None,
    emit: Annotated[str | None, typer.Option(help=f"print launch arguments: {' | '.join(FRAMEWORKS)}")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Predict one parallel plan: step time and breakdown, tokens/s, MFU, memory, time to train."""
    sc = _scenario(scenario)
    if emit is not None and emit not in FRAMEWORKS:
        raise UserInputError(f"choose one of {', '.join(FRAMEWORKS)}", field="emit")
    m = _model(model, sc)
    n = devices or (sc.devices if sc else None)
    if n is None:
        raise UserInputError("give --devices (or 'devices' in the scenario)", field="devices")
    job = _job(sc, seq_len=seq_len, global_batch_tokens=global_batch, train_tokens=tokens, method=method,
               lora_rank=lora_rank, kernels=kernels, memory_reserve=reserve, dp_compression=dp_compression,
               tp_overlap=tp_overlap, ep_overlap=ep_overlap)
    cluster = _cluster(hw, n, sc, scale_out_gbit_per_s=scale_out_gbit, domain_size=domain_size)
    pin = (sc.plan if sc and sc.plan else PlanIn()).model_dump()
    pin.update({k: v for k, v in dict(tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, dp=dp, sp=sp, zero_stage=zero,
                                      recompute=recompute, micro_batch=micro_batch, precision=precision).items()
                if v is not None})
    pl = PlanIn.model_validate(pin)
    plan = make_plan(
        n_devices=n, global_batch_seqs=job.global_batch_seqs, tp=pl.tp or 1, pp=pl.pp or 1, cp=pl.cp or 1, dp=pl.dp,
        vpp=pl.vpp or 1, ep=pl.ep or 1, sp=pl.sp, zero_stage=1 if pl.zero_stage is None else pl.zero_stage,
        recompute=pl.recompute or "selective", micro_batch=pl.micro_batch or 1, precision=pl.precision or "bf16",
        model=m, uneven_pipeline=uneven_pipeline,
    )
    e = estimate(m, cluster, plan, job, uneven_pipeline=uneven_pipeline)
    launch = _emit(emit, e, m, cluster, job)
    if json_:
        out = e.to_dict()
        out["cluster"] = cluster.to_dict()
        if launch is not None:
            out["launch"] = launch.to_dict()
        print_json(out)
    else:
        _render_estimate(e, cluster)
        if launch is not None:
            console.print(launch.to_text(), highlight=False, markup=False, soft_wrap=True)
    if not e.feasible:
        reasons = list(e.reasons) + _what_it_would_take(m, cluster, job, plan.precision)
        raise InfeasibleError(f"plan {e.key} does not fit on {n} x {cluster.device.id}", reasons=reasons)


# ---------------------------------------------------------------------------------------
# search
# ---------------------------------------------------------------------------------------
@app.command("search")
@cli_command
def search_cmd(
    model: Annotated[str | None, typer.Option(help="model id, alias or config.json path")] = None,
    hw: Annotated[str | None, typer.Option(help="device id or alias")] = None,
    devices: Annotated[int | None, typer.Option(help="number of devices")] = None,
    devices_range: Annotated[str | None, typer.Option(help="'16:1024' (doubling), '16:1024:16' (steps of 16) or '8,16,64'")] = None,
    tokens: Annotated[float | None, typer.Option(help="tokens to train (ranks by time to train)")] = None,
    top: Annotated[int | None, typer.Option(help="plans to show")] = None,
    seq_len: Annotated[int | None, typer.Option(help="tokens per sequence")] = None,
    global_batch: Annotated[int | None, typer.Option(help="tokens per optimizer step")] = None,
    precision: Annotated[str | None, typer.Option(help="bf16 | fp16 | fp8 (comma list to compare)")] = None,
    method: Annotated[str | None, typer.Option(help="full | lora | qlora")] = None,
    lora_rank: Annotated[int | None, typer.Option(help="adapter rank")] = None,
    kernels: Annotated[str | None, typer.Option(help="fused | eager")] = None,
    reserve: Annotated[float | None, typer.Option(help="fraction of device memory kept free")] = None,
    uneven_pipeline: Annotated[bool, typer.Option(help="also try pp not dividing the layers")] = False,
    tp: Annotated[str | None, typer.Option(help="restrict tp, e.g. '4,8'")] = None,
    pp: Annotated[str | None, typer.Option(help="restrict pp")] = None,
    cp: Annotated[str | None, typer.Option(help="restrict cp")] = None,
    ep: Annotated[str | None, typer.Option(help="restrict ep")] = None,
    zero: Annotated[str | None, typer.Option(help="restrict ZeRO stages, e.g. '1,3'")] = None,
    recompute: Annotated[str | None, typer.Option(help="restrict recomputation, e.g. 'selective,full'")] = None,
    micro_batch: Annotated[str | None, typer.Option(help="restrict micro-batch sizes")] = None,
    scale_out_gbit: Annotated[float | None, typer.Option(help="scale-out NIC per device, Gbit/s")] = None,
    domain_size: Annotated[int | None, typer.Option(help="devices per scale-up domain")] = None,
    scenario: Annotated[str | None, typer.Option(help="training scenario YAML")] = None,
    emit: Annotated[str | None, typer.Option(help=f"launch arguments of the best plan: {' | '.join(FRAMEWORKS)}")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Enumerate every valid plan, evaluate them all, rank by throughput; Pareto front over device counts."""
    sc = _scenario(scenario)
    if emit is not None and emit not in FRAMEWORKS:
        raise UserInputError(f"choose one of {', '.join(FRAMEWORKS)}", field="emit")
    if devices is not None and devices_range is not None:
        raise UserInputError("give --devices or --devices-range, not both", field="devices")
    m = _model(model, sc)
    if devices is not None:
        counts = [devices]
    elif devices_range is not None:
        counts = parse_device_range(devices_range)
    elif sc and sc.devices:
        counts = [sc.devices]
    elif sc and sc.devices_range:
        counts = parse_device_range(sc.devices_range)
    else:
        raise UserInputError("give --devices N or --devices-range A:B", field="devices")
    job = _job(sc, seq_len=seq_len, global_batch_tokens=global_batch, train_tokens=tokens, method=method,
               lora_rank=lora_rank, kernels=kernels, memory_reserve=reserve)
    cluster = _cluster(hw, counts[0], sc, scale_out_gbit_per_s=scale_out_gbit, domain_size=domain_size)
    pin = sc.plan if sc and sc.plan else PlanIn()
    space = SearchSpace(
        tp=_int_list(tp, "tp") or ([pin.tp] if pin.tp else None),
        pp=_int_list(pp, "pp") or ([pin.pp] if pin.pp else None),
        cp=_int_list(cp, "cp") or ([pin.cp] if pin.cp else None),
        ep=_int_list(ep, "ep") or ([pin.ep] if pin.ep else None),
        zero_stage=_int_list(zero, "zero") or ([pin.zero_stage] if pin.zero_stage is not None else None),
        recompute=_str_list(recompute) or ([pin.recompute] if pin.recompute else None),
        micro_batch=_int_list(micro_batch, "micro_batch") or ([pin.micro_batch] if pin.micro_batch else None),
        precision=_str_list(precision) or [pin.precision or "bf16"],
        uneven_pipeline=uneven_pipeline,
    )
    k = top or (sc.top if sc else 10)
    sm = StepModel(m, cluster.device, cluster.efficiency, job)
    show_bar = not json_ and len(counts) > 1 and err_console.is_terminal
    with Progress(TextColumn("searching"), BarColumn(), TextColumn("{task.completed}/{task.total} device counts"),
                  TimeElapsedColumn(), console=err_console, transient=True, disable=not show_bar) as bar:
        task = bar.add_task("search", total=len(counts))

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        res = search(m, cluster, job, device_counts=counts, space=space, top=k, progress=progress, step_model=sm)
    launch = _emit(emit, res.best, m, cluster, job) if res.best is not None else None
    if json_:
        out = res.to_dict()
        if launch is not None:
            out["launch"] = launch.to_dict()
        print_json(out)
    else:
        _render_search(res, job)
        if not uneven_pipeline and res.best is not None:
            _uneven_hint(res, m, cluster, job, counts, space, sm)
        if launch is not None:
            console.print(launch.to_text(), highlight=False, markup=False, soft_wrap=True)
    if res.best is None:
        reasons = list(res.reasons)
        if res.plans_evaluated:
            reasons += _what_it_would_take(m, cluster.with_devices(max(counts)), job, space.precision[0],
                                           same_count=space.uneven_pipeline is False)
        raise InfeasibleError(f"no plan of {m.id} fits on {', '.join(map(str, counts))} x {cluster.device.id}",
                              reasons=reasons)


#: Throughput gain above which the search suggests --uneven-pipeline.
UNEVEN_HINT_GAIN = 1.10


def _uneven_hint(res: Any, m: Any, cluster: Any, job: TrainingJob, counts: Any, space: SearchSpace, sm: Any) -> None:
    """When the layer count leaves few pipeline sizes (Llama-3.1-405B's 126 layers allow pp 1 or 2 on
    power-of-two clusters), say what uneven stages would give (Meta trains 405B with pp16)."""
    alt = search(m, cluster, job, device_counts=counts, space=dataclasses.replace(space, uneven_pipeline=True),
                 top=1, step_model=sm)
    if alt.best is not None and alt.best.tokens_per_s > UNEVEN_HINT_GAIN * res.best.tokens_per_s:
        gain = alt.best.tokens_per_s / res.best.tokens_per_s - 1
        console.print(f"hint: {m.n_layers} layers leave few pipeline sizes; with --uneven-pipeline "
                      f"{alt.best.key} reaches {alt.best.tokens_per_s:,.0f} tokens/s (+{gain:.0%}, MFU {alt.best.mfu:.1%})",
                      highlight=False)


def _render_search(res: Any, job: TrainingJob) -> None:
    console.print(f"[bold]{res.model_id}[/] on {res.device_id}: {res.plans_evaluated:,} plans evaluated, "
                  f"{res.plans_feasible:,} fit, {res.elapsed_s:.2f} s; efficiency: {res.efficiency_source}", highlight=False)
    rows = []
    for i, e in enumerate(res.top, 1):
        rows.append([i, e.n_devices, e.key, e.tokens_per_s, e.tokens_per_s_per_device, f"{e.mfu:.1%}", e.step_time_s,
                     e.memory.total_bytes / units.GB, _days(e.time_to_train_s)])
    console.print(table("best plans", ["#", "devices", "plan", "tokens/s", "tok/s/dev", "MFU", "step s", "mem GB",
                                       "time to train"], rows))
    if len(res.device_counts) > 1 and res.pareto:
        console.print(table("Pareto front: time vs devices", ["devices", "plan", "tokens/s", "time to train"],
                            [[p.n_devices, p.key, p.tokens_per_s, _days(p.time_to_train_s)] for p in res.pareto]))
