"""``xpuplan train estimate|search`` through the real CLI: output, JSON and exit codes."""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("no_calibration")


def invoke(*args: str):
    return runner.invoke(app, ["train", *args])


def test_estimate_json():
    r = invoke("estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "64", "--tp", "8", "--pp", "2",
               "--seq-len", "8192", "--tokens", "1e12", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["feasible"] is True and d["plan"]["dp"] == 4 and d["plan"]["sp"] is True
    assert d["key"] == "tp8-pp2-vpp1-dp4-cp1-ep1-sp1-z1-rsel-mb1-ga128-bf16"
    for k in ("step_time_s", "tokens_per_s", "tokens_per_s_per_device", "mfu", "hfu", "memory", "step",
              "time_to_train_s", "device_time_s", "energy_j", "efficiency_source", "cluster"):
        assert k in d
    assert d["memory"]["total_bytes"] < d["memory"]["usable_bytes"]


def test_estimate_table_and_megatron_emit():
    r = invoke("estimate", "--model", "llama3-8b", "--hw", "A100", "--devices", "16", "--tp", "2", "--emit", "megatron")
    assert r.exit_code == 0, r.output
    assert "step time breakdown" in r.stdout and "memory per device" in r.stdout
    assert "--tensor-model-parallel-size 2" in r.stdout and "--sequence-parallel" in r.stdout
    assert "--micro-batch-size 1" in r.stdout and "--recompute-granularity selective" in r.stdout


def test_infeasible_plan_exits_3_and_says_what_it_would_take():
    r = invoke("estimate", "--model", "gpt3-175b", "--hw", "H100", "--devices", "8", "--tp", "8", "--zero", "3",
               "--seq-len", "2048", "--global-batch", str(1536 * 2048))
    assert r.exit_code == 3
    assert "does not fit" in r.output and "what it would take: at least" in r.output


def test_user_error_names_the_field_and_exits_2():
    r = invoke("estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "64", "--tp", "3")
    assert r.exit_code == 2
    assert "tp (3) must divide n_heads (64)" in r.output and "Traceback" not in r.output
    r = invoke("estimate", "--model", "llama3-70b", "--hw", "H100", "--devices", "64", "--recompute", "sometimes")
    assert r.exit_code == 2 and "recompute" in r.output
    r = invoke("estimate", "--model", "llama3-70b", "--hw", "H100")
    assert r.exit_code == 2 and "devices" in r.output
    r = invoke("search", "--model", "llama3-70b", "--hw", "H100", "--devices", "8", "--emit", "jax")
    assert r.exit_code == 2 and "emit" in r.output


def test_search_json_has_plans_evaluated_and_ranked_plans():
    r = invoke("search", "--model", "llama3-8b", "--hw", "H100", "--devices", "32", "--tokens", "1e12", "--top", "5",
               "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["plans_evaluated"] > 100 and len(d["plans"]) == 5
    tps = [p["tokens_per_s"] for p in d["plans"]]
    assert tps == sorted(tps, reverse=True)
    assert all(p["feasible"] and p["key"] for p in d["plans"])


def test_search_range_table_and_torchtitan_emit():
    r = invoke("search", "--model", "llama3-8b", "--hw", "H100", "--devices-range", "8:32", "--top", "3",
               "--emit", "torchtitan")
    assert r.exit_code == 0, r.output
    assert "Pareto front" in r.stdout and "best plans" in r.stdout
    assert "--parallelism.tensor-parallel-degree" in r.stdout and "--training.seq-len 4096" in r.stdout
    assert "torchtitan 0.3.0 (pinned" in r.stdout


def test_search_nothing_fits_exits_3():
    r = invoke("search", "--model", "gpt3-175b", "--hw", "H100", "--devices", "8", "--seq-len", "2048")
    assert r.exit_code == 3 and "what it would take" in r.output


def test_deepspeed_emit_prints_config():
    r = invoke("estimate", "--model", "llama3-8b", "--hw", "A100", "--devices", "8", "--zero", "2", "--emit", "deepspeed")
    assert r.exit_code == 0, r.output
    assert '"stage": 2' in r.stdout and "ds_config.json" in r.stdout


def test_scenario_file(tmp_path):
    f = tmp_path / "job.yaml"
    f.write_text(textwrap.dedent("""
        model: llama3-8b
        hardware: nvidia-a100-sxm-80gb
        devices: 16
        job:
          seq_len: 2048
          global_batch_tokens: 262144
          train_tokens: 1.0e11
        plan:
          tp: 2
          recompute: full
    """))
    r = invoke("estimate", "--scenario", str(f), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["plan"]["tp"] == 2 and d["plan"]["recompute"] == "full" and d["seq_len"] == 2048
    r = invoke("estimate", "--scenario", str(f), "--tp", "4", "--json")  # flags win over the file
    assert json.loads(r.stdout)["plan"]["tp"] == 4
    r = invoke("search", "--scenario", str(f), "--top", "2", "--json")
    assert r.exit_code == 0 and len(json.loads(r.stdout)["plans"]) == 2 and all(
        p["plan"]["tp"] == 2 for p in json.loads(r.stdout)["plans"])


def test_bad_scenario_names_file_line_and_field(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("model: llama3-8b\nhardware: H100\ndevices: 8\njob:\n  seq_len: -5\n")
    r = invoke("estimate", "--scenario", str(f))
    assert r.exit_code == 2
    assert "bad.yaml:5" in r.output and "job.seq_len" in r.output


def test_examples_in_docs_run():
    """Every ``$ xpuplan train ...`` line of docs/training.md runs with the exit status it states."""
    import re
    import shlex
    from pathlib import Path

    doc = Path(__file__).parents[2] / "docs" / "training.md"
    if not doc.exists():
        pytest.skip("docs/training.md not found")
    lines = [ln[2:] for ln in doc.read_text(encoding="utf-8").splitlines() if ln.startswith("$ xpuplan train ")]
    assert len(lines) >= 5
    for line in lines:
        command, _, comment = line.partition("#")
        m = re.search(r"exit (\d)", comment)
        expected = int(m.group(1)) if m else 0
        args = shlex.split(command)[1:]
        r = runner.invoke(app, args)
        assert r.exit_code == expected, f"{line}\n{r.output}"


def test_emit_errors_name_the_flag():
    """A planner error about `emit` names --emit (was: field 'emit')."""
    r = invoke("estimate", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--method", "lora", "--emit", "megatron")
    assert r.exit_code == 2 and "field '--emit'" in r.output, r.output


def test_power_cap_flag_slows_the_plan_and_is_checked():
    args = ("--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--tp", "2", "--seq-len", "8192", "--json")
    free = json.loads(invoke("estimate", *args).stdout)
    r = invoke("estimate", *args, "--power-cap-w", "450")
    assert r.exit_code == 0, r.output
    capped = json.loads(r.stdout)
    assert capped["tokens_per_s"] < free["tokens_per_s"]
    assert any("power cap 450 W" in n for n in capped["notes"])
    s = invoke("search", "--model", "llama3-8b", "--hw", "H100", "--devices", "8", "--power-cap-w", "450", "--json")
    assert s.exit_code == 0, s.output
    bad = invoke("estimate", *args, "--power-cap-w", "-5")
    assert bad.exit_code == 2 and "--power-cap-w" in bad.output
