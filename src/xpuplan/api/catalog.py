"""Catalog endpoints: hardware and models (list, show, compare; every figure with source and trust),
and the scenario presets of ``recommend``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from xpuplan.api.errors import NOT_FOUND, NotFoundError
from xpuplan.errors import UserInputError
from xpuplan.jobs import catalog as jc
from xpuplan.jobs.context import RunContext

router = APIRouter(tags=["catalog"])

#: An id in the URL.
PathId = Annotated[str, Path(min_length=1, max_length=200, description="id or alias")]


def context(request: Request) -> RunContext:
    ctx: RunContext = request.app.state.context
    return ctx


def _device_or_404(ctx: RunContext, name: str) -> str:
    from xpuplan.errors import UnknownIdError

    try:
        return ctx.catalog.get(name).id
    except UnknownIdError as exc:  # the catalog's own suggestions (ids and aliases), as the CLI shows them
        raise NotFoundError(exc.message, field="id", hint=exc.hint) from None


@router.get("/hardware", summary="List devices (headline dense figures)", response_model=jc.HwListResult,
            responses={200: {"model": jc.HwListResult}})
def hardware_list(
    request: Request,
    vendor: Annotated[str | None, Query(max_length=200, description="only this vendor (NVIDIA, Huawei, ...)")] = None,
    kind: Annotated[str | None, Query(max_length=10, description="GPU, NPU, TPU or CPU")] = None,
    origin: Annotated[str | None, Query(max_length=200, description="designer's country code, e.g. CN")] = None,
) -> Any:
    from xpuplan.jobs.requests import parse_request

    req = parse_request(jc.HwListRequest, {"vendor": vendor, "kind": kind, "origin": origin})
    return JSONResponse(jc.hw_list(req, context(request)).to_dict())


@router.get("/hardware/compare", summary="Compare devices side by side", response_model=jc.HwCompareResult,
            responses=NOT_FOUND)
def hardware_compare(
    request: Request,
    ids: Annotated[str, Query(min_length=1, max_length=4000, description="comma-separated ids, e.g. H100,910B")],
) -> Any:
    ctx = context(request)
    names = [x.strip() for x in ids.split(",") if x.strip()]
    if len(names) < 2:
        raise UserInputError("give at least two devices to compare, comma-separated", field="ids")
    if len(names) > 64:
        raise UserInputError(f"{len(names)} devices; at most 64 in one comparison", field="ids")
    resolved = [_device_or_404(ctx, n) for n in names]
    return JSONResponse(jc.hw_compare(resolved, ctx).to_dict())


@router.get("/hardware/{id}", summary="Every figure of one device with range, source and trust",
            response_model=jc.HwShowResult, responses=NOT_FOUND)
def hardware_show(request: Request, id: PathId) -> Any:
    ctx = context(request)
    return JSONResponse(jc.hw_show(_device_or_404(ctx, id), ctx).to_dict())


@router.get("/models", summary="List preset models", response_model=jc.ModelListResult)
def models_list(request: Request) -> Any:
    return JSONResponse(jc.model_list(context(request)).to_dict())


@router.get("/models/{id}", summary="Architecture and parameter breakdown of one model",
            response_model=jc.ModelShowResult, responses=NOT_FOUND)
def models_show(request: Request, id: PathId) -> Any:
    from xpuplan.errors import UnknownIdError
    from xpuplan.models.presets import load_model_catalog

    try:  # ids and aliases only: a path is never read
        model_id = load_model_catalog().get(id).id
    except UnknownIdError as exc:
        raise NotFoundError(exc.message, field="id", hint=exc.hint) from None
    return JSONResponse(jc.model_show(model_id, context(request)).to_dict())


@router.get("/presets", summary="Scenario presets of recommend", response_model=list[dict[str, Any]])
def presets() -> Any:
    from xpuplan.decide.scenario import list_presets, preset

    out = []
    for name in list_presets():
        s = preset(name)
        out.append({"id": name, "title": s.title, "title_zh": s.title_zh, "model": s.model,
                    "scenario": s.model_dump(mode="json")})
    return JSONResponse(out)
