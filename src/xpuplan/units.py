"""Units: the one place where scale factors live.

Every quantity inside xpuplan is held in SI base units: bytes, seconds, FLOP, FLOP/s,
bytes/s, watts, joules. Decimal (GB = 1e9 B) and binary (GiB = 2**30 B) prefixes are kept
apart: vendors print memory capacity and bandwidth in decimal units, operating systems and
frameworks often report binary ones. Convert at the edges with the helpers below; never write
``1e9`` or ``1024**3`` elsewhere.
"""

from __future__ import annotations

from typing import Final

# --- decimal (SI) prefixes -------------------------------------------------------------
KILO: Final = 1e3
MEGA: Final = 1e6
GIGA: Final = 1e9
TERA: Final = 1e12
PETA: Final = 1e15
EXA: Final = 1e18

# --- bytes -----------------------------------------------------------------------------
KB: Final = 1e3
MB: Final = 1e6
GB: Final = 1e9
TB: Final = 1e12
KiB: Final = float(2**10)
MiB: Final = float(2**20)
GiB: Final = float(2**30)
TiB: Final = float(2**40)

# --- bits ------------------------------------------------------------------------------
BITS_PER_BYTE: Final = 8
GBIT: Final = 1e9 / BITS_PER_BYTE  # bytes in one gigabit

# --- time ------------------------------------------------------------------------------
MS: Final = 1e-3
US: Final = 1e-6
MINUTE: Final = 60.0
HOUR: Final = 3600.0
DAY: Final = 86400.0
YEAR: Final = 365.25 * DAY

# --- throughput --------------------------------------------------------------------------
TFLOPS: Final = 1e12  # FLOP/s in one TFLOP/s
PFLOPS: Final = 1e15
GB_PER_S: Final = 1e9  # bytes/s in one GB/s

# --- energy ------------------------------------------------------------------------------
KWH: Final = 3.6e6  # joules in one kilowatt-hour
MWH: Final = 3.6e9


def to_gb(n_bytes: float) -> float:
    """Bytes -> decimal gigabytes (1e9 B)."""
    return n_bytes / GB


def to_gib(n_bytes: float) -> float:
    """Bytes -> binary gibibytes (2**30 B)."""
    return n_bytes / GiB


def to_tflops(flop_per_s: float) -> float:
    """FLOP/s -> TFLOP/s."""
    return flop_per_s / TFLOPS


def to_ms(seconds: float) -> float:
    """Seconds -> milliseconds."""
    return seconds / MS


# --- numeric formats -------------------------------------------------------------------
#: Bytes per element of each numeric format. fp4/int4 are half a byte; packing overhead such
#: as group-quantisation scales is added by the memory model, not here.
BYTES_PER_ELEMENT: Final[dict[str, float]] = {
    "fp64": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,  # stored as fp32; tf32 is a tensor-core compute mode
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp6": 0.75,
    "fp4": 0.5,
    "int4": 0.5,
    "nf4": 0.5,
    # Block-scaled FP4 storage formats: the per-block scale is part of the format, so it is counted
    # here. NVFP4 (NVIDIA Blackwell): E2M1 values + one FP8 E4M3 scale per 16 elements = 4.5 bits
    # (plus one fp32 scale per tensor, negligible). MXFP4 (OCP Microscaling spec v1.0): E2M1 values +
    # one E8M0 scale per 32 elements = 4.25 bits.
    "nvfp4": 0.5 + 1.0 / 16.0,
    "mxfp4": 0.5 + 1.0 / 32.0,
}

PRECISIONS: Final = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")


def bytes_per_element(dtype: str) -> float:
    """Bytes per element for a numeric format name (``bf16``, ``int4``...)."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        raise ValueError(
            f"unknown dtype {dtype!r}; expected one of {', '.join(sorted(BYTES_PER_ELEMENT))}"
        ) from None


def format_bytes(n_bytes: float, binary: bool = False) -> str:
    """Human-readable size; decimal (GB) unless ``binary`` (GiB)."""
    if binary:
        steps = ((TiB, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB"))
    else:
        steps = ((TB, "TB"), (GB, "GB"), (MB, "MB"), (KB, "kB"))
    for scale, name in steps:
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:.2f} {name}"
    return f"{n_bytes:.0f} B"


def format_count(n: float) -> str:
    """Human-readable count with decimal suffixes (1.2 B, 70.6 B, 340 M)."""
    for scale, name in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {name}"
    return f"{n:.0f}"


def format_flops(flop: float) -> str:
    """Human-readable FLOP count (e.g. 3.14e23 FLOP)."""
    return f"{flop:.3g} FLOP"
