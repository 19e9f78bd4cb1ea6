"""Host time per scheduled request of vLLM's V1 engine loop, measured by running vLLM's own code.

The V1 engine core runs ``schedule -> execute_model -> update_from_output`` in turn (without
``--async-scheduling``), so the Python work each running request adds to a step is exposed on top of
the device time. This probe drives the real classes of an installed vLLM on this machine's CPU, with
no accelerator: it adds ``B`` requests, lets them decode one token per step and times, per step,

* ``Scheduler.schedule`` and ``Scheduler.update_from_output`` (engine core);
* the pickling of the ``SchedulerOutput`` (what the multiprocess executor broadcasts to TP workers);
* the msgpack encoding of the engine-core outputs (what goes to the front-end process);
* ``GPUModelRunner._update_states`` and ``_bookkeeping_sync`` (the workers' per-request loops), run
  on CPU tensors against a stand-in runner that carries only the attributes those two methods read.

Not timed: ``_prepare_inputs`` (vectorised numpy), the workers' wait on the broadcast, the sampler.
The planner's ``python-engine-per-sequence`` host cost (catalog/data/engines.yaml) is this figure.

vLLM does not need a GPU for this; install it without its CUDA dependencies, e.g.::

    pip install --no-deps vllm==0.10.2
    pip install regex cachetools psutil blake3 py-cpuinfo "transformers<5" tokenizers protobuf \
        pydantic pyzmq msgspec pyyaml cloudpickle einops setproctitle pillow openai openai-harmony \
        aiohttp diskcache compressed-tensors frozendict gguf numba cbor2 pybase64 partial-json-parser
    python benchmarks/vllm_host_probe.py 64 256 1024 2048 --json out.json

(any torch build, CPU-only included). Written against vLLM 0.10.2's V1 classes; other versions may
need the stand-in runner's attributes adjusted (the probe says which one is missing). On a machine without
network access, vLLM's ``*.py`` files can travel as a zip on ``PYTHONPATH`` (its compiled parts are not used here),
its import-time dependencies as wheels, and ``numba`` as a stub module whose ``jit`` returns the function
(docs/measurement.md, "sixth session", ran it so on a lent H200's host).
"""
# ruff: noqa: F401

from __future__ import annotations

import argparse
import json
import pickle
import platform
import statistics
import sys
import time
import types
from typing import Any

PARTS = ("schedule", "pickle_broadcast", "update_states", "bookkeeping", "update_from_output", "encode_outputs")


def _import_vllm() -> dict[str, Any]:
    # every name imported here is returned through locals(): ruff's F401 does not see that use
    try:
        import torch
        import vllm
        import vllm.v1.worker.gpu_model_runner as gmr
        from vllm.config import CacheConfig, DeviceConfig, SchedulerConfig, VllmConfig
        from vllm.sampling_params import SamplingParams
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.kv_cache_interface import (
            FullAttentionSpec,
            KVCacheConfig,
            KVCacheGroupSpec,
            KVCacheTensor,
        )
        from vllm.v1.outputs import ModelRunnerOutput, SamplerOutput
        from vllm.v1.request import Request
        from vllm.v1.serial_utils import MsgpackEncoder
        from vllm.v1.structured_output import StructuredOutputManager
        from vllm.v1.worker.gpu_input_batch import InputBatch
    except ImportError as exc:
        raise SystemExit(f"vllm_host_probe: vLLM (V1 engine) is not importable here: {exc}. "
                         "Install it as the module docstring says.") from exc
    return dict(locals())


def _scheduler(v: dict[str, Any], max_seqs: int, blocks: int) -> Any:
    """A V1 Scheduler over a stand-in model config (the scheduler reads a handful of its fields)."""
    model = types.SimpleNamespace(is_encoder_decoder=False, skip_tokenizer_init=True, is_multimodal_model=False,
                                  model="llama", multimodal_config=None, max_model_len=8192,
                                  get_vocab_size=lambda: 128256)
    sc = v["SchedulerConfig"](max_num_seqs=max_seqs, max_num_batched_tokens=8192, max_model_len=8192,
                              enable_chunked_prefill=True)
    cc = v["CacheConfig"](block_size=16, gpu_memory_utilization=0.9, swap_space=0, cache_dtype="auto",
                          enable_prefix_caching=False)
    cc.num_gpu_blocks = blocks
    vc = v["VllmConfig"](scheduler_config=sc, cache_config=cc, device_config=v["DeviceConfig"]("cpu"))
    object.__setattr__(vc, "model_config", model)
    torch = v["torch"]
    kv = v["KVCacheConfig"](num_blocks=blocks, kv_cache_tensors=[v["KVCacheTensor"](size=1, shared_by=["layer"])],
                            kv_cache_groups=[v["KVCacheGroupSpec"](["layer"], v["FullAttentionSpec"](
                                16, 1, 1, torch.float32, False))])
    return v["Scheduler"](vllm_config=vc, kv_cache_config=kv, log_stats=False,
                          structured_output_manager=v["StructuredOutputManager"](vc))


def _runner(v: dict[str, Any], max_seqs: int) -> Any:
    """The attributes GPUModelRunner._update_states and _bookkeeping_sync read, on CPU."""
    torch = v["torch"]
    r = types.SimpleNamespace(requests={}, encoder_cache={}, is_pooling_model=False, uses_mrope=False,
                              device=torch.device("cpu"), use_async_scheduling=False, max_model_len=8192)
    r.input_batch = v["InputBatch"](max_num_reqs=max_seqs, max_model_len=8192, max_num_batched_tokens=8192,
                                    device=torch.device("cpu"), pin_memory=False, vocab_size=128256,
                                    block_sizes=[16])
    r._may_reorder_batch = lambda so: None
    r._to_list = lambda t: t.tolist()
    r._get_prompt_logprobs_dict = lambda hidden, n: {}
    return r


def measure(v: dict[str, Any], batch: int, *, prompt_len: int = 128, decode_steps: int = 40) -> dict[str, Any]:
    """Median seconds per part over ``decode_steps`` steps with all ``batch`` requests decoding (after
    the prompts' prefill steps and five warm-up steps)."""
    steps = -(-batch * prompt_len // 8192) + 5 + decode_steps
    torch, gmr = v["torch"], v["gmr"]
    gmr.get_pp_group = lambda: types.SimpleNamespace(is_last_rank=True)  # one pipeline stage
    sched = _scheduler(v, batch, batch * ((prompt_len + 2048) // 16 + 2) + 16)
    params = v["SamplingParams"](max_tokens=100000, ignore_eos=True, temperature=1.0, top_p=1.0)
    for i in range(batch):
        sched.add_request(v["Request"](request_id=str(i), prompt_token_ids=[1] * prompt_len,
                                       sampling_params=params, pooling_params=None, eos_token_id=2))
    runner, enc = _runner(v, batch), v["MsgpackEncoder"]()
    times: dict[str, list[float]] = {k: [] for k in PARTS}
    for step in range(steps):
        t0 = time.perf_counter()
        so = sched.schedule()
        t1 = time.perf_counter()
        pickle.loads(pickle.dumps(so, protocol=pickle.HIGHEST_PROTOCOL))
        t2 = time.perf_counter()
        gmr.GPUModelRunner._update_states(runner, so)
        t3 = time.perf_counter()
        n = runner.input_batch.num_reqs
        sampled = v["SamplerOutput"](sampled_token_ids=torch.full((n, 1), 7, dtype=torch.int32),
                                     logprobs_tensors=None)
        out = gmr.GPUModelRunner._bookkeeping_sync(runner, so, sampled, None,
                                                   torch.empty(so.total_num_scheduled_tokens, 1),
                                                   so.total_num_scheduled_tokens)
        t4 = time.perf_counter()
        mro = v["ModelRunnerOutput"](req_ids=out[4], req_id_to_index=out[5], sampled_token_ids=out[2],
                                     logprobs=None, prompt_logprobs_dict={}, pooler_output=[])
        t5 = time.perf_counter()
        outputs = sched.update_from_output(so, mro)
        t6 = time.perf_counter()
        for o in outputs.values():
            enc.encode(o)
        t7 = time.perf_counter()
        all_decoding = len(so.num_scheduled_tokens) == batch and so.total_num_scheduled_tokens == batch
        if step >= 5 and all_decoding:  # past warm-up, every request decoding one token
            for k, dt in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t6 - t5, t7 - t6), strict=True):
                times[k].append(dt)
    if not times["schedule"]:
        raise SystemExit(f"vllm_host_probe: no all-decode step at batch {batch}")
    med = {k: statistics.median(v_) for k, v_ in times.items()}
    total = sum(med.values())
    return {"batch": batch, "steps": len(times["schedule"]), "median_s": med, "total_s": total,
            "per_request_us": total / batch * 1e6}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("batches", nargs="*", type=int, default=[64, 256, 1024, 2048],
                    help="running requests per measurement (default: 64 256 1024 2048)")
    ap.add_argument("--json", help="write the figures to this JSON file")
    args = ap.parse_args(argv)
    if any(b < 1 for b in args.batches):
        print("vllm_host_probe: batches: every batch must be >= 1", file=sys.stderr)
        return 2
    v = _import_vllm()
    rows = []
    for b in args.batches:
        r = measure(v, b)
        rows.append(r)
        parts = " ".join(f"{k} {s * 1e3:.3f} ms" for k, s in r["median_s"].items())
        print(f"batch {b:5d}: {parts} | {r['total_s'] * 1e3:.2f} ms per step = "
              f"{r['per_request_us']:.2f} us per request")
    if args.json:
        doc = {"probe": "vllm_host_probe", "vllm": v["vllm"].__version__, "torch": v["torch"].__version__,
               "python": platform.python_version(), "cpu": _cpu_name(), "rows": rows}
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
    return 0


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            info = fh.read()
    except OSError:
        return platform.processor()
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "")
    mhz = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("cpu MHz")), "")
    return f"{name} @ {mhz} MHz" if mhz else name


if __name__ == "__main__":
    sys.exit(main())
