"""Guard the curated public API: additions are deliberate, removals are breaking changes."""

import subprocess
import sys

import xpuplan

EXPECTED = {
    "SLO", "STATE_RECIPES", "Assumptions", "Catalog", "Cluster", "Device", "Efficiency", "Figure", "InfeasibleError",
    "InferenceMemory", "MLAConfig", "ModelArch", "MoEConfig", "OpCost", "OpTime", "Overview", "ParallelPlan",
    "ParamBreakdown", "Replica", "SearchResult", "ServingEstimate", "ServingScenario", "Source", "TrainEstimate",
    "TrainingJob", "TrainingMemory", "TrainingScenario", "UnknownIdError", "UserInputError", "ValidationReport",
    "XpuplanError", "__version__", "cost_attention", "cost_elementwise", "cost_gemm", "default_assumptions", "efficiency_for",
    "estimate_serving", "estimate_training", "flops_decode_step", "flops_prefill", "flops_summary",
    "flops_training_per_token", "get_device", "get_model", "inference_memory", "inference_weight_bytes",
    "kv_cache_bytes_per_token", "list_models", "load_assumptions", "load_catalog", "load_hf_config", "make_plan", "make_replica",
    "op_time", "overview", "param_breakdown", "resolve_efficiency", "search_training", "serve", "size_for_qps",
    "train", "training_memory", "validate_file",
    # cost (helper D)
    "TcoResult", "tco", "training_cost", "serving_cost",
    # decide (helper E)
    "Recommendation", "recommend",
    # fleet (helper J)
    "FleetPlan", "optimize_fleet",
    # simulator (helper I)
    "SimulationResult", "simulate",
}


def test_exported_members():
    assert set(xpuplan.__all__) == EXPECTED
    for name in xpuplan.__all__:
        assert hasattr(xpuplan, name), name


def test_core_imports_without_torch():
    code = ("import sys, xpuplan, xpuplan.cli.main; assert 'torch' not in sys.modules, 'torch imported'; "
            "print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_readme_python_example():
    import xpuplan as xp

    h100 = xp.get_device("H100")
    assert h100.peak_flops("bf16") == 989.4e12
    llama = xp.get_model("llama3-70b")
    assert xp.param_breakdown(llama).total == 70_553_706_496
    assert xp.kv_cache_bytes_per_token(llama) == 327_680
    mem = xp.training_memory(llama, seq_len=8192, tp=8, pp=4, dp=8, zero_stage=1, recompute="selective")
    assert 10 < mem.total / 1e9 < 80


def test_readme_python_block_runs_as_written():
    """The README's Python API block is executed, so it cannot drift from the code."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Python API.*?```python\n(.*?)```", text, re.S)
    assert block, "README has no Python API block"
    namespace: dict[str, object] = {}
    exec(compile(block.group(1), "README.md", "exec"), namespace)
    assert namespace["best"].tokens_per_s > 0
    assert namespace["plan"].options
