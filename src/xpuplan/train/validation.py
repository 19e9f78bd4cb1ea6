"""Training predictor for ``xpuplan validate``: one published measurement row -> one prediction.

The row gives the model (a preset id, else the architecture columns), the hardware and device
count, and as much of the plan as the source printed. Missing pieces are inferred, and every
inference is listed in the prediction's ``details``:

* dp = n / (tp·pp·cp); sp off unless given; vpp = 1; cp = ep = 1;
* ZeRO stage: 3 for FSDP frameworks, else 1 (Megatron's distributed optimizer);
* recomputation: selective (searched when the whole plan is);
* kernels: eager for PyTorch-FSDP stacks, fused for Megatron-style frameworks;
* global batch: when the row has none, the planner's default (~4M tokens) rounded to a multiple of
  the device count (so every dp divides it);
* attention kernels: unfused (softmax materialised) when the source predates 2023, when
  FlashAttention had not reached Megatron-LM, DeepSpeed or metaseq; fused otherwise;
* pipelines whose pp does not divide the layers (BLOOM: 70 layers on 12 stages) are uneven, the
  busiest stage holding ceil(layers/pp);
* micro-batch: when blank, the fastest that fits among the divisors of the per-replica batch
  (the value a team tuning the run would pick);
* no tp/pp at all: the planner's own best plan (``train.search``) with whatever the row fixes.

Architecture rows without a preset: classic (non-gated) MLPs are GPT-style models with LayerNorm,
absolute positions and tied input/output embeddings (Megatron GPT, MPT); gated MLPs are
Llama-style (RMSNorm, RoPE, untied).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ValidationError

from xpuplan.errors import UserInputError
from xpuplan.models import get_model
from xpuplan.models.arch import ModelArch, MoEConfig
from xpuplan.train.cluster import Cluster
from xpuplan.train.estimate import TrainEstimate, estimate
from xpuplan.train.plan import ParallelPlan, make_plan
from xpuplan.train.search import SearchSpace, search
from xpuplan.train.step import StepModel
from xpuplan.validate.core import Prediction, ValidationRow, register_predictor
from xpuplan.workload.training import DEFAULT_GLOBAL_BATCH_TOKENS, TrainingJob

METRICS = ("tokens_per_s_per_device", "step_time_s", "mfu", "model_tflops_per_device", "hw_tflops_per_device",
           "device_hours")

_ARCH_COLUMNS = ("layers", "d_model", "heads", "ffn", "vocab")

#: FlashAttention (Dao et al., May 2022) reached the large-scale training frameworks in 2023; runs
#: published before then used unfused attention.
FLASH_ATTENTION_YEAR = 2023


def source_year(row: ValidationRow) -> int | None:
    """The publication year in the row's ``source`` (first 19xx/20xx), or None."""
    m = re.search(r"\b(19|20)\d{2}\b", row.source or "")
    return int(m.group(0)) if m else None


def model_from_row(row: ValidationRow) -> ModelArch:
    """The preset named in ``model`` when given, else a ModelArch from the architecture columns."""
    if row.get("model"):
        return get_model(row.get("model"))
    missing = [c for c in _ARCH_COLUMNS if row.get(c) is None]
    if missing:
        raise UserInputError(
            f"no model preset and no architecture: column(s) {', '.join(missing)} blank", field=missing[0]
        )
    gated = bool(row.get("gated_mlp"))
    moe = None
    if row.get("moe_experts"):
        moe = MoEConfig(
            n_routed_experts=row.get("moe_experts"), top_k=row.get("moe_top_k") or 1,
            expert_ffn_dim=row.get("moe_ffn") or row.get("ffn"), n_shared_experts=row.get("moe_shared_experts") or 0,
            n_dense_layers=row.get("moe_dense_layers") or 0,
        )
    ident = "row-" + re.sub(r"[^a-z0-9.\-_]+", "-", row.id.lower()).strip("-")
    return ModelArch(
        id=ident, name=row.id, n_layers=row.get("layers"), d_model=row.get("d_model"), n_heads=row.get("heads"),
        n_kv_heads=row.get("kv_heads"), head_dim=row.get("head_dim"), ffn_dim=row.get("ffn"),
        vocab_size=row.get("vocab"), mlp="gated" if gated else "classic",
        norm="rmsnorm" if gated else "layernorm", tied_embeddings=not gated, moe=moe,
        position="rope" if gated else "learned",
        max_seq_len=max(row.get("seq_len") or 2048, 2048),
    )


def framework_kernels(row: ValidationRow) -> Literal["fused", "eager"]:
    """Eager kernels for PyTorch-FSDP stacks (model code in plain PyTorch), fused otherwise
    (Megatron-LM, NeMo, MindSpeed, DeepSpeed-Megatron fuse their elementwise ops)."""
    fw = (row.get("framework") or "").casefold()
    return "eager" if "fsdp" in fw else "fused"


def _framework_zero(row: ValidationRow) -> int:
    fw = (row.get("framework") or "").casefold()
    return 3 if "fsdp" in fw else 1


def predict_estimate(row: ValidationRow) -> tuple[TrainEstimate, dict[str, Any]]:
    """The estimate behind a row's prediction and what was inferred to build it."""
    model = model_from_row(row)
    n = row.n_devices
    seq = row.get("seq_len")
    if seq is None:
        raise UserInputError("seq_len is blank", field="seq_len")
    inferred: dict[str, Any] = {}
    gbt = row.get("global_batch_tokens")
    if gbt is None:
        inferred["global_batch_tokens"] = "planner default"
    precision = row.precision or "bf16"
    if precision not in ("bf16", "fp16", "fp8"):
        raise UserInputError(f"training precision {precision!r} is not modelled (bf16, fp16, fp8)", field="precision")
    if gbt is None:
        per_seq = max(1, round(DEFAULT_GLOBAL_BATCH_TOKENS / seq / n))
        gbt = per_seq * n * seq
    flash = source_year(row) is None or source_year(row) >= FLASH_ATTENTION_YEAR  # type: ignore[operator]
    if not flash:
        inferred["flash_attention"] = False
    kernels = framework_kernels(row)
    if kernels == "eager":
        inferred["kernels"] = kernels
    job = TrainingJob(seq_len=seq, global_batch_tokens=int(gbt), train_tokens=row.get("train_tokens"),
                      flash_attention=flash, kernels=kernels)
    cluster = Cluster.from_catalog(row.hardware, n)
    sm = StepModel(model, cluster.device, cluster.efficiency, job)
    zero = row.get("zero_stage")
    if zero is None:
        zero = _framework_zero(row)
        inferred["zero_stage"] = zero
    recompute = row.get("recompute")
    tp, pp = row.get("tp"), row.get("pp")
    if tp is None and pp is None:
        space = SearchSpace(
            cp=[row.get("cp")] if row.get("cp") else None, zero_stage=[zero],
            recompute=[recompute] if recompute else None,
            sp=[bool(row.get("sp"))] if row.get("sp") is not None else None,
            micro_batch=[row.get("micro_batch")] if row.get("micro_batch") else None, precision=[precision],
        )
        res = search(model, cluster, job, space=space, top=1, step_model=sm)
        if res.best is None:
            res = search(model, cluster, job, space=space, top=1, step_model=sm, require_feasible=False)
        if res.best is None:
            raise UserInputError("no valid plan for this row's model, devices and batch", field="tp")
        inferred["plan"] = f"searched: {res.best.key}"
        return res.best, inferred
    if recompute is None:
        recompute = "selective"
        inferred["recompute"] = recompute
    tp, pp = tp or 1, pp or 1
    cp = row.get("cp") or 1
    dp = row.get("dp")
    if dp is None:
        inferred["dp"] = "n/(tp·pp·cp)"
    sp = row.get("sp")
    sp_b = bool(sp) if sp is not None else False
    vpp = row.get("vpp") or 1
    ep = row.get("ep") or 1
    mb = row.get("micro_batch")

    def build(micro: int) -> ParallelPlan:
        return make_plan(n_devices=n, global_batch_seqs=job.global_batch_seqs, tp=tp, pp=pp, cp=cp, dp=dp, vpp=vpp,
                         ep=ep, sp=sp_b, zero_stage=zero, recompute=recompute, micro_batch=micro,
                         precision=precision)  # type: ignore[arg-type]

    uneven = model.n_layers % (pp * vpp) != 0
    if uneven:
        inferred["pipeline"] = f"uneven: {model.n_layers} layers on {pp} stages"
    if mb is not None:
        return estimate(model, cluster, build(mb), job, step_model=sm, uneven_pipeline=uneven), inferred
    per_replica = job.global_batch_seqs // (dp or n // (tp * pp * cp))
    best: TrainEstimate | None = None
    for micro in [d for d in range(1, min(per_replica, 32) + 1) if per_replica % d == 0]:
        try:
            e = estimate(model, cluster, build(micro), job, step_model=sm, uneven_pipeline=uneven)
        except UserInputError:
            continue
        if best is None or (e.feasible, e.tokens_per_s) > (best.feasible, best.tokens_per_s):
            best = e
    if best is None:
        raise UserInputError("no micro-batch size gives a valid plan", field="micro_batch")
    inferred["micro_batch"] = best.plan.micro_batch
    return best, inferred


def predict(row: ValidationRow) -> Prediction:
    """Predict the row's metric (see ``METRICS``) or say why it cannot be predicted."""
    if row.metric not in METRICS:
        return Prediction.cannot(f"metric {row.metric!r} is not a training metric the planner predicts")
    if row.metric == "device_hours" and row.get("train_tokens") is None:
        return Prediction.cannot("device_hours needs train_tokens")
    try:
        e, inferred = predict_estimate(row)
    except ValidationError as exc:  # a data file failed to validate (e.g. efficiency parameters): say so
        return Prediction.cannot(f"data error while building the prediction: {exc.errors()[0]['msg']} "
                                 f"({'.'.join(map(str, exc.errors()[0]['loc']))})")
    value = {
        "tokens_per_s_per_device": e.tokens_per_s_per_device,
        "step_time_s": e.step_time_s,
        "mfu": e.mfu,
        "model_tflops_per_device": e.model_tflops_per_device,
        "hw_tflops_per_device": e.hw_tflops_per_device,
        "device_hours": e.device_hours,
    }[row.metric]
    details = {"plan": e.key, "feasible": e.feasible, "memory_gb": round(e.memory.total_bytes / 1e9, 1),
               "efficiency_source": e.efficiency_source, "inferred": inferred}
    if not e.feasible:
        details["note"] = "the planner's memory estimate exceeds the device (the run happened: prediction kept)"
    return Prediction(value, None, details)


register_predictor("train", predict)
