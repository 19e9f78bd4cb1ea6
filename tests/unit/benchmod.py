"""Load a script of ``benchmarks/`` as a module, for the tests of its pure parts (the scripts are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` imported as module ``name`` (registered in ``sys.modules`` for dataclasses)."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_probe(name: str) -> ModuleType:
    """A GPU probe of ``benchmarks/``: loaded with the folder on ``sys.path`` for the sibling modules it imports
    (``gpu_timing``), which it binds at import."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return load_benchmark(name)
    finally:
        sys.path.remove(str(BENCHMARKS))
