"""``xpuplan hw``: list, show and compare catalog devices."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from xpuplan import units
from xpuplan.cli.common import cli_command, console, fmt, print_json, request, table
from xpuplan.units import GB, GB_PER_S, TFLOPS

if TYPE_CHECKING:
    from xpuplan.catalog import Device, Figure

app = typer.Typer(help="Hardware catalog: every figure with its source, date and trust.", no_args_is_help=True)



def _per(value: float | None, scale: float) -> float | None:
    """An SI value in a display unit (``None`` stays ``None``)."""
    return None if value is None else value / scale

def register(root: typer.Typer) -> None:
    """Add ``hw`` to the root CLI."""
    root.add_typer(app, name="hw")

_DISPLAY: dict[str, tuple[float, str]] = {
    "FLOP/s": (units.TFLOPS, "TFLOP/s"),
    "OP/s": (units.TFLOPS, "TOP/s"),
    "B/s": (units.GB_PER_S, "GB/s"),
    "B": (units.GB, "GB"),
    "W": (1.0, "W"),
    "USD": (1.0, "USD"),
    "USD/h": (1.0, "USD/h"),
}


def figure_text(f: Figure) -> tuple[str, str]:
    scale, unit = _DISPLAY[f.unit]
    if f.path.endswith("_mb"):
        scale, unit = units.MB, "MB"
    if f.path.endswith("_gbit_per_s_per_device"):
        scale, unit = units.GBIT, "Gbit/s"
    if f.printed_unit_key.endswith("_gib"):  # printed in binary units: show both, never one as the other
        val = f"{f.value / units.GiB:,.4g} GiB ({f.value / units.GB:,.4g} GB)"
        rng = f"{f.low / units.GiB:,.4g} – {f.high / units.GiB:,.4g} GiB" if f.is_range else ""
        return val, rng
    val = f"{f.value / scale:,.4g} {unit}"
    rng = f"{f.low / scale:,.4g} – {f.high / scale:,.4g}" if f.is_range else ""
    return val, rng


@app.command("list")
@cli_command
def list_(
    vendor: Annotated[str | None, typer.Option(help="only this vendor (e.g. NVIDIA, Huawei)")] = None,
    kind: Annotated[str | None, typer.Option(help="GPU, NPU, TPU or CPU")] = None,
    origin: Annotated[str | None, typer.Option(help="designer's country code, e.g. CN for domestic Chinese chips")] = None,
    json_: Annotated[bool, typer.Option("--json", help="machine-readable output")] = False,
) -> None:
    """List devices with headline dense figures."""
    args = dict(locals())
    from xpuplan.jobs import catalog as jc

    res = jc.hw_list(request(jc.HwListRequest, **args))
    if json_:
        print_json(res.to_dict())
        return
    rows = []
    for s in res.devices:
        rows.append([s["id"], s["vendor"], s["kind"], s.get("launch_year"), _sixteen(s),
                     _per(s["dense_fp8_flops_per_s"], TFLOPS), _per(s["dense_int8_ops_per_s"], TFLOPS),
                     _per(s["memory_bytes"], GB), _per(s["memory_bandwidth_bytes_per_s"], GB_PER_S), s["tdp_w"],
                     s["min_trust"]])
    console.print(table(
        f"{len(res.devices)} devices",
        ["id", "vendor", "kind", "year", "bf16/fp16 TFLOP/s", "fp8 TFLOP/s", "int8 TOP/s", "mem GB", "mem GB/s", "TDP W", "worst trust"],
        rows,
        caption="dense peaks only (sparse figures are never used); '(fp16)': the chip lists no bf16 peak, planners run "
                "bf16 work at its fp16 rate; `xpuplan hw show ID` for sources and ranges",
    ))


def _sixteen(s: dict) -> str | None:
    """The 16-bit peak, marked '(fp16)' for a chip that lists no bf16 figure."""
    v = s.get("dense_16bit_flops_per_s")
    if v is None:
        return None
    return fmt(v / TFLOPS) + (" (fp16)" if s.get("dense_16bit_format") == "fp16" else "")


@app.command("show")
@cli_command
def show(
    device_id: Annotated[str, typer.Argument(metavar="ID", help="id or alias, e.g. H100, 910B, MLU590")],
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Every figure of one device with its range, source and trust."""
    from xpuplan.jobs import catalog as jc
    from xpuplan.jobs.context import default_context

    ctx = default_context()
    res = jc.hw_show(device_id, ctx)
    if json_:
        print_json(res.to_dict())
        return
    d = ctx.device(res.device["id"])
    console.print(f"[bold]{d.name}[/] ({d.id}) — {d.vendor} {d.kind}, {d.architecture or ''} {d.launch_year or ''}")
    if d.aliases:
        console.print(f"aliases: {', '.join(d.aliases)}")
    rows = []
    for f in d.figures.values():
        val, rng = figure_text(f)
        rows.append([f.path, val, rng, f.trust, f.source.cite() + (f" — {f.note}" if f.note else "")])
    console.print(table("figures", ["field", "value", "range", "trust", "source / note"], rows))
    e = d.ecosystem
    console.print(f"software: {e.software_stack}; PyTorch: {e.pytorch}" + (f" ({e.pytorch_note})" if e.pytorch_note else ""))
    console.print(f"serving: {', '.join(e.serving_engines) or '-'}; training: {', '.join(e.training_frameworks) or '-'}; maturity {e.maturity}/5")
    if d.scale_up_name:
        console.print(f"scale-up: {d.scale_up_name}, domain {d.scale_up_domain}" + (f", {d.scale_up_topology}" if d.scale_up_topology else ""))
    if d.export_control or d.regions:
        console.print(f"availability: {d.export_control or ''} {d.regions or ''}")
    if d.notes:
        console.print(f"notes: {d.notes}")


_COMPARE_ROWS: list[tuple[str, str]] = [
    ("dense_tflops.fp32", "fp32"),
    ("dense_tflops.tf32", "tf32"),
    ("dense_tflops.bf16", "bf16"),
    ("dense_tflops.fp16", "fp16"),
    ("dense_tflops.fp8", "fp8"),
    ("dense_tflops.fp4", "fp4"),
    ("dense_tflops.int8", "int8"),
    ("memory.capacity_gb", "memory"),
    ("memory.bandwidth_gb_per_s", "memory bandwidth"),
    ("scale_up.bandwidth_gb_per_s_per_direction", "scale-up / direction"),
    ("scale_out.nic_gbit_per_s_per_device", "scale-out NIC"),
    ("power.tdp_w", "TDP"),
    ("price.list_usd", "list price"),
]


def _compare_value(d: Device, path: str) -> str:
    f = d.figure(path)
    if f is None:
        return "-"
    val, rng = figure_text(f)
    return f"{val} [{f.trust}]" + (f" ({rng})" if rng else "")


@app.command("compare")
@cli_command
def compare(
    ids: Annotated[list[str], typer.Argument(metavar="ID...", help="two or more ids or aliases")],
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Side-by-side figures (dense peaks, memory, links, power, price) with trust grades."""
    from xpuplan.jobs import catalog as jc
    from xpuplan.jobs.context import default_context

    ctx = default_context()
    res = jc.hw_compare(ids, ctx)
    if json_:
        print_json(res.to_dict())
        return
    devs = [ctx.device(d["id"]) for d in res.devices]
    rows = [[label] + [_compare_value(d, path) for d in devs] for path, label in _COMPARE_ROWS]
    rows.append(["ridge point (bf16)"] + [f"{d.ridge_point:.0f} FLOP/B" if d.figure("memory.bandwidth_gb_per_s") else "-" for d in devs])
    rows.append(["scale-up domain"] + [str(d.scale_up_domain) for d in devs])
    rows.append(["software"] + [d.ecosystem.software_stack for d in devs])
    rows.append(["ecosystem maturity"] + [f"{d.ecosystem.maturity}/5" for d in devs])
    console.print(table("comparison (dense peaks; [trust])", ["figure"] + [d.id for d in devs], rows))
