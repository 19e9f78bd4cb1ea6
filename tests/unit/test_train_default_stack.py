"""Without --stack a job runs the training stack its device's vendor ships (``hardware_defaults`` in
training_stacks.yaml: MaxText on TPUs, MindSpeed-LLM on Ascend, Intel's Megatron-DeepSpeed on Gaudi, else
Megatron-Core)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from xpuplan.catalog import load_catalog
from xpuplan.catalog.stacks import StacksFile, default_training_stack, load_stacks
from xpuplan.cli.main import app
from xpuplan.validate.rows import read_rows
from xpuplan.validate.train_predictor import predict


@pytest.mark.parametrize(("device", "stack"), [
    ("google-tpu-v5p", "maxtext"), ("google-tpu-v6e", "maxtext"), ("huawei-ascend-910b", "mindspeed-mcore"),
    ("nvidia-h100-sxm-80gb", "megatron-core"), ("amd-mi300x-192gb", "megatron-core"),
    ("intel-gaudi2", "megatron-deepspeed-gaudi"), ("intel-gaudi3", "megatron-deepspeed-gaudi"),
])
def test_the_default_stack_follows_the_device(device: str, stack: str):
    dev = load_catalog().devices[device]
    assert default_training_stack(dev).id == stack
    assert default_training_stack().id == load_stacks().default_stack == "megatron-core"
    assert all(h.source.strip() for h in load_stacks().hardware_defaults)


def test_the_command_line_reports_it_and_a_named_stack_wins():
    args = ["train", "search", "--model", "qwen3-30b-a3b", "--hw", "tpu-v5p", "--devices", "64", "--seq-len", "4096",
            "--top", "3", "--json"]
    out = json.loads(CliRunner().invoke(app, args).output)
    assert out["used"]["assumptions"]["training_stack"]["id"] == "maxtext"
    # MaxText has no opt-in MoE all-to-all overlap: no -epo plan on a TPU
    assert out["plans"] and not any(p["key"].endswith("-epo") for p in out["plans"])
    named = json.loads(CliRunner().invoke(app, [*args, "--stack", "megatron-core"]).output)
    assert named["used"]["assumptions"]["training_stack"]["id"] == "megatron-core"


def test_a_validation_row_without_a_framework_gets_its_devices_default(tmp_path):
    src = next(r for r in read_rows(_public("training_public_2.csv")) if r.hardware == "google-tpu-v5e")
    head, line = _csv_line(_public("training_public_2.csv"), src.id)
    cols = head.split(",")
    row = next(csv.reader(io.StringIO(line)))
    row[cols.index("framework")] = ""
    f = tmp_path / "rows.csv"
    buf = io.StringIO()
    csv.writer(buf).writerows([cols, row])
    f.write_text(buf.getvalue(), encoding="utf-8")
    p = predict(read_rows(f)[0])
    assert p.details["inferred"]["stack"] == "maxtext (default)"


def test_a_stacks_file_refuses_a_bad_hardware_default():
    base = load_stacks().model_dump()
    for bad in ({"kind": "TPU", "stack": "no-such", "source": "x"}, {"stack": "maxtext", "source": "x"}):
        with pytest.raises(ValidationError):
            StacksFile.model_validate({**base, "hardware_defaults": [bad]})


def _public(name: str):
    from xpuplan.validate.data_files import data_dir

    return data_dir() / name


def _csv_line(path, row_id: str) -> tuple[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0], next(x for x in lines[1:] if x.startswith(row_id + ","))
