"""Planning endpoints: memory, training, inference, recommend, cost, simulate, fleet, validate.

Each handler checks its body (a job request, see :mod:`xpuplan.api.bodies`), calls the job and
returns the job's result as JSON, exactly what the CLI prints with ``--json``. The job functions
are the same the CLI calls; :data:`RUNNERS` maps a background-job kind to (body type, runner) so
``POST /api/v1/jobs`` runs the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from xpuplan.api.bodies import RecommendBody
from xpuplan.api.errors import INFEASIBLE, NOT_FOUND
from xpuplan.jobs.context import RunContext

router = APIRouter(tags=["planning"])

#: ``progress(fraction)`` given to a runner by the background executor (may raise to cancel).
Progress = Callable[[float], None]


def context(request: Request) -> RunContext:
    ctx: RunContext = request.app.state.context
    return ctx


# ------------------------------------------------------------------------------------------ runners
def run_recommend(body: RecommendBody, ctx: RunContext, progress: Progress | None = None) -> Any:
    from xpuplan.decide.scenario import list_presets
    from xpuplan.errors import UnknownIdError, UserInputError
    from xpuplan.jobs.recommend import RecommendRequest, recommend

    if body.scenario is not None and body.preset is not None:
        raise UserInputError("give a scenario or a preset, not both (a scenario names its preset with "
                             "'scenario:')", field="preset")
    if body.preset is not None and body.preset not in list_presets():
        err = UnknownIdError("preset", body.preset, list_presets(), field="preset")
        raise UserInputError(err.message, field="preset", hint=err.hint)
    weights = None
    if body.weights is not None:
        weights = dict(body.weights)
    return recommend(RecommendRequest(scenario=body.scenario, preset=body.preset, lang=body.lang,
                                      samples=body.samples, seed=body.seed, weights=weights))


@dataclass(frozen=True)
class Runner:
    """One job kind: its body type, the function running it, and the result type (for the schema)."""

    body: type[BaseModel]
    run: Callable[[Any, RunContext, Progress | None], Any]
    result: type[BaseModel] | None = None


def _recommendation_type() -> type[BaseModel]:
    from xpuplan.decide.result import Recommendation

    return Recommendation


#: Background-job kinds (``POST /api/v1/jobs``): kind -> runner.
RUNNERS: dict[str, Runner] = {
    "recommend": Runner(RecommendBody, run_recommend, _recommendation_type()),
}


def respond(result: Any) -> JSONResponse:
    """A job's typed result as the response (the ``--json`` document)."""
    return JSONResponse(result.to_dict())


# ------------------------------------------------------------------------------------------ routes
@router.post("/recommend", summary="Rank hardware and hybrid deployments for a scenario",
             response_model=_recommendation_type(), responses={**INFEASIBLE, **NOT_FOUND})
def recommend_endpoint(request: Request, body: RecommendBody) -> Any:
    return respond(run_recommend(body, context(request)))
