"""Step-time, memory and throughput model of one training step, vectorised over plans.

One function, :meth:`StepModel.evaluate`, turns a model, a cluster, a job and an array of plans
into arrays of step time (with its breakdown), memory per device (with its breakdown), tokens/s,
MFU/HFU and feasibility. The single-plan estimate (``train.estimate``) and the search
(``train.search``) both call it, so they cannot disagree.

Assembly (per optimizer step, on the busiest pipeline stage):

* compute per micro-batch: each layer's operations from :func:`xpuplan.perf.ops.layer_ops`, timed
  with the roofline (:func:`xpuplan.perf.roofline.op_time`, efficiency by operation size and
  precision); backward = 2 x forward for GEMMs (1 x for the frozen base of LoRA/QLoRA: no weight
  gradients), :data:`ATTENTION_BACKWARD_FACTOR` x for fused attention, 2 x for elementwise ops;
  recomputation adds the layer's forward (full) or the attention core's (selective); the last
  stage adds the output head and the loss.
* per micro-batch communication (exposed; see the overlap constants): TP all-reduces (or SP
  all-gather + reduce-scatter, same volume), CP ring-attention KV exchange (overlapped with the
  attention it feeds), EP all-to-all dispatch and combine for MoE layers.
* pipeline: m micro-batches plus the bubble (pp-1)/vpp micro-batch times; point-to-point sends
  between stages.
* data parallelism: gradient all-reduce/reduce-scatter and parameter all-gather, bucketed and
  overlapped with the backward (forward) of the last (first) micro-batch; ZeRO-3/FSDP gathers
  weights for every micro-batch, prefetched under compute.
* optimizer step (memory-bound Adam), gradient-norm clipping, and a fixed per-step overhead.

The phases live in their own modules: :mod:`xpuplan.train.compute` (operations, roofline, stage
sums), :mod:`xpuplan.train.phases` (TP/SP, CP, EP, pipeline, DP/ZeRO, optimizer, overhead) over
:mod:`xpuplan.train.layout` and :mod:`xpuplan.train.arrays`; memory is
:func:`xpuplan.perf.memory.training_memory_arrays` and power :mod:`xpuplan.perf.power`. Every
overlap assumption and factor is a named constant in those modules, explained where defined.
"""

from __future__ import annotations

import copy

import numpy as np

from xpuplan.catalog.device import Device
from xpuplan.catalog.stacks import TrainingStack, default_training_stack
from xpuplan.models.arch import ModelArch
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.flops import flops_training_per_token
from xpuplan.perf.links import host_copy_bytes_per_s
from xpuplan.perf.memory import (
    OFFLOAD_BUFFER_LAYERS,
    activation_bytes_output,
    activation_bytes_per_layer,
    default_recipe_for,
    expert_tensor_parallel,
    frozen_base_bytes_per_param,
    host_usable_bytes,
    lora_params,
    params_per_device,
    saved_linear_input_bytes,
    saved_moe_act_input_bytes,
    state_recipe,
    training_memory_arrays,
)
from xpuplan.perf.params import param_breakdown
from xpuplan.perf.power import PowerProfile, compute_clock_fraction_at_cap, power_profile_for, power_work_w
from xpuplan.perf.recompute import selective_forward_flops_per_token, selective_modules
from xpuplan.perf.roofline import compute_peak
from xpuplan.train.arrays import _REC_INDEX, PlanArrays, StepArrays
from xpuplan.train.cluster import Cluster
from xpuplan.train.compute import (
    ATTENTION_BACKWARD_FACTOR,
    EAGER_RMSNORM_EXTRA_BYTES,
    EAGER_ROPE_EXTRA_BYTES,
    EAGER_SWIGLU_EXTRA_BYTES,
    EAGER_TRANSPOSE_BYTES,
    ELEMENTWISE_BACKWARD_FACTOR,
    FP8_CAST_BYTES_PER_ELEMENT,
    FROZEN_GEMM_BACKWARD_FACTOR,
    GEMM_BACKWARD_FACTOR,
    LORA_OUTPUT_PASSES,
    LOSS_BYTES_PER_LOGIT,
    MOE_IMBALANCE_FACTOR,
    MOE_PERMUTE_BYTES_PER_ELEMENT,
    NF4_DEQUANT_BYTES_PER_PARAM,
    UNFUSED_SOFTMAX_BYTES_PER_SCORE,
    LayerCompute,
    attention_core_ops,
    layer_compute,
    op_sac_linear_flops_share,
    stage_compute,
)
from xpuplan.train.layout import Layout
from xpuplan.train.phases import (
    ACTIVATION_BYTES,
    DP_BUCKET_ELEMENTS,
    FP8_PARAM_GATHER_BYTES,
    GRAD_REDUCE_BYTES,
    OVERLAP_INTERFERENCE,
    PARAM_GATHER_BYTES,
    STEP_OVERHEAD_S,
    Trainable,
    cp_comm_per_mb_s,
    dp_comm_s,
    ep_comm_per_mb_s,
    ep_overlap_extra_layers,
    exposed_after_overlap_s,
    group_time_s,
    offload_per_mb_s,
    optimizer_s,
    pipeline_bubble_fraction,
    pipeline_s,
    tp_comm_per_mb_s,
)
from xpuplan.train.plan import PRECISIONS, RECOMPUTE_MODES
from xpuplan.workload.training import TrainingJob

__all__ = [
    "ACTIVATION_BYTES", "ATTENTION_BACKWARD_FACTOR", "DP_BUCKET_ELEMENTS", "EAGER_RMSNORM_EXTRA_BYTES",
    "EAGER_ROPE_EXTRA_BYTES", "EAGER_SWIGLU_EXTRA_BYTES", "EAGER_TRANSPOSE_BYTES", "ELEMENTWISE_BACKWARD_FACTOR",
    "FP8_CAST_BYTES_PER_ELEMENT", "FROZEN_GEMM_BACKWARD_FACTOR", "GEMM_BACKWARD_FACTOR", "GRAD_REDUCE_BYTES",
    "LORA_OUTPUT_PASSES", "LOSS_BYTES_PER_LOGIT", "MOE_IMBALANCE_FACTOR", "MOE_PERMUTE_BYTES_PER_ELEMENT",
    "NF4_DEQUANT_BYTES_PER_PARAM", "OVERLAP_INTERFERENCE", "PARAM_GATHER_BYTES", "FP8_PARAM_GATHER_BYTES", "STEP_OVERHEAD_S",
    "UNFUSED_SOFTMAX_BYTES_PER_SCORE", "LayerCompute", "PlanArrays", "StepArrays", "StepModel", "attention_core_ops",
    "exposed_after_overlap_s", "layer_compute", "pipeline_bubble_fraction",
]


# ---------------------------------------------------------------------------------------
# The evaluator
# ---------------------------------------------------------------------------------------
class StepModel:
    """Evaluates plans for one model x device x job; caches per-shape compute and memory tables
    so a search over many device counts reuses them."""

    def __init__(self, model: ModelArch, device: Device, eff: Efficiency, job: TrainingJob, *,
                 power: PowerProfile | None = None, stack: TrainingStack | None = None) -> None:
        self.model = model
        self.stack = stack if stack is not None else default_training_stack(device)
        self.device = device
        # the stack's fused-attention kernel (FlashAttention-2 code or the device's native kernels)
        self.eff = eff.for_attention_kernel(self.stack.attention_kernel)
        self.job = job
        self.power = power if power is not None else (power_profile_for(device) if device.tdp_w else None)
        #: tensor-core clock under the job's board power limit (perf.power DVFS model; 1 = uncapped)
        self.clock_fraction = 1.0
        if job.power_cap_w is not None and self.power is not None:
            self.clock_fraction = compute_clock_fraction_at_cap(self.power, job.power_cap_w)
            self.eff = self.eff.at_clock(self.clock_fraction)
        #: what one device's activation-offload copies get of its host link, per direction, all devices copying
        #: at once (perf.links.host_copy_bytes_per_s)
        self.host_copy_bytes_per_s = host_copy_bytes_per_s(device)
        self._compute: dict[tuple[int, ...], LayerCompute] = {}
        self._params: dict[tuple[int, ...], tuple[float, float]] = {}
        self._acts: dict[tuple[int, ...], float] = {}
        self._out: dict[tuple[int, ...], float] = {}
        self._etp_of: tuple[PlanArrays, np.ndarray] | None = None
        self.breakdown = param_breakdown(model)
        seq = job.seq_len
        self._flops = {r: flops_training_per_token(model, seq, r, causal=False) for r in RECOMPUTE_MODES}  # type: ignore[arg-type]
        self.lora_params_total = lora_params(model, job.lora_rank, job.lora_targets) if job.method != "full" else 0

    def with_job(self, job: TrainingJob) -> StepModel:
        """This evaluator for ``job``, a variant of its job that differs only in the modules it recomputes or offloads
        (a stack's own selective set; a search trying fine-grained offloading sets): the activation table is
        rebuilt, the other tables are shared (the recomputed FLOPs follow the job at evaluation)."""
        twin = copy.copy(self)
        twin.job = job
        twin._acts = {}
        return twin

    # -- tables ---------------------------------------------------------------------------------
    @staticmethod
    def _distinct(columns: list[np.ndarray]) -> tuple[list[tuple[int, ...]], np.ndarray]:
        """Distinct rows of small non-negative integer columns and, per plan, the index of its row.

        The columns are packed into one int64 code (mixed radix) so one 1-D ``np.unique`` suffices."""
        code = np.zeros(columns[0].shape[0], dtype=np.int64)
        for col in columns:
            code = code * (int(col.max(initial=0)) + 1) + col
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        rows = [tuple(int(col[i]) for col in columns) for i in first]
        return rows, inverse.reshape(-1)

    def _expert_tp(self, p: PlanArrays) -> np.ndarray:
        """Per plan, the expert tensor-parallel size (``perf.memory.expert_tensor_parallel``), computed once per batch."""
        if self._etp_of is None or self._etp_of[0] is not p:
            self._etp_of = (p, expert_tensor_parallel(p.tp, p.dp * p.cp, p.ep, self.stack.expert_tp_one))
        return self._etp_of[1]

    def compute_table(self, p: PlanArrays) -> dict[str, np.ndarray]:
        """Per plan, the :class:`LayerCompute` fields (seconds) for its (mb, tp, cp, ep, sp, precision) and expert-TP."""
        etp = self._expert_tp(p)
        rows, inv = self._distinct([p.mb, p.tp, p.cp, p.ep, p.sp, p.prec, etp])
        vals = []
        for k in rows:
            if k not in self._compute:
                mb, tp, cp, ep, sp, prec, etp_k = k
                self._compute[k] = layer_compute(
                    self.model, self.device, self.eff, micro_batch=mb, seq_len=self.job.seq_len, tp=tp, cp=cp, ep=ep,
                    etp=etp_k,
                    sp=bool(sp), precision=PRECISIONS[prec], flash=self.job.flash_attention,
                    qlora=self.job.method == "qlora", eager=self.job.kernels == "eager",
                    lora=self.job.method != "full", fp8_attention=self.stack.fp8_attention,
                    fp8_output_head=self.stack.fp8_output_head,
                    moe_host_sync=self.stack.moe_host_sync, op_sac=self.stack.selective_recompute == "op_sac",
                    grouped_expert_gemm=self.stack.expert_gemm == "grouped",
                    fp4_bf16_layers=self.stack.fp4_bf16_layer_fraction, lora_targets=self.job.lora_targets)
            vals.append(self._compute[k])
        return {n: np.asarray([getattr(v, n) for v in vals], dtype=float)[inv] for n in LayerCompute.__dataclass_fields__}

    def params_table(self, p: PlanArrays) -> tuple[np.ndarray, np.ndarray]:
        """Per plan, (dense, expert) parameters on its busiest device (``perf.memory.params_per_device``)."""
        rows, inv = self._distinct([p.tp, p.pp, p.ep, self._expert_tp(p)])
        vals = []
        for k in rows:
            if k not in self._params:
                d = params_per_device(self.model, tp=k[0], pp=k[1], ep=k[2], etp=k[3],
                                      dualpipe=self.stack.pipeline_schedule == "dualpipe")
                self._params[k] = (d.dense, d.expert)
            vals.append(self._params[k])
        arr = np.asarray(vals, dtype=float)[inv]
        return arr[:, 0], arr[:, 1]

    def _sharded_sp(self, p: PlanArrays) -> np.ndarray:
        """Per plan, whether the activations a layer keeps are split over TP: SP, or a stack whose compiler
        shards every activation over the tensor axis (``TrainingStack.tp_sharded_activations``)."""
        return np.ones_like(p.sp) if self.stack.tp_sharded_activations else p.sp

    def activation_table(self, p: PlanArrays, rec: np.ndarray, *, job_modules: bool = True,
                         host: bool = False) -> np.ndarray:
        """Per plan, activation bytes one layer keeps on the device (``perf.memory.activation_bytes_per_layer``); a
        selective plan re-runs the job's ``recompute_modules`` and every plan offloads its ``offload_modules``
        (``job_modules``; False: the default selective set, nothing offloaded). ``host``: the bytes the offloaded
        modules keep in host memory instead."""
        own = int(job_modules and self.job.recompute_modules is not None)
        off = int(job_modules and self.job.offload_modules is not None) * (2 if host else 1)
        cols = [p.mb, p.tp, self._sharded_sp(p), p.cp, rec, p.prec]
        if self.model.moe is not None:  # the expert-TP size decides which dispatched copies a rank keeps
            cols.append(self._expert_tp(p))
        rows, inv = self._distinct(cols)
        vals = []
        for row in rows:
            # the job-wide switches complete the key (constant over the plans: not worth a column each)
            k = (*row[:6], own, row[6] if len(row) > 6 else 1, off)
            if k not in self._acts:
                mb, tp, sp, cp, r, pr, mine, et, o = k
                self._acts[k] = activation_bytes_per_layer(
                    self.model, self.job.seq_len, mb, tp=tp, sp=bool(sp), cp=cp, recompute=RECOMPUTE_MODES[r],  # type: ignore[arg-type]
                    flash_attention=self.job.flash_attention,
                    linear_input_bytes=saved_linear_input_bytes(PRECISIONS[pr], self.stack.fp8_saved_activations),
                    recompute_modules=self.job.recompute_modules if mine else None,
                    kv_repeat=self.stack.attention_kv_repeat, expert_tp=et,
                    moe_act_input_bytes=saved_moe_act_input_bytes(PRECISIONS[pr], self.stack.fp8_moe_act_inputs),
                    offload_modules=self.job.offload_modules if o else None, where="host" if o == 2 else "device")
            vals.append(self._acts[k])
        return np.asarray(vals, dtype=float)[inv]

    def offload_input_table(self, p: PlanArrays) -> np.ndarray:
        """Per plan, bytes of one layer's input per micro-batch on a device (``perf.memory.offload_layer_input_bytes``):
        what an offloaded plan copies to the host after each layer's forward and back before its backward."""
        return self.activation_table(p, np.full_like(p.rec, _REC_INDEX["full"]))

    def output_table(self, p: PlanArrays) -> np.ndarray:
        """Per plan, logits bytes on the last stage (``perf.memory.activation_bytes_output``)."""
        rows, inv = self._distinct([p.mb, p.tp, p.cp])
        vals = []
        for k in rows:
            if k not in self._out:
                self._out[k] = activation_bytes_output(self.model, self.job.seq_len, k[0], tp=k[1], cp=k[2])
            vals.append(self._out[k])
        return np.asarray(vals, dtype=float)[inv]

    def recipe_bytes(self, p: PlanArrays) -> dict[str, np.ndarray]:
        """Per plan, bytes per parameter of weights, grads, master and optimizer (recipe by precision)."""
        primary = self.stack.fp8_primary_weights
        recipes = [state_recipe(self.job.optimizer_recipe or default_recipe_for(pr, fp8_primary_weights=primary))
                   for pr in PRECISIONS]
        return {f: np.asarray([getattr(r, f) for r in recipes], dtype=float)[p.prec]
                for f in ("weights", "grads", "master", "optimizer")}

    # -- network ----------------------------------------------------------------------------------
    @staticmethod
    def _hier(kind: str, n_bytes: np.ndarray, cluster: Cluster, size: np.ndarray, stride: np.ndarray) -> np.ndarray:
        """A ring-type collective of process groups (``perf.collectives.time_group_s``, NCCL algorithms)."""
        return group_time_s(kind, n_bytes, cluster, size, stride)  # type: ignore[arg-type]

    @staticmethod
    def _a2a(n_bytes: np.ndarray, cluster: Cluster, size: np.ndarray, stride: np.ndarray) -> np.ndarray:
        return group_time_s("all_to_all", n_bytes, cluster, size, stride)

    # -- evaluation -------------------------------------------------------------------------------
    def evaluate(self, cluster: Cluster, p: PlanArrays) -> StepArrays:
        """Step time, memory and throughput of every plan in ``p`` on ``cluster``, phase by phase."""
        model, job, dev = self.model, self.job, self.device
        frozen = job.method != "full"
        dense_p, expert_p = self.params_table(p)
        rb = self.recipe_bytes(p)
        usable = dev.memory_bytes * (1.0 - job.memory_reserve)
        # offloaded activations must fit the host too, where the catalog knows it
        host_usable = host_usable_bytes(dev.host_memory_bytes, job.host_memory_reserve)
        # memory first: a partial plan recomputes as many layers as it needs to fit, which its compute then pays for
        mem = self._memory(p, dense_p, expert_p, rb, p.ga.astype(float), p.rec, usable)
        lay = Layout.of(p, model, job.seq_len, recompute_layers=mem["recompute_layers"])
        m = lay.m
        comp = stage_compute(self.compute_table(p), lay, model, frozen=frozen, selective=self.stack.selective_recompute,
                             modules=self.job.recompute_modules)
        st = self.stack
        tp_mb = tp_comm_per_mb_s(lay, model, job, cluster, p, comp, st)
        cp_mb = cp_comm_per_mb_s(lay, model, cluster, p, comp, st)
        ep_mb = ep_comm_per_mb_s(lay, model, job, cluster, p, st, comp)
        module_bytes = self.activation_table(p, p.rec, host=True) if job.offload_modules is not None else None
        if lay.offload.any() or lay.layer_off.any() or module_bytes is not None:
            off_mb = offload_per_mb_s(lay, comp, self.offload_input_table(p), self.host_copy_bytes_per_s,
                                      layer_bytes=self.activation_table(p, p.rec), offload_layers=mem["offload_layers"],
                                      module_bytes=module_bytes)
        else:
            off_mb = np.zeros_like(lay.tp)
        bubble, pp_comm = pipeline_s(lay, cluster, p, comp.per_mb + comp.recompute + tp_mb + cp_mb + ep_mb + off_mb, st,
                                     comp)
        tr = self._trainable(lay, dense_p, expert_p, frozen, p)
        dp_comm, zero3_comm = dp_comm_s(lay, model, job, cluster, p, comp, dense_p, expert_p, tr, st)
        optimizer = optimizer_s(cluster, p, dev, self.eff, tr, rb["grads"], whole_experts=st.expert_tp_one)
        overhead = np.full_like(lay.tp, STEP_OVERHEAD_S)
        compute_total = m * comp.per_mb
        step = (compute_total + m * comp.recompute + m * tp_mb + m * cp_mb + m * ep_mb + bubble + pp_comm + dp_comm
                + zero3_comm + m * off_mb + optimizer + overhead)
        # ---- throughput, MFU, power -----------------------------------------------------------
        n_dev = float(cluster.n_devices)
        tps = m * lay.mb * lay.dp * lay.s / step  # tokens per optimizer step (all replicas) / step time
        f_model, f_hw = self._flops_per_token(p.rec, frozen, p.prec, lay.full_rec)
        peak = np.asarray([compute_peak(dev, PRECISIONS[i]) for i in range(len(PRECISIONS))])[p.prec]
        busy = np.clip((compute_total + m * comp.recompute + optimizer) / step, 0.0, 1.0)
        return StepArrays(
            compute_s=compute_total, recompute_s=m * comp.recompute, tp_comm_s=m * tp_mb, cp_comm_s=m * cp_mb,
            ep_comm_s=m * ep_mb, pp_comm_s=pp_comm, bubble_s=bubble, dp_comm_s=dp_comm, zero3_comm_s=zero3_comm,
            offload_s=m * off_mb,
            optimizer_s=optimizer, overhead_s=overhead, step_s=step, tokens_per_s=tps,
            tokens_per_s_per_device=tps / n_dev, mfu=tps * f_model / (n_dev * peak), hfu=tps * f_hw / (n_dev * peak),
            busy_fraction=busy, power_w_per_device=self.power_w(busy),
            mem_weights=mem["weights"], mem_gradients=mem["grads"], mem_master=mem["master"],
            mem_optimizer=mem["opt"], mem_activations=mem["acts"], mem_workspace=mem["workspace"],
            mem_total=mem["total"], mem_usable=usable, mem_host=mem["host"], mem_host_usable=host_usable,
            fits=(mem["total"] <= usable) & (mem["host"] <= (np.inf if host_usable is None else host_usable)),
            mem_offload_layers=mem["offload_layers"], mem_recompute_layers=mem["recompute_layers"],
            model_flops_per_token=float(f_model), hardware_flops_per_token=f_hw,
        )

    def _trainable(self, lay: Layout, dense_p: np.ndarray, expert_p: np.ndarray, frozen: bool,
                   p: PlanArrays) -> Trainable:
        """What the optimizer updates per device: every parameter, or the LoRA adapters (frozen base).
        Weights are gathered in 16 bits, or in FP8 where an FP8 plan's stack keeps FP8 primary weights
        (``TrainingStack.fp8_primary_weights``: Megatron-Core's --fp8-param-gather)."""
        if frozen:
            return Trainable(dense=np.full_like(lay.tp, float(self.lora_params_total)) / (lay.tp * lay.pp),
                             expert=np.zeros_like(lay.tp), gather_bytes_per_param=self._frozen_base_bytes_per_param())
        fp8_gather = self.stack.fp8_primary_weights & (p.prec == PRECISIONS.index("fp8"))
        gather = np.where(fp8_gather, FP8_PARAM_GATHER_BYTES, PARAM_GATHER_BYTES) if fp8_gather.any() else PARAM_GATHER_BYTES
        return Trainable(dense=dense_p, expert=expert_p, gather_bytes_per_param=gather)

    def power_w(self, compute_fraction: np.ndarray) -> np.ndarray:
        """Average draw per device (W) of steps that compute ``compute_fraction`` of their time: the
        one power model (:func:`xpuplan.perf.power.power_work_w`). The device is never idle within a
        step: compute time is compute-bound; the rest (waiting on collectives or the pipeline, HBM
        and links active) draws like memory-bound work. NaN when the catalog has no TDP."""
        if self.power is None:
            return np.full_like(compute_fraction, np.nan)
        p_wait, p_compute = power_work_w(self.power, 0.0), power_work_w(self.power, 1.0)
        if self.job.power_cap_w is not None:  # the board limit clips the draw (the clock fell to meet it)
            p_wait, p_compute = min(p_wait, self.job.power_cap_w), min(p_compute, self.job.power_cap_w)
        return p_wait + compute_fraction * (p_compute - p_wait)  # linear in the compute-bound share

    def _flops_per_token(self, rec: np.ndarray, frozen: bool, prec: np.ndarray,
                         full_share: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """(model FLOP per token, hardware FLOP per token per plan), PaLM/Megatron convention
        (attention over the full sequence). Frozen bases skip weight gradients. Selective recomputation adds the
        attention core, or under the stack's op-level checkpointing (``selective_recompute`` op_sac) its share
        of the forward linear FLOPs (:func:`op_sac_linear_flops_share`); full recomputation the forward, over
        ``full_share`` of the layers (``Layout.full_rec``: 1, or a partial plan's recomputed share)."""
        base = self._flops["none"]
        lin, attn = base.forward_linear, base.forward_attention
        if frozen:
            model_f = lin * (1.0 + FROZEN_GEMM_BACKWARD_FACTOR) + attn * (1.0 + GEMM_BACKWARD_FACTOR)
        else:
            model_f = base.model
        full = (((rec == _REC_INDEX["full"]) | (rec == _REC_INDEX["offload"])).astype(float)
                if full_share is None else np.asarray(full_share, dtype=float))
        if self.stack.selective_recompute == "op_sac":
            shares = np.asarray([op_sac_linear_flops_share(self.model, pr) for pr in PRECISIONS])[prec]
            sel = lin * shares
        else:
            mods = selective_modules(self.model, self.job.recompute_modules)
            sel = np.full(rec.shape, selective_forward_flops_per_token(self.model, mods, attn))
        extra = full * base.forward + np.where(rec == _REC_INDEX["selective"], sel, 0.0)
        return model_f, model_f + extra

    def _frozen_base_bytes_per_param(self) -> float:
        """Bytes per frozen base weight (``perf.memory.frozen_base_bytes_per_param``)."""
        return frozen_base_bytes_per_param(self.model, self.job.method)

    def _memory(self, p: PlanArrays, dense: np.ndarray, expert: np.ndarray, rb: dict[str, np.ndarray],
                m: np.ndarray, rec: np.ndarray, usable: float) -> dict[str, np.ndarray]:
        """Memory per device of every plan: :func:`xpuplan.perf.memory.training_memory_arrays`, the one
        training-memory model, fed with this model's per-shape tables (``usable``: the bytes a ``layer_offload``
        plan offloads layers to fit in)."""
        layer_off = rec == _REC_INDEX["layer_offload"]
        offload = rec == _REC_INDEX["offload"]
        partial = rec == _REC_INDEX["partial"]
        full_rec = (rec == _REC_INDEX["full"]) | offload | partial  # partial: once a layer is recomputed
        rebuilt = np.zeros(len(p))
        if full_rec.any():
            sel = self.activation_table(p, np.full_like(rec, _REC_INDEX["selective"]), job_modules=False)
            rebuilt = np.where(full_rec, sel, 0.0)
        if offload.any():  # the layer inputs in transit to and from the host
            rebuilt = rebuilt + np.where(offload, OFFLOAD_BUFFER_LAYERS * self.offload_input_table(p), 0.0)
        host_layer = np.where(offload, self.offload_input_table(p), 0.0) if offload.any() else None
        if self.job.offload_modules is not None:  # fine-grained offloading: the modules' inputs, two layers in transit
            module_host = self.activation_table(p, rec, host=True)
            rebuilt = rebuilt + OFFLOAD_BUFFER_LAYERS * module_host
            host_layer = module_host if host_layer is None else host_layer + module_host
        return training_memory_arrays(
            self.model.n_layers, method=self.job.method, dense=dense, expert=expert, recipe=rb,
            tp=p.tp.astype(float), pp=p.pp.astype(float), dp=p.dp.astype(float), cp=p.cp.astype(float),
            ep=p.ep.astype(float), vpp=p.vpp.astype(float), zero=p.zero, n_microbatches=m,
            act_per_layer=self.activation_table(p, rec), act_rebuilt_layer=rebuilt, act_output=self.output_table(p),
            frozen_base_bytes_per_param=self._frozen_base_bytes_per_param(),
            lora_params_total=float(self.lora_params_total),
            act_host_layer=host_layer,
            extra_inflight_layers=extra if (extra := ep_overlap_extra_layers(
                p, self.stack, self.job, self.model.n_layers)).any() else None,
            layer_offload=layer_off if layer_off.any() else None, usable=np.full(len(p), usable),
            whole_experts=self.stack.expert_tp_one, dualpipe=self.stack.pipeline_schedule == "dualpipe",
            partial=partial if partial.any() else None,
            act_full_layer=self.activation_table(p, np.full_like(rec, _REC_INDEX["full"])) if partial.any() else None,
            partial_layers=self.job.recompute_layers)

    def memory(self, p: PlanArrays) -> dict[str, np.ndarray]:
        """Memory per device of every plan in ``p`` without timing them (what ``evaluate`` reports)."""
        dense_p, expert_p = self.params_table(p)
        return self._memory(p, dense_p, expert_p, self.recipe_bytes(p), p.ga.astype(float), p.rec,
                            self.device.memory_bytes * (1.0 - self.job.memory_reserve))

