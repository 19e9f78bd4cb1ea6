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

Every overlap assumption and factor is a named constant below, explained where defined.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np

from xpuplan.catalog.device import Device
from xpuplan.models.arch import ModelArch
from xpuplan.perf import collectives as coll
from xpuplan.perf.efficiency import Efficiency
from xpuplan.perf.flops import flops_training_per_token
from xpuplan.perf.memory import (
    NF4_OVERHEAD_BYTES_PER_PARAM,
    RUNTIME_OVERHEAD_BYTES,
    activation_bytes_output,
    activation_bytes_per_layer,
    default_recipe_for,
    lora_params,
    params_per_device,
    state_recipe,
)
from xpuplan.perf.ops import head_ops, layer_ops
from xpuplan.perf.params import param_breakdown
from xpuplan.perf.roofline import (
    OpCost,
    compute_peak,
    cost_adam_step,
    cost_attention,
    cost_gemm,
    op_time,
)
from xpuplan.train.cluster import Cluster
from xpuplan.train.plan import PRECISIONS, RECOMPUTE_MODES, ParallelPlan
from xpuplan.workload.training import TrainingJob

# ---------------------------------------------------------------------------------------
# Named assumptions
# ---------------------------------------------------------------------------------------
#: Fused attention backward over forward time: FlashAttention-2's backward runs 5 matmuls
#: (recomputing S and P) against the forward's 2, i.e. 2.5x the forward FLOPs (Dao 2023, Sec. 3.1).
ATTENTION_BACKWARD_FACTOR: Final = 2.5

#: Backward of a GEMM with trainable weights: input gradient + weight gradient, each as large as
#: the forward GEMM.
GEMM_BACKWARD_FACTOR: Final = 2.0

#: Backward of a GEMM whose weights are frozen (LoRA/QLoRA base): input gradient only.
FROZEN_GEMM_BACKWARD_FACTOR: Final = 1.0

#: Backward of an elementwise op (norm, activation, residual): reads the upstream gradient and the
#: saved input, writes the input gradient: ~2x the forward's bytes.
ELEMENTWISE_BACKWARD_FACTOR: Final = 2.0

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

#: Causal attention with CP: load-balanced ring attention computes half of the (s/cp) x s scores
#: each rank would compute without the causal mask.
CAUSAL_FRACTION: Final = 0.5

#: Communication hidden under compute is not free: NCCL kernels occupy SMs and HBM bandwidth while
#: they run, so overlapped compute slows down. Fraction of the overlapped communication time added
#: to the step (overlap studies such as FLUX, Chang et al. 2024, and Domino, Wang et al. 2024, measure
#: 10-30% compute slowdown under concurrent collectives).
OVERLAP_INTERFERENCE: Final = 0.2

#: Unfused attention (no FlashAttention): bytes moved per attention score in the forward besides
#: the two GEMMs' own traffic: the fused scale-mask-softmax reads the fp16 scores (2 B) and writes
#: probabilities (2 B); dropout writes its mask (1 B) and output (2 B) (Megatron-LM's kernels).
UNFUSED_SOFTMAX_BYTES_PER_SCORE: Final = 2.0 + 2.0 + 1.0 + 2.0

#: Eager-mode kernels (PyTorch without fusion: HF/FSDP model code): extra bytes per element beyond
#: the fused op's one read and one write, per forward, counted from the kernels eager code launches:
#: * RMSNorm written out in PyTorch (upcast to fp32, square, mean, rsqrt, scale, downcast, weight):
#:   ~36 B per element instead of 4;
#: * rotary embedding (q·cos, rotate_half = slice + neg + cat, ·sin, add) on q and k: ~22 B per element;
#: * SwiGLU as silu(gate) then multiply: 10 B per intermediate element instead of 6;
#: * head transposes made contiguous around attention: 4 B per q, k, v and output element.
#: LayerNorm and GELU are single native kernels in eager mode too (no extra). Backward moves ~2x.
EAGER_RMSNORM_EXTRA_BYTES: Final = 32.0
EAGER_ROPE_EXTRA_BYTES: Final = 22.0
EAGER_SWIGLU_EXTRA_BYTES: Final = 4.0
EAGER_TRANSPOSE_BYTES: Final = 4.0

#: LoRA adapter path per targeted matrix and token (PEFT): read the input x (d_in), write the
#: adapter output (d_out), read base and adapter outputs and write their sum (3 d_out): 2 B each,
#: i.e. 2·(d_in + 4·d_out) bytes per forward; the rank-r intermediates are negligible.
LORA_OUTPUT_PASSES: Final = 4.0

#: MoE token permutation: routed tokens are gathered into expert order and scattered back
#: (read + write 2 B each way) around the expert GEMMs.
MOE_PERMUTE_BYTES_PER_ELEMENT: Final = 8.0

#: MoE load imbalance: with auxiliary-loss balancing the busiest expert-parallel rank still gets
#: ~10-20% more tokens than the mean, and every rank waits for it; expert GEMM time x this factor.
MOE_IMBALANCE_FACTOR: Final = 1.15

#: FP8 GEMM inputs are quantised from bf16 first (Transformer Engine): read 2 B, write 1 B per element.
FP8_CAST_BYTES_PER_ELEMENT: Final = 3.0

#: Cross-entropy over the logits: fp32 softmax and loss read and write each logit once (fused).
LOSS_BYTES_PER_LOGIT: Final = 2 * 4.0

#: QLoRA dequantises every NF4 weight to bf16 before each GEMM pass: read 0.5 B (+ constants),
#: write 2 B per weight.
NF4_DEQUANT_BYTES_PER_PARAM: Final = 0.5 + NF4_OVERHEAD_BYTES_PER_PARAM + 2.0

#: Host-side overhead per optimizer step not modelled elsewhere: data loading, Python and
#: framework bookkeeping, logging, loss-scale checks, learning-rate schedule.
STEP_OVERHEAD_S: Final = 0.05

#: Device power when not computing (waiting on communication or the pipeline), as a fraction of
#: TDP: HBM, links and clocks stay up (H100 draws ~200-300 W of 700 W when stalled on NCCL).
IDLE_POWER_FRACTION: Final = 0.35

_PREC_INDEX = {p: i for i, p in enumerate(PRECISIONS)}
_REC_INDEX = {r: i for i, r in enumerate(RECOMPUTE_MODES)}


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


# ---------------------------------------------------------------------------------------
# Plans as arrays
# ---------------------------------------------------------------------------------------
_FIELDS = ("tp", "pp", "dp", "vpp", "cp", "ep", "sp", "zero", "rec", "mb", "ga", "prec")


@dataclass(frozen=True)
class PlanArrays:
    """Many plans as parallel int64 arrays (structure of arrays). ``rec`` and ``prec`` are indices
    into ``RECOMPUTE_MODES`` and ``PRECISIONS``; ``sp`` is 0/1."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    vpp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    sp: np.ndarray
    zero: np.ndarray
    rec: np.ndarray
    mb: np.ndarray
    ga: np.ndarray
    prec: np.ndarray

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    @classmethod
    def from_plans(cls, plans: list[ParallelPlan]) -> PlanArrays:
        def arr(values: list[int]) -> np.ndarray:
            return np.asarray(values, dtype=np.int64)

        return cls(
            tp=arr([p.tp for p in plans]), pp=arr([p.pp for p in plans]), dp=arr([p.dp for p in plans]),
            vpp=arr([p.vpp for p in plans]), cp=arr([p.cp for p in plans]), ep=arr([p.ep for p in plans]),
            sp=arr([int(p.sp) for p in plans]), zero=arr([p.zero_stage for p in plans]),
            rec=arr([_REC_INDEX[p.recompute] for p in plans]), mb=arr([p.micro_batch for p in plans]),
            ga=arr([p.grad_accum for p in plans]), prec=arr([_PREC_INDEX[p.precision] for p in plans]),
        )

    @classmethod
    def concat(cls, parts: list[PlanArrays]) -> PlanArrays:
        return cls(**{f: np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS})

    def take(self, idx: np.ndarray) -> PlanArrays:
        return PlanArrays(**{f: getattr(self, f)[idx] for f in _FIELDS})

    def plan(self, i: int) -> ParallelPlan:
        return ParallelPlan(
            tp=int(self.tp[i]), pp=int(self.pp[i]), dp=int(self.dp[i]), vpp=int(self.vpp[i]), cp=int(self.cp[i]),
            ep=int(self.ep[i]), sp=bool(self.sp[i]), zero_stage=int(self.zero[i]),
            recompute=RECOMPUTE_MODES[int(self.rec[i])], micro_batch=int(self.mb[i]),  # type: ignore[arg-type]
            grad_accum=int(self.ga[i]), precision=PRECISIONS[int(self.prec[i])],  # type: ignore[arg-type]
        )


# ---------------------------------------------------------------------------------------
# Results as arrays
# ---------------------------------------------------------------------------------------
@dataclass
class StepArrays:
    """Per-plan results (seconds, bytes, tokens/s...). Breakdown terms sum to ``step_s``."""

    compute_s: np.ndarray
    recompute_s: np.ndarray
    tp_comm_s: np.ndarray
    cp_comm_s: np.ndarray
    ep_comm_s: np.ndarray
    pp_comm_s: np.ndarray
    bubble_s: np.ndarray
    dp_comm_s: np.ndarray
    zero3_comm_s: np.ndarray
    optimizer_s: np.ndarray
    overhead_s: np.ndarray
    step_s: np.ndarray
    tokens_per_s: np.ndarray
    tokens_per_s_per_device: np.ndarray
    mfu: np.ndarray
    hfu: np.ndarray
    busy_fraction: np.ndarray
    power_w_per_device: np.ndarray
    mem_weights: np.ndarray
    mem_gradients: np.ndarray
    mem_master: np.ndarray
    mem_optimizer: np.ndarray
    mem_activations: np.ndarray
    mem_workspace: np.ndarray
    mem_total: np.ndarray
    mem_usable: float
    fits: np.ndarray
    model_flops_per_token: float
    hardware_flops_per_token: np.ndarray
    extra: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------
# Per-combination compute tables
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LayerCompute:
    """Seconds of one micro-batch on one device, by operation class.

    ``dense_*``: a layer with a dense MLP; ``moe_*``: a layer with the MoE MLP (forward GEMMs,
    elementwise ops); ``attn_fwd`` / ``attn_bwd``: the attention core forward and backward (the same
    in both layer kinds); ``head_*``: final norm, output projection and loss (forward);
    ``dequant_*``: QLoRA NF4 -> bf16 dequantisation per pass.
    """

    dense_gemm: float
    dense_elem: float
    moe_gemm: float
    moe_elem: float
    attn_fwd: float
    attn_bwd: float
    head_gemm: float
    head_elem: float
    dequant_dense: float
    dequant_moe: float


def _op_seconds(op: OpCost, device: Device, precision: str, eff: Efficiency) -> float:
    """Roofline seconds of one op: GEMMs at the plan's precision, everything else in bf16."""
    dtype = precision if op.op_class == "gemm" else "bf16"
    return op_time(op, device, dtype, eff).time_s


def attention_core_ops(
    model: ModelArch, *, micro_batch: int, q_len: int, kv_len: int, tp: int, cp: int, flash: bool,
) -> tuple[list[OpCost], float]:
    """The attention core of one layer on one device and its backward/forward time ratio.

    Flash (fused) attention: one kernel; with CP the local queries meet every key once over the
    ring, half of them masked (load-balanced causal). Unfused attention (Megatron-LM before
    FlashAttention): QK^T and P·V batched GEMMs over the *whole* s x s score matrix (cuBLAS does
    not skip the masked half) plus a fused scale-mask-softmax-dropout kernel whose score traffic is
    :data:`UNFUSED_SOFTMAX_BYTES_PER_SCORE`; its backward is 2x (GEMMs and elementwise alike).
    """
    heads = max(1, model.n_heads // tp)
    kvh = max(1, model.kv_heads // tp)
    dqk, dv = model.qk_head_dim, model.v_head_dim
    if flash:
        causal_square = cp == 1
        op = cost_attention(micro_batch, heads, q_len, kv_len if cp == 1 else kv_len, dqk, causal=causal_square,
                            kv_heads=kvh, v_head_dim=dv)
        if not causal_square:
            op = OpCost("attention (ring, causal)", "attention", op.flops * CAUSAL_FRACTION, op.bytes, op.min_dim)
        return [op], ATTENTION_BACKWARD_FACTOR
    bh = micro_batch * heads
    qk = cost_gemm(q_len, kv_len, dqk, name="attention scores QK^T")
    pv = cost_gemm(q_len, dv, kv_len, name="attention P·V")
    scores = float(bh) * q_len * kv_len
    soft = OpCost("softmax + dropout (unfused)", "elementwise", 5.0 * scores, scores * UNFUSED_SOFTMAX_BYTES_PER_SCORE)
    ops = [OpCost(o.name, "gemm", o.flops * bh, o.bytes * bh, o.min_dim) for o in (qk, pv)] + [soft]
    return ops, GEMM_BACKWARD_FACTOR


def _fp8_cast_op(model: ModelArch, tokens: int, tp: int, moe: bool) -> OpCost:
    """FP8 (Transformer Engine) quantisation of every GEMM input per forward: read bf16, write fp8."""
    q_in = model.d_model  # QKV and MLP-up inputs
    o_in = model.n_heads * model.v_head_dim / tp
    if moe and model.moe is not None:
        f = (model.moe.top_k * model.moe.expert_ffn_dim + model.moe.n_shared_experts * model.moe.shared_ffn) / tp
    else:
        f = model.ffn_dim / tp
    elems = tokens * (2 * q_in + o_in + f)
    return OpCost("fp8 casts", "elementwise", elems, elems * FP8_CAST_BYTES_PER_ELEMENT)


def _eager_extra_op(model: ModelArch, tokens: int, tp: int, moe: bool) -> OpCost:
    """Extra memory traffic of eager (unfused) elementwise kernels in one layer's forward (see the
    ``EAGER_*`` constants)."""
    q_dim = model.n_heads * model.qk_head_dim / tp
    kv_dim = max(1, model.kv_heads // tp) * (model.qk_head_dim if model.mla is None else model.qk_head_dim)
    o_dim = model.n_heads * model.v_head_dim / tp
    per_token = 0.0
    if model.norm == "rmsnorm":
        per_token += EAGER_RMSNORM_EXTRA_BYTES * model.d_model * model.layer_norms
    if model.position == "rope":
        per_token += EAGER_ROPE_EXTRA_BYTES * (q_dim + kv_dim)
    if model.mlp == "gated":
        if moe and model.moe is not None:
            f = (model.moe.top_k * model.moe.expert_ffn_dim + model.moe.n_shared_experts * model.moe.shared_ffn) / tp
        else:
            f = model.ffn_dim / tp
        per_token += EAGER_SWIGLU_EXTRA_BYTES * f
    per_token += EAGER_TRANSPOSE_BYTES * (q_dim + 2 * kv_dim + o_dim)
    return OpCost("eager elementwise", "elementwise", 0.0, tokens * per_token)


def _lora_adapter_op(model: ModelArch, tokens: int, tp: int) -> OpCost:
    """Memory traffic of the LoRA adapter paths of one layer's forward (default targets q, k, v,
    o, gate, up, down; see :data:`LORA_OUTPUT_PASSES`)."""
    d = model.d_model
    q = model.n_heads * model.qk_head_dim
    kv = model.kv_heads * model.v_head_dim
    o = model.n_heads * model.v_head_dim
    f = model.ffn_dim
    shapes = [(d, q), (d, kv), (d, kv), (o, d), (d, f), (f, d)] + ([(d, f)] if model.mlp == "gated" else [])
    per_token = sum(2.0 * (a + LORA_OUTPUT_PASSES * b) for a, b in shapes) / tp
    return OpCost("lora adapters", "elementwise", 0.0, tokens * per_token)


def layer_compute(
    model: ModelArch, device: Device, eff: Efficiency, *, micro_batch: int, seq_len: int, tp: int, cp: int,
    ep: int, sp: bool, precision: str, flash: bool = True, qlora: bool = False, eager: bool = False,
    lora: bool = False,
) -> LayerCompute:
    """Forward (and attention backward) compute times of one layer and the head for one micro-batch.

    Tokens on a device: micro_batch · seq_len / cp. With SP the norms and residual adds run on
    1/tp of the tokens. GEMMs come from :func:`xpuplan.perf.ops.layer_ops`; the attention core is
    replaced by :func:`attention_core_ops`.
    """
    s_loc = max(1, seq_len // cp)

    def classify(ops: list[OpCost]) -> tuple[float, float]:
        g = e = 0.0
        for op in ops:
            t = _op_seconds(op, device, precision, eff)
            if op.op_class == "gemm":
                g += t
            else:
                if sp and tp > 1 and (op.name.startswith("norm") or op.name.startswith("residual")):
                    t /= tp
                e += t
        return g, e

    def without_attention(ops: list[OpCost]) -> list[OpCost]:
        return [op for op in ops if op.op_class != "attention"]

    tokens = micro_batch * s_loc
    extra: list[OpCost] = []
    dense_ops = without_attention(layer_ops(model, batch=micro_batch, q_len=s_loc, kv_len=s_loc, tp=tp,
                                            dtype=precision, moe_layer=False))
    if precision == "fp8":
        extra = [_fp8_cast_op(model, tokens, tp, moe=False)]
    if eager:
        extra.append(_eager_extra_op(model, tokens, tp, moe=False))
    if lora:
        extra.append(_lora_adapter_op(model, tokens, tp))
    dg, de = classify(dense_ops + extra)
    mg = me = 0.0
    if model.moe is not None:
        base = without_attention(layer_ops(model, batch=micro_batch, q_len=s_loc, kv_len=s_loc, tp=tp,
                                           dtype=precision, moe_layer=True))
        # with EP carved from DP, each rank receives tokens from ep ranks: evaluate the expert ops
        # for ep x the local batch split over ep ranks (= the local tokens x top_k per rank)
        ep_ops = layer_ops(model, batch=micro_batch * ep, q_len=s_loc, kv_len=s_loc, tp=tp, ep=ep,
                           dtype=precision, moe_layer=True)
        experts = [OpCost(op.name, op.op_class, op.flops * MOE_IMBALANCE_FACTOR, op.bytes * MOE_IMBALANCE_FACTOR,
                          op.min_dim) for op in ep_ops if op.name.startswith("experts")]
        routed = tokens * model.moe.top_k * model.d_model
        moe_extra = [OpCost("token permutation", "elementwise", 0.0, routed * MOE_PERMUTE_BYTES_PER_ELEMENT)]
        if precision == "fp8":
            moe_extra.append(_fp8_cast_op(model, tokens, tp, moe=True))
        if eager:
            moe_extra.append(_eager_extra_op(model, tokens, tp, moe=True))
        if lora:
            moe_extra.append(_lora_adapter_op(model, tokens, tp))
        mg, me = classify([op for op in base if not op.name.startswith("experts")] + experts + moe_extra)
    attn_ops, bwd_factor = attention_core_ops(model, micro_batch=micro_batch, q_len=s_loc, kv_len=seq_len if cp > 1 else s_loc,
                                              tp=tp, cp=cp, flash=flash)
    af = sum(_op_seconds(op, device, "bf16", eff) for op in attn_ops)
    hops = head_ops(model, rows=tokens, tp=tp, dtype=precision)
    loss = OpCost("loss", "elementwise", 5.0 * tokens * model.vocab_size / tp,
                  tokens * model.vocab_size / tp * LOSS_BYTES_PER_LOGIT)
    hg, he = classify(hops + ([loss] if hops else []))
    dq_d = dq_m = 0.0
    if qlora:
        bw = device.memory_bandwidth * eff.memory_bw_fraction
        per_dev = params_per_device(model, tp=tp, pp=1, ep=ep)
        b = param_breakdown(model)
        body = (per_dev.dense - (b.embedding + b.output_head) / tp) / model.n_layers
        dq_d = body * NF4_DEQUANT_BYTES_PER_PARAM / bw
        dq_m = (body + per_dev.expert / max(model.n_moe_layers, 1)) * NF4_DEQUANT_BYTES_PER_PARAM / bw
    return LayerCompute(dg, de, mg, me, af, af * bwd_factor, hg, he, dq_d, dq_m)


# ---------------------------------------------------------------------------------------
# The evaluator
# ---------------------------------------------------------------------------------------
class StepModel:
    """Evaluates plans for one model x device x job; caches per-shape compute and memory tables
    so a search over many device counts reuses them."""

    def __init__(self, model: ModelArch, device: Device, eff: Efficiency, job: TrainingJob) -> None:
        self.model = model
        self.device = device
        self.eff = eff
        self.job = job
        self._compute: dict[tuple[int, ...], LayerCompute] = {}
        self._params: dict[tuple[int, ...], tuple[float, float]] = {}
        self._acts: dict[tuple[int, ...], float] = {}
        self._out: dict[tuple[int, ...], float] = {}
        self.breakdown = param_breakdown(model)
        seq = job.seq_len
        self._flops = {r: flops_training_per_token(model, seq, r, causal=False) for r in RECOMPUTE_MODES}  # type: ignore[arg-type]
        self.lora_params_total = lora_params(model, job.lora_rank) if job.method != "full" else 0

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

    def compute_table(self, p: PlanArrays) -> dict[str, np.ndarray]:
        """Per plan, the :class:`LayerCompute` fields (seconds) for its (mb, tp, cp, ep, sp, precision)."""
        rows, inv = self._distinct([p.mb, p.tp, p.cp, p.ep, p.sp, p.prec])
        vals = []
        for k in rows:
            if k not in self._compute:
                mb, tp, cp, ep, sp, prec = k
                self._compute[k] = layer_compute(
                    self.model, self.device, self.eff, micro_batch=mb, seq_len=self.job.seq_len, tp=tp, cp=cp, ep=ep,
                    sp=bool(sp), precision=PRECISIONS[prec], flash=self.job.flash_attention,
                    qlora=self.job.method == "qlora", eager=self.job.kernels == "eager",
                    lora=self.job.method != "full")
            vals.append(self._compute[k])
        return {n: np.asarray([getattr(v, n) for v in vals], dtype=float)[inv] for n in LayerCompute.__dataclass_fields__}

    def params_table(self, p: PlanArrays) -> tuple[np.ndarray, np.ndarray]:
        """Per plan, (dense, expert) parameters on its busiest device (``perf.memory.params_per_device``)."""
        rows, inv = self._distinct([p.tp, p.pp, p.ep])
        vals = []
        for k in rows:
            if k not in self._params:
                d = params_per_device(self.model, tp=k[0], pp=k[1], ep=k[2])
                self._params[k] = (d.dense, d.expert)
            vals.append(self._params[k])
        arr = np.asarray(vals, dtype=float)[inv]
        return arr[:, 0], arr[:, 1]

    def activation_table(self, p: PlanArrays, rec: np.ndarray) -> np.ndarray:
        """Per plan, activation bytes one layer keeps (``perf.memory.activation_bytes_per_layer``)."""
        rows, inv = self._distinct([p.mb, p.tp, p.sp, p.cp, rec])
        vals = []
        for k in rows:
            if k not in self._acts:
                mb, tp, sp, cp, r = k
                self._acts[k] = activation_bytes_per_layer(
                    self.model, self.job.seq_len, mb, tp=tp, sp=bool(sp), cp=cp, recompute=RECOMPUTE_MODES[r],  # type: ignore[arg-type]
                    flash_attention=self.job.flash_attention)
            vals.append(self._acts[k])
        return np.asarray(vals, dtype=float)[inv]

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
        recipes = [state_recipe(self.job.optimizer_recipe or default_recipe_for(pr)) for pr in PRECISIONS]
        return {f: np.asarray([getattr(r, f) for r in recipes], dtype=float)[p.prec]
                for f in ("weights", "grads", "master", "optimizer")}

    # -- network ----------------------------------------------------------------------------------
    @staticmethod
    def _links(cluster: Cluster, size: np.ndarray, stride: np.ndarray) -> tuple[
            np.ndarray, np.ndarray, np.ndarray, float, float, float]:
        """(local, nodes, intra bus bw, intra latency, inter bus bw, inter latency) for process groups."""
        local, nodes = coll.group_layout(size, stride, cluster.domain_size)
        local = np.asarray(local, dtype=float)
        nodes = np.asarray(nodes, dtype=float)
        intra = np.full_like(local, cluster.scale_up.bus_bw)
        if cluster.topology == "mesh" and cluster.domain_size > 1:
            intra = intra * np.minimum(np.maximum(local - 1.0, 1.0) / (cluster.domain_size - 1), 1.0)
        return local, nodes, intra, cluster.scale_up.latency_s, cluster.scale_out.bus_bw, cluster.scale_out.latency_s

    def _hier(self, kind: str, n_bytes: np.ndarray, cluster: Cluster, size: np.ndarray, stride: np.ndarray) -> np.ndarray:
        local, nodes, ib, il, ob, ol = self._links(cluster, size, stride)
        t = coll.time_hierarchical_s(kind, n_bytes, local, nodes, ib, il, ob, ol)
        return np.where(size > 1, t, 0.0)

    def _a2a(self, n_bytes: np.ndarray, cluster: Cluster, size: np.ndarray, stride: np.ndarray) -> np.ndarray:
        local, nodes, ib, il, ob, ol = self._links(cluster, size, stride)
        t = coll.time_hierarchical_all_to_all_s(n_bytes, local, nodes, ib, il, ob, ol)
        return np.where(size > 1, t, 0.0)

    def _p2p(self, n_bytes: np.ndarray, cluster: Cluster, size: np.ndarray, stride: np.ndarray) -> np.ndarray:
        """One send between neighbours of a group (ring/pipeline): over the scale-out link when the
        group spans domains (its slowest hop), else over the scale-up link."""
        local, nodes, ib, il, ob, ol = self._links(cluster, size, stride)
        t = np.where(nodes > 1, coll.time_p2p_s(n_bytes, ob, ol), coll.time_p2p_s(n_bytes, ib, il))
        return np.where(size > 1, t, 0.0)

    # -- evaluation -------------------------------------------------------------------------------
    def evaluate(self, cluster: Cluster, p: PlanArrays) -> StepArrays:
        """Step time, memory and throughput of every plan in ``p`` on ``cluster``."""
        model, job, dev, eff = self.model, self.job, self.device, self.eff
        s = float(job.seq_len)
        h = float(model.d_model)
        n_dev = float(cluster.n_devices)
        L = model.n_layers
        n_moe = model.n_moe_layers
        n_dense = L - n_moe
        method = job.method
        frozen = method != "full"

        tp = p.tp.astype(float)
        pp = p.pp.astype(float)
        dp = p.dp.astype(float)
        cp = p.cp.astype(float)
        vpp = p.vpp.astype(float)
        mb = p.mb.astype(float)
        m = p.ga.astype(float)
        sp = p.sp.astype(bool)
        rec = p.rec
        full_rec = rec == _REC_INDEX["full"]
        sel_rec = rec == _REC_INDEX["selective"]
        multi_stage = p.pp > 1
        Ls = np.ceil(L / pp)

        # ---- compute per micro-batch on the busiest stage ----------------------------------
        c = self.compute_table(p)
        gbf = FROZEN_GEMM_BACKWARD_FACTOR if frozen else GEMM_BACKWARD_FACTOR

        def fwd(kind: str) -> np.ndarray:
            return c[f"{kind}_gemm"] + c["attn_fwd"] + c[f"{kind}_elem"]

        def bwd(kind: str) -> np.ndarray:
            return gbf * c[f"{kind}_gemm"] + c["attn_bwd"] + ELEMENTWISE_BACKWARD_FACTOR * c[f"{kind}_elem"]

        def recomp(kind: str) -> np.ndarray:
            return np.where(full_rec, fwd(kind), np.where(sel_rec, c["attn_fwd"], 0.0))

        def passes_dequant(kind: str) -> np.ndarray:
            return c[f"dequant_{kind}"] * (2.0 + full_rec)

        def per_stage(dense_v: np.ndarray, moe_v: np.ndarray) -> np.ndarray:
            """Sum over one stage's layers: exact when pp = 1, the heaviest layer kind x L/pp otherwise."""
            if n_moe == 0:
                return np.where(multi_stage, Ls, L) * dense_v
            heavy = np.maximum(dense_v, moe_v) if n_dense else moe_v
            return np.where(multi_stage, Ls * heavy, n_dense * dense_v + n_moe * moe_v)

        comp_layers = per_stage(fwd("dense") + bwd("dense") + passes_dequant("dense"),
                                fwd("moe") + bwd("moe") + passes_dequant("moe"))
        bwd_layers = per_stage(bwd("dense"), bwd("moe"))
        fwd_layers = per_stage(fwd("dense"), fwd("moe"))
        rec_layers = per_stage(recomp("dense"), recomp("moe"))
        head = (1.0 + gbf) * c["head_gemm"] + (1.0 + ELEMENTWISE_BACKWARD_FACTOR) * c["head_elem"]
        comp_mb = comp_layers + head
        attn_f_layer = c["attn_fwd"]

        # ---- TP / SP collectives ------------------------------------------------------------
        layers_stage = np.where(multi_stage, Ls, float(L))
        passes = 2.0 + full_rec  # forward, backward, recomputed forward
        colls_per_layer = 1.0 if model.parallel_attn_mlp else 2.0
        tp_bytes = mb * (s / cp) * h * ACTIVATION_BYTES
        one = np.ones_like(tp)
        t_tp_coll = self._hier("all_reduce", tp_bytes, cluster, p.tp, one)
        tp_mb = layers_stage * colls_per_layer * passes * t_tp_coll * (1.0 - job.tp_overlap)

        # ---- CP ring attention ------------------------------------------------------------
        if model.mla is not None:
            kv_width = np.maximum(1.0, model.n_heads / tp) * (model.qk_head_dim + model.v_head_dim)
        else:
            kv_width = np.maximum(1.0, model.kv_heads / tp) * (model.qk_head_dim + model.v_head_dim)
        kv_bytes = mb * (s / cp) * kv_width * ACTIVATION_BYTES
        t_kv = self._p2p(kv_bytes, cluster, p.cp, p.tp)
        cp_fwd = np.maximum(0.0, (cp - 1.0) * t_kv - attn_f_layer)
        cp_bwd = np.maximum(0.0, (cp - 1.0) * 2.0 * t_kv - c["attn_bwd"])
        cp_mb = layers_stage * (cp_fwd * (1.0 + full_rec) + cp_bwd)

        # ---- EP all-to-all ----------------------------------------------------------------
        if model.moe is not None:
            ep_tokens = mb * (s / cp) / np.where(sp, tp, 1.0)
            a2a_bytes = ep_tokens * model.moe.top_k * h * ACTIVATION_BYTES
            t_a2a = self._a2a(a2a_bytes, cluster, p.ep, p.tp * p.cp)
            moe_layers_stage = np.where(multi_stage, np.minimum(Ls, n_moe), float(n_moe))
            ep_mb = moe_layers_stage * 2.0 * passes * t_a2a * (1.0 - job.ep_overlap)
        else:
            ep_mb = np.zeros_like(tp)

        # ---- pipeline ------------------------------------------------------------------------
        t_mb = comp_mb + rec_layers + tp_mb + cp_mb + ep_mb
        bubble = (pp - 1.0) / vpp * t_mb
        pp_bytes = mb * (s / cp) * h * ACTIVATION_BYTES / tp  # Megatron scatter/gather: 1/tp per rank
        t_p2p = self._p2p(pp_bytes, cluster, p.pp, p.tp * p.cp * p.dp)
        pp_comm = np.where(multi_stage, 2.0 * (m * vpp + pp - 1.0) * t_p2p, 0.0)

        # ---- data parallelism / ZeRO -------------------------------------------------------------
        dense_p, expert_p = self.params_table(p)
        rb = self.recipe_bytes(p)
        dpcp = p.dp * p.cp
        edp = np.maximum(dpcp // p.ep, 1)
        if frozen:
            train_dense = np.full_like(tp, float(self.lora_params_total)) / (tp * pp)
            train_expert = np.zeros_like(tp)
            base_w = self._frozen_base_bytes_per_param()
        else:
            train_dense, train_expert = dense_p, expert_p
            base_w = PARAM_GATHER_BYTES
        g_dense = train_dense * GRAD_REDUCE_BYTES * job.dp_compression
        g_expert = train_expert * GRAD_REDUCE_BYTES * job.dp_compression
        stride_dense = p.tp
        stride_exp = p.tp * p.ep
        zero = p.zero

        def over_dp(kind: str, dense_bytes: np.ndarray, expert_bytes: np.ndarray) -> np.ndarray:
            return self._hier(kind, dense_bytes, cluster, dpcp, stride_dense) + self._hier(
                kind, expert_bytes, cluster, edp, stride_exp)

        ar = over_dp("all_reduce", g_dense, g_expert)
        rs = over_dp("reduce_scatter", g_dense, g_expert)
        ag_train = over_dp("all_gather", train_dense * PARAM_GATHER_BYTES, train_expert * PARAM_GATHER_BYTES)
        ag_all = over_dp("all_gather", dense_p * base_w, expert_p * base_w)
        tail = np.minimum(1.0, DP_BUCKET_BYTES / np.maximum(g_dense + g_expert, 1.0))
        grad_exposed = np.where(
            zero == 0, exposed_after_overlap_s(ar, bwd_layers, tail),
            np.where(zero == 1, exposed_after_overlap_s(rs, bwd_layers, tail),
                     np.where(zero == 2, m * exposed_after_overlap_s(rs, bwd_layers, tail), 0.0)))
        param_exposed = np.where((zero == 1) | (zero == 2), exposed_after_overlap_s(ag_train, fwd_layers, tail), 0.0)
        dp_comm = np.where(dpcp > 1, grad_exposed + param_exposed, 0.0)
        # ZeRO-3 / FSDP: gather weights for forward and backward, reduce-scatter gradients, per micro-batch,
        # prefetched one layer (FSDP unit) ahead: only what exceeds compute, plus the first gather, waits
        z3_mb = 2.0 * ag_all + rs
        z3 = m * exposed_after_overlap_s(z3_mb, comp_mb + rec_layers, 1.0 / layers_stage)
        zero3_comm = np.where((zero == 3) & (dpcp > 1), z3, 0.0)

        # ---- optimizer, clipping, overhead ---------------------------------------------------
        shard_dense = np.where(zero >= 1, dpcp, 1).astype(float)
        shard_exp = np.where(zero >= 1, edp, 1).astype(float)
        opt_params = train_dense / shard_dense + train_expert / shard_exp
        adam_4 = op_time(cost_adam_step(1e9, 4.0), dev, "bf16", eff)
        adam_2 = op_time(cost_adam_step(1e9, 2.0), dev, "bf16", eff)
        adam_s_per_param = np.where(rb["grads"] >= 4.0, adam_4.time_s - adam_4.overhead_s,
                                    adam_2.time_s - adam_2.overhead_s) / 1e9
        bw = dev.memory_bandwidth * eff.memory_bw_fraction
        grads_local = (train_dense + train_expert) / np.where(zero >= 2, shard_dense, 1.0)
        clip = grads_local * rb["grads"] / bw + 2.0 * coll.latency_steps(n_dev) * cluster.scale_out.latency_s
        optimizer = opt_params * adam_s_per_param + adam_4.overhead_s + clip
        overhead = np.full_like(tp, STEP_OVERHEAD_S)

        compute_total = m * comp_mb
        step = (compute_total + m * rec_layers + m * tp_mb + m * cp_mb + m * ep_mb + bubble + pp_comm + dp_comm
                + zero3_comm + optimizer + overhead)

        # ---- throughput, MFU, power ---------------------------------------------------------------
        tokens = m * mb * dp * s  # per optimizer step, all replicas
        tps = tokens / step
        f_model, f_hw = self._flops_per_token(rec, frozen)
        peak = np.asarray([compute_peak(dev, PRECISIONS[i]) for i in range(len(PRECISIONS))])[p.prec]
        mfu = tps * f_model / (n_dev * peak)
        hfu = tps * f_hw / (n_dev * peak)
        busy = np.clip((compute_total + m * rec_layers + optimizer) / step, 0.0, 1.0)
        tdp = dev.tdp_w or float("nan")
        power = tdp * (IDLE_POWER_FRACTION + (1.0 - IDLE_POWER_FRACTION) * busy)

        # ---- memory ---------------------------------------------------------------------------------
        mem = self._memory(p, dense_p, expert_p, rb, m, rec)
        usable = dev.memory_bytes * (1.0 - job.memory_reserve)
        return StepArrays(
            compute_s=compute_total, recompute_s=m * rec_layers, tp_comm_s=m * tp_mb, cp_comm_s=m * cp_mb,
            ep_comm_s=m * ep_mb, pp_comm_s=pp_comm, bubble_s=bubble, dp_comm_s=dp_comm, zero3_comm_s=zero3_comm,
            optimizer_s=optimizer, overhead_s=overhead, step_s=step, tokens_per_s=tps,
            tokens_per_s_per_device=tps / n_dev, mfu=mfu, hfu=hfu, busy_fraction=busy, power_w_per_device=power,
            mem_weights=mem["weights"], mem_gradients=mem["grads"], mem_master=mem["master"],
            mem_optimizer=mem["opt"], mem_activations=mem["acts"], mem_workspace=mem["workspace"],
            mem_total=mem["total"], mem_usable=usable, fits=mem["total"] <= usable,
            model_flops_per_token=float(f_model), hardware_flops_per_token=f_hw,
        )

    def _flops_per_token(self, rec: np.ndarray, frozen: bool) -> tuple[float, np.ndarray]:
        """(model FLOP per token, hardware FLOP per token per plan), PaLM/Megatron convention
        (attention over the full sequence). Frozen bases skip weight gradients."""
        base = self._flops["none"]
        lin, attn = base.forward_linear, base.forward_attention
        if frozen:
            model_f = lin * (1.0 + FROZEN_GEMM_BACKWARD_FACTOR) + attn * (1.0 + GEMM_BACKWARD_FACTOR)
        else:
            model_f = base.model
        extra = np.where(rec == _REC_INDEX["full"], base.forward, np.where(rec == _REC_INDEX["selective"], attn, 0.0))
        return model_f, model_f + extra

    def _frozen_base_bytes_per_param(self) -> float:
        """Bytes per frozen base weight (LoRA: bf16; QLoRA: NF4 linears, bf16 embeddings and head)."""
        if self.job.method != "qlora":
            return 2.0
        b = self.breakdown
        linear_frac = 1.0 - (b.embedding + b.output_head) / b.total
        return linear_frac * (0.5 + NF4_OVERHEAD_BYTES_PER_PARAM) + (1 - linear_frac) * 2.0

    def _memory(self, p: PlanArrays, dense: np.ndarray, expert: np.ndarray, rb: dict[str, np.ndarray],
                m: np.ndarray, rec: np.ndarray) -> dict[str, np.ndarray]:
        """Vectorised :func:`xpuplan.perf.memory.training_memory` (a unit test keeps them equal)."""
        model, job = self.model, self.job
        tp = p.tp.astype(float)
        pp = p.pp.astype(float)
        dpcp = (p.dp * p.cp).astype(float)
        edp = np.maximum((p.dp * p.cp) // p.ep, 1).astype(float)
        zero = p.zero
        total_dev = dense + expert

        def shard(per_param: np.ndarray, sharded: np.ndarray) -> np.ndarray:
            return np.where(sharded, dense * per_param / dpcp + expert * per_param / edp, total_dev * per_param)

        if job.method == "full":
            weights = shard(rb["weights"], zero >= 3)
            grads = shard(rb["grads"], zero >= 2)
            master = shard(rb["master"], zero >= 1)
            opt = shard(rb["optimizer"], zero >= 1)
        else:
            weights = total_dev * self._frozen_base_bytes_per_param() / np.where(zero >= 3, dpcp, 1.0)
            adapters = self.lora_params_total / (tp * pp)
            weights = weights + adapters * rb["weights"]
            grads = adapters * rb["grads"] / np.where(zero >= 2, dpcp, 1.0)
            master = adapters * rb["master"] / np.where(zero >= 1, dpcp, 1.0)
            opt = adapters * rb["optimizer"] / np.where(zero >= 1, dpcp, 1.0)
        Ls = np.ceil(model.n_layers / pp)
        per_layer = self.activation_table(p, rec)
        vpp = p.vpp.astype(float)
        inflight = np.where(p.pp > 1, np.minimum(pp, m), 1.0)
        inflight = np.where((p.pp > 1) & (p.vpp > 1), inflight * (1.0 + (pp - 1.0) / (pp * vpp)), inflight)
        out = self.output_table(p)
        first = per_layer * Ls * inflight
        last = per_layer * Ls + out
        acts = np.where(p.pp > 1, np.maximum(first, last), first + out)
        full_rec = rec == _REC_INDEX["full"]
        if full_rec.any():
            sel = self.activation_table(p, np.full_like(rec, _REC_INDEX["selective"]))
            acts = acts + np.where(full_rec, sel, 0.0)
        if job.method == "full":
            layer_w = total_dev / np.maximum(1.0, Ls) * rb["weights"]
            workspace = RUNTIME_OVERHEAD_BYTES + np.where(zero >= 3, 2.0 * layer_w, 0.0)
        else:
            workspace = np.full_like(tp, RUNTIME_OVERHEAD_BYTES)
        total = weights + grads + master + opt + acts + workspace
        return {"weights": weights, "grads": grads, "master": master, "opt": opt, "acts": acts,
                "workspace": workspace, "total": total}
