"""No client-supplied file path is read or written.

The jobs accept a file path wherever the CLI does (a scenario file, a model's ``config.json``, a
simulation trace). Over HTTP every such input is a JSON value instead, and these checks refuse a
value that would make a job touch the server's disk:

* a model is a catalog id or alias (:func:`check_model`), never a path;
* a scenario body is a JSON object; inside it, every ``model`` is checked the same way and a
  ``trace``/``lengths``/``file``/``path`` given as a string (a file name) is refused: give the
  content inline (:func:`check_scenario`).

Errors are ``UserInputError`` naming the JSON path (422).
"""

from __future__ import annotations

from typing import Any, Final

from xpuplan.errors import UnknownIdError, UserInputError

#: Keys whose string value is a file name in a scenario file.
FILE_KEYS: Final = frozenset({"trace", "lengths", "file", "path", "config", "assumptions"})
#: Keys whose value is a model reference.
MODEL_KEYS: Final = frozenset({"model"})
#: Deepest nesting of a JSON body walked (deeper bodies are refused).
MAX_DEPTH: Final = 32


def check_model(name: str, field: str) -> str:
    """``name`` if it is a model id or alias of the catalog; a path or an unknown name -> 422."""
    from xpuplan.models.presets import load_model_catalog

    catalog = load_model_catalog()
    if name in catalog:
        return name
    if name.lower().endswith((".json", ".yaml", ".yml")) or name.startswith(("/", "~", ".")) or "\\" in name:
        raise UserInputError("file paths are not accepted over HTTP; give a model id or alias (GET /api/v1/models)",
                             field=field)
    err = UnknownIdError("model", name, [m.id for m in catalog], field=field)
    raise UserInputError(err.message, field=field, hint=err.hint)


def _join(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def check_scenario(data: Any, field: str = "scenario") -> Any:
    """Walk a scenario body: models must be catalog ids, file-name values are refused."""

    def walk(obj: Any, path: str, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise UserInputError(f"nested deeper than {MAX_DEPTH} levels", field=path)
        if isinstance(obj, dict):
            for k, v in obj.items():
                sub = _join(path, k)
                if k in MODEL_KEYS and isinstance(v, str):
                    check_model(v, sub)
                elif k in FILE_KEYS and isinstance(v, str):
                    raise UserInputError("file paths are not accepted over HTTP; give the content inline "
                                         "(a JSON object)", field=sub)
                else:
                    walk(v, sub, depth + 1)
        elif isinstance(obj, list):
            for i, v in enumerate(obj):
                walk(v, _join(path, i), depth + 1)

    walk(data, field, 0)
    return data
