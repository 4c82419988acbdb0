"""The mixture-of-experts rows of the modern reference as model fields (simcore/calibration/modern.py builds the
rest of their requests).

Every MoE row's source gives its shape (layers, hidden, heads, query groups, head dim, experts, top-k, expert FFN,
vocabulary) and its published config fills what the row leaves out, the same way for every row:
- the experts are SwiGLU MLPs (Qwen3, GPT-OSS, Mixtral) unless the row names another activation; Grok-1's are
  GeGLU (its released code: gelu-gated experts of three matrices) [the row does not say; GeGLU is three matrices
  as SwiGLU, so the cost is the same];
- embeddings untied, flash attention, every layer MoE unless the row says how many are dense;
- the runs force balanced routing and are dropless (the pages' footnotes), so load imbalance 1 and no capacity.
NeMo AutoModel (the `automodel` rows): PyTorch FSDP2 (ZeRO 3 over data parallelism) with EP, TE kernels and
DeepEP's dispatch; its benchmark config (examples/benchmarking/configs/qwen3_moe_30b_te_deepep.yaml at
24b17058d, 2025-09-26) turns activation checkpointing off: no recomputation.
"""

from __future__ import annotations

from typing import Any


def moe_model_fields(m: dict[str, Any]) -> dict[str, Any]:
    """Contract model fields of a MoE row's model."""
    arch = str(m.get("arch", "")).lower()
    if not m.get("experts") or not m.get("top_k") or not m.get("expert_ffn"):
        raise ValueError("the row does not give its experts (count, top-k and FFN size)")
    fields: dict[str, Any] = {
        "architecture": "decoder_only", "num_layers": m["layers"], "hidden_size": m["hidden"],
        "num_attention_heads": m["heads"], "num_kv_heads": m.get("kv_heads", m["heads"]),
        "ffn_hidden_size": m.get("ffn") or m["expert_ffn"], "vocab_size": m["vocab"], "seq_length": m["seq_len"],
        "attention": "flash", "tied_embeddings": False,
        "activation": "geglu" if "gelu" in arch else "swiglu",
        "num_experts": m["experts"], "moe_top_k": m["top_k"], "moe_ffn_hidden_size": m["expert_ffn"],
    }
    if m.get("head_dim"):
        fields["head_dim"] = m["head_dim"]
    return fields

# Megatron-Bridge 25.11's pages print each run's micro batch (MBS) and virtual pipeline (VP) columns; the run is its
# performance recipe's preset, scripts/performance/configs/<model>/workload_base_configs.py at v0.2.0 (7af9601c9,
# the 25.11 release): WorkloadBaseConfig's micro_batch_size (default 1, utils/utils.py:43) and
# virtual_pipeline_model_parallel_size, which set_workload_base_configs (utils/helpers.py:55-66) puts in the run's
# config. Two H100 rows of the page do not print their preset's:
# - GPT OSS 120B (BASE_GPT_OSS_120B_CONFIG, gpt_oss/workload_base_configs.py:22-28, 47-51: MBS 1, PP 4, EP 8,
#   GBS 512) prints MBS 4 and GA 2, the B200 row's pair: GA 2 is not GBS / (MBS x DP) = 512 / (4 x 16) for its own
#   PP 4 (it is 512 / (4 x 64), the B200 row's PP 1); 26.02's page prints MBS 1 for this preset; at MBS 4 its
#   stages need about 125 GiB (this simulator), over H100's 80.
# - Qwen3 30B A3B FP8-CS (QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG, qwen3/workload_base_configs.py:233-239: MBS 1,
#   PP 2, VP 12, EP 8, GBS 512) prints 25.09's row for the same layout (MBS 2, VP 24, GA 32, from that release's
#   qwen3_30b_a3b_llm_pretrain.yaml, whose own `vp` is 12); 26.02's page prints MBS 1 and VP 12 for the preset.
# The page's other 25.11 rows print their preset's micro batch (Llama3 8B: 2 on GB200 and B200, 1 on H100).
# Keyed by (source, model name, GPU, precision as printed): (micro batch, virtual stages per pipeline rank).
RECIPE_BATCHING: dict[tuple[str, str, str, str], tuple[int, int]] = {
    ("mb2511", "llama3-8b", "gb200-b200-186gb", "FP8-CS"): (2, 1),
    ("mb2511", "llama3-8b", "gb200-b200-186gb", "FP8-MX"): (2, 1),
    ("mb2511", "llama3-8b", "b200-180gb", "FP8-CS"): (2, 1),
    ("mb2511", "llama3-8b", "b200-180gb", "FP8-MX"): (2, 1),
    ("mb2511", "llama3-8b", "h100-80gb-sxm", "FP8-CS"): (1, 1),
    ("mb2511", "gpt-oss-120b", "h100-80gb-sxm", "BF16"): (1, 1),
    ("mb2511", "qwen3-30b-a3b", "h100-80gb-sxm", "FP8-CS"): (1, 12),
}


def recipe_batching(source: str, case: dict[str, Any]) -> tuple[int, int] | None:
    """(micro batch, virtual stages) of the recipe preset a Megatron-Bridge row ran (RECIPE_BATCHING), or None
    where the table has no preset for its source, model, GPU and precision (the page's columns then stand)."""
    key = (source, str(case["model"].get("name")), str(case["cluster"]["gpu"]), str(case["layout"].get("precision")))
    return RECIPE_BATCHING.get(key)


# The rows MOE_HOST_KERNEL_S (simcore/cost/moe.py) is fitted on (bench/fit_moe.py): the Megatron-Bridge 25.11
# H100 MoE rows. The other MoE rows judge it.
# Both rows are readings of one software state more than of their layouts: Megatron-Core 0.15's alltoall token
# dispatcher, dropless, in eager mode (no CUDA graph in either H100 preset) with 16 local experts a rank.
# - Qwen3-30B-A3B FP8-CS (5,275 tokens/s/GPU): the same published layout (16 H100s, PP 2, EP 8) reads 10,494 in
#   25.09 (token drop with capacity padding: no host synchronisation), 5,113 in 26.02 (alltoall, preset
#   unchanged but GBS 1024) and 9,058 in 26.02.01, whose only preset change is the dispatcher, alltoall to
#   DeepEP's flex one (qwen/qwen3_workload_base_configs.py, v0.3.0 -> v0.3.1): 1.77x a token at one layout
#   (NVIDIA-NeMo/Megatron-Bridge docs/performance-summary-archive.md @4ab94dfad). The maintainers file the 25.11
#   figure as a 2x regression of dropless against token drop (NVIDIA-NeMo/Megatron-Bridge issue #1998) and
#   disabled moe_a2a_overlap, which this preset turns on, elsewhere for its CPU overhead (pull request #1760).
#   The published pair at one layout puts the alltoall path at 51.3 s a step against DeepEP's 28.9 s: 7.3 ms
#   more a MoE layer and microbatch (128 microbatches of 24 layers a GPU), a cost that does not shrink with the
#   GPU's speed (B200's 25.11 row at microbatch 1: 9,299 tokens/s/GPU, against 18,066 with token drop in 25.09).
# - GPT-OSS-120B BF16 (5,630): the same dispatcher, dropless and eager, 16 local experts a rank.
# A host-side term that large (the host's time to issue a layer, serialised with the GPU by the dispatcher's
# synchronisation) makes the layer 2-3x faster a token at microbatch 4 than at 1, which the layer checks of
# tests/simcore/cost/compute/test_moe_kernel_physics.py (at most 1.5x) rule out; it is not modelled.
MOE_CALIBRATION_ROWS = ("mb2511-qwen3-30b-a3b-h100-16gpu-fp8cs", "mb2511-gpt-oss-120b-h100-64gpu-bf16")
