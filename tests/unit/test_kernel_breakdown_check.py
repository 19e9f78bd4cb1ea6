"""benchmarks/kernel_breakdown_check.py: the planner's per-op compute against published per-kernel step profiles.

The script must add up exactly what the step model adds up (else its ratios say nothing about the planner), and
the planner's GEMM and attention time on the profiled fine-grained MoE step stays within the stated tolerance
of the measured kernels (a validation-tier check: nothing was fitted to these profiles)."""

from __future__ import annotations

import pytest

from tests.unit.benchmod import load_benchmark

#: Stated tolerance of the per-category comparison on the MoE profile (module doc of the script).
TOLERANCE = 0.15


@pytest.fixture(scope="module")
def kb():
    return load_benchmark("kernel_breakdown_check")


def _estimate(p: dict):
    import xpuplan as xp
    from xpuplan.catalog.stacks import training_stack
    from xpuplan.train import Cluster, ParallelPlan, estimate

    plan = ParallelPlan(**p["plan"], precision="bf16")
    job = xp.TrainingJob(seq_len=p["seq_len"],
                         global_batch_tokens=plan.dp * plan.micro_batch * plan.grad_accum * p["seq_len"])
    return estimate(xp.get_model(p["model"]), Cluster.from_catalog(p["hw"], p["devices"]), plan, job,
                    stack=training_stack(p["stack"]))


def test_the_categories_add_up_to_the_step_models_compute(kb) -> None:
    for p in kb.PROFILES:
        e = _estimate(p)
        model_compute_ms = (e.step.compute_s + e.step.recompute_s) * 1e3
        assert sum(kb.planner_categories(p).values()) == pytest.approx(model_compute_ms, rel=1e-6)


def test_moe_profile_gemm_and_attention_within_the_stated_tolerance(kb) -> None:
    p = kb.PROFILES[0]
    assert "Qwen3-30B-A3B" in p["name"]
    got = kb.planner_categories(p)
    for cat in ("gemm", "attn_fwd", "attn_bwd"):
        assert got[cat] / p["measured"][cat] == pytest.approx(1.0, abs=TOLERANCE), cat


def test_main_prints_every_profile(kb, capsys) -> None:
    assert kb.main() == 0
    out = capsys.readouterr().out
    assert all(p["name"] in out for p in kb.PROFILES) and "largest |planner/measured - 1|" in out
