"""benchmarks/trtllm_host_fit.py: TensorRT-LLM's per-request host time fitted from PyExecutor iteration logs."""

from __future__ import annotations

import json

import pytest

from tests.unit.benchmod import load_benchmark
from xpuplan.catalog.assumptions import load_assumptions

fitmod = load_benchmark("trtllm_host_fit")


def _old(i: int, n: int, host: float, dev: float | None) -> str:
    """The 1.0-1.2 line layout (``num_scheduled_requests: N`` after the timestamp)."""
    d = "N/A" if dev is None else f"{dev:.3f}ms"
    return (f"[TRT-LLM] [I] iter = {i}, global_rank = 0, rank = 0, currank_total_requests = 0/{n}, "
            f"host_step_time = {host:.3f}ms, prev_device_step_time = {d}, timestamp = 2026-11-28 10:00:00, "
            f"num_scheduled_requests: {n}, states = {{'num_ctx_requests': 0, 'num_ctx_tokens': 0, "
            f"'num_generation_tokens': {n}}}")


def _new(i: int, n: int, host: float, dev: float) -> str:
    """The later layout (``num_scheduled_requests = N, kv_cache_util = ...`` before currank_total_requests)."""
    return (f"[TRT-LLM] [I] [_torch][RANK 0] iter = {i}, global_rank = 0, rank = 0, num_scheduled_requests = {n}, "
            f"kv_cache_util = 0.3, currank_total_requests = 0/{n}, host_step_time = {host}ms, "
            f"prev_device_step_time = {dev}ms, timestamp = 2026-11-28 10:00:00, "
            f"states = {{'num_ctx_requests': 0, 'num_ctx_tokens': 0, 'num_generation_tokens': {n}}}")


def _ramp(line, per_request_us: float = 29.0, fixed_ms: float = 2.0, dev: float = 20.0) -> list[str]:
    """A run whose batch ramps down: host-bound at large batches (device ``dev`` ms), device-bound at small ones."""
    out = [line(0, 2048, 300.0, None) if line is _old else line(0, 2048, 300.0, 25.0)]  # warm-up / first iteration
    for i, n in enumerate((2048, 1536, 1024, 768, 512, 256, 64, 8), start=1):
        host = fixed_ms + per_request_us * n / 1e3
        out.append(line(i, n, max(host, dev), dev))  # a device-bound loop waits: its host time is the device's
    return out


@pytest.mark.parametrize("layout", [_old, _new])
def test_the_fit_recovers_the_per_request_host_time_from_host_bound_iterations(layout):
    its = fitmod.parse_iter_log("\n".join(["unrelated line", *_ramp(layout), "another"]))
    assert len(its) == 9
    fit = fitmod.fit_host(its)
    assert fit.per_request_us == pytest.approx(29.0, rel=1e-6)
    assert fit.fixed_ms == pytest.approx(2.0, abs=1e-6)
    # 2,048 .. 768 requests are host-bound (> 1.1 x 20 ms); 512 and below waited for the device and are left out.
    # The warm-up line (300 ms at 2,048 requests) is fitted where a device time is printed for it (the later
    # layout), and the pairwise-slope fit does not follow it
    assert fit.min_scheduled == 768 and fit.max_scheduled == 2048
    assert fit.device_bound == 4
    assert fit.median_abs_residual_ms == pytest.approx(0.0, abs=1e-9)


def test_a_device_bound_or_constant_batch_run_gives_no_fit():
    flat = [_new(i, 256, 20.0, 20.0) for i in range(20)]
    with pytest.raises(fitmod.FitError, match="num_scheduled_requests"):
        fitmod.fit_host(fitmod.parse_iter_log("\n".join(flat)))
    same_batch = [_new(i, 1024, 40.0, 20.0) for i in range(20)]
    with pytest.raises(fitmod.FitError, match="distinct request counts"):
        fitmod.fit_host(fitmod.parse_iter_log("\n".join(same_batch)))
    with pytest.raises(fitmod.FitError, match="print_iter_log"):
        fitmod.fit_host([])


def test_cli_writes_an_override_the_planner_reads(tmp_path, capsys):
    log = tmp_path / "server.log"
    log.write_text("\n".join(_ramp(_new, per_request_us=15.0, fixed_ms=1.0, dev=5.0)) + "\n")
    out_json, out_yaml = tmp_path / "fit.json", tmp_path / "trtllm_host.yaml"
    assert fitmod.main([str(log), "--json", str(out_json), "--write-overrides", str(out_yaml)]) == 0
    assert "15.00 µs" in capsys.readouterr().out
    assert json.loads(out_json.read_text())["fit"]["per_request_us"] == pytest.approx(15.0)
    a = load_assumptions([out_yaml])
    assert a.engine("TensorRT-LLM v1.0").host_s_per_sequence == pytest.approx(15e-6)
    # the rule of which builds pay it is untouched: an older release still pays none
    assert a.engine("TensorRT-LLM v0.9.0").host_s_per_sequence == 0.0


def test_cli_refuses_bad_input_with_the_file_or_field_named(tmp_path, capsys):
    missing = tmp_path / "nope.log"
    assert fitmod.main([str(missing)]) == 2
    assert "nope.log: cannot read the log" in capsys.readouterr().err
    empty = tmp_path / "empty.log"
    empty.write_text("[TRT-LLM] [I] loading weights\n")
    assert fitmod.main([str(empty)]) == 2
    assert "empty.log: no PyExecutor iteration lines" in capsys.readouterr().err
    assert fitmod.main([str(empty), "--margin", "0.5"]) == 2
    assert "--margin" in capsys.readouterr().err
    log = tmp_path / "server.log"
    log.write_text("\n".join(_ramp(_old)) + "\n")
    assert fitmod.main([str(log), "--json", str(tmp_path / "no-such-dir" / "fit.json")]) == 2
    assert "field '--json': cannot write" in capsys.readouterr().err
