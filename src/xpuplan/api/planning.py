"""Planning endpoints: memory, training, inference, recommend, cost, simulate, fleet, validate.

Each handler checks its body (a job request, see :mod:`xpuplan.api.bodies`), calls the job and
returns the job's result as JSON, exactly what the CLI prints with ``--json``. The job functions
are the same the CLI calls; :data:`RUNNERS` maps a background-job kind to (body type, runner) so
``POST /api/v1/jobs`` runs the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel

from xpuplan.api import bodies as b
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
    weights = None if body.weights is None else dict(body.weights)
    return recommend(RecommendRequest(scenario=body.scenario, preset=body.preset, lang=body.lang,
                                      samples=body.samples, seed=body.seed, weights=weights))


def _fraction(progress: Progress | None) -> Callable[[int, int], None] | None:
    """``progress(done, total)`` of the planners as ``progress(fraction)``."""
    if progress is None:
        return None

    def report(done: int, total: int) -> None:
        progress(done / total if total else 0.0)

    return report


def _train_search(body: Any, ctx: RunContext, progress: Progress | None = None) -> Any:
    from xpuplan.jobs.train import train_search

    return train_search(body, ctx, progress=_fraction(progress))


def _simulate(body: Any, ctx: RunContext, progress: Progress | None = None) -> Any:
    from xpuplan.jobs.simulate import run_simulate

    return run_simulate(body, progress=progress)


def _with_ctx(func: Callable[[Any, RunContext], Any]) -> Callable[[Any, RunContext, Progress | None], Any]:
    def run(body: Any, ctx: RunContext, progress: Progress | None = None) -> Any:
        return func(body, ctx)

    run.__name__ = func.__name__
    return run


@dataclass(frozen=True)
class Runner:
    """One job kind: its path, body type, the function running it and the result type (schema)."""

    path: str
    summary: str
    body: type[BaseModel]
    run: Callable[[Any, RunContext, Progress | None], Any]
    result: type[Any]
    infeasible: bool = True

    def execute(self, body: Any, ctx: RunContext, progress: Progress | None = None) -> Any:
        """Run ``body`` under its ``hw_figures`` (when it has any): a context of this request only,
        applied in this thread only, so concurrent requests never see each other's figures."""
        figures = getattr(body, "hw_figures", None)
        if figures:
            ctx = ctx.with_hw_figures(figures)
        with ctx.applied():
            return self.run(body, ctx, progress)


def _runners() -> dict[str, Runner]:
    from xpuplan.decide.result import Recommendation
    from xpuplan.fleet.optimize import FleetPlan
    from xpuplan.jobs import catalog as jc
    from xpuplan.jobs import cost as jcost
    from xpuplan.jobs import fleet as jf
    from xpuplan.jobs import memory as jm
    from xpuplan.jobs import serve as js
    from xpuplan.jobs import train as jt
    from xpuplan.serve.sim import SimulationResult

    return {
        "memory.train": Runner("/memory/train", "Training memory per device, by part", b.MemoryTrainBody,
                               _with_ctx(jm.memory_train), jm.MemoryTrainResult),
        "memory.infer": Runner("/memory/infer", "Inference memory: weights, KV cache, fit", b.MemoryInferBody,
                               _with_ctx(jm.memory_infer), jm.MemoryInferResult),
        "flops": Runner("/flops", "FLOP per token, per step and for a training run", b.FlopsBody,
                        _with_ctx(jc.flops), jc.FlopsResult),
        "roofline": Runner("/roofline", "Compute- vs memory-bound time of ops", b.RooflineBody,
                           _with_ctx(jc.roofline), jc.RooflineResult),
        "train.estimate": Runner("/train/estimate", "Predict one parallel training plan", b.TrainEstimateBody,
                                 _with_ctx(jt.train_estimate), jt.TrainEstimateResult),
        "train.search": Runner("/train/search", "Search every valid training plan (long: see /jobs)",
                               b.TrainSearchBody, _train_search, jt.TrainSearchResult),
        "infer.estimate": Runner("/infer/estimate", "Latency and throughput of a serving replica",
                                 b.InferEstimateBody, _with_ctx(js.infer_estimate), js.InferEstimateResult),
        "infer.capacity": Runner("/infer/capacity", "Devices needed for a load within SLOs", b.CapacityBody,
                                 _with_ctx(js.infer_capacity), js.CapacityResult),
        "recommend": Runner("/recommend", "Rank hardware and hybrid deployments for a scenario",
                            b.RecommendBody, run_recommend, Recommendation),
        "cost.tco": Runner("/cost/tco", "Total cost of ownership of a number of devices", b.TcoBody,
                           _with_ctx(jcost.run_tco), jcost.TcoResult),
        "cost.train": Runner("/cost/train", "Cost of a training run, with reliability", b.TrainCostBody,
                             _with_ctx(jcost.run_train_cost), jcost.TrainCostResult),
        "cost.serve": Runner("/cost/serve", "Cost of serving a load", b.ServeCostBody,
                             _with_ctx(jcost.run_serve_cost), jcost.ServeCostResult),
        "cost.powercap": Runner("/cost/powercap", "Power-cap what-if", b.PowerCapBody,
                                _with_ctx(jcost.run_power_cap), jcost.PowerCapResult),
        "simulate": Runner("/simulate", "Request-level simulation of a serving fleet (long: see /jobs)",
                           b.SimulateBody, _simulate, SimulationResult),
        "fleet.optimize": Runner("/fleet/optimize", "Cheapest hardware mix serving request classes",
                                 b.FleetBody, _with_ctx(jf.run_fleet_optimize), FleetPlan),
    }


#: Job kinds (also the background kinds of ``POST /api/v1/jobs``): kind -> runner.
RUNNERS: dict[str, Runner] = _runners()


def respond(result: Any) -> JSONResponse:
    """A job's typed result as the response (the ``--json`` document)."""
    return JSONResponse(result.to_dict())


# ------------------------------------------------------------------------------------------ routes
#: Longest simulated duration (s of arrivals) the synchronous ``/simulate`` runs; longer ones are
#: background jobs (``POST /api/v1/jobs``), which report progress and can be cancelled.
SYNC_MAX_SIM_S = 3600.0


def _check_sync(kind: str, body: Any) -> None:
    """Refuse on the synchronous endpoint what belongs in the background (a long simulation)."""
    if kind != "simulate":
        return
    from xpuplan.errors import UserInputError

    duration = body.duration if body.duration is not None else body.scenario.get("duration_s")
    if isinstance(duration, int | float) and duration > SYNC_MAX_SIM_S:
        raise UserInputError(f"{duration:g} s of arrivals is longer than the {SYNC_MAX_SIM_S:g} s simulated here",
                             field="duration" if body.duration is not None else "scenario.duration_s",
                             hint='run it in the background: POST /api/v1/jobs {"kind": "simulate", "request": ...}')


#: Kinds whose result has a report (``--report``): ``?format=html|md`` returns it instead of JSON.
REPORT_KINDS = frozenset({"recommend", "train.search", "infer.capacity", "simulate", "fleet.optimize"})
ReportFormat = Literal["json", "html", "md"]
REPORT_CONTENT: dict[int | str, dict[str, Any]] = {200: {"content": {
    "text/html": {"schema": {"type": "string"}}, "text/markdown": {"schema": {"type": "string"}}}}}
_FORMAT_DOC = ("json (default): the typed result; html or md: the same report as the CLI's --report out.html / "
               "out.md (xpuplan.report), rendered from that result")


def report_response(result: Any, fmt: str) -> Response:
    """``result`` as JSON, or as its HTML or Markdown report (the renderer ``--report`` uses)."""
    if fmt == "json":
        return respond(result)
    from xpuplan.report import render_html, render_markdown

    if fmt == "html":
        return HTMLResponse(render_html(result))
    return Response(render_markdown(result), media_type="text/markdown; charset=utf-8")


def _route(kind: str, runner: Runner) -> None:
    handler: Callable[..., Any]
    if kind in REPORT_KINDS:
        def handler(request: Request, body: Any, format: ReportFormat = "json") -> Any:  # noqa: A002
            _check_sync(kind, body)
            return report_response(runner.execute(body, context(request), None), format)

        handler.__annotations__ = {"request": Request, "body": runner.body,
                                   "format": Annotated[ReportFormat, Query(description=_FORMAT_DOC)], "return": Any}
    else:
        def handler(request: Request, body: Any) -> Any:
            _check_sync(kind, body)
            return respond(runner.execute(body, context(request), None))

        handler.__annotations__ = {"request": Request, "body": runner.body, "return": Any}
    handler.__name__ = kind.replace(".", "_")
    router.add_api_route(runner.path, handler, methods=["POST"], summary=runner.summary,
                         description=(runner.body.__doc__ or "").strip(), response_model=runner.result,
                         responses={**INFEASIBLE, **NOT_FOUND, **(REPORT_CONTENT if kind in REPORT_KINDS else {})},
                         operation_id=kind.replace(".", "_"))


for _kind, _runner in RUNNERS.items():
    _route(_kind, _runner)


# ------------------------------------------------------------------------------------------ validate
def _validate_result() -> type[BaseModel]:
    from xpuplan.jobs.validate import ValidateResult

    return ValidateResult


def _upload_name(filename: str | None) -> str:
    """The uploaded file's base name, for messages only (never opened)."""
    import re

    base = (filename or "upload.csv").replace("\\", "/").rsplit("/", 1)[-1]
    return re.sub(r"[^A-Za-z0-9._-]", "_", base)[:100] or "upload.csv"


@router.post("/validate", summary="Validate predictions against your measurements (CSV upload)",
             response_model=None, responses={200: {"model": _validate_result()}, **NOT_FOUND},
             operation_id="validate")
async def validate_endpoint(
    request: Request,
    file: Annotated[UploadFile, File(description="validation CSV (docs/validation.md columns), UTF-8")],
    kind: Annotated[Literal["train", "infer"] | None, Form(description="only rows of this kind")] = None,
    trust: Annotated[str | None, Form(max_length=20, description="only these trust grades, e.g. A,B")] = None,
) -> Any:
    from starlette.concurrency import run_in_threadpool

    from xpuplan.jobs.requests import parse_request
    from xpuplan.jobs.validate import ValidateRequest, validate_upload

    data = await file.read()
    req = parse_request(ValidateRequest, {"kind": kind, "trust": trust})
    result = await run_in_threadpool(validate_upload, data, _upload_name(file.filename), req, context(request))
    return respond(result)
