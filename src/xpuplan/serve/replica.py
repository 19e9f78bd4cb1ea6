"""A serving replica and the time of one engine step (forward pass) on it.

A replica is one copy of a model on ``tp × pp × ep`` devices of one kind:

* ``tp`` tensor-parallel ranks split every layer's heads and MLP columns (Megatron layout), with
  one all-reduce after attention and one after the MLP (one per layer for parallel attention/MLP
  blocks such as GPT-J and Falcon);
* ``pp`` pipeline stages split the layers; ``pp`` micro-batches are kept in flight;
* ``ep`` (MoE only) splits the routed experts over ``ep`` groups of ``tp`` devices; attention runs
  data-parallel across those groups (the DP-attention + EP layout of SGLang and DeepSeek's serving
  system), so a replica has ``tp·pp·ep`` devices and two all-to-alls per MoE layer;
* ``etp`` (MoE only, ep = 1) splits each routed expert over ``etp`` of the tp ranks (default: all tp, like a
  dense MLP); below tp the experts go whole (or in etp slices) to tp/etp expert-parallel ranks inside the TP
  group while attention stays split over tp (vLLM's ``--enable-expert-parallel``, TensorRT-LLM's ``--ep_size``
  without attention-DP): the same weights per device and the same all-reduces, wider expert GEMMs, and a step
  that waits for the rank the router sends the most tokens to.

One engine step is a forward pass over a set of tokens: ``decode_seqs`` sequences adding one token
at ``decode_context`` keys, plus ``prefill_tokens`` prompt tokens (whole prompts or chunks of
``prefill_len`` tokens). The linear layers see all tokens at once (weights read once); attention is
costed separately for the decode and the prefill parts. Each operation's time is the roofline
``max(FLOP / achievable FLOP/s, bytes / achievable B/s) + kernel overhead`` of ``perf.roofline``;
then TP/EP communication, the pipeline hand-offs and the engine's per-step host overhead are added.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import lru_cache

from xpuplan.catalog.assumptions import Assumptions, default_assumptions
from xpuplan.catalog.device import Device
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.links import DeviceLinks, device_links
from xpuplan.serve import validity
from xpuplan.serve.comm import moe_dispatch_bytes, moe_uses_alltoall
from xpuplan.serve.constants import (
    ACTIVATION_BYTES,
    EngineProfile,
    default_engine,
    engine_profile,
)
from xpuplan.serve.engine_memory import MEMORY_DEFAULT_RULES
from xpuplan.serve.plan import NO_SPECULATION, ServingPlan, Speculation
from xpuplan.serve.precision import Precision, resolve_precision
from xpuplan.serve.step import step_arrays
from xpuplan.serve.validity import check_parallelism
from xpuplan.units import MiB


@dataclass(frozen=True, eq=False)
class Replica:
    """One model copy on ``tp·pp·ep`` devices; build it with :func:`make_replica` (validated)."""

    model: ModelArch
    device: Device
    precision: Precision
    engine: EngineProfile
    eff: Efficiency
    tp: int = 1
    pp: int = 1
    ep: int = 1
    etp: int | None = None
    """tensor-parallel size of each routed expert (None: tp); see :attr:`expert_tp`"""
    memory_fraction: float = 0.9
    block_size_tokens: int = 16
    max_num_seqs: int = 256
    notes: tuple[str, ...] = field(default=())
    links: DeviceLinks | None = None
    """the device's links under the assumptions the replica was built with (None: built-in link types)"""
    speculation: Speculation = NO_SPECULATION
    """speculative decoding (draft tokens, accepted tokens per step, draft cost); none by default"""
    prefix_hit_rate: float = 0.0
    """fraction of each prompt served from the prefix cache (not prefilled again)"""

    @property
    def device_links(self) -> DeviceLinks:
        """Links its collectives use (``perf.links``): those given, else from the built-in link types."""
        return self.links if self.links is not None else device_links(self.device, self.eff)

    @property
    def n_devices(self) -> int:
        return self.tp * self.pp * self.ep

    @property
    def expert_tp(self) -> int:
        """Ranks each routed expert is split over: ``etp``, else tp (the dense-MLP split)."""
        return self.tp if self.etp is None else self.etp

    @property
    def expert_ranks(self) -> int:
        """Expert-parallel ranks the routed experts are spread over: ep groups, or tp/etp inside the TP group."""
        return self.ep * self.tp // self.expert_tp

    @property
    def plan(self) -> ServingPlan:
        """The resolved :class:`~xpuplan.serve.plan.ServingPlan` of this replica (engine defaults filled in)."""
        return ServingPlan(tp=self.tp, pp=self.pp, ep=self.ep, etp=self.etp, dtype=self.precision.scheme,
                           kv_dtype=self.precision.kv_dtype, engine=self.engine.id,
                           memory_fraction=self.memory_fraction, block_size_tokens=self.block_size_tokens,
                           max_num_seqs=self.max_num_seqs, batching=self.engine.batching,
                           speculation=self.speculation, prefix_hit_rate=self.prefix_hit_rate)

    @property
    def key(self) -> str:
        """Stable candidate key, e.g. ``llama2-70b@nvidia-h100-sxm-80gb:tp4pp1ep1:fp8/kv-fp8:trtllm``."""
        p = self.precision
        etp = "" if self.etp is None else f"etp{self.etp}"
        return (f"{self.model.id}@{self.device.id}:tp{self.tp}pp{self.pp}ep{self.ep}{etp}:"
                f"{p.scheme}/kv-{p.kv_dtype}:{self.engine.id}")

    def to_dict(self) -> dict[str, object]:
        return {
            "key": self.key, "model": self.model.id, "hardware": self.device.id, "tp": self.tp, "pp": self.pp,
            "ep": self.ep, **({"etp": self.etp} if self.etp is not None else {}), "n_devices": self.n_devices,
            "precision": self.precision.to_dict(),
            "engine": self.engine.id, "memory_fraction": self.memory_fraction,
            "block_size_tokens": self.block_size_tokens, "max_num_seqs": self.max_num_seqs,
            "efficiency_source": self.eff.source, "notes": list(self.notes),
            **({"speculation": {"draft_tokens": self.speculation.draft_tokens,
                                "accepted_tokens": self.speculation.accepted_tokens,
                                "draft_cost": self.speculation.draft_cost}} if self.speculation.active else {}),
            **({"prefix_hit_rate": self.prefix_hit_rate} if self.prefix_hit_rate else {}),
        }


def _positive(name: str, value: int) -> int:
    return validity.positive_int(name, value)


def make_replica(
    model: ModelArch,
    device: Device,
    *,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    etp: int | None = None,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    engine: str | None = None,
    memory_fraction: float | None = None,
    block_size_tokens: int | None = None,
    max_num_seqs: int | None = None,
    eff: Efficiency | None = None,
    assumptions: Assumptions | None = None,
    speculation: Speculation | None = None,
    prefix_hit_rate: float = 0.0,
) -> Replica:
    """Validated :class:`Replica`. ``dtype`` is a precision scheme (bf16, fp16, fp8, int8, int8-wo,
    int4-wo or an alias); ``engine`` an engine family or name (vLLM, SGLang, TensorRT-LLM, LMDeploy,
    MindIE, PyTorch, TensorRT; None: the first the device's ecosystem lists); engine defaults fill the
    memory fraction, block size and sequence limit. Engine profiles and efficiencies (``eff``, else
    ``assumptions.efficiency(device)``) come from ``assumptions`` (None: the built-in defaults).
    ``speculation`` (speculative decoding) and ``prefix_hit_rate`` (prefix caching) are serving
    inputs of current deployments; None / 0 model neither. ``etp``: tensor-parallel size of each routed expert
    (None or tp: split like a dense MLP; below tp: expert parallelism over tp/etp ranks inside the TP group)."""
    a = assumptions or default_assumptions()
    check_parallelism(model, tp, pp, ep, etp)
    if etp == tp:
        etp = None  # the default split: one replica, one key
    if engine is None or not engine.strip():
        engine = default_engine(device.ecosystem.serving_engines, encoder=model.type == "encoder", assumptions=a)
    prof = engine_profile(engine, assumptions=a)
    notes: list[str] = []
    prof, picked = engine_device_defaults(prof, device, max_num_seqs)
    if picked:
        notes.append(picked)
    prof, prefill_first = engine_model_rules(prof, model)
    if prefill_first:
        notes.append(prefill_first)
    masked = masked_prefill_note(prof, model)
    if masked:
        notes.append(masked)
    prof, computed = engine_memory_defaults(prof, device, tp, pp, user_fraction=memory_fraction is not None)
    if computed:
        notes.append(computed)
    prec = resolve_precision(dtype, device, kv_dtype, fp8_kv_with_fp8_weights=prof.fp8_kv_with_fp8_weights)
    frac = prof.gpu_memory_fraction if memory_fraction is None else memory_fraction
    validity.check_memory_fraction(frac)
    block = prof.block_size_tokens if block_size_tokens is None else _positive("block_size", block_size_tokens)
    seqs = prof.max_num_seqs if max_num_seqs is None else _positive("max_num_seqs", max_num_seqs)
    if prec.note:
        notes.append(prec.note)
    if prof.host_s_per_sequence and not prof.async_scheduling:
        notes.append(synchronous_host_note(prof))
    validity.check_prefix_hit_rate(prefix_hit_rate)
    e = eff or engine_build_efficiency(prof, device, a)
    links = device_links(device, e, assumptions=a)
    if tp * ep > links.domain_size:  # a PCIe card's "domain" is the server's PCIe-connected cards (perf.links)
        within = "server of PCIe-connected cards" if links.topology == "pcie" else "scale-up domain"
        notes.append(f"tp·ep = {tp * ep} exceeds the {device.id} {within} ({links.domain_size}); "
                     "its collectives cross the scale-out network")
    if eff is None and prof.version is None:
        notes.extend(unversioned_build_notes(prof, device, a, e))
    if ep > 1 and model.moe is not None:
        notes.append(moe_exchange_note(prof, model, prec, ep, links))
    if etp is not None and model.moe is not None:
        ranks = tp // etp
        notes.append(f"expert parallelism inside the TP group: the {model.moe.n_routed_experts} routed experts over "
                     f"{ranks} ranks ({model.moe.n_routed_experts // ranks} each"
                     + (f", split over {etp}" if etp > 1 else ", whole") + f"), attention over tp {tp}; every rank "
                     "holds every token after the attention all-reduce, so the experts need no exchange, and a step "
                     "waits for the rank the router sends the most tokens to")
    return Replica(model=model, device=device, precision=prec, engine=prof, eff=e,
                   tp=tp, pp=pp, ep=ep, etp=etp, memory_fraction=frac, block_size_tokens=block, max_num_seqs=seqs,
                   notes=tuple(notes), links=links,
                   speculation=speculation or NO_SPECULATION, prefix_hit_rate=float(prefix_hit_rate))


def engine_families(device: Device, assumptions: Assumptions | None = None) -> set[str]:
    """Engine families (``engines.yaml`` ids) of the serving engines ``device``'s ecosystem lists in the catalog
    (names it cannot place in a family, e.g. llama.cpp or JetStream, are left out)."""
    a = assumptions or default_assumptions()
    out: set[str] = set()
    for name in device.ecosystem.serving_engines:
        try:
            out.add(a.engine(name).id)
        except UserInputError:
            continue
    return out


def engine_stack_issue(engine: EngineProfile, device: Device, catalog: Iterable[Device],
                       assumptions: Assumptions | None = None) -> str | None:
    """Why ``engine`` does not run on ``device``'s software stack, or None. The catalog says which serving engines
    each device's ecosystem runs (``ecosystem.serving_engines``; ``engines.yaml`` has no stack of its own): an engine
    family that ``catalog`` lists only for other vendors' devices, and ``device`` does not list, is built for their
    stacks (TensorRT-LLM for NVIDIA's CUDA, MindIE for Huawei's CANN). A family no device lists (plain PyTorch,
    TensorRT / ONNX Runtime) is not refused: the catalog says nothing about it."""
    if engine.id in engine_families(device, assumptions):
        return None
    vendors = sorted({d.vendor for d in catalog if engine.id in engine_families(d, assumptions)})
    if not vendors or device.vendor in vendors:
        return None
    listed = ", ".join(device.ecosystem.serving_engines) or "none"
    return (f"{engine.name} does not run on {device.id} ({device.vendor}, {device.ecosystem.software_stack}): the "
            f"catalog lists it on {', '.join(vendors)} devices only; {device.id} serves with: {listed}")


def moe_exchange_note(engine: EngineProfile, model: ModelArch, precision: Precision, ep: int,
                      links: DeviceLinks) -> str:
    """What a result says about the expert-parallel exchange it priced (``serve.comm.moe_exchange_s``)."""
    width = moe_dispatch_bytes(engine, precision)
    fmt = "16-bit" if width == ACTIVATION_BYTES else f"{width:g} B per element ({precision.scheme})"
    if moe_uses_alltoall(engine, model, ep, links):
        how = "a de-duplicated all-to-all (each token once to every rank its experts fall on)"
    else:
        how = "an all-gather of every rank's tokens and a reduce-scatter of the outputs"
    return (f"{engine.name} expert parallelism over {ep} groups: {how}, dispatch in {fmt} "
            "(engines.yaml moe_ep_exchange; an assumptions file changes it)")


def engine_model_rules(engine: EngineProfile, model: ModelArch) -> tuple[EngineProfile, str | None]:
    """The engine as it runs ``model``: a build release that turns chunked prefill off for models without
    MLA (``EngineProfile.prefill_first_non_mla``, active for the printed name) prefills whole prompts in
    steps of their own, ahead of decode, with a token budget of the model's context (the build raises
    ``max_num_batched_tokens`` to ``max_model_len`` then); a note says so. Unchanged (and None) otherwise."""
    rule = engine.prefill_first_non_mla
    if rule is None or not rule.active or model.mla is not None or not engine.chunked_prefill:
        return engine, None
    budget = max(engine.prefill_chunk_tokens, model.max_seq_len)
    changed = replace(engine, chunked_prefill=False, prefill_chunk_tokens=budget)
    return changed, (f"{engine.name} build without chunked prefill for models without MLA: whole prompts, prefilled "
                     f"before decoding, up to {budget:,} tokens per step ({rule.note})")


def masked_prefill_note(engine: EngineProfile, model: ModelArch) -> str | None:
    """What a result says when the engine release prefills fresh prompts with a kernel that computes the full
    square of attention scores (``EngineProfile.masked_prefill_attention``, applied by ``serve.step``)."""
    rule = engine.masked_prefill_attention
    if rule is None or not rule.active or model.mla is not None or model.type == "encoder":
        return None
    return (f"{engine.name} ({rule.name_contains} build) before {'.'.join(map(str, rule.before))}: a step of fresh prompts (no decode, no "
            f"cached context) computes every attention score of the square and masks it, twice a causal kernel's "
            f"work ({rule.note})")


def engine_memory_defaults(engine: EngineProfile, device: Device, tp: int, pp: int, *, user_fraction: bool = False
                           ) -> tuple[EngineProfile, str | None]:
    """The engine with the memory fraction and prefill chunk its own rule computes for ``device`` and a replica of
    ``tp`` × ``pp`` ranks (``EngineProfile.memory_defaults``: SGLang's ``server_args``; serve.engine_memory), and a
    note saying so; a fraction the user gives is kept. Unchanged (and None) for engines without such a rule."""
    if engine.memory_defaults is None:
        return engine, None
    md = MEMORY_DEFAULT_RULES[engine.memory_defaults](engine.version, device.memory_bytes / MiB, tp, pp)
    frac = engine.gpu_memory_fraction if user_fraction else md.memory_fraction
    changed = replace(engine, gpu_memory_fraction=frac, prefill_chunk_tokens=md.prefill_chunk_tokens)
    version = ".".join(str(v) for v in engine.version) if engine.version else "(current build)"
    what = (f"{md.prefill_chunk_tokens:,}-token prefill chunks" if user_fraction else
            f"mem_fraction_static {md.memory_fraction:.3f} and {md.prefill_chunk_tokens:,}-token prefill chunks")
    return changed, (f"{engine.name} {version} on {device.id} at tp{tp}·pp{pp}: {what} (its server_args defaults, "
                     f"{md.regime})")


def engine_device_defaults(engine: EngineProfile, device: Device,
                           max_num_seqs: int | None = None) -> tuple[EngineProfile, str | None]:
    """The engine with the scheduling defaults it picks on ``device`` (``device_defaults`` in
    ``engines.yaml``: vLLM from 0.9 sizes its token budget and sequence limit by the device's memory and
    name), and a note saying so; the engine unchanged and None where no such rule applies. A
    ``max_num_seqs`` the user gives replaces the picked sequence limit (the note says so)."""
    rule = engine.device_defaults
    if rule is None or not rule.applies(engine.version):
        return engine, None
    picked = rule.pick(device.name, device.kind, device.memory_bytes)
    if picked is None:
        return engine, None
    chunk, seqs = picked
    version = ".".join(str(v) for v in engine.version or ())
    if max_num_seqs is not None:
        note = (f"{engine.name} {version} on {device.id}: {chunk:,} tokens per step (the engine's default for "
                f"this device) and {max_num_seqs:,} sequences (max_num_seqs as given)")
        return replace(engine, prefill_chunk_tokens=chunk, max_num_seqs=max_num_seqs), note
    note = (f"{engine.name} {version} on {device.id}: {chunk:,} tokens per step and {seqs:,} sequences "
            f"(the engine's defaults for this device)")
    return replace(engine, prefill_chunk_tokens=chunk, max_num_seqs=seqs), note


def synchronous_host_note(engine: EngineProfile) -> str:
    """What a result says when the engine's per-request host work is not hidden under the device step."""
    since = dict(engine.min_versions).get("async_scheduling")
    later = f" (asynchronous from {'.'.join(map(str, since))})" if since else ""
    version = ".".join(map(str, engine.version or ()))
    return (f"{engine.name} {version}".strip() + f" schedules each step synchronously{later}: every running "
            f"sequence adds {engine.host_s_per_sequence * 1e6:.0f} µs of host time to a step")


def engine_build_efficiency(engine: EngineProfile, device: Device, assumptions: Assumptions) -> Efficiency:
    """The device's efficiency under ``assumptions`` for this engine build: the built-in one, except
    that fields of the device's family fitted on older builds of the engine (``build_fitted`` in
    ``engines.yaml``) take the family's prior when the printed version is the later build. A field a
    calibration, a device entry or a user override sets is a measurement of its own: left as it is."""
    family = assumptions.efficiency_family(device)
    later = [b for b in engine.build_fitted if b.family == family and b.applies(engine.version)]
    if not later:
        return assumptions.efficiency(device)
    since = " / ".join(".".join(map(str, b.from_version)) for b in later)
    return assumptions.efficiency_with_priors(device, [f for b in later for f in b.fields],
                                              f"engine build {engine.id} >= {since}")


def unversioned_build_notes(engine: EngineProfile, device: Device, assumptions: Assumptions,
                            eff: Efficiency) -> list[str]:
    """What a result says when the engine name prints no version and the device's family values were
    fitted on older builds of it (``build_fitted``): they are kept, and naming the version changes them."""
    family = assumptions.efficiency_family(device)
    if eff.source != f"family:{family}":
        return []
    return [f"{family} efficiencies ({', '.join(b.fields)}) were fitted on {engine.name} builds before "
            f"{'.'.join(map(str, b.from_version))}; name the engine with its version (e.g. '{engine.id} "
            f"{'.'.join(map(str, b.from_version))}') for a later build"
            for b in engine.build_fitted if b.family == family]


# ---------------------------------------------------------------------------------------------
# Step time
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepTime:
    """Seconds of one engine step, by part. ``compute_s``/``memory_s`` sum the roofline terms of every
    op (for the bound), ``ops_s`` is what the ops take (max of the two per op + kernel overheads)."""

    tokens: int
    compute_s: float
    memory_s: float
    ops_s: float
    kernels_s: float
    dequant_s: float
    comm_s: float
    overhead_s: float
    #: pipelined replicas: the wait for the busiest stage (the last one, with the output head; serve.step.pipeline_wait_s)
    pipeline_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.ops_s + self.dequant_s + self.comm_s + self.overhead_s + self.pipeline_s

    @property
    def bound(self) -> str:
        """What dominates the step: ``compute`` or ``memory`` (roofline terms of the ops),
        ``communication``, or ``overhead`` (kernel launches and the engine's host step)."""
        parts = {"compute": self.compute_s + self.dequant_s, "memory": self.memory_s, "communication": self.comm_s,
                 "overhead": self.kernels_s + self.overhead_s}
        return max(parts, key=lambda k: parts[k])

    def to_dict(self) -> dict[str, object]:
        return {"tokens": self.tokens, "compute_s": self.compute_s, "memory_s": self.memory_s, "ops_s": self.ops_s,
                "kernels_s": self.kernels_s, "dequant_s": self.dequant_s, "comm_s": self.comm_s,
                "overhead_s": self.overhead_s, "pipeline_s": self.pipeline_s, "total_s": self.total_s,
                "bound": self.bound}


@lru_cache(maxsize=65536)
def _step_cached(rep: Replica, decode_seqs: int, decode_context: int, prefill_tokens: int, prefill_len: int,
                 prefill_kv_len: int, sampled_rows: int, in_flight: int) -> StepTime:
    return _step(rep, decode_seqs, decode_context, prefill_tokens, prefill_len, prefill_kv_len, sampled_rows, in_flight)


def step_time(
    rep: Replica,
    *,
    decode_seqs: int = 0,
    decode_context: float = 0,
    prefill_tokens: int = 0,
    prefill_len: int | None = None,
    prefill_kv_len: int | None = None,
    sampled_rows: int | None = None,
    in_flight: int | None = None,
) -> StepTime:
    """Time of one engine step on ``rep`` (per pipeline micro-batch; all stages traversed).

    ``decode_seqs`` sequences add one token each attending ``decode_context`` keys; ``prefill_tokens``
    prompt tokens belong to prompts (or chunks) of ``prefill_len`` new tokens attending
    ``prefill_kv_len`` keys (default ``prefill_len``: whole prompts). ``sampled_rows`` rows go
    through the output head (default: the decode sequences plus the prompts completed). ``in_flight``: with
    pipeline parallelism, the micro-batches in the pipeline (default ``pp``, a full pipeline; fewer when fewer
    sequences run than there are stages): the round waits for the busiest stage (``serve.step.pipeline_wait_s``).
    """
    validity.check_step_tokens(decode_seqs, prefill_tokens)
    plen = prefill_len or prefill_tokens or 1
    pkv = max(prefill_kv_len or plen, plen)
    if sampled_rows is None:
        sampled_rows = decode_seqs + (math.ceil(prefill_tokens / plen) if prefill_tokens else 0)
    flight = rep.pp if in_flight is None else min(rep.pp, max(1, int(in_flight)))
    return _step_cached(rep, int(decode_seqs), max(1, round(decode_context)), int(prefill_tokens), int(plen),
                        int(pkv), max(1, int(sampled_rows)), flight)


def _step(rep: Replica, decode_seqs: int, decode_context: int, prefill_tokens: int, prefill_len: int,
          prefill_kv_len: int, sampled_rows: int, in_flight: int | None = None) -> StepTime:
    """One step: :func:`xpuplan.serve.step.step_arrays` (the serving step model) at one point."""
    st = step_arrays(rep, decode_seqs, decode_context, prefill_tokens, prefill_len, prefill_kv_len, sampled_rows,
                     in_flight=in_flight)
    return StepTime(tokens=int(st.tokens), compute_s=float(st.compute_s), memory_s=float(st.memory_s),
                    ops_s=float(st.ops_s), kernels_s=float(st.kernels_s), dequant_s=float(st.dequant_s),
                    comm_s=float(st.comm_s), overhead_s=float(st.overhead_s), pipeline_s=float(st.pipeline_s))
