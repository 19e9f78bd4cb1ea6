"""Layouts practitioners published for large runs must fit in the planner's memory model.

Each entry is a run that happened, with the layout its authors printed; the planner must not call it
infeasible (the memory model is an estimate of what a real stack keeps, and a real stack kept it).
Where the source leaves a field out, the entry says what was assumed and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from xpuplan.catalog.stacks import training_stack
from xpuplan.models import get_model
from xpuplan.train import Cluster, estimate, make_plan
from xpuplan.workload.training import TrainingJob


@dataclass(frozen=True)
class Published:
    name: str
    source: str
    model: str
    hardware: str
    n_devices: int
    seq_len: int
    global_batch_seqs: int
    plan: dict[str, Any]
    stack: str
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    job: dict[str, Any] = field(default_factory=dict)


LAYOUTS = (
    Published(
        "Llama 3.1 405B, 8K pre-training on 16,384 H100", "Llama Team 2024, The Llama 3 Herd of Models, "
        "arXiv 2407.21783, Table 4 and section 3.3.2", "llama3.1-405b", "nvidia-h100-sxm-80gb", 16384, 8192, 2048,
        dict(tp=8, pp=16, cp=1, sp=True, zero_stage=2, recompute="none", micro_batch=1), "meta-4d",
        "FSDP-style sharded DP (gradients sharded: ZeRO-2); no activation checkpointing at 8K (section 3.3.2); one layer "
        "fewer on the first and last stages; the interleaving depth V is not printed (1 assumed)"),
    Published(
        "Llama 3.1 405B, 8K pre-training on 16,384 H100, interleaved", "arXiv 2407.21783, Table 4 and section 3.3.2 "
        "(Figure 6: the interleaved schedule)", "llama3.1-405b", "nvidia-h100-sxm-80gb", 16384, 8192, 2048,
        dict(tp=8, pp=16, vpp=2, cp=1, sp=True, zero_stage=2, recompute="none", micro_batch=1), "meta-4d",
        "16 micro-batches per pipeline (16 per DP rank, Table 4) on 16 stages: every forward is warm-up, so "
        "interleaving keeps no more activations than plain 1F1B; V is not printed (2 assumed)"),
    Published(
        "Llama 3.1 405B, 8K pre-training on 8,192 H100", "arXiv 2407.21783, Table 4", "llama3.1-405b",
        "nvidia-h100-sxm-80gb", 8192, 8192, 2048,
        dict(tp=8, pp=16, cp=1, sp=True, zero_stage=2, recompute="none", micro_batch=1), "meta-4d"),
    Published(
        "Llama 3.1 405B, 128K context on 16,384 H100", "arXiv 2407.21783, Table 4 (DP printed 4; 8 is what the GPU "
        "count and the 16M-token batch imply)", "llama3.1-405b", "nvidia-h100-sxm-80gb", 16384, 131072, 128,
        dict(tp=8, pp=16, cp=16, sp=True, zero_stage=2, recompute="selective", micro_batch=1), "meta-4d"),
    Published(
        "DeepSeek-V3 pre-training on 2,048 H800", "DeepSeek-AI 2024, DeepSeek-V3 Technical Report, arXiv 2412.19437, "
        "sections 3.2-3.3 and 4.2", "deepseek-v3", "nvidia-h800-sxm-80gb", 2048, 4096, 15360,
        dict(tp=1, pp=16, ep=64, zero_stage=1, recompute="selective", precision="fp8", micro_batch=1),
        "deepseek-dualpipe",
        "16-way PP, 64-way EP over 8 nodes, ZeRO-1 DP, no TP; RMSNorm and MLA up-projections recomputed (section "
        "3.2.3), and the SwiGLU output of the experts from its FP8-cached input (section 3.3.3): Megatron-Core's "
        "layernorm, mla_up_proj and moe_act modules; FP8 GEMMs; 4K sequences, final batch 15,360 sequences",
        job=dict(recompute_modules=("layernorm", "mla_up_proj", "moe_act"))),
    Published(
        "Llama 3.1 405B FP8 on 256 GB200 (Megatron-Bridge)", "NVIDIA-NeMo/Megatron-Bridge "
        "src/megatron/bridge/perf_recipes/llama/gb200/llama31.py (2026-08), llama31_405b_pretrain_256gpu_gb200_fp8cs_"
        "config; the 25.11 performance summary prints the same TP4 PP16 VP4 layout for 256 GB200 in FP8-CS",
        "llama3.1-405b", "nvidia-gb200-186gb", 256, 8192, 1536,
        dict(tp=4, pp=16, vpp=4, cp=1, sp=True, zero_stage=1, recompute="none", precision="fp8", micro_batch=1),
        "nemo",
        "no recomputation (the base recipe's recompute_granularity is None); FP8 current scaling with fp8_param_gather "
        "(FP8 primary weights, the nemo stack's fp8_primary_weights); distributed optimizer (ZeRO-1)"),
    Published(
        "GPT-3 175B on 1,024 A100 (Megatron-LM)", "Narayanan et al. 2021, Efficient Large-Scale Language Model "
        "Training on GPU Clusters Using Megatron-LM, arXiv 2104.04473, Table 1", "gpt3-175b", "nvidia-a100-sxm-80gb",
        1024, 2048, 1536, dict(tp=8, pp=8, sp=False, zero_stage=0, recompute="full", micro_batch=1),
        "megatron-lm-legacy", "activation recomputation on (section 3.5); no distributed optimizer in 2021"),
    Published(
        "BLOOM 176B on 384 A100 (Megatron-DeepSpeed)", "BigScience 2022, BLOOM: A 176B-Parameter Open-Access "
        "Multilingual Language Model, arXiv 2211.05100, section 3.4", "bloom-176b", "nvidia-a100-sxm-80gb", 384,
        2048, 2048, dict(tp=4, pp=12, sp=False, zero_stage=1, recompute="full", micro_batch=2), "deepspeed",
        "TP4 x PP12 x DP8 with ZeRO stage 1; 70 layers on 12 stages (uneven); activation checkpointing"),
)


@pytest.mark.validation
@pytest.mark.parametrize("run", LAYOUTS, ids=[r.name for r in LAYOUTS])
def test_published_layout_fits(run: Published) -> None:
    model = get_model(run.model)
    cluster = Cluster.from_catalog(run.hardware, run.n_devices)
    job = TrainingJob(seq_len=run.seq_len, global_batch_tokens=run.global_batch_seqs * run.seq_len, **run.job)
    plan = make_plan(n_devices=run.n_devices, global_batch_seqs=run.global_batch_seqs, model=model,
                     uneven_pipeline=True, **run.plan)
    e = estimate(model, cluster, plan, job, stack=training_stack(run.stack), uneven_pipeline=True)
    assert e.feasible, (f"{run.name} ({run.source}): {e.key} needs {e.memory.total_bytes / 1e9:.1f} GB of "
                        f"{e.memory.usable_bytes / 1e9:.1f} GB usable; {e.reasons}")
