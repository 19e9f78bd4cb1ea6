"""The core of benchmarks/fit_families.py (loss, bounds, search, leave-one-out) on synthetic data, and the
rendering of the fitted block of efficiency.yaml. No planner is run here: predictions are synthetic."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from tests.unit.benchmod import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ff():
    return load_benchmark("fit_families")


def test_robust_loss_is_mean_abs_log_error_per_kind_then_over_kinds(ff):
    # one training row off by ln 2, two serving rows exact: kinds count equally
    assert ff.robust_loss([math.log(2), 0.0, 0.0], [1, 1, 1], ["train", "infer", "infer"]) == pytest.approx(
        math.log(2) / 2)
    # trust weights inside a kind; a row not predicted costs the penalty
    assert ff.robust_loss([0.1, 0.3], [1.0, 0.5], ["t", "t"]) == pytest.approx((0.1 + 0.15) / 1.5)
    assert ff.robust_loss([None], [1.0], ["t"]) == pytest.approx(ff.MISSING_PENALTY)
    # robust: the sign does not matter, and one wild row moves it linearly, not quadratically
    assert ff.robust_loss([-0.2], [1], ["t"]) == ff.robust_loss([0.2], [1], ["t"])


def test_unit_mapping_respects_bounds_and_log_scale(ff):
    p = ff.PARAMS["gemm_peak_fraction"]
    assert (p.lo, p.hi) == (0.30, 0.95)
    assert ff.from_unit(p, ff.to_unit(p, 0.62)) == pytest.approx(0.62)
    assert ff.from_unit(p, 2.0) == p.hi and ff.from_unit(p, -1.0) == p.lo  # clipped
    assert ff.to_unit(p, 5.0) == 1.0
    k = ff.PARAMS["kernel_overhead_s"]
    assert k.log and ff.from_unit(k, 0.5) == pytest.approx(math.sqrt(k.lo * k.hi))


def test_every_parameter_range_is_physical(ff):
    for p in ff.PARAMS.values():
        assert 0 < p.lo < p.hi, p.name
        if p.name.endswith("fraction") or p.name.endswith("factor"):
            assert p.hi <= 1.0, p.name
    assert ff.PARAMS["memory_bw_fraction"].lo == 0.5 and ff.PARAMS["memory_bw_fraction"].hi == 0.95


def _synthetic(truth: dict[str, float], measured_noise: list[float]):
    """Rows whose time is work/(peak*gemm) + bytes/(bw*mem): predictions are exact at ``truth``."""
    work = [1.0, 2.0, 0.5, 1.5, 3.0, 0.2]
    bytes_ = [0.5, 0.1, 1.0, 0.3, 0.2, 2.0]

    def time(v: dict[str, float], i: int) -> float:
        return work[i] / v["gemm_peak_fraction"] + bytes_[i] / v["memory_bw_fraction"]

    measured = [time(truth, i) * math.exp(measured_noise[i]) for i in range(len(work))]

    def predict(v: dict[str, float]) -> list[float | None]:
        return [math.log(time(v, i) / measured[i]) for i in range(len(work))]

    return predict, len(work)


def test_fit_recovers_true_values_and_is_deterministic(ff):
    truth = {"gemm_peak_fraction": 0.81, "memory_bw_fraction": 0.72}
    predict, n = _synthetic(truth, [0.0] * 6)
    params = [ff.PARAMS["gemm_peak_fraction"], ff.PARAMS["memory_bw_fraction"]]
    start = {"gemm_peak_fraction": 0.5, "memory_bw_fraction": 0.9}
    args = ("syn", params, start, predict, [1.0] * n, ["train"] * n, [f"R{i}" for i in range(n)], {"x.csv": n})
    a = ff.fit_family(*args)
    b = ff.fit_family(*args)
    assert a.values == b.values and a.loo == b.loo  # deterministic
    assert a.values["gemm_peak_fraction"] == pytest.approx(0.81, abs=0.005)
    assert a.values["memory_bw_fraction"] == pytest.approx(0.72, abs=0.005)
    assert a.loss_after < a.loss_before
    assert len(a.loo) == n and all(abs(e) < 0.02 for e in a.loo)


def test_fit_stays_inside_bounds_when_the_data_want_more(ff):
    truth = {"gemm_peak_fraction": 1.4, "memory_bw_fraction": 0.7}  # unphysical: faster than peak
    predict, n = _synthetic(truth, [0.0] * 6)
    params = [ff.PARAMS["gemm_peak_fraction"], ff.PARAMS["memory_bw_fraction"]]
    res = ff.fit_family("syn", params, {"gemm_peak_fraction": 0.6, "memory_bw_fraction": 0.8}, predict,
                        [1.0] * n, ["train"] * n, [f"R{i}" for i in range(n)], {"x.csv": n})
    assert res.values["gemm_peak_fraction"] == pytest.approx(0.95)  # at the bound, never beyond
    assert all(p.lo <= res.values[p.name] <= p.hi for p in params)


def test_leave_one_out_exposes_an_outlier(ff):
    noise = [0.0, 0.0, 0.0, 0.0, 0.0, 0.7]  # row 5 measured 2x slower than the others say
    predict, n = _synthetic({"gemm_peak_fraction": 0.7, "memory_bw_fraction": 0.8}, noise)
    params = [ff.PARAMS["gemm_peak_fraction"]]
    res = ff.fit_family("syn", params, {"gemm_peak_fraction": 0.5}, lambda v: predict({**v, "memory_bw_fraction": 0.8}),
                        [1.0] * n, ["train"] * n, [f"R{i}" for i in range(n)], {"x.csv": n})
    assert res.values["gemm_peak_fraction"] == pytest.approx(0.7, abs=0.01)  # robust: the outlier does not pull it
    assert abs(res.loo[5]) > 0.5  # and its own left-out error shows it


def test_pattern_search_on_a_lattice(ff):
    calls: list[tuple[float, ...]] = []

    def f(u: tuple[float, ...]) -> float:
        calls.append(u)
        return (u[0] - 0.3) ** 2 + (u[1] - 0.9) ** 2

    x, val, evals = ff.pattern_search(f, (0.5, 0.5))
    assert x[0] == pytest.approx(0.3, abs=ff.FINAL_STEP) and x[1] == pytest.approx(0.9, abs=ff.FINAL_STEP)
    assert evals == len(calls)
    assert all(abs(c / ff.FINAL_STEP - round(c / ff.FINAL_STEP)) < 1e-9 for u in calls for c in u)


def test_rendered_block_is_valid_yaml_with_provenance(ff):
    res = ff.FitResult("google-tpu-v6e", ("gemm_peak_fraction",), {"gemm_peak_fraction": 0.7},
                       {"gemm_peak_fraction": 0.485}, ["A", "B"], {"training_public_2.csv": 2}, [0.2, 0.3],
                       [0.0, 0.01], [0.0, 0.01], 1.0, 0.1, 10)
    block = ff.render_block({"google-tpu-v6e": res}, {}, "2026-01-02")
    fams = yaml.safe_load("families:\n" + block)["families"]
    assert set(fams) == {f.name for f in ff.FAMILIES}
    v6e = fams["google-tpu-v6e"]
    assert v6e["gemm_peak_fraction"] == 0.485 and v6e["architecture"] == "TPU v6e"
    assert v6e["note"] == "fitted: benchmarks/fit_families.py on training_public_2.csv (2 rows), 2026-01-02"
    assert "# gemm_peak_fraction: fraction of the dense peak" in block
    assert ff.changes({}, block)  # new values are listed
    assert not ff.changes(ff.existing_block_values("families:\n" + block + "devices: {}\n"), block)


def test_fitting_never_reads_the_held_out_files(ff):
    text = (ROOT / "benchmarks" / "fit_families.py").read_text(encoding="utf-8")
    assert "heldout_" not in text
