"""Training-stack profiles and collective-communication libraries, as data.

``training_stacks.yaml``: what a training framework (and version) does by default that changes the
physics of a step — sequence parallelism with TP, TP communication overlap, asynchronous pipeline
sends, ZeRO-3/FSDP collective granularity and prefetch, MoE all-to-all overlap, the context-parallel
exchange (ring, all-gather, all-to-all) and whether FP8 training runs attention in FP8 — and how a free-text
framework name maps to a stack. ``collective_libraries.yaml``: which algorithms each library (NCCL,
RCCL, HCCL, CNCL) offers across scale-up domains, which sets a collective's latency term.

Both files are validated at load; errors name the file, line and field.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xpuplan.datafile import load_file
from xpuplan.errors import UserInputError

DATA_DIR: Final = Path(__file__).parent / "data"

#: Share of the streaming multiprocessors the MoE all-to-all kernels hold while a schedule overlaps them with
#: another micro-batch's compute (DualPipe, Megatron-Core's 1F1B A2A overlap): DeepSeek-V3's dispatch and combine
#: kernels use 20 of the H800's 132 SMs (DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv 2412.19437, sec.
#: 3.2.2), and DeepEP's kernels default to the same order (a configurable SM count). The compute the
#: exchange hides under runs on the remaining SMs for as long as the exchange lasts.
EP_OVERLAP_SM_SHARE: Final = 20.0 / 132.0

Zero3Granularity = Literal["parameter", "unit", "bucket"]
InterAlgorithm = Literal["ring", "tree", "halving_doubling"]
CpAlgorithm = Literal["ring", "all_gather", "all_gather_async", "all_to_all"]
AttentionKernel = Literal["native", "fa2", "fa1"]
ExpertGemm = Literal["per_expert", "grouped"]
#: The model-parallel dimensions a plan can use beyond data parallelism: tensor, pipeline, virtual pipeline stages
#: (an interleaved schedule), context and expert parallelism.
ParallelDim = Literal["tp", "pp", "vpp", "cp", "ep"]
PARALLEL_DIMS: Final[tuple[str, ...]] = ("tp", "pp", "vpp", "cp", "ep")
#: What each dimension is called in messages.
PARALLEL_DIM_NAMES: Final = {"tp": "tensor parallelism", "pp": "pipeline parallelism",
                             "vpp": "virtual pipeline stages (an interleaved schedule)",
                             "cp": "context parallelism", "ep": "expert parallelism"}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TrainingStack(_Strict):
    """How one training framework runs a plan (see ``catalog/data/training_stacks.yaml``)."""

    id: str = ""
    name: str
    sequence_parallel: bool = Field(description="SP on whenever tp > 1")
    tp_comm_overlap: bool = Field(description="TP/SP collectives chunked under the adjacent GEMMs")
    tp_overlap_needs_sp: bool = Field(default=True, description="the TP overlap works only with sequence parallelism "
                                                                "(Transformer Engine); False where the compiler "
                                                                "overlaps any TP collective (XLA collective matmul)")
    p2p_overlap: bool = Field(description="pipeline sends overlap the other virtual stage's compute")
    interleaved_pipeline: bool = Field(default=False, description="with pp > 1 the stack's recipes run an "
                                                                   "interleaved (virtual-stage) 1F1B or circular "
                                                                   "schedule; a run that does not state vpp is "
                                                                   "inferred to use the fastest valid one")
    grad_reduce_overlap: bool = Field(default=True, description="DP gradient buckets reduce under the backward")
    zero3_granularity: Zero3Granularity = Field(description="what one ZeRO-3/FSDP collective covers")
    zero3_prefetch: bool = Field(default=True, description="next gather issued under the current unit's compute")
    zero3_regather_on_recompute: bool = Field(
        default=True, description="with full recomputation the re-run forward gathers the ZeRO-3 weights once more; "
                                   "false: the backward's gather serves the recomputed forward and the backward alike "
                                   "(Megatron-FSDP reshards after the backward when recomputing)")
    zero3_hybrid: bool = Field(default=False, description="ZeRO-3 shards inside a scale-up domain only; the gradient "
                                                          "shard is all-reduced across domains once per step "
                                                          "(MaxText multislice: FSDP over ICI, DP over DCN)")
    tp_quantized_all_gather: bool = Field(
        default=False, description="in FP8/FP4 training the sequence-parallel all-gathers move the quantized GEMM "
                                   "input (Transformer Engine), the reduce-scatters stay 16-bit")
    grad_reduce_bytes: float = Field(
        default=4.0, ge=2, le=4, description="bytes per gradient element the data-parallel (and ZeRO-3) gradient "
                                             "reductions move: 4 = fp32 main gradients (Megatron's and FSDP2's "
                                             "default), 2 = reduced in bf16")
    ep_overlap: float = Field(default=0.0, ge=0, le=1, description="fraction of MoE all-to-all hidden")
    ep_overlap_schedule: Literal["steady", "combined_1f1b"] = Field(
        default="steady", description="which micro-batch passes the EP overlap reaches: steady (every pass; "
                                      "ep_overlap already counts the schedule's warm-up, as DualPipe's does) or "
                                      "combined_1f1b (Megatron-Core's batch-level overlap merges the forward of one "
                                      "micro-batch with the backward of another: the warm-up forwards and cool-down "
                                      "backwards, the first forward and last backward without pipelining, run alone)")
    pipeline_schedule: Literal["1f1b", "dualpipe"] = Field(
        default="1f1b", description="pipeline schedule: 1f1b (Megatron's, interleaved with vpp > 1) or dualpipe "
                                    "(DeepSeek-V3's bidirectional schedule: bubble (pp/2 - 1)(F&B + B - 3W), arXiv "
                                    "2412.19437 Table 2; its memory: two stages per device, pp + 1 micro-batches of "
                                    "activations; its rules: even pp, vpp 1, >= 2·pp micro-batches)")
    ep_overlap_opt_in: float = Field(
        default=0.0, ge=0, le=1,
        description="fraction of the MoE all-to-all a plan hides when it turns the stack's opt-in batch-level "
                    "overlap on (Megatron-Core --overlap-moe-expert-parallel-comm, on the passes ep_overlap_schedule "
                    "pairs); 0 = the stack has no such switch. The search tries plans with and without it "
                    "(ParallelPlan.ep_overlap): it holds one more layer (pipelined: and one model chunk) of "
                    "activations and excludes full recomputation")
    ep_overlap_sm_share: float = Field(
        default=EP_OVERLAP_SM_SHARE, ge=0, lt=1,
        description="share of the device's compute units the all-to-all kernels occupy while they run under "
                    "another micro-batch's compute: the hidden part costs that compute this share of its time")
    moe_node_dedup: bool = Field(default=False, description="a token crosses the network once per destination node "
                                                            "(then scale-up forwarding), e.g. DeepEP")
    moe_fp8_dispatch: bool = Field(default=False, description="FP8 dispatch payload in FP8 training (combine stays bf16)")
    expert_tp_one: bool = Field(
        default=False, description="with expert parallelism the expert layers run at expert-tensor-parallel size 1: "
                                   "every EP rank holds whole experts and routes its own sequence shard, the EP group "
                                   "takes adjacent ranks (MoE parallel folding); false: experts split over TP like a "
                                   "dense MLP wherever EP fits in dp·cp (Megatron-Core's default)")
    tp_sharded_activations: bool = Field(default=False, description="every activation a layer keeps is sharded over "
                                                                     "the tensor-parallel ranks whether or not the "
                                                                     "stack runs Megatron-style SP (XLA: the logical "
                                                                     "axis rules shard activation_embed and "
                                                                     "activation_mlp over the tensor mesh axis); "
                                                                     "memory only")
    expert_gemm: ExpertGemm = Field(
        default="per_expert", description="how the MoE expert GEMMs of one layer run: per_expert (one GEMM launch per "
                                          "local expert, each paying the device's kernel overhead: Transformer "
                                          "Engine's GroupedLinear on Hopper, DeepSpeed's expert loop) or grouped "
                                          "(one grouped-GEMM kernel over every local expert: torch._grouped_mm in "
                                          "torchtitan, DeepGEMM)")
    moe_host_sync: bool = Field(default=True, description="the dropless MoE dispatcher copies the per-expert token "
                                                          "counts to the host every MoE layer forward (a device-host "
                                                          "sync); false for static-shape (XLA) stacks")
    selective_recompute: Literal["attention", "op_sac"] = Field(
        default="attention", description="what recompute 'selective' re-runs in the backward: attention (the "
                                         "attention core, Megatron-Core's selective recomputation) or op_sac (PyTorch's "
                                         "op-level selective activation checkpointing as torchtitan applies it: "
                                         "the projections whose outputs it does not save, every elementwise op and "
                                         "the sequence-parallel all-gathers feeding them)")
    selective_modules: list[str] | None = Field(
        default=None, description="what recompute 'selective' re-runs when the job names no modules (Megatron-Core's "
                                  "module names; those the model lacks are dropped): DeepSeek-V3's framework "
                                  "recomputes the RMSNorms, MLA's up-projections and the experts' SwiGLU; none: "
                                  "the planner's default (the attention core, and MLA's up-projections)")
    pipeline_microbatches_default_pp: bool = Field(
        default=False, description="with pp > 1 and no micro-batch count set, the stack splits each data-parallel "
                                   "rank's batch into pp micro-batches (torchtitan: pipeline_parallel_microbatches "
                                   "defaults to the pipeline degree); a run that does not state its micro-batch is "
                                   "inferred to use that split instead of the fastest valid one")
    note: str = ""
    sources: tuple[str, ...] = Field(min_length=1)
    cp_algorithm: CpAlgorithm = Field(
        default="ring", description="how context parallelism exchanges K and V: ring (P2P blocks under the block "
                                   "attention), all_gather (exposed), all_gather_async (under the local block's "
                                   "attention), all_to_all (Ulysses: q, k, v and o re-sharded over heads)")
    fp8_attention: bool = Field(default=False, description="FP8 training runs the attention core in FP8 too "
                                                           "(Transformer Engine fp8_dpa); false: attention in BF16")
    attention_kv_repeat: bool = Field(default=False, description="the model code repeats grouped K/V heads to the "
                                                                 "query heads before the attention call (repeat_kv, "
                                                                 "then SDPA): the attention keeps, and context "
                                                                 "parallelism exchanges, K and V of every query head; "
                                                                 "false: GQA kernels take the KV heads as they are")
    fp8_output_head: bool = Field(default=False, description="FP8/FP4 training runs the output head (LM head) GEMM "
                                                             "in FP8 too; false: in 16 bits (Megatron-Core's "
                                                             "ColumnParallelLinear head, torchtitan's float8 filter)")
    fp8_saved_activations: bool = Field(default=False, description="FP8/FP4 training keeps the quantised (1-byte) "
                                                                   "copy of each linear layer's input for its weight "
                                                                   "gradient (Transformer Engine, DeepSeek-V3); "
                                                                   "false: the 16-bit input (torchao Float8Linear)")
    fp8_moe_act_inputs: bool = Field(default=False, description="FP8/FP4 training stores the routed experts' "
                                                                "activation input (the SwiGLU input, FC1's output) in "
                                                                "FP8 for the backward (DeepSeek-V3); false: 16 bits "
                                                                "(Transformer Engine keeps FC1's output as computed)")
    module_offload: bool = Field(default=False, description="the stack can keep chosen modules' inputs in host memory "
                                                            "between the forward and the backward (Megatron-Core "
                                                            "--fine-grained-activation-offloading --offload-modules)")
    module_recompute: bool = Field(default=False, description="the stack lets a run choose what selective recomputation "
                                                              "re-runs, module by module (Megatron-Core "
                                                              "--recompute-modules): the search tries the sets "
                                                              "published recipes use")
    layer_offload: bool = Field(default=False, description="the stack can move every activation of whole layers to host "
                                                           "memory between their forward and backward, without "
                                                           "recomputation (Megatron-Core --cpu-offloading-num-layers; "
                                                           "no pipeline parallelism): recompute mode layer_offload")
    partial_recompute: bool = Field(default=True, description="the stack can recompute a chosen number of layers in "
                                                              "full and keep every activation of the others (recompute "
                                                              "mode partial: Megatron-Core --recompute-method block "
                                                              "--recompute-num-layers N, torchtitan's checkpointing of "
                                                              "every N-th block, PyTorch's checkpoint wrapper on chosen "
                                                              "blocks); false where one policy covers every layer")
    fp8_primary_weights: bool = Field(default=False, description="FP8 training keeps the model's weights in FP8 as the "
                                                                 "primary copy (Megatron-Core --fp8-param-gather: no "
                                                                 "16-bit working copy; fp32 master in the optimizer) "
                                                                 "and all-gathers them in FP8; false: 16-bit weights "
                                                                 "plus cached FP8 copies")
    fp4_bf16_layer_fraction: float = Field(
        default=0.15, ge=0.0, le=1.0,
        description="share of the linear layers FP4 (NVFP4) training keeps in BF16, their GEMMs at the bf16 rate: "
                    "0.15 is NVIDIA's NVFP4 pre-training recipe for stability (arXiv 2509.25149, section 4.1: the "
                    "first two and last eight of 62 blocks); 0 where the stack's NVFP4 recipe keeps none "
                    "(Megatron-Core's --first-last-layers-bf16 is off by default, Megatron-Bridge's "
                    "bf16_with_nvfp4_mixed keeps it off)")
    parallelism: tuple[ParallelDim, ...] = Field(
        default=("tp", "pp", "vpp", "cp", "ep"),
        description="the model-parallel dimensions the stack can run beyond data parallelism (tp, pp, vpp, cp, ep): "
                    "the search proposes no plan using another, and a plan that uses one is refused (PyTorch FSDP and "
                    "Composer have no pipeline or context parallelism; DeepSpeed's pipeline engine no virtual stages)")
    uneven_pipeline: bool = Field(default=True, description="the stack can give pipeline stages different layer "
                                                            "counts (pp·vpp not dividing the layers: Megatron-Core "
                                                            "--decoder-first/last-pipeline-num-layers, torchtitan, "
                                                            "MindSpeed --num-layer-list); false where the layers must "
                                                            "divide evenly")
    zero_stages: tuple[int, ...] = Field(
        default=(0, 1, 2, 3), min_length=1,
        description="the ZeRO stages the stack offers (0 plain data parallelism, 1 sharded optimizer states, 2 and "
                    "gradients, 3 and parameters: FSDP's FULL_SHARD); FSDP-only stacks have no stage 1")
    pipeline_zero_stages: tuple[int, ...] | None = Field(
        default=None, description="the ZeRO stages the stack allows with pipeline parallelism (pp > 1); None: every "
                                  "stage of zero_stages (DeepSpeed's pipeline engine asserts ZeRO 0 or 1)")
    attention_kernel: AttentionKernel = Field(
        default="native", description="fused attention the stack runs: native (the device's best: cuDNN / "
                                      "FlashAttention-3 on Hopper via Transformer Engine, vendor kernels elsewhere) "
                                      "or fa2 (FlashAttention-2's code: PyTorch SDPA's flash backend, the flash-attn "
                                      "2 package), timed at the device's attention_fa2_peak_fraction, or fa1 "
                                      "(FlashAttention-1-generation kernels: flash-attn 1.x, the Triton "
                                      "FlashAttention of 2022-23), at fa1_factor times that")

    @model_validator(mode="after")
    def _capabilities(self) -> TrainingStack:
        if len(set(self.parallelism)) != len(self.parallelism):
            raise ValueError(f"parallelism: each dimension once, got {list(self.parallelism)}")
        if "vpp" in self.parallelism and "pp" not in self.parallelism:
            raise ValueError("parallelism: vpp (virtual pipeline stages) needs pp")
        bad = [z for z in self.zero_stages if z not in (0, 1, 2, 3)]
        if bad or len(set(self.zero_stages)) != len(self.zero_stages):
            raise ValueError(f"zero_stages: distinct stages of 0, 1, 2, 3, got {list(self.zero_stages)}")
        piped = self.pipeline_zero_stages
        if piped is not None and (not piped or len(set(piped)) != len(piped)
                                  or any(z not in self.zero_stages for z in piped)):
            raise ValueError(f"pipeline_zero_stages: distinct stages of zero_stages {list(self.zero_stages)}, got "
                             f"{list(piped)}")
        return self

    def default_zero_stage(self) -> int:
        """The ZeRO stage a plan that names none runs: 1 (sharded optimizer states, the distributed optimizer) where
        the stack offers it, else the smallest sharding it has above it (FSDP's SHARD_GRAD_OP, 2), else its largest."""
        above = [z for z in self.zero_stages if z >= 1]
        return 1 if 1 in self.zero_stages else (min(above) if above else max(self.zero_stages))

    def lacks(self, dim: str) -> bool:
        """Whether the stack cannot run model-parallel dimension ``dim`` (one of :data:`PARALLEL_DIMS`)."""
        return dim not in self.parallelism


class _Pattern(_Strict):
    pattern: str
    stack: str
    before_year: int | None = None


class _HardwareDefault(_Strict):
    """The stack a device's own vendor ships for LLM training, the default where a job names none."""

    vendor: str | None = None
    kind: str | None = None
    stack: str
    source: str

    def matches(self, vendor: str, kind: str) -> bool:
        return ((self.vendor is None or self.vendor.casefold() == vendor.casefold())
                and (self.kind is None or self.kind.casefold() == kind.casefold()))


class StacksFile(_Strict):
    schema_version: Literal[1]
    default_stack: str
    stacks: dict[str, TrainingStack] = Field(min_length=1)
    name_patterns: list[_Pattern] = Field(default_factory=list)
    hardware_defaults: list[_HardwareDefault] = Field(default_factory=list)

    def default_stack_for(self, device: Any = None) -> str:
        """The default stack's id for ``device`` (anything with ``vendor`` and ``kind``): the first
        ``hardware_defaults`` entry it matches, else ``default_stack``; ``default_stack`` without a device."""
        if device is not None:
            for h in self.hardware_defaults:
                if h.matches(str(getattr(device, "vendor", "")), str(getattr(device, "kind", ""))):
                    return h.stack
        return self.default_stack

    @model_validator(mode="after")
    def _references(self) -> StacksFile:
        if self.default_stack not in self.stacks:
            raise ValueError(f"default_stack: unknown stack {self.default_stack!r}")
        for i, p in enumerate(self.name_patterns):
            if p.stack not in self.stacks:
                raise ValueError(f"name_patterns[{i}]: unknown stack {p.stack!r}")
            try:
                re.compile(p.pattern)
            except re.error as exc:
                raise ValueError(f"name_patterns[{i}]: bad pattern {p.pattern!r}: {exc}") from None
        for i, h in enumerate(self.hardware_defaults):
            if h.stack not in self.stacks:
                raise ValueError(f"hardware_defaults[{i}]: unknown stack {h.stack!r}")
            if h.vendor is None and h.kind is None:
                raise ValueError(f"hardware_defaults[{i}]: give vendor, kind or both")
        return self


class CollectiveLibrary(_Strict):
    """Algorithms a collective library offers across scale-up domains."""

    id: str = ""
    name: str
    vendors: tuple[str, ...] = ()
    all_reduce: tuple[InterAlgorithm, ...] = Field(min_length=1)
    all_gather: tuple[InterAlgorithm, ...] = Field(min_length=1)
    source: str

    @property
    def tree_all_reduce(self) -> bool:
        return "tree" in self.all_reduce

    @property
    def log_all_reduce(self) -> bool:
        return "halving_doubling" in self.all_reduce

    @property
    def log_all_gather(self) -> bool:
        """All-gather/reduce-scatter in ceil(log2 n) steps across domains (recursive halving-doubling)."""
        return "halving_doubling" in self.all_gather or "tree" in self.all_gather


class LibrariesFile(_Strict):
    schema_version: Literal[1]
    default_library: str
    libraries: dict[str, CollectiveLibrary] = Field(min_length=1)

    @model_validator(mode="after")
    def _references(self) -> LibrariesFile:
        if self.default_library not in self.libraries:
            raise ValueError(f"default_library: unknown library {self.default_library!r}")
        return self


@lru_cache(maxsize=4)
def load_stacks(path: str | Path = DATA_DIR / "training_stacks.yaml") -> StacksFile:
    """The training-stack file (built-in by default), each stack carrying its id."""
    f = load_file(StacksFile, path)
    stacks = {k: v.model_copy(update={"id": k}) for k, v in f.stacks.items()}
    return f.model_copy(update={"stacks": stacks})


@lru_cache(maxsize=4)
def load_libraries(path: str | Path = DATA_DIR / "collective_libraries.yaml") -> LibrariesFile:
    """The collective-library file (built-in by default), each library carrying its id."""
    f = load_file(LibrariesFile, path)
    libs = {k: v.model_copy(update={"id": k}) for k, v in f.libraries.items()}
    return f.model_copy(update={"libraries": libs})


def training_stack(name: str | None = None) -> TrainingStack:
    """The built-in stack ``name`` (the default stack when None); UserInputError lists the known ones."""
    f = load_stacks()
    key = f.default_stack if name is None else name.strip().casefold()
    if key not in f.stacks:
        raise UserInputError(f"unknown training stack {name!r}; known: {', '.join(f.stacks)}", field="stack")
    return f.stacks[key]


def default_training_stack(device: Any = None) -> TrainingStack:
    """The stack a job that names none runs: the one ``device``'s vendor ships (``hardware_defaults``: MaxText on
    TPUs, MindSpeed-LLM on Ascend, Intel's Megatron-DeepSpeed on Gaudi), else the file's ``default_stack`` (Megatron-Core)."""
    f = load_stacks()
    return f.stacks[f.default_stack_for(device)]


def stack_for_framework(framework: str | None, year: int | None = None) -> TrainingStack | None:
    """The stack a free-text framework name refers to (first matching ``name_patterns`` entry whose
    ``before_year`` admits ``year``; unknown year: patterns without a year bound only), else None."""
    if not framework:
        return None
    f = load_stacks()
    for p in f.name_patterns:
        if not re.search(p.pattern, framework, flags=re.IGNORECASE):
            continue
        if p.before_year is not None and (year is None or year >= p.before_year):
            continue
        return f.stacks[p.stack]
    return None


def library_for_vendor(vendor: str | None) -> CollectiveLibrary:
    """The collective library a vendor's clusters use (the default library when none lists it)."""
    f = load_libraries()
    v = (vendor or "").casefold()
    for lib in f.libraries.values():
        if any(x.casefold() == v for x in lib.vendors):
            return lib
    return f.libraries[f.default_library]


def collective_library(name: str) -> CollectiveLibrary:
    f = load_libraries()
    if name not in f.libraries:
        raise UserInputError(f"unknown collective library {name!r}; known: {', '.join(f.libraries)}", field="library")
    return f.libraries[name]
