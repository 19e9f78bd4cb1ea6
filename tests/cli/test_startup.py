"""Start-up: ``xpuplan CMD`` imports only the front end of CMD; the whole tree stays torch-free."""

from __future__ import annotations

import subprocess
import sys

from xpuplan.cli.main import COMMANDS, FRONTENDS


def _modules_after(argv: list[str]) -> set[str]:
    code = ("import sys, io, contextlib\n"
            "from xpuplan.cli.main import run\n"
            f"sys.argv = {['xpuplan', *argv]!r}\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try:\n        run()\n    except SystemExit:\n        pass\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith(('xpuplan', 'sqlalchemy', 'torch', 'pandas')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_hw_list_imports_only_its_front_end():
    mods = _modules_after(["hw", "list", "--json"])
    assert "xpuplan.cli.hw" in mods and "xpuplan.catalog.loader" in mods
    for heavy in ("xpuplan.cli.train", "xpuplan.cli.cost", "xpuplan.train", "xpuplan.serve", "xpuplan.cost",
                  "sqlalchemy", "torch", "pandas"):
        assert heavy not in mods, heavy


def test_every_fast_path_front_end_is_a_front_end():
    assert set(COMMANDS.values()) <= set(FRONTENDS)


def test_full_command_tree_has_every_command_and_no_torch():
    code = ("import sys; from xpuplan.cli.main import app; import typer.main; "
            "g = typer.main.get_command(app); print(' '.join(sorted(g.commands))); "
            "assert 'torch' not in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names = set(out.stdout.split())
    assert set(COMMANDS) <= names, set(COMMANDS) - names
