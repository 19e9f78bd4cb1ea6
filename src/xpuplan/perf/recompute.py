"""What selective recomputation re-runs, module by module (Megatron-Core ``--recompute-modules``).

``recompute: selective`` keeps a layer's activations except those of the modules it re-runs in the backward.
Megatron-Core names the modules (``recompute_modules`` in megatron/core/transformer/transformer_config.py,
default ``["core_attn"]``); its performance recipes choose them per model, e.g. ``["mla_up_proj"]`` for
DeepSeek-V3, ``["layernorm", "moe_act"]`` for Qwen3 MoE and GPT-OSS, ``["mla_up_proj", "mlp"]`` (Megatron-Bridge
``scripts/performance/configs``, v0.3.0-v0.5.1). The planner's default selective set is the attention core, and for
MLA models also the up-projections (:func:`selective_modules`), as DeepSeek-V3's report recomputes them
(arXiv 2412.19437, sec. 3.3.3). This module resolves the set and checks it against the model; what each module
saves and costs is in :func:`xpuplan.perf.memory.activation_bytes_per_layer` and
:func:`xpuplan.train.compute.stage_compute`.
"""

from __future__ import annotations

from collections.abc import Iterable

from xpuplan.errors import UserInputError
from xpuplan.models.arch import ModelArch
from xpuplan.perf.params import params_mlp_dense, params_moe_layer
from xpuplan.workload.vocabulary import OFFLOAD_MODULES, RECOMPUTE_MODULES


def default_selective_modules(model: ModelArch) -> frozenset[str]:
    """The planner's selective set when the job names none: the attention core; MLA models also their
    up-projections from the kept latents."""
    return frozenset({"core_attn", "mla_up_proj"} if model.mla is not None else {"core_attn"})


def stack_selective_modules(model: ModelArch, names: Iterable[str] | None,
                            field: str = "selective_modules") -> tuple[str, ...] | None:
    """A training stack's own selective set (``TrainingStack.selective_modules``) for ``model``: the modules of it
    the model has, in Megatron-Core's order (None: the stack has none, or none applies, so the planner's
    :func:`default_selective_modules`). A name outside ``RECOMPUTE_MODULES`` -> UserInputError naming ``field``."""
    if names is None:
        return None
    wanted = list(names)
    unknown = [n for n in wanted if n not in RECOMPUTE_MODULES]
    if unknown:
        raise UserInputError(f"unknown module(s) {', '.join(map(repr, unknown))}; expected "
                             f"{', '.join(RECOMPUTE_MODULES)}", field=field)
    kept = tuple(m for m in RECOMPUTE_MODULES if m in wanted and recompute_modules_problem(model, (m,)) is None)
    return kept or None


def selective_modules(model: ModelArch, modules: Iterable[str] | None) -> frozenset[str]:
    """The modules selective recomputation re-runs: ``modules`` when given, else :func:`default_selective_modules`."""
    return default_selective_modules(model) if modules is None else frozenset(modules)


def ordered_selective_modules(model: ModelArch, modules: Iterable[str] | None) -> list[str]:
    """:func:`selective_modules` in Megatron-Core's order (``RECOMPUTE_MODULES``), as a launch command or a result
    lists them."""
    mods = selective_modules(model, modules)
    return [m for m in RECOMPUTE_MODULES if m in mods]


def ordered_offload_modules(modules: Iterable[str]) -> list[str]:
    """Fine-grained activation offloading's modules (the job's ``offload_modules``) in Megatron-Core's order
    (``OFFLOAD_MODULES``), as a launch command or a result lists them."""
    mods = frozenset(modules)
    return [m for m in OFFLOAD_MODULES if m in mods]


def recompute_modules_problem(model: ModelArch, modules: Iterable[str] | None) -> str | None:
    """Why ``modules`` cannot be recomputed for ``model`` (a module it does not have), or None. Megatron-Core
    refuses ``mla_up_proj`` without MLA; the others would silently do nothing, which a plan should not claim."""
    if modules is None:
        return None
    mods = list(modules)
    unknown = [m for m in mods if m not in RECOMPUTE_MODULES]
    if unknown:
        return f"unknown module(s) {', '.join(map(repr, unknown))}; expected {', '.join(RECOMPUTE_MODULES)}"
    if len(set(mods)) != len(mods):
        return f"a module is named twice: {', '.join(mods)}"
    name = model.name or "the model"
    if "mla_up_proj" in mods and model.mla is None:
        return f"'mla_up_proj' needs multi-latent attention; {name} has none"
    moe_mods = [m for m in mods if m in ("moe", "moe_act", "shared_experts")]
    if moe_mods and (model.moe is None or not model.n_moe_layers):
        return f"{', '.join(map(repr, moe_mods))} re-run(s) part of a MoE layer; {name} has none"
    if "shared_experts" in mods and model.moe is not None and not model.moe.n_shared_experts:
        return f"'shared_experts' names shared experts; {name} has none"
    if "mlp" in mods and model.n_dense_mlp_layers == 0:
        return f"'mlp' is the dense MLP block; every layer of {name} is MoE (use 'moe' or 'moe_act')"
    return None


def selective_forward_flops_per_token(model: ModelArch, modules: Iterable[str], attention_flops: float) -> float:
    """Forward FLOPs per token that selective recomputation of ``modules`` re-runs, over all layers (hardware
    FLOPs; ``attention_flops``: the attention core's forward FLOPs per token, the caller's convention). Norms and
    activations are elementwise and count no FLOPs here."""
    mods = frozenset(modules)
    out = attention_flops if "core_attn" in mods else 0.0
    if "mla_up_proj" in mods and model.mla is not None:
        m = model.mla
        per_layer = (m.q_lora_rank or 0) * model.n_heads * model.qk_head_dim
        per_layer += m.kv_lora_rank * model.n_heads * (m.qk_nope_head_dim + model.v_head_dim)
        out += 2.0 * model.n_layers * per_layer
    if "mlp" in mods:
        out += 2.0 * model.n_dense_mlp_layers * params_mlp_dense(model)
    if model.moe is not None and model.n_moe_layers:
        if "moe" in mods:
            out += 2.0 * model.n_moe_layers * params_moe_layer(model)[1]
        elif "shared_experts" in mods and model.moe.n_shared_experts:
            out += 2.0 * model.n_moe_layers * model.moe.n_shared_experts * params_mlp_dense(
                model, ffn_dim=model.moe.shared_ffn)
    return out
