"""Start-up time of the CLI (issue 9 §6): ``xpuplan hw list --json`` against the bare import of the
libraries every command needs (``python -c "import numpy, pydantic, yaml, typer, rich"``), both
measured in this run, in fresh processes, median of N. Target: ratio <= 3.

Also prints which heavy optional modules a plain ``hw list`` imported (none of SQLAlchemy,
alembic, torch, pandas should be) and the slowest xpuplan imports (``-X importtime``).

    python benchmarks/startup.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

BASELINE = "import numpy, pydantic, yaml, typer, rich"
COMMAND = ("from xpuplan.cli.main import run; import sys; sys.argv = ['xpuplan', 'hw', 'list', '--json']; run()")
HEAVY = ("sqlalchemy", "alembic", "torch", "pandas", "matplotlib", "scipy")


def _time(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    _time(BASELINE)  # warm the OS file cache for both
    _time(COMMAND)
    base, cmd = [], []
    for _ in range(args.repeat):  # interleaved, so that load on the machine hits both alike
        base.append(_time(BASELINE))
        cmd.append(_time(COMMAND))
    b, c = statistics.median(base), statistics.median(cmd)
    print(f"baseline  python -c '{BASELINE}': median {b * 1e3:7.0f} ms  (min {min(base) * 1e3:.0f})")
    print(f"command   xpuplan hw list --json:              median {c * 1e3:7.0f} ms  (min {min(cmd) * 1e3:.0f})")
    print(f"ratio     {c / b:.2f}x median, {min(cmd) / min(base):.2f}x min   (target <= 3x)")
    probe = ("import sys; " + COMMAND.replace("run()", "import contextlib, io\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        run()\n    except SystemExit:\n        pass\n")
             + f"\nprint(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    print(f"heavy modules imported by hw list: {out or 'none'}")
    imp = subprocess.run([sys.executable, "-X", "importtime", "-c", COMMAND], capture_output=True,
                         text=True, check=True).stderr.splitlines()
    rows = []
    for line in imp:
        parts = line.split("|")
        if len(parts) == 3 and "xpuplan" in parts[2]:
            try:
                rows.append((int(parts[1]), parts[2].strip()))
            except ValueError:
                continue
    print("slowest xpuplan imports of hw list (cumulative, ms):")
    for us, name in sorted(rows, reverse=True)[:8]:
        print(f"  {us / 1e3:7.1f}  {name}")


if __name__ == "__main__":
    main()
