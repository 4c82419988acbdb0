"""Mixture-of-experts model presets, as the contract's ``model`` fields (merged into presets.MODEL_PRESETS).

Plain data, each shape from its published configuration (``MOE_PRESET_SOURCES``). Every one is a Llama-style
decoder (SwiGLU experts, RoPE, grouped-query attention, untied embeddings, flash attention) at the sequence
length its Megatron-Bridge / NeMo pretraining recipe uses (4096). Not expressible, and approximated:
- GPT-OSS alternates 128-token sliding-window attention with full attention and adds learned attention sinks; every
  layer is simulated with full causal attention (an upper bound on half the layers' attention-core time), and its
  clamped SwiGLU and biases as a plain SwiGLU.
- DeepSeek-V3's multi-token prediction module (one extra layer) and its node-limited routing (at most 4 nodes per
  token) are not simulated: routing is balanced over all expert ranks.
"""

from __future__ import annotations


def _moe(num_layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int, experts: int, top_k: int,
         expert_ffn: int, **extra: object) -> dict[str, object]:
    return {
        "architecture": "decoder_only", "num_layers": num_layers, "hidden_size": hidden,
        "num_attention_heads": heads, "num_kv_heads": kv_heads, "ffn_hidden_size": ffn, "gated_mlp": True,
        "activation": "swiglu", "vocab_size": vocab, "seq_length": 4096, "tied_embeddings": False,
        "attention": "flash", "num_experts": experts, "moe_top_k": top_k, "moe_ffn_hidden_size": expert_ffn,
        **extra,
    }


MOE_MODEL_PRESETS: dict[str, dict[str, object]] = {
    "mixtral-8x7b": _moe(32, 4096, 32, 8, 14336, 32000, 8, 2, 14336),
    "mixtral-8x22b": _moe(56, 6144, 48, 8, 16384, 32768, 8, 2, 16384),
    "qwen3-30b-a3b": _moe(48, 2048, 32, 4, 6144, 151936, 128, 8, 768, head_dim=128),
    "qwen3-235b-a22b": _moe(94, 4096, 64, 4, 12288, 151936, 128, 8, 1536, head_dim=128),
    "deepseek-v3": _moe(61, 7168, 128, 128, 18432, 129280, 256, 8, 2048, head_dim=128, num_shared_experts=1,
                        first_dense_layers=3, attention_variant="mla", q_lora_rank=1536, kv_lora_rank=512,
                        qk_rope_head_dim=64, v_head_dim=128),
    "gpt-oss-120b": _moe(36, 2880, 64, 8, 2880, 201088, 128, 4, 2880, head_dim=64),
}

MOE_PRESET_SOURCES: dict[str, str] = {
    "mixtral-8x7b": "mistralai/Mixtral-8x7B-v0.1 config.json (32 layers, 4096, 32 heads, 8 KV, 14336, 8 experts "
                    "top-2, vocab 32000)",
    "mixtral-8x22b": "mistralai/Mixtral-8x22B-v0.1 config.json (56 layers, 6144, 48 heads, 8 KV, 16384, 8 experts "
                     "top-2, vocab 32768)",
    "qwen3-30b-a3b": "NVIDIA/NeMo qwen3.py @8cfedd7203 Qwen3Config30B_A3B (48 layers, 2048, 32 heads of 128, 4 KV, "
                     "128 experts top-8 of 768, vocab 151936)",
    "qwen3-235b-a22b": "Qwen/Qwen3-235B-A22B config.json (94 layers, 4096, 64 heads of 128, 4 KV, 128 experts top-8 "
                       "of 1536, vocab 151936)",
    "deepseek-v3": "DeepSeek-V3 technical report §4.2 and config.json (61 layers, first 3 dense of 18432; 7168; 128 "
                   "heads; MLA q 1536, kv 512, rope 64, nope 128, v 128; 256 routed + 1 shared experts of 2048, "
                   "top-8; vocab 129280)",
    "gpt-oss-120b": "NVIDIA/NeMo gpt_oss.py @8cfedd7203 GPTOSSConfig120B (36 layers, 2880, 64 heads of 64, 8 KV, "
                    "128 experts top-4 of 2880, vocab 201088)",
}
