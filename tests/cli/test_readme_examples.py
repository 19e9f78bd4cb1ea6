"""Every ``xpuplan ...`` command in README.md ("What you can ask", "Measuring your own hardware") runs,
with the exit status it should have, as text and as ``--json`` (one JSON document on stdout): the README
cannot drift from the CLI. Commands that need PyTorch or a benchmark run are listed in ``SKIP`` with the
reason; placeholder paths in the README are replaced by the test fixtures."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from xpuplan.cli.main import app, take_hw_figures

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
FIXTURES = ROOT / "tests" / "fixtures"
SECTIONS = ("## What you can ask", "## Measuring your own hardware")

#: README commands not run here, and why.
SKIP = {
    "xpuplan bench run": "needs PyTorch (tests/bench covers `bench run` when torch is installed)",
    "xpuplan bench run --quick": "needs PyTorch (tests/bench covers `bench run` when torch is installed)",
    "xpuplan calibrate --device generic-cpu": "needs a `bench run` (PyTorch) first",
    "xpuplan validate --local latest": "needs a `bench run` (PyTorch) first; without one it exits 2 by design",
    "xpuplan validate": "slow (every published row, ~9 s twice); tests/validation runs the same rows",
    "xpuplan serve": "starts a server that runs until stopped; tests/api and tests/web test the app",
}

#: README commands whose exit status is not 0 on purpose (3: the plan cannot fit, and it says why).
EXIT = {
    "xpuplan memory train --model llama3-70b --method qlora --hw 4090 --seq 2048 --recompute full": 3,
    "xpuplan train search --model gpt3-175b --hw H100 --devices 8": 3,
}

#: README placeholder file -> the fixture that stands in for it.
FILES = {
    "path/to/config.json": FIXTURES / "hf" / "llama3-8b" / "config.json",
    "all_reduce.log": FIXTURES / "bench" / "all_reduce_perf_8xh100.log",
    "run.log": FIXTURES / "bench" / "megatron_llama3-8b_8xh100.log",
}


def readme_commands() -> list[str]:
    """The ``xpuplan`` commands of the README's bash blocks in SECTIONS (comments dropped, ``&&`` split)."""
    text = README.read_text(encoding="utf-8")
    out: list[str] = []
    for title in SECTIONS:
        section = text.split(title, 1)[1].split("\n## ", 1)[0]
        for block in re.findall(r"```bash\n(.*?)```", section, flags=re.S):
            for line in block.splitlines():
                for part in re.sub(r"\s#\s.*$", "", line).split("&&"):
                    part = part.strip()
                    if part.startswith("xpuplan ") and part not in out:
                        out.append(part)
    return out


COMMANDS = readme_commands()


def test_the_readme_has_its_examples():
    assert len(COMMANDS) >= 25, COMMANDS
    assert not set(SKIP) - set(COMMANDS), "SKIP names a command the README no longer has"
    assert not set(EXIT) - set(COMMANDS), "EXIT names a command the README no longer has"


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A scratch directory with the README's relative paths (examples/, placeholders) and its own store."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    for name, fixture in FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(fixture, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XPUPLAN_DB_URL", f"sqlite:///{tmp_path / 'store.db'}")
    monkeypatch.setenv("XPUPLAN_USE_CALIBRATION", "0")
    monkeypatch.setenv("XPUPLAN_HW_FIGURES", "")
    return tmp_path


@pytest.mark.parametrize("command", [c for c in COMMANDS if c not in SKIP])
def test_readme_example_runs(command, workdir):
    runner = CliRunner()
    if command.startswith("xpuplan calibrate "):  # calibrate fits stored measurements: import the README's log first
        r = runner.invoke(app, ["import", "nccl-tests", "all_reduce.log"])
        assert r.exit_code == 0, r.output
    words, figures = take_hw_figures(shlex.split(command)[1:])  # as the `xpuplan` script does: the flag goes anywhere
    args = [*(w for f in figures for w in ("--hw-figure", f)), *words]
    expected = EXIT.get(command, 0)
    r = runner.invoke(app, args)
    assert r.exit_code == expected, f"{command}\n{r.output}"
    assert "Traceback" not in r.output and "internal error" not in r.output, r.output
    if expected == 0:
        assert r.output.strip(), f"{command} printed nothing"
    rj = runner.invoke(app, [*args, "--json"])
    assert rj.exit_code == expected, f"{command} --json\n{rj.output}"
    json.loads(rj.stdout, parse_constant=_non_finite)  # one JSON document on stdout, every number finite


def _non_finite(word: str) -> float:
    raise AssertionError(f"--json printed {word}: not valid JSON, and not a number")
