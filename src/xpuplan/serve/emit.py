"""Serve commands and configs that realise an estimated replica (``--emit vllm|sglang|trtllm|mindie``).

Each emitter maps the replica's TP/PP/EP sizes, precision, KV-cache dtype, memory fraction, block
size and the batch limit the estimate used onto the engine's own flags. Quantised schemes assume a
checkpoint already quantised in that format (fp8/int8 from llm-compressor or ModelOpt, int4 from AWQ
or GPTQ); the emitted text says so. Flags follow each engine's current documentation (vLLM
``vllm serve``, SGLang ``sglang.launch_server``, TensorRT-LLM ``trtllm-serve``, MindIE Service
``config.json``).
"""

from __future__ import annotations

import json
import shlex

from xpuplan.errors import UserInputError
from xpuplan.serve.replica import Replica

EMITTERS = ("vllm", "sglang", "trtllm", "mindie")


def hf_id(rep: Replica) -> str:
    """The model's Hugging Face repository id when a preset alias gives one, else its preset id."""
    for alias in rep.model.aliases:
        if "/" in alias:
            return alias
    return rep.model.id


def _dtype_flag(rep: Replica) -> str:
    return "float16" if rep.precision.gemm_dtype == "fp16" or rep.precision.scheme == "fp16" else "bfloat16"


def _quant_note(rep: Replica) -> str | None:
    s = rep.precision.scheme
    return {
        "fp8": "# expects an FP8 (W8A8) checkpoint, e.g. from llm-compressor or NVIDIA ModelOpt",
        "int8": "# expects an INT8 W8A8 (SmoothQuant) checkpoint",
        "int8-wo": "# expects an INT8 weight-only (W8A16) checkpoint",
        "int4-wo": "# expects an AWQ or GPTQ INT4 (W4A16, group 128) checkpoint",
        "nvfp4": "# expects an NVFP4 (W4A4, FP8 scale per 16) checkpoint, e.g. from NVIDIA ModelOpt",
        "mxfp4": "# expects an MXFP4 (W4A4, E8M0 scale per 32) checkpoint",
    }.get(s)


def _join(cmd: list[str]) -> str:
    parts = [shlex.quote(c) for c in cmd]
    out, line = [], parts[0]
    for p in parts[1:]:
        if p.startswith("--"):
            out.append(line + " \\")
            line = "  " + p
        else:
            line += " " + p
    out.append(line)
    return "\n".join(out)


def emit_vllm(rep: Replica, *, max_num_seqs: int, max_model_len: int) -> str:
    cmd = ["vllm", "serve", hf_id(rep), "--tensor-parallel-size", str(rep.tp),
           "--pipeline-parallel-size", str(rep.pp), "--dtype", _dtype_flag(rep)]
    q = {"fp8": "fp8", "int4-wo": "awq_marlin", "int8": "compressed-tensors", "int8-wo": "compressed-tensors",
         "nvfp4": "modelopt_fp4", "mxfp4": "mxfp4"}
    if rep.precision.scheme in q:
        cmd += ["--quantization", q[rep.precision.scheme]]
    if rep.precision.kv_dtype in ("fp8",):
        cmd += ["--kv-cache-dtype", "fp8"]
    if rep.ep > 1:
        cmd += ["--data-parallel-size", str(rep.ep), "--enable-expert-parallel"]
    cmd += ["--gpu-memory-utilization", f"{rep.memory_fraction:.2f}", "--max-num-seqs", str(max_num_seqs),
            "--max-model-len", str(max_model_len), "--block-size", str(rep.block_size_tokens if rep.block_size_tokens in (8, 16, 32) else 16),
            "--max-num-batched-tokens", str(rep.engine.prefill_chunk_tokens if rep.engine.id == "vllm" else 8192)]
    return _with_note(rep, _join(cmd))


def emit_sglang(rep: Replica, *, max_num_seqs: int, max_model_len: int) -> str:
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", hf_id(rep), "--tp", str(rep.tp * rep.ep),
           "--dtype", _dtype_flag(rep)]
    if rep.pp > 1:
        cmd += ["--pp-size", str(rep.pp)]
    q = {"fp8": "fp8", "int4-wo": "awq", "int8": "w8a8_int8", "int8-wo": "w8a8_int8", "nvfp4": "modelopt_fp4",
         "mxfp4": "mxfp4"}
    if rep.precision.scheme in q:
        cmd += ["--quantization", q[rep.precision.scheme]]
    if rep.precision.kv_dtype == "fp8":
        cmd += ["--kv-cache-dtype", "fp8_e4m3"]
    if rep.ep > 1:
        cmd += ["--ep-size", str(rep.ep), "--enable-dp-attention", "--dp-size", str(rep.ep)]
    cmd += ["--mem-fraction-static", f"{rep.memory_fraction:.2f}", "--max-running-requests", str(max_num_seqs),
            "--context-length", str(max_model_len), "--chunked-prefill-size", str(rep.engine.prefill_chunk_tokens)]
    return _with_note(rep, _join(cmd))


def emit_trtllm(rep: Replica, *, max_num_seqs: int, max_model_len: int) -> str:
    options = {
        "kv_cache_config": {"free_gpu_memory_fraction": round(rep.memory_fraction, 2),
                            **({"dtype": "fp8"} if rep.precision.kv_dtype == "fp8" else {})},
        "enable_chunked_prefill": True,
    }
    cmd = ["trtllm-serve", hf_id(rep), "--tp_size", str(rep.tp * rep.ep), "--pp_size", str(rep.pp)]
    if rep.ep > 1:
        cmd += ["--ep_size", str(rep.ep)]
    cmd += ["--max_batch_size", str(max_num_seqs), "--max_num_tokens", str(rep.engine.prefill_chunk_tokens),
            "--max_seq_len", str(max_model_len), "--kv_cache_free_gpu_memory_fraction", f"{rep.memory_fraction:.2f}",
            "--extra_llm_api_options", "extra-llm-api-config.yml"]
    text = "cat > extra-llm-api-config.yml <<'EOF'\n" + _yaml(options) + "EOF\n" + _join(cmd)
    return _with_note(rep, text)


def _yaml(d: dict, indent: int = 0) -> str:
    out = ""
    for k, v in d.items():
        if isinstance(v, dict):
            out += " " * indent + f"{k}:\n" + _yaml(v, indent + 2)
        else:
            out += " " * indent + f"{k}: {json.dumps(v)}\n"
    return out


def emit_mindie(rep: Replica, *, max_num_seqs: int, max_model_len: int) -> str:
    """MindIE Service ``config.json`` fragment (BackendConfig.ModelDeployConfig and ScheduleConfig)."""
    max_in = max(1, max_model_len - 1)
    cfg = {
        "BackendConfig": {
            "npuDeviceIds": [list(range(rep.tp * rep.pp * rep.ep))],
            "ModelDeployConfig": {
                "maxSeqLen": max_model_len,
                "maxInputTokenLen": max_in,
                "ModelConfig": [{
                    "modelName": rep.model.id,
                    "modelWeightPath": f"/data/weights/{rep.model.id}"
                                       + ("" if rep.precision.scheme in ("bf16", "fp16") else f"-{rep.precision.scheme}"),
                    "worldSize": rep.tp * rep.pp * rep.ep,
                    "npuMemSize": -1,
                    "backendType": "atb",
                    "trustRemoteCode": False,
                }],
            },
            "ScheduleConfig": {
                "cacheBlockSize": rep.block_size_tokens,
                "maxBatchSize": max_num_seqs,
                "maxPrefillBatchSize": max(1, min(max_num_seqs, rep.engine.prefill_chunk_tokens // max(1, max_in))),
                "maxPrefillTokens": max(rep.engine.prefill_chunk_tokens, max_model_len),
                "maxIterTimes": max(1, max_model_len - 1),
            },
        }
    }
    note = ("// MindIE Service config.json fragment; npuMemSize -1 lets MindIE size the KV cache from free "
            f"memory (the estimate assumed {rep.memory_fraction:.0%} of device memory)")
    q = _quant_note(rep)
    if q:
        note += "\n// " + q.lstrip("# ") + " (msModelSlim)"
    return note + "\n" + json.dumps(cfg, indent=2)


def _with_note(rep: Replica, text: str) -> str:
    notes = [n for n in (_quant_note(rep),) if n]
    if rep.device.kind.upper() == "NPU" and "mindie" not in text:
        notes.append(f"# {rep.device.id} is an NPU: use the engine's Ascend/MLU build (e.g. vLLM-Ascend)")
    return "\n".join([*notes, text])


def emit(rep: Replica, engine: str, *, max_num_seqs: int, max_model_len: int) -> str:
    """The serve command or config for ``engine`` that realises ``rep`` (module doc)."""
    key = engine.strip().casefold().replace("-", "").replace("_", "")
    key = {"tensorrtllm": "trtllm", "trt": "trtllm"}.get(key, key)
    if key not in EMITTERS:
        raise UserInputError(f"--emit must be one of {', '.join(EMITTERS)} (got {engine!r})", field="emit")
    if max_num_seqs < 1 or max_model_len < 1:
        raise UserInputError("max_num_seqs and max_model_len must be positive", field="emit")
    fn = {"vllm": emit_vllm, "sglang": emit_sglang, "trtllm": emit_trtllm, "mindie": emit_mindie}[key]
    return fn(rep, max_num_seqs=max_num_seqs, max_model_len=max_model_len)
