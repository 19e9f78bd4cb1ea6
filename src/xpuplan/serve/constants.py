"""Serving-specific constants: engine families and the few assumptions of the serving model.

Engine profiles (host step overheads, memory and scheduling defaults, which kernels a printed
version has) are data: ``catalog/data/engines.yaml``, each value explained and sourced there, read
into an :class:`~xpuplan.catalog.assumptions.Assumptions` bundle. The names below are read-only
views of the built-in profiles, kept for older imports; planners take an ``Assumptions`` and call
``assumptions.engine(name)``. Every other number here is an assumption with a stated reason; the
fitted ones say how they were chosen (docs/validation.md reports the error on every published row
they were checked against). Hardware efficiencies (achievable fraction of peak FLOP/s and
bandwidth, kernel overheads, collective bandwidth) are *not* here: they come from the same
``Assumptions`` (``efficiency.yaml``, ``link_types.yaml`` or a calibration profile), shared with
the training planner.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from xpuplan.catalog.assumptions import (
    Assumptions,
    BatchingMode,
    EngineProfile,
    LazyMapping,
    default_assumptions,
)
from xpuplan.errors import UserInputError
from xpuplan.units import GB

__all__ = ["ENGINES", "BatchingMode", "EngineProfile", "default_engine", "engine_profile", "parse_version"]

#: The built-in engine profiles by id (read-only view of ``catalog/data/engines.yaml``).
ENGINES: Final[Mapping[str, EngineProfile]] = LazyMapping(lambda: default_assumptions().engines)

#: Old constant names -> shared overhead in ``engines.yaml`` (seconds), kept for older imports.
_SHARED_OVERHEADS: Final = {
    "CPP_RUNTIME_STEP_OVERHEAD_S": "cpp-runtime-step",
    "PYTHON_ENGINE_STEP_OVERHEAD_S": "python-engine-step",
    "GRAPH_RUNTIME_OVERHEAD_S": "graph-runtime",
    "EAGER_LAUNCH_OVERHEAD_S_PER_KERNEL": "eager-kernel-launch",
}


def __getattr__(name: str) -> float:
    if name in _SHARED_OVERHEADS:
        return default_assumptions().engine_specs.shared_overheads[_SHARED_OVERHEADS[name]].seconds
    if name == "TRTLLM_XQA_MIN_VERSION":
        return dict(default_assumptions().engines["trtllm"].min_versions)["gqa_shared_kv_load"]  # type: ignore[return-value]
    if name == "TRTLLM_CUSTOM_ALLREDUCE_MIN_VERSION":
        return dict(default_assumptions().engines["trtllm"].min_versions)["custom_allreduce"]  # type: ignore[return-value]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> tuple[int, ...] | None:
    """``"TensorRT-LLM v0.6.1"`` -> (0, 6, 1); None when no version is printed."""
    m = _VERSION.search(text)
    if m is None:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def default_engine(serving_engines: tuple[str, ...], *, encoder: bool = False,
                   assumptions: Assumptions | None = None) -> str:
    """First engine family the device's ecosystem lists (catalog order), the assumptions' default
    engine (``engines.yaml`` ``default_engine``: vLLM) when none is known;
    for encoders a compiled graph runtime (TensorRT on CUDA devices, MindIE on Ascend)."""
    families = []
    for name in serving_engines:
        try:
            families.append(engine_profile(name, assumptions=assumptions).id)
        except UserInputError:
            continue
    if encoder:
        if "mindie" in families:
            return "mindie"
        return "tensorrt" if ("trtllm" in families or "tensorrt" in families) else (families[0] if families else "pytorch")
    return families[0] if families else (assumptions or default_assumptions()).default_engine_id


def engine_profile(name: str | None, *, field: str = "engine", assumptions: Assumptions | None = None) -> EngineProfile:
    """Engine family for a name as printed (``"TensorRT-LLM v0.6.1"`` -> trtllm); None -> vLLM.

    A printed version selects version-specific kernels (TensorRT-LLM < 0.8: no XQA, NCCL ring
    all-reduce; ``min_versions`` in ``engines.yaml``); without a version the current behaviour is
    assumed. Profiles come from ``assumptions`` (built-in when None).
    """
    return (assumptions or default_assumptions()).engine(name, field=field)


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
