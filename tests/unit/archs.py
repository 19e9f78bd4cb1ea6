"""Hand-built architectures for formula tests (independent of the preset files)."""

from xpuplan.models.arch import MLAConfig, ModelArch, MoEConfig

LLAMA3_70B = ModelArch(id="t-llama3-70b", name="Llama 3 70B shape", n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8,
                       ffn_dim=28672, vocab_size=128256, mlp="gated", max_seq_len=8192)
GPT3 = ModelArch(id="t-gpt3", name="GPT-3 175B shape", n_layers=96, d_model=12288, n_heads=96, ffn_dim=49152,
                 vocab_size=50257, mlp="classic", norm="layernorm", tied_embeddings=True, qkv_bias=True,
                 out_bias=True, mlp_bias=True, position="learned", max_seq_len=2048, activation="gelu")
DEEPSEEK_V3 = ModelArch(
    id="t-dsv3", name="DeepSeek-V3 shape", n_layers=61, d_model=7168, n_heads=128, ffn_dim=18432, vocab_size=129280,
    mlp="gated",
    moe=MoEConfig(n_routed_experts=256, top_k=8, expert_ffn_dim=2048, n_shared_experts=1, n_dense_layers=3, router_bias=True),
    mla=MLAConfig(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
    mtp_layers=1,
)
MIXTRAL = ModelArch(id="t-mixtral", name="Mixtral 8x7B shape", n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8,
                    ffn_dim=14336, vocab_size=32000, mlp="gated",
                    moe=MoEConfig(n_routed_experts=8, top_k=2, expert_ffn_dim=14336))
BERT_BASE = ModelArch(id="t-bert", name="BERT-base shape", type="encoder", n_layers=12, d_model=768, n_heads=12,
                      ffn_dim=3072, vocab_size=30522, mlp="classic", norm="layernorm", qkv_bias=True, out_bias=True,
                      mlp_bias=True, position="learned", max_seq_len=512, type_vocab_size=2, pooler=True,
                      tied_embeddings=True, activation="gelu")
# Megatron's classic GPT block: MHA, 4h GeLU MLP, for Korthikanti's activation formulas
MEGATRON_BLOCK = ModelArch(id="t-meg", name="Megatron block", n_layers=1, d_model=1024, n_heads=16, ffn_dim=4096,
                           vocab_size=1000, mlp="classic", norm="layernorm")
