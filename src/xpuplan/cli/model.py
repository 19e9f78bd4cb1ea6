"""``xpuplan model``: presets and imported Hugging Face configs."""

from __future__ import annotations

from typing import Annotated

import typer

from xpuplan.cli.common import cli_command, console, print_json, table
from xpuplan.units import format_count

app = typer.Typer(help="Model architectures: presets and local config.json files.", no_args_is_help=True)


def register(root: typer.Typer) -> None:
    """Add ``model`` to the root CLI."""
    root.add_typer(app, name="model")


@app.command("list")
@cli_command
def list_(json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """All preset models with total and active parameter counts."""
    from xpuplan.jobs import catalog as jc

    res = jc.model_list()
    if json_:
        print_json(res.to_dict())
        return
    rows = []
    for m in res.models:
        kind = "MoE" if m["moe"] else ("encoder" if m["type"] == "encoder" else "dense")
        rows.append([m["id"], m["family"], m["attention"], kind, m["n_layers"], m["d_model"],
                     format_count(m["total_params"]), format_count(m["active_params"])])
    console.print(table(f"{len(res.models)} models", ["id", "family", "attention", "type", "layers", "d_model", "total",
                                                       "active"], rows))


@app.command("show")
@cli_command
def show(
    name: Annotated[str, typer.Argument(metavar="ID|PATH", help="preset id/alias or path to a config.json")],
    json_: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Architecture and parameter breakdown of one model."""
    from xpuplan.jobs import catalog as jc
    from xpuplan.jobs.context import default_context
    from xpuplan.perf.params import param_breakdown

    ctx = default_context()
    res = jc.model_show(name, ctx)
    if json_:
        print_json(res.to_dict())
        return
    m = ctx.model(name, field="ID|PATH")  # a path has no preset id to look up
    b = param_breakdown(m)
    kv = res.kv_cache_bytes_per_token_bf16  # type: ignore[attr-defined]
    console.print(f"[bold]{m.name}[/] ({m.id}) — {m.type}, {m.attention_kind}, {'MoE' if m.is_moe else 'dense'}")
    shape: list[list[object]] = [["layers", m.n_layers], ["d_model", m.d_model], ["heads / kv heads", f"{m.n_heads} / {m.kv_heads}"],
             ["head dim (qk / v)", f"{m.qk_head_dim} / {m.v_head_dim}"], ["ffn", m.ffn_dim], ["vocab", m.vocab_size],
             ["mlp", m.mlp], ["tied embeddings", m.tied_embeddings], ["max seq", m.max_seq_len],
             ["attention layers", m.attention_pattern]]
    if m.moe:
        shape += [["experts (routed / top-k / shared)", f"{m.moe.n_routed_experts} / {m.moe.top_k} / {m.moe.n_shared_experts}"],
                  ["expert ffn", m.moe.expert_ffn_dim], ["leading dense layers", m.moe.n_dense_layers],
                  ["MoE layers", m.n_moe_layers]]
    if m.mla:
        shape += [["MLA kv_lora / rope", f"{m.mla.kv_lora_rank} / {m.mla.qk_rope_head_dim}"]]
    console.print(table("shape", ["", "value"], shape))
    rows = [[k, format_count(v)] for k, v in b.to_dict().items() if v]
    if m.published:
        pub = m.published.total_params.value_b * 1e9
        rows.append(["published total", f"{format_count(pub)} ({(b.total / pub - 1) * 100:+.2f}%)"])
        if m.published.active_params:
            pa = m.published.active_params.value_b * 1e9
            rows.append(["published active", f"{format_count(pa)} ({(b.active / pa - 1) * 100:+.2f}%)"])
    console.print(table("parameters", ["component", "count"], rows))
    console.print(f"KV cache: {kv / 1e3:,.1f} kB per token (bf16)" + (
        "; local layers keep only their window, so long sequences need less (see `xpuplan memory`)"
        if m.n_local_layers else ""))
