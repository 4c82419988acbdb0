"""A transformer layer's parameter tensors, module by module, per tensor rank (no I/O): what DeepSpeed gathers
sub-module by sub-module (simcore/cost/sharding.py) and what Megatron-Core buckets parameter by parameter for the
data-parallel reduction (simcore/cost/comm/grad_buckets.py)."""

from __future__ import annotations

from simcore.domain.model import LayerType, ModelShape

__all__ = ["layer_submodules"]


def layer_submodules(model: ModelShape, layer: LayerType, tp: int) -> tuple[tuple[tuple[int, ...], int], ...]:
    """One transformer layer's sub-modules with parameters, in forward order: each as its parameters' elements per
    tensor rank and the elements of its matrices (its compute weight). Megatron's modules, which
    Megatron-DeepSpeed's GPT uses: the input norm, the fused QKV projection, the attention's output projection,
    a norm, a decoder's cross-attention (Q, KV, output projection, norm), the MLP's two Linears; weight then
    bias. The elements add up to `ModelShape.parameters_per_layer`."""
    h, d, heads = model.hidden_size, model.head_dim, model.num_attention_heads
    qkv = (heads + 2 * model.num_kv_heads) * d
    mlp_in = (2 if model.gated_mlp else 1) * model.ffn_hidden_size
    norm: tuple[tuple[int, ...], int] = ((h // tp, h // tp), 0)
    out_proj = heads * d * h // tp
    mods: list[tuple[tuple[int, ...], int]] = [
        norm, ((h * qkv // tp, qkv // tp), h * qkv // tp), ((out_proj, h // tp), out_proj), norm]
    if layer.cross_seq:  # T5's decoder: cross-attention (Q, KV, output projection), its norm
        q, kv = h * heads * d // tp, h * 2 * model.num_kv_heads * d // tp
        mods += [((q, kv, qkv // tp), q + kv), ((heads * d * h // tp, h // tp), heads * d * h // tp), norm]
    extra = model.ffn_hidden_size if model.gated_mlp else 0  # the gate's bias is not counted by the model
    fc1, fc2 = h * mlp_in // tp, model.ffn_hidden_size * h // tp
    mods += [((fc1, (mlp_in - extra) // tp), fc1), ((fc2, h // tp), fc2)]
    return tuple(mods)
