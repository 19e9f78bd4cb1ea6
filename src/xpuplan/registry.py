"""One registry pattern for every catalog family (hardware, models, ...).

``AliasIndex`` maps ids and human aliases to ids, case-, space-, hyphen- and underscore-insensitively,
rejects an alias that names two entries, and raises ``UnknownIdError`` with close matches.
``data_files`` lists a family's built-in YAML files plus user files from an environment variable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xpuplan.errors import UnknownIdError, UserInputError


def normalise_alias(name: str) -> str:
    """Key used for alias lookup: case-folded, without spaces, '_' and '-'."""
    return re.sub(r"[\s_\-]+", "", name.strip().casefold())


@dataclass(frozen=True)
class AliasIndex:
    """Normalised id/alias -> id for one family (``kind`` names it in messages)."""

    kind: str
    ids: tuple[str, ...]
    names: tuple[str, ...]
    _keys: dict[str, str]

    @classmethod
    def build(cls, kind: str, entries: Iterable[tuple[str, Sequence[str], str]]) -> AliasIndex:
        """Index ``(id, aliases, file)`` entries; duplicate ids or clashing aliases name the file."""
        items = list(entries)
        files: dict[str, str] = {}
        for entry_id, _, file in items:
            if entry_id in files:
                raise UserInputError(f"duplicate {kind} id {entry_id!r} (also in {files[entry_id]})", field="id", file=file)
            files[entry_id] = file
        keys: dict[str, str] = {}
        names: list[str] = []
        for entry_id, aliases, file in items:
            for name in (entry_id, *aliases):
                key = normalise_alias(name)
                other = keys.get(key)
                if other is not None and other != entry_id:
                    raise UserInputError(
                        f"alias {name!r} names both {other} ({files[other]}) and {entry_id}",
                        field=f"{entry_id}.aliases", file=file,
                    )
                keys[key] = entry_id
                names.append(name)
        return cls(kind=kind, ids=tuple(files), names=tuple(dict.fromkeys(names)), _keys=keys)

    def resolve(self, name: str) -> str:
        """The id ``name`` refers to; unknown -> UnknownIdError suggesting close ids/aliases."""
        key = normalise_alias(name)
        if key in self._keys:
            return self._keys[key]
        raise UnknownIdError(self.kind, name, self.names)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalise_alias(name) in self._keys


def data_files(builtin_dir: Path, env_var: str, extra: Iterable[str | Path] = ()) -> list[Path]:
    """Built-in ``*.yaml`` of a family, then ``extra`` and ``$env_var`` entries (dirs or files,
    ``os.pathsep``-separated)."""
    files = sorted(builtin_dir.glob("*.yaml"))
    extra_paths = [Path(p) for p in extra]
    env = os.environ.get(env_var)
    if env:
        extra_paths += [Path(p) for p in env.split(os.pathsep) if p]
    for p in extra_paths:
        files += sorted(p.glob("*.yaml")) + sorted(p.glob("*.yml")) if p.is_dir() else [p]
    return files
