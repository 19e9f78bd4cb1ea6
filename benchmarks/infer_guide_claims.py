"""The seed guide's inference claims recomputed by the planner (table in docs/inference.md).

    python benchmarks/infer_guide_claims.py

Prints one line per claim: the guide's figure, the configuration assumed, and the planner's figure.
tests/unit/test_serve_claims.py asserts the same conclusions.
"""

from __future__ import annotations

import os

os.environ.setdefault("XPUPLAN_USE_CALIBRATION", "0")

from xpuplan.catalog import load_catalog  # noqa: E402
from xpuplan.errors import InfeasibleError, XpuplanError  # noqa: E402
from xpuplan.models import get_model  # noqa: E402
from xpuplan.serve import estimate_continuous, estimate_encoder, estimate_static, make_replica  # noqa: E402
from xpuplan.serve.kv import max_concurrent_sequences, memory_plan  # noqa: E402


def line(claim: str, guide: str, ours: str) -> None:
    print(f"| {claim} | {guide} | {ours} |")


def attempt(fn) -> str:
    try:
        return fn()
    except InfeasibleError as exc:
        return f"does not fit: {'; '.join(exc.reasons) or exc}"
    except XpuplanError as exc:
        return f"not estimated: {exc}"
    except Exception as exc:  # e.g. an efficiency family that does not resolve
        return f"not estimated ({type(exc).__name__}: {str(exc).splitlines()[0]})"


def main() -> None:
    cat = load_catalog()
    h100 = cat.get("nvidia-h100-sxm-80gb")
    bert, l7, l8 = get_model("bert-base"), get_model("llama2-7b"), get_model("llama3-8b")
    print("| claim | guide | planner |")
    print("|---|---|---|")

    def bert_h100(batch: int, dtype: str = "fp16") -> str:
        e = estimate_encoder(make_replica(bert, h100, dtype=dtype), batch, 128)
        return f"{e.latency_s * 1e3:.2f} ms, {e.qps:,.0f} QPS ({dtype}, TensorRT, seq 128, batch {batch})"

    line("G-139 BERT-base batch 1 on H100", "1.2 ms", attempt(lambda: bert_h100(1)))
    line("G-138/G-141 BERT-base QPS on H100", "2,000+ QPS; 12,000 QPS",
         attempt(lambda: bert_h100(128)) + "; " + attempt(lambda: bert_h100(128, "int8")))
    for hw in ("huawei-ascend-310", "huawei-ascend-310p"):
        line(f"G-138/G-139 BERT-base on {hw}", "0.8 ms, 3,000+ QPS",
             attempt(lambda hw=hw: (lambda e1, e128: f"{e1.latency_s * 1e3:.2f} ms at batch 1, {e128.qps:,.0f} QPS at batch 128 (int8)")(
                 estimate_encoder(make_replica(bert, cat.get(hw), dtype="int8"), 1, 128),
                 estimate_encoder(make_replica(bert, cat.get(hw), dtype="int8"), 128, 128))))
    rep = make_replica(l7, h100, dtype="fp16", engine="vllm")
    line("G-142 H100 GPT-7B (Llama-2-7B) fp16, batch 64, sequence 2048", "180-220 tokens/s",
         attempt(lambda: str(estimate_static(rep, 1024, 1024, 64))) + "; continuous batching (paged KV): "
         + attempt(lambda: (lambda e: f"{e.output_tokens_per_s:,.0f} tokens/s in total, {e.tokens_per_s_per_user:.0f} per sequence")(
             estimate_continuous(rep, 1024, 1024, 64)))
         + "; batch 1: " + attempt(lambda: f"{estimate_static(rep, 1024, 1024, 1).output_tokens_per_s:.0f} tokens/s"))
    for hw, claim, guide in (("huawei-ascend-910b", "G-143 910B GPT-7B int8", "~150 tokens/s"),
                             ("huawei-ascend-310p", "G-146 310P GPT-7B int8, batch 32, sequence 2048", "200-250 tokens/s")):
        def npu(hw=hw) -> str:
            r = make_replica(l7, cat.get(hw), dtype="int8")
            one = estimate_static(r, 1024, 1024, 1)
            b32 = attempt(lambda: f"{estimate_static(r, 1024, 1024, 32).output_tokens_per_s:,.0f} tokens/s at batch 32")
            return f"batch 1: {one.output_tokens_per_s:.0f} tokens/s ({r.engine.name}); {b32}"
        line(claim, guide, attempt(npu))
    r8 = make_replica(l8, h100, engine="vllm", max_num_seqs=100_000)
    line("G-149 H100 holds 1024 concurrent requests", "1024",
         attempt(lambda: f"{max_concurrent_sequences(r8, memory_plan(r8), 4096)} sequences of 4,096 tokens (Llama-3-8B, bf16 KV)"))


if __name__ == "__main__":
    main()
