"""``xpuplan infer``: latency/throughput of a replica, and devices needed for a target load.

Parses flags, calls :mod:`xpuplan.jobs.serve` (scenario merging, validation, the sweep over
devices × TP × batch) and renders tables or ``--json``; ``--emit`` prints the serve command that
realises the replica.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from xpuplan.cli.common import band_line, cli_command, console, print_caveats, print_json, request, table
from xpuplan.errors import InfeasibleError
from xpuplan.report.format import fmt_number
from xpuplan.units import GB
from xpuplan.workload.datasets import dataset_line

app = typer.Typer(help="Inference: TTFT, TPOT, tokens/s, QPS per card, devices for a target load.", no_args_is_help=True)

Json = Annotated[bool, typer.Option("--json", help="machine-readable output")]
ScenarioOpt = Annotated[str | None, typer.Option("--scenario", help="serving scenario YAML (flags override it)")]
EmitOpt = Annotated[str | None, typer.Option("--emit", help="print the serve command(s) for the pinned release: vllm, vllm-ascend, sglang, trtllm, mindie or lmdeploy (with --disagg: prefill pool, decode pool and router)")]


def register(root: typer.Typer) -> None:
    """Add the ``infer`` sub-app to the root CLI."""
    root.add_typer(app, name="infer")


@app.command("estimate")
@cli_command
def estimate_cmd(
    model: Annotated[str | None, typer.Option(help="model id, alias or config.json path")] = None,
    hw: Annotated[str | None, typer.Option(help="device id or alias (comma-separated for several)")] = None,
    tp: Annotated[str | None, typer.Option(help="tensor-parallel size(s): 4, '1,2,4' or '1:8'")] = None,
    pp: Annotated[int | None, typer.Option(help="pipeline stages")] = None,
    ep: Annotated[int | None, typer.Option(help="expert-parallel groups (MoE)")] = None,
    etp: Annotated[int | None, typer.Option(help="MoE: ranks each routed expert is split over (default tp); below tp the "
                                            "experts go to tp/etp expert-parallel ranks inside the TP group "
                                            "(1: whole experts, vLLM's --enable-expert-parallel)")] = None,
    batch: Annotated[str | None, typer.Option(help="batch / concurrency: 64, '1,8,64', '1:256' or 'max'")] = None,
    input_len: Annotated[int | None, typer.Option("--in", help="prompt tokens (sequence length for encoders)")] = None,
    output_len: Annotated[int | None, typer.Option("--out", help="generated tokens per request")] = None,
    dataset: Annotated[str | None, typer.Option(help="benchmark dataset whose mean lengths the requests have (sharegpt), "
                                                 "counted by the model's tokenizer; --in/--out override")] = None,
    dtype: Annotated[str | None, typer.Option(help="bf16, fp16, fp8, int8 (W8A8), int8-wo, int4-wo (AWQ/GPTQ), nvfp4, mxfp4")] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype: bf16, fp16, fp8, int8")] = None,
    engine: Annotated[str | None, typer.Option(help="vllm, sglang, trtllm, lmdeploy, mindie, pytorch, tensorrt")] = None,
    mode: Annotated[str | None, typer.Option(help="static (batch starts together) or continuous (steady state)")] = None,
    memory_fraction: Annotated[float | None, typer.Option(help="device memory the engine may use (0-1]")] = None,
    ttft_ms: Annotated[float | None, typer.Option(help="TTFT SLO: also report the largest load meeting it")] = None,
    tpot_ms: Annotated[float | None, typer.Option(help="TPOT SLO: also report the largest load meeting it")] = None,
    percentile: Annotated[float | None, typer.Option(help="SLO percentile for TTFT")] = None,
    disagg: Annotated[bool, typer.Option("--disagg", help="also estimate disaggregated prefill/decode (needs an SLO)")] = False,
    spec_tokens: Annotated[int | None, typer.Option(help="speculative decoding: draft tokens per step (MTP/EAGLE/draft model)")] = None,
    spec_accept: Annotated[float | None, typer.Option(help="speculative decoding: mean tokens accepted per step, bonus included")] = None,
    spec_draft_cost: Annotated[float | None, typer.Option(help="draft cost per proposed token, fraction of a decode step (MTP/EAGLE ~ 1/layers)")] = None,
    prefix_hit_rate: Annotated[float | None, typer.Option(help="fraction of each prompt served from the prefix cache [0, 1)")] = None,
    scenario: ScenarioOpt = None,
    emit_: EmitOpt = None,
    json_: Json = False,
) -> None:
    """TTFT, TPOT, end-to-end latency, tokens/s and requests/s of one replica at a batch."""
    args = dict(locals())
    from xpuplan.jobs.serve import InferEstimateRequest, infer_estimate

    res = infer_estimate(request(InferEstimateRequest, **args))
    results, failures, is_encoder = res.results, res.infeasible, res.encoder
    m_id, in_len, out_len, dt, pp_, ep_ = res.model, res.input_len, res.output_len, res.dtype, res.pp, res.ep
    rows = [_row(r, is_encoder) for r in results]
    if json_:
        print_json(res.to_dict())
        return
    if is_encoder:
        cols = ["hardware", "tp", "batch", "latency ms", "-", "-", "QPS", "QPS/device", "-", "-", "bound", "weights GB/dev"]
        cols_keep = [0, 1, 2, 3, 6, 7, 10, 11]
        rows = [[r[i] for i in cols_keep] for r in rows]
        cols = [cols[i] for i in cols_keep]
        title = f"{m_id} (encoder): sequence length {in_len}, {dt}"
    else:
        cols = ["hardware", "tp", "batch", "TTFT ms", "TPOT ms", "e2e ms", "out tok/s", "out tok/s/dev", "req/s",
                "req/s/dev", "bound pre/dec", "weights GB/dev"]
        first = results[0]
        title = (f"{m_id}: in {in_len}, out {out_len}, {dt} (KV {first['replica']['precision']['kv_dtype']}), "
                 f"engine {first['replica']['engine']}, {first['mode']} batching")
    src = results[0].get("efficiency_source") or results[0]["replica"]["efficiency_source"]
    etp_ = f" etp={res.etp}" if res.etp is not None else ""
    console.print(table(title, cols, rows, caption=f"efficiency: {src}; pp={pp_} ep={ep_}{etp_}"))
    if res.dataset:
        console.print(f"[dim]{dataset_line(res.dataset)}[/]", highlight=False, soft_wrap=True)
    printed: set[str] = set()
    for r in results:
        if "at_slo" in r:
            s = r["at_slo"]
            p = s["point"]
            console.print(f"{r['replica']['key']}: at {_slo_text(res.slo or {})}: {s['max_requests_per_s']:.3g} req/s per replica "
                          f"({s['max_requests_per_s_per_device']:.3g} per device), {p['output_tokens_per_s']:,.0f} out tok/s, "
                          f"concurrency {p['concurrency']}, limited by {s['limited_by']}", highlight=False)
        if "disaggregated" in r:
            d = r["disaggregated"]
            console.print(f"  disaggregated: prefill {d['prefill_requests_per_s_per_replica']:.3g} req/s/replica, decode "
                          f"{d['decode_requests_per_s_per_replica']:.3g} req/s/replica -> "
                          f"{d['requests_per_s_per_device']:.3g} req/s per device (KV transfer {d['kv_transfer_s'] * 1e3:.2f} ms)",
                          highlight=False)
        for n in r.get("notes", []) or r["replica"].get("notes", []):
            if n in printed:
                continue
            console.print(f"[yellow]note:[/] {n}", highlight=False)
            printed.add(n)
    bands: set[str] = set()
    for r in results:
        u = r.get("uncertainty")
        if not u or u["family"] in bands:
            continue
        bands.add(u["family"])
        what = f"{r['replica']['key']} batch {r['batch']}: " if len(results) > 1 else ""
        rng = u["ranges"]
        if "output_tokens_per_s_per_device" in rng and "tpot_s" in rng:
            what += (f"{rng['output_tokens_per_s_per_device'][0]:,.0f} - {rng['output_tokens_per_s_per_device'][1]:,.0f}"
                     f" out tok/s/dev, TPOT {rng['tpot_s'][0] * 1e3:.1f} - {rng['tpot_s'][1] * 1e3:.1f} ms")
        line = band_line(u, what)
        if line:
            console.print(line, highlight=False, soft_wrap=True)
    for f in failures:
        console.print(f"[red]infeasible:[/] {f}", highlight=False)
    print_caveats(res.used, skip=tuple(printed))
    for text in res.commands:
        typer.echo(text)


def _ms(seconds: float) -> str:
    """A latency limit in seconds, shown in ms."""
    return f"{seconds * 1e3:g}"


def _slo_text(slo: dict[str, Any]) -> str:
    """The latency limits given, e.g. "TTFT P99 <= 500 ms and TPOT <= 50 ms" (a limit not given is not shown)."""
    parts = []
    if slo.get("ttft_s") is not None:
        parts.append(f"TTFT P{slo.get('percentile', 99.0):g} <= {_ms(slo['ttft_s'])} ms")
    if slo.get("tpot_s") is not None:
        parts.append(f"TPOT <= {_ms(slo['tpot_s'])} ms")
    return " and ".join(parts) or "no latency limit"


def _row(r: dict[str, Any], is_encoder: bool) -> list[Any]:
    rep = r["replica"]
    if is_encoder:
        return [rep.get("hardware", rep.get("device")), rep["tp"], r["batch"], f"{r['latency_s'] * 1e3:.3g}", None, None,
                r["qps"], r["qps_per_device"], None, None, r["step"].get("bound", "-"),
                f"{r['memory_per_device'].get('weights_bytes', 0) / GB:.1f}"]
    return [rep.get("hardware", rep.get("device")), rep["tp"], r["batch"], r["ttft_s"] * 1e3, r["tpot_s"] * 1e3,
            r["e2e_latency_s"] * 1e3, r["output_tokens_per_s"], r["output_tokens_per_s_per_device"], r["requests_per_s"],
            r["requests_per_s_per_device"], f"{r['prefill_step']['bound']}/{r['decode_step']['bound']}",
            f"{r['memory_per_device']['weights_bytes'] / GB:.1f}"]


def _distinct_by_dtype(reasons: list[str]) -> list[str]:
    """The last (largest-tp) reason for each precision tried: why the best attempt still failed."""
    last: dict[str, str] = {}
    for r in reasons:
        head = r.split(":", 1)[0]  # "tp=2 pp=1 fp8"
        last[head.rsplit(" ", 1)[-1]] = r
    return list(last.values())


@app.command("capacity")
@cli_command
def capacity_cmd(
    model: Annotated[str | None, typer.Option(help="model id, alias or config.json path")] = None,
    hw: Annotated[str | None, typer.Option(help="hardware options, comma-separated, or 'all'")] = None,
    qps: Annotated[float | None, typer.Option(help="target requests/s")] = None,
    ttft_ms: Annotated[float | None, typer.Option(help="TTFT limit at --percentile, ms")] = None,
    tpot_ms: Annotated[float | None, typer.Option(help="TPOT limit, ms")] = None,
    percentile: Annotated[float | None, typer.Option(help="percentile of the TTFT limit")] = None,
    input_len: Annotated[int | None, typer.Option("--in", help="mean prompt tokens")] = None,
    output_len: Annotated[int | None, typer.Option("--out", help="mean generated tokens")] = None,
    dataset: Annotated[str | None, typer.Option(help="benchmark dataset whose mean lengths the requests have (sharegpt), "
                                                 "counted by the model's tokenizer; --in/--out override")] = None,
    dtype: Annotated[str | None, typer.Option(help="precision scheme(s) to try, comma-separated (e.g. 'bf16,fp8,int4-wo')")] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype")] = None,
    engine: Annotated[str | None, typer.Option(help="serving engine (default: the device's first)")] = None,
    tp: Annotated[str | None, typer.Option(help="tensor-parallel sizes to try (default: powers of two)")] = None,
    pp: Annotated[int | None, typer.Option(help="pipeline stages (default: 1, more only if nothing fits)")] = None,
    ep: Annotated[int | None, typer.Option(help="expert-parallel groups (MoE)")] = None,
    etp: Annotated[int | None, typer.Option(help="MoE: ranks each routed expert is split over, the only split tried "
                                            "(default: tp, and 1 = expert parallelism inside the TP group)")] = None,
    memory_fraction: Annotated[float | None, typer.Option(help="device memory the engine may use (0-1]")] = None,
    disagg: Annotated[bool | None, typer.Option("--disagg/--no-disagg", help="disaggregated estimate (default: >= 30B)")] = None,
    spec_tokens: Annotated[int | None, typer.Option(help="speculative decoding: draft tokens per step (MTP/EAGLE/draft model)")] = None,
    spec_accept: Annotated[float | None, typer.Option(help="speculative decoding: mean tokens accepted per step, bonus included")] = None,
    spec_draft_cost: Annotated[float | None, typer.Option(help="draft cost per proposed token, fraction of a decode step (MTP/EAGLE ~ 1/layers)")] = None,
    prefix_hit_rate: Annotated[float | None, typer.Option(help="fraction of each prompt served from the prefix cache [0, 1)")] = None,
    scenario: ScenarioOpt = None,
    emit_: EmitOpt = None,
    report: Annotated[str | None, typer.Option(help="write a report: out.html (self-contained) or out.md")] = None,
    lang: Annotated[str, typer.Option(help="language of the --report: en or zh")] = "en",
    json_: Json = False,
) -> None:
    """Devices of each hardware option needed to serve --qps within the TTFT/TPOT SLO."""
    args = dict(locals())
    args.pop("report")
    args.pop("lang")
    from xpuplan.i18n import catalogue
    from xpuplan.jobs.serve import CapacityRequest, CapacityResult, infer_capacity
    from xpuplan.report import report_format, write_report

    catalogue(lang)  # an unknown language is refused before the job runs (field --lang)
    if report:
        report_format(report)
    try:
        plan = infer_capacity(request(CapacityRequest, **args))
    except InfeasibleError as exc:
        if report and isinstance(exc.result, CapacityResult):
            write_report(exc.result, report, lang)  # every option infeasible: the report says why
        raise
    if report:
        write_report(plan, report, lang)
    if plan.assumed_lengths and not json_:
        console.print(f"[dim]assuming {fmt_number(plan.input_len)} prompt and {fmt_number(plan.output_len)} output tokens per request "
                      "(--in/--out or --scenario to change)[/]")
    if plan.dataset and not json_:
        console.print(f"[dim]{dataset_line(plan.dataset)}[/]", highlight=False, soft_wrap=True)
    target, in_len, out_len, slo = plan.target_qps, plan.input_len, plan.output_len, plan.slo
    if json_:
        print_json(plan.to_dict())
        return
    rows = []
    for o in plan.options:
        r = o.replica
        at = o.at_target
        rows.append([o.hardware, f"tp{r['tp']} pp{r['pp']} ep{r['ep']}" + (f" etp{r['etp']}" if r.get("etp") is not None else ""),
                     r["precision"]["scheme"], r["engine"],
                     o.max_requests_per_s_per_replica, o.replicas, o.devices, at["ttft_p_s"] * 1e3 if at else None,
                     at["tpot_s"] * 1e3 if at else None, o.limited_by,
                     o.disaggregated["devices"] if o.disaggregated else (o.disaggregated_error and "infeasible")])
    console.print(table(
        f"{plan.model}: {target:g} req/s, in {fmt_number(in_len)}, out {fmt_number(out_len)}, "
        f"{_slo_text(slo).replace(' and ', ', ')}",
        ["hardware", "replica", "dtype", "engine", "req/s/replica", "replicas", "devices", f"TTFT P{slo['percentile']:g} ms",
         "TPOT ms", "limited by", "disagg devices"], rows,
        caption="devices = replicas x devices per replica; latencies at the target load spread over the replicas"))
    for o in plan.options:
        u = o.uncertainty
        if u is not None:
            lo, hi = u.ranges["devices"]
            line = band_line(u, f"{o.hardware}: {lo:,.0f} - {hi:,.0f} devices")
            if line:
                console.print(line, highlight=False, soft_wrap=True)
    for hw_id, reasons in plan.infeasible.items():
        console.print(f"[red]{hw_id}: no feasible configuration[/]", highlight=False)
        for reason in _distinct_by_dtype(reasons):
            console.print(f"  - {reason}", highlight=False, soft_wrap=True)
    print_caveats(plan.used)
    for text in plan.commands:
        typer.echo(text)
    if report:
        console.print(f"report: {report}", highlight=False)
