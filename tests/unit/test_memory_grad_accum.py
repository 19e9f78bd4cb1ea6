"""``memory train --grad-accum``: the micro-batches per step decide how many an interleaved pipeline's first stage
holds in flight, so the memory command gives the bytes the training estimate of the same plan gives (the web page's
memory chart passes a plan key's ga)."""

from __future__ import annotations

import json

import pytest

from tests.unit.clicheck import assert_user_error, run

pytestmark = pytest.mark.usefixtures("no_calibration")

_LAYOUT = ["--model", "mixtral-8x22b", "--hw", "H100", "--micro-batch", "1", "--tp", "2", "--pp", "4", "--cp", "4",
           "--ep", "8", "--vpp", "7", "--zero", "1", "--recompute", "selective"]


def _json(*args: str) -> dict:
    r = run(*args, "--json")
    assert r.exit_code in (0, 3), r.output
    out = json.loads(r.stdout)
    return dict(out.get("result", out))


def test_memory_train_with_the_plans_micro_batches_matches_the_estimate() -> None:
    est = _json("train", "estimate", *_LAYOUT, "--devices", "32", "--seq-len", "4096")
    ga = est["plan"]["grad_accum"]
    assert ga > 4  # many more micro-batches than stages: the interleaved first stage keeps more in flight
    mem = _json("memory", "train", *_LAYOUT, "--dp", "1", "--seq", "4096", "--grad-accum", str(ga))
    assert mem["bytes_per_device"]["total"] == pytest.approx(est["memory"]["total_bytes"])
    # without it the command assumes the fewest a pipeline runs (pp), which holds fewer in flight
    fewest = _json("memory", "train", *_LAYOUT, "--dp", "1", "--seq", "4096")
    assert fewest["bytes_per_device"]["activations"] < mem["bytes_per_device"]["activations"]


def test_memory_train_refuses_a_zero_grad_accum_naming_the_flag() -> None:
    assert_user_error(run("memory", "train", *_LAYOUT, "--grad-accum", "0"), "--grad-accum")
