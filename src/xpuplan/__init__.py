"""xpuplan: plan LLM training and inference across GPUs, TPUs and NPUs.

The public API (guarded by ``tests/unit/test_public_api.py``): the catalog and model catalog, the
analytic core, the training and inference planners, validation, and the overview job. Front ends
(CLI, later HTTP and web) are thin layers over these names. Planner namespaces are available as
``xpuplan.train`` and ``xpuplan.serve``; benchmarks (``xpuplan.bench``) need the ``bench`` extra
and are not imported here.
"""

from xpuplan import serve, train
from xpuplan.calibration import resolve_efficiency
from xpuplan.catalog import Catalog, Device, Figure, Source, get_device, load_catalog
from xpuplan.catalog.assumptions import Assumptions, default_assumptions, load_assumptions
from xpuplan.errors import InfeasibleError, UnknownIdError, UserInputError, XpuplanError
from xpuplan.models import MLAConfig, ModelArch, MoEConfig, get_model, list_models, load_hf_config
from xpuplan.overview import Overview, overview
from xpuplan.perf import (
    STATE_RECIPES,
    Efficiency,
    InferenceMemory,
    OpCost,
    OpTime,
    ParamBreakdown,
    TrainingMemory,
    cost_attention,
    cost_elementwise,
    cost_gemm,
    efficiency_for,
    flops_decode_step,
    flops_prefill,
    flops_summary,
    flops_training_per_token,
    inference_memory,
    inference_weight_bytes,
    kv_cache_bytes_per_token,
    op_time,
    param_breakdown,
    training_memory,
)
from xpuplan.serve import SLO, Replica, ServingEstimate, make_replica, size_for_qps
from xpuplan.serve import estimate as estimate_serving
from xpuplan.train import Cluster, ParallelPlan, SearchResult, TrainEstimate, make_plan
from xpuplan.train import estimate as estimate_training
from xpuplan.train import search_plans as search_training
from xpuplan.cost import TcoResult
from xpuplan.jobs.cost import serving_cost, tco, training_cost
from xpuplan.validate import ValidationReport, validate_file
from xpuplan.workload import ServingScenario, TrainingJob, TrainingScenario

__version__ = "0.1.0"

__all__ = [
    "SLO",
    "STATE_RECIPES",
    "Assumptions",
    "Catalog",
    "Cluster",
    "Device",
    "Efficiency",
    "Figure",
    "InfeasibleError",
    "InferenceMemory",
    "MLAConfig",
    "ModelArch",
    "MoEConfig",
    "OpCost",
    "OpTime",
    "Overview",
    "ParallelPlan",
    "ParamBreakdown",
    "Replica",
    "SearchResult",
    "ServingEstimate",
    "ServingScenario",
    "Source",
    "TcoResult",
    "TrainEstimate",
    "TrainingJob",
    "TrainingMemory",
    "TrainingScenario",
    "UnknownIdError",
    "UserInputError",
    "ValidationReport",
    "XpuplanError",
    "__version__",
    "cost_attention",
    "cost_elementwise",
    "cost_gemm",
    "default_assumptions",
    "efficiency_for",
    "estimate_serving",
    "estimate_training",
    "flops_decode_step",
    "flops_prefill",
    "flops_summary",
    "flops_training_per_token",
    "get_device",
    "get_model",
    "inference_memory",
    "inference_weight_bytes",
    "kv_cache_bytes_per_token",
    "list_models",
    "load_assumptions",
    "load_catalog",
    "load_hf_config",
    "make_plan",
    "make_replica",
    "op_time",
    "overview",
    "param_breakdown",
    "resolve_efficiency",
    "search_training",
    "serve",
    "serving_cost",
    "size_for_qps",
    "tco",
    "train",
    "training_cost",
    "training_memory",
    "validate_file",
]
