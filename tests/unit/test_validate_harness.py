"""The harness never aborts a file: every error a planner raises becomes that row's reason."""

from __future__ import annotations

from xpuplan.errors import InfeasibleError
from xpuplan.validate import core
from xpuplan.validate.rows import ValidationRow


def row(rid: str, kind: str = "train") -> ValidationRow:
    raw = {"id": rid, "kind": kind, "source": "s", "trust": "A", "hardware": "nvidia-a100-sxm-80gb",
           "n_devices": "8", "precision": "bf16", "metric": "tokens_per_s_per_device", "value": "100"}
    return ValidationRow(id=rid, kind=kind, metric=raw["metric"], value=100.0, trust="A", source="s",
                         hardware=raw["hardware"], n_devices=8, precision="bf16", raw=raw)


def test_every_kind_of_planner_error_becomes_a_reason(monkeypatch):
    def predictor(r, assumptions=None):
        if r.id == "infeasible":
            raise InfeasibleError("does not fit", reasons=["weights 140 GB > 80 GB"])
        if r.id == "bug":
            raise ZeroDivisionError("division by zero")
        if r.id == "data":
            from pydantic import BaseModel

            class M(BaseModel):
                x: int

            M(x="not an int")
        return core.Prediction(120.0)

    monkeypatch.setattr(core, "_predictor", lambda kind: predictor if kind == "train" else None)
    report = core.validate_rows([row("ok"), row("infeasible"), row("bug"), row("data"), row("other", kind="fit")])
    by = {r.id: r for r in report.rows}
    assert len(report.rows) == 5  # nothing dropped, nothing aborted
    assert by["ok"].predicted == 120.0 and abs(by["ok"].error - 0.2) < 1e-12
    assert by["infeasible"].predicted is None and "does not fit" in by["infeasible"].reason
    assert "weights 140 GB" in by["infeasible"].reason
    assert "internal error" in by["bug"].reason and by["bug"].details["internal_error"] is True
    assert "data error" in by["data"].reason
    assert "no predictor for kind 'fit'" in by["other"].reason
    assert report.summary()["predicted"] == 1


def test_no_public_row_hits_an_internal_error():
    from xpuplan.validate import public_files, validate_file

    for path in public_files():
        bad = [(r.id, r.reason) for r in validate_file(path).rows if r.details.get("internal_error")]
        assert not bad, f"{path.name}: {bad}"
