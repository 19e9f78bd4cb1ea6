"""Calibration (``xpuplan.calibrate``): fitting (numpy only) recovers known parameters from synthetic
measurements made with perf's own roofline, is robust to disturbed timings and works end to end
from the store; stored profiles are laid over the assumptions' defaults and reach the planners only
through an explicit ``Assumptions``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from xpuplan.calibrate.fit import (
    Point,
    calibrate_from_store,
    collective_time,
    fit_efficiency,
    grid_minimise,
    roofline_time,
)
from xpuplan.catalog import load_catalog
from xpuplan.cli.main import app
from xpuplan.errors import UserInputError
from xpuplan.perf.efficiency import efficiency_for
from xpuplan.perf.roofline import compute_peak, cost_attention, cost_gemm, op_time
from xpuplan.store.engine import open_store
from xpuplan.store.records import Record, RunInfo, add_measurement, finish_run, start_run

runner = CliRunner()
H100 = "nvidia-h100-sxm-80gb"


def _truth(device_id: str = H100):
    dev = load_catalog().get(device_id)
    eff = efficiency_for(dev).merged({"gemm_peak_fraction": 0.62, "gemm_half_dim": 90.0, "memory_bw_fraction": 0.81,
                                      "attention_peak_fraction": 0.41, "kernel_overhead_s": 6e-6,
                                      "scale_up_bw_fraction": 0.77, "scale_up_latency_s": 4e-6}, "truth")
    return dev, eff


def synthetic_points(device_id: str = H100, dtype: str = "bf16") -> list[Point]:
    """Measurements as perf's roofline with known parameters would time them."""
    dev, eff = _truth(device_id)
    pts: list[Point] = [Point("overhead", f"tiny {i}", "fp32", eff.kernel_overhead_s) for i in range(3)]
    pts.append(Point("dispatch_graph", "tiny model replayed as a graph", "fp32", eff.kernel_overhead_s))
    shapes = [(s, s, s) for s in (128, 256, 512, 1024, 4096, 8192)] + [(16, 6144, 4096), (4096, 28672, 4096), (1, 4096, 4096)]
    for m, n, k in shapes:
        c = cost_gemm(m, n, k, dtype)
        t = op_time(c, dev, dtype, eff).time_s
        pts.append(Point("gemm", f"gemm {m}x{n}x{k}", dtype, t, c.flops, c.bytes, float(min(m, n, k)), {"m": m, "n": n, "k": k}))
    for kernel, arrays in (("copy", 2), ("triad", 3)):
        nbytes = arrays * 4.0 * 2**28
        pts.append(Point("membw", f"stream {kernel}", "fp32", nbytes / (dev.memory_bandwidth * eff.memory_bw_fraction),
                         0.0, nbytes, math.inf, {"kernel": kernel}))
    for s in (2048, 8192):
        c = cost_attention(1, 32, s, s, 128, causal=True, dtype=dtype)
        pts.append(Point("attention", f"prefill {s}", dtype, op_time(c, dev, dtype, eff).time_s, c.flops, c.bytes, float(s),
                         {"phase": "prefill", "kernel": "native"}))
    link = dev.scale_up_bandwidth
    assert link
    for op in ("all_reduce", "all_gather"):
        for size in (2**12, 2**16, 2**20, 2**24, 2**28):
            t = float(collective_time(op, size, 8, link * eff.scale_up_bw_fraction, eff.scale_up_latency_s))
            pts.append(Point("collective", f"{op} {size}", "bf16", t, 0.0, float(size), math.inf,
                             {"op": op, "size_bytes": size, "n_ranks": 8, "local_ranks": 8, "nodes": 1, "scope": "scale_up"}))
    return pts


def test_grid_minimise_finds_a_known_minimum() -> None:
    (x, y), loss = grid_minimise(lambda a, b: (np.log(a) - math.log(0.3)) ** 2 + (b - 700.0) ** 2 / 1e4,
                                 [(1e-4, 1.0, True), (0.0, 4096.0, True)])
    assert x == pytest.approx(0.3, rel=1e-3) and y == pytest.approx(700.0, rel=1e-3) and loss < 1e-6


def test_vectorised_roofline_matches_op_time() -> None:
    dev, eff = _truth()
    c = cost_gemm(512, 1024, 2048, "bf16")
    frac = eff.gemm_peak_fraction / (1 + eff.gemm_half_dim / 512)
    t = roofline_time(np.array([c.flops]), np.array([c.bytes]), np.array([compute_peak(dev, "bf16")]), frac,
                      dev.memory_bandwidth * eff.memory_bw_fraction, eff.kernel_overhead_s)
    assert t[0] == pytest.approx(op_time(c, dev, "bf16", eff).time_s, rel=1e-12)


def test_fit_recovers_known_parameters() -> None:
    dev, truth = _truth()
    fit = fit_efficiency(dev, synthetic_points(), main_dtype="bf16")
    e = fit.efficiency
    assert e.kernel_overhead_s == pytest.approx(truth.kernel_overhead_s)
    assert e.memory_bw_fraction == pytest.approx(truth.memory_bw_fraction, rel=1e-6)
    assert e.gemm_peak_fraction == pytest.approx(truth.gemm_peak_fraction, rel=0.01)
    assert e.gemm_half_dim == pytest.approx(truth.gemm_half_dim, rel=0.03)
    assert e.attention_peak_fraction == pytest.approx(truth.attention_peak_fraction, rel=0.01)
    assert e.scale_up_bw_fraction == pytest.approx(truth.scale_up_bw_fraction, rel=0.02)
    assert e.scale_up_latency_s == pytest.approx(truth.scale_up_latency_s, rel=0.05)
    assert "low_precision_factor" in fit.skipped and "scale_out_bw_fraction" in fit.skipped
    assert max(abs(c["error"]) for c in fit.checks) < 0.02
    assert not fit.warnings


def test_kernel_overhead_on_a_gpu_is_the_graph_replayed_figure_not_the_eager_dispatch() -> None:
    """On a GPU the eager tiny-model step is the host's issue time per operation (~16 µs on an H200 host), the
    graph-replayed one what each kernel costs the device (~2.8 µs): only the latter is the planners'
    kernel_overhead_s. Without a graph measurement the family value stays, with the reason; on a CPU the
    eager figure is the per-operation cost."""
    dev, _truth_eff = _truth()
    base = efficiency_for(dev).kernel_overhead_s
    eager = [Point("dispatch", "tiny model eager", "fp32", 16e-6)]
    graph = [Point("dispatch_graph", "tiny model graph", "fp32", 2.8e-6)]
    fit = fit_efficiency(dev, eager + graph, main_dtype="bf16")
    assert fit.efficiency.kernel_overhead_s == pytest.approx(2.8e-6)
    assert "16.0 µs" in fit.params["kernel_overhead_s"].basis
    only_eager = fit_efficiency(dev, eager, main_dtype="bf16")
    assert only_eager.efficiency.kernel_overhead_s == base
    assert "host's issue time" in only_eager.skipped["kernel_overhead_s"]
    cpu = load_catalog().get("generic-cpu")
    assert fit_efficiency(cpu, eager, main_dtype="fp32").efficiency.kernel_overhead_s == pytest.approx(16e-6)


def test_host_sync_is_fitted_from_the_round_trip_and_the_eager_operations_after_it() -> None:
    """The MoE dispatcher's per-layer sync (host_sync_s): the measured round trip (a tiny reduction read by the
    host) plus MOE_POST_SYNC_OPS tiny operations; without a host_sync measurement the default stays."""
    from xpuplan.catalog.efficiency import DEFAULT_HOST_SYNC_S, MOE_POST_SYNC_OPS

    dev, truth = _truth()
    pts = synthetic_points()
    assert fit_efficiency(dev, pts, main_dtype="bf16").efficiency.host_sync_s == DEFAULT_HOST_SYNC_S
    fit = fit_efficiency(dev, pts + [Point("host_sync", "sync", "int32", 12e-6)], main_dtype="bf16")
    assert fit.efficiency.host_sync_s == pytest.approx(12e-6 + MOE_POST_SYNC_OPS * truth.kernel_overhead_s)
    assert "host_sync_s" in fit.params and "host_sync_s" not in fit.skipped
    # the planner's MoE layer pays the calibrated figure
    from xpuplan.models import get_model
    from xpuplan.train.compute import layer_compute

    lc = layer_compute(get_model("qwen3-30b-a3b"), dev, fit.efficiency, micro_batch=1, seq_len=4096, tp=1, cp=1, ep=8,
                       sp=False, precision="bf16")
    assert lc.moe_sync == fit.efficiency.host_sync_s


def _prefill(dev, eff, kernel: str | None) -> list[Point]:
    params = {"phase": "prefill"} | ({"kernel": kernel} if kernel else {})
    out = []
    for s in (2048, 8192, 16384):
        c = cost_attention(1, 32, s, s, 128, causal=True, dtype="bf16")
        out.append(Point("attention", f"prefill {s} {kernel}", "bf16", op_time(c, dev, "bf16", eff).time_s, c.flops,
                         c.bytes, float(s), params))
    return out


def test_each_fused_attention_kernel_gets_its_own_fraction() -> None:
    """cuDNN's fused attention and FlashAttention-2's code run at different shares of Hopper's peak: a bench run
    that pins each (params.kernel) calibrates attention_peak_fraction and attention_fa2_peak_fraction apart."""
    dev, truth = _truth()
    base = [p for p in synthetic_points() if p.kind != "attention"]
    fa2_truth = truth.merged({"attention_peak_fraction": 0.30}, "fa2 truth")
    fit = fit_efficiency(dev, base + _prefill(dev, truth, "native") + _prefill(dev, fa2_truth, "fa2"), main_dtype="bf16")
    assert fit.efficiency.attention_peak_fraction == pytest.approx(0.41, rel=0.01)
    assert fit.efficiency.attention_fa2_peak_fraction == pytest.approx(0.30, rel=0.01)
    assert fit.efficiency.for_attention_kernel("fa2").attention_peak_fraction == pytest.approx(0.30, rel=0.01)
    assert max(abs(c["error"]) for c in fit.checks) < 0.02 and not fit.warnings
    # only FlashAttention-2 measured: the native fraction keeps its default
    only_fa2 = fit_efficiency(dev, base + _prefill(dev, fa2_truth, "fa2"), main_dtype="bf16")
    assert "attention_peak_fraction" in only_fa2.skipped and "attention_fa2_peak_fraction" in only_fa2.params


def test_untagged_sdpa_runs_on_hopper_are_fitted_as_native_with_a_warning() -> None:
    dev, truth = _truth()
    base = [p for p in synthetic_points() if p.kind != "attention"]
    fit = fit_efficiency(dev, base + _prefill(dev, truth, None), main_dtype="bf16")
    assert fit.efficiency.attention_peak_fraction == pytest.approx(0.41, rel=0.01)
    assert any("FlashAttention-2" in w for w in fit.warnings)
    a100, a100_truth = _truth("nvidia-a100-sxm-80gb")
    ampere = fit_efficiency(a100, [p for p in synthetic_points("nvidia-a100-sxm-80gb") if p.kind != "attention"]
                            + _prefill(a100, a100_truth, None), main_dtype="bf16")
    assert not any("FlashAttention-2" in w for w in ampere.warnings)  # on Ampere FlashAttention-2 is the native kernel


def test_fit_is_robust_to_a_disturbed_timing() -> None:
    dev, truth = _truth()
    pts = synthetic_points()
    i = next(i for i, p in enumerate(pts) if p.name == "gemm 1024x1024x1024")
    p = pts[i]
    pts[i] = Point(p.kind, p.name, p.dtype, p.time_s * 5, p.flops, p.bytes, p.min_dim, p.params)  # another job ran
    fit = fit_efficiency(dev, pts, main_dtype="bf16")
    assert fit.efficiency.gemm_peak_fraction == pytest.approx(truth.gemm_peak_fraction, rel=0.05)


def test_rates_above_the_catalog_peak_are_capped_with_a_warning() -> None:
    dev, _ = _truth()
    nbytes = 3 * 4.0 * 2**28
    pts = [Point("membw", "stream triad", "fp32", nbytes / (dev.memory_bandwidth * 1.3), 0.0, nbytes)]
    fit = fit_efficiency(dev, pts, main_dtype="bf16")
    assert fit.efficiency.memory_bw_fraction == 1.0
    assert any("exceeds the catalog peak" in w for w in fit.warnings)


def test_device_without_link_figures_keeps_collective_defaults() -> None:
    dev = load_catalog().get("generic-cpu")
    pts = [Point("collective", "all_reduce 1M", "fp32", 1e-3, 0.0, 2.0**20, math.inf,
                 {"op": "all_reduce", "size_bytes": 2**20, "n_ranks": 2, "scope": "scale_up"})]
    fit = fit_efficiency(dev, pts, main_dtype="fp32")
    assert "no scale-up link bandwidth" in fit.skipped["scale_up_bw_fraction"]
    assert fit.efficiency.scale_up_bw_fraction == efficiency_for(dev).scale_up_bw_fraction


def _store_points(store, device_id: str, pts: list[Point]) -> int:
    rid = start_run(store, RunInfo(kind="bench", device_id=device_id, device_name="synthetic", config={"dtype": "bf16"}))
    for p in pts:
        if p.kind == "collective":
            continue
        add_measurement(store, rid, Record(kind=p.kind, name=p.name, dtype=p.dtype, metric="time_s", value=p.time_s,
                                           unit="s", time_s=p.time_s, flops=p.flops or None, bytes=p.bytes or None,
                                           params=p.params))
    finish_run(store, rid)
    return rid


def test_calibrate_from_store_and_cli(db_url: str) -> None:
    store = open_store()
    rid = _store_points(store, H100, synthetic_points())
    res = calibrate_from_store(store, "H100", save=False)
    assert res.run_ids == [rid] and res.calibration_id == 0
    out = runner.invoke(app, ["calibrate", "--device", "H100", "--json"])
    assert out.exit_code == 0, out.output
    assert '"gemm_peak_fraction"' in out.stdout and '"saved": true' in out.stdout
    from xpuplan.calibrate import assumptions_with_profiles
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.train import Cluster

    dev = load_catalog().get(H100)
    a = assumptions_with_profiles(default_assumptions(), ["H100"])
    eff = a.efficiency(dev)
    assert eff.source.startswith("calibration:#1 for nvidia-h100-sxm-80gb")
    assert eff.gemm_peak_fraction == pytest.approx(0.62, rel=0.01)
    assert set(a.efficiency_provenance(dev).values()) <= {eff.source, "link type"}
    # planners see the profile only when it is handed to them; by default they never read the store
    assert Cluster.from_catalog(H100, 8, assumptions=a).efficiency.source == eff.source
    assert Cluster.from_catalog(H100, 8).efficiency.source == "family:nvidia-hopper"
    assert assumptions_with_profiles(None, ["generic-cpu"]) is default_assumptions()  # nothing stored for it
    table = runner.invoke(app, ["calibrate", "--from", str(rid), "--dry-run"])
    assert table.exit_code == 0 and "dry run" in table.stdout


def test_calibrate_errors_are_user_errors(db_url: str) -> None:
    store = open_store()
    for args, needle in ((["calibrate", "--device", "no-such-gpu"], "unknown hardware"),
                         (["calibrate", "--device", "H100"], "no stored measurements"),
                         (["calibrate", "--from", "7"], "unknown run 7"),
                         (["calibrate"], "give --device")):
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert needle in res.output and "Traceback" not in res.output
    rid = _store_points(store, H100, synthetic_points())
    with pytest.raises(UserInputError, match="measured nvidia-h100-sxm-80gb, not generic-cpu"):
        calibrate_from_store(store, "generic-cpu", [str(rid)])


def test_stored_values_are_laid_over_the_assumptions_defaults() -> None:
    from xpuplan.calibrate import profile_from_values
    from xpuplan.catalog.assumptions import default_assumptions

    dev = load_catalog().get(H100)
    stored = {"memory_bw_fraction": 0.5, "a_parameter_from_the_future": 3.0, "source": "ignored"}
    prof = profile_from_values(dev, stored, "calibration:#9 for x")
    assert prof.memory_bw_fraction == 0.5 and prof.source == "calibration:#9 for x"
    # fields the profile does not have come from the device's values under the given assumptions
    hopper = default_assumptions().efficiency_layers.families["nvidia-hopper"].gemm_peak_fraction
    assert prof.gemm_peak_fraction == default_assumptions().efficiency(dev).gemm_peak_fraction == hopper
    bumped = default_assumptions().with_overrides({"efficiency": {"defaults": {"gemm_half_dim": 99.0}}})
    assert profile_from_values(dev, stored, "cal", bumped).gemm_half_dim == 99.0
    with pytest.raises(UserInputError, match="invalid") as err:
        profile_from_values(dev, {"memory_bw_fraction": 7.0}, "cal")
    assert err.value.field == f"calibration.{H100}"


def test_calibration_switch_is_read_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from xpuplan.calibrate import calibration_enabled

    monkeypatch.setenv("XPUPLAN_USE_CALIBRATION", "0")
    assert calibration_enabled() is False and calibration_enabled(True) is True
    monkeypatch.delenv("XPUPLAN_USE_CALIBRATION")
    assert calibration_enabled() is True and calibration_enabled(False) is False


def test_old_import_paths_still_work() -> None:
    import xpuplan.bench.calibrate as old_fit
    import xpuplan.calibrate.fit as new_fit
    from xpuplan.calibrate.profile import resolve_efficiency

    assert old_fit.fit_efficiency is new_fit.fit_efficiency and old_fit.bus_factor is new_fit.bus_factor
    dev = load_catalog().get(H100)
    assert resolve_efficiency(dev, use_calibration=False) == efficiency_for(dev)


def test_core_and_measurement_modules_import_without_torch() -> None:
    import subprocess
    import sys

    code = ("import sys, xpuplan, xpuplan.cli.main, xpuplan.calibrate.fit, xpuplan.bench.calibrate, xpuplan.bench.imports, "
            "xpuplan.bench.local_validation, xpuplan.bench.runner, xpuplan.store.calibrations; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bench_without_torch_explains(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "from xpuplan.cli.main import run\n"
            "sys.argv = ['xpuplan', 'bench', 'run', '--quick']\n"
            "run()\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, XPUPLAN_DB_URL=f"sqlite:///{tmp_path / 'x.db'}"))
    assert proc.returncode == 2
    assert "PyTorch is needed" in proc.stderr and "torch>=2.3" in proc.stderr and "Traceback" not in proc.stderr


def test_assumptions_with_profiles_accepts_device_objects(tmp_path) -> None:
    """Devices are unhashable (they hold dicts): lookup by object must work, deduplicated by id."""
    from xpuplan.calibrate.profile import assumptions_with_profiles
    from xpuplan.catalog import get_device
    from xpuplan.catalog.assumptions import default_assumptions

    dev = get_device("H100")
    a = assumptions_with_profiles(None, [dev, dev, "H100"], f"sqlite:///{tmp_path / 'empty.db'}")
    assert a.efficiency(dev) == default_assumptions().efficiency(dev)


def test_a_cuda_bench_times_each_fused_attention_kernel_apart() -> None:
    """The sweep of a CUDA device pins cuDNN's fused attention (native) and SDPA's flash backend (fa2) for every
    causal prefill shape (no GPU here: the cases are built, not run); CPUs keep SDPA's own choice."""
    from xpuplan.bench.detect import Backend
    from xpuplan.bench.micro import ATTENTION_KERNELS, default_sweep, micro_cases
    from xpuplan.bench.timing import QUICK

    shapes = ((1, 8, 256, 64), (1, 8, 64, 64))
    cuda = Backend(kind="cuda", torch_device="cuda:0", name="H100", vendor="NVIDIA", device_kind="GPU")
    sweep = default_sweep(cuda, quick=True, bench_model_gemms=[], bench_model_attention=shapes)
    assert sweep.attention_kernels == ATTENTION_KERNELS == ("native", "fa2")
    names = [c.name for c in micro_cases(cuda, sweep, QUICK, primary_dtype="bf16", only={"attention"})]
    prefill = [n for n in names if "prefill" in n]
    assert len(prefill) == 2 * len(sweep.attention_prefill)
    assert {n.rsplit(" ", 1)[1] for n in prefill} == {"native", "fa2"}
    assert all(not n.endswith(("native", "fa2")) for n in names if "decode" in n)
    cpu = Backend(kind="cpu", torch_device="cpu", name="cpu", vendor="generic", device_kind="CPU")
    assert default_sweep(cpu, quick=True, bench_model_gemms=[], bench_model_attention=shapes).attention_kernels == ()


def test_a_slow_int8_library_path_does_not_drag_the_fp8_factor_down() -> None:
    """On an H200 (2026-11-27) torch._scaled_mm reached 72% of the FP8 peak and torch._int_mm 6% of the INT8 one:
    the low-precision factor is fitted on FP8 alone and the INT8 disagreement is a warning, not a fit."""
    dev, truth = _truth()
    base = [p for p in synthetic_points() if p.kind != "gemm" or p.dtype == "bf16"]
    fp8_eff = truth.merged({"low_precision_factor": 0.9}, "fp8 truth")
    slow_int8 = truth.merged({"low_precision_factor": 0.09}, "int8 truth")
    low = []
    for dtype, eff in (("fp8", fp8_eff), ("int8", slow_int8)):
        for s in (2048, 4096, 8192):
            c = cost_gemm(s, s, s, dtype)
            low.append(Point("gemm", f"gemm {dtype} {s}", dtype, op_time(c, dev, dtype, eff).time_s, c.flops, c.bytes,
                             float(s), {"m": s, "n": s, "k": s}))
    fit = fit_efficiency(dev, base + low, main_dtype="bf16")
    assert fit.efficiency.low_precision_factor == pytest.approx(0.9, rel=0.02)
    assert "fp8" in fit.params["low_precision_factor"].basis
    assert any("int8" in w and "fitted on fp8 only" in w for w in fit.warnings)
    # without FP8 measurements INT8 is what there is
    only_int8 = fit_efficiency(dev, base + [p for p in low if p.dtype == "int8"], main_dtype="bf16")
    assert only_int8.efficiency.low_precision_factor == pytest.approx(0.09, rel=0.05)
