"""The public validation files ship inside the package, identical to the project's shared folder."""

from __future__ import annotations

import pytest

from tests.conftest import VALIDATION_DIR
from xpuplan.validate import PUBLIC_FILES, public_file, read_rows
from xpuplan.validate.data_files import data_dir


def test_every_public_file_is_packaged_and_readable():
    for name in PUBLIC_FILES:
        rows = read_rows(public_file(name))
        assert len(rows) >= 30, name
    assert (data_dir() / "README.md").is_file()


def test_packaged_files_are_listed_in_the_package_data():
    import tomllib
    from pathlib import Path

    conf = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    data = conf["tool"]["setuptools"]["package-data"]
    assert "*.csv" in data["*"] and "*.json" in data["*"]  # the CSVs and bands.json
    assert "README.md" in data["xpuplan.validate.data"]


@pytest.mark.parametrize("name", [*PUBLIC_FILES, "README.md"])
def test_packaged_copy_is_identical_to_shared(name):
    shared = VALIDATION_DIR / name
    if not VALIDATION_DIR.is_dir():
        pytest.skip(f"{VALIDATION_DIR} is not beside the repository (a plain clone): nothing to compare with")
    assert shared.is_file(), f"{shared} missing from the shared folder"
    assert shared.read_bytes() == public_file(name).read_bytes(), (
        f"the packaged {name} differs from {shared}: copy it to src/xpuplan/validate/data/ "
        "(and re-run scripts/update-validation-snapshot)")


def test_shared_folder_has_no_file_the_package_lacks():
    if not VALIDATION_DIR.is_dir():
        pytest.skip(f"{VALIDATION_DIR} is not beside the repository")
    extra = sorted(p.name for p in VALIDATION_DIR.glob("*.csv") if p.name not in PUBLIC_FILES)
    assert not extra, f"new public file(s) {extra}: add them to xpuplan.validate.data_files.PUBLIC_FILES and package them"
