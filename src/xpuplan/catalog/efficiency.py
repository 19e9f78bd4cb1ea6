"""Achievable-efficiency parameters: the named assumptions that turn peaks into times.

Peaks come from the catalog; what software really reaches is a fraction of them. These few
physical parameters are the only knobs the performance models have. Defaults live in
``catalog/data/efficiency.yaml`` (per hardware family, with per-device entries), each explained
there; ``xpuplan calibrate`` fits them to a device's measurements. Which values a run uses is
decided by an :class:`~xpuplan.catalog.assumptions.Assumptions` bundle, resolved in this order:
``defaults`` <- family (vendor/kind) <- device id <- calibration profile <- user override.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

#: Device idle per MoE layer forward while the dropless dispatcher brings the per-expert token counts to the
#: host: a synchronising device-to-host round trip, ~6 µs (NVIDIA developer blog "Getting Started with CUDA
#: Graphs", A. Gray, 2019-09: a 2.9 µs kernel costs 9.6 µs per launch with a stream sync after each, 3.8 µs
#: without), plus ~4 eager PyTorch operations issued after it at ~10 µs of host time each (operator dispatch +
#: cudaLaunchKernel): 50 µs, chosen from these figures, not fitted to any run. ``xpuplan calibrate`` replaces it
#: with the measured round trip plus :data:`MOE_POST_SYNC_OPS` measured operations.
DEFAULT_HOST_SYNC_S = 50e-6
#: Eager operations the host issues between the dispatcher's sync and the next kernel (the split bookkeeping
#: and the all-to-all launch), each costing one measured per-operation overhead in a calibration.
MOE_POST_SYNC_OPS = 4

#: Block-scaled FP4 GEMMs (NVFP4, MXFP4) reach this share of the fraction FP8 GEMMs reach of their own peak: on a
#: B200 cuBLAS 13.3 runs an 8192^3 FP4 x FP4 GEMM at 5,239 TFLOP/s, 58.2% of the 9,000 dense FP4 peak (DeepGEMM's
#: own kernel 5,702, 63.4%; deepseek-ai/DeepGEMM PR #348, 2026-06), while the best FP8 matmul of the same kind of
#: sweep reaches 76.3% of 4,500 (stas00/ml-engineering MAMF table): 58.2 / 76.3 = 0.763. The scale factors the
#: tensor cores read with every block and the larger tiles FP4 needs to fill them keep FP4 further from its peak.
DEFAULT_FP4_FACTOR = 0.763

#: FlashAttention-1-generation kernels (the flash-attn 1.x package; the Triton FlashAttention of 2022-23 that
#: llm-foundry ran as ``attn_impl: triton``) reach this share of the FlashAttention-2 fraction. Dao 2023,
#: "FlashAttention-2: Faster Attention with Better Parallelism and Work Partitioning" (arXiv 2307.08691), abstract:
#: FlashAttention reaches "only 25-40% of the theoretical maximum FLOPs/s" on A100, FlashAttention-2 "around 2x
#: speedup compared to FlashAttention" (50-73%): about half. Fitted on the 13 public llm-foundry rows (the only
#: public rows of such a stack): 0.60, the loss flat from 0.58 to 0.65. Both generations are Ampere-style mma.sync
#: code, so one ratio serves Ampere and Hopper.
DEFAULT_FA1_FACTOR = 0.6

#: Names of the tunable parameters, in the order of :class:`Efficiency`.
EFFICIENCY_FIELDS = (
    "gemm_peak_fraction",
    "gemm_half_dim",
    "low_precision_factor",
    "fp4_factor",
    "attention_peak_fraction",
    "attention_fa2_peak_fraction",
    "fa1_factor",
    "memory_bw_fraction",
    "kernel_overhead_s",
    "host_sync_s",
    "scale_up_bw_fraction",
    "scale_out_bw_fraction",
    "scale_up_latency_s",
    "scale_out_latency_s",
)


class Efficiency(BaseModel):
    """Achievable fractions of peak and fixed overheads for one device (dimensionless / seconds)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gemm_peak_fraction: float = Field(gt=0, le=1, description="fraction of dense peak a large GEMM reaches")
    gemm_half_dim: float = Field(ge=0, description="smallest GEMM dimension at which efficiency halves")
    low_precision_factor: float = Field(
        gt=0, le=1, description="fp8/int8/fp4 GEMMs reach this fraction of the bf16 fraction (of their own peak)"
    )
    fp4_factor: float = Field(
        default=DEFAULT_FP4_FACTOR, gt=0, le=1,
        description="block-scaled FP4 GEMMs reach this share of the FP8 fraction (of their own peak)")
    attention_peak_fraction: float = Field(
        gt=0, le=1, description="the device's native fused attention kernels (cuDNN / FlashAttention-3 on Hopper, "
                                "FlashAttention-2 on Ampere, the vendor's kernels elsewhere) vs dense peak")
    # FlashAttention-2's code (PyTorch SDPA's flash backend, the flash-attn 2 package) is written for Ampere's
    # mma.sync tensor-core path; on Hopper and later it cannot use the asynchronous wgmma/TMA path and reaches
    # about a third of the dense peak (FlashAttention-3 paper). None: the same as attention_peak_fraction
    # (FlashAttention-2 is the native kernel, or the device has no separate FA2 path).
    attention_fa2_peak_fraction: float | None = Field(
        default=None, gt=0, le=1,
        description="FlashAttention-2-class kernels on this device vs dense peak (None: attention_peak_fraction)")
    fa1_factor: float = Field(
        default=DEFAULT_FA1_FACTOR, gt=0, le=1,
        description="FlashAttention-1-generation kernels (flash-attn 1.x, the Triton FlashAttention of 2022-23) "
                    "reach this share of the FlashAttention-2 fraction")
    memory_bw_fraction: float = Field(gt=0, le=1, description="achievable fraction of peak memory bandwidth")
    kernel_overhead_s: float = Field(ge=0, description="fixed launch/dispatch cost per kernel, seconds")
    # A dropless MoE dispatcher copies the per-expert token counts to the host every layer forward and waits:
    # the device idles for the synchronising round trip and the eager operations the host issues after it
    # (train.compute.moe_host_sync_s). The default is chosen from public launch figures; `xpuplan calibrate`
    # measures it (bench kind ``host_sync``).
    host_sync_s: float = Field(default=DEFAULT_HOST_SYNC_S, ge=0,
                               description="device idle per MoE layer forward while the dispatcher syncs with the "
                                           "host (round trip + the eager operations issued after it), seconds")
    # Links: None means the link type's default (catalog/data/link_types.yaml, applied by perf.links);
    # a calibration profile sets them from this device's own collective measurements.
    scale_up_bw_fraction: float | None = Field(
        default=None, gt=0, le=1, description="collective bus bandwidth vs scale-up link peak (None: link-type default)"
    )
    scale_out_bw_fraction: float | None = Field(
        default=None, gt=0, le=1, description="collective bus bandwidth vs NIC peak (None: link-type default)"
    )
    scale_up_latency_s: float | None = Field(
        default=None, ge=0, description="per-hop latency (alpha) on the scale-up link (None: link-type default)"
    )
    scale_out_latency_s: float | None = Field(
        default=None, ge=0, description="per-hop latency (alpha) on the scale-out network (None: link-type default)"
    )
    source: str = Field(default="defaults", description="where these values came from")

    def merged(self, overrides: dict[str, Any], source: str) -> Efficiency:
        """A copy with ``overrides`` applied (validated) and ``source`` set."""
        data = self.model_dump()
        data.update(overrides)
        data["source"] = source
        return Efficiency.model_validate(data)

    def values(self) -> dict[str, float | None]:
        """The parameters without ``source``."""
        return {k: getattr(self, k) for k in EFFICIENCY_FIELDS}

    def at_clock(self, clock_fraction: float) -> Efficiency:
        """These values with the tensor-core clock at ``clock_fraction`` of the one they were measured at
        (a power cap, ``perf.power.compute_clock_fraction_at_cap``): the compute-bound fractions (GEMM and
        attention) scale with the clock; HBM bandwidth, links and fixed overheads do not."""
        if clock_fraction >= 1.0:
            return self
        scaled = {k: v * clock_fraction for k in ("gemm_peak_fraction", "attention_peak_fraction",
                                                  "attention_fa2_peak_fraction") if (v := getattr(self, k)) is not None}
        return self.model_copy(update=scaled)

    def for_attention_kernel(self, kernel: str) -> Efficiency:
        """These values as a stack whose fused attention is ``kernel`` sees them: ``"fa2"``
        (FlashAttention-2's code) runs at :attr:`attention_fa2_peak_fraction` where the device sets
        one; ``"fa1"`` (FlashAttention-1-generation kernels) at :attr:`fa1_factor` times that FlashAttention-2
        fraction; ``"native"`` (the device's own best kernels) keeps :attr:`attention_peak_fraction`."""
        fa2 = self.attention_fa2_peak_fraction if self.attention_fa2_peak_fraction is not None else (
            self.attention_peak_fraction)
        if kernel == "fa2" and self.attention_fa2_peak_fraction is not None:
            return self.model_copy(update={"attention_peak_fraction": fa2})
        if kernel == "fa1":
            return self.model_copy(update={"attention_peak_fraction": fa2 * self.fa1_factor})
        return self


class EfficiencyOverrides(BaseModel):
    """Some of the :class:`Efficiency` parameters (a family, device or user entry), each range-checked."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gemm_peak_fraction: float | None = Field(default=None, gt=0, le=1)
    gemm_half_dim: float | None = Field(default=None, ge=0)
    low_precision_factor: float | None = Field(default=None, gt=0, le=1)
    fp4_factor: float | None = Field(default=None, gt=0, le=1)
    attention_peak_fraction: float | None = Field(default=None, gt=0, le=1)
    attention_fa2_peak_fraction: float | None = Field(default=None, gt=0, le=1)
    fa1_factor: float | None = Field(default=None, gt=0, le=1)
    memory_bw_fraction: float | None = Field(default=None, gt=0, le=1)
    kernel_overhead_s: float | None = Field(default=None, ge=0)
    host_sync_s: float | None = Field(default=None, ge=0)
    scale_up_bw_fraction: float | None = Field(default=None, gt=0, le=1)
    scale_out_bw_fraction: float | None = Field(default=None, gt=0, le=1)
    scale_up_latency_s: float | None = Field(default=None, ge=0)
    scale_out_latency_s: float | None = Field(default=None, ge=0)
    note: str | None = None

    def values(self) -> dict[str, float]:
        """The parameters this entry sets."""
        return {k: v for k in EFFICIENCY_FIELDS if (v := getattr(self, k)) is not None}


def architecture_name(architecture: str | None) -> str:
    """A catalog ``architecture`` as family rules and validation bands name it: the part before any
    parenthesis (``"Da Vinci (AI Core v220, ...)"`` -> ``"Da Vinci"``), stripped."""
    return (architecture or "").split("(")[0].strip()


def _names(value: str | list[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    return frozenset(v.strip().casefold() for v in items)


class FamilyRule(EfficiencyOverrides):
    """Overrides applied to every device of a hardware family: a vendor (or several), a kind, and
    optionally an architecture (or several) as the catalog names it (before any parenthesis).

    A rule that gives no value at all but a ``note`` is a documented prior: its devices keep the
    values of the rules before it (e.g. NVIDIA Ampere keeps the defaults, which were fitted on A100).
    """

    vendor: str | list[str] | None = None
    kind: str | None = None
    architecture: str | list[str] | None = None

    def matches(self, vendor: str, kind: str, architecture: str | None = None) -> bool:
        vendors, archs = _names(self.vendor), _names(self.architecture)
        return ((vendors is None or vendor.casefold() in vendors)
                and (self.kind is None or self.kind.casefold() == kind.casefold())
                and (archs is None or architecture_name(architecture).casefold() in archs))


class EfficiencyFile(BaseModel):
    """``efficiency.yaml``: defaults, family rules (every matching rule applied, in file order, so a
    specific family listed after a broad one refines it), per-device entries."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    schema_version: int
    defaults: Efficiency
    families: dict[str, FamilyRule] = Field(default_factory=dict)
    devices: dict[str, EfficiencyOverrides] = Field(default_factory=dict)
