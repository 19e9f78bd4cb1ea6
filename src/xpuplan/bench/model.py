"""A small real Transformer, built in process with random weights (no downloads), timed for one
training step and one decode step.

Its structure is a Llama-style decoder written so that each layer runs the operations perf's
``layer_ops`` counts: RMSNorm, one fused QKV projection, fused scaled-dot-product attention,
output projection, residual add, RMSNorm, one fused gate/up projection, SiLU·up, down
projection, residual add; then a final norm and the output head. The same shape is returned as a
:class:`~xpuplan.models.ModelArch` (:meth:`SmallTransformerConfig.to_arch`) so the planner's
prediction for the step uses the model that was measured.

- Training step: forward over ``train_batch`` x ``train_seq`` tokens, cross-entropy, backward,
  AdamW step. On accelerators the parameters stay fp32 and matmuls run under bf16 autocast
  (mixed precision, as the planners assume); on the CPU everything is fp32 by default.
- Decode step: one new token for each of ``decode_batch`` sequences attending a KV cache of
  ``decode_context`` positions (the cache write included), weights in the compute dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from xpuplan import units
from xpuplan.bench.detect import Backend
from xpuplan.bench.micro import BenchCase
from xpuplan.bench.timing import TimingPlan, time_fn
from xpuplan.models.arch import ModelArch
from xpuplan.store.records import Record

#: Standard deviation of the random initial weights, scaled by 1/sqrt(fan-in) as in most LLMs.
INIT_GAIN = 1.0
#: AdamW hyper-parameters (values do not change the timing, only make the step realistic).
ADAM_LR = 1e-4
ADAM_WEIGHT_DECAY = 0.1
#: Gradient bytes per parameter the optimizer reads: fp32 gradients in both modes.
GRAD_BYTES = 4.0


@dataclass(frozen=True)
class SmallTransformerConfig:
    """Shape of the benchmark model and of its two timed steps."""

    layers: int
    d_model: int
    heads: int
    ffn: int
    vocab: int
    train_batch: int
    train_seq: int
    decode_batch: int
    decode_context: int

    def __post_init__(self) -> None:
        assert self.d_model % self.heads == 0, "heads must divide d_model"

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    def to_arch(self) -> ModelArch:
        """The same shape as a planner model (untied embeddings, gated MLP, RMSNorm, RoPE-free)."""
        return ModelArch(
            id="bench-small-transformer", name="xpuplan benchmark transformer", family="bench",
            n_layers=self.layers, d_model=self.d_model, n_heads=self.heads, ffn_dim=self.ffn, vocab_size=self.vocab,
            mlp="gated", tied_embeddings=False, norm="rmsnorm", position="none",
            max_seq_len=max(self.train_seq, self.decode_context + 1),
        )

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> SmallTransformerConfig:
        return SmallTransformerConfig(**{k: int(d[k]) for k in SmallTransformerConfig.__dataclass_fields__})


#: CPU model: ~34 M parameters (2 layers of width 1024, 4k vocabulary). Its decode step reads
#: ~120 MB of fp32 weights (beyond any CPU cache), so it is memory- and GEMM-bound rather than
#: dispatch-bound; its training step (256 tokens) is ~50 GFLOP, a fraction of a second on two cores.
CPU_MODEL = SmallTransformerConfig(layers=2, d_model=1024, heads=16, ffn=2816, vocab=4096, train_batch=2,
                                   train_seq=128, decode_batch=4, decode_context=512)
CPU_MODEL_QUICK = CPU_MODEL
#: Accelerator model: ~0.5 B parameters, large enough that kernels are not launch-bound.
ACCEL_MODEL = SmallTransformerConfig(layers=8, d_model=2048, heads=16, ffn=5632, vocab=32000, train_batch=8,
                                     train_seq=1024, decode_batch=16, decode_context=2048)
ACCEL_MODEL_QUICK = SmallTransformerConfig(layers=4, d_model=2048, heads=16, ffn=5632, vocab=32000, train_batch=4,
                                           train_seq=1024, decode_batch=16, decode_context=2048)


def default_config(backend: Backend, quick: bool) -> SmallTransformerConfig:
    if backend.is_accelerator:
        return ACCEL_MODEL_QUICK if quick else ACCEL_MODEL
    return CPU_MODEL_QUICK if quick else CPU_MODEL


def linear_shapes(cfg: SmallTransformerConfig, tokens: int) -> list[tuple[int, int, int, str]]:
    """(m, n, k, origin) of the model's GEMMs for ``tokens`` rows (the GEMM sweep includes them)."""
    d, f = cfg.d_model, cfg.ffn
    return [(tokens, 3 * d, d, "bench model qkv"), (tokens, d, d, "bench model attn out"),
            (tokens, 2 * f, d, "bench model mlp up/gate"), (tokens, d, f, "bench model mlp down"),
            (tokens, cfg.vocab, d, "bench model head")]


def build_model(cfg: SmallTransformerConfig, device: str, dtype: Any) -> Any:
    """The model as a ``torch.nn.Module`` with random weights."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    has_rms = hasattr(F, "rms_norm")

    def rms_norm(x: Any, w: Any) -> Any:
        if has_rms:
            return F.rms_norm(x, (x.shape[-1],), w)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w  # torch < 2.4

    def param(*shape: int) -> Any:
        fan_in = shape[-1]
        return nn.Parameter(torch.randn(*shape, device=device, dtype=dtype) * (INIT_GAIN / math.sqrt(fan_in)))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = cfg.d_model
            self.attn_norm = nn.Parameter(torch.ones(d, device=device, dtype=dtype))
            self.qkv = param(3 * d, d)
            self.out = param(d, d)
            self.mlp_norm = nn.Parameter(torch.ones(d, device=device, dtype=dtype))
            self.gate_up = param(2 * cfg.ffn, d)
            self.down = param(d, cfg.ffn)

        def forward(self, x: Any, cache: tuple[Any, Any] | None = None, pos: int = 0) -> Any:
            b, s, d = x.shape
            h = rms_norm(x, self.attn_norm)
            q, k, v = F.linear(h, self.qkv).view(b, s, 3, cfg.heads, cfg.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
            if cache is not None:
                ck, cv = cache
                ck[:, :, pos:pos + s] = k
                cv[:, :, pos:pos + s] = v
                k, v = ck[:, :, :pos + s], cv[:, :, :pos + s]
            a = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            x = x + F.linear(a.transpose(1, 2).reshape(b, s, d), self.out)
            h = rms_norm(x, self.mlp_norm)
            g, u = F.linear(h, self.gate_up).chunk(2, dim=-1)
            return x + F.linear(F.silu(g) * u, self.down)

    class SmallTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Parameter(torch.randn(cfg.vocab, cfg.d_model, device=device, dtype=dtype))
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.layers))
            self.norm = nn.Parameter(torch.ones(cfg.d_model, device=device, dtype=dtype))
            self.head = param(cfg.vocab, cfg.d_model)

        def forward(self, tokens: Any, caches: list[tuple[Any, Any]] | None = None, pos: int = 0) -> Any:
            x = F.embedding(tokens, self.embed)
            for i, blk in enumerate(self.blocks):
                x = blk(x, None if caches is None else caches[i], pos)
            return F.linear(rms_norm(x, self.norm), self.head)

    return SmallTransformer()


def n_params(cfg: SmallTransformerConfig) -> int:
    d, f = cfg.d_model, cfg.ffn
    per_layer = 2 * d + 3 * d * d + d * d + 2 * f * d + d * f
    return 2 * cfg.vocab * d + cfg.layers * per_layer + d


def _autocast(torch: Any, backend: Backend, dtype: str) -> Any:
    import contextlib

    if dtype == "fp32":
        return contextlib.nullcontext()
    device_type = backend.torch_device.split(":")[0]
    return torch.autocast(device_type=device_type, dtype=getattr(torch, {"bf16": "bfloat16", "fp16": "float16"}[dtype]))


def _make_optimizer(torch: Any, params: Any) -> tuple[Any, str]:
    """AdamW, fused where this build offers it, else the multi-tensor (foreach) kernel."""
    for kwargs, label in (({"fused": True}, "fused"), ({"foreach": True}, "foreach")):
        try:
            return torch.optim.AdamW(params, lr=ADAM_LR, weight_decay=ADAM_WEIGHT_DECAY, **kwargs), label
        except (RuntimeError, TypeError, ValueError):
            continue
    return torch.optim.AdamW(params, lr=ADAM_LR, weight_decay=ADAM_WEIGHT_DECAY), "for-loop"


def build_train_step(backend: Backend, cfg: SmallTransformerConfig, dtype: str) -> tuple[Callable[[], None], str]:
    """The training step the bench times (and ``benchmarks/bench_step_profile.py`` profiles): forward under the
    precision's autocast over fp32 parameters, cross-entropy, backward, AdamW (fused where the build offers it).
    Returns the step and the optimizer kind."""
    import torch
    import torch.nn.functional as F

    dev = backend.torch_device
    model = build_model(cfg, dev, torch.float32)
    opt, opt_kind = _make_optimizer(torch, model.parameters())
    tokens = torch.randint(0, cfg.vocab, (cfg.train_batch, cfg.train_seq), device=dev)
    targets = torch.randint(0, cfg.vocab, (cfg.train_batch * cfg.train_seq,), device=dev)

    def step() -> None:
        with _autocast(torch, backend, dtype):
            logits = model(tokens)
        loss = F.cross_entropy(logits.view(-1, cfg.vocab).float(), targets)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, opt_kind


def train_step_case(backend: Backend, cfg: SmallTransformerConfig, dtype: str, plan: TimingPlan) -> BenchCase:
    name = f"model train step {dtype} {cfg.layers}x{cfg.d_model} b{cfg.train_batch} s{cfg.train_seq}"

    def run() -> Record | None:
        step, opt_kind = build_train_step(backend, cfg, dtype)
        t = time_fn(step, backend.synchronize, plan)
        tokens_per_step = cfg.train_batch * cfg.train_seq
        return Record(kind="model_step", name=name, dtype=dtype, metric="step_time_s", value=t.best_s, unit="s",
                      time_s=t.best_s, params={"phase": "train", "model": cfg.to_dict(), "optimizer": opt_kind,
                                                 "param_dtype": "fp32", "n_params": n_params(cfg),
                                                 "tokens_per_s": tokens_per_step / t.best_s, **t.to_dict()})

    return BenchCase("model_step", name, run)


def decode_step_case(backend: Backend, cfg: SmallTransformerConfig, dtype: str, plan: TimingPlan) -> BenchCase:
    name = f"model decode step {dtype} {cfg.layers}x{cfg.d_model} b{cfg.decode_batch} ctx{cfg.decode_context}"

    def run() -> Record | None:
        import torch

        dev = backend.torch_device
        td = getattr(torch, {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[dtype])
        model = build_model(cfg, dev, td).eval()
        ctx = cfg.decode_context
        shape = (cfg.decode_batch, cfg.heads, ctx + 1, cfg.head_dim)
        caches = [(torch.randn(shape, device=dev, dtype=td), torch.randn(shape, device=dev, dtype=td))
                  for _ in range(cfg.layers)]
        token = torch.randint(0, cfg.vocab, (cfg.decode_batch, 1), device=dev)

        @torch.inference_mode()
        def step() -> None:
            # the new token sits at position ctx and attends ctx + 1 keys; the same position is
            # rewritten every iteration so the context length stays fixed
            model(token, caches, ctx)

        t = time_fn(step, backend.synchronize, plan)
        return Record(kind="model_step", name=name, dtype=dtype, metric="decode_step_time_s", value=t.best_s, unit="s",
                      time_s=t.best_s, params={"phase": "decode", "model": cfg.to_dict(), "param_dtype": dtype,
                                                 "n_params": n_params(cfg), "kv_len": ctx + 1,
                                                 "tokens_per_s": cfg.decode_batch / t.best_s,
                                                 "tpot_ms": t.best_s / units.MS, **t.to_dict()})

    return BenchCase("model_step", name, run)


#: Tiny model for the dispatch benchmark: its work is negligible, so a decode step is all
#: per-operation overhead (framework dispatch, kernel launches, Python).
TINY_MODEL = SmallTransformerConfig(layers=2, d_model=16, heads=2, ffn=32, vocab=32, train_batch=1, train_seq=8,
                                    decode_batch=1, decode_context=8)


def planner_op_count(cfg: SmallTransformerConfig, batch: int, q_len: int, kv_len: int) -> int:
    """Operations in the planner's op list for one forward pass (``layer_ops`` per layer + ``head_ops``)."""
    from xpuplan.perf.ops import head_ops, layer_ops

    arch = cfg.to_arch()
    return cfg.layers * len(layer_ops(arch, batch=batch, q_len=q_len, kv_len=kv_len)) + len(head_ops(arch, rows=batch))


def _tiny_decode(backend: Backend) -> Callable[[], None]:
    """One decode step of :data:`TINY_MODEL` under ``torch.inference_mode``: the work the dispatch cases time."""
    import torch

    cfg = TINY_MODEL
    dev = backend.torch_device
    model = build_model(cfg, dev, torch.float32).eval()
    shape = (1, cfg.heads, cfg.decode_context + 1, cfg.head_dim)
    caches = [(torch.randn(shape, device=dev), torch.randn(shape, device=dev)) for _ in range(cfg.layers)]
    token = torch.randint(0, cfg.vocab, (1, 1), device=dev)

    @torch.inference_mode()
    def step() -> None:
        model(token, caches, cfg.decode_context)

    return step


def _dispatch_record(kind: str, name: str, step_s: float, timing: Any) -> Record:
    """A dispatch measurement: the tiny step's time per operation of the planner's op list."""
    cfg = TINY_MODEL
    n_ops = planner_op_count(cfg, 1, 1, cfg.decode_context + 1)
    return Record(kind=kind, name=name, dtype="fp32", metric="time_per_op_us", value=step_s / n_ops / units.US,
                  unit="µs", time_s=step_s / n_ops, params={"model": cfg.to_dict(), "planner_ops": n_ops,
                                                             "step_time_s": step_s, **timing.to_dict()})


def dispatch_case(backend: Backend, plan: TimingPlan) -> BenchCase:
    name = "dispatch tiny-model decode step"

    def run() -> Record | None:
        t = time_fn(_tiny_decode(backend), backend.synchronize, plan)
        return _dispatch_record("dispatch", name, t.best_s, t)

    return BenchCase("dispatch", name, run)


def graph_dispatch_case(backend: Backend, plan: TimingPlan) -> BenchCase:
    """The tiny-model decode step of :func:`dispatch_case` captured once as a CUDA (or HIP) graph and replayed:
    the host issues one launch for the whole step, so the time per planner operation is what each kernel costs
    on the device itself (launch latency, prologue, tail) -- the per-kernel overhead of graph-captured serving
    engines and of kernels the host queues ahead of the device. The eager figure of :func:`dispatch_case` is the
    host's issue time per operation instead. Record kind ``dispatch_graph``; skipped where graphs do not exist
    (CPU, NPU and MLU backends)."""
    name = "dispatch tiny-model decode step (graph replay)"

    def run() -> Record | None:
        import torch

        if backend.kind not in ("cuda", "rocm") or not hasattr(torch.cuda, "CUDAGraph"):
            return None
        step = _tiny_decode(backend)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm up off the capture stream, as graph capture requires
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                step()
        except RuntimeError:  # a build or driver that cannot capture: nothing measured
            return None
        t = time_fn(graph.replay, backend.synchronize, plan)
        return _dispatch_record("dispatch_graph", name, t.best_s, t)

    return BenchCase("dispatch", name, run)


def model_cases(backend: Backend, cfg: SmallTransformerConfig, dtype: str, plan: TimingPlan) -> list[BenchCase]:
    graphs = [graph_dispatch_case(backend, plan)] if backend.kind in ("cuda", "rocm") else []
    return [dispatch_case(backend, plan), *graphs, decode_step_case(backend, cfg, dtype, plan),
            train_step_case(backend, cfg, dtype, plan)]
