"""xpuplan: plan LLM training and inference across GPUs, TPUs and NPUs.

The public API (guarded by ``tests/unit/test_public_api.py``): the catalog and model catalog, the
analytic core, the training and inference planners, validation, and the overview job. Front ends
(CLI, later HTTP and web) are thin layers over these names. Planner namespaces are available as
``xpuplan.train`` and ``xpuplan.serve``; benchmarks (``xpuplan.bench``) need the ``bench`` extra
and are not imported here.
"""

from typing import TYPE_CHECKING, Any

# The names below are imported on first use (PEP 562 ``__getattr__``), so that ``import xpuplan``
# and the CLI start fast: a command loads only the planners it runs. The imports in this block are
# the one list of what is exported from where (read by ``_lazy_exports``); type checkers see them.
if TYPE_CHECKING:
    from xpuplan import serve, train
    from xpuplan.calibrate.profile import resolve_efficiency
    from xpuplan.catalog import Catalog, Device, Figure, Source, get_device, load_catalog
    from xpuplan.catalog.assumptions import Assumptions, default_assumptions, load_assumptions
    from xpuplan.cost import TcoResult
    from xpuplan.errors import InfeasibleError, UnknownIdError, UserInputError, XpuplanError
    from xpuplan.fleet import FleetPlan
    from xpuplan.jobs.cost import serving_cost, tco, training_cost
    from xpuplan.jobs.fleet import optimize_fleet
    from xpuplan.jobs.overview import Overview, overview
    from xpuplan.jobs.recommend import Recommendation, recommend
    from xpuplan.models import MLAConfig, ModelArch, MoEConfig, get_model, list_models, load_hf_config
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
    from xpuplan.serve import estimate as estimate_serving  # type: ignore[no-redef]  # (mypy: module vs function)
    from xpuplan.serve.sim import SimulationResult, simulate
    from xpuplan.train import Cluster, ParallelPlan, SearchResult, TrainEstimate, make_plan
    from xpuplan.train import estimate as estimate_training  # type: ignore[no-redef]
    from xpuplan.train import search_plans as search_training
    from xpuplan.validate import ValidationReport, validate_file
    from xpuplan.workload import ServingScenario, TrainingJob, TrainingScenario



def _lazy_exports() -> dict[str, tuple[str, str]]:
    """Exported name -> (module, attribute), from the ``if TYPE_CHECKING:`` imports of this file."""
    import ast
    from pathlib import Path

    table: dict[str, tuple[str, str]] = {}
    for node in ast.parse(Path(__file__).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module:
                    for alias in imp.names:
                        table[alias.asname or alias.name] = (imp.module, alias.name)
    return table


_EXPORTS: dict[str, tuple[str, str]] | None = None


def __getattr__(name: str) -> Any:
    global _EXPORTS
    import importlib

    if _EXPORTS is None:
        _EXPORTS = _lazy_exports()
    if name not in _EXPORTS:
        raise AttributeError(f"module 'xpuplan' has no attribute {name!r}")
    module, attr = _EXPORTS[name]
    if module == "xpuplan":
        value = importlib.import_module(f"xpuplan.{attr}")
    else:
        value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__version__ = "0.4.33"

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
    "Recommendation",
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
    "recommend",
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
    # fleet (helper J)
    "FleetPlan",
    "optimize_fleet",
    # simulator (helper I)
    "SimulationResult",
    "simulate",
]
