"""Model presets: load ``data/*.yaml``, index them by id and alias, and resolve user-given names.

A preset file holds ``schema_version``, ``sources`` (key -> title/url/date) and ``models`` (a list
of :class:`ModelArch` records). Every ``published.*.source`` must be a key of the same file's
``sources``. Duplicate ids or aliases, within a file or across files, are load errors naming the
file. Extra preset files can be layered over the built-in ones with ``$XPUPLAN_MODEL_PATH``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xpuplan.datafile import Path_t, line_for, load_model, parse_text, read_text
from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.registry import AliasIndex, data_files

DATA_DIR = Path(__file__).parent / "data"
#: Extra preset directory or file(s) (os.pathsep-separated) layered over the built-in presets.
ENV_EXTRA = "XPUPLAN_MODEL_PATH"
_PATH_SUFFIXES = (".json", ".yaml", ".yml")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceIn(_Strict):
    """Where a published figure comes from."""

    title: str
    url: str | None = None
    date: str | None = None

    @field_validator("date", mode="before")
    @classmethod
    def _date(cls, v: object) -> object:
        return None if v is None else str(v)


class ModelFileIn(_Strict):
    """Schema of one preset file (``data/*.yaml``)."""

    schema_version: Literal[1]
    sources: dict[str, SourceIn] = Field(default_factory=dict)
    models: list[ModelArch]


def _models_from_data(data: Any, file: str, lines: dict[Path_t, int]) -> list[ModelArch]:
    """Validate parsed preset-file data and check source keys; returns the file's models."""
    if data is None:
        raise UserInputError("file is empty", file=file)
    parsed = load_model(ModelFileIn, data, file, lines)
    for i, m in enumerate(parsed.models):
        if m.published is None:
            continue
        for which in ("total_params", "active_params"):
            count = getattr(m.published, which)
            if count is not None and count.source not in parsed.sources:
                loc = ("models", i, "published", which, "source")
                raise UserInputError(
                    f"unknown source key {count.source!r} (not in this file's 'sources')",
                    field=f"models[{i}].published.{which}.source",
                    file=file,
                    line=line_for(loc, lines),
                )
    return list(parsed.models)


def load_model_file(path: str | Path) -> list[ModelArch]:
    """Parse and validate one preset file; returns its models. Errors name file, line and field."""
    file = str(path)
    data, lines = parse_text(read_text(path), file)
    return _models_from_data(data, file, lines)


@dataclass(frozen=True)
class ModelCatalog:
    """All presets, indexed by id and by normalised alias; ``files`` maps id -> defining file."""

    models: dict[str, ModelArch]
    files: dict[str, str]
    index: AliasIndex

    def get(self, name: str) -> ModelArch:
        """Preset by id or alias (case, space, '-' and '_' insensitive); unknown -> UnknownIdError."""
        if name in self.models:
            return self.models[name]
        return self.models[self.index.resolve(name)]

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def __iter__(self) -> Iterator[ModelArch]:
        return iter(self.models.values())

    def __len__(self) -> int:
        return len(self.models)


def build_model_catalog(entries: Iterable[tuple[ModelArch, str]]) -> ModelCatalog:
    """Index ``(model, file)`` pairs; a duplicate id or alias raises UserInputError naming the file."""
    items = list(entries)
    index = AliasIndex.build("model", [(m.id, m.aliases, file) for m, file in items])
    return ModelCatalog(models={m.id: m for m, _ in items}, files={m.id: f for m, f in items}, index=index)


def model_files(extra: Iterable[str | Path] = ()) -> list[Path]:
    """Built-in preset files, then ``extra`` and ``$XPUPLAN_MODEL_PATH`` entries (dirs or files)."""
    return data_files(DATA_DIR, ENV_EXTRA, extra)


def _load(files: Iterable[Path]) -> ModelCatalog:
    entries: list[tuple[ModelArch, str]] = []
    for f in files:
        entries += [(m, str(f)) for m in load_model_file(f)]
    return build_model_catalog(entries)


@lru_cache(maxsize=1)
def _default_model_catalog() -> ModelCatalog:
    return _load(model_files())


def load_model_catalog(extra: Iterable[str | Path] = ()) -> ModelCatalog:
    """The built-in presets plus user files (``extra`` or ``$XPUPLAN_MODEL_PATH``).

    Returns a :class:`ModelCatalog`; the default one (no extras) is loaded once and cached. A user
    file may add models; reusing a built-in id or alias is an error (copy and rename instead).
    """
    extra = tuple(str(p) for p in extra)
    if not extra and not os.environ.get(ENV_EXTRA):
        return _default_model_catalog()
    return _load(model_files(extra))


def list_models() -> list[ModelArch]:
    """Every preset model, in file order (files sorted by name)."""
    return list(load_model_catalog())


def load_model_path(path: str | Path) -> ModelArch:
    """A model from a local file: a Hugging Face ``config.json`` (or a directory holding one), or a
    preset-format YAML/JSON file defining exactly one model. Returns the :class:`ModelArch`."""
    from xpuplan.models.hf_import import arch_from_hf_config

    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    file = str(p)
    data, lines = parse_text(read_text(p), file)
    if isinstance(data, dict) and "models" in data:
        models = _models_from_data(data, file, lines)
        if len(models) != 1:
            ids = ", ".join(m.id for m in models) or "none"
            raise UserInputError(
                f"file defines {len(models)} models ({ids}); name one by id after adding the file "
                f"to ${ENV_EXTRA}",
                field="models",
                file=file,
                line=line_for(("models",), lines),
            )
        return models[0]
    return arch_from_hf_config(data, file=file, lines=lines, path=p)


def _looks_like_path(name: str) -> bool:
    return name.lower().endswith(_PATH_SUFFIXES) or Path(name).exists()


def get_model(name: str) -> ModelArch:
    """Resolve ``name`` to a :class:`ModelArch`.

    ``name`` may be a preset id (``llama3-70b``), an alias (``Meta-Llama-3-70B``, ``llama3:70b``;
    case, spaces, '-' and '_' are ignored), or a path to a local HF ``config.json``, a directory
    holding one, or a one-model preset-format YAML file. Ids and aliases win over paths; write
    ``./name`` to force a path. Unknown names raise :class:`UnknownIdError` with suggestions.
    """
    catalog = load_model_catalog()
    if name in catalog:
        return catalog.get(name)
    if _looks_like_path(name):
        return load_model_path(name)
    return catalog.get(name)  # raises UnknownIdError with suggestions
