"""``xpuplan train estimate|search``: the training planner from the shell.

Parses flags, calls :mod:`xpuplan.jobs.train` (which merges a ``--scenario`` file with the flags,
validates every input and computes the advice) and renders the result. ``estimate`` exits 3 when
the requested plan does not fit; ``search`` exits 3 when no plan fits, and both say what it would
take. ``search`` shows progress over device counts and stops on Ctrl-C with what it found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from xpuplan import units
from xpuplan.cli.common import (
    band_line,
    cli_command,
    console,
    err_console,
    print_caveats,
    print_json,
    render_infeasible,
    request,
    table,
)
from xpuplan.errors import InfeasibleError
from xpuplan.workload.training import OFFLOAD_MODULES_HELP, RECOMPUTE_MODULES_HELP

if TYPE_CHECKING:
    from xpuplan.jobs.results import Uncertainty
    from xpuplan.jobs.train import TrainEstimateResult, TrainSearchResult

#: ``--emit`` choices (checked by the request model; ``xpuplan.jobs.train.FRAMEWORKS``).
FRAMEWORKS_HELP = "megatron | bridge | torchtitan | deepspeed | gaudi"

app = typer.Typer(help="Training planner: estimate a parallel plan or search for the best one.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add the ``train`` sub-app to the root CLI."""
    root.add_typer(app, name="train")


def _gb(x: float) -> str:
    return f"{x / units.GB:.1f} GB"


def _days(s: float | None) -> str:
    return "-" if s is None else f"{s / units.DAY:.1f} d"


def _print_band(u: Uncertainty | None, prefix: str = "") -> None:
    if u is None:
        return
    r = u.ranges
    parts = [f"{r['tokens_per_s_per_device'][0]:,.0f} - {r['tokens_per_s_per_device'][1]:,.0f} tokens/s per device"]
    if "time_to_train_s" in r:
        parts.append(f"time to train {_days(r['time_to_train_s'][0])} - {_days(r['time_to_train_s'][1])}")
    line = band_line(u, prefix + ", ".join(parts))
    if line:
        console.print(line, highlight=False, soft_wrap=True)


def _stack_id(res: TrainEstimateResult | TrainSearchResult) -> str:
    """``; stack: ID`` of the training-stack profile a result ran under (it changes with the device and --emit)."""
    stack = (res.used.assumptions.get("training_stack") or {}) if res.used is not None else {}
    return f"; stack: {stack['id']}" if stack.get("id") else ""


def _render_estimate(e: TrainEstimateResult) -> None:
    p = e.plan
    console.print(f"[bold]{e.model}[/] on {e.n_devices} x {e.hardware} — plan [bold]{e.key}[/]")
    console.print(f"  {e.cluster.get('hint')}; efficiency: {e.efficiency_source}{_stack_id(e)}", highlight=False)
    mem = e.memory
    rows = [
        ["step time", f"{e.step_time_s:.3f} s"],
        ["tokens/s (global)", f"{e.tokens_per_s:,.0f}"],
        ["tokens/s per device", f"{e.tokens_per_s_per_device:,.1f}"],
        ["MFU / HFU", f"{e.mfu:.1%} / {e.hfu:.1%}"],
        ["global batch", f"{e.global_batch_seqs} x {e.seq_len} tokens (micro-batch {p['micro_batch']}, "
                         f"{p['grad_accum']} per step)"],
        ["memory per device", f"{_gb(mem['total_bytes'])} of {_gb(mem['usable_bytes'])} usable"],
        ["power per device", "-" if e.power_w_per_device is None else f"{e.power_w_per_device:.0f} W"],
    ]
    if p.get("recompute_modules"):
        rows.insert(0, ["selective recompute", f"re-runs {', '.join(p['recompute_modules'])} (--recompute-modules)"])
    if p.get("offload_modules"):
        rows.insert(0, ["activation offload", f"inputs of {', '.join(p['offload_modules'])} in host memory "
                                              f"({_gb(mem['host_offload_bytes'])}; --offload-modules)"])
    if e.lora is not None:
        rows.insert(0, ["method", f"{e.method}: rank-{e.lora['rank']} adapters on {', '.join(e.lora['targets'])}, "
                                  "frozen base"])
    if e.train_tokens is not None:
        rows += [["time to train", f"{_days(e.time_to_train_s)} for {units.format_count(e.train_tokens)} tokens"],
                 ["device-hours", f"{(e.device_time_s or 0) / units.HOUR:,.0f}"],
                 ["energy (devices only)", "-" if e.energy_j is None else f"{e.energy_j / (1e3 * units.KWH):,.1f} MWh"]]
    console.print(table("estimate", ["quantity", "value"], rows))
    console.print(table("step time breakdown (exposed)", ["part", "seconds", "share"],
                        [[k.removesuffix("_s"), v, f"{v / e.step_time_s:.1%}"] for k, v in e.step.items()
                         if k != "step_s" and v > 0]))
    parts = [("weights", "weights_bytes"), ("gradients", "gradients_bytes"), ("master weights", "master_weights_bytes"),
             ("optimizer states", "optimizer_states_bytes"), ("activations", "activations_bytes"),
             ("workspace", "workspace_bytes"), ("total", "total_bytes")]
    if mem.get("host_offload_bytes"):
        parts.append(("host memory (offloaded activations)", "host_offload_bytes"))
    console.print(table("memory per device", ["part", "GB"], [[k, mem[v] / units.GB] for k, v in parts]))
    for r in e.reasons:
        console.print(f"[bold red]does not fit:[/] {r}", highlight=False)
    for n in e.notes:
        console.print(f"[yellow]note:[/] {n}", highlight=False)
    _print_band(e.uncertainty)
    print_caveats(e.used)
    if e.launch is not None:
        console.print(e.launch["text"], highlight=False, markup=False, soft_wrap=True)


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
    recompute: Annotated[str | None, typer.Option(help="none | selective | full | offload (full recompute, layer inputs kept in host memory) | layer_offload (no recompute, whole layers' activations in host memory: Megatron-Core, pp 1) | partial (full recompute of the fewest layers per stage that fit: Megatron-Core --recompute-method block)")] = None,
    micro_batch: Annotated[int | None, typer.Option(help="sequences per micro-batch")] = None,
    precision: Annotated[str | None, typer.Option(help="bf16 | fp16 | fp8 | fp4 (NVFP4, Blackwell)")] = None,
    seq_len: Annotated[int | None, typer.Option(help="tokens per sequence")] = None,
    global_batch: Annotated[int | None, typer.Option(help="tokens per optimizer step")] = None,
    tokens: Annotated[float | None, typer.Option(help="tokens to train (time, device-hours, energy)")] = None,
    method: Annotated[str | None, typer.Option(help="full | lora | qlora")] = None,
    lora_rank: Annotated[int | None, typer.Option(help="adapter rank")] = None,
    lora_targets: Annotated[str | None, typer.Option(help="matrices LoRA/QLoRA adapts: comma list of q, k, v, o, "
                                                          "gate, up, down, or 'all' (default)")] = None,
    kernels: Annotated[str | None, typer.Option(help="fused | eager")] = None,
    recompute_layers: Annotated[int | None, typer.Option(help="layers per pipeline stage --recompute partial "
                                                               "recomputes in full, as your run sets it (default: the "
                                                               "fewest that fit)")] = None,
    recompute_modules: Annotated[str | None, typer.Option(help=RECOMPUTE_MODULES_HELP)] = None,
    offload_modules: Annotated[str | None, typer.Option(help=OFFLOAD_MODULES_HELP)] = None,
    power_cap_w: Annotated[float | None, typer.Option(help="board power limit per device, W (DVFS: compute "
                                                          "slows with the clock below the TDP)")] = None,
    reserve: Annotated[float | None, typer.Option(help="fraction of device memory kept free")] = None,
    tp_overlap: Annotated[float | None, typer.Option(help="fraction of TP comm hidden (TE tp-comm-overlap ~0.8)")] = None,
    ep_overlap: Annotated[float | None, typer.Option(help="fraction of MoE all-to-all hidden (DualPipe ~0.9)")] = None,
    uneven_pipeline: Annotated[bool, typer.Option(help="allow pp not dividing the layers (busiest stage: ceil)")] = False,
    dp_compression: Annotated[float | None, typer.Option(help="factor on DP gradient traffic (e.g. 0.1 PowerSGD)")] = None,
    scale_out_gbit: Annotated[float | None, typer.Option(help="scale-out NIC per device, Gbit/s")] = None,
    domain_size: Annotated[int | None, typer.Option(help="devices per scale-up domain")] = None,
    scenario: Annotated[str | None, typer.Option(help="training scenario YAML")] = None,
    stack: Annotated[str | None, typer.Option(help="training stack profile (default: the one the device's vendor ships: maxtext on TPUs, mindspeed-mcore on Ascend, megatron-deepspeed-gaudi on Gaudi, else megatron-core): megatron-core, nemo, "
                                                   "megatron-lm-legacy, mindspeed, mindspeed-mcore, torchtitan, fsdp, llm-foundry, deepspeed, megatron-deepspeed-gaudi, maxtext, "
                                                   "meta-4d, deepseek-dualpipe (catalog/data/training_stacks.yaml; an assumptions file may add "
                                                   "its own)")] = None,
    emit: Annotated[str | None, typer.Option(help=f"print launch arguments: {FRAMEWORKS_HELP}")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Predict one parallel plan: step time and breakdown, tokens/s, MFU, memory, time to train."""
    args = dict(locals())
    from xpuplan.jobs.train import TrainEstimateRequest, TrainEstimateResult, train_estimate

    req = request(TrainEstimateRequest, **args)
    try:
        res = train_estimate(req)
    except InfeasibleError as exc:
        if json_ or not isinstance(exc.result, TrainEstimateResult):
            raise
        _render_estimate(exc.result)
        render_infeasible(exc)
        raise typer.Exit(3) from None
    if json_:
        print_json(res.to_dict())
        return
    _render_estimate(res)


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
    precision: Annotated[str | None, typer.Option(help="bf16 | fp16 | fp8 | fp4 (comma list to compare)")] = None,
    method: Annotated[str | None, typer.Option(help="full | lora | qlora")] = None,
    lora_rank: Annotated[int | None, typer.Option(help="adapter rank")] = None,
    lora_targets: Annotated[str | None, typer.Option(help="matrices LoRA/QLoRA adapts: comma list of q, k, v, o, "
                                                          "gate, up, down, or 'all' (default)")] = None,
    kernels: Annotated[str | None, typer.Option(help="fused | eager")] = None,
    recompute_layers: Annotated[int | None, typer.Option(help="layers per pipeline stage --recompute partial "
                                                               "recomputes in full, as your run sets it (default: the "
                                                               "fewest that fit)")] = None,
    recompute_modules: Annotated[str | None, typer.Option(help=RECOMPUTE_MODULES_HELP)] = None,
    offload_modules: Annotated[str | None, typer.Option(help=OFFLOAD_MODULES_HELP)] = None,
    power_cap_w: Annotated[float | None, typer.Option(help="board power limit per device, W (DVFS: compute "
                                                          "slows with the clock below the TDP)")] = None,
    reserve: Annotated[float | None, typer.Option(help="fraction of device memory kept free")] = None,
    uneven_pipeline: Annotated[bool, typer.Option(help="also try pp not dividing the layers (uneven first/last "
                                                       "stages)")] = True,
    tp: Annotated[str | None, typer.Option(help="restrict tp, e.g. '4,8'")] = None,
    pp: Annotated[str | None, typer.Option(help="restrict pp")] = None,
    cp: Annotated[str | None, typer.Option(help="restrict cp")] = None,
    ep: Annotated[str | None, typer.Option(help="restrict ep")] = None,
    zero: Annotated[str | None, typer.Option(help="restrict ZeRO stages, e.g. '1,3'")] = None,
    recompute: Annotated[str | None, typer.Option(help="restrict recomputation, e.g. 'selective,full'")] = None,
    micro_batch: Annotated[str | None, typer.Option(help="restrict micro-batch sizes")] = None,
    ep_overlap: Annotated[float | None, typer.Option(help="fraction of MoE all-to-all hidden for every plan "
                                                          "(default: the stack's; where the stack has an opt-in "
                                                          "overlap, plans with it are tried too, key suffix -epo)")] = None,
    scale_out_gbit: Annotated[float | None, typer.Option(help="scale-out NIC per device, Gbit/s")] = None,
    domain_size: Annotated[int | None, typer.Option(help="devices per scale-up domain")] = None,
    scenario: Annotated[str | None, typer.Option(help="training scenario YAML")] = None,
    stack: Annotated[str | None, typer.Option(help="training stack profile (default: the one the device's vendor ships: maxtext on TPUs, mindspeed-mcore on Ascend, megatron-deepspeed-gaudi on Gaudi, else megatron-core): megatron-core, nemo, "
                                                   "megatron-lm-legacy, mindspeed, mindspeed-mcore, torchtitan, fsdp, llm-foundry, deepspeed, megatron-deepspeed-gaudi, maxtext, "
                                                   "meta-4d, deepseek-dualpipe (catalog/data/training_stacks.yaml; an assumptions file may add "
                                                   "its own)")] = None,
    emit: Annotated[str | None, typer.Option(help=f"launch arguments of the best plan: {FRAMEWORKS_HELP}")] = None,
    report: Annotated[str | None, typer.Option(help="write a report: out.html (self-contained) or out.md")] = None,
    lang: Annotated[str, typer.Option(help="language of the --report: en or zh")] = "en",
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Enumerate every valid plan, evaluate them all, rank by throughput; Pareto front over device counts.
    Progress is shown over device counts; Ctrl-C stops and prints what was found."""
    args = dict(locals())
    args.pop("report")
    args.pop("lang")
    from xpuplan.i18n import catalogue
    from xpuplan.jobs.train import TrainSearchRequest, TrainSearchResult, train_search
    from xpuplan.report import report_format, write_report

    catalogue(lang)  # an unknown language is refused before the job runs (field --lang)
    if report:
        report_format(report)

    req = request(TrainSearchRequest, **args)
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    show_bar = not json_ and err_console.is_terminal
    with Progress(TextColumn("searching"), BarColumn(), TextColumn("{task.completed}/{task.total} device counts"),
                  TimeElapsedColumn(), console=err_console, transient=True, disable=not show_bar) as bar:
        task = bar.add_task("search", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            res = train_search(req, progress=progress)
        except InfeasibleError as exc:
            if report and isinstance(exc.result, TrainSearchResult):
                write_report(exc.result, report, lang)  # what was tried and why nothing fits
            if json_ or not isinstance(exc.result, TrainSearchResult):
                raise
            bar.stop()
            _render_search(exc.result)
            render_infeasible(exc)
            raise typer.Exit(3) from None
    if report:
        write_report(res, report, lang)
    if json_:
        print_json(res.to_dict())
        return
    _render_search(res)
    if report:
        console.print(f"report: {report}", highlight=False)


def _render_search(res: TrainSearchResult) -> None:
    console.print(f"[bold]{res.model}[/] on {res.hardware}: {res.plans_evaluated:,} plans evaluated, "
                  f"{res.plans_feasible:,} fit, {res.elapsed_s:.2f} s; efficiency: {res.efficiency_source}"
                  f"{_stack_id(res)}",
                  highlight=False)
    rows = []
    for i, e in enumerate(res.plans, 1):
        rows.append([i, e.n_devices, e.key, e.tokens_per_s, e.tokens_per_s_per_device, f"{e.mfu:.1%}", e.step_time_s,
                     e.memory["total_bytes"] / units.GB, _days(e.time_to_train_s)])
    console.print(table("best plans", ["#", "devices", "plan", "tokens/s", "tok/s/dev", "MFU", "step s", "mem GB",
                                       "time to train"], rows))
    for n in (res.plans[0].notes if res.plans else []):
        console.print(f"[yellow]note (plan 1):[/] {n}", highlight=False)
    if len(res.device_counts) > 1 and res.pareto:
        console.print(table("Pareto front: time vs devices", ["devices", "plan", "tokens/s", "time to train"],
                            [[p["n_devices"], p["key"], p["tokens_per_s"], _days(p["time_to_train_s"])]
                             for p in res.pareto]))
    if res.interrupted:
        console.print(f"[yellow]interrupted:[/] {res.counts_done} of {len(res.device_counts)} device counts searched; "
                      "the plans above are the best found so far", highlight=False)
    for a in res.advice:
        if a.kind == "uneven_pipeline":
            console.print(f"hint: {a.message}", highlight=False)
    _print_band(res.uncertainty, "plan 1: ")
    print_caveats(res.used)
    if res.launch is not None:
        console.print(res.launch["text"], highlight=False, markup=False, soft_wrap=True)
