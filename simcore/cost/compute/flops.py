"""Model FLOPs (the contract's definition) and the hardware FLOPs that recomputation adds.

Model FLOPs = 3 x the forward FLOPs of every matrix product (QKV, attention scores and values, attention
output, MLP, logits) for the global batch, counted from the shape with no recomputation and the full s x s
attention (as the papers count it). For a GPT with ffn = 4h this is Narayanan et al.'s
72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)); full recomputation adds one more forward of every layer (their 96·...
hardware count, in which the logits are not recomputed).

Encoder-decoder (T5), per sample, with s_e encoder and s_d decoder tokens, a heads of d, g key/value heads:
- an encoder layer is a GPT layer on s_e tokens with bidirectional attention (the same count: attention is
  counted in full either way);
- a decoder layer is a GPT layer on s_d tokens plus its cross-attention: the query and output projections on
  s_d tokens (2·2·s_d·h·a·d), the key and value projections of the encoder output on s_e tokens
  (2·s_e·h·2g·d), and scores and values of s_d queries over s_e keys (4·s_d·s_e·a·d);
- the logits cover the s_d target tokens only (2·s_d·h·V).
"""

from __future__ import annotations

from simcore.domain.layout import Layout, Recompute
from simcore.domain.model import LayerType, ModelShape


def layer_forward_matmul_flops(model: ModelShape, layer: LayerType | None = None) -> float:
    """Forward matrix-product FLOPs of one transformer layer for one sample."""
    layer = layer or model.main_layer()
    s, h, d, f = layer.seq, model.hidden_size, model.head_dim, model.ffn_hidden_size
    a, g = model.num_attention_heads, model.num_kv_heads
    up = 2 if model.gated_mlp else 1
    projections = 2 * s * h * (a + 2 * g) * d + 2 * s * a * d * h
    if model.mla is not None:
        m = model.mla
        qk = a * (d + m.qk_rope_head_dim)
        q = 2 * s * (h * m.q_lora_rank + m.q_lora_rank * qk) if m.q_lora_rank else 2 * s * h * qk
        kv = 2 * s * (h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * a * (d + m.v_head_dim))
        projections = q + kv + 2 * s * a * m.v_head_dim * h
    mlp = 2 * s * h * f * up + 2 * s * f * h
    if layer.moe and model.moe is not None:
        # the router, the top_k routed experts each token uses (dropless) and the shared experts
        width = (model.moe.top_k + model.moe.num_shared_experts) * model.moe.ffn_hidden_size
        mlp = 2 * s * h * model.moe.num_experts + 2 * s * h * width * up + 2 * s * width * h
    cross = 0
    if layer.cross_seq:
        cross = 2 * 2 * s * h * a * d + 2 * layer.cross_seq * h * 2 * g * d
    return float(projections + attention_core_flops(model, layer) + mlp + cross)


def logits_forward_flops(model: ModelShape) -> float:
    return 2.0 * model.output_seq_length * model.hidden_size * model.vocab_size


def mtp_forward_flops(model: ModelShape) -> float:
    """Forward matrix-product FLOPs of the multi-token prediction depths for one sample: each its layer, its
    2h -> h projection and its logits (Megatron-LM counts the same: num_floating_point_operations in
    megatron/training/training.py)."""
    if not model.mtp_layers:
        return 0.0
    s, h = model.seq_length, model.hidden_size
    per_depth = layer_forward_matmul_flops(model, model.mtp_layer()) + 2 * s * 2 * h * h + logits_forward_flops(model)
    return model.mtp_layers * per_depth


def model_flops_per_iteration(model: ModelShape, layout: Layout) -> float:
    layers = sum(count * layer_forward_matmul_flops(model, layer) for layer, count in model.layer_stacks())
    return 3.0 * (layers + logits_forward_flops(model) + mtp_forward_flops(model)) * layout.global_batch_size


def attention_core_flops(model: ModelShape, layer: LayerType | None = None) -> float:
    """Forward FLOPs of the attention scores and values of one layer for one sample (cross-attention included)."""
    layer = layer or model.main_layer()
    per_pair = 4.0 * model.num_attention_heads * model.head_dim
    if model.mla is not None:  # scores over nope + rope dims, values over v_head_dim
        per_pair = 2.0 * model.num_attention_heads * (model.head_dim + model.mla.qk_rope_head_dim
                                                      + model.mla.v_head_dim)
    return per_pair * layer.seq * (layer.seq + layer.cross_seq)


def hardware_flops_per_iteration(model: ModelShape, layout: Layout) -> float:
    """Model FLOPs plus the forward work that recomputation repeats (all of each layer with full
    recomputation, the attention core with selective)."""
    stacks = (*model.layer_stacks(), (model.mtp_layer(), model.mtp_layers))  # the MTP layers are recomputed too
    extra = 0.0
    if layout.recompute is Recompute.FULL:
        extra = sum(count * layer_forward_matmul_flops(model, layer) for layer, count in stacks)
    elif layout.recompute is Recompute.SELECTIVE:
        extra = sum(count * attention_core_flops(model, layer) for layer, count in stacks)
    return model_flops_per_iteration(model, layout) + extra * layout.global_batch_size
