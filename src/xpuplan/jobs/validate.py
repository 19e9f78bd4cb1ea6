"""Validation job: ``xpuplan validate`` (predictions vs published or local measurements).

With no file and no ``--local`` run, every public validation file shipped in the package is
validated (``--public`` says so explicitly). Each file is read and checked whole before any
prediction (a file that cannot be read is refused with its name, line and field: exit 2); after
that no row aborts the run: a row that cannot be predicted keeps its reason. The result lists
every row with its error, the statistics by trust, metric, hardware and hardware family, and the
per-family error statistics the uncertainty bands are made of (computed on these rows, now).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, field_validator

from xpuplan.errors import UserInputError
from xpuplan.jobs.context import RunContext, default_context
from xpuplan.jobs.requests import Request, names_flags
from xpuplan.jobs.results import Result, clean, used

if TYPE_CHECKING:
    from xpuplan.catalog.assumptions import Assumptions
    from xpuplan.validate.core import ValidationReport, ValidationRow


class ValidateRequest(Request):
    """``xpuplan validate``."""

    FLAGS: ClassVar = {"files": "FILE.csv"}

    files: list[str] = Field(default_factory=list, description="validation CSVs; none: the packaged public files")
    public: bool = Field(default=False, description="validate the public files shipped with the package")
    kind: Literal["train", "infer"] | None = Field(default=None, description="only rows of this kind")
    trust: str | None = Field(default=None, description="only these trust grades, comma-separated (A-D)")
    local: str | None = Field(default=None, description="a stored run id (or 'latest') instead of CSVs")
    db: str | None = Field(default=None, description="store for --local")

    @field_validator("trust")
    @classmethod
    def _grades(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from xpuplan.validate.rows import TRUST_GRADES

        grades = [g.strip().upper() for g in value.split(",") if g.strip()]
        bad = [g for g in grades if g not in TRUST_GRADES]
        if bad or not grades:
            raise UserInputError(f"unknown trust grade(s) {', '.join(bad) or repr(value)}; grades are "
                                 f"{', '.join(TRUST_GRADES)} (e.g. --trust A,B)", field="--trust")
        return ",".join(grades)

    def grades(self) -> set[str] | None:
        return set(self.trust.split(",")) if self.trust else None


class ValidateResult(Result):
    """Every row's prediction (or the reason it has none) and its error, with summaries."""

    NAME: ClassVar[str] = "validate"

    title: str = Field(description="what was validated")
    files: list[str] = Field(description="CSV files read (empty for a stored run)")
    rows: list[dict[str, Any]] = Field(description="one entry per row: id, kind, metric, hardware, trust, source, "
                                                   "measured, predicted, error (predicted/measured - 1), reason, details")
    summary: dict[str, Any] = Field(description="coverage and |error| statistics overall and by trust, metric, "
                                                "hardware, family and source (percent)")
    families: dict[str, Any] = Field(description="per kind and hardware family: rows, trust grades, P10/P90 of "
                                                 "measured/predicted - 1 (what the uncertainty bands are built from)")


def _filter(rows: list[ValidationRow], req: ValidateRequest) -> list[ValidationRow]:
    grades = req.grades()
    return [r for r in rows if (req.kind is None or r.kind == req.kind) and (grades is None or r.trust in grades)]


def _assumptions(ctx: RunContext, rows: list[ValidationRow]) -> Assumptions:
    from xpuplan.errors import UnknownIdError

    devices = {}
    for r in rows:
        try:
            d = ctx.catalog.get(r.hardware)
        except UnknownIdError:
            continue  # the row says so when it is predicted
        devices[d.id] = d
    return ctx.assumptions(list(devices.values()))


def _result(report: ValidationReport, title: str, files: list[str], assumptions: Assumptions | None) -> ValidateResult:
    from xpuplan.validate.band import KINDS, family_stats

    families = {k: family_stats(r for r in report.rows if r.kind == k) for k in KINDS}
    return ValidateResult(
        title=title, files=files, rows=[clean(r.to_dict()) for r in report.rows], summary=clean(report.summary()),
        families=clean({k: v for k, v in families.items() if v}),
        used=used(assumptions, [], []) if assumptions is not None else None,
    )


@names_flags
def validate(req: ValidateRequest, ctx: RunContext | None = None) -> ValidateResult:
    """Validate CSV files (or the packaged public ones, or a stored run) under the context's assumptions."""
    ctx = ctx or default_context()
    if req.local is not None and (req.files or req.public):
        raise UserInputError("give CSV files (or --public) or --local RUN, not both", field="--local")
    if req.files and req.public:
        raise UserInputError("give CSV files or --public, not both", field="--public")
    from xpuplan.validate import ValidationReport, public_files, read_rows, validate_rows

    if req.local is not None:
        from xpuplan.bench.local_validation import validate_run
        from xpuplan.store.engine import open_store

        run, report = validate_run(open_store(req.db or ctx.db_url), req.local)
        grades = req.grades()
        report = ValidationReport([r for r in report.rows if (req.kind is None or r.kind == req.kind)
                                   and (grades is None or r.trust in grades)])
        title = f"validation: run {run.id} ({run.kind}, {run.device_name or run.device_id or run.source})"
        return _result(report, title, [], None)
    files = list(req.files) or [str(p) for p in public_files()]
    rows = [r for f in files for r in read_rows(f)]  # every file checked before any prediction
    rows = _filter(rows, req)
    if not rows:
        raise UserInputError("no row matches --kind/--trust", field="--trust" if req.trust else "--kind")
    a = _assumptions(ctx, rows)
    report = validate_rows(rows, a)
    shown = files if req.files else ["packaged public files: " + ", ".join(p.name for p in public_files())]
    return _result(report, f"validation: {', '.join(shown)}", files, a)


#: Largest uploaded validation CSV accepted (bytes).
MAX_UPLOAD_BYTES = 8 * 1024 * 1024


@names_flags
def validate_upload(data: bytes, name: str, req: ValidateRequest, ctx: RunContext | None = None) -> ValidateResult:
    """Validate an uploaded CSV (its bytes; ``name`` is how errors and the result call it).

    Nothing is read from disk on the uploader's behalf: a row's ``model`` must be a preset id or
    alias of the model catalog, never a path to a config file (the row says so, naming its line).
    ``req``'s ``kind`` and ``trust`` filter the rows; ``files``, ``public`` and ``local`` are refused."""
    ctx = ctx or default_context()
    if req.files or req.public or req.local is not None:
        raise UserInputError("an upload is validated alone (no files, public or local)", field="file")
    if len(data) > MAX_UPLOAD_BYTES:
        raise UserInputError(f"{len(data):,} bytes; at most {MAX_UPLOAD_BYTES:,} per upload", field="file")
    from xpuplan.models.presets import load_model_catalog
    from xpuplan.validate import validate_rows
    from xpuplan.validate.rows import _decode, parse_rows

    rows = parse_rows(_decode(data, name), name)
    models = load_model_catalog()
    for r in rows:
        m = r.get("model")
        if m is not None and str(m) not in models:
            raise UserInputError(f"model {str(m)[:80]!r} is not a model id or alias of the catalog (an upload "
                                 "reads no config file)", file=name, line=r.line, field="model")
    rows = _filter(rows, req)
    if not rows:
        raise UserInputError("no row matches kind/trust" if (req.kind or req.trust) else "no rows",
                             field="--trust" if req.trust else "--kind" if req.kind else "file")
    a = _assumptions(ctx, rows)
    return _result(validate_rows(rows, a), f"validation: {name}", [name], a)
