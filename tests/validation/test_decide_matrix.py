"""The guide's scenario matrix (section 6.3.2) recomputed from xpuplan's own presets.

docs/decide.md holds the table "| preset | guide | xpuplan | winner |". This test runs every
preset (no Monte Carlo) and checks the table's xpuplan columns are what the engine answers now, so
the document cannot drift from the code; where xpuplan and the guide differ the document says why.
"""

import re
from pathlib import Path

import pytest

from xpuplan.decide import list_presets
from xpuplan.jobs.recommend import recommend

DOC = Path(__file__).resolve().parents[2] / "docs" / "decide.md"
#: Score difference (points of 100) under which two options are tied.
TIE_POINTS = 0.5
ROW = re.compile(r"^\| `([a-z0-9-]+)` \| ([^|]+) \| ([^|]+) \| `([^`]+)` \|")


def _table() -> dict[str, tuple[str, str, str]]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("<!-- matrix:start -->", 1)[1].split("<!-- matrix:end -->", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = ROW.match(line.strip())
        if m:
            rows[m.group(1)] = (m.group(2).strip(), m.group(3).strip(), m.group(4).strip())
    return rows


def _category(option) -> str:
    if option.kind == "mix":
        return "hybrid"
    from xpuplan.catalog import get_device

    return {"GPU": "GPGPU", "NPU": "NPU", "TPU": "TPU", "CPU": "CPU"}[get_device(option.hardware).kind]


def test_matrix_table_covers_every_preset():
    assert set(_table()) == set(list_presets())


@pytest.mark.validation
@pytest.mark.parametrize("name", list_presets())
def test_preset_answer_matches_the_documented_matrix(name):
    guide, ours, winner = _table()[name]
    r = recommend(name, samples=0)
    top = r.options[0]
    # a documented winner within TIE_POINTS of the top is a tie, not drift
    near = {o.key for o in r.options if top.score - o.score <= TIE_POINTS}
    assert _category(top) == ours and winner in near, (
        f"{name}: engine now answers {_category(top)} / {top.key}; update docs/decide.md "
        "(and explain any new disagreement with the guide)")
    assert guide in ("GPGPU", "NPU", "hybrid", "scenario-dependent")
