"""Measure real hardware: microbenchmarks, a small real transformer, collectives, calibration.

Everything that needs PyTorch (the ``bench`` extra) imports it inside functions, so
``import xpuplan`` and ``import xpuplan.bench`` work without torch. The fitting
(:mod:`xpuplan.bench.calibrate`) and the importers (:mod:`xpuplan.bench.imports`) need numpy only.
"""

from __future__ import annotations

TORCH_INSTALL_HINT = (
    "PyTorch is needed to run benchmarks: install your platform's torch build first (CUDA, ROCm, "
    "torch_npu, torch_mlu or CPU), then `pip install 'xpuplan[bench]'`"
)


def require_torch():  # type: ignore[no-untyped-def]
    """Import torch or raise a UserInputError explaining how to install it."""
    try:
        import torch
    except ModuleNotFoundError:
        from xpuplan.errors import UserInputError

        raise UserInputError(TORCH_INSTALL_HINT, field="torch") from None
    return torch
