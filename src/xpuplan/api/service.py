"""Background jobs, saved scenarios and results, metrics.

* ``POST /jobs`` ``{"kind", "request"}`` -> 202 ``{id, status, result_url, ...}``; ``GET /jobs/{id}``
  (status, progress 0..1); ``GET /jobs/{id}/result``; ``DELETE /jobs/{id}`` cancels; ``GET /jobs``.
* ``GET/POST /scenarios``, ``GET /scenarios/{id}``, ``POST /scenarios/{id}/run`` (a background job).
* ``GET /results``, ``GET /results/{id}``: finished results, kept in the store across restarts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from xpuplan.api.bodies import Body
from xpuplan.api.errors import INFEASIBLE, NOT_FOUND, ErrorOut, NotFoundError, error_body, field_path
from xpuplan.api.planning import REPORT_KINDS, RUNNERS, ReportFormat, report_response
from xpuplan.errors import UserInputError

router = APIRouter()

if TYPE_CHECKING:
    Kind = str
else:
    #: Job kinds, in the order of :data:`RUNNERS`.
    Kind = Literal[tuple(RUNNERS)]
Status = Literal["queued", "running", "succeeded", "failed", "cancelled", "interrupted"]
JobId = Annotated[str, Path(min_length=1, max_length=64, description="job id (32 hex characters)")]
TOO_MANY: dict[int | str, dict[str, Any]] = {429: {"model": ErrorOut, "description": "too many jobs pending"}}


class JobSubmit(Body):
    """A background job: ``request`` is the body the synchronous endpoint of ``kind`` takes."""

    kind: Kind = Field(description="what to run: recommend, train.search, simulate, ... (the endpoint's path)")
    request: dict[str, Any] = Field(default_factory=dict, description="the body of that endpoint")


class JobOut(BaseModel):
    """A background job's state."""

    id: str
    kind: str
    status: Status
    progress: float = Field(ge=0, le=1, description="fraction done (jobs that report no progress: 0 until done)")
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    cancel_requested: bool = False
    status_url: str
    result_url: str


class ScenarioIn(Body):
    """A scenario to save: the inputs of one job kind (validated as that endpoint's body)."""

    name: str = Field(min_length=1, max_length=200)
    kind: Kind = Field(description="the job kind the inputs are for (recommend, train.estimate, ...)")
    inputs: dict[str, Any] = Field(description="the body of that endpoint")
    result: dict[str, Any] | None = Field(default=None, description="a result to keep with it")
    note: str | None = Field(default=None, max_length=2000)


class ScenarioSummary(BaseModel):
    id: int
    name: str
    kind: str
    created_at: str | None
    note: str | None
    has_result: bool


class ScenarioOut(ScenarioSummary):
    inputs: dict[str, Any]
    result: dict[str, Any] | None


class ResultSummary(BaseModel):
    id: str
    kind: str
    finished_at: str | None
    result_url: str


def _job_out(request: Request, rec: dict[str, Any]) -> dict[str, Any]:
    prefix = request.app.state.prefix
    out = {k: rec.get(k) for k in ("id", "kind", "status", "progress", "created_at", "started_at", "finished_at")}
    out["cancel_requested"] = bool(rec.get("cancel_requested", False))
    out["status_url"] = f"{prefix}/jobs/{rec['id']}"
    out["result_url"] = f"{prefix}/jobs/{rec['id']}/result"
    return out


def _validated(kind: str, data: dict[str, Any], where: str) -> BaseModel:
    """``data`` as the body of ``kind``; errors name ``where.field``."""
    body_type = RUNNERS[kind].body
    try:
        return body_type.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, UserInputError):
            body = error_body(cause, prefix=where)
            raise UserInputError(body["error"], field=body["field"], hint=body["hint"]) from None
        loc = field_path(tuple(err.get("loc") or ()))
        msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        raise UserInputError(msg, field=f"{where}.{loc}" if loc else where) from None


def _background(request: Request) -> Any:
    return request.app.state.background


def _saved(request: Request) -> Any:
    return request.app.state.saved


def _submit(request: Request, kind: str, body: BaseModel) -> JSONResponse:
    from xpuplan.api.background import TooManyJobs

    try:
        rec = _background(request).submit(kind, body)
    except TooManyJobs:
        return JSONResponse(status_code=429, content={"error": "too many background jobs pending; retry later",
                                                      "field": None, "hint": None})
    out = _job_out(request, rec)
    return JSONResponse(status_code=202, content=out, headers={"Location": out["status_url"]})


def _job_or_404(request: Request, job_id: str, *, with_payload: bool = False) -> dict[str, Any]:
    rec = _background(request).status(job_id, with_payload=with_payload)
    if rec is None:
        raise NotFoundError.unknown("job", job_id, _background(request).known_ids(), field="id")
    return rec


# ------------------------------------------------------------------------------------------ jobs
@router.post("/jobs", status_code=202, response_model=JobOut, tags=["jobs"], responses=TOO_MANY,
             summary="Run a job in the background (202 with its status and result URLs)")
def submit_job(request: Request, job: JobSubmit) -> Any:
    return _submit(request, job.kind, _validated(job.kind, job.request, "request"))


@router.get("/jobs", response_model=list[JobOut], tags=["jobs"], summary="Recent background jobs")
def list_jobs(
    request: Request,
    status: Annotated[Status | None, Query(description="only jobs in this status")] = None,
    kind: Annotated[Kind | None, Query(description="only jobs of this kind")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Any:
    recs = _saved(request).list_jobs(status=status, kind=kind, limit=limit)
    return JSONResponse([_job_out(request, _background(request).status(r["id"]) or r) for r in recs])


@router.get("/jobs/{id}", response_model=JobOut, tags=["jobs"], responses=NOT_FOUND,
            summary="A background job's status and progress (0..1)")
def job_status(request: Request, id: JobId) -> Any:
    return JSONResponse(_job_out(request, _job_or_404(request, id)))


@router.get("/jobs/{id}/result", tags=["jobs"], response_model=dict[str, Any],
            responses={202: {"model": JobOut, "description": "not finished yet: the job's status"},
                       **NOT_FOUND, **INFEASIBLE},
            summary="The result of a finished job (the same JSON as the endpoint of its kind)")
def job_result(request: Request, id: JobId,
               format: Annotated[ReportFormat, Query(description="json (default), or html/md: the report of "  # noqa: A002
                                                                "a recommend, train.search, infer.capacity, "
                                                                "simulate or fleet.optimize job")] = "json") -> Any:
    rec = _job_or_404(request, id, with_payload=True)
    if format != "json" and rec["kind"] not in REPORT_KINDS:
        raise UserInputError(f"a {rec['kind']} job has no report: use format=json", field="format",
                             hint=f"reports: {', '.join(sorted(REPORT_KINDS))}")
    if rec["status"] in ("queued", "running"):
        return JSONResponse(status_code=202, content=_job_out(request, rec))
    if rec["status"] == "succeeded":
        if format == "json":
            return JSONResponse(rec["result"])
        # the stored JSON read back as the typed result, rendered as the endpoint of its kind does
        return report_response(RUNNERS[rec["kind"]].result.model_validate(rec["result"]), format)
    if rec["status"] == "cancelled":
        return JSONResponse(status_code=409, content={"error": "the job was cancelled", "field": None, "hint": None})
    err = rec.get("error") or {"status": 409, "body": {"error": f"the job {rec['status']}", "field": None,
                                                       "hint": None}}
    return JSONResponse(status_code=int(err["status"]), content=err["body"])


@router.delete("/jobs/{id}", response_model=JobOut, tags=["jobs"], responses=NOT_FOUND,
               summary="Cancel a background job (a finished job is left as it is)")
def cancel_job(request: Request, id: JobId) -> Any:
    _job_or_404(request, id)
    rec = _background(request).cancel(id)
    return JSONResponse(_job_out(request, rec))


# ------------------------------------------------------------------------------------------ results
@router.get("/results", response_model=list[ResultSummary], tags=["results"],
            summary="Finished results of background jobs (kept across restarts)")
def list_results(
    request: Request,
    kind: Annotated[Kind | None, Query(description="only results of this kind")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Any:
    prefix = request.app.state.prefix
    recs = _saved(request).list_jobs(status="succeeded", kind=kind, limit=limit)
    return JSONResponse([{"id": r["id"], "kind": r["kind"], "finished_at": r["finished_at"],
                          "result_url": f"{prefix}/results/{r['id']}"} for r in recs])


@router.get("/results/{id}", response_model=dict[str, Any], tags=["results"], responses=NOT_FOUND,
            summary="One finished result (the same JSON as the endpoint of its kind)")
def get_result(request: Request, id: JobId) -> Any:
    rec = _background(request).status(id, with_payload=True)
    if rec is None or rec["status"] != "succeeded":
        known = [r["id"] for r in _saved(request).list_jobs(status="succeeded", limit=200)]
        raise NotFoundError.unknown("result", id, known, field="id")
    return JSONResponse(rec["result"])


# ------------------------------------------------------------------------------------------ scenarios
@router.post("/scenarios", status_code=201, response_model=ScenarioOut, tags=["scenarios"],
             summary="Save a scenario (the inputs of one job kind, checked now)")
def save_scenario(request: Request, body: ScenarioIn) -> Any:
    _validated(body.kind, body.inputs, "inputs")
    out = _saved(request).save_scenario(body.name, body.kind, body.inputs, result=body.result, note=body.note)
    return JSONResponse(status_code=201, content=out)


@router.get("/scenarios", response_model=list[ScenarioSummary], tags=["scenarios"], summary="Saved scenarios")
def list_scenarios(
    request: Request,
    kind: Annotated[Kind | None, Query(description="only scenarios of this kind")] = None,
) -> Any:
    return JSONResponse(_saved(request).list_scenarios(kind=kind))


def _scenario_or_404(request: Request, ref: str) -> dict[str, Any]:
    sc = _saved(request).get_scenario(ref)
    if sc is None:
        raise NotFoundError.unknown("scenario", ref, _saved(request).scenario_names(), field="id")
    return dict(sc)


@router.get("/scenarios/{id}", response_model=ScenarioOut, tags=["scenarios"], responses=NOT_FOUND,
            summary="One saved scenario, by id or name (the newest of that name)")
def get_scenario(request: Request, id: Annotated[str, Path(min_length=1, max_length=200)]) -> Any:
    return JSONResponse(_scenario_or_404(request, id))


@router.post("/scenarios/{id}/run", status_code=202, response_model=JobOut, tags=["scenarios"],
             responses={**NOT_FOUND, **TOO_MANY}, summary="Run a saved scenario as a background job")
def run_scenario(request: Request, id: Annotated[str, Path(min_length=1, max_length=200)]) -> Any:
    sc = _scenario_or_404(request, id)
    if sc["kind"] not in RUNNERS:
        raise UserInputError(f"scenario kind {sc['kind']!r} cannot be run here", field="kind")
    return _submit(request, sc["kind"], _validated(sc["kind"], sc["inputs"], "inputs"))
