"""Sizing: how many devices of each kind serve a target request rate within a latency SLO.

For every hardware option: enumerate replica configurations (tp over the powers of two the model's
heads allow, up to the scale-up domain; for MoE models TP-only, attention-DP + EP and EP-inside-TP layouts,
:func:`candidate_layouts`; pp only when nothing fits one domain; the precision schemes asked for), prune those that
do not fit or cannot meet the SLO, evaluate the largest rate per replica
at the SLO (:func:`xpuplan.serve.slo.throughput_at_slo`), and keep the configuration that needs the
fewest devices (ties: more headroom, then lower TTFT). Devices = replicas × devices per replica,
replicas = ceil(target / rate per replica). Cost-free: the cost planner prices the answer.

For large models a disaggregated prefill/decode estimate (same device kind, the chosen replica for
both pools) is reported beside the co-located one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from xpuplan.catalog.device import Device
from xpuplan.errors import InfeasibleError, UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.links import PCIE_SERVER_DEVICES
from xpuplan.perf.params import param_breakdown
from xpuplan.serve import validity
from xpuplan.serve.disagg import DisaggEstimate, estimate_disagg
from xpuplan.serve.replica import Replica, check_parallelism, make_replica
from xpuplan.serve.slo import SLO, LoadPoint, SLOResult, load_point, throughput_at_slo

#: Models at least this large (total parameters) get a disaggregated estimate by default: below it a
#: replica fits one or two devices and splitting prefill from decode rarely pays (DistServe and
#: Splitwise evaluate 13B-175B models).
DISAGG_MIN_PARAMS: float = 30e9

#: Largest pipeline depth tried when a model does not fit one scale-up domain.
MAX_PP: int = 8


@dataclass(frozen=True)
class CapacityOption:
    """Best configuration on one hardware kind for the target load."""

    hardware: str
    replica: dict[str, Any]
    rate_per_replica: float
    replicas: int
    devices: int
    limited_by: str
    at_target: LoadPoint | None
    disagg: DisaggEstimate | None = None
    disagg_error: str | None = None
    replica_obj: Replica | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"hardware": self.hardware, "replica": self.replica,
                "max_requests_per_s_per_replica": self.rate_per_replica, "replicas": self.replicas,
                "devices": self.devices, "limited_by": self.limited_by,
                "at_target": None if self.at_target is None else self.at_target.to_dict(),
                "disaggregated": None if self.disagg is None else self.disagg.to_dict(),
                "disaggregated_error": self.disagg_error}


@dataclass(frozen=True)
class CapacityPlan:
    """Options sorted by devices needed; hardware with no feasible configuration and why."""

    model: str
    target_qps: float
    input_len: float
    output_len: float
    slo: SLO
    options: list[CapacityOption]
    infeasible: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "target_qps": self.target_qps, "input_len": self.input_len,
                "output_len": self.output_len, "slo": self.slo.to_dict(),
                "options": [o.to_dict() for o in self.options], "infeasible": self.infeasible}


def candidate_tps(model: ModelArch, device: Device, tps: list[int] | None = None) -> list[int]:
    """Tensor-parallel sizes to try: the given ones, else powers of two up to the scale-up domain
    (``PCIE_SERVER_DEVICES`` for PCIe-only cards) that divide the heads."""
    if tps:
        return tps
    limit = device.scale_up_domain if device.scale_up_bandwidth else PCIE_SERVER_DEVICES
    out, t = [], 1
    while t <= limit:
        try:
            check_parallelism(model, t, 1, 1)
            out.append(t)
        except UserInputError:
            pass
        t *= 2
    return out or [1]


def candidate_eps(model: ModelArch, device: Device, tp: int, ep: int | None = None) -> list[int]:
    """MoE serving layouts to try at ``tp``: the given ``ep``; else for MoE models TP only (ep = 1:
    experts split over TP, attention over TP) and attention-DP + EP (ep groups of tp devices:
    attention and dense weights replicated per group, experts split over ep·tp) for every power of
    two ep that divides the routed experts with tp·ep inside the scale-up domain. Dense models: 1."""
    if ep is not None:
        return [ep]
    if model.moe is None:
        return [1]
    limit = device.scale_up_domain if device.scale_up_bandwidth else PCIE_SERVER_DEVICES
    out, e = [1], 2
    while tp * e <= limit and model.moe.n_routed_experts % e == 0:
        out.append(e)
        e *= 2
    return out


#: Engines (profile ids) whose launch options express expert parallelism inside the TP group (``serve.emit``):
#: vLLM's --enable-expert-parallel, SGLang's --ep-size, TensorRT-LLM's --ep_size, MindIE's model config. The
#: search does not offer the layout on the others (LMDeploy runs EP only with attention-DP).
EP_IN_TP_ENGINES: Final = frozenset({"vllm", "sglang", "trtllm", "tensorrt", "mindie"})


def candidate_layouts(model: ModelArch, device: Device, tp: int, ep: int | None = None,
                      etp: int | None = None) -> list[tuple[int, int | None]]:
    """(ep, etp) MoE layouts to try at ``tp``: :func:`candidate_eps` with the experts split like the rest of the
    model (etp None), and, for an MoE model at tp > 1 whose routed experts tp divides (when ``ep`` is not given),
    expert parallelism inside the TP group: whole experts over the tp ranks, attention over tp (etp 1; vLLM's
    --enable-expert-parallel). Wider expert GEMMs against a step that waits for the busiest rank: which wins
    depends on the batch (``perf.ops.busiest_rank_copies``). A given ``etp`` is the only split tried (with the
    given ep, else 1)."""
    if etp is not None:
        return [(ep or 1, etp)]
    out: list[tuple[int, int | None]] = [(e, None) for e in candidate_eps(model, device, tp, ep)]
    if ep is None and model.moe is not None and tp > 1 and model.moe.n_routed_experts % tp == 0:
        out.append((1, 1))
    return out


def best_on_device(model: ModelArch, device: Device, qps: float, input_len: float, output_len: float, slo: SLO, *,
                   dtypes: list[str], engine: str | None = None, kv_dtype: str | None = None,
                   tps: list[int] | None = None, pp: int | None = None, ep: int | None = None,
                   memory_fraction: float | None = None, ttft_input_len: float | None = None,
                   input_lengths: list[tuple[float, float]] | None = None, etp: int | None = None,
                   **serving: Any) -> tuple[tuple[Replica, SLOResult] | None, list[str]]:
    """(best replica and its SLO result, or None; reasons the rejected candidates failed)."""
    reasons: list[str] = []
    best: tuple[Replica, SLOResult] | None = None
    best_key: tuple[float, ...] | None = None
    pps = [pp] if pp else [1]
    tried_pp = False
    while True:
        for p in pps:
            for dt in dtypes:
                layouts = [(t_, e_, x_) for t_ in candidate_tps(model, device, tps)
                           for e_, x_ in candidate_layouts(model, device, t_, ep, etp)]
                for t, e, x in layouts:
                    where = f"tp={t} pp={p}" + (f" ep={e}" if e > 1 else "") + (f" etp={x}" if x is not None else "")
                    try:
                        rep = make_replica(model, device, tp=t, pp=p, ep=e, etp=x, dtype=dt, kv_dtype=kv_dtype,
                                           engine=engine, memory_fraction=memory_fraction, **serving)
                        if x is not None and etp is None and rep.engine.id not in EP_IN_TP_ENGINES:
                            continue  # searched, not asked for: an engine that cannot run it is not offered it
                        res = throughput_at_slo(rep, input_len, output_len, slo, ttft_input_len=ttft_input_len,
                                                input_lengths=input_lengths)
                    except InfeasibleError as exc:
                        reasons.append(f"{where} {dt}: {'; '.join(exc.reasons) or exc}")
                        continue
                    except UserInputError as exc:
                        reasons.append(f"{where} {dt}: {exc.render()}")
                        continue
                    replicas = math.ceil(qps / res.max_rate)
                    key = (replicas * rep.n_devices, -res.max_rate / rep.n_devices, res.point.ttft_p_s)
                    if best_key is None or key < best_key:
                        best, best_key = (rep, res), key
        if best is not None or pp or tried_pp:
            break
        # nothing fits one scale-up domain: try pipeline stages across domains
        tried_pp = True
        pps = [p for p in (2, 4, MAX_PP) if p <= model.n_layers]
    return best, reasons


def size_for_qps(model: ModelArch, devices: list[Device], qps: float, input_len: float, output_len: float,
                 slo: SLO, *, dtypes: list[str] | None = None, engine: str | None = None, kv_dtype: str | None = None,
                 tps: list[int] | None = None, pp: int | None = None, ep: int | None = None,
                 memory_fraction: float | None = None, ttft_input_len: float | None = None,
                 disagg: bool | None = None, input_lengths: list[tuple[float, float]] | None = None,
                 etp: int | None = None, **serving: Any) -> CapacityPlan:
    """Devices needed per hardware option to serve ``qps`` requests/s (module doc). ``serving``:
    ``speculation`` and ``prefix_hit_rate`` for every replica (``make_replica``). ``input_lengths``:
    (length, probability) nodes of the prompt-length distribution for the prompt queue (M/G/1)."""
    validity.positive_rate("qps", qps)
    validity.positive_length("input_len", input_len)
    validity.positive_length("output_len", output_len)
    if not devices:
        raise UserInputError("give at least one hardware option", field="hw")
    if model.type == "encoder":
        raise UserInputError("capacity sizing is for decoder LLMs; use `infer estimate` for encoders", field="model")
    if etp is not None:
        validity.positive_int("etp", etp)
        if model.moe is None:
            raise UserInputError(f"etp ({etp}) splits the routed experts; {model.id} is dense", field="etp")
    dtypes = dtypes or ["bf16"]
    want_disagg = disagg if disagg is not None else param_breakdown(model).total >= DISAGG_MIN_PARAMS
    options: list[CapacityOption] = []
    infeasible: dict[str, list[str]] = {}
    for dev in devices:
        found, reasons = best_on_device(model, dev, qps, input_len, output_len, slo, dtypes=dtypes, engine=engine,
                                        kv_dtype=kv_dtype, tps=tps, pp=pp, ep=ep, memory_fraction=memory_fraction,
                                        ttft_input_len=ttft_input_len, input_lengths=input_lengths, etp=etp,
                                        **serving)
        if found is None:
            infeasible[dev.id] = reasons or ["no configuration to try"]
            continue
        rep, res = found
        replicas = math.ceil(qps / res.max_rate)
        at = load_point(rep, input_len, output_len, qps / replicas, percentile=slo.percentile,
                        ttft_input_len=ttft_input_len, input_lengths=input_lengths)
        dis = None
        dis_err = None
        if want_disagg:
            try:
                dis = estimate_disagg(rep, rep, input_len, output_len, slo, target_qps=qps, ttft_input_len=ttft_input_len)
            except InfeasibleError as exc:
                dis_err = "; ".join(exc.reasons) or str(exc)
        options.append(CapacityOption(hardware=dev.id, replica=rep.to_dict(), rate_per_replica=res.max_rate,
                                      replicas=replicas, devices=replicas * rep.n_devices, limited_by=res.limited_by,
                                      at_target=at, disagg=dis, disagg_error=dis_err, replica_obj=rep))
    options.sort(key=lambda o: (o.devices, -o.rate_per_replica))
    return CapacityPlan(model=model.id, target_qps=qps, input_len=input_len, output_len=output_len, slo=slo,
                        options=options, infeasible=infeasible)
