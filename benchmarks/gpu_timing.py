"""CUDA timing shared by the GPU probes in this folder (imported as a sibling module: `python benchmarks/X.py`).

torch is passed in, so the probes import it themselves and this module needs nothing beyond the standard library.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any


def output_problem(path: str | Path | None, flag: str = "--json") -> str | None:
    """Why a probe could not write its result to ``path`` (a missing folder, a folder in its place), checked
    before minutes of GPU time are spent; None when it can (or no path was given)."""
    if path is None:
        return None
    p = Path(path)
    if p.is_dir():
        return f"field '{flag}': {p} is a folder, give a file name"
    if not p.parent.is_dir():
        return f"field '{flag}': the folder {p.parent} does not exist"
    return None


def cuda_torch() -> Any:
    """PyTorch when it is installed and sees a CUDA device; else None, after printing why there is nothing to probe
    (the probes then exit 0: no GPU is not an error)."""
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: nothing to probe")
        return None
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to probe")
        return None
    return torch


def event_seconds(torch: Any, fn: Callable[[], Any], repeats: int, warmup: int = 2) -> float:
    """Median seconds of one eager call of ``fn`` between CUDA events (host gaps included), after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def graph_seconds(torch: Any, fn: Callable[[], Any], repeats: int) -> float:
    """Median GPU seconds of one call of ``fn`` captured once as a CUDA graph and replayed (no host in the way)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up on a side stream, as graph capture requires
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return event_seconds(torch, graph.replay, repeats, warmup=1)
