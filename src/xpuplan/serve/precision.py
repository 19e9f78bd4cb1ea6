"""Serving precision schemes: how weights are stored, which GEMMs run, what the KV cache holds.

=============  ===============  ===========  ==================================================
scheme         weights (store)  GEMM dtype   notes
=============  ===============  ===========  ==================================================
bf16 / fp16    16-bit           bf16/fp16    the checkpoint as trained
fp8            fp8              fp8          W8A8 (TensorRT-LLM / vLLM FP8); on a device without
                                             fp8 tensor cores it runs weight-only (fp8 -> 16-bit)
int8           int8             int8         W8A8 (SmoothQuant-style)
int8-wo        int8             bf16         weight-only int8 (W8A16), dequantised in the GEMM
int4-wo        int4 + scales    bf16         AWQ/GPTQ-style weight-only int4 (W4A16), group 128
nvfp4          fp4 + fp8 / 16   fp4          NVIDIA block-scaled FP4 (W4A4): E2M1 values, one FP8
                                             E4M3 scale per 16 elements (4.5 bits per weight)
mxfp4          fp4 + e8m0 / 32  fp4          OCP MX FP4 (W4A4): E2M1 values, one E8M0 scale per 32
                                             elements (4.25 bits per weight)
=============  ===============  ===========  ==================================================

Aliases: ``w8a8`` -> int8, ``w8a16`` -> int8-wo, ``int4``/``w4a16``/``awq``/``gptq`` -> int4-wo,
``fp4``/``w4a4``/``nvfp4-w4a4`` -> nvfp4 (what TensorRT-LLM and NVIDIA ModelOpt call FP4). The FP4 schemes
need FP4 tensor cores (``dense_tflops.fp4`` in the catalog: Blackwell, MI355X); a device without
them is refused with the reason (no silent fallback).
The KV cache dtype is independent (bf16, fp16, fp8, int8).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from xpuplan.catalog.device import Device
from xpuplan.errors import UserInputError

SCHEMES = ("bf16", "fp16", "fp8", "int8", "int8-wo", "int4-wo", "nvfp4", "mxfp4")

#: Block-scaled FP4 schemes -> their storage format (``units.BYTES_PER_ELEMENT``, scales included).
FP4_SCHEMES = {"nvfp4": "nvfp4", "mxfp4": "mxfp4"}
KV_DTYPES = ("bf16", "fp16", "fp8", "int8")

_ALIASES = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "auto": "bf16",
    "w8a8": "int8", "int8-w8a8": "int8", "w8a8-int8": "int8", "smoothquant": "int8",
    "fp8-w8a8": "fp8", "w8a8-fp8": "fp8", "e4m3": "fp8",
    "w8a16": "int8-wo", "int8-weight-only": "int8-wo", "int8wo": "int8-wo",
    "int4": "int4-wo", "w4a16": "int4-wo", "awq": "int4-wo", "gptq": "int4-wo", "int4-weight-only": "int4-wo",
    "int4wo": "int4-wo",
    "fp4": "nvfp4", "w4a4": "nvfp4", "nvfp4-w4a4": "nvfp4", "fp4-e2m1": "nvfp4", "mxfp4-w4a4": "mxfp4",
}


@dataclass(frozen=True)
class Precision:
    """Resolved precision of a replica: storage, GEMM and KV dtypes (unit names from ``units``)."""

    scheme: str
    weight_dtype: str
    gemm_dtype: str
    kv_dtype: str
    weight_only: bool
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def normalise_scheme(name: str, *, field: str = "dtype") -> str:
    key = name.strip().casefold().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key not in SCHEMES:
        raise UserInputError(
            f"unknown precision {name!r}; choose one of {', '.join(SCHEMES)} (aliases: w8a8, w8a16, w4a16, awq, gptq, fp4)",
            field=field,
        )
    return key


def resolve_precision(scheme: str, device: Device, kv_dtype: str | None = None, *,
                      fp8_kv_with_fp8_weights: bool = True) -> Precision:
    """The precision a replica of ``scheme`` really runs on ``device``.

    ``kv_dtype`` None: with ``fp8_kv_with_fp8_weights`` (the engine's default: TensorRT-LLM's FP8/NVFP4
    checkpoints quantise the KV cache too) fp8 for the fp8 and FP4 schemes on a device with fp8 tensor
    cores; otherwise (vLLM and SGLang store it in the model's dtype unless told) the 16-bit activation dtype.
    A device without the figure a scheme needs gets one error naming that figure (and a scheme that
    works with the figures it has, if any); an fp16-only device runs bf16 at its fp16 rate, with a note.
    """
    s = normalise_scheme(scheme)
    note = None
    has16 = device.supports("bf16") or device.supports("fp16")
    has8 = device.supports("int8")
    act16 = "fp16" if (s == "fp16" or not device.supports("bf16")) else "bf16"
    sixteen = "16-bit (bf16/fp16) compute peak"
    lacks = [f for f in ("memory.capacity_gb", "memory.bandwidth_gb_per_s") if device.figure(f) is None]
    # an alternative scheme is offered only when it would run with the figures present
    int8_ok = "or run --dtype int8 (W8A8), which it lists" if has8 and not lacks else ""
    if lacks:
        int8_ok = f"and {', '.join(lacks)}, which it also lacks"
    if s in ("bf16", "fp16"):
        if not has16:
            raise device.missing_figure(f"dense_tflops.{s}", sixteen, field="dtype",
                                        also=int8_ok)
        p = Precision(s, s if device.supports(s) else act16, s if device.supports(s) else act16, "", False)
        note = device.sixteen_bit_note(s)
    elif s == "fp8":
        if device.supports("fp8"):
            p = Precision(s, "fp8", "fp8", "", False)
        else:
            if not has16:
                raise device.missing_figure(
                    "dense_tflops.fp8", "fp8 or 16-bit compute peak (fp8 weights need one)",
                    field="dtype", also=int8_ok)
            note = f"{device.id} has no fp8 tensor cores: fp8 weights are dequantised to {act16} (weight-only)"
            p = Precision(s, "fp8", act16, "", True)
    elif s in FP4_SCHEMES:
        if not device.supports("fp4"):
            raise UserInputError(
                f"{device.id} has no FP4 tensor cores in the catalog (dense_tflops.fp4), so {s} (block-scaled FP4, "
                "W4A4) cannot run on it; use fp8 or int4-wo", field="dtype")
        p = Precision(s, FP4_SCHEMES[s], "fp4", "", False)
    elif s == "int8":
        if not has8:
            raise device.missing_figure("dense_tflops.int8", "int8 peak (W8A8 runs int8 GEMMs)", field="dtype",
                                        also=("or run --dtype int8-wo (weight-only, 16-bit GEMMs)" if has16 and not lacks
                                              else int8_ok if lacks else ""))
        p = Precision(s, "int8", "int8", "", False)
    else:  # weight-only
        if not has16:
            raise device.missing_figure(f"dense_tflops.{act16}", f"{sixteen} (weight-only {s} runs 16-bit GEMMs)",
                                        field="dtype", also=int8_ok)
        p = Precision(s, "int8" if s == "int8-wo" else "int4", act16, "", True)
        note = device.sixteen_bit_note("bf16")
    if kv_dtype is None:
        # FP8 KV with the fp8 and FP4 recipes (TensorRT-LLM / ModelOpt NVFP4 checkpoints quantise the
        # KV cache to FP8 too), on devices with fp8 tensor cores
        kv = "fp8" if (fp8_kv_with_fp8_weights and s in ("fp8", *FP4_SCHEMES) and device.supports("fp8")) else act16
    else:
        kv = kv_dtype.strip().casefold()
        if kv in ("auto", "bfloat16"):
            kv = act16
        if kv not in KV_DTYPES:
            raise UserInputError(f"unknown KV-cache dtype {kv_dtype!r}; choose one of {', '.join(KV_DTYPES)}",
                                 field="kv_dtype")
    return Precision(p.scheme, p.weight_dtype, p.gemm_dtype, kv, p.weight_only, note)
