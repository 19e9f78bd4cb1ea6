"""Import contract: every module under src/xpuplan imports only packages of lower layers.

The layer table is docs/architecture.md; this test is its enforcement. It walks the AST (no import
side effects), so an import inside a function counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "xpuplan"

#: Layer of each top-level package or module (docs/architecture.md).
#: Within the foundation, ``datafile``, ``registry`` and ``i18n`` (0.5) may use ``units`` and ``errors`` (0).
LAYERS: dict[str, float] = {
    "units": 0, "errors": 0, "datafile": 0.5, "registry": 0.5, "i18n": 0.5,
    "catalog": 1, "models": 1, "workload": 1,
    "perf": 2,
    "train": 3, "serve": 3,
    "cost": 4, "calibrate": 4, "validate": 4,
    "fleet": 5,
    "decide": 6,
    "jobs": 7,
    # front ends, in this order (each may import the ones before it): renderers of typed results,
    # the HTTP API, the web page (built on the API's app), the CLI (whose `serve` runs them)
    "report": 7.5, "api": 7.6, "web": 7.7, "cli": 8,
}

#: Packages beside the stack: what they may import, and who may import them.
BESIDE_MAY_IMPORT: dict[str, set[str]] = {
    "store": {"units", "errors", "datafile", "registry", "catalog"},
    "bench": {"units", "errors", "datafile", "registry", "i18n", "catalog", "models", "workload", "perf", "train",
              "store", "calibrate", "validate"},
}
BESIDE_IMPORTED_BY: dict[str, set[str]] = {
    "store": {"calibrate", "jobs", "bench"},
    "bench": {"jobs"},
}

#: Top-level modules outside the table: the public API and the entry point.
FREE = {"__init__", "__main__", "__version__"}


def _unit(path: Path) -> str:
    rel = path.relative_to(SRC)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_units(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "xpuplan":
                names = [f"xpuplan.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            raise AssertionError(f"{path}: relative imports are not used in this code base")
        for name in names:
            parts = name.split(".")
            if parts[0] == "xpuplan" and len(parts) > 1:
                found.add(parts[1])
    return found


def _violations() -> list[str]:
    bad: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        unit = _unit(path)
        if unit in FREE:
            continue
        for target in _imported_units(path) - {unit}:
            where = f"{path.relative_to(SRC.parent)} imports xpuplan.{target}"
            if target in BESIDE_IMPORTED_BY and unit not in BESIDE_IMPORTED_BY[target]:
                bad.append(f"{where}: only {sorted(BESIDE_IMPORTED_BY[target])} may import {target}")
            elif unit in BESIDE_MAY_IMPORT:
                if target not in BESIDE_MAY_IMPORT[unit]:
                    bad.append(f"{where}: {unit} may import only {sorted(BESIDE_MAY_IMPORT[unit])}")
            elif target in FREE:
                if LAYERS.get(unit, -1) < LAYERS["report"]:
                    bad.append(f"{where}: only front ends import the public API package")
            elif target in BESIDE_IMPORTED_BY:
                continue  # allowed by the check above
            elif unit not in LAYERS:
                bad.append(f"{where}: {unit} is not in the layer table (docs/architecture.md)")
            elif target not in LAYERS:
                bad.append(f"{where}: {target} is not in the layer table (docs/architecture.md)")
            elif LAYERS[target] >= LAYERS[unit]:
                bad.append(f"{where}: layer {LAYERS[unit]} may import only lower layers (target is {LAYERS[target]})")
    return bad


def test_every_import_goes_down_the_layer_table() -> None:
    bad = _violations()
    assert not bad, "import contract broken:\n" + "\n".join(bad)


def test_every_package_is_in_the_table() -> None:
    units = {_unit(p) for p in SRC.rglob("*.py") if "migrations" not in p.parts}
    unknown = units - set(LAYERS) - set(BESIDE_MAY_IMPORT) - FREE
    assert not unknown, f"add to docs/architecture.md and LAYERS: {sorted(unknown)}"


def test_table_matches_the_doc() -> None:
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    for name in list(LAYERS) + list(BESIDE_MAY_IMPORT):
        token = f"`{name}/`" if not (SRC / f"{name}.py").exists() else f"`{name}.py`"
        assert token in doc, f"{token} missing from docs/architecture.md"


@pytest.mark.parametrize("source, expected", [
    ("from xpuplan.train.plan import ParallelPlan", {"train"}),
    ("import xpuplan.store.engine", {"store"}),
    ("from xpuplan import units, errors", {"units", "errors"}),
    ("import numpy", set()),
])
def test_the_walker_sees_imports(tmp_path: Path, source: str, expected: set[str]) -> None:
    f = tmp_path / "m.py"
    f.write_text(source + "\n", encoding="utf-8")
    assert _imported_units(f) == expected
