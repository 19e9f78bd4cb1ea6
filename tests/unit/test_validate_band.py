"""Uncertainty bands from the measured validation error of each hardware family."""

from __future__ import annotations

import json

import pytest

from xpuplan.validate import band
from xpuplan.validate.core import RowResult


def result(hw: str, err: float, trust: str = "A", kind: str = "train") -> RowResult:
    return RowResult(id=f"{hw}-{err}", kind=kind, metric="m", hardware=hw, trust=trust, source="s", measured=100.0,
                     predicted=100.0 * (1 + err), error=err, reason=None, details={})


def test_family_is_vendor_and_architecture():
    assert band.hardware_family("nvidia-h100-sxm-80gb") == band.hardware_family("nvidia-h200-sxm-141gb") == "NVIDIA Hopper"
    assert band.hardware_family("google-tpu-v6e") == "Google TPU v6e"
    assert band.hardware_family("not-a-device") == "not-a-device"


def test_band_table_statistics():
    rows = [result("nvidia-a100-sxm-80gb", e) for e in (-0.1, 0.0, 0.1, 0.2, 0.25)]
    t = band.band_table(rows, files=["x.csv"], baseline="test")
    fam = t["kinds"]["train"]["families"]["NVIDIA Ampere"]
    ratios = sorted(1 / (1 + e) - 1 for e in (-0.1, 0.0, 0.1, 0.2, 0.25))
    assert fam["n_rows"] == 5 and fam["trust"] == {"A": 5}
    assert ratios[0] <= fam["p10_measured_over_predicted_minus_1"] <= fam["p90_measured_over_predicted_minus_1"] <= ratios[-1]
    assert "infer" not in t["kinds"]



def test_band_is_on_speed_whatever_the_metric():
    # a run 10% faster than predicted: throughput above the prediction, latency below it
    assert band.speed_ratio("tokens_per_s_per_device", 110.0, 100.0) == pytest.approx(0.10)
    assert band.speed_ratio("tpot_ms", 100.0 / 1.1, 100.0) == pytest.approx(0.10)
    assert band.speed_ratio("step_time_s", 100.0, 100.0 / 1.1) == pytest.approx(-1 / 11)  # slower than predicted
    # throughput and latency rows that all ran faster than predicted give a band above the prediction only
    fast = [RowResult(id=f"r{i}", kind="infer", metric=m, hardware="nvidia-a100-sxm-80gb", trust="A", source="s",
                      measured=meas, predicted=100.0, error=100.0 / meas - 1.0, reason=None, details={})
            for i, (m, meas) in enumerate([("output_tokens_per_s", 112.0), ("output_tokens_per_s", 108.0),
                                           ("ttft_ms", 100.0 / 1.12), ("tpot_ms", 100.0 / 1.08),
                                           ("e2e_latency_ms", 100.0 / 1.10)])]
    fam = band.band_table(fast, files=["x.csv"], baseline="test")["kinds"]["infer"]["families"]["NVIDIA Ampere"]
    assert fam["p10_measured_over_predicted_minus_1"] > 0.07 and fam["p90_measured_over_predicted_minus_1"] < 0.13

def test_bands_from_the_packaged_table():
    lo, hi = band.validation_band("nvidia-a100-sxm-80gb", "train")
    assert band.MIN_BAND_FRACTION <= lo < 0.5 and band.MIN_BAND_FRACTION <= hi < 0.5
    rec = band.band_record("nvidia-a100-sxm-80gb", "train")
    assert rec.family == "NVIDIA Ampere" and rec.n_rows >= band.MIN_ROWS and rec.widened_by == 1.0
    assert "bands.json" in rec.source and "public train rows" in rec.source


def test_unvalidated_family_is_wider_than_a_validated_one():
    validated = band.band_record("nvidia-a100-sxm-80gb", "train")
    blackwell = band.band_record("nvidia-b200-180gb", "train")  # no public Blackwell row
    assert blackwell.widened_by == band.UNVALIDATED_WIDENING and blackwell.n_rows == 0
    assert blackwell.low_fraction + blackwell.high_fraction > validated.low_fraction + validated.high_fraction
    assert "fewer than" in blackwell.source


def test_low_trust_family_is_widened(monkeypatch):
    stats = {"n_rows": 6, "trust": {"C": 4, "A": 2}, "p10_measured_over_predicted_minus_1": -0.1,
             "p90_measured_over_predicted_minus_1": 0.1, "median_abs_error": 0.05, "hardware": ["intel-gaudi2"]}
    table = {"files": ["x"], "baseline": "t", "kinds": {"train": {"all": stats, "families": {"Intel Gaudi 2": stats}}}}
    monkeypatch.setattr(band, "_table", lambda: table)
    rec = band.band_record("intel-gaudi2", "train")
    assert rec.widened_by == band.LOW_TRUST_WIDENING
    assert rec.low_fraction == pytest.approx(0.1 * band.LOW_TRUST_WIDENING)


def test_packaged_bands_are_generated_from_the_snapshot():
    """bands.json is what the script computes from the saved snapshot (never hand-edited)."""
    from pathlib import Path

    from xpuplan.validate import public_files, read_rows
    from xpuplan.validate.snapshot import results_from_snapshot

    root = Path(__file__).resolve().parents[2]
    snap = json.loads((root / "tests/validation/snapshots/predictions.json").read_text(encoding="utf-8"))
    rows = [r for p in public_files() for r in results_from_snapshot(read_rows(p), snap["files"][p.name])]
    expected = band.band_table(rows, files=[p.name for p in public_files()], baseline=snap["baseline"],
                               regimes=band.public_regimes())
    assert json.loads(json.dumps(expected)) == band._table(), "run scripts/update-validation-snapshot --bands-only"


def test_unknown_kind():
    with pytest.raises(ValueError):
        band.validation_band("nvidia-a100-sxm-80gb", "fit")


# -- the regime a band covers ------------------------------------------------------------------------
def test_envelope_and_what_lies_outside():
    env = band.envelope([band.Regime(seq_len=2048, n_devices=64, precision="bf16"),
                         band.Regime(seq_len=8192, n_devices=1024, precision="fp16")])
    assert env == {"moe": False, "fine_grained_moe": False, "max_seq_len": 8192, "max_devices": 1024,
                   "precisions": ["16-bit"], "max_batch": None, "methods": [], "models": None}
    assert band.outside(band.Regime(seq_len=8192, n_devices=1024, precision="bf16"), env, "train") == []
    why = band.outside(band.Regime(moe=True, seq_len=131072, n_devices=16384, precision="fp8"), env, "train")
    assert len(why) == 4
    assert why[0].startswith("MoE") and "131,072" in why[1] and "16,384" in why[2] and why[3].startswith("fp8")
    assert "prompt" in band.outside(band.Regime(seq_len=32000), env, "infer")[0]
    assert band.outside(band.Regime(), env, "train") == []  # nothing known: never counted as outside


def test_band_widens_outside_the_public_regime():
    inside = band.band_record("nvidia-a100-sxm-80gb", "train", band.Regime(seq_len=2048, n_devices=1024,
                                                                           precision="bf16"))
    assert inside.extrapolation == () and inside.widened_by == 1.0
    moe = band.band_record("nvidia-a100-sxm-80gb", "train", band.Regime(moe=True, seq_len=2048, n_devices=1024,
                                                                        precision="bf16"))
    assert moe.extrapolation and "MoE" in moe.extrapolation[0]
    assert moe.widened_by == band.EXTRAPOLATION_WIDENING
    assert moe.high_fraction > inside.high_fraction and moe.low_fraction >= inside.low_fraction
    assert "outside the rows' regime" in moe.source
    # a family without rows of its own is judged against the envelope of all rows (pooled band)
    pooled = band.band_record("nvidia-b200-180gb", "train", band.Regime(precision="fp4"))
    assert pooled.widened_by == band.UNVALIDATED_WIDENING * band.EXTRAPOLATION_WIDENING
    assert pooled.extrapolation[0].startswith("fp4")


def test_regime_of_a_validation_row():
    from xpuplan.validate import public_files, read_rows

    rows = {r.id: r for p in public_files() for r in read_rows(p)}
    regimes = band.public_regimes()
    assert set(regimes) == set(rows)
    some_train = next(r for r in rows.values() if r.kind == "train" and r.raw.get("seq_len"))
    rg = regimes[some_train.id]
    assert rg.seq_len == int(some_train.raw["seq_len"]) and rg.n_devices == some_train.n_devices
    some_infer = next(r for r in rows.values() if r.kind == "infer" and r.raw.get("input_len"))
    assert regimes[some_infer.id].seq_len == int(float(some_infer.raw["input_len"]))
    assert any(g.moe for i, g in regimes.items() if rows[i].kind == "infer")  # Mixtral serving rows


def test_fine_grained_moe_is_a_regime_of_its_own():
    """Experts narrower than the hidden size (Qwen3, DeepSeek-V3) put the expert GEMMs in the short-K regime no
    public serving row covers (their MoE rows are Mixtral's, with wide experts): such a prediction's band is
    widened and says why; one MoE reason is enough where no MoE row exists at all (training)."""
    from xpuplan.models import get_model

    q = band.model_regime(get_model("qwen3-235b-a22b"), seq_len=2000.4, n_devices=8, precision="bf16")
    mx = band.model_regime(get_model("mixtral-8x7b"), seq_len=2000, n_devices=2, precision="bf16")
    dense = band.model_regime(get_model("llama3-8b"), seq_len=2000)
    assert q.moe and q.fine_grained_moe and q.seq_len == 2000
    assert mx.moe and not mx.fine_grained_moe and not dense.moe and not dense.fine_grained_moe
    env = {"moe": True, "fine_grained_moe": False, "max_seq_len": 4096, "max_devices": 8, "precisions": ["16-bit"]}
    assert band.outside(mx, env, "infer") == []
    assert band.outside(q, env, "infer") == ["fine-grained MoE (experts narrower than the hidden size; no such "
                                             "serving row)"]
    assert band.outside(q, {**env, "moe": False}, "train") == ["MoE model (no MoE training row)"]
    assert band.outside(q, {k: v for k, v in env.items() if k != "fine_grained_moe"}, "infer") == []  # old file
    rec = band.band_record("nvidia-h100-sxm-80gb", "infer", q)
    assert rec.widened_by >= band.EXTRAPOLATION_WIDENING and "fine-grained MoE" in rec.extrapolation[0]
    public = band.public_regimes()
    assert any(g.moe for g in public.values()) and not any(g.fine_grained_moe for g in public.values())


def test_serving_batch_and_a_one_model_family_are_regimes_too():
    """Rows up to batch 256 measure a weight-bound or mixed decode step, not one of thousands of sequences (GEMMs,
    KV reads, all-reduces, host); a family whose rows are all one model has measured nothing that depends on the
    shape. A prediction beyond either is outside the rows' regime and says so."""
    rows = [band.Regime(seq_len=128, batch=b, model="llama3.1-405b", precision="fp8") for b in (1, 64, 256)]
    env = band.envelope(rows)
    assert env["max_batch"] == 256 and env["models"] == ["llama3.1-405b"]
    assert band.outside(band.Regime(seq_len=128, batch=256, model="llama3.1-405b"), env, "infer") == []
    why = band.outside(band.Regime(seq_len=128, batch=3200, model="llama3.1-70b"), env, "infer")
    assert why == ["3,200 concurrent sequences > the most of any row (256)",
                   "model llama3.1-70b (the rows are all llama3.1-405b)"]
    # training rows carry no serving batch; a batch is never counted against a training envelope
    assert band.outside(band.Regime(batch=3200, model="llama3.1-405b"), env, "train") == []
    # rows that give only an architecture leave the models unknown: no model is then outside
    env2 = band.envelope([*rows, band.Regime(seq_len=128)])
    assert env2["models"] is None
    assert band.outside(band.Regime(model="llama3.1-70b"), env2, "infer") == []
    # several models: any model is inside (shape effects were measured)
    env3 = band.envelope([*rows, band.Regime(model="llama3.1-70b")])
    assert band.outside(band.Regime(model="mixtral-8x7b"), env3, "infer") == []


def test_regime_batch_of_a_serving_row():
    import dataclasses

    from xpuplan.validate import public_files, read_rows

    row = next(r for p in public_files() for r in read_rows(p) if r.kind == "infer" and r.raw.get("batch"))

    def with_(**cols: str) -> band.Regime:
        raw = {**row.raw, "batch": "", "concurrency": "", "max_num_seqs": "", "num_prompts": "", **cols}
        return band.regime_of_row(dataclasses.replace(row, raw=raw))

    assert band.regime_of_row(row).batch == int(float(row.raw["batch"]))
    assert with_(concurrency="64").batch == 64
    assert with_(max_num_seqs="3200", num_prompts="1500").batch == 1500  # every prompt at once, capped
    assert with_(max_num_seqs="512").batch == 512
    assert with_(num_prompts="1000").batch is None  # the engine's default limit decides: not known here
    assert band.regime_of_row(row).model == band._model_id(row.raw.get("model"))


def test_outside_the_regime_a_fitted_family_gets_at_least_the_pooled_spread():
    """A fitted family's band is its in-sample error (MI300X serving: one model, one build, +-5%): outside its
    regime it is treated like a family without rows of its own, the wider of its spread and all rows' spread,
    then widened x2; inside, it stays its own."""
    inside = band.band_record("amd-mi300x-192gb", "infer",
                              band.Regime(seq_len=128, n_devices=8, precision="fp8", batch=64, model="llama3.1-405b"))
    out = band.band_record("amd-mi300x-192gb", "infer",
                           band.Regime(seq_len=128, n_devices=8, precision="fp8", batch=3200, model="llama3.1-405b"))
    pooled = band.band_record("amd-mi300x-192gb", "infer")
    table = band._table()["kinds"]["infer"]["all"]
    assert inside.extrapolation == () and out.extrapolation[0].startswith("3,200 concurrent sequences")
    assert out.widened_by == band.EXTRAPOLATION_WIDENING
    assert out.high_fraction >= table["p90_measured_over_predicted_minus_1"] * band.EXTRAPOLATION_WIDENING - 1e-12
    assert out.low_fraction >= min(0.95, -table["p10_measured_over_predicted_minus_1"] * band.EXTRAPOLATION_WIDENING) - 1e-12
    assert out.high_fraction > inside.high_fraction and pooled.high_fraction == inside.high_fraction
    assert "all" in out.source and "spread" in out.source


def test_fine_tuning_outside_full_training_rows():
    env = band.envelope([band.Regime(seq_len=4096, method="full")])
    assert env["methods"] == ["full"]
    why = band.outside(band.Regime(seq_len=4096, method="lora"), env, "train")
    assert why == ["lora fine-tuning (the rows are full training only)"]
    assert band.outside(band.Regime(seq_len=4096, method="full"), env, "train") == []
    # the public training rows are all full training: a LoRA estimate's band is widened
    lora = band.band_record("nvidia-h100-sxm-80gb", "train", band.Regime(seq_len=4096, n_devices=8, method="lora"))
    full = band.band_record("nvidia-h100-sxm-80gb", "train", band.Regime(seq_len=4096, n_devices=8, method="full"))
    assert lora.extrapolation and lora.widened_by > full.widened_by
    assert all(g.method == "full" for g in band.public_regimes().values() if g.method)
