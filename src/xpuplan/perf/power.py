"""Device power: draw versus busy fraction and kind of work, and a power-cap (DVFS) what-if.

Pure functions over explicit arguments; units in the names (W, J, s). The model, per device:

* **Idle** draw ``P_idle = idle_fraction * TDP``. ``idle_fraction`` is a named assumption per
  device kind (``IDLE_FRACTION_OF_TDP``), sourced below.
* **Busy** draw depends on what the device does. Compute-bound work (training GEMMs, prefill)
  draws ``compute_bound_draw_fraction`` of TDP; memory-bound work (autoregressive decode)
  leaves the tensor cores waiting on HBM and draws ``memory_bound_draw_fraction`` of TDP
  (``WORK_DRAW_FRACTION``). For a mix in which a share ``c`` of busy *time* is compute-bound:
  ``P_busy = c * P_compute + (1 - c) * P_memory``.
* **Average** over a period with busy fraction ``u``: ``P_avg = P_idle + u * (P_busy - P_idle)``.
* **Power cap / DVFS.** Above idle the draw is dynamic power, ``P_dyn = a * C * V^2 * f``; within
  the DVFS range the voltage tracks the clock, so ``P_dyn ∝ f^k`` with ``k`` about 3
  (``DVFS_EXPONENT``). Under a cap ``P_cap`` below a phase's draw ``P``, the clock falls to
  ``r = ((P_cap - P_idle) / (P - P_idle)) ** (1/k)`` (never below ``min_clock_fraction``).
  Compute-bound time stretches by ``1/r``; memory-bound time is assumed unchanged (the memory
  clock is not lowered by an SM power cap, and decode is limited by HBM bandwidth), only its
  draw is clipped to the cap. Energy is power times the stretched time.

With the defaults (idle 10% of TDP, k = 3) a compute-bound H100 capped from 700 W to 525 W runs at
~0.90 of its clock, ~11% slower, and uses ~16% less energy — within the 15-20% savings the seed
guide claims for DVFS ("实测节能15%-20%", guide 004). The public measurement we cite is lower:
McDonald et al. (2022) report an average 13.7% energy reduction when capping V100s from 250 W to
150 W for large language-model training. Every parameter is overridable per call.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from xpuplan.errors import UserInputError


@dataclass(frozen=True)
class PowerAssumption:
    """One named, sourced assumption of the power model (dimensionless unless ``unit`` says)."""

    name: str
    value: float
    low: float
    high: float
    source: str
    trust: str
    note: str = ""
    unit: str = "1"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "low": self.low,
            "high": self.high,
            "unit": self.unit,
            "source": self.source,
            "trust": self.trust,
            "note": self.note,
        }


_SRC_PARKING = (
    "Vadari, 'The Model Parking Tax: Quantifying the Hidden Energy Cost of Always-On GPU Model Deployment', "
    "arXiv:2605.23918, 2026-05, https://arxiv.org/abs/2605.23918 (H100/A100/L40S idle measurements)"
)
_SRC_NEMUL = (
    "Nemul AI, 'The Hidden Cost: GPU Electricity Expense Per Training Run', 2026-06, "
    "https://nemulai.com/blog/gpu-electricity-cost-per-training-run ('an idle GPU still draws 15% of TDP')"
)
_SRC_CONSERVE = (
    "ConserveMode, 'H200 GPU Idle State Validation - RunPod Platform', 2026, "
    "https://conservemode.com/case-studies.html (dormant H200 73.65 W average by nvidia-smi)"
)
_SRC_DECODE = (
    "Ma, Afzal, Eitzinger, Wellein, 'The Illusion of Power Capping in LLM Decode', arXiv:2605.11999, 2026-05, "
    "https://arxiv.org/abs/2605.11999 ('decode draws only 137-300 W on a 700 W GPU' (H200); HBM-bound)"
)
_SRC_LATIF = (
    "Latif et al., 'Single-Node Power Demand During AI Training: Measurements on an 8-GPU NVIDIA H100 System', "
    "IEEE Access 13, 2025, https://nyuscholars.nyu.edu/en/publications/single-node-power-demand-during-ai-training-"
    "measurements-on-an-8--2 (max observed 8.4 kW, 18% below the rated 10.2 kW)"
)
_SRC_CMOS = (
    "CMOS dynamic power P = a*C*V^2*f with V roughly proportional to f in the DVFS range, "
    "e.g. 'Processor power dissipation', Wikipedia, https://en.wikipedia.org/wiki/Processor_power_dissipation"
)
_SRC_MIT = (
    "McDonald et al., 'Great Power, Great Responsibility: Recommendations for Reducing Energy for Training "
    "Language Models', arXiv:2205.09646, 2022-05, https://arxiv.org/abs/2205.09646 (150 W cap on 250 W V100s: "
    "13.7% less energy on average for larger-scale language-model training)"
)
#: The public measurement behind the power-cap what-if, for documents and reports.
POWER_CAP_EVIDENCE: str = _SRC_MIT
#: The seed guide's claim the what-if is compared with (guide 004: "动态电压调节 ... 实测节能15%-20%").
POWER_CAP_GUIDE_CLAIM: str = "seed guide 004 (Chinese): dynamic voltage scaling saves 15-20% energy, no source given"

_GPU_IDLE = PowerAssumption(
    name="idle_fraction_of_tdp",
    value=0.10,
    low=0.08,
    high=0.15,
    source=f"{_SRC_CONSERVE}; {_SRC_NEMUL}; {_SRC_PARKING}",
    trust="C",
    note="idle-with-context draw of HBM datacenter GPUs; 73.65 W / 700 W = 0.105 (H200 measured), "
    "~0.15 as a rule of thumb; a CUDA context alone adds 26-50 W over bare idle",
)

#: Idle draw as a fraction of TDP, per device kind. NPU/TPU: no public idle measurement was found;
#: the GPU figure is used with the lowest trust grade (override it with a measurement).
IDLE_FRACTION_OF_TDP: dict[str, PowerAssumption] = {
    "GPU": _GPU_IDLE,
    "NPU": replace(_GPU_IDLE, trust="D", note="no public idle measurement for NPUs found; GPU figure used"),
    "TPU": replace(_GPU_IDLE, trust="D", note="no public idle measurement for TPUs found; GPU figure used"),
    "CPU": replace(_GPU_IDLE, trust="D", note="no CPU-specific figure; GPU figure used"),
}

#: Busy draw as a fraction of TDP by the kind of work (same for every device kind).
WORK_DRAW_FRACTION: dict[str, PowerAssumption] = {
    "compute_bound": PowerAssumption(
        name="compute_bound_draw_fraction",
        value=1.0,
        low=0.82,
        high=1.0,
        source=_SRC_LATIF,
        trust="C",
        note="compute-bound kernels run into the board power limit (TDP); an 8xH100 node training measured "
        "at most 82% of its rated power, the low end",
    ),
    "memory_bound": PowerAssumption(
        name="memory_bound_draw_fraction",
        value=0.31,
        low=0.20,
        high=0.43,
        source=_SRC_DECODE,
        trust="C",
        note="137-300 W of 700 W for LLM decode on H200 (midpoint 0.31)",
    ),
}

DVFS_EXPONENT = PowerAssumption(
    name="dvfs_exponent",
    value=3.0,
    low=2.0,
    high=3.0,
    source=_SRC_CMOS,
    trust="C",
    note="P_dyn ∝ f^k; k = 3 when voltage scales with clock, lower near the voltage floor",
)

MIN_CLOCK_FRACTION = PowerAssumption(
    name="min_clock_fraction",
    value=0.3,
    low=0.2,
    high=0.5,
    source="estimate: no public per-device clock floor on file",
    trust="D",
    note="the clock never falls below this fraction however low the cap; the cap is then reported as not met",
)


@dataclass(frozen=True)
class PowerProfile:
    """Power model parameters of one device: TDP in W, the rest dimensionless."""

    device_id: str
    tdp_w: float
    idle_fraction: float
    compute_bound_draw_fraction: float
    memory_bound_draw_fraction: float
    dvfs_exponent: float
    min_clock_fraction: float
    assumptions: tuple[PowerAssumption, ...] = field(default=())

    def __post_init__(self) -> None:
        checks = {
            "tdp_w": self.tdp_w > 0,
            "idle_fraction": 0 <= self.idle_fraction < 1,
            "compute_bound_draw_fraction": self.idle_fraction <= self.compute_bound_draw_fraction <= 1.5,
            "memory_bound_draw_fraction": self.idle_fraction <= self.memory_bound_draw_fraction <= 1.5,
            "dvfs_exponent": 0.5 <= self.dvfs_exponent <= 5,
            "min_clock_fraction": 0 < self.min_clock_fraction <= 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise UserInputError(f"out of range: {getattr(self, name)!r}", field=name)

    @property
    def idle_w(self) -> float:
        return power_idle_w(self.tdp_w, self.idle_fraction)

    def to_dict(self) -> dict[str, Any]:
        return {
            "device_id": self.device_id,
            "tdp_w": self.tdp_w,
            "idle_w": self.idle_w,
            "idle_fraction": self.idle_fraction,
            "compute_bound_draw_fraction": self.compute_bound_draw_fraction,
            "memory_bound_draw_fraction": self.memory_bound_draw_fraction,
            "dvfs_exponent": self.dvfs_exponent,
            "min_clock_fraction": self.min_clock_fraction,
            "assumptions": [a.to_dict() for a in self.assumptions],
        }


def power_profile(
    device_id: str,
    tdp_w: float | None,
    kind: str = "GPU",
    *,
    idle_fraction: float | None = None,
    compute_bound_draw_fraction: float | None = None,
    memory_bound_draw_fraction: float | None = None,
    dvfs_exponent: float | None = None,
    min_clock_fraction: float | None = None,
) -> PowerProfile:
    """Power profile from a TDP (W) and device kind; any keyword overrides the default assumption.

    ``tdp_w`` None (the catalog has no TDP for this device) is an error naming ``power.tdp_w``:
    give it with ``--tdp-w`` / ``tdp_w=``.
    """
    if tdp_w is None:
        raise UserInputError(f"{device_id} has no TDP in the catalog; give the device power in W", field="power.tdp_w")
    idle = IDLE_FRACTION_OF_TDP.get(kind.upper(), IDLE_FRACTION_OF_TDP["GPU"])
    used: list[PowerAssumption] = []

    def pick(given: float | None, default: PowerAssumption) -> float:
        if given is None:
            used.append(default)
            return default.value
        used.append(replace(default, value=given, low=given, high=given, source="user", trust="A", note="given"))
        return given

    return PowerProfile(
        device_id=device_id,
        tdp_w=tdp_w,
        idle_fraction=pick(idle_fraction, idle),
        compute_bound_draw_fraction=pick(compute_bound_draw_fraction, WORK_DRAW_FRACTION["compute_bound"]),
        memory_bound_draw_fraction=pick(memory_bound_draw_fraction, WORK_DRAW_FRACTION["memory_bound"]),
        dvfs_exponent=pick(dvfs_exponent, DVFS_EXPONENT),
        min_clock_fraction=pick(min_clock_fraction, MIN_CLOCK_FRACTION),
        assumptions=tuple(used),
    )


def power_profile_for(device: Any, **overrides: float | None) -> PowerProfile:
    """Power profile of a catalog ``Device`` (its ``tdp_w`` and ``kind``); see :func:`power_profile`."""
    tdp = overrides.pop("tdp_w", None) or device.tdp_w
    return power_profile(device.id, tdp, device.kind, **overrides)


# ---------------------------------------------------------------------------------------
# draw
# ---------------------------------------------------------------------------------------
def _fraction(x: float, name: str) -> float:
    if not 0 <= x <= 1:
        raise UserInputError(f"must be between 0 and 1, got {x!r}", field=name)
    return x


def power_idle_w(tdp_w: float, idle_fraction: float) -> float:
    """Idle draw in W: ``idle_fraction * tdp_w``."""
    return idle_fraction * tdp_w


def power_work_w(profile: PowerProfile, compute_bound_fraction: float) -> float:
    """Draw in W while busy, when ``compute_bound_fraction`` of busy time is compute-bound (rest memory-bound)."""
    c = _fraction(compute_bound_fraction, "compute_bound_fraction")
    p_c = profile.compute_bound_draw_fraction * profile.tdp_w
    p_m = profile.memory_bound_draw_fraction * profile.tdp_w
    return c * p_c + (1 - c) * p_m


def power_average_w(profile: PowerProfile, busy_fraction: float, compute_bound_fraction: float = 1.0) -> float:
    """Average draw in W over a period in which the device is busy ``busy_fraction`` of the time.

    ``P_avg = P_idle + busy_fraction * (P_busy - P_idle)``, linear in the busy fraction.
    """
    u = _fraction(busy_fraction, "busy_fraction")
    idle = profile.idle_w
    return idle + u * (power_work_w(profile, compute_bound_fraction) - idle)


def energy_j(power_w: float, duration_s: float) -> float:
    """Energy in J of a constant draw ``power_w`` for ``duration_s`` seconds."""
    if duration_s < 0:
        raise UserInputError(f"must be >= 0, got {duration_s!r}", field="duration_s")
    return power_w * duration_s


# ---------------------------------------------------------------------------------------
# power cap / DVFS what-if
# ---------------------------------------------------------------------------------------
def clock_fraction_at_cap(profile: PowerProfile, work_power_w: float, cap_w: float) -> float:
    """Clock fraction ``r`` (0-1] that brings a phase drawing ``work_power_w`` down to ``cap_w``.

    ``r = ((cap - P_idle) / (P - P_idle)) ** (1/k)``, 1 when the phase is under the cap, never below
    ``min_clock_fraction``.
    """
    idle = profile.idle_w
    if work_power_w <= cap_w or work_power_w <= idle:
        return 1.0
    r = ((cap_w - idle) / (work_power_w - idle)) ** (1.0 / profile.dvfs_exponent)
    return max(r, profile.min_clock_fraction)


def compute_clock_fraction_at_cap(profile: PowerProfile, cap_w: float) -> float:
    """Clock fraction of compute-bound work (training GEMMs, prefill) under a board limit ``cap_w``
    (:func:`clock_fraction_at_cap` at the compute-bound draw): what the planners scale GEMM and
    attention throughput by. A cap at or below the idle draw is an error (no clock meets it)."""
    if not cap_w > profile.idle_w:
        raise UserInputError(
            f"power cap {cap_w:g} W is at or below the idle draw ({profile.idle_w:.0f} W) of {profile.device_id}",
            field="power_cap_w", hint="give a board power limit above the idle draw, e.g. 60-80% of the TDP")
    return clock_fraction_at_cap(profile, power_work_w(profile, 1.0), cap_w)


@dataclass(frozen=True)
class PowerCapResult:
    """Throughput and energy of busy work under a power cap, relative to uncapped (dimensionless)."""

    cap_w: float
    uncapped_power_w: float
    capped_power_w: float
    compute_bound_fraction: float
    clock_fraction_compute: float
    time_ratio: float
    throughput_ratio: float
    energy_ratio: float
    cap_met: bool
    assumptions: tuple[PowerAssumption, ...]

    @property
    def energy_saving_fraction(self) -> float:
        return 1.0 - self.energy_ratio

    def to_dict(self) -> dict[str, Any]:
        return {
            "cap_w": self.cap_w,
            "uncapped_power_w": self.uncapped_power_w,
            "capped_power_w": self.capped_power_w,
            "compute_bound_fraction": self.compute_bound_fraction,
            "clock_fraction_compute": self.clock_fraction_compute,
            "time_ratio": self.time_ratio,
            "throughput_ratio": self.throughput_ratio,
            "energy_ratio": self.energy_ratio,
            "energy_saving_fraction": self.energy_saving_fraction,
            "cap_met": self.cap_met,
            "assumptions": [a.to_dict() for a in self.assumptions],
        }


def power_cap_what_if(profile: PowerProfile, cap_w: float, compute_bound_fraction: float = 1.0) -> PowerCapResult:
    """Busy work under a board power limit ``cap_w`` (W): time, throughput and energy ratios.

    ``compute_bound_fraction`` is the share of busy time (uncapped) that is compute-bound; the rest
    is memory-bound. Compute-bound time stretches by ``1/r`` at clock fraction ``r``; memory-bound
    time does not (see the module docstring). A cap at or below idle draw is an error.
    """
    c = _fraction(compute_bound_fraction, "compute_bound_fraction")
    idle = profile.idle_w
    if not cap_w > idle:
        raise UserInputError(
            f"power cap {cap_w:g} W is at or below the idle draw ({idle:.0f} W) of {profile.device_id}",
            field="power_cap_w",
        )
    k = profile.dvfs_exponent
    p_c = profile.compute_bound_draw_fraction * profile.tdp_w
    p_m = profile.memory_bound_draw_fraction * profile.tdp_w
    r_c = clock_fraction_at_cap(profile, p_c, cap_w)
    p_c_capped = idle + (p_c - idle) * r_c**k if p_c > idle else p_c
    p_m_capped = min(p_m, cap_w)
    t_c = c / r_c
    t_m = 1.0 - c
    time_ratio = t_c + t_m
    energy_before = c * p_c + (1 - c) * p_m
    energy_after = t_c * p_c_capped + t_m * p_m_capped
    return PowerCapResult(
        cap_w=cap_w,
        uncapped_power_w=energy_before,
        capped_power_w=energy_after / time_ratio,
        compute_bound_fraction=c,
        clock_fraction_compute=r_c,
        time_ratio=time_ratio,
        throughput_ratio=1.0 / time_ratio,
        energy_ratio=energy_after / energy_before,
        cap_met=p_c_capped <= cap_w * (1 + 1e-9),
        assumptions=profile.assumptions,
    )


__all__ = [
    "DVFS_EXPONENT",
    "IDLE_FRACTION_OF_TDP",
    "MIN_CLOCK_FRACTION",
    "POWER_CAP_EVIDENCE",
    "POWER_CAP_GUIDE_CLAIM",
    "WORK_DRAW_FRACTION",
    "PowerAssumption",
    "PowerCapResult",
    "PowerProfile",
    "clock_fraction_at_cap",
    "energy_j",
    "power_average_w",
    "power_cap_what_if",
    "power_idle_w",
    "power_profile",
    "power_profile_for",
    "power_work_w",
]
