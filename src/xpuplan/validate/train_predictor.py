"""Training predictor for ``xpuplan validate``: one published measurement row -> one prediction.

The row gives the model (a preset id, else the architecture columns), the hardware and device
count, and as much of the plan as the source printed. Missing pieces are inferred, and every
inference is listed in the prediction's ``details``:

* the training stack (``catalog/data/training_stacks.yaml``) from the ``framework`` column and the
  source's year (Megatron-LM before 2023 is the legacy stack); the default stack when none matches;
* dp = n / (tp·pp·cp); sp as the stack does (on with tp > 1 for Megatron-Core, NeMo, MindSpeed,
  torchtitan) unless given; cp = ep = 1;
* ZeRO stage: 3 for FSDP frameworks, else 1 (Megatron's distributed optimizer);
* recomputation: the fastest valid of none, selective and full, chosen with the micro-batch
  (:data:`INFERRED_RECOMPUTE`; searched when the whole plan is), partial on recognised stacks that recompute
  chosen layers (``TrainingStack.partial_recompute``), and layer_offload on stacks that offload
  whole layers (Megatron-Core, NeMo: ``TrainingStack.layer_offload``, pp = 1);
* kernels: eager for PyTorch-FSDP stacks unless the row says the run was compiled (torch.compile), fused for
  Megatron-style frameworks; a `power_cap_w` column (W) sets the board power limit (perf.power DVFS); a
  `scale_out_gbit_per_s` column the network bandwidth per device where the run's cluster differs from the
  catalog's (a cloud's NICs); a `stack_options` column (``key=value`` pairs separated by ``;``, keys being
  training-stack properties of ``training_stacks.yaml``) what the run's own recipe sets differently from its
  stack's profile (e.g. ``ep_overlap=1;fp8_attention=true`` for a recipe that turns on Megatron-Core's 1F1B
  all-to-all overlap and FP8 attention); `method` (``full``, ``lora``, ``qlora``), `lora_rank` and `lora_targets`
  columns the fine-tuning method of a fine-tuning table's rows, and without them what the row's text names (LoRA,
  QLoRA, "rank 16", ``linear_qkv``...), else full training (:func:`row_method`); a `recompute_layers` column the
  layers per pipeline stage a run recomputes in full (Megatron-Core's ``recompute_num_layers`` x its virtual
  stages), read as recompute partial with that count;
* global batch: when the row has none, the planner's default (~4M tokens) rounded to a multiple of
  the device count (so every dp divides it);
* attention kernels: unfused (softmax materialised) when the source predates 2023, when
  FlashAttention had not reached Megatron-LM, DeepSpeed or metaseq; fused otherwise;
* pipelines whose pp does not divide the layers (BLOOM: 70 layers on 12 stages) are uneven, the
  busiest stage holding ceil(layers/pp);
* micro-batch: when blank, the fastest that fits among the divisors of the per-replica batch
  (the value a team tuning the run would pick);
* virtual pipeline stages: when blank with pp > 1, the fastest valid vpp (jointly with a blank
  micro-batch) if the row's recognised stack interleaves its pipeline by default
  (``interleaved_pipeline`` in ``training_stacks.yaml``: Megatron-Core, NeMo/Megatron-Bridge, MaxText's
  circular pipeline, Meta's Llama 3 stack), else 1 (plain 1F1B: legacy Megatron-LM, DeepSpeed,
  torchtitan, MindSpeed-LLM scripts without virtual stages, unrecognised frameworks);
* no tp/pp at all: the prediction is the conventional layout (:func:`conventional_layout`: TP
  across a server, the smallest pipeline that fits), the standard recipe a team that publishes a
  table without a layout most likely ran, not an exhaustive search; ``details.best_plan`` gives
  the planner's own best plan (``train.search_plans``) with whatever the row fixes, an upper bound
  on what the run achieved, so both can be compared with the measurement.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Final, Literal

from pydantic import ValidationError

from xpuplan.catalog.assumptions import Assumptions
from xpuplan.catalog.stacks import TrainingStack, default_training_stack, stack_for_framework
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.train.cluster import Cluster
from xpuplan.train.estimate import TrainEstimate, estimate
from xpuplan.train.plan import ParallelPlan, make_plan
from xpuplan.train.search import MAX_MICRO_BATCH, SearchSpace, search_plans, vpp_options
from xpuplan.train.step import StepModel
from xpuplan.validate.core import Prediction
from xpuplan.validate.rows import ValidationRow, model_from_row
from xpuplan.workload.training import (
    DEFAULT_GLOBAL_BATCH_TOKENS,
    TrainingJob,
    lora_target_list,
    offload_module_list,
    recompute_module_list,
)
from xpuplan.workload.vocabulary import LORA_TARGETS, METHODS, Method, Recompute

METRICS: Final = ("tokens_per_s_per_device", "step_time_s", "mfu", "model_tflops_per_device",
                  "hw_tflops_per_device", "device_hours")

#: Training precisions the step model covers.
PRECISIONS: Final = ("bf16", "fp16", "fp8", "fp4")

#: FlashAttention (Dao et al., May 2022) reached the large-scale training frameworks in 2023; runs
#: published before then used unfused attention.
FLASH_ATTENTION_YEAR: Final = 2023

#: Recomputation a row that does not print it is predicted with: the fastest valid one of these, chosen
#: together with the micro-batch (a team tuning the run trades recomputation against the micro-batch
#: that fits: full recomputation frees the memory for larger micro-batches, which amortise per-micro-
#: batch costs such as ZeRO-3/FSDP weight gathers). No recomputation is a candidate too: Megatron-Core's
#: --recompute-granularity defaults to none and the Megatron-Bridge performance recipes set recomputation
#: only where a layout needs it (scripts/performance/configs: recompute_num_layers, recompute_modules),
#: while their published tables do not print it; and with fused (flash) attention, selective recomputation
#: of the attention core keeps no fewer activations than none (perf.memory.activation_bytes_per_layer),
#: so it only wins where it is stated or where MLA up-projections are dropped.
INFERRED_RECOMPUTE: Final[tuple[Recompute, ...]] = ("none", "selective", "full")
#: On a recognised stack that can recompute chosen layers (``TrainingStack.partial_recompute``) the row is also tried
#: with ``partial``: full recomputation of the fewest layers per stage that fit, the rest keeping everything, what
#: the Megatron-Bridge performance recipes set where a layout needs some (``recompute_num_layers``, e.g. 5 layers for
#: one Llama 3 70B preset, scripts/performance/configs/llama/llama3_workload_base_configs.py at v0.3.0).

#: Largest tensor-parallel degree of the conventional layout: the accelerators of one server
#: (8 on HGX and OAM boards), the scale-up domain practitioners keep TP inside.
CONVENTIONAL_TP_MAX: Final = 8


def source_year(row: ValidationRow) -> int | None:
    """The publication year in the row's ``source`` (first 19xx/20xx), or None."""
    m = re.search(r"\b(19|20)\d{2}\b", row.source or "")
    return int(m.group(0)) if m else None


def framework_kernels(row: ValidationRow) -> Literal["fused", "eager"]:
    """Eager kernels for PyTorch-FSDP stacks (model code in plain PyTorch), fused otherwise
    (Megatron-LM, NeMo, MindSpeed, DeepSpeed-Megatron fuse their elementwise ops). A PyTorch run
    compiled with ``torch.compile`` is fused too (Inductor fuses the norm, rotary and SwiGLU chains):
    the row's printed figure decides ("eager" there wins), then its notes and framework."""
    fw = (row.get("framework") or "").casefold()
    if "fsdp" not in fw:
        return "fused"
    printed = (row.get("printed") or "").casefold()
    if "eager" in printed or "without torch.compile" in (row.get("notes") or "").casefold():
        return "eager"
    text = " ".join((printed, (row.get("notes") or "").casefold(), fw))
    return "fused" if ("torch.compile" in text or "--training.compile" in text) else "eager"


#: MaxText's named remat policies that keep only the attention's input projections (q/k/v, or the output
#: projection), saved or offloaded to the host, and rematerialise every other tensor of the layer: the backward
#: re-runs the forward but for those GEMMs (MaxText ``get_remat_policy``: ``save_qkv_proj`` and ``save_out_proj``
#: are ``save_only_these_names`` of those projections, ``qkv_proj_offloaded`` is ``save_and_offload_only_these_names``
#: with nothing saved and query/key/value offloaded to pinned host memory). Read as full recomputation, which also
#: charges those projections again: at most ~10% of a Llama-style layer's forward (q/k/v of Llama 2 70B: 84M of
#: the layer's 856M weights).
MAXTEXT_NEAR_FULL_REMAT: Final = ("qkv_proj_offloaded", "save_qkv_proj", "save_out_proj")


def maxtext_remat(row: ValidationRow, stack: TrainingStack) -> Recompute | None:
    """What a MaxText row's remat policy recomputes where the ``recompute`` column cannot say it (transcribed
    ``selective``): ``offload`` for a ``custom`` policy that offloads ``decoder_layer_input`` to the host (the
    layer inputs wait in host memory and the tensors the policy does not keep, MaxText's default for a named
    tensor being ``remat``, are rebuilt from them, so the backward re-runs the forward); ``full`` for a named
    policy of :data:`MAXTEXT_NEAR_FULL_REMAT`. None for other rows, the column standing: a custom policy that
    keeps the layer input on the device may keep (``device``) more than the notes name, so nothing is inferred
    from it. MaxText: ``remat_policy`` and the per-tensor ``remat`` / ``device`` / ``offload`` settings in
    configs/base.yml."""
    if stack.id != "maxtext" or row.get("recompute") not in (None, "selective"):
        return None
    for clause in (row.get("notes") or "").casefold().split(";"):
        if "remat" in clause and "custom" in clause and "offload" in clause and "decoder_layer_input" in clause:
            return "offload"
        if "remat" in clause and any(re.search(rf"\b{p}\b", clause) for p in MAXTEXT_NEAR_FULL_REMAT):
            return "full"
    return None


def _framework_zero(row: ValidationRow, stack: TrainingStack) -> int:
    """The ZeRO stage of a row that states none: 3 where its framework says FSDP, else the stack's default (1, or the
    nearest it offers: ``TrainingStack.default_zero_stage``)."""
    fw = (row.get("framework") or "").casefold()
    return 3 if "fsdp" in fw and 3 in stack.zero_stages else stack.default_zero_stage()


def row_stack(row: ValidationRow, assumptions: Assumptions | None = None,
              device: Any = None) -> tuple[TrainingStack, bool]:
    """(the training stack the row's ``framework`` names, given the source's year; whether it was
    recognised — otherwise the default stack for the row's ``device``: the one its vendor ships). The profile is
    the one ``assumptions`` hold (an overrides file's ``training_stacks:`` changes apply); None means the built-in
    ones."""
    st = stack_for_framework(row.get("framework"), source_year(row))
    chosen, known = (st, True) if st is not None else (default_training_stack(device), False)
    if assumptions is not None:
        chosen = assumptions.training_stack(chosen.id)
    return chosen, known


#: TrainingStack fields that say what a profile is, not how it runs: a row's ``stack_options`` cannot set them.
STACK_IDENTITY_FIELDS: Final = frozenset({"id", "name", "note", "sources"})


def stack_options(row: ValidationRow, stack: TrainingStack) -> TrainingStack:
    """``stack`` with the row's ``stack_options`` applied (``key=value;...``: what the run's recipe sets
    differently from the stack's profile); unknown keys and bad values are errors naming the column."""
    text = row.get("stack_options")
    if not text:
        return stack
    update: dict[str, str] = {}
    for part in str(text).split(";"):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise UserInputError(f"expected key=value pairs separated by ';', got {part.strip()!r}",
                                 field="stack_options")
        if key not in TrainingStack.model_fields or key in STACK_IDENTITY_FIELDS:
            known = sorted(k for k in TrainingStack.model_fields if k not in STACK_IDENTITY_FIELDS)
            raise UserInputError(f"{key!r} is not a training-stack property", field="stack_options",
                                 hint=f"one of: {', '.join(known)}")
        update[key] = value.strip()
    try:
        return TrainingStack.model_validate(stack.model_dump() | update)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UserInputError(f"{'.'.join(str(x) for x in err['loc'])}: {err['msg']}", field="stack_options") from None


def check_row(row: ValidationRow) -> None:
    """What the row must give before anything is built, in the order a reader would check it
    (the first missing piece is the reason reported)."""
    if row.metric not in METRICS:
        raise UserInputError(f"metric {row.metric!r} is not a training metric the planner predicts", field="metric")
    if row.metric == "device_hours" and row.get("train_tokens") is None:
        raise UserInputError("device_hours needs train_tokens", field="train_tokens")
    if row.get("seq_len") is None:
        raise UserInputError("seq_len is blank", field="seq_len")
    if (row.precision or "bf16") not in PRECISIONS:
        raise UserInputError(f"training precision {row.precision!r} is not modelled ({', '.join(PRECISIONS)})",
                             field="precision")


def _job(row: ValidationRow, inferred: dict[str, Any]) -> TrainingJob:
    n, seq = row.n_devices, row.get("seq_len")
    gbt = row.get("global_batch_tokens")
    if gbt is None:
        inferred["global_batch_tokens"] = "planner default"
        gbt = max(1, round(DEFAULT_GLOBAL_BATCH_TOKENS / seq / n)) * n * seq
    year = source_year(row)
    flash = year is None or year >= FLASH_ATTENTION_YEAR
    if not flash:
        inferred["flash_attention"] = False
    kernels = framework_kernels(row)
    if kernels == "eager":
        inferred["kernels"] = kernels
    cap = row.get("power_cap_w")
    if cap is not None and cap <= 0:
        raise UserInputError(f"power_cap_w must be a positive board power limit in W, got {cap:g}", field="power_cap_w")
    n_rec = row.get("recompute_layers")
    if n_rec is not None and n_rec < 1:
        raise UserInputError(f"recompute_layers must be a positive count of layers per stage recomputed in full, got "
                             f"{n_rec}", field="recompute_layers")
    mods_text = row.get("recompute_modules")  # Megatron-Core module names, separated by ';' or '+' in a CSV cell
    modules = (recompute_module_list(str(mods_text).replace("+", ",").replace(";", ","), "recompute_modules")
               if mods_text else None)
    off_text = row.get("offload_modules")  # fine-grained activation offloading, the same separators
    offloaded = (offload_module_list(str(off_text).replace("+", ",").replace(";", ","), "offload_modules")
                 if off_text else None)
    method, rank, targets = row_method(row)
    if method != "full":
        said = not row.get("method")
        inferred["method"] = ((f"{method} (the row's text says so)" if said else method)
                              + f", rank {rank}" + ("" if row.get("lora_rank") or rank_said(row) else
                                                    " (the planner's default)")
                              + f", adapting {'+'.join(targets)}"
                              + ("" if row.get("lora_targets") or targets_said(row) else " (default)"))
    return TrainingJob(seq_len=seq, global_batch_tokens=int(gbt), train_tokens=row.get("train_tokens"),
                       flash_attention=flash, kernels=kernels, power_cap_w=row.get("power_cap_w"),
                       method=method, lora_rank=rank, lora_targets=targets,  # type: ignore[arg-type]
                       recompute_layers=row.get("recompute_layers"), recompute_modules=modules,  # type: ignore[arg-type]
                       offload_modules=offloaded)  # type: ignore[arg-type]


#: A fine-tuning method named in a row's text, in any case: LoRA or QLoRA standing alone or ending a benchmark id
#: (MLPerf's ``llama2_70b_lora``), but not MLA's ``kv_lora_rank`` / ``q_lora_rank`` of an architecture note.
_METHOD_WORD: Final = re.compile(r"(?<![a-z])(?<!kv_)(?<!q_)(q?lora)(?![a-z])", re.IGNORECASE)
#: An adapter rank in a row's text: "rank 16", "rank: 16", or "r=16", "dim=16", "lora_rank=16" (PEFT's and
#: Megatron-Bridge's fields; only with "=", so a "head dim 128" is not one).
_RANK_WORDS: Final = re.compile(r"\brank\s*:?\s*(\d{1,5})\b|\b(?:r|dim|lora_r|lora_rank)\s*=\s*(\d{1,5})\b")
#: Adapted modules as frameworks name them in a row's text -> the planner's matrices (Megatron-Core's fused
#: linear_qkv and linear_fc1, Hugging Face's *_proj, PEFT's "all-linear").
_TARGET_WORDS: Final = {"linear_qkv": ("q", "k", "v"), "linear_proj": ("o",), "linear_fc1": ("gate", "up"),
                        "linear_fc2": ("down",), "q_proj": ("q",), "k_proj": ("k",), "v_proj": ("v",),
                        "o_proj": ("o",), "gate_proj": ("gate",), "up_proj": ("up",), "down_proj": ("down",)}


def _row_text(row: ValidationRow) -> str:
    return " ".join(str(row.get(c) or "") for c in ("source", "printed", "notes", "framework"))


def rank_said(row: ValidationRow) -> int | None:
    """The adapter rank a LoRA row's text gives, or None."""
    m = _RANK_WORDS.search(_row_text(row))
    value = int(next(g for g in m.groups() if g)) if m else 0
    return value or None


def targets_said(row: ValidationRow) -> tuple[str, ...] | None:
    """The matrices a LoRA row's text names as adapted (``linear_qkv``, ``q_proj``...; "all-linear": every one),
    in the planner's order, or None when it names none."""
    text = _row_text(row)
    if "all-linear" in text:
        return LORA_TARGETS
    named = {t for word, ts in _TARGET_WORDS.items() if re.search(rf"\b{word}\b", text) for t in ts}
    return tuple(t for t in LORA_TARGETS if t in named) or None


def described_method(row: ValidationRow) -> Method | None:
    """The method a training row's source, printed figure, notes or framework name: ``lora`` or ``qlora`` where the
    word stands there (a fine-tuning table's row transcribed in the plain format: "LoRA Performance", "QLoRA
    fine-tuning", MLPerf Training's "llama2_70b_lora"), else None."""
    m = _METHOD_WORD.search(_row_text(row))
    return None if m is None else ("qlora" if m.group(1).casefold() == "qlora" else "lora")


def row_method(row: ValidationRow) -> tuple[Method, int, tuple[str, ...]]:
    """(method, adapter rank, adapted matrices) of a training row. The method: the optional ``method`` column
    (``full``, ``lora`` or ``qlora``); blank, what the row's text names (:func:`described_method`), else full
    (pre-training and full-parameter fine-tuning such as SFT). The rank: the ``lora_rank`` column, else the text's
    (:func:`rank_said`), else the planner's default. The matrices: the ``lora_targets`` column (separated by ``;``,
    e.g. ``q;k;v`` for Megatron-Bridge's ``linear_qkv``), else the modules the text names (:func:`targets_said`),
    else all of them. A LoRA row read as full training is charged the frozen base's weight gradients and
    optimizer, a third of its GEMMs."""
    column = row.get("method")
    text = str(column).strip().casefold() if column else (described_method(row) or "full")
    if text not in METHODS:
        raise UserInputError(f"method must be one of {', '.join(METHODS)} (blank = full), got {text!r}", field="method")
    rank = row.get("lora_rank")
    names = row.get("lora_targets")
    if text == "full" and (rank is not None or names is not None):
        col = "lora_rank" if rank is not None else "lora_targets"
        raise UserInputError(f"{col} is set but the row's method is full training; set method to lora or qlora, or "
                             f"leave {col} blank", field=col)
    if rank is not None and rank < 1:
        raise UserInputError(f"lora_rank must be a positive adapter rank, got {rank}", field="lora_rank")
    if text == "full":
        return "full", int(TrainingJob.model_fields["lora_rank"].default), LORA_TARGETS
    targets = (lora_target_list(",".join(re.split(r"[;,\s]+", str(names).strip())), "lora_targets")
               if names is not None else targets_said(row)) or LORA_TARGETS
    rank = rank if rank is not None else (rank_said(row) or TrainingJob.model_fields["lora_rank"].default)
    return text, int(rank), targets  # type: ignore[return-value]


def predict_estimate(row: ValidationRow, assumptions: Assumptions | None = None) -> tuple[TrainEstimate, dict[str, Any]]:
    """The estimate behind a row's prediction and what was inferred to build it. A row with neither
    tp nor pp is predicted on its conventional layout (:func:`conventional_layout`); when no
    conventional layout gives a valid plan, on the planner's best plan (:func:`best_plan_estimate`)."""
    if row.get("tp") is not None or row.get("pp") is not None:
        return _estimate(row, assumptions)
    try:
        tp, pp = conventional_layout(row, assumptions)
        e, inferred = _estimate(_with(row, tp=tp, pp=pp), assumptions)
    except UserInputError as exc:
        e, inferred = best_plan_estimate(row, assumptions)
        inferred["plan"] += f" (no conventional layout is valid: {exc.render()})"
        return e, inferred
    inferred["plan"] = f"conventional: tp{tp}-pp{pp} ({CONVENTIONAL_LAYOUT})"
    return e, inferred


#: How :func:`conventional_layout` chooses, in words (the prediction's details repeat it).
CONVENTIONAL_LAYOUT: Final = "TP over a server, the smallest pipeline that fits"


@dataclasses.dataclass
class _RowSetup:
    """What every prediction of a training row starts from: the model, job, cluster, stack, step model
    and ZeRO stage, with the inferences made so far."""

    model: ModelArch
    inferred: dict[str, Any]
    job: TrainingJob
    precision: str
    cluster: Cluster
    stack: TrainingStack
    known: bool
    step_model: StepModel
    zero: int
    #: the row's recomputation: its column, or what its notes' MaxText remat policy says (:func:`maxtext_remat`);
    #: None when neither says (then inferred)
    recompute: Recompute | None = None


def _setup(row: ValidationRow, assumptions: Assumptions | None) -> _RowSetup:
    check_row(row)
    model = model_from_row(row)
    inferred: dict[str, Any] = {}
    job = _job(row, inferred)
    nic = row.get("scale_out_gbit_per_s")
    if nic is not None and nic <= 0:
        raise UserInputError(f"scale_out_gbit_per_s must be a positive network bandwidth per device in Gbit/s, "
                             f"got {nic:g}", field="scale_out_gbit_per_s")
    cluster = Cluster.from_catalog(row.hardware, row.n_devices, assumptions=assumptions, scale_out_gbit_per_s=nic)
    if nic is not None:
        inferred["scale_out"] = f"{nic:g} Gbit/s per device (the row's network, not the catalog's)"
    stack, known = row_stack(row, assumptions, cluster.device)
    inferred["stack"] = stack.id if known else f"{stack.id} (default)"
    if row.get("stack_options"):
        stack = stack_options(row, stack)
        inferred["stack_options"] = str(row.get("stack_options"))
    sm = StepModel(model, cluster.device, cluster.efficiency, job, stack=stack)
    zero = row.get("zero_stage")
    if zero is None:
        zero = _framework_zero(row, stack)
        inferred["zero_stage"] = zero
    recompute = row.get("recompute")
    if (n_rec := row.get("recompute_layers")) is not None:
        if recompute not in (None, "partial"):
            raise UserInputError(f"recompute_layers ({n_rec}) is a positive count of layers per stage recomputed in "
                                 f"full, for recompute partial (the row says {recompute!r})", field="recompute_layers")
        recompute = "partial"
    if job.recompute_modules is not None:
        if recompute not in (None, "selective"):
            raise UserInputError(f"recompute_modules ({'+'.join(job.recompute_modules)}) are what selective "
                                 f"recomputation re-runs (the row says {recompute!r})", field="recompute_modules")
        recompute = "selective"
    if (remat := maxtext_remat(row, stack)) is not None:
        recompute = remat
        inferred["recompute"] = (f"{remat} (the notes' MaxText remat policy: custom, tensors offloaded to host)"
                                 if remat == "offload" else
                                 f"{remat} (the notes' MaxText remat policy keeps only attention projections; "
                                 f"every other tensor of the layer is recomputed)")
    return _RowSetup(model, inferred, job, row.precision or "bf16", cluster, stack, known, sm, zero, recompute)


def best_plan_estimate(row: ValidationRow, assumptions: Assumptions | None = None) -> tuple[TrainEstimate,
                                                                                             dict[str, Any]]:
    """The planner's best plan (``train.search_plans``) for a row with neither tp nor pp, with whatever
    the row fixes: an upper bound on what the run achieved (the best plan that does not fit when none
    fits)."""
    setup = _setup(row, assumptions)
    model, inferred, job, precision, cluster, sm, zero = (setup.model, setup.inferred, setup.job, setup.precision,
                                                          setup.cluster, setup.step_model, setup.zero)
    recompute = setup.recompute
    space = SearchSpace(
        cp=[row.get("cp")] if row.get("cp") else None, zero_stage=[zero],
        recompute=[recompute] if recompute else None,
        sp=[bool(row.get("sp"))] if row.get("sp") is not None else None,
        micro_batch=[row.get("micro_batch")] if row.get("micro_batch") else None, precision=[precision],
    )
    res = search_plans(model, cluster, job, space=space, top=1, step_model=sm)
    if res.best is None:
        res = search_plans(model, cluster, job, space=space, top=1, step_model=sm, require_feasible=False)
    if res.best is None:
        raise UserInputError("no valid plan for this row's model, devices and batch", field="tp")
    inferred["plan"] = f"searched: {res.best.key}"
    return res.best, inferred


def _estimate(row: ValidationRow, assumptions: Assumptions | None) -> tuple[TrainEstimate, dict[str, Any]]:
    """The estimate of a row that gives tp and/or pp, inferring the rest."""
    setup = _setup(row, assumptions)
    model, inferred, job, precision, cluster, sm, zero = (setup.model, setup.inferred, setup.job, setup.precision,
                                                          setup.cluster, setup.step_model, setup.zero)
    stack, known = setup.stack, setup.known
    recompute = setup.recompute
    tp, pp = row.get("tp"), row.get("pp")
    recomputes: list[Recompute] = [recompute] if recompute is not None else list(INFERRED_RECOMPUTE)
    if recompute is None and stack.partial_recompute and known:
        recomputes.append("partial")
    if recompute is None and stack.layer_offload and known:
        # Megatron-Core's activation offloading (pp = 1), for rows whose framework names such a stack (a row that
        # names none falls back to the default stack, whose features it may not have)
        recomputes.append("layer_offload")
    tp, pp = tp or 1, pp or 1
    cp = row.get("cp") or 1
    dp = row.get("dp")
    if dp is None:
        inferred["dp"] = "n/(tp·pp·cp)"
    sp = row.get("sp")
    sp_b = bool(sp) if sp is not None else (stack.sequence_parallel and tp > 1)
    if sp is None:
        inferred["sp"] = sp_b
    ep = row.get("ep") or 1
    mb = row.get("micro_batch")
    n = row.n_devices
    vpps = [row.get("vpp")] if row.get("vpp") else inferred_vpp_candidates(model.n_layers, pp, stack, known)

    def build(micro: int, vpp: int, rec: Recompute) -> ParallelPlan:
        return make_plan(n_devices=n, global_batch_seqs=job.global_batch_seqs, tp=tp, pp=pp, cp=cp, dp=dp, vpp=vpp,
                         ep=ep, sp=sp_b, zero_stage=zero, recompute=rec, micro_batch=micro,
                         precision=precision)  # type: ignore[arg-type]

    uneven = model.n_layers % pp != 0
    if uneven:
        inferred["pipeline"] = f"uneven: {model.n_layers} layers on {pp} stages"
    per_replica = job.global_batch_seqs // (dp or n // (tp * pp * cp))
    micros = [mb] if mb is not None else [d for d in range(1, min(per_replica, MAX_MICRO_BATCH) + 1)
                                          if per_replica % d == 0]
    stack_split = mb is None and known and stack.pipeline_microbatches_default_pp and pp > 1 and per_replica % pp == 0
    if stack_split:
        micros = [per_replica // pp]  # the stack's default split: pp micro-batches per step
    best: TrainEstimate | None = None
    first_error: UserInputError | None = None
    for rec in recomputes:
        for vpp in vpps:
            for micro in micros:
                try:
                    e = estimate(model, cluster, build(micro, vpp, rec), job, step_model=sm,
                                 uneven_pipeline=uneven or model.n_layers % (pp * vpp) != 0)
                except UserInputError as exc:
                    first_error = first_error or exc
                    continue
                if best is None or (e.feasible, e.tokens_per_s) > (best.feasible, best.tokens_per_s):
                    best = e
    if best is None:
        if first_error is not None:  # every candidate fails for the same structural reason: say it
            raise first_error
        raise UserInputError("no micro-batch size gives a valid plan", field="micro_batch")
    if mb is None:
        inferred["micro_batch"] = (f"{best.plan.micro_batch} ({stack.id}'s default: pp micro-batches per step)"
                                   if stack_split else best.plan.micro_batch)
    if recompute is None and "recompute" not in inferred:
        inferred["recompute"] = best.plan.recompute
    if len(vpps) > 1:
        inferred["vpp"] = f"{best.plan.vpp} (the fastest valid: {stack.id} interleaves its pipeline)"
    return best, inferred


def inferred_vpp_candidates(n_layers: int, pp: int, stack: TrainingStack, known: bool = True) -> list[int]:
    """Virtual stages per device to try for a row that does not state vpp: 1 for a single stage, a
    stack that runs plain 1F1B, or a framework no stack profile recognises (``known`` False: the
    default stack stands in for its physics, not for its schedule); for a recognised stack whose
    recipes interleave (``interleaved_pipeline``),
    every vpp the search would try (:func:`xpuplan.train.search.vpp_options`: the divisors of
    layers/pp up to :data:`~xpuplan.train.search.MAX_VPP`, or any vpp leaving each virtual stage a
    layer when the stages are uneven). The predictor keeps the fastest valid one, as it does for the
    micro-batch."""
    if pp <= 1 or not known or not stack.interleaved_pipeline:
        return [1]
    return vpp_options(n_layers, pp, uneven=True)


def conventional_layout(row: ValidationRow, assumptions: Assumptions | None = None) -> tuple[int, int]:
    """(tp, pp) of the layout a team would start from when the source printed none: TP over one
    server (the largest divisor of the heads and of the device count up to the scale-up domain,
    at most :data:`CONVENTIONAL_TP_MAX`), then the smallest pipeline depth dividing the remaining
    devices at which the planner's memory estimate fits (the deepest tried when none fits). Only the dimensions the
    row's training stack runs (``TrainingStack.parallelism``)."""
    model = model_from_row(row)
    n = row.n_devices
    cluster = Cluster.from_catalog(row.hardware, n, assumptions=assumptions)
    stack = stack_options(row, row_stack(row, assumptions, cluster.device)[0])
    # only the dimensions the row's stack runs (TrainingStack.parallelism): an FSDP-only stack keeps tp = pp = 1
    limit = 1 if stack.lacks("tp") else min(cluster.domain_size, CONVENTIONAL_TP_MAX)
    tp = max(t for t in range(1, limit + 1) if model.n_heads % t == 0 and n % t == 0)
    depths = [p for p in range(1, n // tp + 1) if (n // tp) % p == 0 and p <= model.n_layers
              and (p == 1 or not stack.lacks("pp"))]
    for pp in depths:
        try:
            e, _ = _estimate(_with(row, tp=tp, pp=pp), assumptions)
        except UserInputError:
            continue
        if e.feasible:
            return tp, pp
    return tp, depths[-1]


def _with(row: ValidationRow, **cols: int) -> ValidationRow:
    return dataclasses.replace(row, raw={**row.raw, **{k: str(v) for k, v in cols.items()}})


def _metric(e: TrainEstimate, metric: str) -> float:
    value = {
        "tokens_per_s_per_device": e.tokens_per_s_per_device,
        "step_time_s": e.step_time_s,
        "mfu": e.mfu,
        "model_tflops_per_device": e.model_tflops_per_device,
        "hw_tflops_per_device": e.hw_tflops_per_device,
        "device_hours": e.device_hours,
    }[metric]
    assert value is not None, metric  # device_hours is checked to have train_tokens
    return float(value)


def predict(row: ValidationRow, assumptions: Assumptions | None = None) -> Prediction:
    """Predict the row's metric (see ``METRICS``); the planner's errors propagate (the harness
    turns them into the row's reason). ``assumptions``: None means the built-in defaults."""
    e, inferred = predict_estimate(row, assumptions)
    details: dict[str, Any] = {"plan": e.key, "feasible": e.feasible, "memory_bytes": e.memory.total_bytes,
                               "efficiency_source": e.efficiency_source, "inferred": inferred}
    if not e.feasible:
        details["note"] = "the planner's memory estimate exceeds the device (the run happened: prediction kept)"
    if row.get("tp") is None and row.get("pp") is None:
        details["layout"] = (f"not given: the prediction is the conventional layout ({CONVENTIONAL_LAYOUT}), the "
                             "standard recipe a team publishing no layout most likely ran; best_plan is the "
                             "planner's best plan, an upper bound on the run")
        details["best_plan"] = _best_plan(row, assumptions)
    return Prediction(_metric(e, row.metric), None, details)


def _best_plan(row: ValidationRow, assumptions: Assumptions | None) -> dict[str, Any]:
    """The planner's best plan for a row without a layout, and its error: the upper bound."""
    try:
        e, _ = best_plan_estimate(row, assumptions)
    except UserInputError as exc:
        return {"reason": exc.render()}
    value = _metric(e, row.metric)
    return {"plan": e.key, "predicted": value, "error": value / row.value - 1.0, "feasible": e.feasible,
            "what": "the planner's best plan (train.search_plans): an upper bound on the run"}
