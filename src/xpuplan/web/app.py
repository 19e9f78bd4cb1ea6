"""The web page: the HTTP API (:mod:`xpuplan.api`) plus the pages, their assets and a few page helpers.

Routes added to the API app:

- ``/`` the recommend page (main page), ``/catalog`` the hardware catalog and comparison;
- ``/static/…`` the page's CSS and JavaScript (package data, no CDN) and ``/static/vendor/plotly.min.js``
  served from the installed ``plotly`` package;
- ``/ui/i18n/{lang}.json`` the translation catalogue the CLI uses (``xpuplan.i18n``);
- ``/ui/meta`` presets (resolved scenarios and their leaf weights) and the criteria tree;
- ``/ui/roofline``, ``/ui/memory/train``, ``/ui/memory/infer``: the jobs behind the roofline chart
  and the memory breakdown of a ranked option;
- ``/ui/models``: an uploaded Hugging Face ``config.json``, kept in a folder of this server and named
  ``upload:<hash>``; ``/ui/recommend`` is ``POST /api/v1/recommend`` for a scenario whose model is such
  an upload (the API itself takes catalog models only: no client-supplied path is ever read);
- ``/ui/scenario.yaml``: the form's scenario as the YAML file ``xpuplan recommend`` takes;
- ``/ui/report.html``: a recommendation (the JSON the page shows) as the self-contained HTML report of
  ``xpuplan recommend --report out.html`` (same renderer, same stylesheet as the page).

Everything here parses a request, calls a job and returns its typed result; no math.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from xpuplan.api.app import create_app as create_api_app
from xpuplan.errors import UserInputError
from xpuplan.i18n import LANGS, catalogue
from xpuplan.report.svg import LEAF_COLOURS, LINE_COLOURS

STATIC = resources.files("xpuplan.web") / "static"
#: Prefix of an uploaded model's reference in a scenario sent by the page.
UPLOAD_PREFIX = "upload:"
#: Largest config.json accepted (bytes).
MAX_CONFIG_BYTES = 512 * 1024
#: The HTML report's stylesheet, shared with the page (xpuplan.report).
REPORT_CSS = resources.files("xpuplan.report") / "style.css"
_CONTENT_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                  ".svg": "image/svg+xml"}


def plotly_js() -> Path | None:
    """``plotly.min.js`` shipped inside the installed ``plotly`` package (None: not installed)."""
    try:
        import plotly
    except ImportError:
        return None
    p = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return p if p.is_file() else None


@cache
def _page(name: str) -> str:
    return (STATIC / name).read_text(encoding="utf-8")


def _error(status: int, message: str, field: str | None = None, hint: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "field": field, "hint": hint}, status_code=status)


def _user_error(exc: UserInputError) -> JSONResponse:
    return _error(422, exc.message, exc.field, exc.hint)


async def _body(request: Request) -> Any:
    """The request's JSON body: a 400 naming ``body`` when it is not JSON, as the API answers (api.errors)."""
    try:
        return await request.json()
    except ValueError as exc:
        raise StarletteHTTPException(400, f"the request body is not valid JSON: {exc}") from None


class Uploads:
    """Uploaded ``config.json`` files of one server: ``upload:<hash>`` -> a file in a folder of its own.

    The file is named after the model (``_name_or_path``'s last part, else the uploaded file's name,
    else ``model_type``) so the imported model's id reads as it would from the CLI."""

    def __init__(self) -> None:
        self._dir: tempfile.TemporaryDirectory[str] | None = None  # created on the first upload, removed at exit
        self._files: dict[str, Path] = {}

    def add(self, raw: bytes, filename: str | None = None) -> str:
        from xpuplan.models.hf_import import arch_from_hf_config

        if len(raw) > MAX_CONFIG_BYTES:
            raise UserInputError(f"config.json is larger than {MAX_CONFIG_BYTES:,} bytes", field="config.json")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise UserInputError(f"not a JSON file ({exc})", field="config.json") from None
        arch_from_hf_config(data, file="config.json", lines={})  # refuses what is not a supported config
        stem = Path(filename or "").stem
        for cand in (str(data.get("_name_or_path") or "").rstrip("/").rsplit("/", 1)[-1],
                     "" if stem.lower() in ("", "config") else stem, str(data.get("model_type") or ""), "uploaded-model"):
            name = re.sub(r"[^A-Za-z0-9._-]+", "-", cand).strip("-.")[:80]
            if name:
                break
        if self._dir is None:
            self._dir = tempfile.TemporaryDirectory(prefix="xpuplan-web-models-")
        key = hashlib.sha256(raw + name.encode()).hexdigest()[:16]
        folder = Path(self._dir.name) / key
        folder.mkdir(exist_ok=True)
        f = folder / f"{name}.json"
        f.write_bytes(raw)
        self._files[key] = f
        return UPLOAD_PREFIX + key

    def path(self, ref: str, field: str = "model") -> str:
        """The server's file of ``upload:<hash>`` (a clear error for an unknown or expired upload)."""
        f = self._files.get(ref.removeprefix(UPLOAD_PREFIX))
        if f is None or not f.is_file():
            raise UserInputError("this uploaded model is not on the server (it restarted?): upload the "
                                 "config.json again", field=field)
        return str(f)

    def resolve(self, name: Any, field: str = "model") -> Any:
        return self.path(name, field) if isinstance(name, str) and name.startswith(UPLOAD_PREFIX) else name


def _meta() -> dict[str, Any]:
    from xpuplan.decide.scenario import list_presets, preset
    from xpuplan.decide.weights import criteria_data, make_weights

    cd = criteria_data()
    presets = {}
    for name in list_presets():
        s = preset(name)
        presets[name] = {"scenario": s.model_dump(mode="json", exclude_none=True),
                         "weights": make_weights(s.weights, s.weight_adjustments).to_dict()}
    return {"langs": list(LANGS), "groups": {g: list(v) for g, v in cd.groups.items()},
            "colours": {"criteria": LEAF_COLOURS, "lines": LINE_COLOURS},
            "default_weights": dict(cd.defaults), "weights_source": cd.source, "presets": presets}


def _scenario_yaml(data: Any) -> str:
    if not isinstance(data, dict) or not isinstance(data.get("scenario"), str):
        raise UserInputError("the body must be a scenario mapping with a 'scenario' key", field="scenario")
    head = "# Scenario from the xpuplan web page; run it with: xpuplan recommend this-file.yaml\n"
    if isinstance(data.get("model"), str) and data["model"].startswith(UPLOAD_PREFIX):
        data = {**data, "model": "config.json"}
        head += "# model: the config.json you uploaded, here read from the current directory (give its path)\n"
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=None, width=100)


#: Page routes served without the bearer token: the page shells, their static assets and the
#: translation catalogue hold no data (the page asks for the token when a data call gets 401).
PUBLIC_PATHS = ("/", "/catalog", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/", "/ui/i18n/")


def add_pages(app: FastAPI) -> FastAPI:
    """Add the page routes, assets and page helpers to ``app`` (the API app)."""
    ctx = app.state.context
    uploads = Uploads()
    app.state.open_paths.update(PUBLIC_PATHS)
    app.state.open_prefixes.extend(PUBLIC_PREFIXES)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> HTMLResponse:
        return HTMLResponse(_page("index.html"))

    @app.get("/catalog", response_class=HTMLResponse, include_in_schema=False)
    def catalog_page() -> HTMLResponse:
        return HTMLResponse(_page("catalog.html"))

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(_page("favicon.svg"), media_type=_CONTENT_TYPES[".svg"])

    @app.get("/static/vendor/plotly.min.js", include_in_schema=False)
    def plotly_asset() -> Response:
        p = plotly_js()
        if p is None:
            return Response("/* plotly is not installed: pip install plotly */", media_type="text/javascript",
                            status_code=404)
        return FileResponse(p, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    @app.get("/static/report.css", include_in_schema=False)
    def report_css() -> Response:
        return Response(REPORT_CSS.read_text(encoding="utf-8"), media_type=_CONTENT_TYPES[".css"])

    @app.get("/static/{name}", include_in_schema=False)
    def asset(name: str) -> Response:
        suffix = Path(name).suffix
        if "/" in name or "\\" in name or name.startswith(".") or suffix not in _CONTENT_TYPES:
            return _error(404, f"no asset {name!r}")
        f = STATIC / name
        if not f.is_file():
            return _error(404, f"no asset {name!r}")
        return Response(f.read_text(encoding="utf-8"), media_type=_CONTENT_TYPES[suffix])

    @app.get("/ui/i18n/{lang}.json", include_in_schema=False)
    def i18n(lang: str) -> Response:
        try:
            return JSONResponse(catalogue(lang))
        except UserInputError as exc:
            return _user_error(exc)

    @app.get("/ui/meta", include_in_schema=False)
    def meta() -> Response:
        return JSONResponse(_meta_cached())

    @app.get("/ui/roofline", include_in_schema=False)
    def roofline(hw: str, model: str, batch: int = 1, q_len: int = 1, kv_len: int = 2048, tp: int = 1,
                 dtype: str = "bf16") -> Response:
        from xpuplan.jobs.catalog import RooflineRequest
        from xpuplan.jobs.catalog import roofline as roofline_job

        return _run(lambda: roofline_job(RooflineRequest(hw=hw, model=uploads.resolve(model), batch=batch, q_len=q_len,
                                                         kv_len=kv_len, tp=tp, dtype=dtype),  # type: ignore[arg-type]
                                                ctx))

    @app.post("/ui/memory/train", include_in_schema=False)
    async def memory_train(request: Request) -> Response:
        from xpuplan.jobs.memory import MemoryTrainRequest, memory_train

        try:
            body = await _body(request)
        except UserInputError as exc:
            return _user_error(exc)
        return _run(lambda: memory_train(MemoryTrainRequest.model_validate(_with_model(body, uploads)), ctx))

    @app.post("/ui/memory/infer", include_in_schema=False)
    async def memory_infer(request: Request) -> Response:
        from xpuplan.jobs.memory import MemoryInferRequest, memory_infer

        try:
            body = await _body(request)
        except UserInputError as exc:
            return _user_error(exc)
        return _run(lambda: memory_infer(MemoryInferRequest.model_validate(_with_model(body, uploads)), ctx))

    @app.post("/ui/scenario.yaml", include_in_schema=False)
    async def scenario_yaml(request: Request) -> Response:
        try:
            text = _scenario_yaml(await _body(request))
        except UserInputError as exc:
            return _user_error(exc)
        return Response(text, media_type="application/x-yaml; charset=utf-8",
                        headers={"Content-Disposition": "attachment; filename=scenario.yaml"})

    @app.post("/ui/models", include_in_schema=False)
    async def upload_model(request: Request) -> Response:
        from xpuplan.jobs.catalog import model_show

        raw = await request.body()

        def add() -> dict[str, Any]:
            ref = uploads.add(raw, request.query_params.get("name"))
            return {"id": ref, "model": model_show(uploads.path(ref), ctx).model_dump(mode="json")}

        return _run(add)

    @app.post("/ui/recommend", include_in_schema=False)
    async def recommend_upload(request: Request) -> Response:
        def run(body: Any) -> Any:
            from xpuplan.api.safety import check_scenario
            from xpuplan.jobs.recommend import RecommendRequest, recommend

            if not isinstance(body, dict) or not isinstance(body.get("scenario"), dict):
                raise UserInputError("give {'scenario': {...}} with an uploaded model", field="scenario")
            sc = dict(body["scenario"])
            ref = sc.pop("model", None)
            if not (isinstance(ref, str) and ref.startswith(UPLOAD_PREFIX)):
                raise UserInputError("not an uploaded model: use POST /api/v1/recommend", field="scenario.model")
            check_scenario(sc)  # the rest of the scenario as the API checks it
            path = uploads.path(ref, "scenario.model")
            sc["model"] = path
            rest = {k: v for k, v in body.items() if k != "scenario"}
            rec = recommend(RecommendRequest(scenario=sc, **rest))
            # the result names the model by its id, never by the server's file
            from xpuplan.models import get_model

            return json.loads(rec.model_dump_json().replace(json.dumps(path)[1:-1], get_model(path).id))

        try:
            body = await _body(request)
        except UserInputError as exc:
            return _user_error(exc)
        return _run(lambda: run(body))

    @app.post("/ui/report.html", include_in_schema=False)
    async def report_html(request: Request) -> Response:
        from pydantic import ValidationError

        from xpuplan.decide.result import Recommendation
        from xpuplan.report import render_html

        try:
            rec = Recommendation.model_validate(await _body(request))
        except UserInputError as exc:
            return _user_error(exc)
        except ValidationError as exc:
            first = exc.errors()[0]
            return _error(422, f"not a recommendation: {first.get('msg')}",
                          ".".join(str(x) for x in first.get("loc", ())) or None)
        return HTMLResponse(render_html(rec),
                            headers={"Content-Disposition": "attachment; filename=recommendation.html"})

    return app


def _run(fn: Any) -> Response:
    from pydantic import ValidationError

    from xpuplan.errors import InfeasibleError

    try:
        out = fn()
    except UserInputError as exc:
        return _user_error(exc)
    except InfeasibleError as exc:
        res = exc.result
        body = exc.to_dict() | {"result": res.model_dump(mode="json") if hasattr(res, "model_dump") else res}
        return JSONResponse(body, status_code=409)
    except ValidationError as exc:
        first = exc.errors()[0]
        return _error(422, str(first.get("msg")), ".".join(str(x) for x in first.get("loc", ())))
    return JSONResponse(out if isinstance(out, dict) else out.model_dump(mode="json"))


def _with_model(body: Any, uploads: Uploads) -> Any:
    """``body`` with an uploaded ``model`` reference replaced by the server's file."""
    if isinstance(body, dict) and "model" in body:
        return {**body, "model": uploads.resolve(body["model"])}
    return body


@cache
def _meta_cached() -> dict[str, Any]:
    return _meta()


def create_app(**kwargs: Any) -> FastAPI:
    """The API app (``xpuplan.api.app.create_app(**kwargs)``) with the web page added."""
    return add_pages(create_api_app(**kwargs))


__all__ = ["add_pages", "create_app", "plotly_js"]
