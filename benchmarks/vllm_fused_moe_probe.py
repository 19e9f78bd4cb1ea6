"""vLLM's fused-MoE Triton kernel on this GPU, against the serving planner's expert GEMM law.

A vLLM replica runs the routed experts of an MoE layer as two calls of one Triton kernel (``fused_moe_kernel``,
``vllm/model_executor/layers/fused_moe/fused_moe.py``): the up/gate projection of every (token, expert) copy, then
the down projection, each expert's rows gathered by a sorted index and padded to the kernel's row block, with the
block configuration vLLM ships for the GPU, expert count and width (``configs/E=..,N=..,device_name=..json``; its
default configuration where none is shipped). A block-quantized FP8 checkpoint (DeepSeek-V3/R1, Qwen3 FP8) runs the
same kernel with 128 x 128 weight scales and 1 x 128 activation scales, rescaling every K step's partial product.

This probe runs that kernel as vLLM launches it (grid, strides, configuration chosen by the nearest token count) on
uniformly routed random tokens, and times each of the two calls captured as a CUDA graph (the host out of the way).
The kernel source is not part of xpuplan: give ``--vllm-dir``, a folder holding vLLM's ``fused_moe.py`` (or an
excerpt with the functions ``write_zeros_to_output`` and ``fused_moe_kernel``) and, in ``configs/``, the tuning
files to use. The routing alignment (``moe_align_block_size``, a CUDA op of vLLM) is done here in PyTorch and is not
timed; nor are the activation quantization, ``silu_and_mul`` and the top-k sum between and after the two calls.
Each case's kernel output is checked against a float32 PyTorch reference on a small token count first.

Cases (``CASES``): DeepSeek-V3/R1 at TP8 in FP8 blocks and in BF16 (same shapes: the precision's effect alone);
Qwen3-235B-A22B at TP8 in BF16 (the shape of the unseen vLLM runs that the planner predicts well); the BF16 shape of
vllm-project/vllm#44818 (E=128, N=704, K=2816), whose published H200 timings check this harness. Also the
8192^3 GEMM in BF16 (``torch.matmul``) and FP8 (``torch._scaled_mm``, per-tensor scales) for the scaled comparison.

    python benchmarks/vllm_fused_moe_probe.py --vllm-dir DIR --json OUT.json     # measure (needs CUDA + Triton)
    python benchmarks/vllm_fused_moe_probe.py --compare OUT.json                  # planner's law against it

``--compare`` needs xpuplan (no GPU): for each point, the planner's up/gate and down op times
(``perf.ops.routed_expert_ops`` with the measured experts touched and rows each, at the device family's built-in
efficiency for a vLLM replica), measured / modelled per call, and the same with the family's GEMM fraction scaled so that its 8192^3
GEMM takes the measured time. Not a test: docs/measurement.md records what a run gave and
benchmarks/data/device_runs/ keeps the raw file.
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from gpu_timing import cuda_torch, graph_seconds, output_problem

#: (case id, model preset, tp, routed experts E, per-rank expert width N, hidden K, top-k, precision, tokens)
CASES: tuple[tuple[str, str, int, int, int, int, int, str, tuple[int, ...]], ...] = (
    ("deepseek-v3-tp8-fp8block", "deepseek-v3", 8, 256, 256, 7168, 8, "fp8_block",
     (16, 64, 256, 1024, 2048, 4096, 8192, 16384)),
    ("deepseek-v3-tp8-bf16", "deepseek-v3", 8, 256, 256, 7168, 8, "bf16", (16, 256, 1024, 4096, 8192, 16384)),
    ("qwen3-235b-a22b-tp8-bf16", "qwen3-235b-a22b", 8, 128, 192, 4096, 8, "bf16",
     (16, 64, 256, 1024, 2048, 4096, 8192, 16384)),
    ("pr44818-e128-n704-bf16", "", 1, 128, 704, 2816, 8, "bf16", (1024, 1536, 2048, 3072, 4096)),
)
BLOCK = 128  # the block-FP8 checkpoints' scale block (weights 128 x 128, activations 1 x 128)
REPEATS = 20


def _load_kernel(vllm_dir: Path) -> Any:
    """``fused_moe_kernel`` from vLLM's source file (the two Triton functions only, compiled here)."""
    path = vllm_dir / "fused_moe.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError) as exc:
        raise SystemExit(f"--vllm-dir: cannot read {path} ({exc})") from None
    wanted = ("write_zeros_to_output", "fused_moe_kernel")
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    if sorted(f.name for f in funcs) != sorted(wanted):
        raise SystemExit(f"--vllm-dir: {path} lacks {', '.join(wanted)}")
    import triton
    import triton.language as tl

    # a module name for the kernels: Triton reads their __module__ when it compiles the nested call
    namespace: dict[str, Any] = {"triton": triton, "tl": tl, "__name__": "vllm_fused_moe_kernels"}
    code = compile(ast.Module(body=funcs, type_ignores=[]), str(path), "exec")
    exec(code, namespace)  # noqa: S102 - the user's vLLM source, run as vLLM runs it
    return namespace["fused_moe_kernel"]


def _configs(vllm_dir: Path, E: int, N: int, precision: str) -> tuple[dict[int, dict[str, int]] | None, str]:
    """vLLM's tuning table for this shape on an H200 (``get_config_file_name``), or None (its default config)."""
    dtype = ",dtype=fp8_w8a8,block_shape=[128,128]" if precision == "fp8_block" else ""
    name = f"E={E},N={N},device_name=NVIDIA_H200{dtype}.json"
    path = vllm_dir / "configs" / name
    if not path.exists():
        return None, f"default (no {name})"
    table = json.loads(path.read_text(encoding="utf-8"))
    table.pop("triton_version", None)
    return {int(k): v for k, v in table.items()}, name


def _config(table: dict[int, dict[str, int]] | None, M: int, E: int, precision: str) -> dict[str, int]:
    """``try_get_optimal_moe_config``: the nearest tuned token count, else ``get_default_config``."""
    if table:
        return dict(table[min(table, key=lambda x: abs(x - M))])
    if precision == "fp8_block":
        return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": BLOCK, "BLOCK_SIZE_K": BLOCK, "GROUP_SIZE_M": 32,
                "num_warps": 4, "num_stages": 3}
    if M <= E:
        return {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 1}
    return {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}


def _align(torch: Any, topk_ids: Any, E: int, block_m: int) -> tuple[Any, Any, Any, list[int]]:
    """``moe_align_block_size`` in PyTorch: copy indices sorted by expert, each expert padded to ``block_m`` rows
    (padding = the copy count, which the kernel masks), the expert of each row block, the padded total; and the
    rows each expert received."""
    flat = topk_ids.flatten().to(torch.int64)
    n = flat.numel()
    counts = torch.bincount(flat, minlength=E)
    padded = (counts + block_m - 1) // block_m * block_m
    start_pad = torch.cumsum(padded, 0) - padded
    start = torch.cumsum(counts, 0) - counts
    order = torch.argsort(flat, stable=True)
    e_sorted = flat[order]
    pos = start_pad[e_sorted] + (torch.arange(n, device=flat.device) - start[e_sorted])
    max_len = n + E * (block_m - 1)
    sorted_ids = torch.full((max_len,), n, dtype=torch.int32, device=flat.device)
    sorted_ids[pos] = order.to(torch.int32)
    blocks = torch.repeat_interleave(torch.arange(E, device=flat.device), padded // block_m)
    expert_ids = torch.zeros((max_len + block_m - 1) // block_m, dtype=torch.int32, device=flat.device)
    expert_ids[: blocks.numel()] = blocks.to(torch.int32)
    total = torch.tensor([int(padded.sum())], dtype=torch.int32, device=flat.device)
    return sorted_ids, expert_ids, total, [int(c) for c in counts.tolist()]


def _quant_block(torch: Any, w: Any) -> tuple[Any, Any]:
    """FP8 (E4M3) weights with one float32 scale per 128 x 128 block: (E, n, k) -> (E, n/128, k/128) scales."""
    E, n, k = w.shape
    blocks = w.view(E, n // BLOCK, BLOCK, k // BLOCK, BLOCK).float()
    amax = blocks.abs().amax(dim=(2, 4)).clamp(min=1e-6)
    scale = amax / torch.finfo(torch.float8_e4m3fn).max
    q = (blocks / scale[:, :, None, :, None]).to(torch.float8_e4m3fn).view(E, n, k)
    return q, scale.contiguous()


def _quant_rows(torch: Any, x: Any) -> tuple[Any, Any]:
    """FP8 activations with one scale per 1 x 128 group (vLLM's ``per_token_group_quant_fp8``)."""
    m, k = x.shape
    groups = x.view(m, k // BLOCK, BLOCK).float()
    scale = (groups.abs().amax(dim=2) / torch.finfo(torch.float8_e4m3fn).max).clamp(min=1e-10)
    return (groups / scale[:, :, None]).to(torch.float8_e4m3fn).view(m, k), scale.contiguous()


def _dequant(torch: Any, q: Any, scale: Any) -> Any:
    """float32 values of block-quantized weights (E, n, k) or row-group activations (m, k)."""
    if q.dim() == 3:
        E, n, k = q.shape
        return (q.float().view(E, n // BLOCK, BLOCK, k // BLOCK, BLOCK) * scale[:, :, None, :, None]).view(E, n, k)
    m, k = q.shape
    return (q.float().view(m, k // BLOCK, BLOCK) * scale[:, :, None]).view(m, k)


def _launch(kernel: Any, tl: Any, triton: Any, A: Any, B: Any, C: Any, A_scale: Any, B_scale: Any, weights: Any,
            sorted_ids: Any, expert_ids: Any, total: Any, top_k: int, mul_weight: bool, config: dict[str, int],
            fp8: bool) -> None:
    """``invoke_fused_moe_kernel`` (its non-WNA16 branch), as vLLM launches the kernel."""
    cfg = dict(config)
    M = A.size(0)
    EM = sorted_ids.size(0)
    if M < cfg["BLOCK_SIZE_M"]:
        EM = min(EM, M * top_k * cfg["BLOCK_SIZE_M"])
    block_k = cfg.pop("BLOCK_SIZE_K")
    if fp8:
        block_k = min(block_k, BLOCK)
    grid = (triton.cdiv(EM, cfg["BLOCK_SIZE_M"]) * triton.cdiv(B.size(1), cfg["BLOCK_SIZE_N"]),)
    kernel[grid](
        A, B, C, None, A_scale, B_scale, weights, sorted_ids, expert_ids, total,
        B.size(1), B.size(2), EM, M * top_k,
        A.stride(0), A.stride(1), B.stride(0), B.stride(2), B.stride(1), C.stride(1), C.stride(2),
        A_scale.stride(0) if A_scale is not None else 0, A_scale.stride(1) if A_scale is not None else 0,
        B_scale.stride(0) if B_scale is not None else 0, B_scale.stride(2) if B_scale is not None else 0,
        B_scale.stride(1) if B_scale is not None else 0, 0, 0,
        BLOCK if fp8 else 0, BLOCK if fp8 else 0,
        MUL_ROUTED_WEIGHT=mul_weight, top_k=top_k, compute_type=tl.bfloat16, use_fp8_w8a8=fp8,
        use_int8_w8a8=False, use_int8_w8a16=False, per_channel_quant=False, HAS_BIAS=False,
        BLOCK_SIZE_K=block_k, SPLIT_K=1, **cfg)


def _case(torch: Any, kernel: Any, vllm_dir: Path, case: tuple[Any, ...], repeats: int) -> dict[str, Any]:
    import triton
    import triton.language as tl

    cid, model, tp, E, N, K, k, precision, token_counts = case
    fp8 = precision == "fp8_block"
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    w13 = torch.randn(E, 2 * N, K, device=dev, dtype=torch.bfloat16, generator=gen) * 0.02
    w2 = torch.randn(E, K, N, device=dev, dtype=torch.bfloat16, generator=gen) * 0.02
    if fp8:
        w13, w13_s = _quant_block(torch, w13)
        w2, w2_s = _quant_block(torch, w2)
    else:
        w13_s = w2_s = None
    table, table_name = _configs(vllm_dir, E, N, precision)
    out: dict[str, Any] = {"id": cid, "model": model, "tp": tp, "experts": E, "expert_width": N, "hidden": K,
                           "top_k": k, "precision": precision, "config_file": table_name, "points": []}

    def run_point(T: int, check: bool) -> dict[str, Any]:
        x = torch.randn(T, K, device=dev, dtype=torch.bfloat16, generator=gen)
        topk_ids = torch.rand(T, E, device=dev, generator=gen).topk(k, dim=1).indices.to(torch.int32)
        weights = torch.rand(T, k, device=dev, generator=gen, dtype=torch.float32)
        config = _config(table, T, E, precision)
        sorted_ids, expert_ids, total, counts = _align(torch, topk_ids, E, config["BLOCK_SIZE_M"])
        inter = torch.randn(T * k, N, device=dev, dtype=torch.bfloat16, generator=gen)
        if fp8:
            a1, a1_s = _quant_rows(torch, x)
            a2, a2_s = _quant_rows(torch, inter)
        else:
            a1, a1_s, a2, a2_s = x, None, inter, None
        c1 = torch.empty(T, k, 2 * N, device=dev, dtype=torch.bfloat16)
        c2 = torch.empty(T, k, K, device=dev, dtype=torch.bfloat16)

        def up() -> None:
            _launch(kernel, tl, triton, a1, w13, c1, a1_s, w13_s, None, sorted_ids, expert_ids, total, k, False,
                    config, fp8)

        def down() -> None:
            _launch(kernel, tl, triton, a2, w2, c2, a2_s, w2_s, weights.view(-1), sorted_ids, expert_ids, total, 1,
                    True, config, fp8)

        point: dict[str, Any] = {"tokens": T, "config": config}
        if check:  # poison, run once, compare with a float32 reference
            c1.fill_(float("nan"))
            c2.fill_(float("nan"))
            up()
            down()
            torch.cuda.synchronize()
            xa = _dequant(torch, a1, a1_s) if fp8 else a1.float()
            ia = _dequant(torch, a2, a2_s) if fp8 else a2.float()
            wa = _dequant(torch, w13, w13_s) if fp8 else w13.float()
            wb = _dequant(torch, w2, w2_s) if fp8 else w2.float()
            ids = topk_ids.long()
            ref1 = torch.einsum("tk,tjnk->tjn", xa, wa[ids])
            ref2 = torch.einsum("rn,rkn->rk", ia, wb[ids.view(-1)]).view(T, k, K) * weights[:, :, None]
            point["rel_err_up"] = float((c1.float() - ref1).norm() / ref1.norm())
            point["rel_err_down"] = float((c2.float() - ref2).norm() / ref2.norm())
        point["up_s"] = graph_seconds(torch, up, repeats)
        point["down_s"] = graph_seconds(torch, down, repeats)
        touched = [c for c in counts if c]
        point.update(experts_touched=len(touched), rows_mean=statistics.fmean(touched),
                     rows_max=max(touched), padded_rows=int(total.item()))
        return point

    checked = run_point(min(token_counts[0], 64), check=True)
    out["check"] = {key: checked[key] for key in ("tokens", "rel_err_up", "rel_err_down")}
    for T in token_counts:
        try:
            out["points"].append(run_point(T, check=False))
        except Exception as exc:  # noqa: BLE001 - one point's failure is recorded, the rest still run
            out["points"].append({"tokens": T, "error": f"{type(exc).__name__}: {exc}"})
        print(f"  {cid} T={T}: {out['points'][-1]}", flush=True)
    return out


def _reference_gemms(torch: Any, repeats: int) -> dict[str, float]:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    res = {"bf16_8192_s": graph_seconds(torch, lambda: a @ b, repeats)}
    a8, b8 = a.to(torch.float8_e4m3fn), b.t().contiguous().to(torch.float8_e4m3fn).t()
    one = torch.ones((), device="cuda")
    res["fp8_8192_s"] = graph_seconds(torch, lambda: torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16),
                                      repeats)
    return res


#: (name, K, N) of DeepSeek-V3's dense linear layers on one TP8 rank whose sizes are whole 128-blocks (vLLM: q_a
#: replicated, q_b / kv_b / o and the shared expert split by TP) and a square reference; each at M = 2,048 and 8,192.
DENSE_SHAPES = (("q_a", 7168, 1536), ("q_b", 1536, 3072), ("kv_b", 512, 4096), ("o", 2048, 7168),
                ("shared up/gate", 7168, 512), ("square", 8192, 8192))


def _dense_point(torch: Any, name: str, M: int, K: int, N: int, repeats: int) -> dict[str, Any]:
    one = torch.ones((), device="cuda")
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * 0.02
    row: dict[str, Any] = {"name": name, "M": M, "K": K, "N": N}
    row["bf16_s"] = graph_seconds(torch, lambda: a @ w.t(), repeats)
    a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
    row["fp8_tensor_s"] = graph_seconds(
        torch, lambda: torch._scaled_mm(a8, w8.t(), one, one, out_dtype=torch.bfloat16), repeats)
    aq, a_s = _quant_rows(torch, a)
    wq3, w_s3 = _quant_block(torch, w.view(1, N, K))
    wq, w_s = wq3[0], w_s3[0]  # (N, K) and (N/128, K/128)
    ref = _dequant(torch, aq, a_s) @ _dequant(torch, wq3, w_s3)[0].t()
    layouts = {"a_outer_major": (a_s.t().contiguous().t(), w_s.t()), "a_row_major": (a_s, w_s.t())}
    for label, (sa, sb) in layouts.items():
        def call(sa: Any = sa, sb: Any = sb) -> Any:
            return torch._scaled_mm(aq, wq.t(), sa, sb, out_dtype=torch.bfloat16)

        try:
            out = call()
            torch.cuda.synchronize()
            row["fp8_block_rel_err"] = float((out.float() - ref).norm() / ref.norm())
            row["fp8_block_s"] = graph_seconds(torch, call, repeats)
            row["fp8_block_layout"] = label
            break
        except Exception as exc:  # noqa: BLE001 - recorded: this PyTorch may not take block scales
            row[f"fp8_block_error_{label}"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return row


def _block_dense(torch: Any, repeats: int) -> list[dict[str, Any]]:
    """FP8 dense GEMMs with 1 x 128 activation and 128 x 128 weight scales (what block-FP8 checkpoints' linear
    layers run: vLLM's CUTLASS blockwise path, DeepGEMM) against per-tensor FP8, both through ``torch._scaled_mm``
    where this PyTorch takes block scales; BF16 beside them. A layout the library refuses is recorded."""
    rows: list[dict[str, Any]] = []
    for name, K, N in DENSE_SHAPES:
        for M in (2048, 8192):
            try:
                rows.append(_dense_point(torch, name, M, K, N, repeats))
            except Exception as exc:  # noqa: BLE001 - one shape's failure is recorded, the rest still run
                rows.append({"name": name, "M": M, "K": K, "N": N, "error": f"{type(exc).__name__}: {exc}"})
            print(f"  dense {rows[-1]}", flush=True)
    return rows


def measure(vllm_dir: Path, json_path: Path | None, only: set[str] | None, repeats: int, dense: bool = True) -> int:
    torch = cuda_torch()
    if torch is None:
        return 0
    kernel = _load_kernel(vllm_dir)
    doc: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "reference": _reference_gemms(torch, repeats), "cases": []}
    try:
        import triton

        doc["triton"] = triton.__version__
    except ImportError:
        pass
    print(f"{doc['device']}: 8192^3 bf16 {2 * 8192 ** 3 / doc['reference']['bf16_8192_s'] / 1e12:.0f} TFLOP/s, "
          f"fp8 {2 * 8192 ** 3 / doc['reference']['fp8_8192_s'] / 1e12:.0f}", flush=True)
    for case in CASES:
        if only is not None and case[0] not in only:
            continue
        try:
            doc["cases"].append(_case(torch, kernel, vllm_dir, case, repeats))
        except Exception as exc:  # noqa: BLE001
            doc["cases"].append({"id": case[0], "error": f"{type(exc).__name__}: {exc}"})
        if json_path:
            json_path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        torch.cuda.empty_cache()
    try:
        if dense:
            doc["block_dense"] = _block_dense(torch, repeats)
    except Exception as exc:  # noqa: BLE001
        doc["block_dense"] = [{"error": f"{type(exc).__name__}: {exc}"}]
    if json_path:
        json_path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    for c in doc["cases"]:
        if "error" in c:
            print(f"{c['id']}: {c['error']}")
            continue
        print(f"{c['id']} ({c['config_file']}; check at {c['check']['tokens']} tokens: rel. err. up "
              f"{c['check']['rel_err_up']:.1e}, down {c['check']['rel_err_down']:.1e})")
        for p in c["points"]:
            if "error" in p:
                print(f"  {p['tokens']:>6}: {p['error']}")
            else:
                print(f"  {p['tokens']:>6} tokens: up/gate {p['up_s'] * 1e6:8.1f} us, down {p['down_s'] * 1e6:8.1f} us"
                      f"  ({p['experts_touched']} experts, {p['rows_mean']:.0f} rows each)")
    return 0


def serving_efficiency(device: str, engine: str) -> tuple[Any, Any]:
    """(catalog device, the efficiency a serving replica of ``engine`` on it uses: built-in assumptions)."""
    from xpuplan.catalog import get_device
    from xpuplan.catalog.assumptions import default_assumptions
    from xpuplan.serve.replica import engine_build_efficiency, engine_profile

    a = default_assumptions()
    dev = get_device(device)
    return dev, engine_build_efficiency(engine_profile(engine, assumptions=a), dev, a)


def modelled(point: dict[str, Any], case: dict[str, Any], device: str, engine: str,
             gemm_scale: float = 1.0) -> tuple[float, float]:
    """The planner's seconds of the up/gate and the down calls of one measured point (the measured experts touched
    and rows each) for a replica of ``engine``; ``gemm_scale`` multiplies the family's GEMM fraction."""
    from xpuplan.perf.ops import routed_expert_ops
    from xpuplan.perf.roofline import op_seconds

    dev, eff = serving_efficiency(device, engine)
    if gemm_scale != 1.0:
        eff = eff.model_copy(update={"gemm_peak_fraction": eff.gemm_peak_fraction * gemm_scale})
    dtype = "fp8" if case["precision"] == "fp8_block" else "bf16"
    touched, rows = point["experts_touched"], point["rows_mean"]
    ops = routed_expert_ops(case["experts"], case["top_k"], point["tokens"] * case["top_k"], case["hidden"],
                            case["expert_width"], dtype=dtype, groups=(touched, rows))
    t = {o.name: float(op_seconds(o, dev, dtype if o.op_class == "gemm" else "bf16", eff)[2]) for o in ops}
    return t["experts up/gate"], t["experts down"]


def _check(doc: Any) -> str | None:
    """The first missing or malformed field of a measurement file, or None."""
    if not isinstance(doc, dict):
        return "(top level): not an object"
    ref = doc.get("reference")
    if not isinstance(ref, dict) or not isinstance(ref.get("bf16_8192_s"), (int, float)) or ref["bf16_8192_s"] <= 0:
        return "reference.bf16_8192_s"
    if not isinstance(doc.get("cases"), list):
        return "cases"
    for i, c in enumerate(doc["cases"]):
        if not isinstance(c, dict):
            return f"cases[{i}]"
        if "error" in c:
            continue
        for key in ("id", "experts", "expert_width", "hidden", "top_k", "precision", "points"):
            if key not in c:
                return f"cases[{i}].{key}"
        for j, p in enumerate(c["points"]):
            if "error" in p:
                continue
            for key in ("tokens", "up_s", "down_s", "experts_touched", "rows_mean"):
                if not isinstance(p.get(key), (int, float)) or p[key] <= 0:
                    return f"cases[{i}].points[{j}].{key}"
    return None


def compare(path: Path, device: str, engine: str) -> int:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        print(f"--compare {path}: not a readable JSON file ({exc})", file=sys.stderr)
        return 2
    bad = _check(doc)
    if bad:
        print(f"--compare {path}: missing or malformed field {bad}", file=sys.stderr)
        return 2
    from xpuplan.errors import UserInputError
    from xpuplan.perf.roofline import OpCost, op_seconds

    try:
        dev, eff = serving_efficiency(device, engine)
    except UserInputError as exc:  # --device or --engine unknown
        print(f"--compare: {exc.render()}", file=sys.stderr)
        return 2
    flops = 2.0 * 8192 ** 3
    ref = OpCost("gemm", "gemm", flops, 3 * 8192 * 8192 * 2, 8192)
    model_bf16 = float(op_seconds(ref, dev, "bf16", eff)[2])
    scale = model_bf16 / doc["reference"]["bf16_8192_s"]
    print(f"{doc.get('device')} (torch {doc.get('torch')}, triton {doc.get('triton')}): 8192^3 BF16 measured "
          f"{flops / doc['reference']['bf16_8192_s'] / 1e12:.0f} TFLOP/s, planner {flops / model_bf16 / 1e12:.0f} "
          f"(family fraction x {scale:.2f} in the scaled column)")
    print("fused MoE kernel: measured / modelled per call (the planner's routed-expert ops at the measured experts "
          "touched and rows each);\n'scaled': with the family's GEMM fraction scaled to the measured 8192^3 BF16 rate")
    print(f"{'case':28} {'config':8} {'tokens':>6} {'rows/exp':>8} {'up us':>8} {'down us':>8} {'up':>6} {'down':>6}"
          f" {'both':>6} {'both scaled':>11}")
    for c in doc["cases"]:
        if "error" in c:
            print(f"{c.get('id', '?'):28} error: {c['error']}")
            continue
        tuned = "default" if str(c.get("config_file", "")).startswith("default") else "tuned"
        for p in c["points"]:
            if "error" in p:
                print(f"{c['id']:28} {tuned:8} {p.get('tokens', '?'):>6} error: {p['error']}")
                continue
            mu, md = modelled(p, c, device, engine)
            su, sd = modelled(p, c, device, engine, gemm_scale=scale)
            both = (p["up_s"] + p["down_s"]) / (mu + md)
            print(f"{c['id']:28} {tuned:8} {p['tokens']:>6} {p['rows_mean']:>8.0f} {p['up_s'] * 1e6:>8.1f}"
                  f" {p['down_s'] * 1e6:>8.1f} {p['up_s'] / mu:>6.2f} {p['down_s'] / md:>6.2f} {both:>6.2f}"
                  f" {(p['up_s'] + p['down_s']) / (su + sd):>11.2f}")
    dense = [r for r in doc.get("block_dense") or [] if isinstance(r, dict) and "fp8_block_s" in r]
    if dense:
        print("\nblock-FP8 dense GEMMs (1 x 128 activation, 128 x 128 weight scales) against per-tensor FP8 and BF16")
        print(f"{'shape':16} {'M':>6} {'K':>6} {'N':>6} {'bf16 us':>8} {'fp8 us':>8} {'block us':>8} {'block/fp8':>9}"
              f" {'bf16/fp8':>8}")
        for r in dense:
            print(f"{r['name']:16} {r['M']:>6} {r['K']:>6} {r['N']:>6} {r['bf16_s'] * 1e6:>8.1f}"
                  f" {r['fp8_tensor_s'] * 1e6:>8.1f} {r['fp8_block_s'] * 1e6:>8.1f}"
                  f" {r['fp8_block_s'] / r['fp8_tensor_s']:>9.2f} {r['bf16_s'] / r['fp8_tensor_s']:>8.2f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-dir", type=Path, help="folder with vLLM's fused_moe.py and configs/ (measuring)")
    ap.add_argument("--json", type=Path, help="write the measurement here")
    ap.add_argument("--only", help="comma-separated case ids (an empty string: none, the dense GEMMs only)")
    ap.add_argument("--no-dense", action="store_true", help="skip the block-FP8 dense GEMMs")
    ap.add_argument("--repeats", type=int, default=REPEATS)
    ap.add_argument("--compare", type=Path, help="a measurement file: the planner's law against it (no GPU)")
    ap.add_argument("--device", default="nvidia-h200-sxm-141gb", help="catalog id the measurement ran on")
    ap.add_argument("--engine", default="vLLM v0.11.0", help="serving engine whose replica efficiency is compared")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(args.compare, args.device, args.engine)
    if not args.vllm_dir:
        ap.error("--vllm-dir is required to measure (or give --compare FILE)")
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    problem = output_problem(args.json)
    if problem:
        print(f"vllm_fused_moe_probe: {problem}", file=sys.stderr)
        return 2
    only = None if args.only is None else {c for c in args.only.split(",") if c}
    return measure(args.vllm_dir, args.json, only, args.repeats, dense=not args.no_dense)


if __name__ == "__main__":
    sys.exit(main())
