"""Encoder models (BERT-base/large): latency and QPS of one forward over a batch of sequences.

An encoder request is one forward pass over ``seq_len`` tokens with bidirectional attention and no
KV cache, no decode loop. A batch of ``batch`` requests runs as one forward of ``batch·seq_len``
tokens (``serve.replica.step_time``: roofline ops + kernel overheads + TP all-reduce), plus the
engine's per-execution host overhead (``EngineProfile.encoder_overhead_s``, a compiled graph run for
TensorRT/ONNX Runtime/MindIE) instead of the LLM engines' scheduler step. QPS = batch / latency for
one stream; ``streams`` concurrent executions overlap the host overhead only.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from xpuplan.errors import UserInputError
from xpuplan.serve.kv import MemoryPlan, memory_plan, require_fit
from xpuplan.serve.replica import Replica, StepTime, step_time


@dataclass(frozen=True)
class EncoderEstimate:
    """Latency (s) and throughput (requests/s) of an encoder replica at one batch size."""

    replica: dict[str, Any]
    batch: int
    seq_len: int
    latency_s: float
    qps: float
    n_devices: int
    step: StepTime
    memory: MemoryPlan
    efficiency_source: str

    @property
    def qps_per_device(self) -> float:
        return self.qps / self.n_devices

    def to_dict(self) -> dict[str, Any]:
        return {"replica": self.replica, "batch": self.batch, "seq_len": self.seq_len,
                "latency_s": self.latency_s, "qps": self.qps, "qps_per_device": self.qps_per_device,
                "n_devices": self.n_devices, "step": self.step.to_dict(), "memory_per_device": self.memory.to_dict(),
                "efficiency_source": self.efficiency_source}


def estimate_encoder(rep: Replica, batch: int, seq_len: int) -> EncoderEstimate:
    """Latency and QPS of ``batch`` sequences of ``seq_len`` tokens on an encoder replica."""
    if rep.model.type != "encoder":
        raise UserInputError(f"{rep.model.id} is a decoder; use the LLM estimate", field="model")
    if batch is None or batch < 1:
        raise UserInputError(f"--batch must be positive (got {batch})", field="batch")
    if seq_len is None or seq_len < 1:
        raise UserInputError(f"--in (sequence length) must be positive (got {seq_len})", field="input_len")
    if seq_len > rep.model.max_seq_len:
        raise UserInputError(f"--in ({seq_len}) exceeds {rep.model.id}'s maximum sequence length "
                             f"({rep.model.max_seq_len})", field="input_len")
    plan = memory_plan(rep, tokens_per_forward=batch * seq_len)
    require_fit(rep, plan, seq_len, 1)
    st = step_time(rep, prefill_tokens=batch * seq_len, prefill_len=seq_len, sampled_rows=batch)
    st = replace(st, overhead_s=rep.engine.encoder_overhead_s)  # one graph execution, no scheduler step
    latency = st.total_s
    return EncoderEstimate(replica=rep.to_dict(), batch=batch, seq_len=seq_len, latency_s=latency, qps=batch / latency,
                           n_devices=rep.n_devices, step=st, memory=plan, efficiency_source=rep.eff.source)
