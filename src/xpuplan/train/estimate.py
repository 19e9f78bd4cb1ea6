"""Estimate one training plan: typed results with step-time and memory breakdowns.

``estimate(model, cluster, plan, job)`` checks the plan's structural rules (``UserInputError``
naming the field), evaluates it with the same vectorised step model the search uses, and returns
a :class:`TrainEstimate`: step time and its breakdown, tokens/s (global and per device), MFU and
HFU, memory per device with its breakdown, time/device-hours/energy to train the job's tokens,
and feasibility with reasons. A plan that does not fit is a result (``feasible = False``), not an
exception; front ends decide whether that is an error (the CLI exits 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

import numpy as np

from xpuplan import units
from xpuplan.catalog.device import Device
from xpuplan.catalog.published import plausibility_note
from xpuplan.catalog.stacks import TrainingStack
from xpuplan.models.arch import ModelArch
from xpuplan.perf.links import PCIE_HOST_COPY_SHARE, host_copy_bytes_per_s, host_link_bytes_per_s
from xpuplan.perf.power import compute_clock_fraction_at_cap, power_profile_for
from xpuplan.perf.recompute import ordered_offload_modules, ordered_selective_modules, stack_selective_modules
from xpuplan.train import validity
from xpuplan.train.cluster import Cluster
from xpuplan.train.plan import ParallelPlan, check_plan
from xpuplan.train.step import PlanArrays, StepArrays, StepModel
from xpuplan.workload.training import TrainingJob
from xpuplan.workload.vocabulary import RECOMPUTE_MODULES


@dataclass(frozen=True)
class StepBreakdown:
    """Seconds per optimizer step, by part; the parts sum to ``step_s``. Communication terms are
    the *exposed* time (what overlap with compute does not hide)."""

    compute_s: float
    recompute_s: float
    tp_comm_s: float
    cp_comm_s: float
    ep_comm_s: float
    pp_comm_s: float
    bubble_s: float
    dp_comm_s: float
    zero3_comm_s: float
    offload_s: float
    optimizer_s: float
    overhead_s: float
    step_s: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per device (decimal), the peak estimate ``total_bytes`` vs ``usable_bytes``
    (capacity minus the reserve)."""

    weights_bytes: float
    gradients_bytes: float
    master_weights_bytes: float
    optimizer_states_bytes: float
    activations_bytes: float
    workspace_bytes: float
    total_bytes: float
    capacity_bytes: float
    usable_bytes: float
    #: host memory the offloaded activations take per device (recompute "offload": the layer inputs;
    #: "layer_offload": whole layers; 0 otherwise), beside the device's
    host_offload_bytes: float = 0.0
    #: layers whose activations a "layer_offload" plan keeps in host memory, the fewest that let it fit (0 otherwise)
    offload_layers: int = 0
    #: layers of the busiest pipeline stage a "partial" plan recomputes fully, the fewest that let it fit (0 otherwise)
    recompute_layers: int = 0
    #: host memory per device the offloaded activations may take (the catalog's host memory per device less the
    #: job's ``host_memory_reserve``); None when the catalog has no host-memory figure for the device (not checked)
    host_usable_bytes: float | None = None

    def to_dict(self) -> dict[str, float]:
        """The figures, without ``host_usable_bytes`` where it is unknown (the host's memory is not checked then)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


#: Short names of the offloaded modules in a plan's key (``-off:fc1+act``), in Megatron-Core's order.
OFFLOAD_KEY_NAMES: Final = {"attn_norm": "an", "qkv_linear": "qkv", "core_attn": "ca", "attn_proj": "ap",
                            "mlp_norm": "mn", "expert_fc1": "fc1", "moe_act": "act"}


#: Short names of the modules selective recomputation re-runs in a plan's key (``-rm:ln+act``), in Megatron-Core's order.
RECOMPUTE_KEY_NAMES: Final = {"core_attn": "ca", "mla_up_proj": "up", "layernorm": "ln", "mlp": "mlp", "moe": "moe",
                              "moe_act": "act", "shared_experts": "se"}


def recompute_key_suffix(modules: Sequence[str] | None) -> str:
    """What a selective plan's key adds for the modules it re-runs when they are named (``-rm:ln+act``; '' for the
    planner's default set)."""
    if not modules:
        return ""
    return "-rm:" + "+".join(RECOMPUTE_KEY_NAMES[m] for m in RECOMPUTE_MODULES if m in set(modules))


def offload_key_suffix(modules: Sequence[str] | None) -> str:
    """What a plan's key adds for fine-grained activation offloading of ``modules`` ('' for none)."""
    if not modules:
        return ""
    return "-off:" + "+".join(OFFLOAD_KEY_NAMES[m] for m in ordered_offload_modules(modules))


@dataclass(frozen=True)
class TrainEstimate:
    """Everything the planner predicts for one plan on one cluster."""

    model_id: str
    device_id: str
    n_devices: int
    plan: ParallelPlan
    seq_len: int
    global_batch_seqs: int
    method: str
    step: StepBreakdown
    memory: MemoryBreakdown
    tokens_per_s: float
    tokens_per_s_per_device: float
    mfu: float
    hfu: float
    model_flops_per_token: float
    hardware_flops_per_token: float
    power_w_per_device: float | None
    feasible: bool
    reasons: tuple[str, ...]
    efficiency_source: str
    train_tokens: float | None = None
    time_to_train_s: float | None = None
    device_hours: float | None = None
    energy_kwh: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: LoRA/QLoRA adapters: {"rank", "targets"}; None for full training
    lora: dict[str, Any] | None = None
    #: what a selective plan re-runs when the job names it (Megatron-Core ``--recompute-modules``; None: the default)
    recompute_modules: tuple[str, ...] | None = None
    #: whose inputs fine-grained activation offloading keeps in host memory (``--offload-modules``; None: none)
    offload_modules: tuple[str, ...] | None = None

    @property
    def key(self) -> str:
        """The plan's key, with the modules a selective plan re-runs when named (``-rm:ln+act``) and those fine-grained
        activation offloading moves (``-off:fc1+act``) when it does."""
        return self.plan.key + recompute_key_suffix(self.recompute_modules) + offload_key_suffix(self.offload_modules)

    @property
    def step_time_s(self) -> float:
        return self.step.step_s

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_seqs * self.seq_len

    @property
    def model_tflops_per_device(self) -> float:
        """Model FLOP/s per device (no recomputation counted), TFLOP/s."""
        return self.tokens_per_s_per_device * self.model_flops_per_token / units.TFLOPS

    @property
    def hw_tflops_per_device(self) -> float:
        """Executed FLOP/s per device (recomputation counted), TFLOP/s."""
        return self.tokens_per_s_per_device * self.hardware_flops_per_token / units.TFLOPS

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "model": self.model_id,
            "hardware": self.device_id,
            "n_devices": self.n_devices,
            "plan": self.plan.to_dict() | ({"recompute_modules": list(self.recompute_modules)}
                                           if self.recompute_modules is not None else {})
            | ({"offload_modules": list(self.offload_modules)} if self.offload_modules is not None else {}),
            "seq_len": self.seq_len,
            "global_batch_seqs": self.global_batch_seqs,
            "tokens_per_step": self.tokens_per_step,
            "method": self.method,
            "lora": self.lora,
            "feasible": self.feasible,
            "reasons": list(self.reasons),
            "step_time_s": self.step_time_s,
            "step": self.step.to_dict(),
            "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_device": self.tokens_per_s_per_device,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "model_flops_per_s_per_device": self.model_tflops_per_device * units.TFLOPS,
            "hw_flops_per_s_per_device": self.hw_tflops_per_device * units.TFLOPS,
            "model_flops_per_token": self.model_flops_per_token,
            "hardware_flops_per_token": self.hardware_flops_per_token,
            "memory": self.memory.to_dict(),
            "power_w_per_device": self.power_w_per_device,
            "train_tokens": self.train_tokens,
            "time_to_train_s": self.time_to_train_s,
            "device_time_s": None if self.device_hours is None else self.device_hours * units.HOUR,
            "energy_j": None if self.energy_kwh is None else self.energy_kwh * units.KWH,
            "efficiency_source": self.efficiency_source,
            "notes": list(self.notes),
        }


def memory_reasons(memory: MemoryBreakdown, n_devices: int, device_id: str = "DEVICE") -> list[str]:
    """Why a plan does not fit, in words (empty when it fits): device memory, then host memory for offloaded
    activations where the catalog knows the host's."""
    out: list[str] = []
    if memory.total_bytes > memory.usable_bytes:
        states = (memory.weights_bytes + memory.gradients_bytes + memory.master_weights_bytes
                  + memory.optimizer_states_bytes)
        out.append(
            f"needs {units.format_bytes(memory.total_bytes)} per device but only {units.format_bytes(memory.usable_bytes)} "
            f"is usable ({units.format_bytes(memory.capacity_bytes)} minus the reserve): model states "
            f"{units.format_bytes(states)}, activations {units.format_bytes(memory.activations_bytes)}, "
            f"workspace {units.format_bytes(memory.workspace_bytes)}")
    if memory.host_usable_bytes is not None and memory.host_offload_bytes > memory.host_usable_bytes:
        out.append(
            f"keeps {units.format_bytes(memory.host_offload_bytes)} of offloaded activations in host memory per device "
            f"but only {units.format_bytes(memory.host_usable_bytes)} of the host's is usable (the catalog's reference "
            f"system's CPU memory per device minus the host reserve; a host with more: --hw-figure "
            f"{device_id}:host_memory.capacity_gib=N)")
    return out


def power_cap_note(device: Device, cap_w: float) -> str:
    """What a board power limit does to this device's compute (the DVFS model of ``perf.power``)."""
    if not device.tdp_w:
        return f"power cap {cap_w:g} W ignored: {device.id} has no TDP in the catalog"
    r = compute_clock_fraction_at_cap(power_profile_for(device), cap_w)
    if r >= 1.0:
        return f"power cap {cap_w:g} W is at or above the compute-bound draw: no effect"
    return (f"power cap {cap_w:g} W: tensor-core clock at {r:.0%} of uncapped (DVFS, perf.power), compute-bound "
            f"kernels {1 / r:.2f}x slower; HBM-bound work unchanged")


def partial_recompute_note(recompute_layers: int, n_layers: int, pp: int, vpp: int, given: bool = False) -> str:
    """What a ``partial`` plan recomputes, and the Megatron-Core flags that say it (``given``: the job's own count,
    ``TrainingJob.recompute_layers``, not the fewest that fit)."""
    stage = -(-n_layers // pp) if pp > 1 else n_layers
    if recompute_layers <= 0:
        return "partial: the plan fits without recomputing any layer (the same as recompute none)"
    chunk = -(-recompute_layers // vpp)
    where = (f"per pipeline stage; with {vpp} virtual stages, {chunk} per model chunk" if vpp > 1 else
             "per pipeline stage" if pp > 1 else "")
    why = "as the job sets it" if given else "the fewest that let the plan fit"
    return (f"partial: {recompute_layers} of the busiest stage's {stage} layers recomputed in full in the backward "
            f"({why}; the others keep every activation){', ' + where if where else ''}: "
            f"Megatron-Core --recompute-granularity full --recompute-method block --recompute-num-layers "
            f"{chunk if vpp > 1 else recompute_layers}")


def host_memory_phrase(device: Device, host_bytes: float, host_usable: float | None) -> str:
    """The host memory offloaded activations take per device, against what the host has where the catalog knows it."""
    took = f"host memory for them: {units.format_bytes(host_bytes)} per device"
    if host_usable is None:
        return (f"{took} (not checked: the catalog has no host-memory figure for {device.id}; give one with "
                f"--hw-figure {device.id}:host_memory.capacity_gib=N)")
    return f"{took} of {units.format_bytes(host_usable)} usable"


def offload_note(device: Device, exposed_s: float, host_bytes: float, offload_layers: int | None = None,
                 modules: list[str] | None = None, host_usable: float | None = None) -> str:
    """Which host link an offloaded plan's copies were timed on, what of them is not hidden, and the host memory
    the offloaded activations take (``offload_layers``: a ``layer_offload`` plan's count; ``modules``: the modules
    fine-grained activation offloading moves; neither: ``offload``) against the host's usable memory per device
    (``host_usable``; None: unknown, not checked)."""
    host = host_memory_phrase(device, host_bytes, host_usable)
    link_bw, from_catalog = host_link_bytes_per_s(device)
    bw = host_copy_bytes_per_s(device)
    share = (f", {PCIE_HOST_COPY_SHARE:g} of it per device while two share a PCIe uplink" if bw < link_bw else "")
    link = (f"{link_bw / units.GB_PER_S:g} GB/s per direction (catalog host-link figure{share})" if from_catalog else
            f"{link_bw / units.GB_PER_S:g} GB/s per direction (no host-link figure for {device.id}: "
            f"the PCIe Gen4 x16 assumption{share})")
    hidden = ("all hidden under the layers' compute" if exposed_s <= 0.0 else
              f"{exposed_s:.3g} s per step not hidden under the layers' compute")
    if modules is not None:
        return (f"offload modules: the inputs of {', '.join(modules)} go to host memory after each layer's forward "
                f"and come back before its backward (Megatron-Core --fine-grained-activation-offloading "
                f"--offload-modules {' '.join(modules)}); host link {link}; {hidden}; {host}")
    if offload_layers is not None:
        what = (f"layer_offload: the activations of {offload_layers} layer(s), the fewest that let the plan fit, go "
                f"to host memory after each one's forward and come back before its backward (no recomputation; "
                f"Megatron-Core --cpu-offloading-num-layers {offload_layers})" if offload_layers else
                "layer_offload: the plan fits without offloading any layer (the same as recompute none)")
        return f"{what}; host link {link}; {hidden}; {host}"
    return (f"offload: each layer's input goes to host memory after its forward and back before its backward over "
            f"the host link at {link}; {hidden}; {host}")


def with_stack_modules(job: TrainingJob, model: ModelArch, stack: TrainingStack) -> TrainingJob:
    """``job`` with its stack's own selective set (``TrainingStack.selective_modules``, those ``model`` has) when it
    names no ``recompute_modules``: what the stack's selective recomputation re-runs then."""
    if job.recompute_modules is not None:
        return job
    mods = stack_selective_modules(model, stack.selective_modules, f"training_stacks.{stack.id}.selective_modules")
    return job if mods is None else job.model_copy(update={"recompute_modules": mods})


def estimate_from_arrays(
    r: StepArrays, i: int, plans: PlanArrays, model: ModelArch, cluster: Cluster, job: TrainingJob
) -> TrainEstimate:
    """The :class:`TrainEstimate` of plan ``i`` of an evaluated batch."""
    plan = plans.plan(i)
    step = StepBreakdown(
        compute_s=float(r.compute_s[i]), recompute_s=float(r.recompute_s[i]), tp_comm_s=float(r.tp_comm_s[i]),
        cp_comm_s=float(r.cp_comm_s[i]), ep_comm_s=float(r.ep_comm_s[i]), pp_comm_s=float(r.pp_comm_s[i]),
        bubble_s=float(r.bubble_s[i]), dp_comm_s=float(r.dp_comm_s[i]), zero3_comm_s=float(r.zero3_comm_s[i]),
        offload_s=float(r.offload_s[i]),
        optimizer_s=float(r.optimizer_s[i]), overhead_s=float(r.overhead_s[i]), step_s=float(r.step_s[i]),
    )
    mem = MemoryBreakdown(
        weights_bytes=float(r.mem_weights[i]), gradients_bytes=float(r.mem_gradients[i]),
        master_weights_bytes=float(r.mem_master[i]), optimizer_states_bytes=float(r.mem_optimizer[i]),
        activations_bytes=float(r.mem_activations[i]), workspace_bytes=float(r.mem_workspace[i]),
        total_bytes=float(r.mem_total[i]), capacity_bytes=cluster.device.memory_bytes, usable_bytes=r.mem_usable,
        host_offload_bytes=float(r.mem_host[i]),
        offload_layers=int(r.mem_offload_layers[i]) if r.mem_offload_layers is not None else 0,
        recompute_layers=int(r.mem_recompute_layers[i]) if r.mem_recompute_layers is not None else 0,
        host_usable_bytes=r.mem_host_usable,
    )
    reasons = memory_reasons(mem, cluster.n_devices, cluster.device.id)
    tps = float(r.tokens_per_s[i])
    power = float(r.power_w_per_device[i])
    power_opt = None if np.isnan(power) else power
    t_train = dev_h = energy = None
    if job.train_tokens is not None:
        t_train = job.train_tokens / tps
        dev_h = t_train * cluster.n_devices / units.HOUR
        if power_opt is not None:
            energy = power_opt * cluster.n_devices * t_train / units.KWH
    notes = []
    if power_opt is None:
        notes.append(f"{cluster.device.id} has no TDP in the catalog: power and energy unknown")
    if plan.precision in ("bf16", "fp16") and (sixteen := cluster.device.sixteen_bit_note(plan.precision)):
        notes.append(sixteen)
    if plan.precision in ("bf16", "fp16") and (implausible := plausibility_note(
            cluster.device, cluster.n_devices, float(r.mfu[i]))):
        notes.append(implausible)
    if job.power_cap_w is not None:
        notes.append(power_cap_note(cluster.device, job.power_cap_w))
    if plan.recompute == "offload":
        notes.append(offload_note(cluster.device, step.offload_s, mem.host_offload_bytes,
                                  host_usable=mem.host_usable_bytes))
    elif plan.recompute == "layer_offload":
        notes.append(offload_note(cluster.device, step.offload_s, mem.host_offload_bytes, mem.offload_layers,
                                  host_usable=mem.host_usable_bytes))
    if job.offload_modules is not None:
        notes.append(offload_note(cluster.device, step.offload_s, mem.host_offload_bytes,
                                  modules=ordered_offload_modules(job.offload_modules),
                                  host_usable=mem.host_usable_bytes))
    if plan.recompute == "partial":
        notes.append(partial_recompute_note(mem.recompute_layers, model.n_layers, plan.pp, plan.vpp,
                                            given=job.recompute_layers is not None))
    if plan.ep_overlap:
        notes.append(f"-epo: the MoE all-to-all overlap is on (Megatron-Core --overlap-moe-expert-parallel-comm, "
                     f"Megatron-Bridge moe_a2a_overlap): {step.ep_comm_s:.2f} s of all-to-all per step stays exposed "
                     "(the warm-up and cool-down passes run alone) and the first stage holds one more layer of "
                     "activations (pipelined: and one model chunk); full recomputation is not available with it")
    if plan.zero_stage == 2 and plan.pp > 1:
        notes.append("ZeRO-2 with pipelining: each stage accumulates its full gradients over the micro-batches and "
                     "reduce-scatters them once per step, as ZeRO-1 (the full-size gradient buffer is in the memory; "
                     "DeepSpeed's pipeline engine refuses ZeRO-2)")
    return TrainEstimate(
        model_id=model.id, device_id=cluster.device.id, n_devices=cluster.n_devices, plan=plan,
        seq_len=job.seq_len, global_batch_seqs=plan.global_batch_seqs, method=job.method, step=step, memory=mem,
        tokens_per_s=tps, tokens_per_s_per_device=float(r.tokens_per_s_per_device[i]), mfu=float(r.mfu[i]),
        hfu=float(r.hfu[i]), model_flops_per_token=r.model_flops_per_token,
        hardware_flops_per_token=float(r.hardware_flops_per_token[i]), power_w_per_device=power_opt,
        feasible=not reasons, reasons=tuple(reasons), efficiency_source=cluster.efficiency.source,
        train_tokens=job.train_tokens, time_to_train_s=t_train, device_hours=dev_h, energy_kwh=energy,
        notes=tuple(notes),
        lora=None if job.method == "full" else {"rank": job.lora_rank, "targets": list(job.lora_targets)},
        recompute_modules=(tuple(ordered_selective_modules(model, job.recompute_modules))
                           if plan.recompute == "selective" and job.recompute_modules is not None else None),
        offload_modules=(tuple(ordered_offload_modules(job.offload_modules))
                         if job.offload_modules is not None else None),
    )


def estimate(
    model: ModelArch, cluster: Cluster, plan: ParallelPlan, job: TrainingJob | None = None,
    *, step_model: StepModel | None = None, uneven_pipeline: bool = False, stack: TrainingStack | None = None,
) -> TrainEstimate:
    """Predict step time, throughput, memory and feasibility of ``plan`` on ``cluster``.

    Structural mistakes (tp not dividing the heads, batch not matching dp·micro_batch·grad_accum,
    sizes not multiplying to the device count...) raise ``UserInputError`` naming the field; a plan
    that does not fit in memory returns ``feasible=False`` with reasons. ``uneven_pipeline`` lets
    pp not divide the layers (the busiest stage holds ceil(layers/pp)). ``stack``: the training
    stack's profile (``catalog/data/training_stacks.yaml``; the default stack when None), unless
    ``step_model`` is given (it carries its own).
    """
    job = job or TrainingJob()
    validity.raise_first([i for i in (validity.rule_precision_on_device(plan.precision, cluster.device),) if i])
    check_plan(plan, model, seq_len=job.seq_len, global_batch_seqs=job.global_batch_seqs, n_devices=cluster.n_devices,
               uneven_pipeline=uneven_pipeline)
    sm = step_model or StepModel(model, cluster.device, cluster.efficiency, job, stack=stack)
    if (own := with_stack_modules(job, model, sm.stack)) is not job:  # the stack's own selective set
        job, sm = own, sm.with_job(own)
    validity.raise_first([i for i in (validity.rule_stack_parallelism(sm.stack, tp=plan.tp, pp=plan.pp, vpp=plan.vpp,
                                                                      cp=plan.cp, ep=plan.ep,
                                                                      zero_stage=plan.zero_stage,
                                                                      uneven=model.n_layers % (plan.pp * plan.vpp) != 0),
                                      validity.rule_cp_all_to_all_heads(plan.cp, plan.tp, model,
                                                                         sm.stack.cp_algorithm),
                                      validity.rule_layer_offload(plan.recompute, plan.pp, sm.stack),
                                      validity.rule_partial_recompute(plan.recompute, sm.stack),
                                      validity.rule_recompute_modules(job.recompute_modules, model, sm.stack),
                                      validity.rule_offload_modules(job.offload_modules, model, sm.stack,
                                                                    job.recompute_modules),
                                      validity.rule_offload_modules_recompute(job.offload_modules, plan.recompute),
                                      validity.rule_ep_overlap(plan.ep_overlap, plan.ep, plan.pp, plan.vpp,
                                                               plan.recompute, job.recompute_modules),
                                      validity.rule_dualpipe(plan.pp, plan.vpp, plan.grad_accum, sm.stack)) if i])
    arrays = PlanArrays.from_plans([plan])
    r = sm.evaluate(cluster, arrays)
    return estimate_from_arrays(r, 0, arrays, model, cluster, job)
