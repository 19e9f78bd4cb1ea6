"""Serving-specific constants: engine families and the few assumptions of the serving model.

Every number here is an assumption with a stated reason; the fitted ones say how they were chosen
(docs/validation.md reports the error on every published row they were checked against).
Hardware efficiencies (achievable fraction of peak FLOP/s and bandwidth, kernel overheads,
collective bandwidth) are *not* here: they come from ``xpuplan.calibration.resolve_efficiency``
(``perf/data/efficiency.yaml`` or a calibration profile), shared with the training planner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Final, Literal

from xpuplan.errors import UserInputError
from xpuplan.units import GB, MS, US

BatchingMode = Literal["continuous", "static"]


@dataclass(frozen=True)
class EngineProfile:
    """What a serving-engine family adds on top of the hardware roofline.

    ``step_overhead_s`` is the host-side cost of one engine iteration that the GPU does not hide:
    scheduling, input preparation, sampling and detokenisation hand-off, Python (vLLM/SGLang) or
    C++ (TensorRT-LLM, TurboMind, MindIE) runtime. ``launch_overhead_s_per_kernel`` is extra
    per-kernel dispatch cost on top of the device's ``kernel_overhead_s`` where the engine runs
    eager kernels without graphs (plain PyTorch).
    """

    id: str
    name: str
    step_overhead_s: float
    launch_overhead_s_per_kernel: float
    gpu_memory_fraction: float
    block_size_tokens: int
    max_num_seqs: int
    batching: BatchingMode
    chunked_prefill: bool
    reserve_full_output: bool
    prefill_chunk_tokens: int
    note: str
    encoder_overhead_s: float = 0.0
    gqa_shared_kv_load: bool = True
    custom_allreduce: bool = True
    version: tuple[int, ...] | None = None


#: Host-side step overhead of compiled C++ runtimes (TensorRT-LLM, TurboMind, MindIE) per engine
#: iteration. Fitted: the single value that minimises the median error of the TensorRT-LLM
#: batch-1 TTFT rows of the validation set (H100/A100/L40S, 128-token prompts, where the
#: roofline part is 1-10 ms). It also covers the request set-up of gptSessionBenchmark.
CPP_RUNTIME_STEP_OVERHEAD_S: Final = 2.0 * MS

#: Host-side step overhead of Python-scheduled engines with CUDA graphs (vLLM, SGLang): scheduler,
#: input preparation and sampler per iteration. An assumption from vLLM's own profiling blog posts
#: (v0.5/v0.6: ~1-3 ms of CPU time per step before the V1 engine overlapped it); checked against
#: the vLLM CI latency rows (trust C).
PYTHON_ENGINE_STEP_OVERHEAD_S: Final = 2.0 * MS

#: Host cost of one execution of a compiled encoder graph (TensorRT ``enqueueV3``, ONNX Runtime
#: session run, Ascend ACL model execute): ~50-150 µs in vendor profiles; 100 µs assumed. Encoders
#: (BERT) run one forward per request batch, no scheduler loop.
GRAPH_RUNTIME_OVERHEAD_S: Final = 0.1 * MS

#: Plain PyTorch (Hugging Face ``generate``): eager kernels, each launched from Python. Launch
#: cost ~10-20 µs per kernel on a modern host CPU (PyTorch profiler traces); 15 µs assumed.
EAGER_LAUNCH_OVERHEAD_S_PER_KERNEL: Final = 15.0 * US

#: Default block (page) sizes in tokens: vLLM 16, SGLang token-level radix cache (1),
#: TensorRT-LLM ``tokens_per_block`` 64, MindIE 128, LMDeploy TurboMind 64 (``cache_block_seq_len``).
ENGINES: Final[dict[str, EngineProfile]] = {
    e.id: e
    for e in (
        EngineProfile(
            id="vllm", name="vLLM", step_overhead_s=PYTHON_ENGINE_STEP_OVERHEAD_S, launch_overhead_s_per_kernel=0.0,
            gpu_memory_fraction=0.90, block_size_tokens=16, max_num_seqs=256, batching="continuous",
            chunked_prefill=True, reserve_full_output=False, prefill_chunk_tokens=8192,
            note="PagedAttention, continuous batching, CUDA graphs for decode; gpu_memory_utilization 0.9",
            encoder_overhead_s=PYTHON_ENGINE_STEP_OVERHEAD_S,
        ),
        EngineProfile(
            id="sglang", name="SGLang", step_overhead_s=PYTHON_ENGINE_STEP_OVERHEAD_S, launch_overhead_s_per_kernel=0.0,
            gpu_memory_fraction=0.88, block_size_tokens=1, max_num_seqs=1024, batching="continuous",
            chunked_prefill=True, reserve_full_output=False, prefill_chunk_tokens=8192,
            note="RadixAttention (token-granular pages), overlap scheduler; mem_fraction_static ~0.88",
            encoder_overhead_s=PYTHON_ENGINE_STEP_OVERHEAD_S,
        ),
        EngineProfile(
            id="trtllm", name="TensorRT-LLM", step_overhead_s=CPP_RUNTIME_STEP_OVERHEAD_S,
            launch_overhead_s_per_kernel=0.0, gpu_memory_fraction=0.90, block_size_tokens=64, max_num_seqs=2048,
            batching="continuous", chunked_prefill=True, reserve_full_output=True, prefill_chunk_tokens=8192,
            note="in-flight batching (GUARANTEED_NO_EVICT reserves prompt+output); kv_cache_free_gpu_memory_fraction 0.9",
            encoder_overhead_s=GRAPH_RUNTIME_OVERHEAD_S,
        ),
        EngineProfile(
            id="tensorrt", name="TensorRT / ONNX Runtime", step_overhead_s=CPP_RUNTIME_STEP_OVERHEAD_S,
            launch_overhead_s_per_kernel=0.0, gpu_memory_fraction=0.90, block_size_tokens=64, max_num_seqs=256,
            batching="static", chunked_prefill=False, reserve_full_output=True, prefill_chunk_tokens=16384,
            note="compiled graph runtime, the usual way to serve encoders (BERT); static batches",
            encoder_overhead_s=GRAPH_RUNTIME_OVERHEAD_S,
        ),
        EngineProfile(
            id="lmdeploy", name="LMDeploy (TurboMind)", step_overhead_s=CPP_RUNTIME_STEP_OVERHEAD_S,
            launch_overhead_s_per_kernel=0.0, gpu_memory_fraction=0.80, block_size_tokens=64, max_num_seqs=256,
            batching="continuous", chunked_prefill=False, reserve_full_output=False, prefill_chunk_tokens=8192,
            note="persistent batch, blocked KV; cache_max_entry_count 0.8",
            encoder_overhead_s=GRAPH_RUNTIME_OVERHEAD_S,
        ),
        EngineProfile(
            id="mindie", name="MindIE", step_overhead_s=CPP_RUNTIME_STEP_OVERHEAD_S, launch_overhead_s_per_kernel=0.0,
            gpu_memory_fraction=0.90, block_size_tokens=128, max_num_seqs=256, batching="continuous",
            chunked_prefill=False, reserve_full_output=True, prefill_chunk_tokens=8192,
            note="Ascend MindIE-LLM: continuous batching, 128-token blocks; npuMemSize-style fraction assumed 0.9",
            encoder_overhead_s=GRAPH_RUNTIME_OVERHEAD_S,
        ),
        EngineProfile(
            id="pytorch", name="plain PyTorch (HF generate)", step_overhead_s=PYTHON_ENGINE_STEP_OVERHEAD_S,
            launch_overhead_s_per_kernel=EAGER_LAUNCH_OVERHEAD_S_PER_KERNEL, gpu_memory_fraction=0.90,
            block_size_tokens=1, max_num_seqs=64, batching="static", chunked_prefill=False,
            reserve_full_output=True, prefill_chunk_tokens=16384,
            note="static batches, contiguous KV sized for prompt+output, eager kernels",
        ),
    )
}

#: Engine names as sources and users spell them -> family id.
_ENGINE_PATTERNS: Final = (
    (r"tensorrt[-_ ]?llm|trt[-_ ]?llm", "trtllm"),
    (r"tensorrt|\btrt\b|onnx|triton", "tensorrt"),
    (r"sglang", "sglang"),
    (r"vllm", "vllm"),
    (r"lmdeploy|turbomind", "lmdeploy"),
    (r"mindie|mindspore", "mindie"),
    (r"pytorch|torch|hf|transformers|huggingface|eager", "pytorch"),
)


#: TensorRT-LLM before v0.8 had no XQA kernel: its generation-phase (masked MHA) attention loads
#: every KV head once per *query* head, so GQA/MQA models read the KV cache n_heads/n_kv_heads
#: times per decode step. NVIDIA's XQA blog (docs/source/blogs/XQA-kernel.md, "will be included in
#: the v0.8 releases") measures 2.4x more Llama-70B throughput at 128/2048 tokens once it is on.
TRTLLM_XQA_MIN_VERSION: Final = (0, 8)

#: TensorRT-LLM before v0.8 all-reduced with NCCL's ring by default (the custom one-/two-shot
#: all-reduce plugin was opt-in, ``--use_custom_all_reduce``): small messages pay 2·(n-1) link
#: latencies instead of two.
TRTLLM_CUSTOM_ALLREDUCE_MIN_VERSION: Final = (0, 8)

_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, ...] | None:
    """``"TensorRT-LLM v0.6.1"`` -> (0, 6, 1); None when no version is printed."""
    m = _VERSION.search(text)
    if m is None:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def default_engine(serving_engines: tuple[str, ...], *, encoder: bool = False) -> str:
    """First engine family the device's ecosystem lists (catalog order), vLLM when none is known;
    for encoders a compiled graph runtime (TensorRT on CUDA devices, MindIE on Ascend)."""
    families = []
    for name in serving_engines:
        try:
            families.append(engine_profile(name).id)
        except UserInputError:
            continue
    if encoder:
        if "mindie" in families:
            return "mindie"
        return "tensorrt" if ("trtllm" in families or "tensorrt" in families) else (families[0] if families else "pytorch")
    return families[0] if families else "vllm"


def engine_profile(name: str | None, *, field: str = "engine") -> EngineProfile:
    """Engine family for a name as printed (``"TensorRT-LLM v0.6.1"`` -> trtllm); None -> vLLM.

    A printed version selects version-specific kernels (TensorRT-LLM < 0.8: no XQA, NCCL ring
    all-reduce); without a version the current behaviour is assumed.
    """
    if name is None or not name.strip():
        return ENGINES["vllm"]
    key = name.strip().casefold()
    family = key if key in ENGINES else None
    if family is None:
        for pattern, fam in _ENGINE_PATTERNS:
            if re.search(pattern, key):
                family = fam
                break
    if family is None:
        raise UserInputError(f"unknown serving engine {name!r}; known families: {', '.join(ENGINES)}", field=field)
    prof = ENGINES[family]
    version = parse_version(key)
    if version is None:
        return prof
    changes: dict[str, object] = {"version": version}
    if family == "trtllm":
        changes["gqa_shared_kv_load"] = version[:2] >= TRTLLM_XQA_MIN_VERSION
        changes["custom_allreduce"] = version[:2] >= TRTLLM_CUSTOM_ALLREDUCE_MIN_VERSION
    return replace(prof, **changes)  # type: ignore[arg-type]


# --- memory ------------------------------------------------------------------------------------
#: Activation dtype of every serving engine modelled here (bf16/fp16 activations between layers).
ACTIVATION_BYTES: Final = 2.0

#: Workspace per device besides weights and KV: CUDA/CANN context, communicator buffers, CUDA-graph
#: pools, allocator slack. Same figure as the foundation's ``RUNTIME_OVERHEAD_BYTES`` (2 GB) for
#: consistency; engines subtract it before the memory fraction applies.
SERVING_WORKSPACE_BYTES: Final = 2.0 * GB

# --- weight-only quantisation -----------------------------------------------------------------
#: Vector operations per weight element to dequantise int4/int8 weights inside a GEMM (unpack,
#: convert, subtract zero, scale): the count used by the Marlin and AWQ kernel papers (~4).
DEQUANT_OPS_PER_WEIGHT: Final = 4.0

#: Token rows sharing one dequantised weight tile: weight-only GEMM kernels dequantise each weight
#: tile once per block of 64 (AWQ) to 128 (Marlin) token rows; 64 assumed (the conservative end).
DEQUANT_TILE_TOKENS: Final = 64

#: Non-tensor-core (vector) throughput as a fraction of the 16-bit tensor peak when the catalog
#: has no fp32 figure (H100: 67 of 989 TFLOP/s = 1/15; A100: 19.5/312 = 1/16): 1/16 assumed.
VECTOR_TO_TENSOR_RATIO: Final = 1.0 / 16.0

# --- latency statistics -------------------------------------------------------------------------
#: Percentile used for latency SLOs unless the user gives another.
DEFAULT_SLO_PERCENTILE: Final = 99.0

#: Queueing model for TTFT: prompts wait for the prefill server, modelled as an M/D/1 queue (Poisson
#: arrivals, near-deterministic prefill time for a given prompt length); the tail of the wait uses
#: the exponential approximation P(W > t) = rho·exp(-t·2(1-rho)/s), whose mean is the M/D/1 mean
#: rho·s/(2(1-rho)). Highest utilisation accepted before a load is called unstable:
MAX_STABLE_UTILISATION: Final = 0.98

# --- disaggregation ---------------------------------------------------------------------------
#: Fraction of the link's per-direction bandwidth a KV-cache transfer reaches (NIXL/Mooncake report
#: ~70-90% of NIC line rate for MB-sized transfers); 0.8, like the collective bus fractions.
KV_TRANSFER_BW_FRACTION: Final = 0.8

# --- SLO search ----------------------------------------------------------------------------------
#: Relative tolerance of the bisection on request rate (stop when hi/lo - 1 < this).
SLO_SEARCH_REL_TOL: Final = 1e-3
