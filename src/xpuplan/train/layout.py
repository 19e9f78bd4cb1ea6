"""The plan fields every phase of the step model reads, as float arrays, computed once per evaluation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xpuplan.models.arch import ModelArch
from xpuplan.workload.vocabulary import RECOMPUTE_MODES

_FULL = RECOMPUTE_MODES.index("full")
_SELECTIVE = RECOMPUTE_MODES.index("selective")
_OFFLOAD = RECOMPUTE_MODES.index("offload")
_LAYER_OFFLOAD = RECOMPUTE_MODES.index("layer_offload")
_PARTIAL = RECOMPUTE_MODES.index("partial")


@dataclass(frozen=True)
class Layout:
    """Per plan: sizes as floats, recomputation (``full_rec``: the share of the layers whose whole forward re-runs
    in the backward, 1 for full and offload plans, the recomputed share for partial ones; ``offload``: its kept layer inputs wait on the host; ``layer_off``: whole
    layers' activations wait on the host, no recomputation), layers on the busiest stage (``Ls`` = ceil(L/pp);
    ``layers_stage`` = L without PP), passes over each layer (forward, backward, recomputed forward),
    and the job's sequence length ``s`` and hidden size ``h``."""

    tp: np.ndarray
    pp: np.ndarray
    dp: np.ndarray
    cp: np.ndarray
    vpp: np.ndarray
    mb: np.ndarray
    m: np.ndarray
    sp: np.ndarray
    full_rec: np.ndarray
    sel_rec: np.ndarray
    offload: np.ndarray
    layer_off: np.ndarray
    multi_stage: np.ndarray
    Ls: np.ndarray
    layers_stage: np.ndarray
    passes: np.ndarray
    s: float
    h: float

    @classmethod
    def of(cls, p: object, model: ModelArch, seq_len: int, recompute_layers: np.ndarray | None = None) -> Layout:
        """From :class:`~xpuplan.train.arrays.PlanArrays` ``p``; ``recompute_layers``: the layers of the busiest stage
        each ``partial`` plan recomputes (``perf.memory.partial_recompute_layers``; None: none)."""
        pp = p.pp.astype(float)  # type: ignore[attr-defined]
        rec = p.rec  # type: ignore[attr-defined]
        offload = rec == _OFFLOAD
        multi = p.pp > 1  # type: ignore[attr-defined]
        Ls = np.ceil(model.n_layers / pp)
        stage = np.where(multi, Ls, float(model.n_layers))
        share = (np.zeros_like(pp) if recompute_layers is None
                 else np.asarray(recompute_layers, dtype=float) / np.maximum(stage, 1.0))
        full_rec = np.where((rec == _FULL) | offload, 1.0, np.where(rec == _PARTIAL, share, 0.0))
        return cls(
            tp=p.tp.astype(float), pp=pp, dp=p.dp.astype(float), cp=p.cp.astype(float),  # type: ignore[attr-defined]
            vpp=p.vpp.astype(float), mb=p.mb.astype(float), m=p.ga.astype(float),  # type: ignore[attr-defined]
            sp=p.sp.astype(bool), full_rec=full_rec, sel_rec=rec == _SELECTIVE, offload=offload, layer_off=rec == _LAYER_OFFLOAD, multi_stage=multi,  # type: ignore[attr-defined]
            Ls=Ls, layers_stage=stage, passes=2.0 + full_rec,
            s=float(seq_len), h=float(model.d_model),
        )
