"""The words jobs, plans and results share, defined once (``Literal`` types and their value tuples).

Every planner, perf function and request model imports these; nothing redefines them.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

#: Activation recomputation: none; selective (the attention core, Korthikanti et al. 2022); full
#: (the whole layer's forward again in the backward); offload (full recomputation whose kept layer
#: inputs wait in host memory instead of device memory: MaxText remat policies that offload
#: ``decoder_layer_input``, activation offloading; the copies run under the layer's compute);
#: layer_offload (no recomputation; every activation of as many layers as the plan needs to fit waits
#: in host memory between the layer's forward and backward: Megatron-Core --cpu-offloading-num-layers); partial
#: (full recomputation of as few of each pipeline stage's layers as let the plan fit, the others keeping every
#: activation: Megatron-Core --recompute-granularity full --recompute-method block --recompute-num-layers N,
#: torchtitan's layer-level checkpointing of every N-th block).
Recompute = Literal["none", "selective", "full", "offload", "layer_offload", "partial"]
RECOMPUTE_MODES: Final[tuple[str, ...]] = get_args(Recompute)

#: What selective recomputation (``recompute: selective``) re-runs in the backward, by Megatron-Core's module names
#: (``--recompute-modules``; megatron/core/transformer/transformer_config.py ``recompute_modules``): ``core_attn`` the
#: attention core; ``mla_up_proj`` MLA's query and key/value up-projections from the kept latents; ``layernorm`` the
#: two pre-norms; ``mlp`` the dense MLP block; ``moe`` the whole MoE block (router, dispatch and combine, experts);
#: ``moe_act`` the routed experts' activation function; ``shared_experts`` the shared experts of a MoE layer.
RecomputeModule = Literal["core_attn", "mla_up_proj", "layernorm", "mlp", "moe", "moe_act", "shared_experts"]
RECOMPUTE_MODULES: Final[tuple[str, ...]] = get_args(RecomputeModule)

#: Whose inputs fine-grained activation offloading moves to host memory between a layer's forward and its backward,
#: by Megatron-Core's names (``--fine-grained-activation-offloading --offload-modules``;
#: megatron/core/transformer/transformer_config.py ``offload_modules``): ``attn_norm`` / ``mlp_norm`` the two
#: pre-norms' inputs; ``qkv_linear`` the QKV projection's input; ``core_attn`` the attention core's (q, k, v);
#: ``attn_proj`` the output projection's (the attention output; only with ``core_attn``, whose backward needs it);
#: ``expert_fc1`` the routed experts' FC1 input (the dispatched copies); ``moe_act`` the experts' activation input
#: (FC1's output).
OffloadModule = Literal["attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm", "expert_fc1", "moe_act"]
OFFLOAD_MODULES: Final[tuple[str, ...]] = get_args(OffloadModule)

#: Training GEMM precision: bf16/fp16 mixed precision, fp8 (Transformer Engine style, bf16 elsewhere), or
#: fp4 (block-scaled NVFP4 GEMMs, NVIDIA's recipe: a share of the layers stays bf16; see train.compute).
TrainPrecision = Literal["bf16", "fp16", "fp8", "fp4"]
TRAIN_PRECISIONS: Final[tuple[str, ...]] = get_args(TrainPrecision)

#: Fine-tuning method: full training, or LoRA/QLoRA adapters on a frozen base.
Method = Literal["full", "lora", "qlora"]
METHODS: Final[tuple[str, ...]] = get_args(Method)

#: Weight matrices of a block that LoRA/QLoRA adapts: the attention's query, key, value and output projections and
#: the MLP's gate, up and down projections (PEFT's ``target_modules``; Megatron-Bridge's ``linear_qkv``,
#: ``linear_proj``, ``linear_fc1``, ``linear_fc2`` are q+k+v, o, gate+up and down).
LoraTarget = Literal["q", "k", "v", "o", "gate", "up", "down"]
LORA_TARGETS: Final[tuple[str, ...]] = get_args(LoraTarget)

#: Elementwise kernel style: fused (Megatron-LM/Transformer Engine, torch.compile) or eager PyTorch.
Kernels = Literal["fused", "eager"]
KERNELS: Final[tuple[str, ...]] = get_args(Kernels)

#: Serving batching: continuous (iteration-level scheduling, vLLM/SGLang/TRT-LLM in-flight) or static
#: (a batch runs to completion before the next starts).
BatchingMode = Literal["continuous", "static"]
BATCHING_MODES: Final[tuple[str, ...]] = get_args(BatchingMode)
