"""Load on the HTTP API: concurrent clients against the estimate and recommend endpoints.

    python benchmarks/api_load.py                        # 50 clients for 30 s (the issue's target)
    python benchmarks/api_load.py --clients 10 --duration 5
    python benchmarks/api_load.py --json OUT.json        # also write the figures as JSON

Starts its own server (``xpuplan serve`` on 127.0.0.1, a free port, a temporary SQLite store,
calibration off), waits for ``/healthz``, runs ``--clients`` concurrent clients for ``--duration``
seconds (at most ``--max-requests`` requests in all), then stops the server. Each client loops over
the request mix below, one request at a time. Reports, per endpoint and overall: requests, errors
(any status other than 200, or no answer within ``--timeout``), P50/P99 latency and throughput.
Loopback only: the server is never bound anywhere else. A benchmark, not a test: nothing is
asserted; the exit status is 1 when any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"

#: (name, path, body): the mix every client loops over.
MIX: list[tuple[str, str, dict[str, Any]]] = [
    ("train.estimate", "/api/v1/train/estimate",
     {"model": "llama3-70b", "hw": "H100", "devices": 64, "tp": 8, "pp": 2, "tokens": 1e12}),
    ("infer.estimate", "/api/v1/infer/estimate",
     {"model": "llama3-8b", "hw": "H100", "batch": "1,16,64", "input_len": 1024, "output_len": 256}),
    ("memory.train", "/api/v1/memory/train", {"model": "llama3-8b", "hw": "H100", "tp": 4}),
    ("infer.estimate.910b", "/api/v1/infer/estimate",
     {"model": "qwen2.5-7b", "hw": "910B", "batch": "8", "input_len": 2048, "output_len": 512}),
    ("recommend", "/api/v1/recommend", {"preset": "finetuning-lora", "samples": 200, "seed": 1}),
]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _percentile(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    ys = sorted(xs)
    k = (len(ys) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(ys) - 1)
    return ys[lo] + (ys[hi] - ys[lo]) * (k - lo)


async def _wait_healthy(base: str, proc: subprocess.Popen[bytes], timeout_s: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=base, timeout=2.0) as c:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with status {proc.returncode}")
            try:
                if (await c.get("/healthz")).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise SystemExit("the server did not answer /healthz within 60 s")


async def _run(base: str, clients: int, duration_s: float, max_requests: int, timeout_s: float) -> dict[str, Any]:
    import httpx

    latencies: dict[str, list[float]] = defaultdict(list)
    errors: dict[str, list[str]] = defaultdict(list)
    sent = 0
    # idle connections are dropped by the client before the server's keep-alive (30 s) closes them
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients, keepalive_expiry=10.0)

    async with httpx.AsyncClient(base_url=base, timeout=timeout_s, limits=limits) as c:
        # one warm-up request per endpoint (first calls load the catalog and build caches)
        for _, path, body in MIX:
            await c.post(path, json=body)

        async def client(k: int) -> None:
            nonlocal sent
            i = k  # each client starts at a different point of the mix
            while time.monotonic() < stop_at and sent < max_requests:
                name, path, body = MIX[i % len(MIX)]
                i += 1
                sent += 1
                t0 = time.perf_counter()
                try:
                    r = await c.post(path, json=body)
                    dt = time.perf_counter() - t0
                    if r.status_code == 200:
                        latencies[name].append(dt)
                    else:
                        errors[name].append(f"HTTP {r.status_code}: {r.text[:120]}")
                except httpx.HTTPError as exc:
                    errors[name].append(f"{type(exc).__name__}: {exc}"[:160])

        t_start = time.monotonic()
        stop_at = t_start + duration_s
        await asyncio.gather(*(client(k) for k in range(clients)))
        elapsed = time.monotonic() - t_start

    def stats(xs: list[float], errs: list[str]) -> dict[str, Any]:
        return {"ok": len(xs), "errors": len(errs), "p50_ms": _percentile(xs, 0.5) * 1e3,
                "p99_ms": _percentile(xs, 0.99) * 1e3, "mean_ms": (statistics.fmean(xs) * 1e3) if xs else None,
                "requests_per_s": len(xs) / elapsed if elapsed > 0 else None,
                "error_samples": sorted(set(errs))[:3]}

    every = [x for xs in latencies.values() for x in xs]
    all_errors = [e for es in errors.values() for e in es]
    return {"clients": clients, "duration_s": duration_s, "elapsed_s": elapsed,
            "endpoints": {name: stats(latencies[name], errors[name]) for name, _, _ in MIX},
            "total": stats(every, all_errors)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50, help="concurrent clients (default 50)")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of load (default 30)")
    ap.add_argument("--max-requests", type=int, default=100_000, help="requests in all, at most")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds a request may take before it counts "
                    "as an error")
    ap.add_argument("--json", metavar="OUT", help="also write the figures as JSON")
    args = ap.parse_args(argv)
    if not (1 <= args.clients <= 1000 and 0 < args.duration <= 600 and 1 <= args.max_requests <= 1_000_000):
        ap.error("--clients 1..1000, --duration (0, 600], --max-requests 1..1,000,000")

    port = _free_port()
    base = f"http://{HOST}:{port}"
    with tempfile.TemporaryDirectory(prefix="xpuplan-load-") as tmp:
        env = {**os.environ, "XPUPLAN_USE_CALIBRATION": "0"}
        env.pop("XPUPLAN_TOKEN", None)
        proc = subprocess.Popen([sys.executable, "-m", "xpuplan", "serve", "--host", HOST, "--port", str(port),
                                 "--db", f"sqlite:///{Path(tmp) / 'load.db'}", "--log-level", "warning"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            asyncio.run(_wait_healthy(base, proc))
            res = asyncio.run(_run(base, args.clients, args.duration, args.max_requests, args.timeout))
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    print(f"{res['clients']} clients, {res['elapsed_s']:.1f} s on {base} (cpu count {os.cpu_count()})")
    print(f"{'endpoint':<22}{'ok':>8}{'errors':>8}{'P50 ms':>10}{'P99 ms':>10}{'req/s':>9}")
    for name, s in [*res["endpoints"].items(), ("total", res["total"])]:
        print(f"{name:<22}{s['ok']:>8}{s['errors']:>8}{s['p50_ms']:>10.1f}{s['p99_ms']:>10.1f}"
              f"{s['requests_per_s'] or 0:>9.1f}")
        for e in s["error_samples"]:
            print(f"    {e}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2), encoding="utf-8")
    return 1 if res["total"]["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
