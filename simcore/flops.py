"""Model FLOPs (the contract's definition) and the hardware FLOPs that recomputation adds.

Model FLOPs = 3 x the forward FLOPs of every matrix product (QKV, attention scores and values, attention
output, MLP, logits) for the global batch, counted from the shape with no recomputation and the full s x s
attention (as the papers count it). For a GPT with ffn = 4h this is Narayanan et al.'s
72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)); full recomputation adds one more forward of every layer (their 96·...
hardware count, in which the logits are not recomputed).
"""

from __future__ import annotations

from simcore.layout import Layout, Recompute
from simcore.model import ModelShape


def layer_forward_matmul_flops(model: ModelShape) -> float:
    """Forward matrix-product FLOPs of one transformer layer for one sample."""
    s, h, d, f = model.seq_length, model.hidden_size, model.head_dim, model.ffn_hidden_size
    a, g = model.num_attention_heads, model.num_kv_heads
    up = 2 if model.gated_mlp else 1
    projections = 2 * s * h * (a + 2 * g) * d + 2 * s * a * d * h
    attention = attention_core_flops(model)
    mlp = 2 * s * h * f * up + 2 * s * f * h
    return float(projections + attention + mlp)


def logits_forward_flops(model: ModelShape) -> float:
    return 2.0 * model.seq_length * model.hidden_size * model.vocab_size


def model_flops_per_iteration(model: ModelShape, layout: Layout) -> float:
    per_sample = model.num_layers * layer_forward_matmul_flops(model) + logits_forward_flops(model)
    return 3.0 * per_sample * layout.global_batch_size


def attention_core_flops(model: ModelShape) -> float:
    """Forward FLOPs of the attention scores and values of one layer for one sample."""
    return 4.0 * model.seq_length * model.seq_length * model.num_attention_heads * model.head_dim


def hardware_flops_per_iteration(model: ModelShape, layout: Layout) -> float:
    """Model FLOPs plus the forward work that recomputation repeats (all of each layer with full
    recomputation, the attention core with selective)."""
    extra = 0.0
    if layout.recompute is Recompute.FULL:
        extra = model.num_layers * layer_forward_matmul_flops(model) * layout.global_batch_size
    elif layout.recompute is Recompute.SELECTIVE:
        extra = model.num_layers * attention_core_flops(model) * layout.global_batch_size
    return model_flops_per_iteration(model, layout) + extra
