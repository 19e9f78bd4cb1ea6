"""The typed result of a decision: ranked options, rejected ones, assumptions (JSON schema v2).

Units are SI with suffixes in the keys (``time_s``, ``cost_usd``, ``energy_j``, ``power_w``).
Scores are in points (0..100, the weights' scale); ``criteria`` gives each leaf's contribution in
points (weight x normalised leaf score) and the normalised score itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 2


class _M(BaseModel):
    model_config = ConfigDict(frozen=True)


class Criterion(_M):
    group: str
    weight: float
    score: float = Field(description="normalised leaf score across the options compared, 0..1")
    points: float = Field(description="weight x score")
    raw: float | None = Field(description="the quantity the score was computed from (unit in raw_unit)")
    raw_unit: str
    known: bool = True


class Spread(_M):
    p10: float
    p50: float
    p90: float


class Uncertainty(_M):
    samples: int
    time_s: Spread | None = None
    cost_usd: Spread | None = None
    p_rank_first: float


class PartOut(_M):
    role: str
    hardware: str
    devices: int
    plan: dict[str, Any]
    time_s: float | None
    latency_s: float | None
    energy_j: float | None
    cost_lines_usd: dict[str, float]
    development_usd: float | None
    cost_mode: str
    notes: list[str] = Field(default_factory=list)


class FigureUsed(_M):
    device: str
    path: str
    value: float
    unit: str
    trust: str
    source: str


class OptionOut(_M):
    rank: int
    key: str
    kind: str = Field(description="'single' or 'mix'")
    hardware: str | None = Field(description="the device id of a single-hardware option")
    mix: dict[str, str] | None = Field(description="role -> device id of a mixed option")
    label: str
    score: float
    criteria: dict[str, Criterion]
    groups: dict[str, float]
    devices: int
    time_s: float | None
    latency_s: float | None
    cost_usd: float | None
    cost_lines_usd: dict[str, float]
    energy_j: float | None
    power_w: float | None
    parts: list[PartOut]
    binding: list[str]
    figures: list[FigureUsed]
    min_trust: str
    assumptions: list[dict[str, Any]] = Field(default_factory=list,
                                              description="per device: efficiency source and its assumed spread")
    uncertainty: Uncertainty | None = None
    notes: list[str] = Field(default_factory=list)


class Rejection(_M):
    key: str
    hardware: str | None
    mix: dict[str, str] | None
    constraint: str
    reasons: list[str]


class WeightChange(_M):
    criterion: str
    weight: float
    change_points: float | None = Field(description="smallest change (points) that changes the top choice; "
                                        "None: no change within 0..100 does")
    new_winner: str | None


class Explanation(_M):
    lang: str
    summary: str
    why: list[str]
    what_would_change: list[str]
    benchmark_first: list[str]
    caveats: list[str]


class Recommendation(_M):
    """Options ranked by weighted score, with criteria, key numbers, uncertainty, rejections and reasons."""

    schema_version: int = SCHEMA_VERSION
    kind: str = "recommendation"
    scenario: str
    title: str | None
    model: str
    workload: dict[str, Any]
    weights: dict[str, float]
    options: list[OptionOut]
    rejected: list[Rejection]
    sensitivity: list[WeightChange]
    explanation: Explanation
    assumptions: list[dict[str, Any]]
    monte_carlo: dict[str, Any]
    elapsed_s: float

    @property
    def winner(self) -> OptionOut:
        return self.options[0]

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
