"""Inference planning: per-replica latency and throughput, KV capacity, SLO capacity, sizing.

Typical use::

    from xpuplan.catalog import load_catalog
    from xpuplan.models import get_model
    from xpuplan.serve import SLO, estimate, make_replica, size_for_qps

    rep = make_replica(get_model("llama2-70b"), load_catalog().get("H100"), tp=4, dtype="fp8", engine="vllm")
    est = estimate(rep, input_len=512, output_len=256, batch=64)        # TTFT, TPOT, tokens/s
    plan = size_for_qps(get_model("llama2-70b"), [load_catalog().get("H100")], qps=20, input_len=512,
                        output_len=256, slo=SLO(ttft_s=2.0, tpot_s=0.05))

The model is described in docs/inference.md; its validation in docs/validation.md.
"""

from xpuplan.serve.capacity import CapacityOption, CapacityPlan, size_for_qps
from xpuplan.serve.constants import ENGINES, EngineProfile, engine_profile
from xpuplan.serve.disagg import DisaggEstimate, estimate_disagg
from xpuplan.serve.emit import EMITTERS, emit, emit_plan
from xpuplan.serve.encoder import EncoderEstimate, estimate_encoder
from xpuplan.serve.estimate import (
    ServingEstimate,
    estimate,
    estimate_continuous,
    estimate_static,
    max_batch,
    max_throughput,
)
from xpuplan.serve.fit import ReplicaFit, replica_fit
from xpuplan.serve.kv import MemoryPlan, max_concurrent_sequences, memory_plan
from xpuplan.serve.plan import ServingPlan
from xpuplan.serve.precision import Precision, resolve_precision
from xpuplan.serve.replica import Replica, StepTime, make_replica, step_time
from xpuplan.serve.slo import SLO, LoadPoint, SLOResult, load_point, throughput_at_slo
from xpuplan.serve.step import EfficiencyArrays
from xpuplan.serve.vectorised import (
    ServingArrays,
    continuous_arrays,
    estimate_static_arrays,
    step_time_arrays,
)

__all__ = [
    "EMITTERS",
    "ENGINES",
    "SLO",
    "CapacityOption",
    "CapacityPlan",
    "DisaggEstimate",
    "EfficiencyArrays",
    "EncoderEstimate",
    "EngineProfile",
    "LoadPoint",
    "MemoryPlan",
    "Precision",
    "Replica",
    "ReplicaFit",
    "SLOResult",
    "ServingArrays",
    "ServingEstimate",
    "ServingPlan",
    "StepTime",
    "continuous_arrays",
    "emit",
    "emit_plan",
    "engine_profile",
    "estimate",
    "estimate_continuous",
    "estimate_disagg",
    "estimate_encoder",
    "estimate_static",
    "estimate_static_arrays",
    "load_point",
    "make_replica",
    "max_batch",
    "max_concurrent_sequences",
    "max_throughput",
    "memory_plan",
    "replica_fit",
    "resolve_precision",
    "size_for_qps",
    "step_time",
    "step_time_arrays",
    "throughput_at_slo",
]
