"""Head-to-head on published training runs: xpuplan against mlsysim 0.3.0, row by row, on the same rows.

    python -m venv /tmp/mlsvenv && /tmp/mlsvenv/bin/pip install mlsysim==0.3.0    # once; never into xpuplan's env
    python benchmarks/mlsysim_compare.py --mlsysim-python /tmp/mlsvenv/bin/python              # tables
    python benchmarks/mlsysim_compare.py --mlsysim-python /tmp/mlsvenv/bin/python --write-doc  # + docs/comparison.md
    python benchmarks/mlsysim_compare.py --mlsysim-python ... --json OUT.json --quiet

Rows: every training row of the held-out file ``benchmarks/data/heldout_training.csv`` and of the public files
``training_public.csv`` and ``training_public_2.csv`` (shipped with the package). For each row:

* xpuplan: the public command line, ``xpuplan validate FILE --json`` (built-in assumptions), once per file;
* mlsysim: its distributed-training model (``DistributedModel.solve``: one model-parallel replica's roofline step
  with a compute-efficiency input, plus DP/TP/EP collectives and the pipeline bubble), run in mlsysim's own
  interpreter (``--mlsysim-python``; mlsysim is never a dependency of xpuplan), on the row's model shape,
  hardware, device count, layout, batch and precision. Every mapping choice is in docs/comparison.md and in
  :func:`map_row`; rows mlsysim cannot express are listed with the reason.

mlsysim predicts tokens per second; it is turned into the row's metric (model or hardware TFLOP/s per device,
MFU, step time, device-hours) with xpuplan's own FLOP-per-token count of the row's model, so the two tools are
judged on their throughput and nothing else. Errors are signed, ``predicted / measured - 1``; a group's figures
are the median and P90 (linear interpolation, as ``xpuplan validate``) of the absolute errors in percent, over
the rows BOTH tools predicted.

The held-out rows are for judging only (benchmarks/data/README.md): nothing here is fitted.
Exit status: 0 done, 2 mlsysim (or its interpreter) missing or unusable.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import re
import statistics
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xpuplan.validate.core import percentile

ROOT = Path(__file__).resolve().parents[1]
HELDOUT_FILE = ROOT / "benchmarks" / "data" / "heldout_training.csv"
PUBLIC_NAMES = ("training_public.csv", "training_public_2.csv")
DOC = ROOT / "docs" / "comparison.md"
DOC_START = "<!-- mlsysim-compare:start (written by benchmarks/mlsysim_compare.py --write-doc) -->"
DOC_END = "<!-- mlsysim-compare:end -->"

#: The mlsysim release this comparison was written against (issue 11 names it).
MLSYSIM_VERSION = "0.3.0"

#: xpuplan catalog id -> mlsysim 0.3.0 hardware registry entry (``mlsysim.Hardware.Cloud.<key>``), for the
#: devices mlsysim ships. Others are built for mlsysim from xpuplan's catalog figures (see :func:`map_hardware`).
#: GB200 is not mapped: mlsysim's ``GB200_NVL72`` is a whole 72-GPU rack, not one accelerator.
MLSYSIM_REGISTRY: dict[str, str] = {
    "nvidia-h100-sxm-80gb": "H100",
    "nvidia-h200-sxm-141gb": "H200",
    "nvidia-b200-180gb": "B200",
    "nvidia-a100-sxm-80gb": "A100",
    "nvidia-a100-sxm-40gb": "A100_40GB",
    "google-tpu-v4": "TPUv4",
    "google-tpu-v5p": "TPUv5p",
    "google-tpu-v6e": "TPUv6",
    "intel-gaudi2": "Gaudi2",
    "intel-gaudi3": "Gaudi3",
    "amd-mi300x": "MI300X",
    "amd-mi325x": "MI325X",
}

#: Training metrics both tools can be judged on (all follow from tokens/s, see :func:`metric_value`).
METRICS = ("tokens_per_s_per_device", "model_tflops_per_device", "hw_tflops_per_device", "mfu", "step_time_s",
           "device_hours")

PRECISIONS = ("bf16", "fp16", "fp8")

#: Largest micro-batch tried when a row gives none (xpuplan's validator tries the same divisors).
MAX_MICRO_BATCH = 32

#: mlsysim's dispatch overhead per step for a device built from xpuplan's catalog: the value mlsysim's own
#: registry gives the same kind of device (TPU entries 0.04 ms); other kinds keep HardwareNode's default.
TPU_DISPATCH_TAX_MS = 0.04


# ----------------------------------------------------------------------------------------------------------
# Pure part: facts in, mlsysim inputs and statistics out (unit-tested without mlsysim: tests/unit/test_mlsysim_compare.py)
# ----------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelFacts:
    """What mlsysim needs of a row's model, and xpuplan's FLOP counts to turn tokens/s into the row's metric."""

    params: float
    active_params: float
    layers: int
    d_model: int
    heads: int
    kv_heads: int | None
    experts: int | None
    top_k: int | None
    model_flops_per_token: float
    hw_flops_per_token: Mapping[str, float]  # by recompute mode: none, selective, full


@dataclass(frozen=True)
class DeviceFacts:
    """A device as xpuplan's catalog gives it (per-direction link rates, bytes and FLOP/s)."""

    id: str
    kind: str
    launch_year: int | None
    peak_flops: Mapping[str, float]  # dense, by precision
    memory_bytes: float
    memory_bw: float
    scale_up_bw: float | None  # per direction, B/s
    scale_out_bw: float | None  # per device, B/s
    domain: int  # scale-up domain the row's devices sit in (xpuplan's Cluster.domain_size)
    tdp_w: float | None


@dataclass
class Case:
    """One row in mlsysim's terms: the hardware, model, fleet and one ``DistributedModel.solve`` call per
    micro-batch candidate (the runner keeps all; :func:`best_candidate` picks)."""

    id: str
    hardware: dict[str, Any]
    model: dict[str, Any]
    fleet: dict[str, Any]
    candidates: list[dict[str, Any]]
    seq_len: int
    n_devices: int
    global_tokens: int
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Skip:
    """A row mlsysim cannot express, and why."""

    id: str
    reason: str


def _int(fields: Mapping[str, Any], col: str) -> int | None:
    v = fields.get(col)
    return None if v is None or v == "" else int(v)


def global_batch_tokens(fields: Mapping[str, Any], default_tokens: float) -> tuple[int, bool]:
    """(global batch in tokens, whether it was inferred). A blank batch gets xpuplan's validator rule: the
    planner default rounded to a multiple of the device count times the sequence length."""
    gbt = fields.get("global_batch_tokens")
    if gbt:
        return int(gbt), False
    n, seq = int(fields["n_devices"]), int(fields["seq_len"])
    return max(1, round(default_tokens / seq / n)) * n * seq, True


def micro_batch_options(per_replica: int, given: int | None) -> list[int]:
    """The micro-batch given, else every divisor of the per-replica batch up to :data:`MAX_MICRO_BATCH`
    (xpuplan's validator tries the same set and keeps the fastest that fits; so does :func:`best_candidate`)."""
    if given:
        return [given]
    return [d for d in range(1, min(per_replica, MAX_MICRO_BATCH) + 1) if per_replica % d == 0]


def node_size(n: int, domain: int) -> int:
    """Accelerators per mlsysim ``Node``: the scale-up domain (NVLink/HCCS server, TPU ICI slice), made to
    divide the device count (mlsysim's Fleet is ``count`` whole nodes)."""
    return math.gcd(n, max(1, domain))


def map_hardware(device: DeviceFacts, *, registry_only: bool = False) -> dict[str, Any] | str:
    """mlsysim hardware for a device: its registry entry when mlsysim ships the device, else a HardwareNode
    built from xpuplan's catalog figures (dense peaks, HBM capacity and bandwidth, per-direction scale-up
    link, TDP). A string is the reason it cannot be expressed."""
    if device.id in MLSYSIM_REGISTRY:
        return {"registry": MLSYSIM_REGISTRY[device.id]}
    if registry_only:
        return f"{device.id} is not in mlsysim {MLSYSIM_VERSION}'s hardware registry (--registry-only)"
    peaks = {p: v for p, v in device.peak_flops.items() if p in PRECISIONS and v}
    sixteen = peaks.get("bf16") or peaks.get("fp16")
    if not sixteen:
        return f"{device.id}: xpuplan's catalog has no 16-bit peak to build an mlsysim device from"
    return {"custom": {
        "name": f"{device.id} (from xpuplan's catalog)",
        "release_year": device.launch_year or 2024,
        "peak_flops": sixteen,
        "precision_flops": peaks,
        "memory_bytes": device.memory_bytes,
        "memory_bw": device.memory_bw,
        "link_bw": device.scale_up_bw,
        "tdp_w": device.tdp_w,
        "dispatch_tax_ms": TPU_DISPATCH_TAX_MS if device.kind.upper() == "TPU" else None,
    }}


def map_row(fields: Mapping[str, Any], model: ModelFacts, device: DeviceFacts, *, default_batch_tokens: float,
            efficiency: float | None = None, overlap: bool = False, registry_only: bool = False) -> Case | Skip:
    """A row -> mlsysim inputs, or the reason mlsysim cannot express it. ``fields``: the row's typed columns
    (blank = None). ``efficiency`` None: mlsysim's own default (``DEFAULT_COMPUTE_EFFICIENCY``); ``overlap``:
    mlsysim's ``overlap_comm`` (off by default, as in ``DistributedModel.solve``)."""
    rid = str(fields["id"])
    metric = fields.get("metric")
    if metric not in METRICS:
        return Skip(rid, f"metric {metric!r} is not a training throughput metric")
    precision = fields.get("precision") or "bf16"
    if precision not in PRECISIONS:
        return Skip(rid, f"precision {precision!r}: mlsysim 0.3.0 has no such training precision (xpuplan's own "
                         "prediction is in `xpuplan validate`)")
    seq = _int(fields, "seq_len")
    if not seq:
        return Skip(rid, "seq_len blank")
    tp, pp = _int(fields, "tp"), _int(fields, "pp")
    if tp is None and pp is None:
        return Skip(rid, "layout not printed (no tp/pp) and no conventional layout from xpuplan to share: mlsysim "
                         "needs a layout")
    cp = _int(fields, "cp") or 1
    if cp > 1:
        return Skip(rid, f"context parallelism (cp={cp}): mlsysim {MLSYSIM_VERSION} has no context/sequence-"
                         "parallel dimension")
    if metric == "device_hours" and not fields.get("train_tokens"):
        return Skip(rid, "device_hours needs train_tokens")
    hw = map_hardware(device, registry_only=registry_only)
    if isinstance(hw, str):
        return Skip(rid, hw)
    tp, pp = tp or 1, pp or 1
    ep = _int(fields, "ep") or 1
    vpp = _int(fields, "vpp") or 1
    n = int(fields["n_devices"])
    if n % (tp * pp * ep):
        return Skip(rid, f"tp*pp*ep = {tp * pp * ep} does not divide {n} devices: mlsysim's EP is a model-parallel "
                         "dimension of its own (dp = n/(tp*pp*ep)), not carved out of DP as in Megatron")
    notes: list[str] = []
    gbt, inferred = global_batch_tokens(fields, default_batch_tokens)
    if inferred:
        notes.append("global batch: xpuplan's default")
    global_seqs = max(1, gbt // seq)
    dp_row = _int(fields, "dp") or n // (tp * pp)
    per_replica = max(1, global_seqs // dp_row)
    zero = _int(fields, "zero_stage")
    if zero is None:
        zero = 3 if "fsdp" in str(fields.get("framework") or "").casefold() else 1
        notes.append(f"zero_stage {zero} inferred as xpuplan does")
    recompute = fields.get("recompute") or "selective"
    candidates = []
    for mb in micro_batch_options(per_replica, _int(fields, "micro_batch")):
        m = max(1, per_replica // mb)
        candidates.append({"micro_batch": mb, "kwargs": {
            "batch_size": global_seqs, "precision": precision, "tp_size": tp, "pp_size": pp, "ep_size": ep,
            "v_stages": vpp, "microbatch_count": m if pp > 1 else 1,
            "gradient_accumulation_steps": 1 if pp > 1 else m, "zero_stage": min(zero, 3),
            "activation_recomputation": recompute == "full", "overlap_comm": overlap, "seq_len": seq,
            **({"efficiency": efficiency} if efficiency is not None else {}),
        }})
    per_node = node_size(n, device.domain)
    moe = bool(model.experts)
    mdict: dict[str, Any] = {
        "params": model.params, "layers": model.layers, "hidden_dim": model.d_model, "heads": model.heads,
        "kv_heads": model.kv_heads,
    }
    if moe:
        mdict.update(active_params=model.active_params, experts=model.experts, top_k=model.top_k or 1)
    fleet = {"per_node": per_node, "nodes": n // per_node, "fabric_bw": device.scale_out_bw,
             "intra_bw": device.scale_up_bw}
    return Case(rid, hw, mdict, fleet, candidates, seq, n, gbt, notes)


_REC = {"rnone": "none", "rsel": "selective", "rfull": "full"}


def parse_plan_key(key: str) -> dict[str, Any]:
    """xpuplan's plan key (``tp8-pp1-vpp1-dp8-cp1-ep1-sp1-z1-rsel-mb2-ga64-fp8``) as row columns."""
    out: dict[str, Any] = {}
    for part in key.split("-"):
        if part in _REC:
            out["recompute"] = _REC[part]
            continue
        m = re.fullmatch(r"(tp|pp|vpp|dp|cp|ep|sp|z|mb)(\d+)", part)
        if m:
            col = {"z": "zero_stage", "mb": "micro_batch"}.get(m.group(1), m.group(1))
            out[col] = int(m.group(2))
    if "tp" not in out or "pp" not in out:
        raise ValueError(f"not a plan key: {key!r}")
    return out


def best_candidate(results: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """Feasible first, then the highest throughput (xpuplan's validator's rule for a blank micro-batch)."""
    ok = [r for r in results if r.get("samples_per_s")]
    if not ok:
        return None
    return max(ok, key=lambda r: (bool(r.get("feasible")), r["samples_per_s"]))


def efficiency_grid(low: float = 0.20, high: float = 0.80, step: float = 0.02) -> list[float | None]:
    """mlsysim compute efficiencies tried by ``--fit-efficiency``."""
    n = round((high - low) / step)
    return [round(low + i * step, 4) for i in range(n + 1)]


def expand_efficiency(case: Case, grid: list[float | None]) -> Case:
    """``case`` with every micro-batch candidate repeated for each efficiency of ``grid`` (None: leave the
    case's own setting, i.e. mlsysim's default unless ``--efficiency`` was given)."""
    if grid == [None]:
        return case
    cands = [{**c, "kwargs": {**c["kwargs"], "efficiency": e}} for e in grid for c in case.candidates]
    return Case(case.id, case.hardware, case.model, case.fleet, cands, case.seq_len, case.n_devices,
                case.global_tokens, list(case.notes))


def choose_efficiency(errors_by_efficiency: Mapping[float, list[float]], default: float) -> float:
    """The efficiency whose errors have the lowest median |error| (ties: the one nearest mlsysim's default).
    Used with the public files' errors only: the held-out rows are never fitted to."""
    scored = [(statistics.median(abs(e) for e in errs), abs(eff - default), eff)
              for eff, errs in errors_by_efficiency.items() if errs]
    if not scored:
        raise ValueError("no errors to choose an efficiency from")
    return min(scored)[2]


def metric_value(metric: str, tokens_per_s_per_device: float, *, model: ModelFacts, recompute: str,
                 peak_flops: float, n_devices: int, global_tokens: float, train_tokens: float | None) -> float:
    """The row's metric from a throughput, with xpuplan's FLOP-per-token counts (the same conversion for both
    tools, so only the throughput prediction differs)."""
    t = tokens_per_s_per_device
    if metric == "tokens_per_s_per_device":
        return t
    if metric == "model_tflops_per_device":
        return t * model.model_flops_per_token / 1e12
    if metric == "hw_tflops_per_device":
        return t * model.hw_flops_per_token[recompute] / 1e12
    if metric == "mfu":
        return t * model.model_flops_per_token / peak_flops
    if metric == "step_time_s":
        return global_tokens / (t * n_devices)
    if metric == "device_hours":
        if not train_tokens:
            raise ValueError("device_hours needs train_tokens")
        return train_tokens / t / 3600.0
    raise ValueError(f"unknown metric {metric!r}")




def abs_stats(errors: list[float]) -> dict[str, float | int | None]:
    """n, median and P90 of |error| in percent (errors as fractions)."""
    if not errors:
        return {"n": 0, "median_abs_pct": None, "p90_abs_pct": None}
    a = [abs(e) * 100.0 for e in errors]
    return {"n": len(a), "median_abs_pct": statistics.median(a), "p90_abs_pct": percentile(a, 90)}


def in_recent_subset(hardware: str) -> bool:
    """Issue 11's subset "recent TPU, Ascend and H100 training runs": TPU v5e/v5p/v6e (and later), any
    Ascend, H100 (not H200/H800: other memory or links)."""
    h = hardware.casefold()
    return (bool(re.match(r"google-tpu-v([5-9]|\d\d)", h)) or h.startswith("huawei-ascend")
            or h.startswith("nvidia-h100"))


@dataclass
class CompareRow:
    """One row with both tools' answers."""

    id: str
    group: str  # held-out | public
    hardware: str
    family: str
    metric: str
    measured: float
    precision: str = "bf16"
    mlsysim: float | None = None
    xpuplan: float | None = None
    mlsysim_feasible: bool | None = None
    mlsysim_reason: str | None = None
    xpuplan_reason: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def mlsysim_error(self) -> float | None:
        return None if self.mlsysim is None else self.mlsysim / self.measured - 1.0

    @property
    def xpuplan_error(self) -> float | None:
        return None if self.xpuplan is None else self.xpuplan / self.measured - 1.0

    @property
    def both(self) -> bool:
        return self.mlsysim is not None and self.xpuplan is not None


def group_stats(rows: list[CompareRow]) -> list[dict[str, Any]]:
    """Median/P90 |error| of both tools over the rows both predicted: per group (held-out, public), the
    issue's subset per group, and per hardware family per group."""
    both = [r for r in rows if r.both]
    keyed: dict[str, list[CompareRow]] = {}
    for grp in dict.fromkeys(r.group for r in rows):
        g = [r for r in both if r.group == grp]
        keyed[f"{grp}: all"] = g
        recent = [r for r in g if in_recent_subset(r.hardware)]
        keyed[f"{grp}: recent TPU + Ascend + H100"] = recent
        keyed[f"{grp}: recent TPU + Ascend + H100, 16-bit rows"] = [r for r in recent if r.precision != "fp8"]
        keyed[f"{grp}: recent TPU + Ascend + H100, fp8 rows"] = [r for r in recent if r.precision == "fp8"]
        for fam in sorted({r.family for r in g}):
            keyed[f"{grp}: {fam}"] = [r for r in g if r.family == fam]
    out = []
    for name, g in keyed.items():
        out.append({"group": name, "n": len(g),
                    "mlsysim": abs_stats([r.mlsysim_error for r in g if r.mlsysim_error is not None]),
                    "xpuplan": abs_stats([r.xpuplan_error for r in g if r.xpuplan_error is not None])})
    return out


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _err(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def render_markdown(rows: list[CompareRow], stats: list[dict[str, Any]], meta: Mapping[str, Any]) -> str:
    """The results block of docs/comparison.md."""
    out = [f"Run {meta['date']} with mlsysim {meta['mlsysim_version']} (efficiency "
           f"{meta['efficiency']}: {meta.get('efficiency_note', '')}; overlap_comm {meta['overlap']}) and xpuplan "
           f"{meta['xpuplan_version']} "
           f"(commit `{meta['commit']}`). Command: `{meta['command']}`.", "",
           "### Summary: |error| over the rows both tools predicted", "",
           "| group | rows | mlsysim median | mlsysim P90 | xpuplan median | xpuplan P90 |",
           "|---|---:|---:|---:|---:|---:|"]
    for s in stats:
        if s["n"] == 0:
            continue
        m, x = s["mlsysim"], s["xpuplan"]
        out.append(f"| {s['group']} | {s['n']} | {_pct(m['median_abs_pct'])}% | {_pct(m['p90_abs_pct'])}% | "
                   f"{_pct(x['median_abs_pct'])}% | {_pct(x['p90_abs_pct'])}% |")
    out += ["", "### Every row", "",
            "`fits`: mlsysim's own memory check (when it says no, it prices memory traffic at the host-link "
            "rate; its number is kept, as xpuplan keeps its own).", "",
            "| id | group | hardware | metric | measured | mlsysim | err | fits | xpuplan | err |",
            "|---|---|---|---|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        if r.mlsysim is None:
            continue
        fits = "-" if r.mlsysim_feasible is None else ("yes" if r.mlsysim_feasible else "no")
        out.append(f"| {r.id} | {r.group} | {r.hardware} | {r.metric} | {_num(r.measured)} | {_num(r.mlsysim)} | "
                   f"{_err(r.mlsysim_error)} | {fits} | {_num(r.xpuplan)} | {_err(r.xpuplan_error)} |")
    skipped = [r for r in rows if r.mlsysim is None]
    if skipped:
        out += ["", "### Rows mlsysim cannot express (not in the summary)", "", "| id | group | hardware | reason |",
                "|---|---|---|---|"]
        for r in skipped:
            out.append(f"| {r.id} | {r.group} | {r.hardware} | {(r.mlsysim_reason or '').replace('|', '/')} |")
    xp_missing = [r for r in rows if r.mlsysim is not None and r.xpuplan is None]
    if xp_missing:
        out += ["", "### Rows xpuplan did not predict (not in the summary)", ""]
        out += [f"- {r.id}: {r.xpuplan_reason}" for r in xp_missing]
    return "\n".join(out) + "\n"


def replace_block(doc: str, block: str) -> str:
    """``doc`` with the text between :data:`DOC_START` and :data:`DOC_END` replaced by ``block`` (the markers
    are appended when missing)."""
    if DOC_START in doc and DOC_END in doc:
        head, rest = doc.split(DOC_START, 1)
        _, tail = rest.split(DOC_END, 1)
        return f"{head}{DOC_START}\n{block}{DOC_END}{tail}"
    return f"{doc.rstrip()}\n\n{DOC_START}\n{block}{DOC_END}\n"


# ----------------------------------------------------------------------------------------------------------
# mlsysim side: a small program run by mlsysim's own interpreter (JSON in on stdin, JSON out on stdout)
# ----------------------------------------------------------------------------------------------------------

RUNNER = r'''
import json, sys, warnings
warnings.simplefilter("ignore")
try:
    import mlsysim
    from mlsysim import Hardware
    from mlsysim.core.units import Q_
    from mlsysim.engine import calibration as cal
    from mlsysim.engine.solvers.distributed import DistributedModel
    from mlsysim.hardware.types import ComputeCore, HardwareNode, IOInterconnect, MemoryHierarchy
    from mlsysim.models.types import SparseTransformerWorkload, TransformerWorkload
    from mlsysim.systems.types import Fleet, NetworkFabric, Node
except Exception as exc:  # noqa: BLE001
    print(json.dumps({"import_error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)

def hardware(spec):
    if "registry" in spec:
        return getattr(Hardware.Cloud, spec["registry"])
    c = spec["custom"]
    kw = {}
    if c.get("link_bw"):
        kw["nvlink"] = IOInterconnect(name="scale-up", bandwidth=Q_(c["link_bw"], "byte/s"), direction="per_direction")
    if c.get("tdp_w"):
        kw["tdp"] = Q_(c["tdp_w"], "W")
    if c.get("dispatch_tax_ms") is not None:
        kw["dispatch_tax"] = Q_(c["dispatch_tax_ms"], "ms")
    return HardwareNode(
        name=c["name"], release_year=c["release_year"],
        compute=ComputeCore(peak_flops=Q_(c["peak_flops"], "flop/s"),
                            precision_flops={k: Q_(v, "flop/s") for k, v in c["precision_flops"].items()}),
        memory=MemoryHierarchy(capacity=Q_(c["memory_bytes"], "byte"), bandwidth=Q_(c["memory_bw"], "byte/s")), **kw)

def model(m):
    common = dict(name="row model", architecture="Transformer", parameters=Q_(m["params"], "count"),
                  layers=m["layers"], hidden_dim=m["hidden_dim"], heads=m["heads"], kv_heads=m.get("kv_heads"))
    if m.get("experts"):
        return SparseTransformerWorkload(active_parameters=Q_(m["active_params"], "count"), experts=m["experts"],
                                         active_experts_per_token=m["top_k"], **common)
    return TransformerWorkload(**common)

def fleet(acc, f):
    intra = acc.nvlink.bandwidth_per_direction if acc.nvlink is not None else Q_(f["intra_bw"] or 0, "byte/s")
    node = Node(name="node", accelerator=acc, accelerators_per_node=f["per_node"], intra_node_bw=intra)
    fab = f["fabric_bw"] or cal.FALLBACK_INTERCONNECT_BANDWIDTH_GB_S * 1e9
    return Fleet(name="fleet", node=node, count=f["nodes"], fabric=NetworkFabric(name="fabric", bandwidth=Q_(fab, "byte/s")))

cases = json.load(sys.stdin)
out = {"version": mlsysim.__version__, "default_efficiency": float(cal.DEFAULT_COMPUTE_EFFICIENCY), "results": {}}
solver = DistributedModel()
for case in cases:
    res = []
    try:
        acc = hardware(case["hardware"]); wl = model(case["model"]); fl = fleet(acc, case["fleet"])
    except Exception as exc:  # noqa: BLE001
        out["results"][case["id"]] = [{"error": f"{type(exc).__name__}: {exc}"}]
        continue
    for cand in case["candidates"]:
        try:
            r = solver.solve(wl, fl, **cand["kwargs"])
            res.append({"micro_batch": cand["micro_batch"], "efficiency": cand["kwargs"].get("efficiency"),
                        "samples_per_s": r.effective_throughput.m_as("1/s"),
                        "step_s": r.step_latency_total.m_as("s"), "feasible": bool(r.node_profile.feasible),
                        "mfu": float(r.node_profile.mfu), "dp": r.parallelism["dp"]})
        except Exception as exc:  # noqa: BLE001
            res.append({"micro_batch": cand["micro_batch"], "efficiency": cand["kwargs"].get("efficiency"),
                        "error": f"{type(exc).__name__}: {exc}"})
    out["results"][case["id"]] = res
print(json.dumps(out))
'''


class MlsysimUnavailable(RuntimeError):
    """mlsysim (or the interpreter meant to run it) cannot be used."""


def check_mlsysim(python: str) -> str:
    """mlsysim's version as ``python`` imports it; :class:`MlsysimUnavailable` when it cannot."""
    try:
        proc = subprocess.run([python, "-c", "import mlsysim; print(mlsysim.__version__)"], capture_output=True,
                              text=True, check=False)
    except OSError as exc:
        raise MlsysimUnavailable(f"cannot run {python!r}: {exc}") from exc
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise MlsysimUnavailable(f"{python} cannot import mlsysim ({last})")
    return proc.stdout.strip()


def run_mlsysim(python: str, cases: list[Case]) -> dict[str, Any]:
    """Run :data:`RUNNER` in mlsysim's interpreter on every case; its answer as JSON."""
    payload = json.dumps([{"id": c.id, "hardware": c.hardware, "model": c.model, "fleet": c.fleet,
                           "candidates": c.candidates} for c in cases])
    try:
        proc = subprocess.run([python, "-c", RUNNER], input=payload, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise MlsysimUnavailable(f"cannot run {python!r}: {exc}") from exc
    if proc.returncode != 0:
        raise MlsysimUnavailable(f"{python} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    try:
        ans = json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError) as exc:
        raise MlsysimUnavailable(f"{python} did not answer JSON: {proc.stdout[-500:]} {proc.stderr[-1000:]}") from exc
    if "import_error" in ans:
        raise MlsysimUnavailable(f"mlsysim cannot be imported by {python}: {ans['import_error']}")
    return ans


# ----------------------------------------------------------------------------------------------------------
# xpuplan side and the driver
# ----------------------------------------------------------------------------------------------------------

def _facts(vrow: Any) -> tuple[ModelFacts, DeviceFacts, float]:
    """ModelFacts, DeviceFacts and the peak FLOP/s for the row's precision, from xpuplan's model and catalog."""
    from xpuplan.perf.flops import flops_training_per_token
    from xpuplan.perf.params import params_active, params_total
    from xpuplan.train.cluster import Cluster
    from xpuplan.validate.rows import model_from_row

    arch = model_from_row(vrow)
    seq = vrow.get("seq_len") or 2048
    fl = {r: flops_training_per_token(arch, seq, r, causal=False) for r in ("none", "selective", "full")}
    moe = arch.moe
    mf = ModelFacts(params=float(params_total(arch)), active_params=float(params_active(arch)),
                    layers=arch.n_layers, d_model=arch.d_model, heads=arch.n_heads, kv_heads=arch.n_kv_heads,
                    experts=moe.n_routed_experts if moe else None, top_k=moe.top_k if moe else None,
                    model_flops_per_token=fl["none"].model, hw_flops_per_token={k: v.hardware for k, v in fl.items()})
    cluster = Cluster.from_catalog(vrow.hardware, vrow.n_devices)
    d = cluster.device
    peaks: dict[str, float] = {}
    for p in PRECISIONS:
        try:
            peaks[p] = float(d.peak_flops(p))
        except Exception:  # noqa: BLE001  (the device lists no such peak)
            continue
    df = DeviceFacts(id=d.id, kind=d.kind, launch_year=d.launch_year, peak_flops=peaks,
                     memory_bytes=float(d.memory_bytes), memory_bw=float(d.memory_bandwidth),
                     scale_up_bw=float(d.scale_up_bandwidth) if d.scale_up_bandwidth else None,
                     scale_out_bw=float(d.scale_out_bandwidth) if d.scale_out_bandwidth else None,
                     domain=int(cluster.domain_size), tdp_w=float(d.tdp_w) if d.tdp_w else None)
    return mf, df, peaks.get(vrow.precision or "bf16") or peaks.get("bf16") or 0.0


def xpuplan_answers(path: Path) -> dict[str, dict[str, Any]]:
    """``xpuplan validate PATH --json`` (this interpreter), rows by id."""
    cmd = [sys.executable, "-m", "xpuplan", "validate", str(path), "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr.strip() or proc.stdout.strip()}")
    return {r["id"]: r for r in json.loads(proc.stdout)["rows"]}


def _files(include_public: bool) -> list[tuple[str, Path]]:
    files = [("held-out", HELDOUT_FILE)]
    if include_public:
        from xpuplan.validate.data_files import public_file
        files += [("public", public_file(n)) for n in PUBLIC_NAMES]
    return files


def compare(args: argparse.Namespace) -> tuple[list[CompareRow], dict[str, Any]]:
    from xpuplan.errors import UserInputError
    from xpuplan.validate import hardware_family
    from xpuplan.validate.rows import read_rows
    from xpuplan.workload.training import DEFAULT_GLOBAL_BATCH_TOKENS

    rows: list[CompareRow] = []
    cases: dict[str, tuple[Case, CompareRow, ModelFacts, float, Any]] = {}
    for group, path in _files(not args.no_public):
        xp = xpuplan_answers(path)
        for vrow in read_rows(path):
            if vrow.kind != "train":
                continue
            fields = {c: vrow.get(c) for c in vrow.raw}
            fields.update(id=vrow.id, metric=vrow.metric, precision=vrow.precision, n_devices=vrow.n_devices)
            cr = CompareRow(vrow.id, group, vrow.hardware, hardware_family(vrow.hardware), vrow.metric, vrow.value,
                            vrow.precision or "bf16")
            x = xp.get(vrow.id, {})
            cr.xpuplan, cr.xpuplan_reason = x.get("predicted"), x.get("reason")
            det = x.get("details") or {}
            conv = det.get("conventional") or ({"plan": det["plan"], "predicted": x.get("predicted")}
                                               if "best_plan" in det and det.get("plan") else {})
            if vrow.get("tp") is None and vrow.get("pp") is None and conv.get("plan"):
                # no printed layout: both tools on the conventional layout xpuplan's validator reports (its
                # headline prediction; older versions gave it in details.conventional)
                fields.update(parse_plan_key(conv["plan"]))
                cr.group = f"{group}, layout not printed"
                cr.xpuplan = conv.get("predicted")
                cr.notes.append(f"layout not printed: both on xpuplan's conventional plan {conv['plan']}")
            rows.append(cr)
            try:
                mf, df, peak = _facts(vrow)
            except (UserInputError, ValueError) as exc:
                cr.mlsysim_reason = f"model or hardware not buildable: {exc}"
                continue
            case = map_row(fields, mf, df, default_batch_tokens=DEFAULT_GLOBAL_BATCH_TOKENS,
                           efficiency=args.efficiency, overlap=args.overlap, registry_only=args.registry_only)
            if isinstance(case, Skip):
                cr.mlsysim_reason = case.reason
                continue
            cr.notes += case.notes
            if "custom" in case.hardware:
                cr.notes.append("device built from xpuplan's catalog")
            cases[f"{group}/{vrow.id}"] = (case, cr, mf, peak, vrow)
    for key, (case, _, _, _, _) in cases.items():
        case.id = key  # ids are unique per file, not across files
    grid = efficiency_grid() if args.fit_efficiency else [args.efficiency]
    ans = run_mlsysim(args.mlsysim_python, [expand_efficiency(c, grid) for c, *_ in cases.values()])

    def predict(eff: float | None) -> None:
        for key, (case, cr, mf, peak, vrow) in cases.items():
            results = [r for r in ans["results"].get(key, []) if r.get("efficiency") == eff or "micro_batch" not in r]
            best = best_candidate(results)
            cr.mlsysim = cr.mlsysim_feasible = None
            if best is None:
                errs = "; ".join(sorted({r.get("error", "no throughput") for r in results})) or "no answer"
                cr.mlsysim_reason = f"mlsysim error: {errs}"
                continue
            tps = best["samples_per_s"] * case.seq_len / case.n_devices
            cr.mlsysim = metric_value(vrow.metric, tps, model=mf, recompute=vrow.get("recompute") or "selective",
                                      peak_flops=peak, n_devices=vrow.n_devices, global_tokens=case.global_tokens,
                                      train_tokens=vrow.get("train_tokens"))
            cr.mlsysim_feasible = bool(best.get("feasible"))
            cr.notes = [n for n in cr.notes if not n.startswith("micro-batch ")]
            if len(results) > 1:
                cr.notes.append(f"micro-batch {best['micro_batch']} (fastest of {len(results)})")

    meta: dict[str, Any] = {"mlsysim_version": ans["version"], "overlap": args.overlap}
    if args.fit_efficiency:
        by_eff: dict[float, list[float]] = {}
        for eff in grid:
            assert eff is not None
            predict(eff)
            by_eff[eff] = [r.mlsysim_error for _, r, *_ in cases.values()
                           if r.group.startswith("public") and r.mlsysim_error is not None]
        chosen = choose_efficiency(by_eff, ans["default_efficiency"])
        predict(chosen)
        meta.update(efficiency=chosen, efficiency_note="fitted on the public files (lowest median |error|)")
    else:
        predict(args.efficiency)
        eff = args.efficiency if args.efficiency is not None else ans["default_efficiency"]
        meta.update(efficiency=eff, efficiency_note="mlsysim's default" if args.efficiency is None else "given")
    return rows, meta


def _git_commit() -> str:
    proc = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    return proc.stdout.strip() or "unknown"


def _print(rows: list[CompareRow], stats: list[dict[str, Any]], quiet: bool) -> None:
    if not quiet:
        print(f"{'id':<22} {'group':<27} {'hardware':<24} {'metric':<24} {'measured':>10} {'mlsysim':>10} "
              f"{'err':>8} {'fits':>4} {'xpuplan':>10} {'err':>8}")
        for r in rows:
            if r.mlsysim is None:
                continue
            fits = "-" if r.mlsysim_feasible is None else ("y" if r.mlsysim_feasible else "n")
            print(f"{r.id:<22} {r.group:<27} {r.hardware:<24} {r.metric:<24} {_num(r.measured):>10} "
                  f"{_num(r.mlsysim):>10} {_err(r.mlsysim_error):>8} {fits:>4} {_num(r.xpuplan):>10} "
                  f"{_err(r.xpuplan_error):>8}")
        print("\nnot expressible in mlsysim:")
        for r in rows:
            if r.mlsysim is None:
                print(f"  {r.id:<22} {r.group:<27} {r.hardware:<24} {r.mlsysim_reason}")
        print()
    print(f"{'group (rows both predicted)':<52} {'n':>3}   mlsysim med/P90    xpuplan med/P90")
    for s in stats:
        if s["n"]:
            m, x = s["mlsysim"], s["xpuplan"]
            print(f"{s['group']:<52} {s['n']:>3}   {_pct(m['median_abs_pct']):>6}% {_pct(m['p90_abs_pct']):>6}%   "
                  f"{_pct(x['median_abs_pct']):>6}% {_pct(x['p90_abs_pct']):>6}%")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mlsysim-python", default=None,
                    help="interpreter of a venv with mlsysim==0.3.0 installed (default: this one, if it has it)")
    ap.add_argument("--efficiency", type=float, default=None,
                    help="mlsysim compute efficiency (default: mlsysim's own DEFAULT_COMPUTE_EFFICIENCY, 0.5)")
    ap.add_argument("--fit-efficiency", action="store_true",
                    help="give mlsysim the single efficiency with the lowest median |error| on the PUBLIC files "
                         "(its one knob, fitted as xpuplan's families are), then judge both on every row")
    ap.add_argument("--overlap", action="store_true", help="mlsysim overlap_comm=True (default: off, its default)")
    ap.add_argument("--registry-only", action="store_true",
                    help="only devices in mlsysim's own registry (no devices built from xpuplan's catalog)")
    ap.add_argument("--no-public", action="store_true", help="held-out file only")
    ap.add_argument("--json", metavar="OUT", help="write every row and group figure as JSON")
    ap.add_argument("--write-doc", action="store_true", help=f"rewrite the results block of {DOC.relative_to(ROOT)}")
    ap.add_argument("--quiet", action="store_true", help="summaries only")
    args = ap.parse_args(argv)
    if args.fit_efficiency and (args.efficiency is not None or args.no_public):
        print("--fit-efficiency fits on the public files: not with --efficiency or --no-public", file=sys.stderr)
        return 2
    if args.efficiency is not None and not 0 < args.efficiency <= 1:
        print("--efficiency must be in (0, 1]", file=sys.stderr)
        return 2
    args.mlsysim_python = args.mlsysim_python or sys.executable
    try:
        check_mlsysim(args.mlsysim_python)
        rows, meta = compare(args)
    except MlsysimUnavailable as exc:
        print(f"mlsysim is not usable: {exc}\nInstall it in its own venv and point --mlsysim-python at it:\n"
              f"  python3 -m venv /tmp/mlsvenv && /tmp/mlsvenv/bin/pip install mlsysim=={MLSYSIM_VERSION}\n"
              f"  python benchmarks/mlsysim_compare.py --mlsysim-python /tmp/mlsvenv/bin/python", file=sys.stderr)
        return 2
    import xpuplan

    cmd = "python benchmarks/mlsysim_compare.py --mlsysim-python PY" + (
        f" --efficiency {args.efficiency}" if args.efficiency is not None else "") + (
        " --overlap" if args.overlap else "") + (" --fit-efficiency" if args.fit_efficiency else "") + (" --registry-only" if args.registry_only else "") + (
        " --no-public" if args.no_public else "") + " --write-doc"
    meta.update(date=datetime.date.today().isoformat(), xpuplan_version=xpuplan.__version__, commit=_git_commit(),
                command=cmd)
    if meta["mlsysim_version"] != MLSYSIM_VERSION:
        print(f"warning: mlsysim {meta['mlsysim_version']}, this comparison was written for {MLSYSIM_VERSION}",
              file=sys.stderr)
    stats = group_stats(rows)
    _print(rows, stats, args.quiet)
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "groups": stats, "rows": [
            {**asdict(r), "mlsysim_error": r.mlsysim_error, "xpuplan_error": r.xpuplan_error} for r in rows]},
            indent=1) + "\n")
    if args.write_doc:
        DOC.write_text(replace_block(DOC.read_text() if DOC.exists() else "# xpuplan vs mlsysim\n",
                                     render_markdown(rows, stats, meta)))
        print(f"\nwrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
