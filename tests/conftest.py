from __future__ import annotations

import os
from pathlib import Path

import pytest

#: ../shared/validation next to the repository root (the project's published measurements).
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
VALIDATION_DIR = SHARED / "validation"

# Never read or write the user's calibration store from tests.
os.environ.setdefault("XPUPLAN_USE_CALIBRATION", "0")


@pytest.fixture
def validation_dir() -> Path:
    if not (VALIDATION_DIR / "training_public.csv").exists():
        pytest.skip(f"validation data not found at {VALIDATION_DIR}")
    return VALIDATION_DIR
