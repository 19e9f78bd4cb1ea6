"""Collective bandwidth and latency with torch.distributed, run under ``torchrun``::

    torchrun --nproc-per-node 8 -m xpuplan.bench.collectives [--quick] [--db URL]
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        -m xpuplan.bench.collectives

Measures all-reduce, all-gather, reduce-scatter, all-to-all and send/recv (a ring of
point-to-point transfers) over a range of message sizes with the device's own backend (NCCL/RCCL
on CUDA and ROCm, HCCL on Ascend, CNCL on Cambricon, Gloo on CPUs). Sizes follow perf's
convention (``perf.collectives``): the whole buffer one rank contributes or receives. Times are
the slowest rank's; bus bandwidth uses nccl-tests' factors. Rank 0 stores a ``collectives`` run
(one transaction per measurement) that ``xpuplan calibrate`` fits, and prints a table.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

from xpuplan import units
from xpuplan.calibrate.fit import bus_factor
from xpuplan.errors import UnknownIdError, UserInputError, echo

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
#: torch.distributed backend per accelerator kind.
DIST_BACKENDS = {"cuda": "nccl", "rocm": "nccl", "npu": "hccl", "mlu": "cncl", "cpu": "gloo"}
#: What ``--backend`` accepts: auto (the device's own backend) or one of DIST_BACKENDS'.
BACKEND_CHOICES = ("auto", *dict.fromkeys(DIST_BACKENDS.values()))
#: The device kind (``detect`` probe) each accelerator backend drives; Gloo runs on the CPUs.
BACKEND_DEVICES = {"nccl": "cuda", "hccl": "npu", "cncl": "mlu"}
#: Message sizes: powers of SIZE_STEP between these bounds, bytes.
SIZE_STEP = 4
QUICK_SIZES = (4 * units.KiB, 4 * units.MiB)
FULL_SIZES_ACCEL = (8.0, 1 * units.GiB)
FULL_SIZES_CPU = (8.0, 64 * units.MiB)
#: (warm-up, timed) iterations per size.
QUICK_ITERS = (2, 5)
FULL_ITERS = (5, 20)
#: Process-group set-up timeout.
INIT_TIMEOUT = datetime.timedelta(minutes=5)


def message_sizes(lo: float, hi: float, n_ranks: int) -> list[int]:
    """Powers of SIZE_STEP from ``lo`` to ``hi`` bytes, each divisible by 4 * n_ranks (fp32 split)."""
    out, s = [], float(lo)
    while s <= hi:
        quantum = 4 * n_ranks
        out.append(max(quantum, int(s) // quantum * quantum))
        s *= SIZE_STEP
    return sorted(set(out))


def device_kind(backend: str, torch: Any) -> str:
    """The device kind (cuda, npu, mlu or cpu) a run with ``backend`` uses on this machine; an
    unknown backend, or one whose device is not here, raises UserInputError naming ``--backend``."""
    from xpuplan.bench.detect import _PROBES

    if backend not in BACKEND_CHOICES:
        raise UserInputError(f"unknown backend {echo(backend)}; expected one of {', '.join(BACKEND_CHOICES)}",
                             field="--backend")
    if backend == "gloo":
        return "cpu"
    if backend == "auto":
        return next((kind for kind in BACKEND_DEVICES.values() if _PROBES[kind](torch)), "cpu")
    kind = BACKEND_DEVICES[backend]
    if not _PROBES[kind](torch):
        raise UserInputError(f"backend {backend} runs on {kind} devices and this PyTorch build sees none; use "
                             "--backend auto or gloo", field="--backend")
    return kind


def catalog_device_id(device_id: str) -> str:
    """The catalog id ``device_id`` (an id or alias) names; unknown -> UserInputError naming ``--device-id``."""
    from xpuplan.catalog import load_catalog

    try:
        return load_catalog().resolve(device_id)
    except UnknownIdError as exc:
        raise UserInputError(exc.message, field="--device-id", hint=exc.hint) from None


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m xpuplan.bench.collectives", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="few sizes (4 KiB-4 MiB) and iterations")
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated subset of {', '.join(OPS)}")
    p.add_argument("--min-bytes", type=float, default=None)
    p.add_argument("--max-bytes", type=float, default=None)
    p.add_argument("--backend", default="auto", choices=BACKEND_CHOICES, help="torch.distributed backend")
    p.add_argument("--device-id", default=None, help="catalog id of the device (default: detected)")
    p.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default: XPUPLAN_DB_URL or the data dir)")
    p.add_argument("--no-store", action="store_true", help="do not write to the store")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON (rank 0)")
    return p.parse_args(argv)


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def _op_fn(dist: Any, torch: Any, op: str, size: int, rank: int, n: int, dev: str) -> Callable[[], None]:
    elems = size // 4
    if op == "all_reduce":
        buf = torch.ones(elems, device=dev)
        return lambda: dist.all_reduce(buf)
    if op == "all_gather":
        inp, out = torch.ones(elems // n, device=dev), torch.empty(elems, device=dev)
        return lambda: dist.all_gather_into_tensor(out, inp)
    if op == "reduce_scatter":
        inp, out = torch.ones(elems, device=dev), torch.empty(elems // n, device=dev)
        return lambda: dist.reduce_scatter_tensor(out, inp)
    if op == "all_to_all":
        inp, out = torch.ones(elems, device=dev), torch.empty(elems, device=dev)
        return lambda: dist.all_to_all_single(out, inp)
    # send_recv: every rank sends its buffer to the next and receives from the previous
    send, recv = torch.ones(elems, device=dev), torch.empty(elems, device=dev)

    def ring() -> None:
        ops = [dist.P2POp(dist.isend, send, (rank + 1) % n), dist.P2POp(dist.irecv, recv, (rank - 1) % n)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()

    return ring


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    bad = [o for o in ops if o not in OPS]
    if bad:
        print(f"error: field 'ops': unknown collective(s) {', '.join(bad)}; expected {', '.join(OPS)}", file=sys.stderr)
        return 2
    world = _env_int("WORLD_SIZE", 1)
    if world < 2 or "RANK" not in os.environ:
        print("error: run under torchrun with at least 2 processes, e.g. "
              "`torchrun --nproc-per-node 2 -m xpuplan.bench.collectives --quick`", file=sys.stderr)
        return 2
    try:
        from xpuplan.bench import require_torch

        torch = require_torch()
        device_kind(args.backend, torch)
        if args.device_id:
            catalog_device_id(args.device_id)
    except UserInputError as exc:
        print(f"error: {exc.render()}", file=sys.stderr)
        return 2
    import torch.distributed as dist

    from xpuplan.bench.detect import detect_backend

    rank, local_rank = _env_int("RANK", 0), _env_int("LOCAL_RANK", 0)
    local_world = _env_int("LOCAL_WORLD_SIZE", world)
    nodes = max(1, world // max(local_world, 1))
    requested = "cpu" if args.backend == "gloo" else "auto"
    backend = detect_backend(requested, index=local_rank)
    dist_backend = DIST_BACKENDS[backend.kind] if args.backend == "auto" else args.backend
    dev = backend.torch_device if backend.is_accelerator else "cpu"
    if backend.is_accelerator:
        getattr(torch, dev.split(":")[0]).set_device(local_rank)
    # all_gather_into_tensor / reduce_scatter_tensor are deprecated in new torch releases but are
    # the only names older ones (2.3) have: keep them, without the warnings.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\.distributed")
    dist.init_process_group(dist_backend, timeout=INIT_TIMEOUT)
    try:
        return _measure(args, ops, torch, dist, backend, dist_backend, dev, rank, world, local_world, nodes)
    finally:
        dist.destroy_process_group()


def _measure(args: argparse.Namespace, ops: list[str], torch: Any, dist: Any, backend: Any, dist_backend: str, dev: str,
             rank: int, world: int, local_world: int, nodes: int) -> int:
    if args.quick:
        lo, hi = QUICK_SIZES
    else:
        lo, hi = FULL_SIZES_ACCEL if backend.is_accelerator else FULL_SIZES_CPU
    lo, hi = args.min_bytes or lo, args.max_bytes or hi
    warm, iters = QUICK_ITERS if args.quick else FULL_ITERS
    sizes = message_sizes(lo, hi, world)
    scope = "scale_up" if nodes == 1 else "scale_out"

    store = run_id = None
    if rank == 0 and not args.no_store:
        from xpuplan.bench.runner import resolve_device_id
        from xpuplan.store.engine import open_store
        from xpuplan.store.records import RunInfo, start_run

        store = open_store(args.db)
        run_id = start_run(store, RunInfo(
            kind="collectives", device_id=resolve_device_id(backend, args.device_id), device_name=backend.name,
            backend=dist_backend, n_devices=world, environment=backend.environment,
            config={"quick": args.quick, "ops": ops, "sizes": sizes, "n_ranks": world, "local_ranks": local_world,
                    "nodes": nodes, "scope": scope, "iters": iters, "dist_backend": dist_backend}))
    results: list[dict[str, Any]] = []
    status = "completed"
    try:
        for op in ops:
            for size in sizes:
                fn = _op_fn(dist, torch, op, size, rank, world, dev)
                for _ in range(warm):
                    fn()
                backend.synchronize()
                dist.barrier()
                t0 = time.perf_counter()
                for _ in range(iters):
                    fn()
                backend.synchronize()
                elapsed = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64, device=dev)
                dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)  # the slowest rank sets the time
                t = float(elapsed.item())
                algbw = size / t
                busbw = algbw * bus_factor(op, world)
                row = {"op": op, "size_bytes": size, "time_s": t, "algbw_gb_per_s": algbw / units.GB_PER_S,
                       "busbw_gb_per_s": busbw / units.GB_PER_S, "n_ranks": world, "local_ranks": local_world,
                       "nodes": nodes, "scope": scope, "backend": dist_backend, "iters": iters}
                results.append(row)
                if rank == 0:
                    print(f"{op:15s} {size:>12d} B  {t / units.US:10.1f} us  algbw {algbw / units.GB_PER_S:8.3f} GB/s  "
                          f"busbw {busbw / units.GB_PER_S:8.3f} GB/s", flush=True)
                    if store is not None and run_id is not None:
                        from xpuplan.store.records import Record, add_measurement

                        add_measurement(store, run_id, Record(
                            kind="collective", name=f"{op} {size} B", dtype="fp32", metric="busbw_gb_per_s",
                            value=busbw / units.GB_PER_S, unit="GB/s", time_s=t, bytes=float(size), params=row))
    except BaseException:
        status = "failed"
        raise
    finally:
        if store is not None and run_id is not None:
            from xpuplan.store.records import finish_run

            finish_run(store, run_id, status)
            store.dispose()
    if rank == 0:
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"run_id": run_id, "results": results}, f, indent=2)
        if run_id is not None:
            print(f"stored as run {run_id}; fit with `xpuplan calibrate --from {run_id}`", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
