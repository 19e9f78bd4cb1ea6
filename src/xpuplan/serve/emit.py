"""Serve commands that realise an estimated replica (``--emit vllm|vllm-ascend|sglang|trtllm|mindie|lmdeploy``).

:func:`emit_plan` maps the replica onto the engine release pinned in ``catalog/data/launch_targets.yaml``:
TP/PP sizes, the attention-DP + expert-parallel layout of a MoE replica (``ep`` groups of ``tp``
devices: attention data-parallel over the groups, experts over all ``tp·ep`` devices), precision,
KV-cache dtype, memory fraction, block size, the batch limit and context length the estimate used and
the prefill chunk. A quantised scheme (fp8, int8, int4) assumes a checkpoint already quantised in that
format: engines read the scheme from the checkpoint's config, so no ``--quantization`` flag is given
(``quantized_checkpoint=False`` asks vLLM/SGLang to quantise a 16-bit fp8 checkpoint online instead).
With ``disagg=(prefill_replicas, decode_replicas)`` the prefill pool, the decode pool and the router
are emitted. Every command is checked against the pinned release's flags (``LaunchPlan.problems``).
"""

from __future__ import annotations

import json
from typing import Final

from xpuplan.catalog.launch_targets import Command, LaunchPlan, Segment, check_keys, target
from xpuplan.errors import UserInputError
from xpuplan.serve.comm import moe_uses_alltoall
from xpuplan.serve.replica import Replica

EMITTERS: Final = ("vllm", "vllm-ascend", "sglang", "trtllm", "mindie", "lmdeploy")
#: Ports of the emitted prefill pool, decode pool and router (each engine's default where it has one).
PREFILL_PORT: Final = 30000
DECODE_PORT: Final = 30001
ROUTER_PORT: Final = 8000
#: KV-transfer bootstrap port of an SGLang prefill server (its default).
SGLANG_BOOTSTRAP_PORT: Final = 8998
#: Block sizes vLLM's CUDA attention backends accept.
VLLM_BLOCKS: Final = (8, 16, 32, 64, 128)


def hf_id(rep: Replica) -> str:
    """The model's Hugging Face repository id when a preset alias gives one, else its preset id."""
    for alias in rep.model.aliases:
        if "/" in alias:
            return alias
    return rep.model.id


def _dtype(rep: Replica) -> str:
    return "float16" if rep.precision.gemm_dtype == "fp16" or rep.precision.scheme == "fp16" else "bfloat16"


def _quantized(rep: Replica) -> bool:
    return rep.precision.scheme not in ("bf16", "fp16")


def _checkpoint_note(rep: Replica) -> str | None:
    return {
        "fp8": "expects an FP8 (W8A8) checkpoint (llm-compressor or NVIDIA ModelOpt); the engine reads the scheme from it",
        "int8": "expects an INT8 W8A8 (SmoothQuant) checkpoint; the engine reads the scheme from it",
        "int8-wo": "expects an INT8 weight-only (W8A16) checkpoint; the engine reads the scheme from it",
        "int4-wo": "expects an AWQ or GPTQ INT4 (W4A16, group 128) checkpoint; the engine reads the scheme from it",
        "nvfp4": "expects an NVFP4 (W4A4, an FP8 scale per 16 weights) checkpoint, e.g. from NVIDIA ModelOpt; the engine "
                 "reads the scheme from it",
        "mxfp4": "expects an MXFP4 (W4A4, an E8M0 scale per 32 weights) checkpoint; the engine reads the scheme from it",
    }.get(rep.precision.scheme)


def _alltoall(rep: Replica) -> bool:
    """Whether the estimate priced the replica's expert-parallel exchange as an all-to-all (else a gather)."""
    return moe_uses_alltoall(rep.engine, rep.model, rep.ep, rep.device_links)


def _is_ascend(rep: Replica) -> bool:
    return "ascend" in rep.device.id.casefold() or rep.device.vendor.casefold() == "huawei"


# =================================================================================================
# vLLM and vllm-ascend
# =================================================================================================
def _vllm_args(rep: Replica, key: str, n: int, ctx: int, quantized_checkpoint: bool, notes: list[str]) -> list[str]:
    a = ["--tensor-parallel-size", str(rep.tp), "--pipeline-parallel-size", str(rep.pp), "--dtype", _dtype(rep)]
    if rep.ep > 1:
        a += ["--data-parallel-size", str(rep.ep), "--enable-expert-parallel"]
        if key == "vllm":  # the exchange the estimate priced (serve.comm.moe_exchange_s)
            a += ["--all2all-backend", "deepep_high_throughput" if _alltoall(rep) else "allgather_reducescatter"]
    elif rep.etp is not None:  # expert parallelism inside the TP group: vLLM puts whole experts on each rank
        a += ["--enable-expert-parallel"]
        if rep.etp > 1:
            notes.append(f"vLLM's expert parallelism puts whole experts on each of the {rep.tp} ranks; the estimate's "
                         f"experts split over etp {rep.etp} are not expressible (served as etp 1)")
    if rep.precision.scheme == "fp8" and not quantized_checkpoint:
        a += ["--quantization", "fp8"]
    elif _quantized(rep) and not quantized_checkpoint:
        raise UserInputError(f"{rep.precision.scheme} needs a checkpoint quantised offline (AWQ/GPTQ/llm-compressor)",
                             field="dtype")
    if rep.precision.kv_dtype == "fp8":
        if key == "vllm-ascend":
            notes.append("Ascend has no fp8 KV cache: the KV cache stays 16-bit (the estimate assumed fp8)")
        else:
            a += ["--kv-cache-dtype", "fp8"]
    if key == "vllm-ascend":
        block = int(target("vllm-ascend").extra("block_size") or 128)
        if rep.block_size_tokens != block:
            notes.append(f"vllm-ascend pages the KV cache in {block}-token blocks (the estimate assumed "
                         f"{rep.block_size_tokens})")
        notes.append("graph mode: ACL graph capture is vllm-ascend's default (no --enforce-eager)")
    else:
        block = rep.block_size_tokens if rep.block_size_tokens in VLLM_BLOCKS else 16
        if block != rep.block_size_tokens:
            notes.append(f"vLLM takes block sizes {VLLM_BLOCKS}: {block} instead of {rep.block_size_tokens}")
    a += ["--gpu-memory-utilization", f"{rep.memory_fraction:.2f}", "--max-num-seqs", str(n),
          "--max-model-len", str(ctx), "--block-size", str(block),
          "--max-num-batched-tokens", str(rep.engine.prefill_chunk_tokens), "--enable-chunked-prefill"]
    return a


def _vllm(rep: Replica, key: str, n: int, ctx: int, disagg: tuple[int, int] | None, qc: bool) -> LaunchPlan:
    notes: list[str] = []
    base = _vllm_args(rep, key, n, ctx, qc, notes)
    head = ("vllm", "serve", hf_id(rep))

    def seg(extra: list[str]) -> Segment:
        return Segment(key, "vllm serve", head[:2], (head[2], *base, *extra), positionals=1)

    if disagg is None:
        return LaunchPlan(key, (Command("serve", (seg(["--port", str(ROUTER_PORT)]),)),), notes=tuple(notes))
    kv = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))
    cmds = (Command("prefill pool", (seg(["--port", str(PREFILL_PORT), "--kv-transfer-config", kv]),), disagg[0]),
            Command("decode pool", (seg(["--port", str(DECODE_PORT), "--kv-transfer-config", kv]),), disagg[1]))
    notes.append("vllm serve has no prefill/decode router of its own: put vllm-project/router (not pinned here) "
                 "in front, or use --emit sglang|trtllm|lmdeploy for a pinned router")
    return LaunchPlan(key, cmds, notes=tuple(notes))


# =================================================================================================
# SGLang
# =================================================================================================
def _sglang_args(rep: Replica, n: int, ctx: int, qc: bool) -> list[str]:
    world = rep.tp * rep.ep
    a = ["--model-path", hf_id(rep), "--tp-size", str(world), "--dtype", _dtype(rep)]
    if rep.pp > 1:
        a += ["--pp-size", str(rep.pp)]
    if rep.ep > 1:
        a += ["--dp-size", str(rep.ep), "--enable-dp-attention", "--ep-size", str(world)]
        if _alltoall(rep):  # the exchange the estimate priced (serve.comm.moe_exchange_s)
            a += ["--moe-a2a-backend", "deepep"]
    elif rep.etp is not None:  # EP inside the TP group: SGLang splits each expert over tp / ep-size ranks
        a += ["--ep-size", str(rep.tp // rep.etp)]
    if rep.precision.scheme == "fp8" and not qc:
        a += ["--quantization", "fp8"]
    if rep.precision.kv_dtype == "fp8":
        a += ["--kv-cache-dtype", "fp8_e4m3"]
    a += ["--mem-fraction-static", f"{rep.memory_fraction:.2f}", "--max-running-requests", str(n),
          "--context-length", str(ctx), "--chunked-prefill-size", str(rep.engine.prefill_chunk_tokens),
          "--page-size", str(rep.block_size_tokens)]
    return a


def _sglang(rep: Replica, n: int, ctx: int, disagg: tuple[int, int] | None, qc: bool) -> LaunchPlan:
    base = _sglang_args(rep, n, ctx, qc)
    head = ("python", "-m", "sglang.launch_server")
    notes = []
    if rep.ep > 1:
        notes.append(f"attention data-parallel over {rep.ep} groups of tp {rep.tp}; experts over all {rep.tp * rep.ep} "
                     "ranks" + ("" if _alltoall(rep) else " (the estimate priced SGLang's default token gather; "
                                                        "--moe-a2a-backend deepep is the all-to-all)"))
    elif rep.etp is not None:
        notes.append(f"attention over tp {rep.tp}; the experts over {rep.tp // rep.etp} expert-parallel ranks "
                     "(--ep-size), " + ("whole" if rep.etp == 1 else f"each split over {rep.etp}"))
    if disagg is None:
        cmd = Command("serve", (Segment("sglang", "sglang.launch_server", head, (*base, "--port", str(ROUTER_PORT))),))
        return LaunchPlan("sglang", (cmd,), notes=tuple(notes))
    pre = Segment("sglang", "sglang.launch_server", head,
                  (*base, "--disaggregation-mode", "prefill", "--disaggregation-transfer-backend", "mooncake",
                   "--disaggregation-bootstrap-port", str(SGLANG_BOOTSTRAP_PORT), "--port", str(PREFILL_PORT)))
    dec = Segment("sglang", "sglang.launch_server", head,
                  (*base, "--disaggregation-mode", "decode", "--disaggregation-transfer-backend", "mooncake",
                   "--port", str(DECODE_PORT)))
    router = Segment("sglang-router", "sglang_router.launch_router", ("python", "-m", "sglang_router.launch_router"),
                     ("--pd-disaggregation", "--prefill", f"http://$PREFILL_HOST:{PREFILL_PORT}", str(SGLANG_BOOTSTRAP_PORT),
                      "--decode", f"http://$DECODE_HOST:{DECODE_PORT}", "--host", "0.0.0.0", "--port", str(ROUTER_PORT)))
    notes.append("one --prefill/--decode per pool replica on the router (PREFILL_HOST/DECODE_HOST: each replica's address)")
    return LaunchPlan("sglang", (Command("prefill pool", (pre,), disagg[0]), Command("decode pool", (dec,), disagg[1]),
                                 Command("router", (router,))), notes=tuple(notes))


# =================================================================================================
# TensorRT-LLM
# =================================================================================================
def _yaml(d: dict, indent: int = 0) -> str:
    out = ""
    for k, v in d.items():
        if isinstance(v, dict):
            out += " " * indent + f"{k}:\n" + _yaml(v, indent + 2)
        elif isinstance(v, list):
            out += " " * indent + f"{k}:\n" + "".join(" " * (indent + 2) + f"- {json.dumps(x)}\n" for x in v)
        else:
            out += " " * indent + f"{k}: {json.dumps(v)}\n"
    return out


def _trtllm(rep: Replica, n: int, ctx: int, disagg: tuple[int, int] | None) -> LaunchPlan:
    t = target("trtllm")
    world = rep.tp * rep.ep
    notes: list[str] = []
    options: dict = {"kv_cache_config": {"free_gpu_memory_fraction": round(rep.memory_fraction, 2),
                                         "tokens_per_block": rep.block_size_tokens,
                                         **({"dtype": "fp8"} if rep.precision.kv_dtype == "fp8" else {})}}
    if rep.ep > 1:
        options["enable_attention_dp"] = True
        if rep.tp > 1:
            notes.append(f"TensorRT-LLM attention-DP runs attention data-parallel on all {world} ranks; the estimate's "
                         f"{rep.ep} groups of tp {rep.tp} are not expressible (attention TP inside a DP group)")
    if disagg is not None:
        options["cache_transceiver_config"] = {"backend": "DEFAULT"}
    a = [hf_id(rep), "--backend", "pytorch", "--tp_size", str(world), "--pp_size", str(rep.pp)]
    if rep.ep > 1:
        a += ["--ep_size", str(world)]
    elif rep.etp is not None:  # EP inside the TP group, attention TP (no attention-DP): moe_tp = tp / ep_size
        a += ["--ep_size", str(rep.tp // rep.etp)]
    a += ["--max_batch_size", str(n), "--max_num_tokens", str(rep.engine.prefill_chunk_tokens),
          "--max_seq_len", str(ctx), "--kv_cache_free_gpu_memory_fraction", f"{rep.memory_fraction:.2f}",
          "--enable_chunked_prefill", "--config", "extra-llm-api-config.yml"]
    problems = check_keys(options, t.extra("llm_api_options") or [], "extra-llm-api-config.yml")
    problems += check_keys(options["kv_cache_config"], t.extra("kv_cache_config") or [], "kv_cache_config")
    if "cache_transceiver_config" in options:
        problems += check_keys(options["cache_transceiver_config"], t.extra("cache_transceiver_config") or [],
                               "cache_transceiver_config")
    files = [("extra-llm-api-config.yml", _yaml(options))]
    head = ("trtllm-serve",)
    if disagg is None:
        cmd = Command("serve", (Segment("trtllm", "trtllm-serve", head, (*a, "--port", str(ROUTER_PORT)), positionals=1),))
        return LaunchPlan("trtllm", (cmd,), files=tuple(files), file_problems=tuple(problems), notes=tuple(notes))
    ctx_seg = Segment("trtllm", "trtllm-serve", head, (*a, "--host", "0.0.0.0", "--port", str(PREFILL_PORT),
                                                       "--server_role", "CONTEXT"), positionals=1)
    gen_seg = Segment("trtllm", "trtllm-serve", head, (*a, "--host", "0.0.0.0", "--port", str(DECODE_PORT),
                                                       "--server_role", "GENERATION"), positionals=1)
    cluster = {"hostname": "0.0.0.0", "port": ROUTER_PORT, "backend": "pytorch",
               "context_servers": {"num_instances": disagg[0],
                                   "urls": [f"PREFILL_HOST_{i}:{PREFILL_PORT}" for i in range(disagg[0])]},
               "generation_servers": {"num_instances": disagg[1],
                                      "urls": [f"DECODE_HOST_{i}:{DECODE_PORT}" for i in range(disagg[1])]}}
    files.append(("disagg_config.yaml", _yaml(cluster)))
    router = Segment("trtllm", "trtllm-serve disaggregated", ("trtllm-serve", "disaggregated"),
                     ("--config_file", "disagg_config.yaml"))
    notes.append("replace PREFILL_HOST_i/DECODE_HOST_i in disagg_config.yaml with the pool replicas' addresses")
    return LaunchPlan("trtllm", (Command("context (prefill) pool", (ctx_seg,), disagg[0]),
                                 Command("generation (decode) pool", (gen_seg,), disagg[1]),
                                 Command("router", (router,))),
                      files=tuple(files), file_problems=tuple(problems), notes=tuple(notes))


# =================================================================================================
# LMDeploy
# =================================================================================================
def _lmdeploy(rep: Replica, n: int, ctx: int, disagg: tuple[int, int] | None) -> LaunchPlan:
    notes: list[str] = []
    pytorch = rep.ep > 1 or rep.pp > 1 or disagg is not None or _is_ascend(rep)
    a = [hf_id(rep), "--backend", "pytorch" if pytorch else "turbomind", "--tp", str(rep.tp), "--dtype", _dtype(rep)]
    if rep.ep > 1:
        a += ["--dp", str(rep.ep), "--ep", str(rep.tp * rep.ep)]
    elif rep.etp is not None:
        notes.append("LMDeploy runs expert parallelism with attention data-parallel (--dp, --ep): the estimate's "
                     "experts over the TP group (etp) are not expressible; served with the experts split over tp")
    if rep.pp > 1:
        notes.append("LMDeploy has no pipeline parallelism: pp is dropped (tp only)")
    if _is_ascend(rep):
        a += ["--device", "ascend"]
    fmt = {"fp8": "fp8", "int4-wo": "awq"}.get(rep.precision.scheme)
    if fmt:
        a += ["--model-format", fmt]
    elif rep.precision.scheme in ("int8", "int8-wo"):
        notes.append(f"{rep.precision.scheme}: LMDeploy serves W8A8 from an `lmdeploy lite smooth_quant` checkpoint")
    if rep.precision.kv_dtype in ("int8", "int4"):
        a += ["--quant-policy", "8" if rep.precision.kv_dtype == "int8" else "4"]
    elif rep.precision.kv_dtype == "fp8":
        notes.append("LMDeploy quantises the KV cache to int8/int4 (--quant-policy), not fp8: it stays 16-bit")
    block = rep.block_size_tokens if rep.block_size_tokens % 32 == 0 else 64
    a += ["--cache-max-entry-count", f"{rep.memory_fraction:.2f}", "--max-batch-size", str(n), "--session-len", str(ctx),
          "--cache-block-seq-len", str(block), "--max-prefill-token-num", str(rep.engine.prefill_chunk_tokens)]
    notes.append("--cache-max-entry-count is the share of memory left after the weights that holds the KV cache")
    head = ("lmdeploy", "serve", "api_server")
    prog = "lmdeploy serve api_server"
    if disagg is None:
        return LaunchPlan("lmdeploy", (Command("serve", (Segment("lmdeploy", prog, head,
                                                                 (*a, "--server-port", str(ROUTER_PORT)), positionals=1),)),),
                          notes=tuple(notes))
    proxy = f"http://$PROXY_HOST:{ROUTER_PORT}"
    pre = Segment("lmdeploy", prog, head, (*a, "--role", "Prefill", "--server-port", str(PREFILL_PORT),
                                           "--proxy-url", proxy), positionals=1)
    dec = Segment("lmdeploy", prog, head, (*a, "--role", "Decode", "--server-port", str(DECODE_PORT),
                                           "--proxy-url", proxy), positionals=1)
    router = Segment("lmdeploy", "lmdeploy serve proxy", ("lmdeploy", "serve", "proxy"),
                     ("--server-name", "0.0.0.0", "--server-port", str(ROUTER_PORT), "--serving-strategy", "DistServe"))
    return LaunchPlan("lmdeploy", (Command("router (start first)", (router,)), Command("prefill pool", (pre,), disagg[0]),
                                   Command("decode pool", (dec,), disagg[1])), notes=tuple(notes))


# =================================================================================================
# MindIE
# =================================================================================================
def mindie_config(rep: Replica, n: int, ctx: int) -> dict:
    """The ``BackendConfig`` of MindIE Service's ``conf/config.json`` for ``rep``."""
    max_in = max(1, ctx - 1)
    world = rep.tp * rep.pp * rep.ep
    return {"BackendConfig": {
        "npuDeviceIds": [list(range(world))],
        "ModelDeployConfig": {
            "maxSeqLen": ctx, "maxInputTokenLen": max_in,
            "ModelConfig": [{
                "modelName": rep.model.id,
                "modelWeightPath": f"/data/weights/{rep.model.id}" + ("" if not _quantized(rep) else f"-{rep.precision.scheme}"),
                "worldSize": world, "npuMemSize": -1, "backendType": "atb", "trustRemoteCode": False,
            }],
        },
        "ScheduleConfig": {
            "cacheBlockSize": rep.block_size_tokens, "maxBatchSize": n,
            "maxPrefillBatchSize": max(1, min(n, rep.engine.prefill_chunk_tokens // max_in)),
            "maxPrefillTokens": max(rep.engine.prefill_chunk_tokens, ctx), "maxIterTimes": max_in,
        },
    }}


def _mindie(rep: Replica, n: int, ctx: int, disagg: tuple[int, int] | None) -> LaunchPlan:
    t = target("mindie")
    cfg = mindie_config(rep, n, ctx)
    keys = t.extra("config_keys") or {}
    b = cfg["BackendConfig"]
    problems = check_keys(cfg, keys.get("top", []), "config.json")
    problems += check_keys(b, keys.get("BackendConfig", []), "BackendConfig")
    problems += check_keys(b["ModelDeployConfig"], keys.get("ModelDeployConfig", []), "ModelDeployConfig")
    problems += check_keys(b["ModelDeployConfig"]["ModelConfig"][0], keys.get("ModelConfig", []), "ModelConfig")
    problems += check_keys(b["ScheduleConfig"], keys.get("ScheduleConfig", []), "ScheduleConfig")
    notes = [f"merge into mindie-service/conf/config.json; npuMemSize -1 sizes the KV cache from free memory "
             f"(the estimate assumed {rep.memory_fraction:.0%} of device memory)"]
    if rep.ep > 1 or rep.etp is not None:
        notes.append("expert parallelism: set the model's EP/DP degrees in its MindIE-LLM model config (not in config.json)")
    if _quantized(rep):
        notes.append(f"{rep.precision.scheme}: weights quantised with msModelSlim")
    if disagg is not None:
        notes.append("prefill/decode disaggregation is deployed with MindIE Motor (ms_controller/ms_coordinator), not emitted here")
    cmd = Command("serve", (Segment("mindie", "bin/mindieservice_daemon", ("./bin/mindieservice_daemon",), ()),))
    return LaunchPlan("mindie", (cmd,), files=(("config-backend.json", json.dumps(cfg, indent=2)),),
                      file_problems=tuple(problems), notes=tuple(notes))


# =================================================================================================
def engine_key(engine: str) -> str:
    key = engine.strip().casefold().replace("_", "-")
    key = {"tensorrt-llm": "trtllm", "trt": "trtllm", "tensorrtllm": "trtllm", "vllm-npu": "vllm-ascend"}.get(key, key)
    if key not in EMITTERS:
        raise UserInputError(f"--emit must be one of {', '.join(EMITTERS)} (got {engine!r})", field="emit")
    return key


def engine_mismatch(rep: Replica, key: str) -> str | None:
    """Why the engine ``key`` cannot serve on ``rep``'s device (None when it can): TensorRT-LLM is
    NVIDIA-only, MindIE and vllm-ascend are Ascend-only."""
    if key == "trtllm" and rep.device.vendor.casefold() != "nvidia":
        return f"--emit trtllm: TensorRT-LLM runs on NVIDIA GPUs only, not on {rep.device.id}"
    if key in ("mindie", "vllm-ascend") and not _is_ascend(rep):
        name = "MindIE" if key == "mindie" else "vllm-ascend"
        return f"--emit {key}: {name} runs on Huawei Ascend NPUs only, not on {rep.device.id}"
    return None


def emit_plan(rep: Replica, engine: str, *, max_num_seqs: int, max_model_len: int,
              disagg: tuple[int, int] | None = None, quantized_checkpoint: bool = True) -> LaunchPlan:
    """The serve command(s) for ``engine`` that realise ``rep`` (module doc)."""
    key = engine_key(engine)
    why = engine_mismatch(rep, key)
    if why:
        raise UserInputError(why, field="--emit")
    if max_num_seqs < 1 or max_model_len < 1:
        raise UserInputError("max_num_seqs and max_model_len must be positive", field="emit")
    if key == "vllm" and _is_ascend(rep):
        key = "vllm-ascend"
    n, ctx = max_num_seqs, max_model_len
    if key in ("vllm", "vllm-ascend"):
        lp = _vllm(rep, key, n, ctx, disagg, quantized_checkpoint)
    elif key == "sglang":
        lp = _sglang(rep, n, ctx, disagg, quantized_checkpoint)
    elif key == "trtllm":
        lp = _trtllm(rep, n, ctx, disagg)
    elif key == "lmdeploy":
        lp = _lmdeploy(rep, n, ctx, disagg)
    else:
        lp = _mindie(rep, n, ctx, disagg)
    extra = [x for x in (_checkpoint_note(rep) if quantized_checkpoint else None,) if x]
    if rep.device.kind.upper() == "NPU" and not _is_ascend(rep) and key not in ("mindie",):
        extra.append(f"{rep.device.id} is an NPU: use the vendor's build of {lp.pinned.name}")
    return LaunchPlan(lp.target, lp.commands, lp.files, lp.file_problems, tuple(extra) + lp.notes,
                      title=f"{rep.key}, up to {n} sequences of {ctx} tokens")


def emit(rep: Replica, engine: str, *, max_num_seqs: int, max_model_len: int,
         disagg: tuple[int, int] | None = None) -> str:
    """The text of :func:`emit_plan` (comments, files as here-documents, one flag per line)."""
    return emit_plan(rep, engine, max_num_seqs=max_num_seqs, max_model_len=max_model_len, disagg=disagg).to_text()
