"""Paths of the recorded benchmark outputs under ``tests/fixtures/bench`` that several import tests read."""

from __future__ import annotations

from pathlib import Path

F = Path(__file__).resolve().parents[1] / "fixtures" / "bench"
VLLM_JSON = F / "vllm_llama3-8b_h100_c32.json"
MEGATRON = F / "megatron_llama3-8b_8xh100.log"
MEGATRON_YAML = F / "megatron_args_override.yaml"
NCCL_LOG = F / "all_reduce_perf_8xh100.log"
HCCL = F / "all_reduce_test_8p_910b.log"
RCCL = F / "rccl_all_gather_perf_8xmi300x.log"
SGLANG = F / "sglang_qwen2.5-7b_h100.jsonl"
TRTLLM = F / "trtllm_llama3.1-8b_h100_report.json"
MLPERF_SERVER = F / "mlperf" / "llama2-70b" / "Server" / "mlperf_log_summary.txt"
MLPERF_OFFLINE = F / "mlperf" / "llama2-70b" / "Offline" / "mlperf_log_summary.txt"
MLPERF_TRAIN = F / "mlperf" / "training" / "result_0.txt"
TITAN = F / "torchtitan_llama3_8b_8xh100.log"
TITAN_TOML = F / "torchtitan_llama3_8b.toml"
