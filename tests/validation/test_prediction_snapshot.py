"""Before/after guard (issue 9 §5): every public row predicts what the saved snapshot says.

A refactor must not move any prediction; a deliberate model change re-baselines the snapshot with
``scripts/update-validation-snapshot`` and lists the change, with its effect on the error, in
CHANGELOG.md. Predictions use the built-in assumptions (no calibration profile, no override file).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xpuplan.validate import PUBLIC_FILES, public_file, validate_file
from xpuplan.validate.snapshot import REL_TOL, compare, snapshot_entries

SNAPSHOT = Path(__file__).parent / "snapshots" / "predictions.json"

pytestmark = pytest.mark.validation


def _saved() -> dict:
    return json.loads(SNAPSHOT.read_text(encoding="utf-8"))


def test_snapshot_covers_every_packaged_file_and_row():
    files = _saved()["files"]
    assert sorted(files) == sorted(PUBLIC_FILES)
    from xpuplan.validate import read_rows

    for name in PUBLIC_FILES:
        assert [r.id for r in read_rows(public_file(name))] == list(files[name]), name


@pytest.mark.parametrize("name", PUBLIC_FILES)
def test_predictions_match_the_snapshot(name):
    current = snapshot_entries(validate_file(public_file(name)))
    diffs = compare(_saved()["files"][name], current, rel_tol=REL_TOL)
    assert not diffs, (f"{len(diffs)} prediction(s) of {name} moved (if deliberate: scripts/update-validation-snapshot "
                       f"and a CHANGELOG entry):\n" + "\n".join(diffs[:40]))


def test_compare_flags_drift_and_changes_of_state():
    saved = {"a": {"predicted": 100.0}, "b": {"reason": "why"}, "c": {"predicted": 1.0}}
    assert compare(saved, {"a": {"predicted": 100.00001}, "b": {"reason": "other words"}, "c": {"predicted": 1.0}}) == []
    diffs = compare(saved, {"a": {"predicted": 100.1}, "b": {"predicted": 3.0}, "d": {"predicted": 1.0}})
    assert [d.split(":")[0] for d in diffs] == ["a", "b", "c", "d"]
