"""Typed requests: every input of a job is checked once, here, whatever front end sent it.

A request is a frozen pydantic model whose field names are the CLI option names with ``-`` as
``_`` (``--global-batch`` is ``global_batch``; a field may name its flag explicitly, e.g. ``--in``).
:func:`parse_request` validates a mapping of values and turns the first problem into a
:class:`~xpuplan.errors.UserInputError` naming the field as the user typed it and echoing at most
~80 characters of the value. Field types below encode the physical ranges:

* numbers are finite (no NaN, no ±inf) and inside a stated range (``PositiveCount`` up to
  :data:`MAX_DEVICES`, sequence lengths up to :data:`MAX_SEQ_LEN`, ...);
* ids are ids: at most :data:`MAX_ID_LEN` characters, no control characters; a model may also be
  a path to an existing ``config.json`` (or a directory with one) — nothing else touches the disk;
* integer lists and ranges (``1:64``, ``8:1024:8``, ``1,2,4``) are counted *before* they are
  expanded and refused beyond :data:`MAX_RANGE_POINTS` values.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from xpuplan.errors import UserInputError, echo

#: Longest id (device, model, engine) accepted; longer names are refused before any lookup.
MAX_ID_LEN: Final = 200
#: Largest device count of any request (2**20 ~ one million accelerators; today's largest
#: published training clusters are ~100k GPUs).
MAX_DEVICES: Final = 1 << 20
#: Most values one range or list flag may expand to (``--devices-range``, ``--tp``, ``--batch``).
MAX_RANGE_POINTS: Final = 64
#: Longest sequence / context, tokens (2**24 ~ 16.8M; the longest published context windows are ~10M).
MAX_SEQ_LEN: Final = 1 << 24
#: Largest batch or concurrency of a serving replica.
MAX_BATCH: Final = 1 << 20
#: Largest parallel degree of one dimension (tp, pp, cp, ep, dp, vpp).
MAX_PARALLEL: Final = MAX_DEVICES
#: Largest token count (training tokens, tokens per step): 10**16, far beyond any published run (~3.6e13).
MAX_TOKENS: Final = 1e16
#: Largest request rate, requests/s.
MAX_QPS: Final = 1e9
#: Largest latency target, ms (one day).
MAX_LATENCY_MS: Final = 86_400_000.0
#: Plans shown by a search at most.
MAX_TOP: Final = 1000

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _id(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("must not be empty")
    if len(value) > MAX_ID_LEN:
        raise ValueError(f"is {len(value):,} characters; ids are at most {MAX_ID_LEN}")
    if _CONTROL.search(value):
        raise ValueError("contains control characters")
    return value


def _model_ref(value: str) -> str:
    """A preset id or alias, or a path to an existing config.json / directory holding one."""
    value = _id(value)
    if "/" in value or "\\" in value or value.endswith((".json", ".yaml", ".yml")):
        p = Path(value)
        try:
            ok = p.is_file() or (p.is_dir() and (p / "config.json").is_file())
        except OSError:
            ok = False
        # Hugging Face ids (org/name) are aliases of presets: leave unknown ones to the catalog's
        # lookup, which suggests close names; only refuse path tricks that point nowhere useful.
        if not ok and (".." in Path(value).parts or value.startswith(("/", "~"))):
            raise ValueError("is not an existing config.json file or a directory holding one")
    return value


#: A catalog id or alias (device, engine, region, ...).
Id = Annotated[str, AfterValidator(_id)]
#: A model: preset id/alias or a local config.json path.
ModelRef = Annotated[str, AfterValidator(_model_ref)]
#: A device count, 1 .. MAX_DEVICES.
DeviceCount = Annotated[int, Field(ge=1, le=MAX_DEVICES)]
#: A parallel degree, 1 .. MAX_PARALLEL.
Degree = Annotated[int, Field(ge=1, le=MAX_PARALLEL)]
#: Tokens in a sequence, 1 .. MAX_SEQ_LEN.
SeqLen = Annotated[int, Field(ge=1, le=MAX_SEQ_LEN)]
#: A batch or concurrency, 1 .. MAX_BATCH.
Batch = Annotated[int, Field(ge=1, le=MAX_BATCH)]
#: A finite positive token count up to MAX_TOKENS.
Tokens = Annotated[float, Field(gt=0, le=MAX_TOKENS, allow_inf_nan=False)]
#: A fraction in (0, 1].
Fraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]
#: A fraction in [0, 1].
Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
#: A fraction of memory kept free, [0, 1).
Reserve = Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)]
#: A latency target in ms, finite and positive.
LatencyMs = Annotated[float, Field(gt=0, le=MAX_LATENCY_MS, allow_inf_nan=False)]
#: A request rate, requests/s, finite and positive.
Rate = Annotated[float, Field(gt=0, le=MAX_QPS, allow_inf_nan=False)]
#: A percentile in (0, 100).
Percentile = Annotated[float, Field(gt=0, lt=100, allow_inf_nan=False)]
#: A positive finite quantity without a natural upper bound below 1e18 (bandwidths, FLOP counts).
PositiveFloat = Annotated[float, Field(gt=0, le=1e18, allow_inf_nan=False)]


class Request(BaseModel):
    """Base of every job request: frozen, unknown fields refused, CLI flag names in errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Flag names that are not ``--`` + the field name with ``_`` as ``-``.
    FLAGS: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def flag(cls, field: str) -> str:
        """The name the user typed for ``field`` (``global_batch`` -> ``--global-batch``)."""
        return cls.FLAGS.get(field) or "--" + field.replace("_", "-")


R = TypeVar("R", bound=Request)


def _bound(x: Any) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}" if isinstance(x, float) else str(x)


def _message(err: Any, flag: str | None) -> str:
    """A short message in the user's words for one pydantic error."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    name = flag or "value"
    if (kind == "greater_than" and ctx.get("gt") == 0) or (kind == "greater_than_equal" and ctx.get("ge") == 1):
        msg = f"{name} must be positive"
    elif kind in ("greater_than", "greater_than_equal"):
        msg = f"{name} must be {'>' if kind == 'greater_than' else '>='} {_bound(ctx.get('gt', ctx.get('ge')))}"
    elif kind in ("less_than", "less_than_equal"):
        bound = _bound(ctx.get("lt", ctx.get("le")))
        msg = f"{name} must be {'<' if kind == 'less_than' else '<='} {bound} (the largest value accepted)"
    elif kind == "finite_number":
        msg = f"{name} must be a finite number"
    else:
        msg = str(err["msg"]).removeprefix("Value error, ")
    value = err.get("input")
    if kind in ("missing", "extra_forbidden") or isinstance(value, Mapping):
        return msg
    if isinstance(value, float) and not math.isfinite(value):
        return f"{msg} (got {value})"
    return f"{msg} (got {echo(value)})"


def parse_request(cls: type[R], values: Mapping[str, Any]) -> R:
    """Validate ``values`` as ``cls``; the first problem -> UserInputError naming the flag."""
    try:
        return cls.model_validate(dict(values))
    except ValidationError as exc:
        err = exc.errors()[0]
        cause = (err.get("ctx") or {}).get("error")
        if isinstance(cause, UserInputError):  # raised by a validator with the flag already named
            raise cause from None
        loc = err["loc"]
        field = cls.flag(str(loc[0])) if loc else None
        raise UserInputError(_message(err, field), field=field) from None


def flag_error(cls: type[Request], field: str, message: str, *, hint: str | None = None) -> UserInputError:
    """A UserInputError about ``field`` of request ``cls``, named as the user typed it."""
    return UserInputError(message, field=cls.flag(field), hint=hint)


def count_int_range(text: str, field: str) -> int:
    """How many values ``text`` ('A:B' doubling, 'A:B:STEP', 'a,b,c') would expand to, without
    expanding it; malformed text -> UserInputError."""
    bad = UserInputError(
        f"expected 'A:B' (doubling from A to B), 'A:B:STEP' or a list 'a,b,c' of positive integers, got {echo(text)}",
        field=field,
    )
    if len(text) > 4096:
        raise bad
    try:
        if ":" in text:
            parts = [int(x) for x in text.split(":")]
            if len(parts) == 2:
                a, b = parts
                if a <= 0 or b < a:
                    raise bad
                return int(math.floor(math.log2(b / a))) + 1
            if len(parts) == 3:
                a, b, step = parts
                if a <= 0 or b < a or step <= 0:
                    raise bad
                return (b - a) // step + 1
            raise bad
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise bad from None
    if not vals or any(v <= 0 for v in vals):
        raise bad
    return len(set(vals))


def int_range(text: str, field: str, *, max_points: int = MAX_RANGE_POINTS, max_value: int | None = None) -> list[int]:
    """Sorted positive integers from a range/list flag, refused (before expanding) beyond
    ``max_points`` values or above ``max_value``."""
    n = count_int_range(text, field)
    if n > max_points:
        raise UserInputError(
            f"{echo(text)} expands to {n:,} values; at most {max_points} per request",
            field=field, hint="use a coarser step, a doubling range 'A:B', or a shorter list",
        )
    if ":" in text:
        parts = [int(x) for x in text.split(":")]
        if len(parts) == 2:
            out, v = [], parts[0]
            while v <= parts[1]:
                out.append(v)
                v *= 2
        else:
            out = list(range(parts[0], parts[1] + 1, parts[2]))
    else:
        out = sorted({int(x) for x in text.split(",") if x.strip()})
    if max_value is not None and out[-1] > max_value:
        raise UserInputError(f"{out[-1]:,} is above the largest accepted value, {max_value:,}", field=field)
    return out


def str_list(text: str | None) -> list[str] | None:
    """'a, b,c' -> ['a', 'b', 'c'] (None stays None)."""
    return None if text is None else [x.strip() for x in text.split(",") if x.strip()]



F = TypeVar("F", bound=Callable[..., Any])

#: Field names planners use that a request spells differently.
_PLANNER_FIELDS: Final = {"zero_stage": "zero", "seq_len": "seq_len", "global_batch_tokens": "global_batch",
                          "train_tokens": "tokens", "memory_reserve": "reserve", "kv_dtype": "kv_dtype",
                          "input_len": "input_len", "output_len": "output_len", "emit": "emit_"}


def names_flags(func: F) -> F:
    """Decorator for a job ``func(req, ...)``: a planner's ``UserInputError`` about one of the
    request's fields names the flag the user typed (``tp`` -> ``--tp``, ``input_len`` -> ``--in``)."""

    @functools.wraps(func)
    def wrapper(req: Request, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(req, *args, **kwargs)
        except UserInputError as exc:
            name = exc.field
            if exc.file is None and name and not name.startswith("--"):
                for cand in (_PLANNER_FIELDS.get(name, name), name):  # train's request field is `emit`, serve's `emit_`
                    if cand in type(req).model_fields:
                        exc.field = type(req).flag(cand)
                        exc.args = (exc.render(),)
                        break
            raise

    return wrapper  # type: ignore[return-value]
