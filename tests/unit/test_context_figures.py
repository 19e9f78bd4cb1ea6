"""A run context's own hardware figures (``RunContext.with_hw_figures``): seen by every catalog
lookup inside ``applied()``, in that thread only, never by another context."""

from __future__ import annotations

import threading

import pytest

from xpuplan.catalog import load_catalog
from xpuplan.errors import UserInputError
from xpuplan.jobs.context import RunContext


def _bf16(cat: object) -> float:
    return cat.get("H100").figures["dense_tflops.bf16"].value  # type: ignore[attr-defined]


def test_context_figures_are_its_own() -> None:
    base = RunContext()
    ctx = base.with_hw_figures(["H100:dense_tflops.bf16=123"])
    assert base.hw_figures == () and ctx.hw_figures == ("H100:dense_tflops.bf16=123",)
    assert _bf16(ctx.catalog) == pytest.approx(123e12)
    assert _bf16(base.catalog) == _bf16(load_catalog()) != pytest.approx(123e12)
    with ctx.applied():
        assert _bf16(load_catalog()) == pytest.approx(123e12)  # planners calling load_catalog() see them
        with ctx.applied():  # nested: laid once
            assert _bf16(load_catalog()) == pytest.approx(123e12)
        seen: list[float] = []
        t = threading.Thread(target=lambda: seen.append(_bf16(load_catalog())))
        t.start()
        t.join()
        assert seen[0] != pytest.approx(123e12)  # another thread does not see them
    assert _bf16(load_catalog()) != pytest.approx(123e12)


@pytest.mark.parametrize(("entry", "words"), [
    ("H100:dense_tflops.bf16", "DEVICE:PATH=VALUE"),
    ("figures.yaml", "DEVICE:PATH=VALUE"),
    ("nope-chip:dense_tflops.bf16=1", "nope-chip"),
])
def test_bad_entries_name_their_index(entry: str, words: str) -> None:
    with pytest.raises(UserInputError) as exc:
        RunContext().with_hw_figures(["H100:dense_tflops.bf16=1", entry], field="figs")
    assert exc.value.field == "figs[1]" and words in exc.value.message
