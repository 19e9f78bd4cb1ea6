"""Loading user-editable data files (YAML/JSON) with errors that name file, line and field.

Data files are parsed once, with PyYAML's node API so every mapping key and sequence item keeps its
line number: the node tree is composed (by libyaml's C parser where installed, else pure Python)
and the Python data constructed from that same tree. A pydantic ``ValidationError`` is then translated into a ``UserInputError`` whose
field path (``devices[2].memory.bandwidth_gb_per_s.value``) is looked up in that line map.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from xpuplan.errors import UserInputError

M = TypeVar("M", bound=BaseModel)

#: libyaml's C loader when PyYAML was built with it (about 10x faster), else the pure-Python one;
#: both are safe loaders and give nodes with line marks.
Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # type: ignore[assignment]

Path_t = tuple[str | int, ...]


def _walk(node: yaml.Node, path: Path_t, lines: dict[Path_t, int]) -> None:
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value
            lines[path + (key,)] = key_node.start_mark.line + 1
            _walk(value_node, path + (key,), lines)
            lines[path + (key,)] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines)


def format_loc(loc: tuple[Any, ...]) -> str:
    """Pydantic location tuple -> ``a.b[2].c``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def parse_text(text: str, file: str) -> tuple[Any, dict[Path_t, int]]:
    """Parse YAML (JSON is a subset) text into Python data plus a path -> line map."""
    loader = Loader(text)
    try:
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise UserInputError(f"malformed YAML/JSON: {exc.problem}", file=file, line=line) from None
    except yaml.YAMLError as exc:
        raise UserInputError(f"malformed YAML/JSON: {exc}", file=file) from None
    finally:
        loader.dispose()
    lines: dict[Path_t, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return data, lines


def read_text(path: str | Path) -> str:
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserInputError("file not found", file=str(p)) from None
    except IsADirectoryError:
        raise UserInputError("is a directory, expected a file", file=str(p)) from None
    except UnicodeDecodeError:
        raise UserInputError("not UTF-8 text", file=str(p)) from None


def line_for(loc: tuple[Any, ...], lines: dict[Path_t, int]) -> int | None:
    """Deepest known line for a location (falls back to the parent's line)."""
    loc = tuple(loc)
    while loc:
        if loc in lines:
            return lines[loc]
        loc = loc[:-1]
    return lines.get(())


def input_loc(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """``loc`` as far as it names places in ``data``: pydantic appends the member type of a union
    (``constrained-float``, ``str``) to the location of a bad scalar, and puts it between a mapping and
    its bad field (``input_len.LengthDist.mean``); those tags are dropped. A missing key (the last part)
    stays."""
    node: Any = data
    out: list[Any] = []
    for i, part in enumerate(loc):
        if isinstance(node, Mapping):
            if part not in node and i + 1 < len(loc):
                continue  # a union member's name between a mapping and one of its keys
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        elif i:
            return tuple(out)
        out.append(part)
    return tuple(out)


_MISMATCH = ("_type", "_parsing")


def primary_error(errors: list[Any]) -> Any:
    """The error to report first: a value's own problem ("greater than 0") before the type mismatches pydantic
    adds for the other members of a union ("a valid number", "a valid dictionary"); the first error otherwise."""
    return next((e for e in errors if not str(e.get("type", "")).endswith(_MISMATCH)), errors[0])


_SCALAR_TAGS = frozenset({"int", "float", "str", "bool", "list", "dict", "none", "bytes"})


def _field_of(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The field an error is about: its location without the union member's tag pydantic appends
    (``constrained-float``, ``function-after[...]``, a model's class name, ``int``...)."""
    if loc and isinstance(loc[-1], str):
        tag = loc[-1]
        if "-" in tag or "[" in tag or tag[:1].isupper() or tag in _SCALAR_TAGS:
            return loc[:-1]
    return loc


def validation_error(
    exc: ValidationError, file: str, lines: dict[Path_t, int], prefix: tuple[Any, ...] = (), data: Any = None
) -> UserInputError:
    """Turn the first pydantic error into a UserInputError naming file, line and field."""
    errors = exc.errors()
    first = primary_error(errors)
    raw = tuple(p for p in first["loc"] if not (isinstance(p, str) and "[" in p and p.startswith("function")))
    loc = prefix + (input_loc(raw, data) if data is not None else raw)
    msg = str(first["msg"]).removeprefix("Value error, ")
    # one problem per field: the other members of a union each add a type mismatch at the same field
    others = {_field_of(tuple(e["loc"])) for e in errors} - {_field_of(tuple(first["loc"]))}
    extra = f" (and {len(others)} more problem(s))" if others else ""
    return UserInputError(msg + extra, field=format_loc(loc), file=file, line=line_for(loc, lines))


def load_model(model: type[M], data: Any, file: str, lines: dict[Path_t, int], prefix: tuple[Any, ...] = ()) -> M:
    """Validate ``data`` against ``model``; errors name file, line and field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, file, lines, prefix, data) from None


def load_file(model: type[M], path: str | Path) -> M:
    """Read a YAML/JSON file and validate it as ``model``."""
    text = read_text(path)
    data, lines = parse_text(text, str(path))
    if data is None:
        raise UserInputError("file is empty", file=str(path))
    return load_model(model, data, str(path), lines)
