"""Training jobs and scenario files (``xpuplan.workload.training``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from xpuplan.errors import UserInputError
from xpuplan.workload.training import (
    DEFAULT_GLOBAL_BATCH_TOKENS,
    TrainingJob,
    TrainingScenario,
    load_training_scenario,
    parse_device_range,
)


def test_job_batch_defaults_and_checks():
    assert TrainingJob(seq_len=4096).global_batch_seqs == DEFAULT_GLOBAL_BATCH_TOKENS // 4096
    assert TrainingJob(seq_len=2048, method="lora").global_batch_seqs == 64
    assert TrainingJob(seq_len=2048, global_batch_tokens=2048 * 10).tokens_per_step == 20480
    with pytest.raises(ValidationError, match="multiple of seq_len"):
        TrainingJob(seq_len=2048, global_batch_tokens=3000)
    with pytest.raises(ValidationError):
        TrainingJob(memory_reserve=1.5)


def test_device_ranges():
    assert parse_device_range("8:64") == [8, 16, 32, 64]
    assert parse_device_range("8:32:8") == [8, 16, 24, 32]
    assert parse_device_range("64,8,8") == [8, 64]
    for bad in ("0:8", "8:4", "a:b", "8:16:0", "1:2:3:4", ""):
        with pytest.raises(UserInputError) as exc:
            parse_device_range(bad)
        assert exc.value.field == "devices_range"


def test_scenario_file(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("model: llama3-70b\nhardware: H100\ndevices_range: '64:512'\njob: {seq_len: 8192}\n")
    sc = load_training_scenario(f)
    assert sc.devices_range == "64:512" and sc.job.seq_len == 8192 and sc.plan is None
    with pytest.raises(ValidationError, match="not both"):
        TrainingScenario(model="x", hardware="y", devices=8, devices_range="8:16")
    f.write_text("model: llama3-70b\nhardware: H100\nplan:\n  tp: 8\n  zero: 1\n")
    with pytest.raises(UserInputError) as exc:
        load_training_scenario(f)
    assert exc.value.line == 5 and exc.value.field == "plan.zero"
