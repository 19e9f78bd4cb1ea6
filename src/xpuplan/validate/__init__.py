"""Predictions vs published measurements (``xpuplan validate``).

``rows`` reads the CSV format and builds a row's model; ``train_predictor`` and ``serve_predictor``
predict one row each; ``core`` runs them over files (never aborting a file) and computes error
statistics; ``band`` turns a hardware family's measured error into an uncertainty band; ``data/``
holds the public validation files shipped with the package (:func:`public_files`).
"""

from xpuplan.validate.band import Band, band_record, hardware_family, validation_band
from xpuplan.validate.core import (
    ErrorStats,
    Prediction,
    RowResult,
    ValidationReport,
    error_stats,
    predict_row,
    validate_file,
    validate_rows,
)
from xpuplan.validate.data_files import PUBLIC_FILES, public_file, public_files
from xpuplan.validate.rows import ValidationRow, model_from_row, read_rows

__all__ = [
    "PUBLIC_FILES",
    "Band",
    "band_record",
    "hardware_family",
    "validation_band",
    "ErrorStats",
    "Prediction",
    "RowResult",
    "ValidationReport",
    "ValidationRow",
    "error_stats",
    "model_from_row",
    "predict_row",
    "public_file",
    "public_files",
    "read_rows",
    "validate_file",
    "validate_rows",
]
