"""``ServingPlan``: how one model copy is served, separate from the model and the hardware.

As training has ``ParallelPlan``: a validated value object (checked on construction; mistakes raise
``UserInputError`` naming the field) holding the execution choices of a replica — its tensor,
pipeline and expert parallel sizes, the weight/activation precision scheme and KV-cache dtype, the
serving engine and its knobs, and the batching mode. ``None`` means "the engine's default" (or the
device's, for the engine). :meth:`ServingPlan.replica` turns it into a :class:`~xpuplan.serve.replica.Replica`
for a model on a device; the rules that need the model live in :mod:`xpuplan.serve.validity`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from xpuplan.serve import validity
from xpuplan.workload.vocabulary import BatchingMode

if TYPE_CHECKING:
    from xpuplan.catalog.assumptions import Assumptions
    from xpuplan.catalog.device import Device
    from xpuplan.catalog.efficiency import Efficiency
    from xpuplan.models.arch import ModelArch
    from xpuplan.serve.replica import Replica


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding (MTP, EAGLE, a draft model): per target step each decoding sequence
    verifies ``draft_tokens + 1`` positions and emits ``accepted_tokens`` on average (1 to
    draft_tokens + 1, the bonus token included); proposing costs ``draft_cost`` of one plain decode
    step per draft token (MTP/EAGLE heads: about their layers / the model's layers; a draft model:
    its step time over the target's). Default: no speculation."""

    draft_tokens: int = 0
    accepted_tokens: float = 1.0
    draft_cost: float = 0.0

    def __post_init__(self) -> None:
        validity.check_speculation(self.draft_tokens, self.accepted_tokens, self.draft_cost)

    @property
    def active(self) -> bool:
        return self.draft_tokens > 0

    @property
    def verify_tokens(self) -> int:
        """Positions each decoding sequence runs through the target model per step."""
        return self.draft_tokens + 1


NO_SPECULATION = Speculation()


@dataclass(frozen=True, kw_only=True)
class ServingPlan:
    """The execution choices of one serving replica (``tp·pp·ep`` devices)."""

    tp: int = 1
    """tensor-parallel devices (heads and MLP columns split, two all-reduces per layer)"""
    pp: int = 1
    """pipeline stages (layers split; pp micro-batches in flight)"""
    ep: int = 1
    """expert-parallel groups of tp devices (MoE only; attention data-parallel across them)"""
    etp: int | None = None
    """tensor-parallel size of each routed expert (MoE only; None: tp). Below tp the experts are split over
    tp/etp expert-parallel ranks inside the TP group (vLLM's --enable-expert-parallel, TensorRT-LLM's --ep_size
    without attention-DP, SGLang's --ep-size); attention stays split over tp"""
    dtype: str = "bf16"
    """precision scheme: bf16, fp16, fp8, int8 (W8A8), int8-wo, int4-wo, or an alias"""
    kv_dtype: str | None = None
    """KV-cache dtype (None: the scheme's default)"""
    engine: str | None = None
    """serving engine family or name (None: the first the device's ecosystem lists)"""
    memory_fraction: float | None = None
    """fraction of device memory the engine may use (None: the engine's default)"""
    block_size_tokens: int | None = None
    """paged KV-cache block size in tokens (None: the engine's default)"""
    max_num_seqs: int | None = None
    """most sequences the engine schedules at once (None: the engine's default)"""
    batching: BatchingMode | None = None
    """continuous or static batching (None: the engine's mode)"""
    speculation: Speculation = NO_SPECULATION
    """speculative decoding: draft tokens per step, accepted tokens per step, draft cost"""
    prefix_hit_rate: float = 0.0
    """fraction of each prompt found in the prefix cache (not prefilled again; its keys still attended)"""

    def __post_init__(self) -> None:
        validity.check_prefix_hit_rate(self.prefix_hit_rate)
        for name in ("tp", "pp", "ep"):
            validity.positive_int(name, getattr(self, name))
        if self.etp is not None:
            validity.positive_int("etp", self.etp)
        if self.memory_fraction is not None:
            validity.check_memory_fraction(self.memory_fraction)
        if self.block_size_tokens is not None:
            validity.positive_int("block_size", self.block_size_tokens)
        if self.max_num_seqs is not None:
            validity.positive_int("max_num_seqs", self.max_num_seqs)
        if self.batching is not None:
            validity.check_batching(self.batching)

    @property
    def n_devices(self) -> int:
        return self.tp * self.pp * self.ep

    def issues(self, model: ModelArch) -> list[validity.ServingIssue]:
        """Every rule this plan breaks for ``model`` (empty: valid)."""
        return validity.layout_issues(model, self.tp, self.pp, self.ep, self.etp)

    def replica(self, model: ModelArch, device: Device, *, eff: Efficiency | None = None,
                assumptions: Assumptions | None = None) -> Replica:
        """The validated :class:`~xpuplan.serve.replica.Replica` of ``model`` on ``device``."""
        from xpuplan.serve.replica import make_replica

        return make_replica(model, device, tp=self.tp, pp=self.pp, ep=self.ep, etp=self.etp, dtype=self.dtype,
                            kv_dtype=self.kv_dtype, engine=self.engine, memory_fraction=self.memory_fraction,
                            block_size_tokens=self.block_size_tokens, max_num_seqs=self.max_num_seqs, eff=eff,
                            assumptions=assumptions, speculation=self.speculation,
                            prefix_hit_rate=self.prefix_hit_rate)

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["n_devices"] = self.n_devices
        return d
