"""``Assumptions``: every modelling assumption a planner uses, as one explicit, frozen input.

A planner's result depends on the model, the plan, the hardware and the assumptions; this module
is the last of these. An :class:`Assumptions` bundle holds

* achievable **efficiency** per op class (``efficiency.yaml``: defaults <- hardware family <- device),
  plus calibration profiles handed in by ``xpuplan.calibrate`` and the user's own overrides;
* **link types** (``link_types.yaml``): achievable collective bus bandwidth and latency per kind of
  interconnect;
* **serving-engine profiles** (``engines.yaml``): host overheads, memory and scheduling defaults;
* **training-state recipes** (``state_recipes.yaml``): bytes per parameter by role;
* the default **comparison set** of devices (``comparison_set.yaml``);
* **training-stack profiles** (``training_stacks.yaml``, see :mod:`xpuplan.catalog.stacks`): what a
  framework does by default (SP, TP overlap, pipeline-send overlap, ZeRO-3 granularity, MoE dispatch);
  an overrides file can change a built-in stack's properties or add the user's own stack.

Every resolved value says where it came from: ``defaults`` (the package data files),
``family:<name>``, ``device:<id>``, ``calibration:#<id> ...`` or ``user override``.

:func:`default_assumptions` is built from the package data files only (cached; no environment,
no store). :func:`load_assumptions` is the one entry point that reads ``$XPUPLAN_ASSUMPTIONS_PATH``
(files of overrides, see ``docs/assumptions.md``); jobs and front ends call it, planners never do:
they take ``assumptions=`` as an argument (``None`` means :func:`default_assumptions`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from xpuplan import units
from xpuplan.catalog.device import Device
from xpuplan.catalog.efficiency import (
    EFFICIENCY_FIELDS,
    Efficiency,
    EfficiencyFile,
    EfficiencyOverrides,
    FamilyRule,
)
from xpuplan.catalog.stacks import TrainingStack, load_stacks
from xpuplan.datafile import Path_t, format_loc, input_loc, line_for, load_model, parse_text, read_text
from xpuplan.errors import UserInputError
from xpuplan.registry import normalise_alias

__all__ = [
    "ENV_ASSUMPTIONS_PATH",
    "Assumptions",
    "Efficiency",
    "EngineProfile",
    "LazyMapping",
    "LinkType",
    "StateRecipe",
    "build_assumptions",
    "default_assumptions",
    "load_assumptions",
]

#: Directory of the built-in assumption files.
DATA_DIR: Final = Path(__file__).parent / "data"
#: The built-in files, by section.
FILES: Final = {
    "efficiency": "efficiency.yaml",
    "link_types": "link_types.yaml",
    "engines": "engines.yaml",
    "state_recipes": "state_recipes.yaml",
    "comparison_set": "comparison_set.yaml",
}
#: Environment variable naming files of user overrides (``os.pathsep``-separated). Read only by
#: :func:`load_assumptions`.
ENV_ASSUMPTIONS_PATH: Final = "XPUPLAN_ASSUMPTIONS_PATH"
#: Provenance label of values the user set.
USER_OVERRIDE: Final = "user override"
#: Provenance label of the link fields of an efficiency that the link type decides.
LINK_TYPE_SOURCE: Final = "link type"

SourceLabel = str
BatchingMode = Literal["continuous", "static"]
EngineFeature = Literal["gqa_shared_kv_load", "custom_allreduce", "async_scheduling"]
#: Engines that compute their memory fraction and prefill chunk from the device and layout (serve.engine_memory).
MemoryDefaultsRule = Literal["sglang-server-args"]

#: What an engine's memory fraction is a fraction of (how it sizes its paged KV cache, ``serve.kv``):
#: ``total`` device memory for everything the engine holds (vLLM ``gpu_memory_utilization``);
#: ``free`` memory left after weights, workspace and activations, all of it KV (TensorRT-LLM
#: ``free_gpu_memory_fraction``, LMDeploy >= 0.2.1 ``cache_max_entry_count``); ``static``: total
#: memory for weights + KV pool, activations and workspace from the rest (SGLang ``mem_fraction_static``).
MemoryFractionOf = Literal["total", "free", "static"]
#: How a serving engine moves tokens to their experts and back in an expert-parallel MoE layer (``serve.comm``).
MoeEpExchange = Literal["allgather_reducescatter", "alltoall"]


# =================================================================================================
# Runtime types: what planners read
# =================================================================================================
@dataclass(frozen=True)
class LinkType:
    """Achievable collective performance of one kind of link.

    ``bus_bw_fraction``: nccl-tests bus bandwidth for large messages over the link's peak per
    direction per device. ``latency_s``: per-step latency alpha (seconds).
    """

    name: str
    bus_bw_fraction: float
    latency_s: float
    description: str
    source: SourceLabel = "defaults"


@dataclass(frozen=True)
class EngineProfile:
    """What a serving-engine family adds on top of the hardware roofline.

    ``step_overhead_s`` is the host-side cost of one engine iteration that the GPU does not hide:
    scheduling, input preparation, sampling and detokenisation hand-off, Python (vLLM/SGLang) or
    C++ (TensorRT-LLM, TurboMind, MindIE) runtime. ``launch_overhead_s_per_kernel`` is extra
    per-kernel dispatch cost on top of the device's ``kernel_overhead_s`` where the engine runs
    eager kernels without graphs (plain PyTorch). ``host_s_per_sequence`` is the host time each
    scheduled sequence adds to a step (scheduler pass, output update, the workers' per-request
    bookkeeping); with ``async_scheduling`` the host work of the next step runs while the device
    computes this one, so only what exceeds the device time is exposed. ``fp8_kv_with_fp8_weights``:
    whether a replica whose KV dtype is not given stores its KV cache in FP8 when its weights are
    FP8/FP4 (TensorRT-LLM's quantised checkpoints), or in the model's 16-bit dtype (vLLM and SGLang:
    ``--kv-cache-dtype auto``). ``benchmark_dataset``: the dataset the engine's own throughput
    benchmark samples by default (``workload/data/datasets.yaml``), for published runs that do not
    name theirs; ``benchmark_closed_loop``: that benchmark keeps a fixed number of requests in flight
    instead of sending every prompt at once. ``prefill_first_non_mla``: releases of a build (vLLM-Ascend
    0.9.1) that turn chunked prefill off for models without MLA (:class:`PrefillFirst`; applied by
    ``serve.replica.make_replica``, which knows the model). ``moe_ep_exchange``: how an expert-parallel MoE layer
    exchanges tokens (``serve.comm.moe_exchange_s``): ``allgather_reducescatter`` (every rank gathers all ranks'
    tokens, the partial outputs are reduce-scattered back) or ``alltoall`` (each token goes once to every rank
    holding one of its experts); ``moe_dispatch_quantized``: the dispatched activations are quantised to the GEMMs'
    FP8/FP4 format first; ``moe_nvlink_alltoall``: the all-to-all replaces the gather where the EP group sits in a
    multi-node NVLink domain and ep > top-k (TensorRT-LLM's MNNVL path). ``masked_prefill_attention``: releases of a build
    (vLLM-Ascend before 0.12) whose fresh-prompt prefill steps compute the full square of attention scores
    (:class:`MaskedPrefillAttention`; applied by ``serve.step``). ``python_executor``: which printed builds pay
    ``host_s_per_sequence`` (:class:`PythonExecutor`; TensorRT-LLM's PyTorch backend), the others none.
    ``memory_defaults``: the name of a rule by which the
    engine computes its memory fraction and prefill chunk from the device and the layout (``serve.engine_memory``;
    SGLang's ``server_args``), applied by ``make_replica`` unless the user gives a fraction. ``min_versions``: (feature,
    first version with it); a printed older version is modelled without the feature.
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
    memory_fraction_of: MemoryFractionOf = "total"
    split_prompts: bool = True
    gqa_shared_kv_load: bool = True
    gqa_kv_reuse: float = 1.0
    custom_allreduce: bool = True
    host_s_per_sequence: float = 0.0
    async_scheduling: bool = False
    fp8_kv_with_fp8_weights: bool = True
    moe_ep_exchange: MoeEpExchange = "allgather_reducescatter"
    moe_dispatch_quantized: bool = False
    moe_nvlink_alltoall: bool = False
    benchmark_dataset: str | None = None
    benchmark_closed_loop: bool = False
    prefill_first_non_mla: PrefillFirst | None = None
    masked_prefill_attention: MaskedPrefillAttention | None = None
    python_executor: PythonExecutor | None = None
    memory_defaults: MemoryDefaultsRule | None = None
    version: tuple[int, ...] | None = None
    min_versions: tuple[tuple[EngineFeature, tuple[int, ...]], ...] = ()
    source: SourceLabel = "defaults"
    build_fitted: tuple[BuildFitted, ...] = ()
    device_defaults: DeviceDefaults | None = None


def printed_version(name: str) -> tuple[int, ...] | None:
    """The version a printed engine name carries (``"vLLM-Ascend v0.9.1"`` -> (0, 9, 1); a release-candidate
    suffix is not part of it), None without one."""
    m = re.search(r"v?(\d+)\.(\d+)(?:\.(\d+))?", name)
    return None if m is None else tuple(int(g) for g in m.groups() if g is not None)


def _of_build(name_contains: str, name: str) -> str | None:
    """The casefolded printed name when it names the build (contains ``name_contains``), else None."""
    key = name.casefold()
    return key if name_contains.casefold() in key else None


@dataclass(frozen=True)
class PrefillFirst:
    """A build of an engine (``name_contains`` in the printed name) whose ``releases`` (printed versions,
    exactly) turn chunked prefill off for models without MLA: prompts are prefilled whole, in steps of
    their own scheduled before any decode step, with a token budget of the model's context. ``active``:
    the printed name is one of them (set when the engine is resolved by name)."""

    name_contains: str
    releases: tuple[str, ...]
    note: str
    active: bool = False

    def matches(self, name: str) -> bool:
        """Whether a printed engine name is one of the releases of this build."""
        key = _of_build(self.name_contains, name)
        m = None if key is None else re.search(r"v?(\d+\.\d+(?:\.\d+)?(?:rc\d+)?)(?![\w.])", key)
        return m is not None and m.group(1) in {r.casefold() for r in self.releases}


@dataclass(frozen=True)
class MaskedPrefillAttention:
    """A build of an engine (``name_contains`` in the printed name) whose releases before ``before`` run a
    step of fresh prompts (no decode in the step, no cached context: the first or only chunk of each prompt)
    through a fused attention kernel that applies the causal mask to every tile instead of skipping the
    masked ones: the full square of scores, twice a causal kernel's work. Models without MLA only (the
    build's MLA backend is another kernel). ``active``: the printed name is such a release."""

    name_contains: str
    before: tuple[int, ...]
    note: str
    active: bool = False

    def matches(self, name: str) -> bool:
        """Whether a printed engine name is a release of this build before ``before``."""
        key = _of_build(self.name_contains, name)
        version = None if key is None else printed_version(key)
        return version is not None and version < self.before


@dataclass(frozen=True)
class PythonExecutor:
    """Which printed builds of an engine run their executor loop in Python, so that every request a step
    schedules costs the profile's ``host_s_per_sequence`` of host time: builds whose printed name contains one of
    ``name_contains`` and either carries no version (a current build) or a version from ``from_version`` on, or
    names one of ``also_named`` (e.g. TensorRT-LLM 0.17-0.21 run with ``--backend pytorch``). Any other printed
    name of the family (an older release, a packaged product that prints its own version, such as NIM) runs the
    compiled executor: no per-request host time. An engine resolved by its id is a current build."""

    name_contains: tuple[str, ...]
    from_version: tuple[int, ...]
    also_named: tuple[str, ...]
    note: str

    def matches(self, name: str) -> bool:
        """Whether a printed engine name is a build with the Python executor."""
        key = next((k for n in self.name_contains if (k := _of_build(n, name)) is not None), None)
        if key is None:
            return False
        if any(a.casefold() in key for a in self.also_named):
            return True
        version = printed_version(key)
        return version is None or version[: len(self.from_version)] >= self.from_version


@dataclass(frozen=True)
class BuildFitted:
    """Efficiency fields of a hardware family that were fitted on published runs of *older builds*
    of this engine: from ``from_version`` on (a printed version; a name without one keeps the fitted
    values, which are what the family's rows measured) they are the family's prior instead (the
    defaults and the broader family rules, links from their link type), because the later build
    replaced the kernels the fit measured. ``note`` says which kernels and cites the source."""

    family: str
    fields: tuple[str, ...]
    from_version: tuple[int, ...]
    note: str

    def applies(self, version: tuple[int, ...] | None) -> bool:
        """Whether an engine of printed ``version`` (None: not printed) is the later build."""
        return version is not None and version[: len(self.from_version)] >= self.from_version


@dataclass(frozen=True)
class DeviceDefaults:
    """Scheduling defaults an engine picks by the device it runs on, from ``from_version`` on (a printed
    version; a name without one keeps the profile's own): on devices of ``kinds`` with at least
    ``min_memory_gib`` of memory whose name contains none of ``except_names``, ``large`` (prefill token
    budget per step, sequence limit); on the other devices of ``kinds``, ``small``. ``note`` cites the
    engine's source."""

    from_version: tuple[int, ...]
    min_memory_gib: float
    except_names: tuple[str, ...]
    kinds: tuple[str, ...]
    large: tuple[int, int]
    small: tuple[int, int]
    note: str

    def applies(self, version: tuple[int, ...] | None) -> bool:
        """Whether an engine of printed ``version`` (None: not printed) picks its defaults by device."""
        return version is not None and version[: len(self.from_version)] >= self.from_version

    def pick(self, name: str, kind: str, memory_bytes: float) -> tuple[int, int] | None:
        """(prefill token budget, sequence limit) for a device, or None where the rule does not speak of it."""
        if kind.casefold() not in {k.casefold() for k in self.kinds}:
            return None
        named = any(x.casefold() in name.casefold() for x in self.except_names)
        return self.small if named or memory_bytes < self.min_memory_gib * units.GiB else self.large


@dataclass(frozen=True)
class StateRecipe:
    """Bytes per parameter kept for training, by role."""

    name: str
    weights: float
    grads: float
    master: float
    optimizer: float
    description: str
    source: SourceLabel = "defaults"

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.master + self.optimizer


# =================================================================================================
# File schemas (units in the keys, converted once when the runtime objects are built)
# =================================================================================================
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class LinkTypeSpec(_Strict):
    """One entry of ``link_types.yaml``."""

    bus_bw_fraction: float = Field(gt=0, le=1, description="large-message bus bandwidth / link peak per direction")
    latency_us: float = Field(ge=0, description="per-step latency alpha, microseconds")
    description: str = Field(min_length=1, description="what the figure rests on (benchmark, source)")


class LinkTypesFile(_Strict):
    schema_version: int
    link_types: dict[str, LinkTypeSpec] = Field(min_length=1)


class SharedOverhead(_Strict):
    """A named host overhead several engines share (``value_ms`` or ``value_us``)."""

    value_ms: float | None = Field(default=None, ge=0)
    value_us: float | None = Field(default=None, ge=0)
    kind: Literal["fitted", "assumption", "measured"]
    note: str = Field(min_length=1)

    @model_validator(mode="after")
    def _one_value(self) -> SharedOverhead:
        if (self.value_ms is None) == (self.value_us is None):
            raise ValueError("give exactly one of value_ms and value_us")
        return self

    @property
    def seconds(self) -> float:
        return self.value_ms * units.MS if self.value_ms is not None else float(self.value_us or 0.0) * units.US


_NonNeg = Annotated[float, Field(ge=0)]


class BenchmarkSpec(_Strict):
    """How an engine's own throughput benchmark loads it: the dataset it samples by default and whether it
    keeps a fixed number of requests in flight (closed loop) rather than sending every prompt at once."""

    dataset: str = Field(min_length=1)
    closed_loop: bool
    note: str = Field(min_length=1)


class PrefillFirstSpec(_Strict):
    """Releases of an engine build that turn chunked prefill off for models without MLA (see
    :class:`PrefillFirst`)."""

    name_contains: str = Field(min_length=1, description="substring of the printed engine name (the build)")
    releases: list[str] = Field(min_length=1, description="printed versions, exactly (e.g. 0.9.1, 0.10.2rc1)")
    note: str = Field(min_length=1, description="where the build does this, with the source")


class MaskedPrefillSpec(_Strict):
    """Releases of an engine build whose fresh-prompt prefill attention computes the full square of scores
    (see :class:`MaskedPrefillAttention`)."""

    name_contains: str = Field(min_length=1, description="substring of the printed engine name (the build)")
    before: str = Field(pattern=r"^\d+(\.\d+)*$", description="first release that skips the masked tiles")
    note: str = Field(min_length=1, description="the kernel the build calls, with the source")


class PythonExecutorSpec(_Strict):
    """Which printed builds of an engine run a Python executor loop (see :class:`PythonExecutor`)."""

    name_contains: list[str] = Field(min_length=1, description="substrings of the printed engine name (the build)")
    from_version: str = Field(pattern=r"^\d+(\.\d+)*$", description="first release whose default executor it is")
    also_named: list[str] = Field(default_factory=list, description="name substrings that select it in older releases")
    note: str = Field(min_length=1, description="where the build does this, with the source")


class EngineSpec(_Strict):
    """One entry of ``engines.yaml``; overheads are a number (in the key's unit) or a shared name."""

    name: str = Field(min_length=1)
    step_overhead_ms: _NonNeg | str
    encoder_overhead_ms: _NonNeg | str = 0.0
    launch_overhead_us_per_kernel: _NonNeg | str = 0.0
    gpu_memory_fraction: float = Field(gt=0, le=1)
    block_size_tokens: int = Field(ge=1)
    max_num_seqs: int = Field(ge=1)
    batching: BatchingMode
    chunked_prefill: bool
    reserve_full_output: bool
    prefill_chunk_tokens: int = Field(ge=1)
    note: str = Field(min_length=1)
    memory_fraction_of: MemoryFractionOf = "total"
    split_prompts: bool = True
    gqa_shared_kv_load: bool = True
    gqa_kv_reuse: float = Field(default=1.0, ge=0, le=1)
    custom_allreduce: bool = True
    host_us_per_sequence: _NonNeg | str = 0.0
    async_scheduling: bool = False
    fp8_kv_with_fp8_weights: bool = True
    moe_ep_exchange: MoeEpExchange = "allgather_reducescatter"
    moe_dispatch_quantized: bool = False
    moe_nvlink_alltoall: bool = False
    benchmark: BenchmarkSpec | None = None
    prefill_first_non_mla: PrefillFirstSpec | None = None
    masked_prefill_attention: MaskedPrefillSpec | None = None
    python_executor: PythonExecutorSpec | None = None
    memory_defaults: MemoryDefaultsRule | None = None
    min_versions: dict[EngineFeature, str] = Field(default_factory=dict)
    build_fitted: list[BuildFittedSpec] = Field(default_factory=list)
    device_defaults: DeviceDefaultsSpec | None = None

    @field_validator("min_versions")
    @classmethod
    def _versions(cls, v: dict[str, str]) -> dict[str, str]:
        for feature, text in v.items():
            if not re.fullmatch(r"\d+(\.\d+)*", text.strip()):
                raise ValueError(f"{feature}: version must look like 0.8 (got {text!r})")
        return v


def _version_text(v: str) -> str:
    """A printed engine version such as ``0.9`` or ``1.0.2`` (ValueError otherwise)."""
    if not re.fullmatch(r"\d+(\.\d+)*", v.strip()):
        raise ValueError(f"version must look like 0.9 (got {v!r})")
    return v


class SchedulingDefaultsSpec(_Strict):
    """Prefill token budget per engine step and sequence limit."""

    prefill_chunk_tokens: int = Field(ge=1)
    max_num_seqs: int = Field(ge=1)


class DeviceDefaultsSpec(_Strict):
    """An engine's ``device_defaults`` (see :class:`DeviceDefaults`)."""

    from_version: str = Field(description="first printed engine version that picks its defaults by device")
    min_memory_gib: float = Field(gt=0, description="devices with at least this much memory get `large`")
    except_names: list[str] = Field(default_factory=list, description="device-name substrings that get `small`")
    kinds: list[str] = Field(min_length=1, description="device kinds (GPU, NPU, ...) the rule speaks of")
    large: SchedulingDefaultsSpec
    small: SchedulingDefaultsSpec
    note: str = Field(min_length=1, description="where the engine sets these, with the source")

    @field_validator("from_version")
    @classmethod
    def _version(cls, v: str) -> str:
        return _version_text(v)


class BuildFittedSpec(_Strict):
    """One ``build_fitted`` entry of an engine (see :class:`BuildFitted`)."""

    family: str = Field(min_length=1, description="efficiency family (efficiency.yaml) whose fit it qualifies")
    fields: list[str] = Field(min_length=1, description="efficiency fields fitted on the older build")
    from_version: str = Field(description="first printed engine version that is the later build")
    note: str = Field(min_length=1, description="what changed in the build, with the source")

    @field_validator("from_version")
    @classmethod
    def _version(cls, v: str) -> str:
        return _version_text(v)

    @field_validator("fields")
    @classmethod
    def _fields(cls, v: list[str]) -> list[str]:
        bad = [f for f in v if f not in EFFICIENCY_FIELDS]
        if bad:
            raise ValueError(f"unknown efficiency field(s) {', '.join(bad)}; known: {', '.join(EFFICIENCY_FIELDS)}")
        return v


class NamePattern(_Strict):
    pattern: str = Field(min_length=1)
    engine: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a regular expression: {exc}") from None
        return v


class EnginesFile(_Strict):
    schema_version: int
    shared_overheads: dict[str, SharedOverhead] = Field(default_factory=dict)
    engines: dict[str, EngineSpec] = Field(min_length=1)
    name_patterns: list[NamePattern] = Field(default_factory=list)
    default_engine: str = "vllm"

    @model_validator(mode="after")
    def _references(self) -> EnginesFile:
        for eid, spec in self.engines.items():
            for key in ("step_overhead_ms", "encoder_overhead_ms", "launch_overhead_us_per_kernel",
                        "host_us_per_sequence"):
                ref = getattr(spec, key)
                if isinstance(ref, str) and ref not in self.shared_overheads:
                    raise ValueError(f"engines.{eid}.{key}: unknown shared overhead {ref!r}; "
                                     f"known: {', '.join(self.shared_overheads) or '(none)'}")
        for i, p in enumerate(self.name_patterns):
            if p.engine not in self.engines:
                raise ValueError(f"name_patterns[{i}]: unknown engine {p.engine!r}")
        if self.default_engine not in self.engines:
            raise ValueError(f"default_engine: unknown engine {self.default_engine!r}")
        return self


class StateRecipeSpec(_Strict):
    """One entry of ``state_recipes.yaml`` (bytes per parameter)."""

    weights_bytes_per_param: float = Field(ge=0)
    grads_bytes_per_param: float = Field(ge=0)
    master_bytes_per_param: float = Field(ge=0)
    optimizer_bytes_per_param: float = Field(ge=0)
    description: str = Field(min_length=1)


class StateRecipesFile(_Strict):
    schema_version: int
    state_recipes: dict[str, StateRecipeSpec] = Field(min_length=1)


class ComparisonSetFile(_Strict):
    schema_version: int
    note: str | None = None
    devices: list[str] = Field(min_length=1)


class EfficiencyOverridesSection(_Strict):
    """``efficiency:`` of an overrides file: changes to the defaults, family rules and devices."""

    defaults: EfficiencyOverrides | None = None
    families: dict[str, FamilyRule] = Field(default_factory=dict)
    devices: dict[str, EfficiencyOverrides] = Field(default_factory=dict)


class AssumptionOverrides(_Strict):
    """An overrides file / mapping. Entries of link types, engines and recipes are partial: the
    fields given replace the built-in ones, and a field that is itself a mapping (an engine's
    ``device_defaults``, ``min_versions``) is merged key by key the same way; a new name needs every field."""

    schema_version: int | None = None
    efficiency: EfficiencyOverridesSection | None = None
    link_types: dict[str, dict[str, Any]] = Field(default_factory=dict)
    engines: dict[str, dict[str, Any]] = Field(default_factory=dict)
    state_recipes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    training_stacks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    comparison_set: list[str] | None = Field(default=None, min_length=1)


# =================================================================================================
# Read-only views (the old module-level tables)
# =================================================================================================
V = TypeVar("V")


class LazyMapping(Mapping[str, V]):
    """A read-only mapping built on first use (keeps imports free of file parsing)."""

    def __init__(self, build: Callable[[], Mapping[str, V]]) -> None:
        self._build = build

    def _data(self) -> Mapping[str, V]:
        return self._build()

    def __getitem__(self, key: str) -> V:
        return self._data()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data())

    def __len__(self) -> int:
        return len(self._data())

    def __repr__(self) -> str:
        return f"LazyMapping({dict(self._data())!r})"


# =================================================================================================
# The bundle
# =================================================================================================
def _merged(base: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` over ``base``: mappings on both sides merged key by key, anything else replaced (None too)."""
    out = dict(base)
    for k, v in given.items():
        out[k] = _merged(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def _device_defaults(s: DeviceDefaultsSpec | None) -> DeviceDefaults | None:
    if s is None:
        return None
    return DeviceDefaults(_parse_version(s.from_version), s.min_memory_gib, tuple(s.except_names), tuple(s.kinds),
                          (s.large.prefill_chunk_tokens, s.large.max_num_seqs),
                          (s.small.prefill_chunk_tokens, s.small.max_num_seqs), s.note)


def _parse_version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.strip().split("."))


def _device_keys(device: Device) -> set[str]:
    return {normalise_alias(n) for n in (device.id, *device.aliases)}


class Assumptions(BaseModel):
    """Every assumption a planner uses, with where each value came from. Frozen: derive a changed
    bundle with :meth:`with_calibration` or :meth:`with_overrides`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    efficiency_layers: EfficiencyFile = Field(description="defaults, family rules and device entries")
    link_type_specs: dict[str, LinkTypeSpec]
    engine_specs: EnginesFile
    state_recipe_specs: dict[str, StateRecipeSpec]
    comparison_set: tuple[str, ...]
    comparison_set_note: str | None = None
    training_stack_specs: dict[str, TrainingStack] = Field(
        default_factory=lambda: dict(load_stacks().stacks),
        description="training-stack profiles by id (built-in training_stacks.yaml plus the user's)")
    calibrations: dict[str, Efficiency] = Field(default_factory=dict, description="device id -> calibration profile")
    user_device_efficiency: dict[str, EfficiencyOverrides] = Field(
        default_factory=dict, description="user's per-device efficiency values (applied above calibration)"
    )
    overridden: dict[str, str] = Field(
        default_factory=dict, description="dotted path of each value the user set -> its provenance label"
    )
    files: tuple[str, ...] = Field(default=(), description="files these assumptions were read from")

    # -- efficiency ----------------------------------------------------------------------------
    @cached_property
    def _eff_cache(self) -> dict[tuple[str, str, str, str | None], tuple[Efficiency, dict[str, str]]]:
        return {}

    def _label(self, path: str, default: str) -> str:
        return self.overridden.get(path, default)

    @staticmethod
    def _matching(entries: Mapping[str, V], device: Device) -> list[tuple[str, V]]:
        keys = _device_keys(device)
        exact = [(k, v) for k, v in entries.items() if k == device.id]
        return exact or [(k, v) for k, v in entries.items() if normalise_alias(k) in keys]

    def _resolve(self, device: Device) -> tuple[Efficiency, dict[str, str]]:
        key = (device.id, device.vendor, device.kind, device.architecture)
        hit = self._eff_cache.get(key)
        if hit is not None:
            return hit
        f = self.efficiency_layers
        eff = f.defaults
        prov = {k: self._label(f"efficiency.defaults.{k}", "defaults") for k in EFFICIENCY_FIELDS}
        for name, rule in f.families.items():
            if rule.matches(device.vendor, device.kind, device.architecture):
                vals = rule.values()
                eff = eff.merged(vals, f"family:{name}")
                prov.update({k: self._label(f"efficiency.families.{name}.{k}", f"family:{name}") for k in vals})
        for dev_key, entry in self._matching(f.devices, device)[:1]:
            vals = entry.values()
            eff = eff.merged(vals, f"device:{device.id}")
            prov.update({k: self._label(f"efficiency.devices.{dev_key}.{k}", f"device:{device.id}") for k in vals})
        for _, profile in self._matching(self.calibrations, device)[:1]:
            eff = profile
            prov = {k: profile.source for k in EFFICIENCY_FIELDS}
        for dev_key, entry in self._matching(self.user_device_efficiency, device)[:1]:
            vals = entry.values()
            label = self._label(f"efficiency.devices.{dev_key}", USER_OVERRIDE)
            eff = eff.merged(vals, eff.source)
            prov.update({k: label for k in vals})
        for k in EFFICIENCY_FIELDS:
            if getattr(eff, k) is None:
                prov[k] = LINK_TYPE_SOURCE
        if USER_OVERRIDE not in eff.source and any(v.startswith(USER_OVERRIDE) for v in prov.values()):
            eff = eff.merged({}, f"{eff.source} + {USER_OVERRIDE}")
        self._eff_cache[key] = (eff, prov)
        return eff, prov

    def efficiency_prior(self, device: Device, without_family: str) -> Efficiency:
        """The built-in efficiency of ``device`` without the family rule ``without_family``: the
        defaults and the other matching family rules (the prior a fitted family refines)."""
        f = self.efficiency_layers
        eff = f.defaults
        for name, rule in f.families.items():
            if name != without_family and rule.matches(device.vendor, device.kind, device.architecture):
                eff = eff.merged(rule.values(), f"family:{name}")
        return eff

    def efficiency_families(self, device: Device) -> list[str]:
        """The family rules of ``efficiency.yaml`` that apply to ``device``, in the order they are
        applied (broad first: the last one is the device's own family)."""
        return [name for name, rule in self.efficiency_layers.families.items()
                if rule.matches(device.vendor, device.kind, device.architecture)]

    def efficiency_family(self, device: Device) -> str | None:
        """The most specific family rule for ``device`` (the last that applies), or None."""
        fams = self.efficiency_families(device)
        return fams[-1] if fams else None

    def efficiency(self, device: Device) -> Efficiency:
        """Efficiency parameters for ``device``; ``.source`` names the most specific layer used."""
        return self._resolve(device)[0]

    def efficiency_with_priors(self, device: Device, fields: Iterable[str], why: str) -> Efficiency:
        """``device``'s efficiency with those of ``fields`` that its own family rule sets replaced by the
        family's prior (link fields: None, so the link type decides), ``why`` added to the source. A field
        a device entry, a calibration or a user override sets is a measurement of its own: kept."""
        e, prov = self._resolve(device)
        family = self.efficiency_family(device)
        own = [f for f in dict.fromkeys(fields) if family is not None and prov.get(f) == f"family:{family}"]
        if not own:
            return e
        prior = self.efficiency_prior(device, family)  # type: ignore[arg-type]
        return e.merged({f: getattr(prior, f) for f in own}, f"{e.source} ({why}: {', '.join(own)} from the prior)")

    def serving_build_fields(self, device: Device) -> tuple[str, ...]:
        """Fields of ``device``'s family that were fitted on one serving engine's builds and describe
        that build's kernels, not the hardware (``build_fitted`` in engines.yaml)."""
        family = self.efficiency_family(device)
        return tuple(dict.fromkeys(f for e in self.engines.values() for b in e.build_fitted if b.family == family
                                   for f in b.fields))

    def training_efficiency(self, device: Device) -> Efficiency:
        """Efficiency for training plans on ``device``: :meth:`efficiency`, except the family fields fitted on
        a serving engine's kernels (:meth:`serving_build_fields`), which no training stack runs: those take the
        family's prior (amd-cdna3's FP8 share and all-reduce latency were fitted on vLLM's 2024 ROCm build)."""
        fields = self.serving_build_fields(device)
        return self.efficiency_with_priors(device, fields, "training: fitted on a serving build") if fields else \
            self.efficiency(device)

    def efficiency_provenance(self, device: Device) -> dict[str, str]:
        """Where each efficiency parameter for ``device`` came from (``link type`` for link fields
        the link type decides)."""
        return dict(self._resolve(device)[1])

    @property
    def default_efficiency(self) -> Efficiency:
        """The ``defaults`` layer (before any family or device entry)."""
        return self.efficiency_layers.defaults

    # -- link types, engines, recipes ----------------------------------------------------------
    def _entry_source(self, section: str, name: str) -> str:
        prefix = f"{section}.{name}"
        hits = {v for k, v in self.overridden.items() if k == prefix or k.startswith(prefix + ".")}
        return sorted(hits)[0] if hits else "defaults"

    @cached_property
    def _link_types(self) -> Mapping[str, LinkType]:
        out = {
            name: LinkType(name, s.bus_bw_fraction, s.latency_us * units.US, s.description,
                           self._entry_source("link_types", name))
            for name, s in self.link_type_specs.items()
        }
        return MappingProxyType(out)

    @property
    def link_types(self) -> Mapping[str, LinkType]:
        """Link types by name (read-only)."""
        return self._link_types

    def link_type(self, kind: str, *, field: str = "link_type") -> LinkType:
        """The :class:`LinkType` named ``kind``; UserInputError lists the known names."""
        try:
            return self._link_types[kind]
        except KeyError:
            raise UserInputError(f"unknown link type {kind!r}; known: {', '.join(self._link_types)}",
                                 field=field) from None

    def _seconds(self, value: float | str, unit: float) -> float:
        if isinstance(value, str):
            return self.engine_specs.shared_overheads[value].seconds
        return value * unit

    @cached_property
    def _engines(self) -> Mapping[str, EngineProfile]:
        out = {}
        for eid, s in self.engine_specs.engines.items():
            out[eid] = EngineProfile(
                id=eid, name=s.name, step_overhead_s=self._seconds(s.step_overhead_ms, units.MS),
                launch_overhead_s_per_kernel=self._seconds(s.launch_overhead_us_per_kernel, units.US),
                gpu_memory_fraction=s.gpu_memory_fraction, block_size_tokens=s.block_size_tokens,
                max_num_seqs=s.max_num_seqs, batching=s.batching, chunked_prefill=s.chunked_prefill,
                reserve_full_output=s.reserve_full_output, prefill_chunk_tokens=s.prefill_chunk_tokens, note=s.note,
                encoder_overhead_s=self._seconds(s.encoder_overhead_ms, units.MS),
                memory_fraction_of=s.memory_fraction_of, split_prompts=s.split_prompts, gqa_shared_kv_load=s.gqa_shared_kv_load, gqa_kv_reuse=s.gqa_kv_reuse, custom_allreduce=s.custom_allreduce,
                host_s_per_sequence=self._seconds(s.host_us_per_sequence, units.US),
                async_scheduling=s.async_scheduling, fp8_kv_with_fp8_weights=s.fp8_kv_with_fp8_weights,
                moe_ep_exchange=s.moe_ep_exchange, moe_dispatch_quantized=s.moe_dispatch_quantized,
                moe_nvlink_alltoall=s.moe_nvlink_alltoall,
                benchmark_dataset=s.benchmark.dataset if s.benchmark else None,
                benchmark_closed_loop=bool(s.benchmark and s.benchmark.closed_loop),
                prefill_first_non_mla=(PrefillFirst(s.prefill_first_non_mla.name_contains,
                                                    tuple(s.prefill_first_non_mla.releases),
                                                    s.prefill_first_non_mla.note)
                                       if s.prefill_first_non_mla else None),
                masked_prefill_attention=(MaskedPrefillAttention(s.masked_prefill_attention.name_contains,
                                                                 _parse_version(s.masked_prefill_attention.before),
                                                                 s.masked_prefill_attention.note)
                                          if s.masked_prefill_attention else None),
                python_executor=(PythonExecutor(tuple(s.python_executor.name_contains),
                                                _parse_version(s.python_executor.from_version),
                                                tuple(s.python_executor.also_named), s.python_executor.note)
                                 if s.python_executor else None),
                memory_defaults=s.memory_defaults,
                min_versions=tuple((feat, _parse_version(v)) for feat, v in s.min_versions.items()),
                source=self._entry_source("engines", eid),
                build_fitted=tuple(BuildFitted(b.family, tuple(b.fields), _parse_version(b.from_version), b.note)
                                   for b in s.build_fitted),
                device_defaults=_device_defaults(s.device_defaults),
            )
        return MappingProxyType(out)

    @property
    def engines(self) -> Mapping[str, EngineProfile]:
        """Serving-engine profiles by id (read-only)."""
        return self._engines

    @cached_property
    def engine_name_patterns(self) -> tuple[tuple[re.Pattern[str], str], ...]:
        """(compiled pattern, engine id) in the order they are tried."""
        return tuple((re.compile(p.pattern), p.engine) for p in self.engine_specs.name_patterns)

    @property
    def default_engine_id(self) -> str:
        return self.engine_specs.default_engine

    def engine(self, name: str | None, *, field: str = "engine") -> EngineProfile:
        """Engine family for an id or a name as printed (``"TensorRT-LLM v0.6.1"`` -> trtllm; the
        printed version switches off kernels it predates); None or empty -> the default engine."""
        if name is None or not name.strip():
            return self._engines[self.default_engine_id]
        key = name.strip().casefold()
        family = key if key in self._engines else None
        if family is None:
            for pattern, fam in self.engine_name_patterns:
                if pattern.search(key):
                    family = fam
                    break
        if family is None:
            raise UserInputError(f"unknown serving engine {name!r}; known families: {', '.join(self._engines)}",
                                 field=field)
        prof = self._engines[family]
        if prof.prefill_first_non_mla is not None and prof.prefill_first_non_mla.matches(key):
            prof = replace(prof, prefill_first_non_mla=replace(prof.prefill_first_non_mla, active=True))
        if prof.masked_prefill_attention is not None and prof.masked_prefill_attention.matches(key):
            prof = replace(prof, masked_prefill_attention=replace(prof.masked_prefill_attention, active=True))
        if prof.python_executor is not None and key != family and not prof.python_executor.matches(key):
            prof = replace(prof, host_s_per_sequence=0.0)  # a compiled executor: no per-request Python work
        version = printed_version(key)
        if version is None:
            return prof
        changes: dict[str, Any] = {"version": version}
        for feature, first in prof.min_versions:
            changes[feature] = version[: len(first)] >= first
        return replace(prof, **changes)

    @cached_property
    def _state_recipes(self) -> Mapping[str, StateRecipe]:
        out = {
            name: StateRecipe(name, s.weights_bytes_per_param, s.grads_bytes_per_param, s.master_bytes_per_param,
                              s.optimizer_bytes_per_param, s.description, self._entry_source("state_recipes", name))
            for name, s in self.state_recipe_specs.items()
        }
        return MappingProxyType(out)

    @property
    def state_recipes(self) -> Mapping[str, StateRecipe]:
        """Training-state recipes by name (read-only)."""
        return self._state_recipes

    def state_recipe(self, name: str, *, field: str = "recipe") -> StateRecipe:
        try:
            return self._state_recipes[name]
        except KeyError:
            raise UserInputError(
                f"unknown optimizer-state recipe {name!r}; choose one of {', '.join(self._state_recipes)}", field=field
            ) from None

    # -- training stacks -----------------------------------------------------------------------
    @property
    def training_stacks(self) -> Mapping[str, TrainingStack]:
        """Training-stack profiles by id (read-only)."""
        return MappingProxyType(self.training_stack_specs)

    def training_stack(self, name: str | None = None, *, field: str = "stack", device: Any = None) -> TrainingStack:
        """The stack ``name`` (case-insensitive); when None, the default for ``device``
        (``StacksFile.default_stack_for``: MaxText on TPUs, MindSpeed-LLM on Ascend, Intel's Megatron-DeepSpeed on Gaudi, else Megatron-Core);
        UserInputError naming ``field`` and listing the known ones when unknown."""
        key = load_stacks().default_stack_for(device) if name is None else name.strip().casefold()
        try:
            return self.training_stack_specs[key]
        except KeyError:
            raise UserInputError(f"unknown training stack {name!r}; known: {', '.join(self.training_stack_specs)}",
                                 field=field) from None

    # -- deriving ------------------------------------------------------------------------------
    def _derive(self, **update: Any) -> Assumptions:
        """A new bundle with some fields replaced (a fresh object: nothing cached is carried over)."""
        data = {name: getattr(self, name) for name in type(self).model_fields}
        data.update(update)
        return type(self)(**data)

    def with_calibration(self, profiles: Mapping[str, Efficiency]) -> Assumptions:
        """A copy where each device id's efficiency is its calibration profile (the profile's
        ``source`` names it, e.g. ``calibration:#12 ...``). User overrides still apply above it."""
        for dev_id, eff in profiles.items():
            if not isinstance(eff, Efficiency):
                raise UserInputError(f"calibration for {dev_id!r} must be an Efficiency", field=f"calibration.{dev_id}")
        cal = {**self.calibrations, **dict(profiles)}
        return self._derive(calibrations=cal)

    def without_calibration(self) -> Assumptions:
        """A copy without calibration profiles (the layers a profile is fitted and laid over)."""
        return self._derive(calibrations={}) if self.calibrations else self

    def with_overrides(self, overrides: Mapping[str, Any] | AssumptionOverrides, *, source: str = USER_OVERRIDE,
                       file: str | None = None, lines: dict[Path_t, int] | None = None) -> Assumptions:
        """A copy with the user's ``overrides`` (the format of an overrides file, see
        ``docs/assumptions.md``). Unknown names or out-of-range values raise UserInputError naming
        the field (and the file and line when ``file``/``lines`` are given)."""
        lines = lines or {}
        if not isinstance(overrides, Mapping | AssumptionOverrides):
            raise UserInputError(f"assumption overrides must be a mapping of sections (got {type(overrides).__name__})",
                                 field="assumptions", file=file, line=lines.get(()))
        if isinstance(overrides, AssumptionOverrides):
            ov = overrides
        else:
            ov = _validate(AssumptionOverrides, overrides, file, lines, ())
        label = source if file is None else f"{source} ({file})"
        marks = dict(self.overridden)
        update: dict[str, Any] = {}

        if ov.efficiency is not None:
            layers = self.efficiency_layers
            defaults = layers.defaults
            if ov.efficiency.defaults is not None:
                vals = ov.efficiency.defaults.values()
                defaults = _validate(Efficiency, {**defaults.model_dump(), **vals}, file, lines, ("efficiency", "defaults"))
                marks.update({f"efficiency.defaults.{k}": label for k in vals})
            families = dict(layers.families)
            for name, rule in ov.efficiency.families.items():
                given = rule.model_dump(exclude_unset=True)
                base = families[name].model_dump(exclude_none=True) if name in families else {}
                families[name] = _validate(FamilyRule, {**base, **given}, file, lines, ("efficiency", "families", name))
                marks.update({f"efficiency.families.{name}.{k}": label for k in given if k in EFFICIENCY_FIELDS})
            update["efficiency_layers"] = layers.model_copy(update={"defaults": defaults, "families": families})
            user_dev = dict(self.user_device_efficiency)
            for dev, entry in ov.efficiency.devices.items():
                merged = {**(user_dev[dev].model_dump(exclude_none=True) if dev in user_dev else {}),
                          **entry.model_dump(exclude_none=True)}
                user_dev[dev] = EfficiencyOverrides.model_validate(merged)
                marks[f"efficiency.devices.{dev}"] = label
            update["user_device_efficiency"] = user_dev

        def merge_section(section: str, current: Mapping[str, BaseModel], spec: type[BaseModel],
                          given: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
            out = dict(current)
            for name, fields in given.items():
                base = current[name].model_dump() if name in current else {}
                out[name] = _validate(spec, _merged(base, fields), file, lines, (section, name))
                marks.update({f"{section}.{name}.{k}": label for k in fields})
            return out

        if ov.link_types:
            update["link_type_specs"] = merge_section("link_types", self.link_type_specs, LinkTypeSpec, ov.link_types)
        if ov.engines:
            engines = merge_section("engines", self.engine_specs.engines, EngineSpec, ov.engines)
            update["engine_specs"] = _validate(
                EnginesFile, {**self.engine_specs.model_dump(), "engines": {k: v.model_dump() for k, v in engines.items()}},
                file, lines, (),
            )
        if ov.state_recipes:
            update["state_recipe_specs"] = merge_section("state_recipes", self.state_recipe_specs, StateRecipeSpec,
                                                         ov.state_recipes)
        if ov.training_stacks:
            stacks = dict(self.training_stack_specs)
            for name, fields in ov.training_stacks.items():
                key = name.strip().casefold()
                base = stacks[key].model_dump() if key in stacks else {}
                stacks[key] = _validate(TrainingStack, {**base, **fields, "id": key}, file, lines,
                                        ("training_stacks", name))
                marks.update({f"training_stacks.{key}.{k}": label for k in fields})
            update["training_stack_specs"] = stacks
        if ov.comparison_set is not None:
            update["comparison_set"] = tuple(ov.comparison_set)
            marks["comparison_set"] = label
        update["overridden"] = marks
        if file is not None:
            update["files"] = (*self.files, file)
        return self._derive(**update)

    def with_overrides_file(self, path: str | Path) -> Assumptions:
        """A copy with the overrides of a YAML/JSON file; errors name the file, line and field."""
        text = read_text(path)
        data, lines = parse_text(text, str(path))
        if data is None:
            raise UserInputError("file is empty", file=str(path))
        return self.with_overrides(data, file=str(path), lines=lines)

    # -- reporting -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The whole bundle, every entry with its source (JSON-ready)."""
        return {
            "efficiency": {
                "defaults": self.efficiency_layers.defaults.model_dump(),
                "families": {k: v.model_dump(exclude_none=True) for k, v in self.efficiency_layers.families.items()},
                "devices": {k: v.model_dump(exclude_none=True) for k, v in self.efficiency_layers.devices.items()},
                "user_devices": {k: v.model_dump(exclude_none=True) for k, v in self.user_device_efficiency.items()},
                "calibrations": {k: v.model_dump() for k, v in self.calibrations.items()},
            },
            "link_types": {k: {**self.link_type_specs[k].model_dump(), "source": v.source}
                           for k, v in self.link_types.items()},
            "engines": {k: {**self.engine_specs.engines[k].model_dump(), "source": v.source}
                        for k, v in self.engines.items()},
            "engine_shared_overheads": {k: v.model_dump(exclude_none=True)
                                        for k, v in self.engine_specs.shared_overheads.items()},
            "state_recipes": {k: {**self.state_recipe_specs[k].model_dump(), "source": v.source}
                              for k, v in self.state_recipes.items()},
            "training_stacks": {k: v.model_dump(mode="json") for k, v in self.training_stack_specs.items()},
            "comparison_set": list(self.comparison_set),
            "overridden": dict(self.overridden),
            "files": list(self.files),
            "fingerprint": self.fingerprint,
        }

    @cached_property
    def fingerprint(self) -> str:
        """Short hash of every value: equal fingerprints, equal assumptions (a cache key)."""
        data = self.model_dump(mode="json")
        data.pop("files", None)
        blob = json.dumps(data, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def __hash__(self) -> int:  # usable as a cache key (equal bundles have equal fingerprints)
        return hash(self.fingerprint)

    def summary(self) -> dict[str, Any]:
        """What sets these assumptions apart from the built-in ones (for a result's header)."""
        return {
            "fingerprint": self.fingerprint,
            "base": "package data",
            "files": list(self.files),
            "calibrations": {k: v.source for k, v in self.calibrations.items()},
            "overridden": dict(self.overridden),
        }

    def used(self, *, devices: Iterable[Device] = (), link_types: Iterable[str] = (), engines: Iterable[str] = (),
             state_recipes: Iterable[str] = ()) -> dict[str, Any]:
        """The assumptions a result used, each value with its source: efficiency per device, and
        the named link types, engines and recipes."""
        out: dict[str, Any] = {"summary": self.summary()}
        effs = {}
        for dev in devices:
            eff, prov = self._resolve(dev)
            effs[dev.id] = {k: {"value": getattr(eff, k), "source": prov[k]} for k in EFFICIENCY_FIELDS}
        if effs:
            out["efficiency"] = effs
        lts = {k: {"bus_bw_fraction": (lt := self.link_type(k)).bus_bw_fraction, "latency_s": lt.latency_s,
                   "source": lt.source} for k in dict.fromkeys(link_types)}
        if lts:
            out["link_types"] = lts
        engs = {}
        for name in dict.fromkeys(engines):
            e = self.engine(name)
            engs[e.id] = {"step_overhead_s": e.step_overhead_s, "host_s_per_sequence": e.host_s_per_sequence,
                          "async_scheduling": e.async_scheduling, "gpu_memory_fraction": e.gpu_memory_fraction,
                          "source": e.source}
        if engs:
            out["engines"] = engs
        recs = {k: {"bytes_per_param": (r := self.state_recipe(k)).total, "source": r.source}
                for k in dict.fromkeys(state_recipes)}
        if recs:
            out["state_recipes"] = recs
        return out


# =================================================================================================
# Loading
# =================================================================================================
M = TypeVar("M", bound=BaseModel)


def _validate(model: type[M], data: Any, file: str | None, lines: dict[Path_t, int], prefix: tuple[Any, ...]) -> M:
    """Validate with errors naming the field (and file/line when known)."""
    if file is not None:
        return load_model(model, data, file, lines, prefix)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        loc = prefix + input_loc(tuple(first["loc"]), data)
        extra = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise UserInputError(first["msg"] + extra, field=format_loc(loc), line=line_for(loc, lines) if lines else None) from None


def _load(model: type[M], path: Path) -> M:
    text = read_text(path)
    data, lines = parse_text(text, str(path))
    if data is None:
        raise UserInputError("file is empty", file=str(path))
    return load_model(model, data, str(path), lines)


def build_assumptions(data_dir: str | Path = DATA_DIR, **files: str | Path) -> Assumptions:
    """Assumptions read from the five files in ``data_dir`` (or the paths given by section name:
    ``efficiency=``, ``link_types=``, ``engines=``, ``state_recipes=``, ``comparison_set=``)."""
    unknown = set(files) - set(FILES)
    if unknown:
        raise UserInputError(f"unknown assumption file(s): {', '.join(sorted(unknown))}", field="files")
    paths = {k: Path(files.get(k) or Path(data_dir) / name) for k, name in FILES.items()}
    eff = _load(EfficiencyFile, paths["efficiency"])
    links = _load(LinkTypesFile, paths["link_types"])
    engines = _load(EnginesFile, paths["engines"])
    recipes = _load(StateRecipesFile, paths["state_recipes"])
    comparison = _load(ComparisonSetFile, paths["comparison_set"])
    builtin = Path(data_dir).resolve() == DATA_DIR.resolve() and not files
    return Assumptions(
        efficiency_layers=eff,
        link_type_specs=links.link_types,
        engine_specs=engines,
        state_recipe_specs=recipes.state_recipes,
        comparison_set=tuple(comparison.devices),
        comparison_set_note=comparison.note,
        files=() if builtin else tuple(str(p) for p in paths.values()),
    )


@lru_cache(maxsize=1)
def default_assumptions() -> Assumptions:
    """The built-in assumptions: package data files only (no environment, no store, no
    calibration). Cached: parsed once per process."""
    return build_assumptions()


def assumption_override_files(paths: Iterable[str | Path] = ()) -> list[Path]:
    """Override files: ``paths``, else ``$XPUPLAN_ASSUMPTIONS_PATH`` (``os.pathsep``-separated;
    a directory stands for its ``*.yaml``/``*.yml`` files)."""
    given = [Path(p) for p in paths]
    if not given:
        env = os.environ.get(ENV_ASSUMPTIONS_PATH, "")
        given = [Path(p) for p in env.split(os.pathsep) if p.strip()]
    out: list[Path] = []
    for p in given:
        out += sorted([*p.glob("*.yaml"), *p.glob("*.yml")]) if p.is_dir() else [p]
    return out


def load_assumptions(paths: Iterable[str | Path] = (), *, base: Assumptions | None = None) -> Assumptions:
    """The entry point for jobs and front ends: ``base`` (default: :func:`default_assumptions`)
    with the user's override files laid on top, in order (``paths``, else
    ``$XPUPLAN_ASSUMPTIONS_PATH``). Planners never call this; they receive the result."""
    a = base or default_assumptions()
    for f in assumption_override_files(paths):
        a = a.with_overrides_file(f)
    return a
