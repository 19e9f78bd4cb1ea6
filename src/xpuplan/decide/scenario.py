"""Decision scenarios: what to run, on which candidates, under which constraints and weights.

A scenario is data (YAML/JSON), validated once with pydantic; errors name file, line and field.
Built-in presets live in ``decide/data/presets/<name>.yaml`` (one per scenario of the seed guide).
A user file names its base with ``scenario: <preset>`` and overrides any key (mappings merge key by
key, lists and values replace); ``scenario: custom`` starts from the schema defaults alone.
"""

from __future__ import annotations

import math
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xpuplan.datafile import load_model, parse_text, read_text
from xpuplan.errors import UnknownIdError, UserInputError
from xpuplan.workload.datasets import find_dataset, load_datasets
from xpuplan.workload.lengths import LengthDist
from xpuplan.workload.vocabulary import Method

PRESET_DIR = Path(__file__).parent / "data" / "presets"
#: The scenario ``xpuplan recommend`` runs without a file or ``--preset``.
DEFAULT_PRESET = "pretraining"
CUSTOM = "custom"
Kind = Literal["GPU", "NPU", "TPU", "CPU"]
#: A length given as a number: tokens, at least one and at most ten million (a fixed length).
Tokens = Annotated[float, Field(ge=1, le=10_000_000, allow_inf_nan=False)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @field_validator("*")
    @classmethod
    def _finite(cls, v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v


class TrainingSpec(_Strict):
    """A training or fine-tuning run at a fixed device count."""

    train_tokens: float = Field(gt=0, description="tokens to train on")
    devices: int = Field(ge=1, le=1_000_000, description="accelerators in the cluster")
    method: Method = "full"
    seq_len: int = Field(default=4096, ge=1, le=10_000_000)
    global_batch_tokens: int | None = Field(default=None, ge=1)


class ServingSpec(_Strict):
    """Online load (``qps``) or a batch (``requests`` within ``window_hours``) under latency SLOs."""

    qps: float | None = Field(default=None, gt=0, description="requests per second (online)")
    requests: float | None = Field(default=None, gt=0, description="requests in the batch (offline)")
    window_hours: float | None = Field(default=None, gt=0, description="hours to process the batch in")
    input_len: Tokens | LengthDist | None = Field(
        default=None, description="prompt tokens: a number or a distribution (default 2,048, or the dataset's)")
    output_len: Tokens | LengthDist | None = Field(
        default=None, description="generated tokens: a number or a distribution (default 256, or the dataset's)")
    dataset: str | None = Field(default=None, min_length=1, max_length=200,
                                description="benchmark dataset whose lengths the requests have where input_len / "
                                            "output_len are not given (workload/data/datasets.yaml: sharegpt)")
    ttft_ms: float = Field(default=2000.0, gt=0, description="P99 time-to-first-token SLO, ms")
    tpot_ms: float = Field(default=50.0, gt=0, description="time-per-output-token SLO, ms")
    dtypes: list[str] = Field(default_factory=lambda: ["bf16"], min_length=1)

    @model_validator(mode="after")
    def _load(self) -> ServingSpec:
        batch = self.requests is not None or self.window_hours is not None
        if batch and (self.requests is None or self.window_hours is None):
            raise ValueError("a batch needs both requests and window_hours")
        if batch and self.qps is not None:
            raise ValueError("give qps (online) or requests + window_hours (batch), not both")
        if not batch and self.qps is None:
            raise ValueError("give qps (online) or requests + window_hours (batch)")
        if self.dataset is not None and find_dataset(self.dataset) is None:
            raise ValueError(f"unknown dataset {self.dataset!r}; known: {', '.join(sorted(load_datasets().datasets))}")
        return self

    @property
    def is_batch(self) -> bool:
        return self.requests is not None

    @property
    def target_qps(self) -> float:
        if self.qps is not None:
            return self.qps
        assert self.requests is not None and self.window_hours is not None
        return self.requests / (self.window_hours * 3600.0)


class RequestShape(_Strict):
    input_len: Tokens | LengthDist = Field(description="prompt tokens: a number or a distribution")
    output_len: Tokens | LengthDist = Field(description="generated tokens: a number or a distribution")


class RoutingSpec(_Strict):
    """The guide's hybrid: complex requests to one pool (GPUs), standard ones to another (NPUs)."""

    complex_fraction: float = Field(gt=0, lt=1, description="share of requests that are complex")
    complex: RequestShape
    standard: RequestShape
    complex_kinds: list[Kind] = Field(default_factory=lambda: list[Kind](["GPU"]), min_length=1)
    standard_kinds: list[Kind] = Field(default_factory=lambda: list[Kind](["NPU"]), min_length=1)
    candidates_per_pool: int = Field(default=3, ge=1, le=10, description="best single options tried per pool")


class Workload(_Strict):
    kind: Literal["training", "serving", "train_and_serve"]
    training: TrainingSpec | None = None
    serving: ServingSpec | None = None
    routing: RoutingSpec | None = None

    @model_validator(mode="after")
    def _parts(self) -> Workload:
        if self.kind in ("training", "train_and_serve") and self.training is None:
            raise ValueError(f"kind {self.kind!r} needs a training section")
        if self.kind in ("serving", "train_and_serve") and self.serving is None:
            raise ValueError(f"kind {self.kind!r} needs a serving section")
        if self.routing is not None and self.serving is None:
            raise ValueError("routing needs a serving section")
        if self.routing is not None and self.serving is not None and self.serving.dataset is not None:
            raise ValueError("serving.dataset is not used with routing: routing.complex and routing.standard give each "
                             "pool's request lengths (numbers or distributions); remove routing (routing: null) to "
                             "serve the dataset's requests from one pool")
        return self


class Constraints(_Strict):
    """Hard limits; an option that breaks one is rejected with the reason."""

    allowed_vendors: list[str] | None = None
    denied_vendors: list[str] = Field(default_factory=list)
    domestic_only: bool = Field(default=False, description="Chinese vendors only (catalog origin_country CN)")
    region: str | None = Field(default=None, description="deployment region (us, eu, cn, or any: skip availability checks); default: cost.region")
    max_power_w_per_device: float | None = Field(default=None, gt=0)
    max_site_power_kw: float | None = Field(default=None, gt=0)
    min_memory_gb_per_device: float | None = Field(default=None, gt=0)
    max_budget_usd: float | None = Field(default=None, gt=0)
    deadline_days: float | None = Field(default=None, gt=0)
    max_devices: int | None = Field(default=None, ge=1)
    min_trust: Literal["A", "B", "C", "D"] | None = Field(default=None, description="worst trust grade accepted")


class CostSpec(_Strict):
    """How options are priced (see ``xpuplan.cost``); per-device numbers override the price book."""

    mode: Literal["owned", "cloud"] = "owned"
    region: str = "us"
    cooling: str = "air"
    years: float = Field(default=3.0, gt=0, le=20)
    team_stacks: list[str] = Field(default_factory=lambda: ["CUDA"])
    device_price_usd: dict[str, float] = Field(default_factory=dict)
    cloud_usd_per_device_hour: dict[str, float] = Field(default_factory=dict)
    electricity_usd_per_kwh: float | None = Field(default=None, ge=0)
    operations_usd_per_year: float | None = Field(default=None, ge=0)
    porting_engineer_months: float | None = Field(default=None, ge=0)
    engineer_usd_per_year: float | None = Field(default=None, ge=0)

    @field_validator("device_price_usd", "cloud_usd_per_device_hour")
    @classmethod
    def _prices(cls, v: dict[str, float]) -> dict[str, float]:
        for k, x in v.items():
            if not (math.isfinite(x) and x >= 0):
                raise ValueError(f"price for {k!r} must be a finite number >= 0")
        return v


class MonteCarloSpec(_Strict):
    samples: int = Field(default=0, ge=0, le=100_000, description="0: no Monte Carlo")
    seed: int = Field(default=0, ge=0)


class Scenario(_Strict):
    """One decision problem (module doc)."""

    scenario: str = Field(min_length=1, description="preset this file starts from, or 'custom'")
    title: str | None = None
    title_zh: str | None = None
    model: str = Field(min_length=1)
    hardware: list[str] | Literal["all"] = Field(min_length=1)
    workload: Workload
    constraints: Constraints = Field(default_factory=Constraints)
    weights: dict[str, float] = Field(default_factory=dict, description="leaf weights replacing the defaults")
    weight_adjustments: dict[str, float] = Field(default_factory=dict, description="deltas added to leaf weights")
    cost: CostSpec = Field(default_factory=CostSpec)
    monte_carlo: MonteCarloSpec = Field(default_factory=MonteCarloSpec)
    mixes: bool = Field(default=True, description="also consider mixed deployments")

    @property
    def region(self) -> str:
        return (self.constraints.region or self.cost.region).split("-")[0].casefold()


def list_presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


@cache
def _preset_data(name: str) -> tuple[dict[str, Any], str]:
    path = PRESET_DIR / f"{name}.yaml"
    data, _ = parse_text(read_text(path), str(path))
    return data, str(path)


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _merge(base.get(k), v) if k in base else v
        return out
    return over


def _without_replaced_lengths(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` without the serving lengths a ``dataset`` in ``over`` replaces: a file that names a dataset on top
    of a preset means that dataset's lengths, not the preset's fixed ones (its own input_len / output_len still win)."""
    serving = (over.get("workload") or {}).get("serving") if isinstance(over.get("workload"), dict) else None
    base_serving = (base.get("workload") or {}).get("serving")
    if not isinstance(serving, dict) or serving.get("dataset") is None or not isinstance(base_serving, dict):
        return base
    kept = {k: v for k, v in base_serving.items() if k not in ("input_len", "output_len")}
    return {**base, "workload": {**base["workload"], "serving": kept}}


def _resolve(data: dict[str, Any], file: str, lines: dict[Any, int], field: str) -> Scenario:
    name = data.get("scenario")
    if not isinstance(name, str) or not name:
        raise UserInputError("name the scenario: a preset (" + ", ".join(list_presets()) + ") or 'custom'",
                             field="scenario", file=file, line=lines.get(()))
    if name != CUSTOM:
        if name not in list_presets():
            err = UnknownIdError("scenario", name, [*list_presets(), CUSTOM], field=field)
            raise UserInputError(err.message, field=field, file=file if field == "scenario" else None,
                                 line=lines.get(("scenario",)), hint=err.hint)
        base, _ = _preset_data(name)
        data = _merge(_without_replaced_lengths(base, data), data)
    return load_model(Scenario, data, file, lines)


def load_scenario(path: str | Path) -> Scenario:
    """Read a scenario file (YAML/JSON); errors name file, line and field."""
    text = read_text(path)
    data, lines = parse_text(text, str(path))
    if not isinstance(data, dict):
        raise UserInputError("a scenario file is a mapping (scenario:, model:, workload:, ...)", file=str(path))
    return _resolve(data, str(path), lines, "scenario")


def preset(name: str, overrides: dict[str, Any] | None = None) -> Scenario:
    """A built-in preset by name (``--preset``), optionally with overrides merged in."""
    if name not in list_presets():
        raise UnknownIdError("preset", name, list_presets(), field="--preset")
    return _resolve({"scenario": name, **(overrides or {})}, f"<preset {name}>", {}, "--preset")


def scenario_from(obj: Scenario | dict[str, Any] | str | Path | None) -> Scenario:
    """Accept a Scenario, a mapping (as in a file), a preset name, a file path, or None (default)."""
    if obj is None:
        return preset(DEFAULT_PRESET)
    if isinstance(obj, Scenario):
        return obj
    if isinstance(obj, dict):
        return _resolve(obj, "<scenario>", {}, "scenario")
    s = str(obj)
    if s in list_presets():
        return preset(s)
    return load_scenario(s)
