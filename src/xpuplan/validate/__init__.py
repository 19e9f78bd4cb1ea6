"""Predictions vs published measurements (``xpuplan validate``)."""

from xpuplan.validate.core import (
    ErrorStats,
    Prediction,
    RowResult,
    ValidationReport,
    ValidationRow,
    error_stats,
    read_rows,
    register_predictor,
    validate_file,
    validate_rows,
)

__all__ = [
    "ErrorStats",
    "Prediction",
    "RowResult",
    "ValidationReport",
    "ValidationRow",
    "error_stats",
    "read_rows",
    "register_predictor",
    "validate_file",
    "validate_rows",
]
