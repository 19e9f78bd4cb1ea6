"""Reports of typed job results: a self-contained HTML page or Markdown, chosen by the file suffix.

One module per result, each with ``render_html(result) -> str`` and ``render_markdown(result) -> str``
over the same object ``--json`` prints (so the numbers are the same):

=====================  ======================================  ===========================
command                result                                  renderer
=====================  ======================================  ===========================
``recommend``          ``decide.result.Recommendation``        :mod:`.recommend`
``train search``       ``jobs.train.TrainSearchResult``        :mod:`.train`
``infer capacity``     ``jobs.serve.CapacityResult``           :mod:`.capacity`
``simulate``           ``serve.sim.result.SimulationResult``   :mod:`.simulate`
``fleet optimize``     ``fleet.optimize.FleetPlan``            :mod:`.fleet`
=====================  ======================================  ===========================

All share :mod:`.page` (CSS, header with version/schema/date, the "figures used, with trust"
footer), :mod:`.svg` (inline charts) and :mod:`.format` (display units). :func:`write_report`
writes atomically: a temporary file in the target directory, then a rename.
"""

from __future__ import annotations

import importlib
import os
import tempfile
from pathlib import Path
from typing import Any

from xpuplan.errors import UserInputError
from xpuplan.report.page import CSS

#: Result class name -> renderer module.
RENDERERS = {
    "Recommendation": "xpuplan.report.recommend",
    "TrainSearchResult": "xpuplan.report.train",
    "CapacityResult": "xpuplan.report.capacity",
    "SimulationResult": "xpuplan.report.simulate",
    "FleetPlan": "xpuplan.report.fleet",
}
#: File suffix -> format.
FORMATS = {".html": "html", ".htm": "html", ".md": "markdown"}


def _renderer(result: Any) -> Any:
    name = type(result).__name__
    if name not in RENDERERS:
        raise TypeError(f"no report renderer for {name}")
    return importlib.import_module(RENDERERS[name])


def _lang_kw(fn: Any, lang: str | None) -> dict[str, str]:
    """``lang=`` for a renderer that is written in several languages (the others are English; a
    recommendation carries its own language)."""
    import inspect

    return {"lang": lang} if lang is not None and "lang" in inspect.signature(fn).parameters else {}


def render_html(result: Any, lang: str | None = None) -> str:
    """The self-contained HTML report of ``result`` (in ``lang`` where its renderer has that language)."""
    fn = _renderer(result).render_html
    return str(fn(result, **_lang_kw(fn, lang)))


def render_markdown(result: Any, lang: str | None = None) -> str:
    """The Markdown report of ``result`` (in ``lang`` where its renderer has that language)."""
    fn = _renderer(result).render_markdown
    return str(fn(result, **_lang_kw(fn, lang)))


def report_format(path: str | Path) -> str:
    """'html' or 'markdown' from the suffix of ``path``; any other suffix is a user error naming ``--report``.
    Front ends call it before the job runs, so a bad name fails fast."""
    p = Path(path)
    fmt = FORMATS.get(p.suffix.lower())
    if fmt is None:
        raise UserInputError(f"the report file must end in .html, .htm or .md (got {p.name!r})", field="--report")
    if not p.parent.is_dir():
        raise UserInputError(f"the report's directory {str(p.parent)!r} does not exist", field="--report")
    return fmt


def write_report(result: Any, path: str | Path, lang: str | None = None) -> Path:
    """Write the report of ``result`` to ``path`` (HTML for ``.html``/``.htm``, Markdown for ``.md``), in
    ``lang`` (en, zh) where its renderer has that language.

    Written to a temporary file beside ``path`` and renamed over it, so an interrupted run never
    leaves half a report."""
    p = Path(path)
    fmt = report_format(p)
    text = render_html(result, lang) if fmt == "html" else render_markdown(result, lang)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes 0600; a report is an ordinary file
        os.replace(tmp, p)
        tmp = None
    except OSError as exc:
        raise UserInputError(f"cannot write the report {str(p)!r}: {exc.strerror}", field="--report") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return p


__all__ = ["CSS", "FORMATS", "RENDERERS", "render_html", "render_markdown", "report_format", "write_report"]
