"""The README's training example lands near the run it imitates.

Llama 3 405B pre-training on 16,384 H100 (Llama 3 report, arXiv 2407.21783, Table 4): TP8, PP16
(uneven first/last stages), DP128, 8K sequences, 16M-token batches, 41% BF16 MFU (38-43% across the
configurations of the table). The search, given only the model, the cluster and the token count,
must find a plan within 15% of that figure: it tries uneven pipelines and grows the default batch
with the cluster (1,024 tokens per device, workload.training.default_global_batch_tokens).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app
from xpuplan.workload.training import default_global_batch_tokens

PUBLISHED_MFU = 0.41
TOLERANCE = 0.15


@pytest.mark.validation
def test_405b_search_on_16k_h100_is_near_meta_mfu() -> None:
    r = CliRunner().invoke(app, ["train", "search", "--model", "llama3.1-405b", "--hw", "H100", "--devices",
                                 "16384", "--tokens", "15e12", "--seq-len", "8192", "--top", "1", "--json"])
    assert r.exit_code == 0, r.output
    best = json.loads(r.stdout)["plans"][0]
    assert best["mfu"] == pytest.approx(PUBLISHED_MFU, rel=TOLERANCE)


def test_default_batch_grows_with_the_cluster() -> None:
    assert default_global_batch_tokens(1024, 8192) == 4 * 1024 * 1024
    assert default_global_batch_tokens(16384, 8192) == 16 * 1024 * 1024
    assert default_global_batch_tokens(16384, 8192) % 8192 == 0
    assert default_global_batch_tokens(1, 1_000_000) == 4 * 1_000_000
