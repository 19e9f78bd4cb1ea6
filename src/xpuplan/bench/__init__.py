"""Measure real hardware: microbenchmarks, a small real transformer, collectives, log imports.

Everything that needs PyTorch (the ``bench`` extra) imports it inside functions, so
``import xpuplan`` and ``import xpuplan.bench`` work without torch. The importers
(:mod:`xpuplan.bench.imports`) need numpy only; fitting the efficiency parameters lives in
:mod:`xpuplan.calibrate.fit` (re-exported as ``xpuplan.bench.calibrate``).
"""

from __future__ import annotations

from typing import Any

TORCH_INSTALL_HINT = (
    "PyTorch is needed to run benchmarks: install your platform's torch build (CUDA, ROCm, torch_npu, "
    "torch_mlu or CPU; on a CPU-only machine `pip install torch==2.13.0`); xpuplan's `bench` extra asks for "
    "torch>=2.3"
)


def require_torch() -> Any:
    """Import torch or raise a UserInputError explaining how to install it."""
    try:
        import torch
    except ModuleNotFoundError:
        from xpuplan.errors import UserInputError

        raise UserInputError(TORCH_INSTALL_HINT, field="torch") from None
    return torch
