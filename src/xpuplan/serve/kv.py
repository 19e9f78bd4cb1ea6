"""Memory of a serving replica: weights, workspace, and the paged KV cache that is left.

Each engine sizes its KV pool by its own convention (``memory_fraction_of`` in ``engines.yaml``), with
``M`` the device memory, ``f`` the engine's fraction and ``fixed = weights + workspace + activations``:

* ``total`` (vLLM ``gpu_memory_utilization``, MindIE): the engine may hold ``f·M`` in all, so
  KV = ``f·M − fixed``;
* ``free`` (TensorRT-LLM ``free_gpu_memory_fraction``, LMDeploy ``cache_max_entry_count``): the
  fraction of what is free once the model is loaded, so KV = ``f·(M − fixed)``;
* ``static`` (SGLang ``mem_fraction_static``): weights and the KV pool share ``f·M``; activations and
  workspace come from the rest, so KV = ``min(f·M − weights, M − fixed)``.

At the max-throughput point the batch is the number of sequences this pool holds, so an error in it
is an error in throughput one-for-one.
The KV budget is cut into blocks (pages) of ``block_size`` tokens; a sequence of ``n`` tokens holds
``ceil(n / block_size)`` blocks, so the last block of every sequence is partly wasted. KV heads split
over TP (replicated when TP exceeds the KV heads; MLA's latent is replicated over TP), layers over PP.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from xpuplan.errors import InfeasibleError
from xpuplan.perf.memory import (
    inference_activation_bytes_per_device,
    inference_weight_bytes_per_device,
    kv_full_equivalent_tokens,
)
from xpuplan.perf.memory import kv_bytes_per_token_per_device as _kv_per_device
from xpuplan.serve.constants import SERVING_WORKSPACE_BYTES
from xpuplan.serve.replica import Replica
from xpuplan.units import GB


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes per device (decimal) of one replica and the KV capacity that follows."""

    device_bytes: float
    usable_bytes: float
    weights_bytes: float
    workspace_bytes: float
    activation_bytes: float
    kv_budget_bytes: float
    kv_bytes_per_token: float
    block_size_tokens: int
    kv_blocks: int

    @property
    def kv_tokens(self) -> int:
        """Tokens the paged cache holds (per attention group; all blocks full)."""
        return self.kv_blocks * self.block_size_tokens

    def blocks_per_sequence(self, tokens: float) -> int:
        return max(1, math.ceil(tokens / self.block_size_tokens))

    def max_sequences(self, tokens_per_sequence: float) -> int:
        """Sequences of ``tokens_per_sequence`` tokens that fit at once (paged blocks, per group)."""
        return self.kv_blocks // self.blocks_per_sequence(tokens_per_sequence)

    def to_dict(self) -> dict[str, float | int]:
        d = asdict(self)
        d["kv_tokens"] = self.kv_tokens
        return d


def weight_bytes_per_device(rep: Replica) -> float:
    """Weight bytes on the busiest device (``perf.memory.inference_weight_bytes_per_device``)."""
    return inference_weight_bytes_per_device(rep.model, rep.precision.weight_dtype, tp=rep.tp, pp=rep.pp, ep=rep.ep)


def kv_bytes_per_token_per_device(rep: Replica) -> float:
    """KV bytes per token on one device (``perf.memory.kv_bytes_per_token_per_device``)."""
    return _kv_per_device(rep.model, rep.precision.kv_dtype, tp=rep.tp, pp=rep.pp)


def kv_budget(convention: str, device_bytes: float, fraction: float, weights: float, other: float) -> tuple[float, float]:
    """(memory the engine may use, KV-cache budget) per device under an engine's convention (module
    docstring); ``other`` = workspace + activations."""
    fixed = weights + other
    if convention == "free":
        return device_bytes, fraction * (device_bytes - fixed)
    if convention == "static":
        return device_bytes, min(fraction * device_bytes - weights, device_bytes - fixed)
    usable = device_bytes * fraction
    return usable, usable - fixed


def memory_plan(rep: Replica, *, tokens_per_forward: int | None = None) -> MemoryPlan:
    """Memory per device of ``rep``; ``tokens_per_forward`` (default: the engine's prefill chunk)
    sizes the activation workspace."""
    dev_bytes = rep.device.memory_bytes
    w = weight_bytes_per_device(rep)
    tok = tokens_per_forward or rep.engine.prefill_chunk_tokens
    acts = inference_activation_bytes_per_device(rep.model, tok, tp=rep.tp, ep=rep.ep)
    usable, budget = kv_budget(rep.engine.memory_fraction_of, dev_bytes, rep.memory_fraction, w,
                               SERVING_WORKSPACE_BYTES + acts)
    kv_tok = kv_bytes_per_token_per_device(rep)
    if kv_tok > 0:
        blocks = max(0, int(budget // (kv_tok * rep.block_size_tokens)))
    else:
        blocks = 0
    return MemoryPlan(device_bytes=dev_bytes, usable_bytes=usable, weights_bytes=w,
                      workspace_bytes=SERVING_WORKSPACE_BYTES, activation_bytes=acts, kv_budget_bytes=budget,
                      kv_bytes_per_token=kv_tok, block_size_tokens=rep.block_size_tokens, kv_blocks=blocks)


def max_concurrent_sequences(rep: Replica, plan: MemoryPlan, tokens_per_sequence: float) -> int:
    """Concurrent sequences of a replica: KV capacity per attention group × ``ep`` groups, capped
    by the engine's sequence limit (``max_num_seqs``). Encoders keep no cache: the limit only."""
    if plan.kv_bytes_per_token == 0:
        return rep.max_num_seqs
    # local-attention layers (sliding window / chunks) keep at most their window of each sequence
    tokens = kv_full_equivalent_tokens(rep.model, tokens_per_sequence)
    return min(rep.max_num_seqs, plan.max_sequences(tokens) * rep.ep)


def _gb(x: float) -> str:
    return f"{x / GB:.1f} GB"


def _usable_text(rep: Replica, plan: MemoryPlan) -> str:
    if rep.engine.memory_fraction_of == "total":
        return f"{rep.memory_fraction:.0%} of {_gb(plan.device_bytes)}"
    return f"all of {_gb(plan.device_bytes)}; the {rep.memory_fraction:.0%} fraction applies to the KV cache"


def require_fit(rep: Replica, plan: MemoryPlan, tokens_per_sequence: float, sequences: int = 1) -> None:
    """InfeasibleError with the reasons and a suggestion when ``sequences`` of ``tokens_per_sequence``
    tokens do not fit the replica."""
    where = f"{rep.device.id} at tp={rep.tp}" + (f", pp={rep.pp}" if rep.pp > 1 else "") + (
        f", ep={rep.ep}" if rep.ep > 1 else "")
    fixed = plan.weights_bytes + plan.workspace_bytes + plan.activation_bytes
    if fixed > plan.usable_bytes:
        # smallest power-of-two TP whose share of weights and activations fits beside the workspace
        split = plan.weights_bytes + plan.activation_bytes
        room = plan.usable_bytes - plan.workspace_bytes
        next_tp = rep.tp * 2
        while room > 0 and split * rep.tp / next_tp > room and next_tp < 1024:
            next_tp *= 2
        hint = f"use tp>={next_tp}" if room > 0 and rep.model.n_heads % next_tp == 0 else "use more devices (tp or pp)"
        if rep.precision.scheme not in ("int4-wo",):
            hint += " or int4-wo"
        raise InfeasibleError(
            f"{rep.model.id} does not fit on {where}",
            reasons=[f"weights {_gb(plan.weights_bytes)} + workspace {_gb(plan.workspace_bytes + plan.activation_bytes)} "
                     f"> {_gb(plan.usable_bytes)} usable ({_usable_text(rep, plan)}) on {where}; {hint}"],
        )
    if plan.kv_bytes_per_token == 0:
        return
    fit = max_concurrent_sequences(rep, plan, tokens_per_sequence)
    if fit < sequences:
        equiv = kv_full_equivalent_tokens(rep.model, tokens_per_sequence)
        need = sequences * plan.blocks_per_sequence(equiv) * plan.block_size_tokens * plan.kv_bytes_per_token
        raise InfeasibleError(
            f"{sequences} sequence(s) of {tokens_per_sequence:.0f} tokens do not fit the KV cache of {rep.key}",
            reasons=[f"KV cache needs {_gb(need / rep.ep)} per device, {_gb(max(0.0, plan.kv_budget_bytes))} left "
                     f"after weights {_gb(plan.weights_bytes)} on {where}; at most {fit} such sequences "
                     f"(max_num_seqs {rep.max_num_seqs}); lower the batch, quantise the KV cache (fp8/int8) or use a larger tp"],
        )
