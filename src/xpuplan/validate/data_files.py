"""The public validation files shipped inside the package (a copy of the project's
``shared/validation/`` folder, checked byte-identical by the tests when that folder is present)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Final

from xpuplan.errors import UserInputError

#: Every packaged public file, in the order ``xpuplan validate --public`` runs them.
PUBLIC_FILES: Final = ("training_public.csv", "inference_public.csv", "training_public_2.csv",
                       "inference_public_2.csv")


def data_dir() -> Path:
    """The folder of the packaged files (a real directory: the package is installed unzipped)."""
    return Path(str(resources.files("xpuplan.validate").joinpath("data")))


def public_file(name: str) -> Path:
    """One packaged file by name (``training_public.csv``...)."""
    if name not in PUBLIC_FILES and name != "README.md":
        raise UserInputError(f"no packaged validation file {name!r} (known: {', '.join(PUBLIC_FILES)})", field="file")
    path = data_dir() / name
    if not path.is_file():
        raise UserInputError(f"packaged validation file missing: {path} (a broken install?)", field="file")
    return path


def public_files() -> list[Path]:
    """Every packaged public validation file."""
    return [public_file(n) for n in PUBLIC_FILES]
