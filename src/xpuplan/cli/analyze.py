"""``xpuplan memory``, ``xpuplan flops`` and ``xpuplan roofline``: the analytic core from the shell."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import typer

from xpuplan import units
from xpuplan.cli.common import cli_command, console, print_json, render_infeasible, request, table
from xpuplan.errors import InfeasibleError
from xpuplan.workload.training import OFFLOAD_MODULES_HELP, RECOMPUTE_MODULES_HELP

if TYPE_CHECKING:
    from xpuplan.jobs.memory import MemoryInferResult, MemoryTrainResult
from xpuplan.units import DAY, PFLOPS, format_bytes, format_count

memory_app = typer.Typer(help="Memory per device for training/fine-tuning or inference.", no_args_is_help=True)

@memory_app.command("train")
@cli_command
def memory_train(
    model: Annotated[str, typer.Option(help="model id, alias or config.json path")],
    hw: Annotated[str | None, typer.Option(help="device id/alias to check the fit against")] = None,
    seq: Annotated[int, typer.Option(help="sequence length, tokens")] = 4096,
    micro_batch: Annotated[int, typer.Option(help="sequences per micro-batch")] = 1,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    cp: int = 1,
    ep: int = 1,
    vpp: int = 1,
    grad_accum: Annotated[int | None, typer.Option(help="micro-batches per step per pipeline (a plan key's ga): how "
                                                      "many are in flight with pp > 1 (default pp)")] = None,
    zero: Annotated[int | None, typer.Option(help="ZeRO stage 0-3 (3 = FSDP full shard; default 1, or the "
                                                              "stack's nearest where it has no ZeRO-1)")] = None,
    recompute: Annotated[str, typer.Option(help="none | selective | full | offload | layer_offload | partial (with --hw: the fewest layers recomputed in full that fit)")] = "selective",
    recipe: Annotated[str, typer.Option(help="optimizer-state recipe (e.g. bf16-adam, fp32-adam, fp8-adam)")] = "bf16-adam",
    method: Annotated[str, typer.Option(help="full | lora | qlora")] = "full",
    lora_rank: int = 16,
    lora_targets: Annotated[str, typer.Option(help="matrices LoRA/QLoRA adapts: comma list of q, k, v, o, gate, up, "
                                                   "down, or 'all'")] = "all",
    recompute_layers: Annotated[int | None, typer.Option(help="layers per pipeline stage --recompute partial "
                                                           "recomputes in full (default: the fewest that fit --hw)")] = None,
    recompute_modules: Annotated[str | None, typer.Option(help=RECOMPUTE_MODULES_HELP)] = None,
    offload_modules: Annotated[str | None, typer.Option(help=OFFLOAD_MODULES_HELP)] = None,
    reserve: Annotated[float, typer.Option(help="fraction of device memory kept free")] = 0.05,
    ep_overlap: Annotated[bool, typer.Option(help="Megatron-Core's MoE all-to-all overlap is on (a plan key's -epo)")] = False,
    uneven_pipeline: Annotated[bool, typer.Option(help="allow pp not dividing the layers (first and last stages "
                                                       "take the missing ones)")] = False,
    stack: Annotated[str | None, typer.Option(help="training stack profile whose conventions apply (default: the one "
                                                   "the device's vendor ships; deepseek-dualpipe holds two stages per "
                                                   "rank); see `xpuplan train search --help`")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Weights, gradients, optimizer states and activations per device (exit 3 when it does not fit --hw)."""
    args = dict(locals())
    from xpuplan.jobs.memory import MemoryTrainRequest, MemoryTrainResult
    from xpuplan.jobs.memory import memory_train as memory_train_job

    req = request(MemoryTrainRequest, **args)
    try:
        res = memory_train_job(req)
    except InfeasibleError as exc:
        if json_ or not isinstance(exc.result, MemoryTrainResult):
            raise
        _render_train(exc.result)
        render_infeasible(exc)
        raise typer.Exit(3) from None
    if json_:
        print_json(res.to_dict())
        return
    _render_train(res)


def _render_train(res: MemoryTrainResult) -> None:
    mem = res.bytes_per_device
    p = res.plan
    rows = [[k.replace("_", " "), format_bytes(v)] for k, v in mem.items()
            if k not in ("params_on_device", "trainable_params_on_device", "offload_layers", "recompute_layers")
            and not (k == "host_activations" and not v)]
    if mem.get("offload_layers"):
        rows.append(["layers offloaded to host", f"{int(mem['offload_layers'])}"])
    if p.get("offload_modules"):
        rows.append(["modules whose inputs are on the host", ", ".join(p["offload_modules"])])
    if p.get("recompute") == "partial":
        rows.append(["layers recomputed in full (busiest stage)", f"{int(mem.get('recompute_layers', 0))}"
                     + ("" if res.hardware else " (no --hw: every layer)")])
    rows.append(["params on device", format_count(mem["params_on_device"])])
    rows.append(["trainable params on device", format_count(mem["trainable_params_on_device"])])
    method = (res.method if res.lora is None else
              f"{res.method} (rank {res.lora['rank']} on {'+'.join(res.lora['targets'])})")
    console.print(table(f"training memory per device — {res.model}, {method}, {res.recipe}, tp{p['tp']} pp{p['pp']} "
                        f"dp{p['dp']} cp{p['cp']} ep{p['ep']} zero{p['zero_stage']}, recompute {p['recompute']}, "
                        f"seq {p['seq_len']} x mb {p['micro_batch']}, stack {p.get('stack')}"
                        + (" (DualPipe: two stages per rank)" if p.get("pipeline_schedule") == "dualpipe" else ""),
                        ["part", "bytes"], rows))
    if res.hardware:
        verdict = "[green]fits[/]" if res.fits else "[red]does not fit[/]"
        console.print(f"{res.hardware}: {format_bytes(res.device_memory_bytes or 0)} per device, "
                      f"{format_bytes(res.usable_bytes or 0)} usable -> {verdict}")


@memory_app.command("infer")
@cli_command
def memory_infer(
    model: Annotated[str, typer.Option(help="model id, alias or config.json path")],
    hw: Annotated[str | None, typer.Option(help="device to check the fit against (finds the smallest TP if --tp is not given)")] = None,
    dtype: Annotated[str, typer.Option(help="weight dtype: fp32, bf16, fp16, fp8, int8, int4, fp4 (NVFP4), nvfp4, mxfp4")] = "bf16",
    kv_dtype: Annotated[str, typer.Option(help="KV-cache dtype")] = "bf16",
    batch: Annotated[int, typer.Option(help="concurrent sequences")] = 1,
    context: Annotated[int | None, typer.Option(help="tokens per sequence (prompt + output); default 4096, or the "
                                                    "model's context when shorter")] = None,
    tp: Annotated[int | None, typer.Option(help="tensor-parallel devices per replica")] = None,
    pp: int = 1,
    engine: Annotated[str | None, typer.Option(help="serving engine whose memory rules apply (with --hw)")] = None,
    reserve: Annotated[float | None, typer.Option(help="fraction of device memory kept free (default: the engine's)")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Weights, KV cache and workspace per device for serving; with --hw the serving planner's verdict
    (the same check as `infer estimate`; exit 3 when it does not fit)."""
    args = dict(locals())
    from xpuplan.jobs.memory import MemoryInferRequest, MemoryInferResult
    from xpuplan.jobs.memory import memory_infer as memory_infer_job

    req = request(MemoryInferRequest, **args)
    try:
        res = memory_infer_job(req)
    except InfeasibleError as exc:
        if json_ or not isinstance(exc.result, MemoryInferResult):
            raise
        _render_infer(exc.result)
        render_infeasible(exc)
        raise typer.Exit(3) from None
    if json_:
        print_json(res.to_dict())
        return
    _render_infer(res)


def _render_infer(res: MemoryInferResult) -> None:
    mem = res.bytes_per_device
    rows = [[k.replace("_", " "), format_bytes(v) if k != "kv_bytes_per_token" else f"{v / 1e3:,.1f} kB"]
            for k, v in mem.items()]
    console.print(table(f"inference memory per device — {res.model}, weights {res.weight_dtype}, KV {res.kv_dtype}, "
                        f"batch {res.batch} x {res.context} tokens, tp{res.tp} pp{res.pp}", ["part", "bytes"], rows))
    kv_total = mem["kv_cache"] * res.tp * res.pp
    console.print(f"weights per replica: {format_bytes(res.bytes_per_replica['weights'])}; "
                  f"KV cache for the batch: {format_bytes(kv_total)} ({units.to_gib(kv_total):.1f} GiB)")
    if res.hardware:
        verdict = "[green]fits[/]" if res.fits else "[red]does not fit[/]"
        console.print(f"{res.hardware} ({res.engine}, {format_bytes(res.usable_bytes or 0)} usable per device) -> "
                      f"{verdict} with tp={res.tp}; max batch at this context: {res.max_batch_at_context}")


@cli_command
def flops(
    model: Annotated[str, typer.Option(help="model id, alias or config.json path")],
    seq: Annotated[int, typer.Option(help="sequence length, tokens")] = 2048,
    tokens: Annotated[float | None, typer.Option(help="training tokens (adds total training FLOP)")] = None,
    hw: Annotated[str | None, typer.Option(help="device: adds device-days at a given MFU")] = None,
    mfu: Annotated[float, typer.Option(help="model FLOPs utilisation used with --hw")] = 0.4,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """FLOPs per token (forward, training with and without recompute), prefill and decode."""
    args = dict(locals())
    from xpuplan.jobs import catalog as jc

    res = jc.flops(request(jc.FlopsRequest, **args))
    out = res.to_dict()
    if json_:
        print_json(out)
        return
    s = res
    m_id = res.model
    rows = [
        ["parameters (total / active)", f"{format_count(out['params_total'])} / {format_count(out['params_active'])}"],
        ["forward FLOP per token", f"{out['forward_per_token']:.3e}"],
        ["training FLOP per token (model, 3x fwd)", f"{out['training_per_token']:.3e}"],
        ["  with full recompute (hardware)", f"{out['training_per_token_full_recompute']:.3e}"],
        ["  6N approximation", f"{out['six_n_per_token']:.3e} "
                               f"({(out['six_n_per_token'] / out['training_per_token'] - 1) * 100:+.1f}%)"],
        ["attention share of forward", f"{out['attention_share']:.1%}"],
        [f"prefill FLOP per {seq}-token prompt", f"{out['prefill_per_sequence']:.3e}"],
        [f"decode FLOP per token at context {seq}", f"{out['decode_per_token']:.3e}"],
    ]
    if tokens:
        rows += [["training FLOP total", f"{out['training_flops_total']:.3e} ({out['training_flops_total'] / (PFLOPS * DAY):,.0f} PF-days)"]]
        if out.get("device_time_s_at_mfu") is not None:
            rows += [[f"{out['hardware']} device-days at MFU {mfu:.0%}", f"{out['device_time_s_at_mfu'] / DAY:,.0f}"]]
    console.print(table(f"FLOPs — {m_id}, seq {seq} (causal attention counted exactly)", ["quantity", "value"], rows))


@cli_command
def roofline(
    hw: Annotated[str, typer.Option(help="device id or alias")],
    model: Annotated[str | None, typer.Option(help="list one layer's ops for this model")] = None,
    batch: Annotated[int, typer.Option(help="sequences (with --model), or GEMM rows m")] = 1,
    q_len: Annotated[int, typer.Option(help="new tokens per sequence (1 = decode)")] = 1,
    kv_len: Annotated[int, typer.Option(help="keys attended (context)")] = 2048,
    m: Annotated[int | None, typer.Option(help="GEMM rows (tokens)")] = None,
    n: Annotated[int | None, typer.Option(help="GEMM output features")] = None,
    k: Annotated[int | None, typer.Option(help="GEMM input features")] = None,
    elements: Annotated[int | None, typer.Option(help="elementwise op (e.g. ReLU) over this many elements")] = None,
    adam_params: Annotated[float | None, typer.Option(help="fused Adam step over this many parameters (on this device)")] = None,
    dtype: str = "bf16",
    tp: int = 1,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Compute- vs memory-bound time of a GEMM, an elementwise op, or a model layer's ops."""
    args = dict(locals())
    from xpuplan.jobs import catalog as jc

    res = jc.roofline(request(jc.RooflineRequest, **args))
    if json_:
        print_json(res.to_dict())
        return
    rows = [[o["name"], f"{o['flops']:.3g}", format_bytes(o["bytes"]), f"{o['intensity_flop_per_byte']:.3g}",
             o["bound"], f"{o['time_s'] * 1e6:,.1f}", f"{o['achieved_flops'] / 1e12:,.1f}"] for o in res.ops]
    console.print(table(res.title, ["op", "FLOP", "bytes", "FLOP/B", "bound", "time µs", "TFLOP/s"], rows,
                        caption=f"ridge point {res.ops[0]['ridge_flop_per_byte']:.0f} FLOP/B at achievable rates "
                                f"(efficiency source: {res.efficiency.get('source')}); total "
                                f"{res.total_time_s * 1e6:,.1f} µs"))


Kind = Literal["train", "infer"]


def register(root: typer.Typer) -> None:
    """Add ``memory``, ``flops`` and ``roofline`` to the root CLI."""
    root.add_typer(memory_app, name="memory")
    root.command("flops")(flops)
    root.command("roofline")(roofline)
