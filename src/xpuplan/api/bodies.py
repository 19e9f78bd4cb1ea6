"""Request bodies of the HTTP API: the jobs' requests, with every file path replaced by JSON.

Each body subclasses the job's request (so the job receives the type it expects, validated by the
same rules), except that ``model`` must be a catalog id or alias and ``scenario`` is a JSON object
of the same shape as the scenario files in ``examples/`` (see :mod:`xpuplan.api.safety`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from xpuplan.api.safety import check_model, check_scenario
from xpuplan.jobs.requests import Id


def _model(value: str) -> str:
    return check_model(value, "model")


def _scenario(value: dict[str, Any]) -> dict[str, Any]:
    return check_scenario(value, "scenario")


def _hw_figures(value: list[str] | None) -> list[str] | None:
    from xpuplan.jobs.context import RunContext

    if value:
        RunContext().with_hw_figures(value, field="hw_figures")  # each checked now, errors name hw_figures[i]
    return value


#: User hardware figures of this request only (``--hw-figure``): ``DEVICE:PATH=VALUE`` strings.
HwFigures = Annotated[list[Annotated[str, Field(max_length=200)]] | None, Field(
    default=None, max_length=50,
    description="user hardware figures for this request only, as --hw-figure: 'DEVICE:PATH=VALUE' "
                "(optional '[LOW..HIGH]' and '@TRUST'), e.g. 'enflame-s60:dense_tflops.bf16=150'"),
    AfterValidator(_hw_figures)]


#: A model id or alias of the catalog (never a path).
ApiModel = Annotated[Id, AfterValidator(_model)]
#: A scenario body: a JSON object shaped like the YAML files in examples/.
ScenarioBody = Annotated[dict[str, Any], AfterValidator(_scenario)]
#: A finite weight in points.
Points = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)]


class Body(BaseModel):
    """Base of the API's own bodies: unknown fields refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RecommendBody(Body):
    """``POST /api/v1/recommend``: what ``xpuplan recommend`` accepts."""

    scenario: ScenarioBody | None = Field(default=None, description="a scenario (same shape as examples/*.yaml); "
                                          "its 'scenario:' key names the preset it starts from, or 'custom'")
    preset: Id | None = Field(default=None, description="a built-in preset (GET /api/v1/presets), when no scenario")
    lang: Literal["en", "zh"] = Field(default="en", description="language of explanations")
    samples: int | None = Field(default=None, ge=0, le=100_000, description="Monte Carlo samples (default: the "
                                "scenario's)")
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1, description="Monte Carlo seed")
    weights: dict[Annotated[str, Field(max_length=100)], Points] | None = Field(
        default=None, max_length=100,
        description="criterion (a leaf, or a group whose leaves share its points in their current proportions) -> "
                    "points, replacing the scenario's weights")
    hw_figures: HwFigures = None


# ----------------------------------------------------------------- job requests, paths replaced
from xpuplan.jobs.catalog import FlopsRequest, RooflineRequest  # noqa: E402
from xpuplan.jobs.cost import PowerCapRequest, ServeCostRequest, TcoRequest, TrainCostRequest  # noqa: E402
from xpuplan.jobs.fleet import FleetRequest  # noqa: E402
from xpuplan.jobs.memory import MemoryInferRequest, MemoryTrainRequest  # noqa: E402
from xpuplan.jobs.serve import CapacityRequest, InferEstimateRequest  # noqa: E402
from xpuplan.jobs.simulate import SimulateRequest  # noqa: E402
from xpuplan.jobs.train import TrainEstimateRequest, TrainSearchRequest  # noqa: E402

_MODEL = "model id or alias (GET /api/v1/models)"
_SCENARIO = "scenario: a JSON object of the same shape as the scenario YAML files (examples/)"
_EMIT = "print the serve command: vllm, sglang, trtllm or mindie (JSON key 'emit', as for training)"
_NO_PRICES = "extra price files: not accepted over HTTP (the server's price book is used)"


class MemoryTrainBody(MemoryTrainRequest):
    """``POST /api/v1/memory/train`` (``xpuplan memory train``)."""

    model: ApiModel = Field(description=_MODEL)


class MemoryInferBody(MemoryInferRequest):
    """``POST /api/v1/memory/infer`` (``xpuplan memory infer``)."""

    model: ApiModel = Field(description=_MODEL)


class TrainEstimateBody(TrainEstimateRequest):
    """``POST /api/v1/train/estimate`` (``xpuplan train estimate``): flags as JSON keys."""

    model: ApiModel | None = Field(default=None, description=_MODEL)
    scenario: ScenarioBody | None = Field(default=None, description="training " + _SCENARIO)  # type: ignore[assignment]
    hw_figures: HwFigures = None


class TrainSearchBody(TrainSearchRequest):
    """``POST /api/v1/train/search`` (``xpuplan train search``)."""

    model: ApiModel | None = Field(default=None, description=_MODEL)
    scenario: ScenarioBody | None = Field(default=None, description="training " + _SCENARIO)  # type: ignore[assignment]
    hw_figures: HwFigures = None


class InferEstimateBody(InferEstimateRequest):
    """``POST /api/v1/infer/estimate`` (``xpuplan infer estimate``; ``--in``/``--out`` are
    ``input_len``/``output_len``)."""

    model_config = ConfigDict(populate_by_name=True)

    model: ApiModel | None = Field(default=None, description=_MODEL)
    scenario: ScenarioBody | None = Field(default=None, description="serving " + _SCENARIO)  # type: ignore[assignment]
    emit_: str | None = Field(default=None, alias="emit", description=_EMIT)
    hw_figures: HwFigures = None


class CapacityBody(CapacityRequest):
    """``POST /api/v1/infer/capacity`` (``xpuplan infer capacity``)."""

    model_config = ConfigDict(populate_by_name=True)

    model: ApiModel | None = Field(default=None, description=_MODEL)
    scenario: ScenarioBody | None = Field(default=None, description="serving " + _SCENARIO)  # type: ignore[assignment]
    emit_: str | None = Field(default=None, alias="emit", description=_EMIT)
    hw_figures: HwFigures = None


class TcoBody(TcoRequest):
    """``POST /api/v1/cost/tco`` (``xpuplan cost tco``)."""

    prices: tuple[()] = Field(default=(), description=_NO_PRICES)


class TrainCostBody(TrainCostRequest):
    """``POST /api/v1/cost/train`` (``xpuplan cost train``)."""

    model: ApiModel = Field(description=_MODEL)
    prices: tuple[()] = Field(default=(), description=_NO_PRICES)


class ServeCostBody(ServeCostRequest):
    """``POST /api/v1/cost/serve`` (``xpuplan cost serve``)."""

    model: ApiModel = Field(description=_MODEL)
    prices: tuple[()] = Field(default=(), description=_NO_PRICES)


class PowerCapBody(PowerCapRequest):
    """``POST /api/v1/cost/powercap`` (``xpuplan cost powercap``)."""


class SimulateBody(SimulateRequest):
    """``POST /api/v1/simulate`` (``xpuplan simulate``): the scenario's pools, routing and classes as
    JSON; traces and length distributions inline."""

    scenario: ScenarioBody = Field(description="simulation " + _SCENARIO)


class FleetBody(FleetRequest):
    """``POST /api/v1/fleet/optimize`` (``xpuplan fleet optimize``)."""

    scenario: ScenarioBody = Field(description="fleet " + _SCENARIO)


class FlopsBody(FlopsRequest):
    """``POST /api/v1/flops`` (``xpuplan flops``)."""

    model: ApiModel = Field(description=_MODEL)


class RooflineBody(RooflineRequest):
    """``POST /api/v1/roofline`` (``xpuplan roofline``)."""

    model: ApiModel | None = Field(default=None, description=_MODEL)
