"""Repeat `bench run --quick` -> `calibrate` -> `validate --local` on this machine and report the
spread of the prediction errors (the figures quoted in docs/measurement.md).

    python benchmarks/bench_local_validation.py [--repeats 4] [--device cpu]

Each repeat uses a fresh temporary store and a fresh process (memory placement, and with it the
measured bandwidth, differs between processes on virtual machines). Needs torch.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def _xpuplan(args: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run([sys.executable, "-m", "xpuplan", *args], capture_output=True, text=True, env=env, check=False)
    if proc.returncode:
        raise SystemExit(f"xpuplan {' '.join(args)} failed:\n{proc.stderr}")
    return proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    errors: dict[str, list[float]] = {}
    for i in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, XPUPLAN_DB_URL=f"sqlite:///{Path(tmp) / 'x.db'}", XPUPLAN_USE_CALIBRATION="1")
            head = json.loads(_xpuplan(["bench", "run", "--device", args.device, "--quick", "--json"], env))["headline"]
            fit = json.loads(_xpuplan(["calibrate", "--from", "latest", "--json"], env))
            rows = json.loads(_xpuplan(["validate", "--local", "latest", "--json"], env))["rows"]
        line = [f"repeat {i + 1}:"]
        for r in rows:
            errors.setdefault(r["metric"], []).append(r["error"])
            line.append(f"{r['metric']} measured {r['measured']:.4g} predicted {r['predicted']:.4g} ({r['error'] * 100:+.1f}%)")
        gemm = ", ".join(f"{k} {v:.3g}" for k, v in head.get("gemm_best_tflops", {}).items())
        line.append(f"| GEMM TFLOP/s {gemm} | STREAM GB/s {head.get('stream_gb_per_s')} "
                    f"| gemm_peak_fraction {fit['efficiency']['gemm_peak_fraction']:.4f}")
        print("  ".join(line), flush=True)
    for metric, errs in errors.items():
        print(f"{metric}: error from {min(errs) * 100:+.1f}% to {max(errs) * 100:+.1f}% over {len(errs)} repeats")


if __name__ == "__main__":
    main()
