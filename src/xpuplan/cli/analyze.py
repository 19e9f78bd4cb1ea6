"""``xpuplan memory``, ``xpuplan flops`` and ``xpuplan roofline``: the analytic core from the shell."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from xpuplan import units
from xpuplan.catalog import load_catalog
from xpuplan.cli.common import cli_command, console, fail, print_json, table
from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.perf.efficiency import efficiency_for
from xpuplan.perf.flops import flops_summary, flops_training_total
from xpuplan.perf.memory import STATE_RECIPES, inference_memory, training_memory
from xpuplan.perf.ops import head_ops, layer_ops
from xpuplan.perf.roofline import cost_adam_step, cost_elementwise, cost_gemm, op_time
from xpuplan.units import format_bytes, format_count

memory_app = typer.Typer(help="Memory per device for training/fine-tuning or inference.", no_args_is_help=True)

DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")


def _check_dtype(value: str, field: str, allowed: tuple[str, ...] = DTYPES) -> str:
    if value not in allowed:
        raise UserInputError(f"expected one of {', '.join(allowed)}, got {value!r}", field=field)
    return value


def _positive(field: str, value: int) -> int:
    if value <= 0:
        raise UserInputError(f"must be a positive integer, got {value}", field=field)
    return value


def _gb(x: float) -> float:
    return x / units.GB


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
    zero: Annotated[int, typer.Option(help="ZeRO stage 0-3 (3 = FSDP full shard)")] = 1,
    recompute: Annotated[str, typer.Option(help="none | selective | full")] = "selective",
    recipe: Annotated[str, typer.Option(help=f"optimizer-state recipe: {', '.join(STATE_RECIPES)}")] = "bf16-adam",
    method: Annotated[str, typer.Option(help="full | lora | qlora")] = "full",
    lora_rank: int = 16,
    reserve: Annotated[float, typer.Option(help="fraction of device memory kept free")] = 0.05,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Weights, gradients, optimizer states and activations per device."""
    for f, v in (("seq", seq), ("micro_batch", micro_batch), ("tp", tp), ("pp", pp), ("dp", dp), ("cp", cp), ("ep", ep), ("vpp", vpp)):
        _positive(f, v)
    if recompute not in ("none", "selective", "full"):
        raise UserInputError("expected none, selective or full", field="recompute")
    if method not in ("full", "lora", "qlora"):
        raise UserInputError("expected full, lora or qlora", field="method")
    if not 0 <= reserve < 1:
        raise UserInputError("must be in [0, 1)", field="reserve")
    m = get_model(model)
    if m.n_layers % pp:
        raise UserInputError(f"pp ({pp}) must divide the model's {m.n_layers} layers", field="pp")
    mem = training_memory(m, seq_len=seq, micro_batch=micro_batch, tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vpp=vpp,
                          zero_stage=zero, recompute=recompute, recipe=recipe, method=method,  # type: ignore[arg-type]
                          lora_rank=lora_rank)
    out: dict[str, object] = {"model": m.id, "method": method, "recipe": recipe,
                              "plan": {"tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "vpp": vpp, "zero_stage": zero,
                                       "recompute": recompute, "seq_len": seq, "micro_batch": micro_batch},
                              "bytes_per_device": mem.to_dict()}
    dev = load_catalog().get(hw) if hw else None
    if dev:
        usable = dev.memory_bytes * (1 - reserve)
        out.update({"hardware": dev.id, "device_memory_bytes": dev.memory_bytes, "fits": mem.total <= usable,
                    "headroom_bytes": usable - mem.total})
    if json_:
        print_json(out)
        return
    rows = [[k.replace("_", " "), format_bytes(v)] for k, v in mem.to_dict().items()
            if k not in ("params_on_device", "trainable_params_on_device")]
    rows.append(["params on device", format_count(mem.params_on_device)])
    rows.append(["trainable params on device", format_count(mem.trainable_params_on_device)])
    console.print(table(f"training memory per device — {m.id}, {method}, {recipe}, tp{tp} pp{pp} dp{dp} cp{cp} ep{ep} zero{zero}, "
                        f"recompute {recompute}, seq {seq} x mb {micro_batch}", ["part", "bytes"], rows))
    if dev:
        verdict = "[green]fits[/]" if out["fits"] else "[red]does not fit[/]"
        console.print(f"{dev.id}: {format_bytes(dev.memory_bytes)} per device ({reserve:.0%} reserve) -> {verdict}")


@memory_app.command("infer")
@cli_command
def memory_infer(
    model: Annotated[str, typer.Option(help="model id, alias or config.json path")],
    hw: Annotated[str | None, typer.Option(help="device to check the fit against (finds the smallest TP if --tp is not given)")] = None,
    dtype: Annotated[str, typer.Option(help="weight dtype")] = "bf16",
    kv_dtype: Annotated[str, typer.Option(help="KV-cache dtype")] = "bf16",
    batch: Annotated[int, typer.Option(help="concurrent sequences")] = 1,
    context: Annotated[int, typer.Option(help="tokens per sequence (prompt + output)")] = 4096,
    tp: Annotated[int | None, typer.Option(help="tensor-parallel devices per replica")] = None,
    pp: int = 1,
    reserve: float = 0.05,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Weights, KV cache and workspace per device for serving."""
    _check_dtype(dtype, "dtype")
    _check_dtype(kv_dtype, "kv_dtype", ("fp32", "bf16", "fp16", "fp8", "int8", "int4"))
    _positive("batch", batch)
    _positive("context", context)
    _positive("pp", pp)
    if tp is not None:
        _positive("tp", tp)
    m = get_model(model)
    dev = load_catalog().get(hw) if hw else None
    chosen_tp = tp or 1
    if dev and tp is None:
        usable = dev.memory_bytes * (1 - reserve)
        chosen_tp = 0
        t = 1
        while t <= 1024:
            if inference_memory(m, weight_dtype=dtype, kv_dtype=kv_dtype, batch=batch, context=context, tp=t, pp=pp).total <= usable:
                chosen_tp = t
                break
            t *= 2
        if not chosen_tp:
            raise fail(f"{m.id} with batch {batch} x {context} tokens does not fit on up to 1024 {dev.id} per replica")
    mem = inference_memory(m, weight_dtype=dtype, kv_dtype=kv_dtype, batch=batch, context=context, tp=chosen_tp, pp=pp)
    out: dict[str, object] = {"model": m.id, "weight_dtype": dtype, "kv_dtype": kv_dtype, "batch": batch, "context": context,
                              "tp": chosen_tp, "pp": pp, "bytes_per_device": mem.to_dict(),
                              "bytes_per_replica": {"weights": mem.weights * chosen_tp * pp, "kv_cache_total": mem.kv_bytes_per_token * batch * context * chosen_tp * pp}}
    if dev:
        usable = dev.memory_bytes * (1 - reserve)
        out.update({"hardware": dev.id, "fits": mem.total <= usable, "devices_per_replica": chosen_tp * pp,
                    "headroom_bytes": usable - mem.total,
                    "max_batch_at_context": int(max(0.0, (usable - mem.total + mem.kv_cache) // max(1.0, mem.kv_bytes_per_token * context)))})
    if json_:
        print_json(out)
        return
    rows = [[k.replace("_", " "), format_bytes(v) if k != "kv_bytes_per_token" else f"{v / 1e3:,.1f} kB"] for k, v in mem.to_dict().items()]
    console.print(table(f"inference memory per device — {m.id}, weights {dtype}, KV {kv_dtype}, batch {batch} x {context} tokens, "
                        f"tp{chosen_tp} pp{pp}", ["part", "bytes"], rows))
    console.print(f"weights per replica: {format_bytes(mem.weights * chosen_tp * pp)}; "
                  f"KV cache for the batch: {format_bytes(mem.kv_cache * chosen_tp * pp)} ({units.to_gib(mem.kv_cache * chosen_tp * pp):.1f} GiB)")
    if dev:
        verdict = "[green]fits[/]" if out["fits"] else "[red]does not fit[/]"
        console.print(f"{dev.id}: {format_bytes(dev.memory_bytes)} per device -> {verdict} with tp={chosen_tp}; "
                      f"max batch at this context: {out['max_batch_at_context']}")


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
    _positive("seq", seq)
    if tokens is not None and tokens <= 0:
        raise UserInputError("must be positive", field="tokens")
    if not 0 < mfu <= 1:
        raise UserInputError("must be in (0, 1]", field="mfu")
    m = get_model(model)
    s = flops_summary(m, seq)
    out: dict[str, object] = dict(s.to_dict())
    if tokens:
        total = flops_training_total(m, tokens, seq)
        out["training_tokens"] = tokens
        out["training_flops_total"] = total
        out["training_flops_6nd"] = 6.0 * s.params_active * tokens
        out["petaflop_days"] = total / (units.PFLOPS * units.DAY)
        if hw:
            dev = load_catalog().get(hw)
            out["hardware"] = dev.id
            out["device_days_at_mfu"] = total / (dev.peak_flops("bf16") * mfu) / units.DAY
    if json_:
        print_json(out)
        return
    rows = [
        ["parameters (total / active)", f"{format_count(s.params_total)} / {format_count(s.params_active)}"],
        ["forward FLOP per token", f"{s.forward_per_token:.3e}"],
        ["training FLOP per token (model, 3x fwd)", f"{s.training_per_token:.3e}"],
        ["  with full recompute (hardware)", f"{s.training_per_token_full_recompute:.3e}"],
        ["  6N approximation", f"{s.six_n_per_token:.3e} ({(s.six_n_per_token / s.training_per_token - 1) * 100:+.1f}%)"],
        ["attention share of forward", f"{s.attention_share:.1%}"],
        [f"prefill FLOP per {seq}-token prompt", f"{s.prefill_per_sequence:.3e}"],
        [f"decode FLOP per token at context {seq}", f"{s.decode_per_token:.3e}"],
    ]
    if tokens:
        rows += [["training FLOP total", f"{out['training_flops_total']:.3e} ({out['petaflop_days']:,.0f} PF-days)"]]
        if "device_days_at_mfu" in out:
            rows += [[f"{out['hardware']} device-days at MFU {mfu:.0%}", f"{out['device_days_at_mfu']:,.0f}"]]
    console.print(table(f"FLOPs — {m.id}, seq {seq} (causal attention counted exactly)", ["quantity", "value"], rows))


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
    _check_dtype(dtype, "dtype")
    dev = load_catalog().get(hw)
    eff = efficiency_for(dev)
    if model:
        mm = get_model(model)
        ops = layer_ops(mm, batch=_positive("batch", batch), q_len=_positive("q_len", q_len), kv_len=_positive("kv_len", kv_len),
                        tp=_positive("tp", tp), dtype=dtype)
        if q_len == 1 or q_len == kv_len:
            ops += head_ops(mm, rows=batch, tp=tp, dtype=dtype)
        title = f"one layer of {mm.id} on {dev.id}: batch {batch}, {q_len} new token(s), {kv_len} keys, {dtype}, tp{tp}"
    elif elements is not None:
        ops = [cost_elementwise(_positive("elements", elements), dtype=dtype, name="elementwise (e.g. ReLU)")]
        title = f"elementwise op on {dev.id}"
    elif adam_params is not None:
        if adam_params <= 0:
            raise UserInputError("must be positive", field="adam_params")
        ops = [cost_adam_step(adam_params)]
        title = f"optimizer step on {dev.id} (fp32 master, moments and gradients)"
    elif m and n and k:
        ops = [cost_gemm(_positive("m", m), _positive("n", n), _positive("k", k), dtype, name=f"GEMM {m}x{k} @ {k}x{n}")]
        title = f"GEMM on {dev.id}, {dtype}"
    else:
        raise fail("give --model, or --m/--n/--k for a GEMM, --elements for an elementwise op, or --adam-params")
    times = [op_time(op, dev, dtype, eff) for op in ops]
    if json_:
        print_json({"hardware": dev.id, "dtype": dtype, "efficiency": eff.model_dump(),
                    "ops": [t.to_dict() | {"flops": o.flops, "bytes": o.bytes} for o, t in zip(ops, times, strict=True)],
                    "total_time_s": sum(t.time_s for t in times)})
        return
    rows = [[o.name, f"{o.flops:.3g}", format_bytes(o.bytes), f"{t.intensity_flop_per_byte:.3g}", t.bound,
             f"{t.time_s * 1e6:,.1f}", f"{t.achieved_flops / 1e12:,.1f}"] for o, t in zip(ops, times, strict=True)]
    total = sum(t.time_s for t in times)
    console.print(table(title, ["op", "FLOP", "bytes", "FLOP/B", "bound", "time µs", "TFLOP/s"], rows,
                        caption=f"ridge point {times[0].ridge_flop_per_byte:.0f} FLOP/B at achievable rates "
                                f"(efficiency source: {eff.source}); total {total * 1e6:,.1f} µs"))


Kind = Literal["train", "infer"]
