"""What the user wants trained: ``TrainingJob`` (sequence, batch, tokens, method) and the scenario file.

A training scenario YAML names the model, the hardware, the device count (or a range), the job,
optionally a parallel plan and cluster overrides::

    model: llama3-70b
    hardware: nvidia-h100-sxm-80gb
    devices: 1024            # or devices_range: "256:4096"
    job:
      seq_len: 8192
      global_batch_tokens: 16777216
      train_tokens: 15.0e12
    plan:                    # optional: estimate this plan instead of searching
      tp: 8
      pp: 4
      micro_batch: 1
      recompute: selective
    cluster:                 # optional overrides of the catalog defaults
      scale_out_gbit_per_s: 400

Loading errors name the file, line and field (``xpuplan.datafile``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from xpuplan.datafile import load_file
from xpuplan.errors import UserInputError, echo
from xpuplan.workload.vocabulary import (
    LORA_TARGETS,
    OFFLOAD_MODULES,
    RECOMPUTE_MODULES,
    Kernels,
    LoraTarget,
    Method,
    OffloadModule,
    Recompute,
    RecomputeModule,
    TrainPrecision,
)

#: Tokens per optimizer step when the user gives none, for pre-training: ~4M tokens (2**22), the
#: batch LLaMA, Llama 2 and (at 3.2M) GPT-3 175B used.
DEFAULT_GLOBAL_BATCH_TOKENS: Final = 4 * 1024 * 1024

#: Tokens per device per optimizer step in the default pre-training batch of large clusters: teams
#: grow the batch with the cluster so each data-parallel replica keeps enough micro-batches to fill
#: its pipeline. Llama 3 405B ends at 16M tokens on 16,384 H100 (Llama 3 report, arXiv 2407.21783,
#: §3.4.1 and §3.3.2) = 1,024 tokens per GPU.
DEFAULT_TOKENS_PER_DEVICE: Final = 1024


def default_global_batch_tokens(n_devices: int, seq_len: int) -> int:
    """Default tokens per step for pre-training on ``n_devices``: the larger of the classic 4M-token
    batch and 1,024 tokens per device, rounded down to whole sequences (at least one)."""
    tokens = max(DEFAULT_GLOBAL_BATCH_TOKENS, DEFAULT_TOKENS_PER_DEVICE * n_devices)
    return max(1, tokens // seq_len) * seq_len

#: Sequences per optimizer step when fine-tuning and the user gives no batch: a common
#: instruction-tuning batch (64-128 sequences in Alpaca/Vicuna/PEFT recipes).
DEFAULT_FINETUNE_BATCH_SEQUENCES: Final = 64

#: Fraction of device memory kept free by default (allocator fragmentation, spikes).
DEFAULT_MEMORY_RESERVE: Final = 0.05

#: Fraction of the host CPU memory per device (``Device.host_memory_bytes``) that activations offloaded to the host
#: may not take: the operating system and page cache, each rank's process (CUDA context, pinned staging buffers,
#: framework and Python heap), data-loader workers and checkpoint staging (asynchronous checkpointing copies the
#: rank's model states to host memory first) share it. An estimate, not a measurement: a run that knows its host
#: sets ``host_memory_reserve`` or the host memory figure (``--hw-figure DEVICE:host_memory.capacity_gib=N``).
DEFAULT_HOST_MEMORY_RESERVE: Final = 0.25


def lora_target_list(text: str | None, field: str) -> tuple[str, ...] | None:
    """A comma list of LoRA targets ('q,k,v'; 'all' = every matrix) as the job's ``lora_targets``; names outside
    :data:`~xpuplan.workload.vocabulary.LORA_TARGETS`, repeats or an empty list -> UserInputError naming ``field``."""
    if text is None:
        return None
    names = [x.casefold() for x in [x.strip() for x in text.split(",") if x.strip()]]
    if names == ["all"]:
        return LORA_TARGETS
    bad = [x for x in names if x not in LORA_TARGETS]
    if not names or bad or len(set(names)) != len(names):
        what = (f"unknown matrix {echo(bad[0])}" if bad else "a matrix named twice" if names else "an empty list")
        raise UserInputError(f"{what}: give a comma list of {', '.join(LORA_TARGETS)} (or 'all'), e.g. 'q,k,v'",
                             field=field)
    return tuple(names)

def _module_list(text: str | None, field: str, allowed: tuple[str, ...], example: str, flag: str) -> tuple[str, ...] | None:
    """A comma list of module names from ``allowed``; unknown names, repeats or an empty list -> UserInputError
    naming ``field`` (``flag``: the Megatron-Core option the names come from)."""
    if text is None:
        return None
    names = [x.strip().casefold() for x in text.replace(" ", ",").split(",") if x.strip()]
    bad = [x for x in names if x not in allowed]
    if not names or bad or len(set(names)) != len(names):
        what = (f"unknown module {echo(bad[0])}" if bad else "a module named twice" if names else "an empty list")
        raise UserInputError(f"{what}: give a comma list of {', '.join(allowed)}, e.g. '{example}' "
                             f"(Megatron-Core {flag})", field=field)
    return tuple(names)


#: What the front ends say of --recompute-modules / recompute_modules and --offload-modules / offload_modules
#: (CLI help, request field descriptions), with the module names from the vocabulary.
RECOMPUTE_MODULES_HELP: Final = ("what --recompute selective re-runs: comma list of Megatron-Core modules "
                                 f"{', '.join(RECOMPUTE_MODULES)} (default core_attn; MLA models also mla_up_proj)")
OFFLOAD_MODULES_HELP: Final = ("whose inputs fine-grained activation offloading keeps in host memory between the "
                               f"forward and the backward: comma list of Megatron-Core modules {', '.join(OFFLOAD_MODULES)}"
                               ", or none (Megatron-Core stacks; unset: none, and a search also tries the sets NVIDIA's "
                               "recipes use)")


def recompute_module_list(text: str | None, field: str) -> tuple[str, ...] | None:
    """A comma list of Megatron-Core module names ('layernorm,moe_act') as the job's ``recompute_modules``; names
    outside :data:`~xpuplan.workload.vocabulary.RECOMPUTE_MODULES`, repeats or an empty list -> UserInputError
    naming ``field``."""
    return _module_list(text, field, RECOMPUTE_MODULES, "layernorm,moe_act", "--recompute-modules")


def offload_module_list(text: str | None, field: str) -> tuple[str, ...] | None:
    """A comma list of Megatron-Core module names ('expert_fc1,moe_act') as the job's ``offload_modules``; names
    outside :data:`~xpuplan.workload.vocabulary.OFFLOAD_MODULES`, repeats or an empty list -> UserInputError
    naming ``field``. ``none`` (:func:`no_offload`): no offloading, None."""
    if no_offload(text):
        return None
    if text is not None and "none" in [x.strip().casefold() for x in text.replace(" ", ",").split(",")]:
        raise UserInputError("'none' (no offloading) stands alone: give none, or a comma list of modules", field=field)
    return _module_list(text, field, OFFLOAD_MODULES, "expert_fc1,moe_act", "--offload-modules")


def no_offload(text: str | None) -> bool:
    """Whether ``--offload-modules`` says ``none``: no fine-grained offloading, not even the sets a search tries."""
    return text is not None and text.strip().casefold() == "none"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TrainingJob(_Strict):
    """The training or fine-tuning job, independent of the parallel plan and the hardware."""

    seq_len: int = Field(default=4096, ge=1, description="tokens per sequence")
    global_batch_tokens: int | None = Field(
        default=None, ge=1,
        description="tokens per optimizer step; default 4,194,304 (pre-training) or 64 sequences (fine-tuning)",
    )
    train_tokens: float | None = Field(default=None, gt=0, description="tokens to train on (time, device-hours, energy)")
    method: Method = Field(default="full", description="full training, or LoRA/QLoRA adapters on a frozen base")
    lora_rank: int = Field(default=16, ge=1, description="adapter rank for LoRA/QLoRA")
    lora_targets: tuple[LoraTarget, ...] = Field(
        default=LORA_TARGETS, min_length=1,  # type: ignore[arg-type]
        description="matrices LoRA/QLoRA adapts in every block: q, k, v, o, gate, up, down (default all of them, "
        "PEFT's 'all-linear'; e.g. q, k, v for Megatron-Bridge's linear_qkv)",
    )
    optimizer_recipe: str | None = Field(
        default=None, description="optimizer-state recipe (perf.memory.STATE_RECIPES); default by precision"
    )
    memory_reserve: float = Field(
        default=DEFAULT_MEMORY_RESERVE, ge=0, lt=1, description="fraction of device memory kept free"
    )
    host_memory_reserve: float = Field(
        default=DEFAULT_HOST_MEMORY_RESERVE, ge=0, lt=1,
        description="fraction of the host CPU memory per device that offloaded activations may not take (the OS, the "
                    "ranks' processes, data loading, checkpoint staging)"
    )
    flash_attention: bool = Field(
        default=True,
        description="fused (Flash) attention kernels; False = unfused softmax materialising the s x s scores "
        "(Megatron-LM before 2023)",
    )
    kernels: Kernels = Field(
        default="fused",
        description="fused elementwise kernels (Megatron-LM/Transformer Engine, torch.compile) or eager PyTorch "
        "(one kernel per op: HF model code under FSDP/DeepSpeed/PEFT)",
    )
    tp_overlap: float | None = Field(
        default=None, ge=0, le=1,
        description="fraction of TP/SP collective time hidden under GEMMs; blank = what the training stack does "
        "(catalog/data/training_stacks.yaml: chunked under the adjacent GEMMs where the stack overlaps TP "
        "communication, e.g. Transformer Engine tp-comm-overlap; exposed otherwise)",
    )
    ep_overlap: float | None = Field(
        default=None, ge=0, le=1,
        description="fraction of MoE all-to-all time hidden under compute; blank = the training stack's "
        "(0 for plain 1F1B schedules, ~0.9 with DeepSeek's DualPipe)",
    )
    dp_compression: float = Field(
        default=1.0, gt=0, le=1,
        description="factor on data-parallel gradient traffic (1 = none; e.g. 0.1 for PowerSGD-style compression)",
    )
    recompute_layers: int | None = Field(
        default=None, ge=1,
        description="layers of each pipeline stage a 'partial' plan recomputes in full, as the run sets it (Megatron-Core "
        "--recompute-num-layers times the virtual stages); blank = the fewest that let the plan fit",
    )
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        default=None, min_length=1,
        description="what a 'selective' plan re-runs, by Megatron-Core's names (--recompute-modules): core_attn, "
        "mla_up_proj, layernorm, mlp, moe, moe_act, shared_experts; blank = the attention core (and MLA's "
        "up-projections); stacks with op-level checkpointing (torchtitan) have their own policy",
    )
    offload_modules: tuple[OffloadModule, ...] | None = Field(
        default=None, min_length=1,
        description="whose inputs fine-grained activation offloading keeps in host memory between the forward and "
        "the backward, by Megatron-Core's names (--offload-modules): attn_norm, qkv_linear, core_attn, attn_proj, "
        "mlp_norm, expert_fc1, moe_act; blank = none",
    )
    power_cap_w: float | None = Field(
        default=None, gt=0,
        description="board power limit per device, W (nvidia-smi -pl); below the compute-bound draw the clock falls "
        "(perf.power DVFS model) and compute-bound kernels slow by the clock ratio; blank = the device's TDP",
    )

    @field_validator("lora_targets")
    @classmethod
    def _distinct_targets(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v):
            raise ValueError(f"lora_targets names a matrix twice: {', '.join(v)}")
        return v

    @field_validator("recompute_modules", "offload_modules")
    @classmethod
    def _distinct_modules(cls, v: tuple[str, ...] | None, info: ValidationInfo) -> tuple[str, ...] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError(f"{info.field_name} names a module twice: {', '.join(v)}")
        return v

    @model_validator(mode="after")
    def _check(self) -> TrainingJob:
        if self.global_batch_tokens is not None and self.global_batch_tokens % self.seq_len:
            raise ValueError(
                f"global_batch_tokens ({self.global_batch_tokens}) must be a multiple of seq_len ({self.seq_len})"
            )
        return self

    @property
    def global_batch_seqs(self) -> int:
        """Sequences per optimizer step."""
        if self.global_batch_tokens is not None:
            return self.global_batch_tokens // self.seq_len
        if self.method != "full":
            return DEFAULT_FINETUNE_BATCH_SEQUENCES
        return max(1, DEFAULT_GLOBAL_BATCH_TOKENS // self.seq_len)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_seqs * self.seq_len


class PlanIn(_Strict):
    """Parallel-plan fields a scenario may fix (blank = searched or defaulted)."""

    tp: int | None = Field(default=None, ge=1)
    pp: int | None = Field(default=None, ge=1)
    vpp: int | None = Field(default=None, ge=1)
    dp: int | None = Field(default=None, ge=1)
    cp: int | None = Field(default=None, ge=1)
    ep: int | None = Field(default=None, ge=1)
    sp: bool | None = None
    zero_stage: int | None = Field(default=None, ge=0, le=3)
    recompute: Recompute | None = None
    micro_batch: int | None = Field(default=None, ge=1)
    precision: TrainPrecision | None = None


class ClusterIn(_Strict):
    """Overrides of the catalog's network defaults (see ``train.cluster.Cluster.from_catalog``)."""

    domain_size: int | None = Field(default=None, ge=1, description="devices per scale-up domain")
    scale_up_kind: str | None = None
    scale_up_gb_per_s: float | None = Field(default=None, gt=0, description="per direction per device")
    scale_up_latency_us: float | None = Field(default=None, ge=0)
    scale_out_kind: str | None = None
    scale_out_gbit_per_s: float | None = Field(default=None, gt=0, description="NIC bandwidth per device")
    scale_out_latency_us: float | None = Field(default=None, ge=0)
    topology: Literal["switch", "mesh", "torus", "pcie"] | None = None


class TrainingScenario(_Strict):
    """A training scenario file: model x hardware x devices, the job, an optional plan."""

    model: str
    hardware: str
    devices: int | None = Field(default=None, ge=1)
    devices_range: str | None = Field(default=None, description="'A:B' (doubling) or 'A:B:STEP'")
    job: TrainingJob = Field(default_factory=TrainingJob)
    plan: PlanIn | None = None
    cluster: ClusterIn = Field(default_factory=ClusterIn)
    top: int = Field(default=10, ge=1)

    @model_validator(mode="after")
    def _check(self) -> TrainingScenario:
        if self.devices is not None and self.devices_range is not None:
            raise ValueError("give devices or devices_range, not both")
        return self


def load_training_scenario(path: str | Path) -> TrainingScenario:
    """Read and validate a training scenario YAML/JSON; errors name file, line and field."""
    return load_file(TrainingScenario, path)


def parse_int_range(text: str, field: str = "devices_range") -> list[int]:
    """Positive integers from a flag: 'A:B' -> A, 2A, 4A... <= B; 'A:B:STEP' -> A, A+STEP... <= B;
    'a,b,c' -> the list (sorted, unique). Used for device counts and for tp/batch lists."""
    try:
        if ":" in text:
            parts = [int(x) for x in text.split(":")]
            if len(parts) == 2:
                a, b = parts
                if a <= 0 or b < a:
                    raise ValueError
                out, v = [], a
                while v <= b:
                    out.append(v)
                    v *= 2
                return out
            if len(parts) == 3:
                a, b, step = parts
                if a <= 0 or b < a or step <= 0:
                    raise ValueError
                return list(range(a, b + 1, step))
            raise ValueError
        vals = [int(x) for x in text.split(",") if x.strip()]
        if not vals or any(v <= 0 for v in vals):
            raise ValueError
        return sorted(set(vals))
    except ValueError:
        raise UserInputError(
            f"expected 'A:B' (doubling from A to B), 'A:B:STEP' or a list 'a,b,c' of positive integers, got {text!r}",
            field=field,
        ) from None


#: Device-count ranges (``--devices-range``) use the same syntax.
parse_device_range = parse_int_range
