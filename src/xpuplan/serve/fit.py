"""Does a serving replica hold a batch? The answer every front end gives.

:func:`replica_fit` takes a replica built by ``make_replica`` (so the layout already passed the
serving validity rules, :mod:`xpuplan.serve.validity`) and applies the one inference-memory model
the estimators use (``serve.kv.memory_plan``: weights, workspace, activations, then the paged KV
cache in whole blocks). ``memory infer`` and ``infer estimate`` therefore agree: "fits" here means
the estimate will not raise ``InfeasibleError`` for memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xpuplan.errors import InfeasibleError
from xpuplan.serve import validity
from xpuplan.serve.kv import MemoryPlan, max_concurrent_sequences, memory_plan, require_fit
from xpuplan.serve.replica import Replica


@dataclass(frozen=True)
class ReplicaFit:
    """Memory of one replica for ``sequences`` sequences of ``tokens_per_sequence`` tokens."""

    key: str
    n_devices: int
    memory: MemoryPlan
    sequences: int
    tokens_per_sequence: float
    max_sequences: int
    fits: bool
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "n_devices": self.n_devices, "memory_per_device": self.memory.to_dict(),
                "sequences": self.sequences, "tokens_per_sequence": self.tokens_per_sequence,
                "max_sequences": self.max_sequences, "fits": self.fits, "reasons": list(self.reasons)}


def replica_fit(rep: Replica, *, sequences: int, tokens_per_sequence: float,
                tokens_per_forward: int | None = None) -> ReplicaFit:
    """Whether ``sequences`` sequences of ``tokens_per_sequence`` KV tokens (prompt + output) fit ``rep``,
    with the most that fit and, when not, the reasons and a suggestion (as ``infer estimate`` says).
    ``tokens_per_forward`` sizes the activation workspace (default: the engine's prefill chunk; a
    static batch uses min(batch · prompt, chunk), as ``serve.estimate.estimate_static`` does)."""
    validity.positive_length("batch", sequences)
    validity.positive_length("context", tokens_per_sequence)
    plan = memory_plan(rep, tokens_per_forward=tokens_per_forward)
    reasons: tuple[str, ...] = ()
    try:
        require_fit(rep, plan, tokens_per_sequence, int(sequences))
    except InfeasibleError as e:
        reasons = (str(e), *e.reasons)
    fixed = plan.weights_bytes + plan.workspace_bytes + plan.activation_bytes
    most = max_concurrent_sequences(rep, plan, tokens_per_sequence) if fixed <= plan.usable_bytes else 0
    return ReplicaFit(key=rep.key, n_devices=rep.n_devices, memory=plan, sequences=int(sequences),
                      tokens_per_sequence=float(tokens_per_sequence), max_sequences=most, fits=not reasons,
                      reasons=reasons)
