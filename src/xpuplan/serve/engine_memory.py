"""Memory defaults an engine computes from the device and the layout (``memory_defaults`` in engines.yaml).

SGLang does not use one ``mem_fraction_static``: its ``ServerArgs`` derives it, and its prefill chunk, from the
GPU's memory and the parallel size, by rules that changed between releases. Transcribed from
``sglang/srt/server_args.py`` of the released wheels (PyPI ``sglang``; MiB as SGLang reads them, GiB = 1,024 MiB):

* **before 0.4.6** (0.3.x-0.4.5): the fraction by TP size: 0.88 (TP1), 0.87 (TP2-3), 0.85 (TP4-7), 0.81
  (TP8-15; 0.83 in 0.3.0), 0.79 (TP16+); the chunk 2,048 tokens below 25,000 MiB of device memory, else 8,192;
* **0.4.6-0.4.8**: the same up to 81,920 MiB; above it ``(memory − 13 GiB) / memory``;
* **0.4.9-0.5.2**: ``(memory − reserved) / memory`` with ``reserved`` = 2.8 + P/10 GiB below 35 GiB, 9.5 + P/2
  below 90 GiB, 12 + P/2 below 160 GiB, else 32 GiB (P = tp × pp); the chunk 2,048 below 35 GiB, 8,192 below 160
  GiB, else 16,384;
* **0.5.3 on** (and a name without a version: a current build): the chunk and the CUDA-graph batch ceiling by
  memory class (below 20 GiB: 2,048 and 8; 35: 2,048 and 24 / 80 at TP >= 4; 60: 4,096 and 32 / 160; 160: 8,192 and
  256 / 512; else 16,384 and 512), and ``reserved`` = 512 MiB + 1.5 MiB per chunk token (at least 2,048) + 2 MiB
  per graph batch slot + 1 GiB per 8 ranks, at least 10 GiB on devices above 60 GiB.

Speculative decoding, DP attention and multimodal adjustments of those releases are not modelled, nor the NPU
classes of 0.5.3 on (Ascend devices below 64 GiB: 32,768-token chunks), which read as the GPU classes here. The user's
``--memory-fraction`` wins over all of it (``serve.replica.make_replica``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: MiB in a GiB (SGLang reads device memory in MiB).
_GIB_MIB: Final = 1024.0


@dataclass(frozen=True)
class EngineMemoryDefaults:
    """What an engine's rule gives for one device and layout: the memory fraction, the prefill chunk (tokens) and
    the release regime that was applied (for the replica's note)."""

    memory_fraction: float
    prefill_chunk_tokens: int
    regime: str


def _by_tp(tp: int) -> float:
    for floor, frac in ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87)):
        if tp >= floor:
            return frac
    return 0.88


def sglang_memory_defaults(version: tuple[int, ...] | None, memory_mib: float, tp: int, pp: int = 1
                           ) -> EngineMemoryDefaults:
    """SGLang's default ``mem_fraction_static`` and ``chunked_prefill_size`` (module doc) for a device of
    ``memory_mib`` MiB and a replica of ``tp`` × ``pp`` ranks; ``version`` None is a current build."""
    ranks = tp * pp
    gib = memory_mib / _GIB_MIB
    if version is not None and version < (0, 4, 6):
        return EngineMemoryDefaults(_by_tp(tp), 2048 if memory_mib < 25_000 else 8192, "before 0.4.6: by TP size")
    if version is not None and version < (0, 4, 9):
        frac = _by_tp(tp) if memory_mib <= 81_920 else (memory_mib - 13 * _GIB_MIB) / memory_mib
        return EngineMemoryDefaults(frac, 2048 if memory_mib < 25_000 else 8192, "0.4.6-0.4.8")
    if version is not None and version < (0, 5, 3):
        if gib < 35:
            reserved_gib = 2.8 + ranks / 10
        elif gib < 90:
            reserved_gib = 9.5 + ranks / 2
        elif gib < 160:
            reserved_gib = 12 + ranks / 2
        else:
            reserved_gib = 32.0
        chunk = 2048 if gib < 35 else 8192 if gib < 160 else 16384
        return EngineMemoryDefaults(round((memory_mib - reserved_gib * _GIB_MIB) / memory_mib, 3), chunk,
                                    "0.4.9-0.5.2: reserved memory by device class")
    if gib < 20:
        chunk, graph_bs = 2048, 8
    elif gib < 35:
        chunk, graph_bs = 2048, 24 if tp < 4 else 80
    elif gib < 60:
        chunk, graph_bs = 4096, 32 if tp < 4 else 160
    elif gib < 160:
        chunk, graph_bs = 8192, 256 if tp < 4 else 512
    else:
        chunk, graph_bs = 16384, 512
    reserved = 512 + max(chunk, 2048) * 1.5 + graph_bs * 2 + ranks / 8 * _GIB_MIB
    if gib > 60:
        reserved = max(reserved, 10 * _GIB_MIB)
    return EngineMemoryDefaults(round((memory_mib - reserved) / memory_mib, 3), chunk,
                                "0.5.3 on: reserved for the prefill chunk and CUDA graphs")


#: Rules by the name engines.yaml gives them (``memory_defaults``).
MEMORY_DEFAULT_RULES: Final = {"sglang-server-args": sglang_memory_defaults}
