"""Communication phases of a training step, vectorised over plans: TP/SP, CP, EP per micro-batch,
the pipeline (bubble and stage hand-offs), data parallelism and ZeRO, then the optimizer step.

Every collective is priced by the one collective model (:func:`xpuplan.perf.collectives.time_group_s`)
with NCCL's algorithms, over the cluster's links. Exposed time only: each overlap assumption is a
named constant, explained where defined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np

from xpuplan.catalog.device import Device
from xpuplan.catalog.stacks import TrainingStack
from xpuplan.models.arch import ModelArch
from xpuplan.perf import collectives as coll
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.memory import ep_overlap_extra_layers as mem_ep_overlap_extra_layers
from xpuplan.perf.memory import expert_dp_size, expert_tensor_parallel, gradients_sharded
from xpuplan.perf.ops import expected_groups_hit
from xpuplan.perf.recompute import selective_modules
from xpuplan.perf.roofline import cost_adam_step, op_time
from xpuplan.train.arrays import PlanArrays
from xpuplan.train.cluster import Cluster
from xpuplan.train.compute import GEMM_BACKWARD_FACTOR, StageCompute
from xpuplan.train.layout import Layout
from xpuplan.workload.training import TrainingJob
from xpuplan.workload.vocabulary import TRAIN_PRECISIONS

#: Bytes per activation element sent by TP/SP, CP, EP and PP communication (bf16).
ACTIVATION_BYTES: Final = 2.0

#: Bytes per gradient element in data-parallel reductions: Megatron-LM accumulates and reduces
#: fp32 main gradients for bf16/fp16 runs, and torchtitan/FSDP2 default to reduce_dtype=float32.
#: The default of the training stacks' ``grad_reduce_bytes`` (Megatron-Bridge's performance recipes reduce in bf16).
GRAD_REDUCE_BYTES: Final = 4.0

#: Bytes per element of an FP8 MoE dispatch payload (DeepSeek-V3 §3.3.2: dispatch in FP8 with
#: per-tile scales, ~1 B per element; the combine stays bf16).
FP8_DISPATCH_BYTES: Final = 1.0

_FP8 = TRAIN_PRECISIONS.index("fp8")
_FP4 = TRAIN_PRECISIONS.index("fp4")

#: Bytes per element of a quantized GEMM input that Transformer Engine all-gathers under sequence parallelism in
#: FP8/FP4 training (``TrainingStack.tp_quantized_all_gather``): the norm output and the gradient are quantized
#: before the gather (``gather_along_first_dim(..., quantizer=...)``; ``_all_gather_fp8``, ``_all_gather_mxfp8``,
#: ``_all_gather_nvfp4`` in transformer_engine/pytorch/distributed.py), the reduce-scatters stay 16-bit. FP8: 1 B
#: (MXFP8's E8M0 scale per 32 elements adds 1/32); NVFP4: 0.5 B plus an FP8 scale per 16 elements.
QUANTIZED_GATHER_BYTES: Final = {_FP8: 1.0 + 1.0 / 32.0, _FP4: 0.5 + 1.0 / 16.0}
#: Vendors whose devices run the FP8 code that gathers quantized tensors (Transformer Engine, NVIDIA's and AMD's
#: ROCm port; torchao's float8 on CUDA and ROCm): a stack's ``tp_quantized_all_gather`` holds there; elsewhere
#: (Gaudi, NPUs, TPUs) the same framework name runs other FP8 code and gathers 16-bit.
QUANTIZED_GATHER_VENDORS: Final = ("NVIDIA", "AMD")

#: Bytes per expert of the token counts the MoE dispatcher exchanges over the EP group before each
#: all-to-all (int64 per expert; Megatron-Core gathers every rank's counts).
MOE_COUNT_BYTES_PER_EXPERT: Final = 8.0

#: Bytes per weight element in ZeRO/FSDP parameter all-gathers (bf16 working copy).
PARAM_GATHER_BYTES: Final = 2.0
#: ... and where an FP8 plan's stack keeps FP8 primary weights (``TrainingStack.fp8_primary_weights``:
#: Megatron-Core --fp8-param-gather all-gathers the FP8 weights).
FP8_PARAM_GATHER_BYTES: Final = 1.0

# What is overlapped is a property of the training stack (catalog/data/training_stacks.yaml):
# TP/SP collectives wait for their GEMMs unless the stack chunks them under the GEMMs (Transformer
# Engine --tp-comm-overlap, which needs SP); pipeline sends of interleaved schedules overlap the other
# virtual stage's compute where the stack sends asynchronously; MoE all-to-alls are exposed unless the
# schedule hides them (DualPipe). The job's ``tp_overlap`` / ``ep_overlap`` fractions, when given,
# override the stack.

#: ZeRO-3 bucket size of stacks that gather in fixed-size buckets (Megatron-Core distributed
#: optimizer / custom FSDP: ~40M elements per bucket), bytes of bf16 weights.
ZERO3_BUCKET_BYTES: Final = 40e6 * 2.0

#: Data-parallel gradient bucket size, elements (Megatron-LM buckets ~40M elements; PyTorch DDP
#: 25 MB): the last bucket's reduction cannot overlap the backward.
DP_BUCKET_ELEMENTS: Final = 40e6

#: Communication hidden under compute is not free: NCCL kernels occupy SMs and HBM bandwidth while
#: they run, so overlapped compute slows down. Fraction of the overlapped communication time added
#: to the step (overlap studies such as FLUX, Chang et al. 2024, and Domino, Wang et al. 2024, measure
#: 10-30% compute slowdown under concurrent collectives).
OVERLAP_INTERFERENCE: Final = 0.2

#: Host-side overhead per optimizer step not modelled elsewhere: data loading, Python and
#: framework bookkeeping, logging, loss-scale checks, learning-rate schedule.
STEP_OVERHEAD_S: Final = 0.05


# ---------------------------------------------------------------------------------------
# Small pure formulas
# ---------------------------------------------------------------------------------------
def pipeline_bubble_fraction(pp: int, n_microbatches: int, vpp: int = 1) -> float:
    """Idle fraction of a 1F1B (interleaved) pipeline relative to the ideal time: (pp-1)/(m·vpp)
    (Narayanan et al. 2021, Sec. 2.2)."""
    if min(pp, n_microbatches, vpp) < 1:
        raise ValueError("pp, n_microbatches and vpp must be >= 1")
    return (pp - 1) / (n_microbatches * vpp)


def exposed_after_overlap_s(comm_s: np.ndarray, window_s: np.ndarray, tail_fraction: np.ndarray) -> np.ndarray:
    """Communication left on the critical path when it overlaps a compute window of ``window_s``:
    max(comm - window, comm · tail) — the last bucket (``tail_fraction`` of the traffic) always waits —
    plus the slowdown the hidden part inflicts on the compute it overlaps
    (:data:`OVERLAP_INTERFERENCE` x the overlapped time)."""
    exposed = np.maximum(comm_s - window_s, comm_s * tail_fraction)
    return exposed + OVERLAP_INTERFERENCE * np.minimum(comm_s - exposed, window_s)


def group_time_s(kind: coll.CollectiveKind, n_bytes: np.ndarray, cluster: Cluster, size: np.ndarray,
                 stride: np.ndarray) -> np.ndarray:
    """A collective of process groups of ``size`` ranks ``stride`` apart (NCCL algorithms)."""
    return np.asarray(coll.time_group_s(kind, n_bytes, size, stride, cluster))


# ---------------------------------------------------------------------------------------
# Per micro-batch: TP/SP, CP, EP
# ---------------------------------------------------------------------------------------
def tp_comm_per_mb_s(lay: Layout, model: ModelArch, job: TrainingJob, cluster: Cluster, p: PlanArrays,
                     comp: StageCompute, stack: TrainingStack) -> np.ndarray:
    """Exposed TP all-reduces (or SP all-gather + reduce-scatter, same volume) of one micro-batch:
    one or two per layer (parallel attention/MLP blocks: one), per forward, backward and
    recomputed forward, plus the all-gathers that op-level selective checkpointing re-runs
    (``TrainingStack.selective_recompute`` op_sac, with SP: half a pass). On stacks that all-gather the
    quantized GEMM input in FP8/FP4 training (``tp_quantized_all_gather``: Transformer Engine, torchao's float8
    tensor parallelism), the all-gather half moves :data:`QUANTIZED_GATHER_BYTES` per element instead of 2.

    Where the stack overlaps TP communication (and SP is on, which Transformer Engine's overlap
    needs; a stack with ``tp_overlap_needs_sp`` False, such as XLA's collective matmul in MaxText,
    overlaps without it), each layer's collectives run chunk by chunk under its GEMMs (forward: the layer's
    forward GEMMs; backward: twice that): exposed is what exceeds the GEMMs, and at least one chunk
    (1/tp of the traffic: the ring exchange's first or last step has no GEMM to hide under), plus
    the interference of the hidden part (:func:`exposed_after_overlap_s`). A job's ``tp_overlap``
    fraction overrides the stack."""
    colls_per_layer = 1.0 if model.parallel_attn_mlp else 2.0
    tp_bytes = lay.mb * (lay.s / lay.cp) * lay.h * ACTIVATION_BYTES
    if stack.tp_quantized_all_gather and cluster.device.vendor in QUANTIZED_GATHER_VENDORS:
        # the all-gather half of the (all-gather + reduce-scatter = all-reduce) volume moves quantized inputs
        gather = np.full_like(lay.tp, ACTIVATION_BYTES)
        for code, q_bytes in QUANTIZED_GATHER_BYTES.items():
            gather = np.where(p.prec == code, q_bytes, gather)
        tp_bytes = tp_bytes * (gather + ACTIVATION_BYTES) / (2.0 * ACTIVATION_BYTES)
    t_tp_coll = group_time_s("all_reduce", tp_bytes, cluster, p.tp, np.ones_like(lay.tp))
    comm_layer = colls_per_layer * t_tp_coll
    # op-level selective checkpointing re-runs the sequence-parallel all-gathers (half of a pass's traffic:
    # all-gathers, not reduce-scatters) that feed the projections it recomputes
    sac_pass = np.where((stack.selective_recompute == "op_sac") & lay.sel_rec & lay.sp & (lay.tp > 1), 0.5, 0.0)
    passes = lay.passes + sac_pass
    if job.tp_overlap is not None:
        return lay.layers_stage * passes * comm_layer * (1.0 - job.tp_overlap)
    if not stack.tp_comm_overlap:
        return lay.layers_stage * passes * comm_layer
    tail = 1.0 / np.maximum(lay.tp, 1.0)
    fwd = exposed_after_overlap_s(comm_layer, comp.gemm_fwd, tail)
    bwd = exposed_after_overlap_s(comm_layer, GEMM_BACKWARD_FACTOR * comp.gemm_fwd, tail)
    overlapped = fwd * (1.0 + lay.full_rec + sac_pass) + bwd
    can_overlap = lay.sp if stack.tp_overlap_needs_sp else np.ones_like(lay.sp, dtype=bool)
    return lay.layers_stage * np.where(can_overlap, overlapped, passes * comm_layer)


def offload_per_mb_s(lay: Layout, comp: StageCompute, input_bytes: np.ndarray, host_bw: float,
                     layer_bytes: np.ndarray | None = None, offload_layers: np.ndarray | None = None,
                     module_bytes: np.ndarray | None = None) -> np.ndarray:
    """Exposed host-copy time of one micro-batch of an offloaded plan (0 for others).

    ``recompute="offload"``: each layer's input (``input_bytes``) goes to the host after the layer's forward
    and comes back before its backward. ``"layer_offload"``: every activation of ``offload_layers`` layers
    (``layer_bytes`` each) does. Fine-grained activation offloading: every layer's offloaded module inputs
    (``module_bytes`` per layer, except in the layers a partial plan recomputes in full) do. The copies use the device's host link (``host_bw`` bytes/s per direction)
    and run under the compute of the layer they belong to: the device-to-host copy under the forward, the
    prefetch under the (recomputed forward and) backward (MaxText's host offload and Megatron's activation
    offloading overlap both); what a copy takes beyond its window is exposed."""
    layers = np.maximum(lay.layers_stage, 1.0)
    fwd_window = comp.fwd / layers
    bwd_window = (comp.bwd + comp.recompute) / layers

    def exposed(n_bytes: np.ndarray) -> np.ndarray:
        t_copy = n_bytes / host_bw
        return np.maximum(0.0, t_copy - fwd_window) + np.maximum(0.0, t_copy - bwd_window)

    out = np.where(lay.offload, lay.layers_stage * exposed(input_bytes), 0.0)
    if layer_bytes is not None and offload_layers is not None:
        out = out + np.where(lay.layer_off, offload_layers * exposed(layer_bytes), 0.0)
    if module_bytes is not None:  # not in the layers a partial plan recomputes in full (they keep only their input)
        out = out + lay.layers_stage * (1.0 - lay.full_rec) * exposed(module_bytes)
    return out


def cp_comm_per_mb_s(lay: Layout, model: ModelArch, cluster: Cluster, p: PlanArrays, comp: StageCompute,
                     stack: TrainingStack) -> np.ndarray:
    """Exposed context-parallel communication of one micro-batch, by the stack's ``cp_algorithm``.

    Each rank holds s/cp tokens (two mirrored chunks: load-balanced causal split) and their K and V
    (``kv_heads``/tp heads, GQA; MLA's K and V are per query head, and so are a stack's that repeats the KV
    heads before the attention call, ``TrainingStack.attention_kv_repeat``). Per layer and forward pass:

    * ``ring`` (Megatron-Core/TE p2p, ring attention): cp-1 steps, each sending one KV block to the
      next rank while the current block's attention (1/cp of the layer's attention) runs; a step is
      exposed where its send outlasts its block (plus the interference of the hidden part,
      :func:`exposed_after_overlap_s`). Backward: each step also passes on the dK, dV accumulated
      so far (2x), and after the last block they take one more hop to their owner, exposed.
    * ``all_gather`` (Llama 3, MaxText): K and V all-gathered before the local attention, exposed;
      backward gathers them again and reduce-scatters dK, dV.
    * ``all_gather_async`` (PyTorch context_parallel, torchtitan): the same collectives issued
      asynchronously under the local block's attention (1/cp of the layer's).
    * ``all_to_all`` (DeepSpeed Ulysses, cp_comm_type a2a): one all-to-all of q, k, v (sequence to
      heads; KV heads replicated up to cp when fewer) before attention and one of the output after;
      backward the same volumes, exposed.

    Forward passes: the forward, plus the recomputed forward under full or selective recomputation
    (both re-run the attention, and with it its exchange)."""
    # a stack that repeats the KV heads before the attention call exchanges K and V of every query head
    heads = model.n_heads if model.mla is not None or stack.attention_kv_repeat else model.kv_heads
    kv_heads = np.maximum(1.0, heads / lay.tp)
    dqk, dv = model.qk_head_dim, model.v_head_dim
    chunk = lay.mb * (lay.s / lay.cp)  # tokens per rank
    kv_bytes = chunk * kv_heads * (dqk + dv) * ACTIVATION_BYTES  # this rank's K and V
    fwd_passes = 1.0 + lay.full_rec + lay.sel_rec
    algo = stack.cp_algorithm
    zero = np.zeros_like(lay.tp, dtype=float)
    if algo == "ring":
        t_kv = group_time_s("p2p", kv_bytes, cluster, p.cp, p.tp)
        steps = lay.cp - 1.0
        fwd = steps * exposed_after_overlap_s(t_kv, comp.attn_fwd / lay.cp, zero)
        # the dK, dV accumulators travel with the blocks and take one more hop home after the last
        # block's backward: that send has nothing left to hide under
        bwd = steps * exposed_after_overlap_s(2.0 * t_kv, comp.attn_bwd / lay.cp, zero) + t_kv
    elif algo in ("all_gather", "all_gather_async"):
        t_ag = group_time_s("all_gather", kv_bytes * lay.cp, cluster, p.cp, p.tp)
        t_rs = group_time_s("reduce_scatter", kv_bytes * lay.cp, cluster, p.cp, p.tp)
        if algo == "all_gather":
            fwd, bwd = t_ag, t_ag + t_rs
        else:
            fwd = exposed_after_overlap_s(t_ag, comp.attn_fwd / lay.cp, zero)
            bwd = exposed_after_overlap_s(t_ag + t_rs, comp.attn_bwd / lay.cp, zero)
    else:  # all_to_all (Ulysses)
        q_heads = np.maximum(1.0, model.n_heads / lay.tp)
        qkv_bytes = chunk * (q_heads * dqk + np.maximum(kv_heads, lay.cp) * (dqk + dv)) * ACTIVATION_BYTES
        o_bytes = chunk * q_heads * dv * ACTIVATION_BYTES
        fwd = group_time_s("all_to_all", qkv_bytes, cluster, p.cp, p.tp) + group_time_s(
            "all_to_all", o_bytes, cluster, p.cp, p.tp)
        bwd = fwd
    return lay.layers_stage * (fwd * fwd_passes + bwd)


def ep_overlap_paired_fraction(m: np.ndarray, pp: np.ndarray, vpp: np.ndarray) -> np.ndarray:
    """Share of a rank's micro-batch passes (forwards, and as many backwards) that Megatron-Core's batch-level
    EP overlap pairs with another micro-batch's pass (``ep_overlap_schedule`` ``combined_1f1b``): the rest run
    alone, their all-to-alls exposed.

    Without pipelining the first forward and the last backward run alone: 1 of m. With the interleaved
    schedule a rank runs 2·(pp-1-rank) + (vpp-1)·pp + 1 warm-up forwards before its first merged step (the
    ``+ 1``: one extra forward so that every merged forward and backward are independent) and as many
    cool-down backwards after the last, out of m·vpp passes of each kind; averaged over the ranks,
    (pp-1) + (vpp-1)·pp + 1. (Megatron-Core requires a virtual pipeline for the overlap when pp > 1; a
    plain 1F1B pipeline would run pp-1-rank warm-up forwards, (pp-1)/2 + 1 on average.)"""
    chunks = m * vpp
    warm = np.where(pp > 1, np.where(vpp > 1, (pp - 1.0) + (vpp - 1.0) * pp, (pp - 1.0) / 2.0) + 1.0, 1.0)
    return np.clip(1.0 - warm / chunks, 0.0, 1.0)


def ep_overlap_fraction(p: PlanArrays, stack: TrainingStack, job: TrainingJob) -> np.ndarray:
    """Per plan, the fraction of the MoE all-to-all the schedule hides: the job's ``ep_overlap`` when given,
    else the stack's ``ep_overlap``; a plan that turns the stack's opt-in overlap on (``ParallelPlan.ep_overlap``)
    hides the stack's ``ep_overlap_opt_in``."""
    base = stack.ep_overlap if job.ep_overlap is None else job.ep_overlap
    return np.where(p.epo > 0, stack.ep_overlap_opt_in, base).astype(float)


def ep_overlap_extra_layers(p: PlanArrays, stack: TrainingStack, job: TrainingJob, n_layers: int) -> np.ndarray:
    """Per plan, the layer-micro-batches of activations the first stage holds beyond its schedule's own because
    Megatron-Core's batch-level EP overlap (``ep_overlap_schedule`` ``combined_1f1b``) is on
    (:func:`xpuplan.perf.memory.ep_overlap_extra_layers`: one layer, pipelined also one model chunk). 0 for plans
    without the overlap and for schedules that pair passes otherwise (DualPipe: its pp + 1 micro-batches and two
    stages per rank are the memory model's ``dualpipe``, :func:`xpuplan.perf.memory.training_memory_arrays`)."""
    if stack.ep_overlap_schedule != "combined_1f1b":
        return np.zeros(len(p))
    on = (ep_overlap_fraction(p, stack, job) > 0) & (p.ep > 1)
    return np.where(on, mem_ep_overlap_extra_layers(n_layers, p.pp, p.vpp), 0.0)


def ep_comm_per_mb_s(lay: Layout, model: ModelArch, job: TrainingJob, cluster: Cluster, p: PlanArrays,
                     stack: TrainingStack, comp: StageCompute | None = None) -> np.ndarray:
    """Exposed MoE all-to-alls (dispatch and combine) of one micro-batch: what the schedule does not
    hide (the stack's ``ep_overlap``, or the job's when given). A schedule hides one micro-batch's
    all-to-alls under another micro-batch's compute (DualPipe, Megatron-Core's 1F1B A2A overlap), so it
    cannot hide more than that compute (``comp.per_mb``, the stage's forward and backward of one
    micro-batch): exposed = max(comm - compute, (1 - ep_overlap·paired)·comm), where paired is 1 for a ``steady``
    overlap (its fraction allows for the warm-up), except under DualPipe without a pipeline, where a rank's m
    micro-batches pair up consecutively, (m-1)/m (one micro-batch per step has no partner), and the share of passes
    the schedule pairs for Megatron-Core's ``combined_1f1b``
    (:func:`ep_overlap_paired_fraction`: the warm-up forwards and cool-down backwards run alone). The hidden rest costs the compute
    under it the share of SMs the exchange kernels hold (``stack.ep_overlap_sm_share``,
    :data:`~xpuplan.catalog.stacks.EP_OVERLAP_SM_SHARE`): exposed + hidden·share.

    Tokens per rank: the micro-batch's sequence chunk, split by TP under SP. Each sends top_k
    copies of its hidden state (bf16; dispatch in FP8 where the stack does it in FP8 training).
    Stacks that de-duplicate per node (DeepEP) send a token across the network once per destination
    node — min(the model's node limit, the EP nodes its top_k experts fall on) copies, of which
    (nodes-1)/nodes leave the node — and forward it over the scale-up links (:func:`moe_dispatch_dedup_s`)."""
    if model.moe is None:
        return np.zeros_like(lay.tp)
    ep_tokens = lay.mb * (lay.s / lay.cp) / np.where(lay.sp, lay.tp, 1.0)
    combine_bytes = ep_tokens * model.moe.top_k * lay.h * ACTIVATION_BYTES
    stride = expert_group_strides(p, stack)[0]

    def a2a(n_bytes: np.ndarray) -> np.ndarray:
        if stack.moe_node_dedup:
            return moe_dispatch_dedup_s(n_bytes, model, cluster, p.ep, stride)
        return group_time_s("all_to_all", n_bytes, cluster, p.ep, stride)

    fp8_dispatch = stack.moe_fp8_dispatch & ((p.prec == _FP8) | (p.prec == _FP4))
    if fp8_dispatch.any():
        t_a2a = a2a(combine_bytes * np.where(fp8_dispatch, FP8_DISPATCH_BYTES / ACTIVATION_BYTES, 1.0)) + a2a(
            combine_bytes)
    else:  # dispatch and combine move the same bytes
        t_a2a = 2.0 * a2a(combine_bytes)
    moe_layers_stage = np.where(lay.multi_stage, np.minimum(lay.Ls, model.n_moe_layers), float(model.n_moe_layers))
    overlap = ep_overlap_fraction(p, stack, job)
    if stack.ep_overlap_schedule == "combined_1f1b":
        paired = ep_overlap_paired_fraction(lay.m, lay.pp, lay.vpp)
    elif stack.pipeline_schedule == "dualpipe":
        # DualPipe overlaps a forward chunk of one micro-batch with a backward chunk of another (its fraction allows
        # for its warm-up); without a pipeline there is no DualPipe, and pairing consecutive micro-batches leaves one
        # of a rank's m alone (all of them with one micro-batch per step)
        paired = np.where(lay.pp > 1, 1.0, np.clip((lay.m - 1.0) / np.maximum(lay.m, 1.0), 0.0, 1.0))
    else:
        paired = np.ones_like(lay.m)
    hidden = overlap * paired
    # selective recomputation of the whole MoE block (Megatron-Core --recompute-modules moe) dispatches and combines
    # again in the backward, as full recomputation does
    moe_rec = lay.sel_rec * float("moe" in selective_modules(model, job.recompute_modules))
    total = moe_layers_stage * ((lay.passes + moe_rec) * t_a2a
                                + moe_dispatch_fixed_s(lay, model, cluster, p, stride, moe_rec))
    exposed = total * (1.0 - hidden)
    if comp is not None:
        exposed = np.where(overlap > 0, np.maximum(exposed, total - comp.per_mb), exposed)
    # the hidden part is not free: its kernels hold a share of the SMs the hiding compute would use
    return exposed + (total - exposed) * stack.ep_overlap_sm_share


def moe_dispatch_fixed_s(lay: Layout, model: ModelArch, cluster: Cluster, p: PlanArrays,
                         stride: np.ndarray, moe_rec: np.ndarray | float = 0.0) -> np.ndarray:
    """Fixed (latency) cost of one MoE layer's dispatch per micro-batch, paid in each forward (the
    backward reuses the split sizes): the exchange of per-expert token counts over the EP group (an
    all-gather of n_experts counts per rank, latency-bound; 0 without EP). A recomputed forward routes
    again and pays it once more. (The device-host sync that follows it is compute time, paid with
    or without EP: :data:`xpuplan.train.compute.MOE_HOST_SYNC_S`.) ``moe_rec``: 1 where selective recomputation
    re-runs the MoE block (its forward routes again too)."""
    assert model.moe is not None
    counts = np.full_like(lay.tp, model.moe.n_routed_experts * MOE_COUNT_BYTES_PER_EXPERT, dtype=float)
    t_counts = group_time_s("all_gather", counts * p.ep, cluster, p.ep, stride)
    return (1.0 + lay.full_rec + moe_rec) * t_counts


def expert_group_strides(p: PlanArrays, stack: TrainingStack) -> tuple[np.ndarray, np.ndarray]:
    """(rank stride of the EP group, rank stride of the expert-data-parallel group) of each plan, from the one
    expert-TP rule (:func:`~xpuplan.perf.memory.expert_tensor_parallel`). Experts split over TP (EP carved out of
    dp·cp): the EP group strides over TP·CP ranks and the ranks holding the same experts sit every tp·ep-th rank.
    Whole experts (MoE parallel folding, or a stack with ``expert_tp_one``): the EP group takes adjacent ranks,
    keeping as much of the exchange inside a scale-up domain as it can, and the expert-DP group every ep-th."""
    split = expert_tensor_parallel(p.tp, p.dp * p.cp, p.ep, stack.expert_tp_one) == p.tp
    return np.where(split, p.tp * p.cp, 1), np.where(split, p.tp * p.ep, p.ep)


def moe_dispatch_dedup_s(n_bytes: np.ndarray, model: ModelArch, cluster: Cluster, ep: np.ndarray,
                         stride: np.ndarray) -> np.ndarray:
    """One node-de-duplicated MoE all-to-all (DeepEP-style) of ``n_bytes`` per rank (= tokens x top_k
    x hidden x bytes): across the network each token goes once per destination node,
    min(node_limit, the nodes its experts fall on: :func:`expected_groups_hit`) copies of which
    (nodes-1)/nodes leave the node; inside the node
    the top_k copies are forwarded over the scale-up links. Both run at once (max), plus the
    latency steps of a hierarchical all-to-all. A group inside one domain is a plain all-to-all."""
    assert model.moe is not None
    local, nodes = coll.group_layout(ep, stride, cluster.domain_size)
    local_f = np.asarray(local, dtype=float)
    nodes_f = np.asarray(nodes, dtype=float)
    top_k = float(model.moe.top_k)
    limit = float(model.moe.node_limit or model.moe.top_k)
    hit = expected_groups_hit(model.moe.n_routed_experts, model.moe.top_k, nodes_f)
    copies = np.minimum(limit, hit)
    per_copy = n_bytes / top_k
    t_inter = per_copy * copies * (nodes_f - 1.0) / np.maximum(nodes_f, 1.0) / cluster.scale_out.bus_bw
    t_intra = n_bytes * (local_f - 1.0) / np.maximum(local_f, 1.0) / cluster.scale_up.bus_bw
    lat = (np.asarray(coll.latency_steps(local_f)) * cluster.scale_up.latency_s
           + np.asarray(coll.latency_steps(nodes_f)) * cluster.scale_out.latency_s)
    spanning = np.maximum(t_intra, t_inter) + lat
    inside = group_time_s("all_to_all", n_bytes, cluster, ep, stride)
    return np.where(nodes_f > 1.0, spanning, inside)


# ---------------------------------------------------------------------------------------
# Pipeline
# ---------------------------------------------------------------------------------------
def dualpipe_bubble_s(pp: np.ndarray, fwd_s: np.ndarray, bwd_s: np.ndarray, wgrad_s: np.ndarray) -> np.ndarray:
    """DualPipe's bubble (DeepSeek-V3, arXiv 2412.19437 Table 2; deepseek-ai/DualPipe README): (PP/2 - 1)(F&B + B - 3W)
    with F a stage's forward chunk, B its full backward chunk, W the backward-for-weights part of it and F&B a forward
    and a backward chunk run overlapped (their compute adds: F + B). 1F1B's is (PP - 1)(F + B)."""
    fb = fwd_s + bwd_s
    return np.maximum(np.asarray(pp, dtype=float) / 2.0 - 1.0, 0.0) * np.maximum(fb + bwd_s - 3.0 * wgrad_s, 0.0)


def pipeline_s(lay: Layout, cluster: Cluster, p: PlanArrays, t_mb: np.ndarray,
               stack: TrainingStack, comp: StageCompute | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(bubble, stage hand-offs) per step: the 1F1B bubble (pp-1)/vpp micro-batch times and two
    point-to-point sends per micro-batch and virtual stage (Megatron scatter/gather: 1/tp per rank).
    A stack whose ``pipeline_schedule`` is ``dualpipe`` has :func:`dualpipe_bubble_s` instead, its F, B and W the
    stage's forward, backward and weight-gradient share of ``t_mb`` (W: half the backward beside the attention core's,
    whose backward is all input gradient; needs ``comp``).

    Interleaved schedules (vpp > 1) of stacks that send asynchronously overlap each send with the
    other virtual stage's compute: only the warm-up and cool-down sends (2·(pp-1) of the
    2·(m·vpp + pp - 1)) wait, the rest hides under the m micro-batches' compute
    (:func:`exposed_after_overlap_s`, with its interference)."""
    bubble = (lay.pp - 1.0) / lay.vpp * t_mb
    if stack.pipeline_schedule == "dualpipe" and comp is not None:
        scale = t_mb / np.maximum(comp.fwd + comp.bwd, 1e-30)  # the micro-batch's other terms, pro rata
        attn_bwd_stage = comp.attn_bwd * lay.layers_stage
        wgrad = np.maximum(comp.bwd - attn_bwd_stage, 0.0) / 2.0
        bubble = np.where(lay.pp > 1, dualpipe_bubble_s(lay.pp, comp.fwd * scale, comp.bwd * scale, wgrad * scale), 0.0)
    pp_bytes = lay.mb * (lay.s / lay.cp) * lay.h * ACTIVATION_BYTES / lay.tp
    t_p2p = group_time_s("p2p", pp_bytes, cluster, p.pp, p.tp * p.cp * p.dp)
    n_sends = 2.0 * (lay.m * lay.vpp + lay.pp - 1.0)
    sends = n_sends * t_p2p
    if stack.p2p_overlap:
        tail = 2.0 * (lay.pp - 1.0) / n_sends
        sends = np.where(lay.vpp > 1, exposed_after_overlap_s(sends, lay.m * t_mb, tail), sends)
    pp_comm = np.where(lay.multi_stage, sends, 0.0)
    return bubble, pp_comm


# ---------------------------------------------------------------------------------------
# Data parallelism / ZeRO
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Trainable:
    """Parameters per device the optimizer updates (dense, expert) and bytes per frozen-or-gathered weight."""

    dense: np.ndarray
    expert: np.ndarray
    gather_bytes_per_param: float | np.ndarray


def zero3_collectives_per_pass(lay: Layout, model: ModelArch, stack: TrainingStack,
                               stage_weight_bytes: np.ndarray) -> np.ndarray:
    """Number of all-gathers (and of reduce-scatters) one pass over a stage issues under ZeRO-3/FSDP,
    by the stack's granularity: one per parameter tensor (DeepSpeed ZeRO-3: q, k, v, o, the MLP's
    2-3 matrices and the norms of every layer), one per wrapped unit (FSDP: one per Transformer
    block), or one per fixed-size bucket (:data:`ZERO3_BUCKET_BYTES`, Megatron-Core)."""
    if stack.zero3_granularity == "parameter":
        per_layer = 4.0 + (3.0 if model.mlp == "gated" else 2.0) + float(model.layer_norms)
        return lay.layers_stage * per_layer
    if stack.zero3_granularity == "unit":
        return lay.layers_stage.copy()
    return np.maximum(1.0, np.ceil(stage_weight_bytes / ZERO3_BUCKET_BYTES))


def dp_comm_s(lay: Layout, model: ModelArch, job: TrainingJob, cluster: Cluster, p: PlanArrays, comp: StageCompute,
              dense_p: np.ndarray, expert_p: np.ndarray, tr: Trainable,
              stack: TrainingStack) -> tuple[np.ndarray, np.ndarray]:
    """(gradient/parameter traffic of DDP and ZeRO-1/2, ZeRO-3 per-micro-batch traffic), exposed.

    Gradients are all-reduced (ZeRO-0) or reduce-scattered (1, 2) in buckets overlapping the
    backward where the stack overlaps them (else after it), ``stack.grad_reduce_bytes`` per element (fp32 main
    gradients, or bf16 where the stack reduces in bf16). ZeRO-1 (Megatron's distributed
    optimizer) accumulates full gradients locally over the micro-batches, pipelined or not, and
    reduce-scatters once per step; ZeRO-2 without pipelining keeps only its gradient shard, so it
    reduce-scatters every micro-batch; with pipelining (pp > 1) ZeRO-2 accumulates a full-size
    buffer and reduce-scatters once per step like ZeRO-1, and the memory model holds that buffer
    (:func:`xpuplan.perf.memory.gradients_sharded`). ZeRO-1/2 all-gather updated parameters under
    the next forward.

    ZeRO-3 / FSDP gathers the stage's weights for the forward, again for the backward (and again
    for the recomputed forward under full recomputation) and reduce-scatters its gradients, per
    micro-batch, in :func:`zero3_collectives_per_pass` collectives each paying its latency
    (ring across domains: (n-1)·alpha with NCCL). With prefetch only what exceeds compute, plus one
    collective, waits; without it, all of it.

    Stacks with ``zero3_hybrid`` (MaxText multislice: ``ici_fsdp`` inside an ICI slice,
    ``dcn_data_parallelism`` across slices) shard only inside the scale-up domain: the gathers and
    reduce-scatters run over the group's ranks in one domain, and each device's gradient shard
    (1/local of the gradients) is all-reduced once per step across the domains over the scale-out
    network (:func:`cross_domain_all_reduce_s`), overlapping the backward like data-parallel buckets
    (the last bucket waits)."""
    dpcp = p.dp * p.cp
    edp = expert_dp_size(p.tp, dpcp, p.ep, stack.expert_tp_one)
    g_dense = tr.dense * stack.grad_reduce_bytes * job.dp_compression
    g_expert = tr.expert * stack.grad_reduce_bytes * job.dp_compression
    e_stride = expert_group_strides(p, stack)[1]

    def over_dp(kind: coll.CollectiveKind, dense_bytes: np.ndarray, expert_bytes: np.ndarray,
                n_coll: np.ndarray | float = 1.0) -> np.ndarray:
        return n_coll * (group_time_s(kind, dense_bytes / n_coll, cluster, dpcp, p.tp) + group_time_s(
            kind, expert_bytes / n_coll, cluster, edp, e_stride))

    ar = over_dp("all_reduce", g_dense, g_expert)
    rs = over_dp("reduce_scatter", g_dense, g_expert)
    ag_train = over_dp("all_gather", tr.dense * PARAM_GATHER_BYTES, tr.expert * PARAM_GATHER_BYTES)
    tail = np.minimum(1.0, DP_BUCKET_ELEMENTS * stack.grad_reduce_bytes / np.maximum(g_dense + g_expert, 1.0))
    if not stack.grad_reduce_overlap:
        tail = np.ones_like(tail)
    zero, bwd = p.zero, comp.bwd
    rs_once = exposed_after_overlap_s(rs, bwd, tail)
    per_mb = (zero == 2) & gradients_sharded(zero, p.pp)  # ZeRO-2 without pipelining: every micro-batch
    grad_exposed = np.where(
        zero == 0, exposed_after_overlap_s(ar, bwd, tail),
        np.where((zero == 1) | (zero == 2), np.where(per_mb, lay.m, 1.0) * rs_once, 0.0))
    param_exposed = np.where((zero == 1) | (zero == 2), exposed_after_overlap_s(ag_train, comp.fwd, tail), 0.0)
    dp_comm = np.where(dpcp > 1, grad_exposed + param_exposed, 0.0)
    # ---- ZeRO-3 / FSDP ----
    w_dense = dense_p * tr.gather_bytes_per_param
    w_expert = expert_p * tr.gather_bytes_per_param
    n_coll = zero3_collectives_per_pass(lay, model, stack, w_dense + w_expert)
    n_rs = zero3_collectives_per_pass(lay, model, stack, g_dense + g_expert)  # buckets of what is reduced
    if stack.zero3_hybrid:
        # shard inside the scale-up domain (ICI slice); all-reduce the shard across domains once per step
        d_local, d_nodes = coll.group_layout(dpcp, p.tp, cluster.domain_size)
        e_local, e_nodes = coll.group_layout(edp, e_stride, cluster.domain_size)
        d_loc, e_loc = np.asarray(d_local), np.asarray(e_local)
        ag_all = n_coll * (group_time_s("all_gather", w_dense / n_coll, cluster, d_loc, p.tp) + group_time_s(
            "all_gather", w_expert / n_coll, cluster, e_loc, e_stride))
        rs_all = n_rs * (group_time_s("reduce_scatter", g_dense / n_rs, cluster, d_loc, p.tp) + group_time_s(
            "reduce_scatter", g_expert / n_rs, cluster, e_loc, e_stride))
        cross = (cross_domain_all_reduce_s(g_dense / d_loc, cluster, np.asarray(d_nodes), p.tp * d_loc)
                 + cross_domain_all_reduce_s(g_expert / e_loc, cluster, np.asarray(e_nodes), e_stride * e_loc))
        cross_exposed = exposed_after_overlap_s(cross, bwd, tail)
    else:
        ag_all = over_dp("all_gather", w_dense, w_expert, n_coll)
        rs_all = over_dp("reduce_scatter", g_dense, g_expert, n_rs)
        cross_exposed = np.zeros_like(dp_comm)
    regather = lay.full_rec if stack.zero3_regather_on_recompute else np.zeros_like(lay.full_rec)
    z3_mb = (2.0 + regather) * ag_all + rs_all
    if stack.zero3_prefetch:
        z3 = lay.m * exposed_after_overlap_s(z3_mb, comp.per_mb + comp.recompute, 1.0 / n_coll)
    else:
        z3 = lay.m * z3_mb
    return dp_comm, np.where((zero == 3) & (dpcp > 1), z3 + cross_exposed, 0.0)


def cross_domain_all_reduce_s(n_bytes: np.ndarray, cluster: Cluster, nodes: np.ndarray,
                              stride: np.ndarray) -> np.ndarray:
    """All-reduce of ``n_bytes`` per device among ``nodes`` ranks, one per scale-up domain (``stride``
    devices apart, at least a domain), so entirely over the scale-out network: the cross-slice
    gradient all-reduce of a multislice TPU job over the DCN. 0 for a single domain."""
    return group_time_s("all_reduce", n_bytes, cluster, nodes, stride)


# ---------------------------------------------------------------------------------------
# Optimizer step
# ---------------------------------------------------------------------------------------
def optimizer_s(cluster: Cluster, p: PlanArrays, device: Device, eff: Efficiency, tr: Trainable,
                grad_bytes_per_param: np.ndarray, whole_experts: bool = False) -> np.ndarray:
    """Memory-bound Adam over the local shard of the trainable parameters, plus gradient-norm
    clipping (read the local gradients, one scalar all-reduce over every device). ``whole_experts``: the
    stack's expert layers run at expert-TP 1 (``TrainingStack.expert_tp_one``)."""
    zero = p.zero
    dpcp = p.dp * p.cp
    edp = expert_dp_size(p.tp, dpcp, p.ep, whole_experts)
    shard_dense = np.where(zero >= 1, dpcp, 1).astype(float)
    shard_exp = np.where(zero >= 1, edp, 1).astype(float)
    opt_params = tr.dense / shard_dense + tr.expert / shard_exp
    adam_4 = op_time(cost_adam_step(1e9, 4.0), device, "bf16", eff)
    adam_2 = op_time(cost_adam_step(1e9, 2.0), device, "bf16", eff)
    adam_s_per_param = np.where(grad_bytes_per_param >= 4.0, adam_4.time_s - adam_4.overhead_s,
                                adam_2.time_s - adam_2.overhead_s) / 1e9
    bw = device.memory_bandwidth * eff.memory_bw_fraction
    grads_local = (tr.dense + tr.expert) / np.where(gradients_sharded(zero, p.pp), shard_dense, 1.0)
    clip = (grads_local * grad_bytes_per_param / bw
            + 2.0 * coll.latency_steps(float(cluster.n_devices)) * cluster.scale_out.latency_s)
    return opt_params * adam_s_per_param + adam_4.overhead_s + clip
