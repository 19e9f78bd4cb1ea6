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
from xpuplan.models.arch import ModelArch
from xpuplan.perf import collectives as coll
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.roofline import cost_adam_step, op_time
from xpuplan.train.arrays import PlanArrays
from xpuplan.train.cluster import Cluster
from xpuplan.train.compute import StageCompute
from xpuplan.train.layout import Layout
from xpuplan.workload.training import TrainingJob

#: Bytes per activation element sent by TP/SP, CP, EP and PP communication (bf16).
ACTIVATION_BYTES: Final = 2.0

#: Bytes per gradient element in data-parallel reductions: Megatron-LM accumulates and reduces
#: fp32 main gradients for bf16/fp16 runs, and torchtitan/FSDP2 default to reduce_dtype=float32.
GRAD_REDUCE_BYTES: Final = 4.0

#: Bytes per weight element in ZeRO/FSDP parameter all-gathers (bf16 working copy).
PARAM_GATHER_BYTES: Final = 2.0

# TP/SP collectives and MoE all-to-alls are exposed (on the critical path) by default: Megatron-LM's
# TP all-reduces wait for their GEMMs unless Transformer Engine's --tp-comm-overlap is on, and most
# frameworks run the expert dispatch/combine between GEMMs (DeepSeek's DualPipe hides them). The
# job's ``tp_overlap`` / ``ep_overlap`` fractions say how much a given stack hides.

#: Data-parallel gradient bucket size, bytes (Megatron-LM buckets ~40M fp32 elements; PyTorch DDP
#: 25 MB): the last bucket's reduction cannot overlap the backward.
DP_BUCKET_BYTES: Final = 40e6 * GRAD_REDUCE_BYTES

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
def tp_comm_per_mb_s(lay: Layout, model: ModelArch, job: TrainingJob, cluster: Cluster, p: PlanArrays) -> np.ndarray:
    """Exposed TP all-reduces (or SP all-gather + reduce-scatter, same volume) of one micro-batch:
    one or two per layer (parallel attention/MLP blocks: one), per forward, backward and
    recomputed forward."""
    colls_per_layer = 1.0 if model.parallel_attn_mlp else 2.0
    tp_bytes = lay.mb * (lay.s / lay.cp) * lay.h * ACTIVATION_BYTES
    t_tp_coll = group_time_s("all_reduce", tp_bytes, cluster, p.tp, np.ones_like(lay.tp))
    return lay.layers_stage * colls_per_layer * lay.passes * t_tp_coll * (1.0 - job.tp_overlap)


def cp_comm_per_mb_s(lay: Layout, model: ModelArch, cluster: Cluster, p: PlanArrays, comp: StageCompute) -> np.ndarray:
    """Ring-attention KV exchange of one micro-batch beyond what the attention it feeds hides."""
    heads = model.n_heads if model.mla is not None else model.kv_heads
    kv_width = np.maximum(1.0, heads / lay.tp) * (model.qk_head_dim + model.v_head_dim)
    kv_bytes = lay.mb * (lay.s / lay.cp) * kv_width * ACTIVATION_BYTES
    t_kv = group_time_s("p2p", kv_bytes, cluster, p.cp, p.tp)
    cp_fwd = np.maximum(0.0, (lay.cp - 1.0) * t_kv - comp.attn_fwd)
    cp_bwd = np.maximum(0.0, (lay.cp - 1.0) * 2.0 * t_kv - comp.attn_bwd)
    return lay.layers_stage * (cp_fwd * (1.0 + lay.full_rec) + cp_bwd)


def ep_comm_per_mb_s(lay: Layout, model: ModelArch, job: TrainingJob, cluster: Cluster, p: PlanArrays) -> np.ndarray:
    """Exposed MoE all-to-alls (dispatch and combine) of one micro-batch."""
    if model.moe is None:
        return np.zeros_like(lay.tp)
    ep_tokens = lay.mb * (lay.s / lay.cp) / np.where(lay.sp, lay.tp, 1.0)
    a2a_bytes = ep_tokens * model.moe.top_k * lay.h * ACTIVATION_BYTES
    t_a2a = group_time_s("all_to_all", a2a_bytes, cluster, p.ep, p.tp * p.cp)
    moe_layers_stage = np.where(lay.multi_stage, np.minimum(lay.Ls, model.n_moe_layers), float(model.n_moe_layers))
    return moe_layers_stage * 2.0 * lay.passes * t_a2a * (1.0 - job.ep_overlap)


# ---------------------------------------------------------------------------------------
# Pipeline
# ---------------------------------------------------------------------------------------
def pipeline_s(lay: Layout, cluster: Cluster, p: PlanArrays, t_mb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(bubble, stage hand-offs) per step: the 1F1B bubble (pp-1)/vpp micro-batch times and two
    point-to-point sends per micro-batch and virtual stage (Megatron scatter/gather: 1/tp per rank)."""
    bubble = (lay.pp - 1.0) / lay.vpp * t_mb
    pp_bytes = lay.mb * (lay.s / lay.cp) * lay.h * ACTIVATION_BYTES / lay.tp
    t_p2p = group_time_s("p2p", pp_bytes, cluster, p.pp, p.tp * p.cp * p.dp)
    pp_comm = np.where(lay.multi_stage, 2.0 * (lay.m * lay.vpp + lay.pp - 1.0) * t_p2p, 0.0)
    return bubble, pp_comm


# ---------------------------------------------------------------------------------------
# Data parallelism / ZeRO
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Trainable:
    """Parameters per device the optimizer updates (dense, expert) and bytes per frozen-or-gathered weight."""

    dense: np.ndarray
    expert: np.ndarray
    gather_bytes_per_param: float


def dp_comm_s(lay: Layout, job: TrainingJob, cluster: Cluster, p: PlanArrays, comp: StageCompute,
              dense_p: np.ndarray, expert_p: np.ndarray, tr: Trainable) -> tuple[np.ndarray, np.ndarray]:
    """(gradient/parameter traffic of DDP and ZeRO-1/2, ZeRO-3 per-micro-batch traffic), exposed.

    Gradients are all-reduced (ZeRO-0) or reduce-scattered (1, 2; stage 2 once per micro-batch) in
    buckets overlapping the backward; ZeRO-1/2 all-gather updated parameters under the next forward.
    ZeRO-3 / FSDP gathers weights for forward and backward and reduce-scatters gradients per
    micro-batch, prefetched one layer (FSDP unit) ahead: only what exceeds compute, plus the first
    gather, waits."""
    dpcp = p.dp * p.cp
    edp = np.maximum(dpcp // p.ep, 1)
    g_dense = tr.dense * GRAD_REDUCE_BYTES * job.dp_compression
    g_expert = tr.expert * GRAD_REDUCE_BYTES * job.dp_compression

    def over_dp(kind: coll.CollectiveKind, dense_bytes: np.ndarray, expert_bytes: np.ndarray) -> np.ndarray:
        return group_time_s(kind, dense_bytes, cluster, dpcp, p.tp) + group_time_s(
            kind, expert_bytes, cluster, edp, p.tp * p.ep)

    ar = over_dp("all_reduce", g_dense, g_expert)
    rs = over_dp("reduce_scatter", g_dense, g_expert)
    ag_train = over_dp("all_gather", tr.dense * PARAM_GATHER_BYTES, tr.expert * PARAM_GATHER_BYTES)
    ag_all = over_dp("all_gather", dense_p * tr.gather_bytes_per_param, expert_p * tr.gather_bytes_per_param)
    tail = np.minimum(1.0, DP_BUCKET_BYTES / np.maximum(g_dense + g_expert, 1.0))
    zero, bwd = p.zero, comp.bwd
    grad_exposed = np.where(
        zero == 0, exposed_after_overlap_s(ar, bwd, tail),
        np.where(zero == 1, exposed_after_overlap_s(rs, bwd, tail),
                 np.where(zero == 2, lay.m * exposed_after_overlap_s(rs, bwd, tail), 0.0)))
    param_exposed = np.where((zero == 1) | (zero == 2), exposed_after_overlap_s(ag_train, comp.fwd, tail), 0.0)
    dp_comm = np.where(dpcp > 1, grad_exposed + param_exposed, 0.0)
    z3_mb = 2.0 * ag_all + rs
    z3 = lay.m * exposed_after_overlap_s(z3_mb, comp.per_mb + comp.recompute, 1.0 / lay.layers_stage)
    return dp_comm, np.where((zero == 3) & (dpcp > 1), z3, 0.0)


# ---------------------------------------------------------------------------------------
# Optimizer step
# ---------------------------------------------------------------------------------------
def optimizer_s(cluster: Cluster, p: PlanArrays, device: Device, eff: Efficiency, tr: Trainable,
                grad_bytes_per_param: np.ndarray) -> np.ndarray:
    """Memory-bound Adam over the local shard of the trainable parameters, plus gradient-norm
    clipping (read the local gradients, one scalar all-reduce over every device)."""
    zero = p.zero
    dpcp = p.dp * p.cp
    edp = np.maximum(dpcp // p.ep, 1)
    shard_dense = np.where(zero >= 1, dpcp, 1).astype(float)
    shard_exp = np.where(zero >= 1, edp, 1).astype(float)
    opt_params = tr.dense / shard_dense + tr.expert / shard_exp
    adam_4 = op_time(cost_adam_step(1e9, 4.0), device, "bf16", eff)
    adam_2 = op_time(cost_adam_step(1e9, 2.0), device, "bf16", eff)
    adam_s_per_param = np.where(grad_bytes_per_param >= 4.0, adam_4.time_s - adam_4.overhead_s,
                                adam_2.time_s - adam_2.overhead_s) / 1e9
    bw = device.memory_bandwidth * eff.memory_bw_fraction
    grads_local = (tr.dense + tr.expert) / np.where(zero >= 2, shard_dense, 1.0)
    clip = (grads_local * grad_bytes_per_param / bw
            + 2.0 * coll.latency_steps(float(cluster.n_devices)) * cluster.scale_out.latency_s)
    return opt_params * adam_s_per_param + adam_4.overhead_s + clip
