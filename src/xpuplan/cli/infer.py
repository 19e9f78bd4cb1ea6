"""``xpuplan infer``: latency/throughput of a replica, and devices needed for a target load.

A thin front end over :mod:`xpuplan.serve`: flags (or a scenario YAML, flags winning) become a
model, replicas and a workload; results render as tables or ``--json``; ``--emit`` prints the serve
command that realises the replica.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from xpuplan.catalog import Device, load_catalog
from xpuplan.cli.common import cli_command, console, print_json, table
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.models import get_model
from xpuplan.serve import (
    SLO,
    emit,
    estimate,
    estimate_disagg,
    estimate_encoder,
    make_replica,
    max_batch,
    size_for_qps,
    throughput_at_slo,
)
from xpuplan.serve.estimate import Mode, kv_tokens_per_sequence
from xpuplan.serve.kv import max_concurrent_sequences
from xpuplan.units import GB, MS
from xpuplan.workload.serving import (
    DEFAULT_INPUT_LEN,
    DEFAULT_OUTPUT_LEN,
    ServingScenario,
    load_serving_scenario,
)
from xpuplan.workload.training import parse_int_range

app = typer.Typer(help="Inference: TTFT, TPOT, tokens/s, QPS per card, devices for a target load.", no_args_is_help=True)

Json = Annotated[bool, typer.Option("--json", help="machine-readable output")]
ScenarioOpt = Annotated[str | None, typer.Option("--scenario", help="serving scenario YAML (flags override it)")]
EmitOpt = Annotated[str | None, typer.Option("--emit", help="print the serve command: vllm, sglang, trtllm or mindie")]


def register(root: typer.Typer) -> None:
    """Add the ``infer`` sub-app to the root CLI."""
    root.add_typer(app, name="infer")


def _devices(hw: str | None, scenario: ServingScenario | None) -> list[Device]:
    cat = load_catalog()
    names = [h.strip() for h in hw.split(",") if h.strip()] if hw else (scenario.hardware if scenario else [])
    if not names:
        raise UserInputError("give --hw (a device id or alias; several separated by commas)", field="hw")
    if names == ["all"]:
        return [d for d in cat if d.kind.upper() in ("GPU", "NPU", "TPU") and d.figure("memory.bandwidth_gb_per_s")
                and d.figure("memory.capacity_gb")]
    return [cat.get(n) for n in names]


def _pick(flag: Any, scenario_value: Any, default: Any) -> Any:
    if flag is not None:
        return flag
    if scenario_value is not None:
        return scenario_value
    return default


def _load(scenario: str | None) -> ServingScenario | None:
    return load_serving_scenario(scenario) if scenario else None


def _positive_len(name: str, value: float | None) -> float:
    if value is None:
        raise UserInputError(f"give {name}", field=name.lstrip("-"))
    if value <= 0:
        raise UserInputError(f"{name} must be positive (got {value:g})", field=name.lstrip("-"))
    return value


def _ms(x: float | None) -> float | None:
    return None if x is None else x * MS


@app.command("estimate")
@cli_command
def estimate_cmd(
    model: Annotated[str | None, typer.Option(help="model id, alias or config.json path")] = None,
    hw: Annotated[str | None, typer.Option(help="device id or alias (comma-separated for several)")] = None,
    tp: Annotated[str | None, typer.Option(help="tensor-parallel size(s): 4, '1,2,4' or '1:8'")] = None,
    pp: Annotated[int | None, typer.Option(help="pipeline stages")] = None,
    ep: Annotated[int | None, typer.Option(help="expert-parallel groups (MoE)")] = None,
    batch: Annotated[str | None, typer.Option(help="batch / concurrency: 64, '1,8,64', '1:256' or 'max'")] = None,
    input_len: Annotated[int | None, typer.Option("--in", help="prompt tokens (sequence length for encoders)")] = None,
    output_len: Annotated[int | None, typer.Option("--out", help="generated tokens per request")] = None,
    dtype: Annotated[str | None, typer.Option(help="bf16, fp16, fp8, int8 (W8A8), int8-wo, int4-wo (AWQ/GPTQ)")] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype: bf16, fp16, fp8, int8")] = None,
    engine: Annotated[str | None, typer.Option(help="vllm, sglang, trtllm, lmdeploy, mindie, pytorch, tensorrt")] = None,
    mode: Annotated[str | None, typer.Option(help="static (batch starts together) or continuous (steady state)")] = None,
    memory_fraction: Annotated[float | None, typer.Option(help="device memory the engine may use (0-1]")] = None,
    ttft_ms: Annotated[float | None, typer.Option(help="TTFT SLO: also report the largest load meeting it")] = None,
    tpot_ms: Annotated[float | None, typer.Option(help="TPOT SLO: also report the largest load meeting it")] = None,
    percentile: Annotated[float | None, typer.Option(help="SLO percentile for TTFT")] = None,
    disagg: Annotated[bool, typer.Option("--disagg", help="also estimate disaggregated prefill/decode (needs an SLO)")] = False,
    scenario: ScenarioOpt = None,
    emit_: EmitOpt = None,
    json_: Json = False,
) -> None:
    """TTFT, TPOT, end-to-end latency, tokens/s and requests/s of one replica at a batch."""
    sc = _load(scenario)
    rs = sc.replica if sc else None
    m = get_model(_pick(model, sc.model if sc else None, None) or _missing("--model"))
    devices = _devices(hw, sc)
    tps = parse_int_range(tp, "tp") if tp else [_pick(None, rs.tp if rs else None, 1)]
    pp_ = _pick(pp, rs.pp if rs else None, 1)
    ep_ = _pick(ep, rs.ep if rs else None, 1)
    dt = _pick(dtype, rs.dtype if rs else None, "bf16")
    kv = _pick(kv_dtype, rs.kv_dtype if rs else None, None)
    eng = _pick(engine, rs.engine if rs else None, None)
    frac = _pick(memory_fraction, rs.memory_fraction if rs else None, None)
    traffic = sc.traffic if sc else None
    in_len = _pick(input_len, traffic.input.average if traffic else None, None)
    in_len = int(round(_positive_len("--in", in_len)))
    is_encoder = m.type == "encoder"
    out_len = int(round(_positive_len("--out", _pick(output_len, traffic.output.average if traffic else None,
                                                     1 if is_encoder else None))))
    batch_text = batch or (str(traffic.batch) if traffic and traffic.batch else "1")
    slo = SLO(ttft_s=_ms(_pick(ttft_ms, sc.slo.ttft_ms if sc else None, None)),
              tpot_s=_ms(_pick(tpot_ms, sc.slo.tpot_ms if sc else None, None)),
              percentile=_pick(percentile, sc.slo.percentile if sc else None, 99.0))
    if mode not in (None, "static", "continuous"):
        raise UserInputError(f"--mode must be static or continuous (got {mode!r})", field="mode")
    mode_: Mode | None = mode  # type: ignore[assignment]
    results: list[dict[str, Any]] = []
    rows: list[list[Any]] = []
    emitted: list[str] = []
    failures: list[str] = []
    single = len(devices) * len(tps) == 1
    for dev in devices:
        for t in tps:
            try:
                rep = make_replica(m, dev, tp=t, pp=pp_, ep=ep_, dtype=dt, kv_dtype=kv, engine=eng, memory_fraction=frac)
                batches = _batches(batch_text, _largest(rep, in_len, out_len, mode_, is_encoder))
            except InfeasibleError as exc:
                if single:
                    raise
                failures.append(f"{dev.id} tp={t}: {exc}; " + "; ".join(exc.reasons))
                continue
            fitted: list[int] = []
            for b in batches:
                try:
                    if is_encoder:
                        enc = estimate_encoder(rep, b, in_len)
                        results.append(enc.to_dict())
                        rows.append([dev.id, t, b, f"{enc.latency_s * 1e3:.3g}", None, None, enc.qps, enc.qps_per_device,
                                     None, None, enc.step.bound, f"{enc.memory.weights_bytes / GB:.1f}"])
                        continue
                    e = estimate(rep, in_len, out_len, b, mode=mode_)
                except InfeasibleError as exc:
                    if single and len(batches) == 1:
                        raise
                    failures.append(f"{dev.id} tp={t} batch {b}: {exc}; " + "; ".join(exc.reasons))
                    continue
                fitted.append(b)
                results.append(e.to_dict())
                rows.append([dev.id, t, b, e.ttft_s * 1e3, e.tpot_s * 1e3, e.e2e_latency_s * 1e3,
                             e.output_tokens_per_s, e.output_tokens_per_s_per_device, e.requests_per_s,
                             e.requests_per_s_per_device, f"{e.prefill.bound}/{e.decode.bound}",
                             f"{e.memory.weights_bytes / GB:.1f}"])
            if is_encoder or not fitted:
                continue
            if emit_:
                emitted.append(f"# {rep.key}, up to {max(fitted)} sequences\n"
                               + emit(rep, emit_, max_num_seqs=max(fitted), max_model_len=in_len + out_len))
            if slo.ttft_s or slo.tpot_s:
                try:
                    results[-1]["at_slo"] = throughput_at_slo(rep, in_len, out_len, slo).to_dict()
                    if disagg:
                        results[-1]["disaggregated"] = estimate_disagg(rep, rep, in_len, out_len, slo).to_dict()
                except InfeasibleError as exc:
                    failures.append(f"{rep.key} at the SLO: {exc}; " + "; ".join(exc.reasons))
    if not results:
        raise InfeasibleError("no configuration fits", reasons=failures)
    if emit_ and is_encoder:
        raise UserInputError("--emit writes LLM serving commands; encoders are served with TensorRT/ONNX Runtime",
                             field="emit")
    if json_:
        print_json({"model": m.id, "results": results, "infeasible": failures})
        return
    if is_encoder:
        cols = ["hardware", "tp", "batch", "latency ms", "-", "-", "QPS", "QPS/device", "-", "-", "bound", "weights GB/dev"]
        cols_keep = [0, 1, 2, 3, 6, 7, 10, 11]
        rows = [[r[i] for i in cols_keep] for r in rows]
        cols = [cols[i] for i in cols_keep]
        title = f"{m.id} (encoder): sequence length {in_len}, {dt}"
    else:
        cols = ["hardware", "tp", "batch", "TTFT ms", "TPOT ms", "e2e ms", "out tok/s", "out tok/s/dev", "req/s",
                "req/s/dev", "bound pre/dec", "weights GB/dev"]
        first = results[0]
        title = (f"{m.id}: in {in_len}, out {out_len}, {dt} (KV {first['replica']['precision']['kv_dtype']}), "
                 f"engine {first['replica']['engine']}, {first['mode']} batching")
    src = results[0].get("efficiency_source") or results[0]["replica"]["efficiency_source"]
    console.print(table(title, cols, rows, caption=f"efficiency: {src}; pp={pp_} ep={ep_}"))
    for r in results:
        if "at_slo" in r:
            s = r["at_slo"]
            p = s["point"]
            console.print(f"{r['replica']['key']}: at TTFT P{slo.percentile:g} <= {slo.to_dict()['ttft_ms']} ms and TPOT <= "
                          f"{slo.to_dict()['tpot_ms']} ms: {s['max_requests_per_s']:.3g} req/s per replica "
                          f"({s['max_requests_per_s_per_device']:.3g} per device), {p['output_tokens_per_s']:,.0f} out tok/s, "
                          f"concurrency {p['concurrency']}, limited by {s['limited_by']}", highlight=False)
        if "disaggregated" in r:
            d = r["disaggregated"]
            console.print(f"  disaggregated: prefill {d['prefill_requests_per_s_per_replica']:.3g} req/s/replica, decode "
                          f"{d['decode_requests_per_s_per_replica']:.3g} req/s/replica -> "
                          f"{d['requests_per_s_per_device']:.3g} req/s per device (KV transfer {d['kv_transfer_ms']:.2f} ms)",
                          highlight=False)
        for n in r.get("notes", []) or r["replica"].get("notes", []):
            console.print(f"[yellow]note:[/] {n}", highlight=False)
    for f in failures:
        console.print(f"[red]infeasible:[/] {f}", highlight=False)
    for text in emitted:
        typer.echo(text)


def _largest(rep: Any, in_len: int, out_len: int, mode: Mode | None, is_encoder: bool) -> Any:
    """Callable giving the largest batch that fits (the engine's sequence limit for encoders)."""
    return (lambda: rep.max_num_seqs) if is_encoder else (lambda: max_batch(rep, in_len, out_len, mode=mode))


def _batches(text: str, largest: Any) -> list[int]:
    """Batch list from '64', '1,8,64', '1:256', with 'max' standing for the largest that fits."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    out: list[int] = []
    for part in parts:
        out += [largest()] if part.casefold() == "max" else parse_int_range(part, "batch")
    if not out:
        raise UserInputError("give --batch", field="batch")
    return out


def _distinct_by_dtype(reasons: list[str]) -> list[str]:
    """The last (largest-tp) reason for each precision tried: why the best attempt still failed."""
    last: dict[str, str] = {}
    for r in reasons:
        head = r.split(":", 1)[0]  # "tp=2 pp=1 fp8"
        last[head.rsplit(" ", 1)[-1]] = r
    return list(last.values())


def _missing(flag: str) -> str:
    raise UserInputError(f"give {flag} (or a --scenario file)", field=flag.lstrip("-"))


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
    dtype: Annotated[str | None, typer.Option(help="precision scheme(s) to try, comma-separated (e.g. 'bf16,fp8,int4-wo')")] = None,
    kv_dtype: Annotated[str | None, typer.Option(help="KV-cache dtype")] = None,
    engine: Annotated[str | None, typer.Option(help="serving engine (default: the device's first)")] = None,
    tp: Annotated[str | None, typer.Option(help="tensor-parallel sizes to try (default: powers of two)")] = None,
    pp: Annotated[int | None, typer.Option(help="pipeline stages (default: 1, more only if nothing fits)")] = None,
    ep: Annotated[int | None, typer.Option(help="expert-parallel groups (MoE)")] = None,
    memory_fraction: Annotated[float | None, typer.Option(help="device memory the engine may use (0-1]")] = None,
    disagg: Annotated[bool | None, typer.Option("--disagg/--no-disagg", help="disaggregated estimate (default: >= 30B)")] = None,
    scenario: ScenarioOpt = None,
    emit_: EmitOpt = None,
    json_: Json = False,
) -> None:
    """Devices of each hardware option needed to serve --qps within the TTFT/TPOT SLO."""
    sc = _load(scenario)
    rs = sc.replica if sc else None
    m = get_model(_pick(model, sc.model if sc else None, None) or _missing("--model"))
    devices = _devices(hw, sc)
    target = _positive_len("--qps", _pick(qps, sc.traffic.qps if sc else None, None))
    traffic = sc.traffic if sc else None
    in_len = _positive_len("--in", _pick(input_len, traffic.input.average if traffic else None, DEFAULT_INPUT_LEN))
    out_len = _positive_len("--out", _pick(output_len, traffic.output.average if traffic else None, DEFAULT_OUTPUT_LEN))
    if input_len is None and output_len is None and traffic is None and not json_:
        console.print(f"[dim]assuming {DEFAULT_INPUT_LEN} prompt and {DEFAULT_OUTPUT_LEN} output tokens per request "
                      "(--in/--out or --scenario to change)[/]")
    slo = SLO(ttft_s=_ms(_pick(ttft_ms, sc.slo.ttft_ms if sc else None, None)),
              tpot_s=_ms(_pick(tpot_ms, sc.slo.tpot_ms if sc else None, None)),
              percentile=_pick(percentile, sc.slo.percentile if sc else None, 99.0))
    if slo.ttft_s is None and slo.tpot_s is None:
        raise UserInputError("give --ttft-ms and/or --tpot-ms", field="ttft_ms")
    tail_len = traffic.input.quantile(slo.percentile) if traffic and input_len is None else None
    dtypes = [d.strip() for d in dtype.split(",") if d.strip()] if dtype else [rs.dtype if rs else "bf16"]
    tps = parse_int_range(tp, "tp") if tp else ([rs.tp] if rs and rs.tp else None)
    plan = size_for_qps(m, devices, target, in_len, out_len, slo, dtypes=dtypes,
                        engine=_pick(engine, rs.engine if rs else None, None),
                        kv_dtype=_pick(kv_dtype, rs.kv_dtype if rs else None, None), tps=tps,
                        pp=_pick(pp, rs.pp if rs and rs.pp > 1 else None, None), ep=_pick(ep, rs.ep if rs else None, 1),
                        memory_fraction=_pick(memory_fraction, rs.memory_fraction if rs else None, None),
                        ttft_input_len=tail_len, disagg=disagg)
    if not plan.options:
        reasons = [f"{hw_id}: {r}" for hw_id, rs_ in plan.infeasible.items() for r in rs_[:3]]
        raise InfeasibleError(f"no hardware option serves {m.id} within the SLO", reasons=reasons)
    if json_:
        print_json(plan.to_dict())
        return
    rows = []
    for o in plan.options:
        r = o.replica
        at = o.at_target
        rows.append([o.hardware, f"tp{r['tp']} pp{r['pp']} ep{r['ep']}", r["precision"]["scheme"], r["engine"],
                     o.rate_per_replica, o.replicas, o.devices, at.ttft_p_s * 1e3 if at else None,
                     at.tpot_s * 1e3 if at else None, o.limited_by,
                     o.disagg.devices if o.disagg else (o.disagg_error and "infeasible")])
    console.print(table(
        f"{m.id}: {target:g} req/s, in {in_len:g}, out {out_len:g}, TTFT P{slo.percentile:g} <= "
        f"{slo.to_dict()['ttft_ms']} ms, TPOT <= {slo.to_dict()['tpot_ms']} ms",
        ["hardware", "replica", "dtype", "engine", "req/s/replica", "replicas", "devices", f"TTFT P{slo.percentile:g} ms",
         "TPOT ms", "limited by", "disagg devices"], rows,
        caption="devices = replicas x devices per replica; latencies at the target load spread over the replicas"))
    for hw_id, reasons in plan.infeasible.items():
        console.print(f"[red]{hw_id}: no feasible configuration[/]", highlight=False)
        for reason in _distinct_by_dtype(reasons):
            console.print(f"  - {reason}", highlight=False, soft_wrap=True)
    if emit_:
        for o in plan.options:
            rep = o.replica_obj
            assert rep is not None
            from xpuplan.serve.kv import memory_plan

            cmax = max_concurrent_sequences(rep, memory_plan(rep), kv_tokens_per_sequence(rep, in_len, out_len))
            typer.echo(f"# {rep.key} x {o.replicas} replicas\n"
                       + emit(rep, emit_, max_num_seqs=max(1, cmax), max_model_len=int(in_len + out_len)))
