"""Price and site data: every figure sourced and graded; malformed files rejected with file, line, field."""

from __future__ import annotations

from pathlib import Path

import pytest

from xpuplan.catalog.prices import DATA_DIR, ENV_EXTRA, load_prices, load_prices_file
from xpuplan.errors import UnknownIdError, UserInputError


def test_every_builtin_figure_has_source_trust_and_range():
    book = load_prices()
    figs = book.all_figures()
    assert len(figs) >= 30
    for f in figs:
        assert f.source.strip(), f.name
        assert f.trust in ("A", "B", "C", "D"), f.name
        assert f.low <= f.value <= f.high, f.name
        assert f.unit, f.name


def test_required_coverage():
    book = load_prices()
    for region in ("us", "eu", "cn"):
        assert book.region(region).grid_kg_co2e_per_kwh is not None
    assert {"air", "liquid", "immersion"} <= set(book.cooling)
    assert 1.0 < book.pue("liquid").value < book.pue("air").value
    assert book.cloud_offers(["nvidia-h100-sxm-80gb"], "aws")
    assert book.platform_for(["google-tpu-v5p"]).rental_only
    assert book.device_price(["H100"]) is None  # looked up by catalog id, not by alias
    assert book.device_price(["nvidia-h100-sxm-80gb"]).value > 0
    assert book.labor["engineer"].value > 0 and book.porting["plugin"].value > 0


def _write(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "mine.yaml"
    f.write_text(text, encoding="utf-8")
    return f


HEAD = """schema_version: 1
sources:
  me: {title: "my quote", date: "2025", kind: vendor}
"""


def test_figure_without_source_is_rejected_naming_file_line_field(tmp_path):
    f = _write(tmp_path, HEAD + "regions:\n  - id: lab\n    name: Lab\n    electricity_usd_per_kwh: {value: 0.1, trust: A}\n")
    with pytest.raises(UserInputError) as exc:
        load_prices_file(f)
    err = exc.value
    assert err.file == str(f) and err.line == 7
    assert err.field == "regions[0].electricity_usd_per_kwh.source"
    assert "required" in err.message.lower()


def test_unknown_source_key_and_bad_types(tmp_path):
    f = _write(tmp_path, HEAD + "cooling:\n  - id: air\n    pue: {value: 1.3, source: nobody, trust: B}\n")
    with pytest.raises(UserInputError) as exc:
        load_prices_file(f)
    assert exc.value.field == "cooling[0].pue.source" and "unknown source key" in exc.value.message
    f = _write(tmp_path, HEAD + "cooling:\n  - id: air\n    pue: {value: cheap, source: me, trust: B}\n")
    with pytest.raises(UserInputError) as exc:
        load_prices_file(f)
    assert exc.value.field == "cooling[0].pue.value" and exc.value.line == 6
    f = _write(tmp_path, HEAD + "cooling:\n  - id: air\n    pue: {value: 1.3, source: me, trust: Z}\n")
    with pytest.raises(UserInputError) as exc:
        load_prices_file(f)
    assert exc.value.field == "cooling[0].pue.trust"
    f = _write(tmp_path, HEAD + "cloud:\n  - {provider: x, region: y, device: H100}\n")
    with pytest.raises(UserInputError, match="at least one"):
        load_prices_file(f)


def test_user_file_overrides_builtin_entry(tmp_path, monkeypatch):
    f = _write(tmp_path, HEAD + "cooling:\n  - id: air\n    pue: {value: 1.25, source: me, trust: A}\n")
    monkeypatch.setenv(ENV_EXTRA, str(f))
    book = load_prices()
    assert book.pue("air").value == 1.25 and book.pue("air").source.startswith("my quote")
    assert book.pue("liquid").value == pytest.approx(1.10)  # untouched built-ins stay
    monkeypatch.delenv(ENV_EXTRA)
    assert load_prices().pue("air").value == pytest.approx(1.58)


def test_unknown_region_and_cooling_suggest():
    book = load_prices()
    with pytest.raises(UnknownIdError, match="did you mean"):
        book.region("us-vaa")
    with pytest.raises(UnknownIdError):
        book.pue("boiling")


def test_builtin_files_load_individually():
    for f in sorted(DATA_DIR.glob("*.yaml")):
        load_prices_file(f)
