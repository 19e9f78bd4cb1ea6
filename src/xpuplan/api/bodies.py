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
        default=None, max_length=100, description="leaf criterion -> points, replacing the scenario's weights")
