"""``xpuplan overview``: the built-in main job (one model, several accelerators)."""

from __future__ import annotations

from typing import Annotated

import typer

from xpuplan.cli.common import cli_command, console, print_json, table
from xpuplan.errors import UserInputError
from xpuplan.jobs.overview import DEFAULT_HARDWARE, DEFAULT_MODEL, FLAGS, overview
from xpuplan.units import DAY, GB, KWH, TFLOPS, format_count


@cli_command
def overview_cmd(
    model: Annotated[str, typer.Option(help="model id, alias or config.json path")] = DEFAULT_MODEL,
    hw: Annotated[str, typer.Option(help="comma-separated device ids or aliases")] = ",".join(DEFAULT_HARDWARE),
    qps: Annotated[float, typer.Option(help="serving load, requests/s")] = 10.0,
    in_len: Annotated[int, typer.Option("--in", help="prompt tokens per request")] = 2048,
    out_len: Annotated[int, typer.Option("--out", help="output tokens per request")] = 256,
    ttft_ms: Annotated[float, typer.Option(help="P99 time-to-first-token SLO, ms")] = 2000.0,
    tpot_ms: Annotated[float, typer.Option(help="time-per-output-token SLO, ms")] = 50.0,
    train_tokens: Annotated[float, typer.Option(help="tokens to train on")] = 1e12,
    train_devices: Annotated[int, typer.Option(help="devices for the training estimate")] = 1024,
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """What it takes to serve and to train a model on each accelerator (built-in defaults: Llama-3-70B)."""
    if len(hw) > 4096 or len(model) > 4096:
        raise UserInputError("too long (ids are at most 200 characters)", field="--hw" if len(hw) > 4096 else "--model")
    try:
        ov = overview(model, [h.strip() for h in hw.split(",") if h.strip()], qps=qps, input_len=in_len,
                      output_len=out_len, ttft_ms=ttft_ms, tpot_ms=tpot_ms, train_tokens=train_tokens,
                      train_devices=train_devices)
    except UserInputError as exc:  # name the flag typed (--in), not the argument (input_len)
        if exc.file is None and exc.field in FLAGS:
            exc.field = FLAGS[exc.field]
            exc.args = (exc.render(),)
        raise
    if json_:
        print_json(ov.to_dict())
        return
    console.print(f"[bold]{ov.model_id}[/]: {format_count(ov.total_params)} parameters "
                  f"({format_count(ov.active_params)} active), {ov.weights_bytes_bf16 / GB:,.1f} GB of bf16 weights, "
                  f"{ov.kv_bytes_per_token_bf16 / 1e3:,.1f} kB of KV cache per token")
    rows = []
    for d in ov.devices:
        s, t = d.serving, d.training
        rows.append([
            d.device_id, d.kind, None if d.memory_bytes is None else d.memory_bytes / GB,
            None if d.bf16_flops_per_s is None else d.bf16_flops_per_s / TFLOPS, d.min_trust,
            None if s is None else f"{s.devices} ({s.replicas}x tp{s.tp} {s.dtype})",
            None if s is None or s.ttft_p_s is None or s.tpot_s is None else f"{s.ttft_p_s * 1e3:,.0f} / {s.tpot_s * 1e3:,.1f}",
            None if t is None else f"{t.tokens_per_s / 1e3:,.0f}k",
            None if t is None else f"{t.mfu:.0%}",
            None if t is None or t.time_to_train_s is None else f"{t.time_to_train_s / DAY:,.1f}",
            None if t is None or t.energy_j is None else f"{t.energy_j / (1e3 * KWH):,.0f}",
        ])
    console.print(table(
        f"serving {ov.qps:g} req/s ({ov.input_len} in / {ov.output_len} out, P99 TTFT <= {ov.ttft_s * 1e3:g} ms, "
        f"TPOT <= {ov.tpot_s * 1e3:g} ms) and training on {ov.train_tokens:.3g} tokens with {ov.train_devices} devices",
        ["device", "kind", "mem GB", "bf16 TFLOP/s", "trust", "serving devices", "TTFT P99 / TPOT ms",
         "train tok/s", "MFU", "days", "energy MWh"],
        rows,
        caption="dense peaks; trust = worst grade among the device's technical figures (prices excluded); details: "
                "`xpuplan infer capacity`, `xpuplan train search`, `xpuplan hw show`",
    ))
    for d in ov.devices:
        for r in d.reasons:
            console.print(f"[yellow]{d.device_id}[/]: {r}", highlight=False)
    for d in ov.devices:
        if d.training:
            console.print(f"{d.device_id} training plan: {d.training.plan}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("overview")(overview_cmd)
