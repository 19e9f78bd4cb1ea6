"""Host time per scheduled request of TensorRT-LLM's PyTorch executor, fitted from its own iteration log.

TensorRT-LLM's PyTorch backend (PyExecutor, the default from 1.0) logs one line per executor iteration when
``print_iter_log`` is on (``trtllm-serve``/``trtllm-bench`` ``--extra_llm_api_options`` with
``print_iter_log: true``)::

    iter = 120, global_rank = 0, rank = 0, currank_total_requests = 0/1536, host_step_time = 45.11ms,
    prev_device_step_time = 20.4ms, timestamp = ..., num_scheduled_requests: 1536, states = {...}

(newer releases write ``num_scheduled_requests = N`` before ``currank_total_requests``; both are read).
``host_step_time`` is the host's wall time of one loop (scheduling, input preparation, the launch, the
previous batch's sampler update and responses), ``prev_device_step_time`` the device time of the previous
forward. With the overlap scheduler the loop also waits for the previous batch, so an iteration measures the
host's own work only when it is host-bound: ``host_step_time`` clearly above ``prev_device_step_time``. This
script keeps those iterations and fits ``host_step_time = fixed + per_request x num_scheduled_requests`` with the
Theil-Sen estimator (the median of the pairwise slopes: a warm-up or a stalled iteration does not move it); the
iterations that were device-bound only bound the host time from above and are counted, not fitted.

The planner's figure for TensorRT-LLM's PyTorch executor (``pyexecutor-per-sequence`` in
``catalog/data/engines.yaml``, 29 µs) is NVIDIA's measurement on a GB200's Grace CPU. Fit your own host's::

    python benchmarks/trtllm_host_fit.py server.log [more.log ...] [--json OUT] [--write-overrides FILE]

``--write-overrides`` writes an assumptions file (``engines: {trtllm: {host_us_per_sequence: ...}}``) that the
planners take from ``XPUPLAN_ASSUMPTIONS_PATH`` (docs/assumptions.md). No GPU is needed to run this script; the log
comes from yours.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

#: An iteration must spend at least this much more on the host than the device spent on the previous forward to
#: count as host-bound (the loop then did not wait for the device).
HOST_BOUND_MARGIN = 1.10
#: The fewest host-bound iterations, and distinct request counts among them, a fit needs.
MIN_POINTS = 3
MIN_DISTINCT_COUNTS = 2
#: Host-bound iterations the pairwise-slope fit uses at most (evenly spaced through the log beyond that).
MAX_FIT_POINTS = 2000

_ITER = re.compile(r"\biter = (\d+),")
_HOST = re.compile(r"host_step_time = ([0-9.]+)\s*ms")
_DEVICE = re.compile(r"prev_device_step_time = ([0-9.]+|N/A)\s*(?:ms)?")
_SCHEDULED = re.compile(r"num_scheduled_requests(?::| =) (\d+)")


#: What a log without iteration lines is told (no file, or every file of the run).
NO_ITERATIONS = ("no PyExecutor iteration lines (iter = N, ... host_step_time = ...ms, ... num_scheduled_requests "
                 "...): turn on print_iter_log")


class FitError(ValueError):
    """A log that cannot give a fit; the message names the file or the field."""


@dataclass(frozen=True)
class Iteration:
    """One executor iteration of the log (times in ms; ``device_ms`` None on the first, printed N/A)."""

    iteration: int
    scheduled: int
    host_ms: float
    device_ms: float | None


@dataclass(frozen=True)
class HostFit:
    """The fitted host cost: ``per_request_us`` (slope) and ``fixed_ms`` (intercept) over ``points`` host-bound
    iterations spanning ``min_scheduled``..``max_scheduled`` requests; ``median_abs_residual_ms`` of the points about
    the line (a small figure: the iterations agree); ``device_bound``: iterations left out because the loop waited
    for the device; ``parsed``: iteration lines read."""

    per_request_us: float
    fixed_ms: float
    median_abs_residual_ms: float
    points: int
    min_scheduled: int
    max_scheduled: int
    device_bound: int
    parsed: int


def parse_iter_log(text: str) -> list[Iteration]:
    """Every iteration line of a PyExecutor log (other lines are skipped); lines without the fields are not
    iterations. A missing or non-numeric field in an iteration line is skipped with it."""
    out: list[Iteration] = []
    for line in text.splitlines():
        it, host, sched = _ITER.search(line), _HOST.search(line), _SCHEDULED.search(line)
        if not (it and host and sched):
            continue
        dev = _DEVICE.search(line)
        device_ms = None if dev is None or dev.group(1) == "N/A" else float(dev.group(1))
        out.append(Iteration(int(it.group(1)), int(sched.group(1)), float(host.group(1)), device_ms))
    return out


def host_bound(its: list[Iteration], margin: float = HOST_BOUND_MARGIN) -> list[Iteration]:
    """The iterations whose host time exceeds the previous forward's device time by ``margin`` (the loop's own
    work, not a wait on the device), with at least one scheduled request."""
    return [i for i in its if i.scheduled > 0 and i.device_ms is not None and i.host_ms > margin * i.device_ms]


def fit_host(its: list[Iteration], margin: float = HOST_BOUND_MARGIN) -> HostFit:
    """Least-squares ``host_ms = fixed + per_request x scheduled`` over the host-bound iterations."""
    if not its:
        raise FitError(NO_ITERATIONS)
    pts = host_bound(its, margin)
    distinct = {p.scheduled for p in pts}
    if len(pts) < MIN_POINTS or len(distinct) < MIN_DISTINCT_COUNTS:
        raise FitError(f"num_scheduled_requests: {len(pts)} host-bound iterations with {len(distinct)} distinct request "
                       f"counts (need {MIN_POINTS} and {MIN_DISTINCT_COUNTS}); the run was device-bound or held one "
                       "batch size: log a run whose batch ramps up or down (e.g. a finite benchmark's tail)")
    n = len(pts)
    use = pts if n <= MAX_FIT_POINTS else [pts[round(k * (n - 1) / (MAX_FIT_POINTS - 1))] for k in range(MAX_FIT_POINTS)]
    slopes = [(b.host_ms - a.host_ms) / (b.scheduled - a.scheduled)
              for i, a in enumerate(use) for b in use[i + 1:] if b.scheduled != a.scheduled]
    slope = statistics.median(slopes)
    fixed = statistics.median(p.host_ms - slope * p.scheduled for p in pts)
    residual = statistics.median(abs(p.host_ms - fixed - slope * p.scheduled) for p in pts)
    if slope <= 0:
        raise FitError(f"host_step_time does not grow with num_scheduled_requests (slope {slope * 1e3:.2f} µs per "
                       "request): no per-request cost to fit from this log")
    device_bound = sum(1 for i in its if i.device_ms is not None and i.scheduled > 0) - n
    return HostFit(per_request_us=slope * 1e3, fixed_ms=fixed, median_abs_residual_ms=residual, points=n,
                   min_scheduled=min(distinct),
                   max_scheduled=max(distinct), device_bound=device_bound, parsed=len(its))


def overrides_yaml(fit: HostFit, sources: list[str]) -> str:
    """An assumptions file that sets TensorRT-LLM's per-request host time to the fitted figure."""
    return ("# written by benchmarks/trtllm_host_fit.py from " + ", ".join(sources) + "\n"
            f"# {fit.points} host-bound iterations, {fit.min_scheduled}-{fit.max_scheduled} requests, median |residual| "
            f"{fit.median_abs_residual_ms:.2f} ms; "
            f"fixed part {fit.fixed_ms:.2f} ms per iteration (not written: the planner's step overhead is its own)\n"
            "engines:\n  trtllm:\n"
            f"    host_us_per_sequence: {fit.per_request_us:.2f}\n")


def _read(paths: list[str]) -> list[Iteration]:
    its: list[Iteration] = []
    for p in paths:
        path = Path(p)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise FitError(f"{p}: cannot read the log ({exc.strerror or exc})") from None
        found = parse_iter_log(text)
        if not found:
            raise FitError(f"{p}: {NO_ITERATIONS}")
        its.extend(found)
    return its


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", help="TensorRT-LLM server or trtllm-bench logs with print_iter_log on")
    ap.add_argument("--margin", type=float, default=HOST_BOUND_MARGIN,
                    help="host-bound when host_step_time > margin x prev_device_step_time (default %(default)s)")
    ap.add_argument("--json", help="write the fit as JSON to this file")
    ap.add_argument("--write-overrides", help="write an assumptions file with the fitted host_us_per_sequence")
    args = ap.parse_args(argv)
    if not args.margin >= 1.0:
        print("trtllm_host_fit: --margin must be >= 1 (a host-bound iteration spends more than the device did)",
              file=sys.stderr)
        return 2
    try:
        fit = fit_host(_read(args.logs), args.margin)
    except FitError as exc:
        print(f"trtllm_host_fit: {exc}", file=sys.stderr)
        return 2
    print(f"iterations read: {fit.parsed}; host-bound (fitted): {fit.points}, {fit.min_scheduled}-"
          f"{fit.max_scheduled} scheduled requests; device-bound (left out): {fit.device_bound}")
    print(f"host time per scheduled request: {fit.per_request_us:.2f} µs; fixed per iteration: {fit.fixed_ms:.2f} ms;"
          f" median |residual| {fit.median_abs_residual_ms:.2f} ms")
    print("planner's figure (pyexecutor-per-sequence, NVIDIA's GB200/Grace measurement): 29 µs per request")
    outputs = [("--json", args.json, lambda: json.dumps({"fit": asdict(fit), "logs": args.logs}, indent=2) + "\n"),
               ("--write-overrides", args.write_overrides, lambda: overrides_yaml(fit, args.logs))]
    for flag, target, text in outputs:
        if not target:
            continue
        try:
            Path(target).write_text(text())
        except OSError as exc:
            print(f"trtllm_host_fit: field '{flag}': cannot write {target} ({exc.strerror or exc})", file=sys.stderr)
            return 2
        print(f"written: {target}" + (f" (use it with XPUPLAN_ASSUMPTIONS_PATH={target})"
                                      if flag == "--write-overrides" else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
