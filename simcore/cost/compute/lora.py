"""The kernels of a LoRA fine-tuning step (simcore/domain/lora.py): the base projections frozen, the adapters'
GEMMs beside the projections they adapt.

A frozen projection keeps its forward GEMM and, in backward, only its input gradient dX = dY W^T (`Op.frozen`:
the forward's FLOPs, one product, no weight gradient and no fp32 main_grad accumulation). Each adapter adds, per
tensor rank (Megatron-Core / NeMo's ParallelLinearAdapter):
- beside a column-parallel projection (qkv, mlp_up; input x of h features on every rank): A = x (h x r/t), its
  r/t outputs all-gathered (r elements a token: left out), then B = (x A) (r x out/t);
- beside a row-parallel one (attention_output, mlp_down; input split over the ranks): A = x (in/t x r), its r
  outputs all-reduced (left out as above), then B = (x A) (r x h/t).
So the adapters cost 2 tokens r (in + out) / t FLOPs forward and twice that backward (input and weight gradients),
both GEMMs 16-bit (the adapters stay in BF16 when the base runs FP8). With dropout on the adapter's input
(PEFT's lora_dropout) a memory-bound kernel reads x and writes the dropped-out copy and its 1-byte mask
(5 bytes an element; backward reads the gradient and the mask and writes dx: the same 5).

Per chunk (`lora_chunks`): the adapters are held beside the base weights, and only they have gradients, optimizer
states and data-parallel traffic (ChunkCost.frozen_parameters); the embedding's backward (its gradient rows) does
not run, and the output layer's GEMM is frozen like the projections.
"""

from __future__ import annotations

from dataclasses import replace

from simcore.cost.chunk import ChunkCost
from simcore.cost.compute.kernels import Op, OpKind, gemm_op, memory_op
from simcore.domain.lora import KERNEL_OF, Lora
from simcore.domain.model import ModelShape

__all__ = ["ADAPTER_PREFIXES", "adapted_kernels", "frozen_ops", "lora_chunks", "lora_layer_ops", "trained"]

ADAPTER_PREFIXES = ("lora_a_", "lora_b_")
_DROPOUT_BYTES = 5  # 16-bit in, 16-bit out, a 1-byte mask


def frozen_ops(ops: tuple[Op, ...]) -> tuple[Op, ...]:
    """The kernels with every GEMM by a weight frozen (input gradient only in backward)."""
    return tuple(replace(op, frozen=True) if op.kind is OpKind.GEMM and op.weight else op for op in ops)


def adapted_kernels(lora: Lora) -> tuple[str, ...]:
    """The projection kernels `lora` adapts (kernels.py's names)."""
    return tuple(KERNEL_OF[target][0] for target in lora.targets)


def lora_layer_ops(ops: tuple[Op, ...], lora: Lora, t: int) -> tuple[Op, ...]:
    """A transformer layer's forward kernels on one tensor rank, fine-tuned with `lora`: its projections frozen,
    each adapted one followed by its adapter's kernels (module docstring)."""
    adapted = {KERNEL_OF[target][0]: KERNEL_OF[target][1] for target in lora.targets}
    out: list[Op] = []
    for op in frozen_ops(ops):
        out.append(op)
        column = adapted.get(op.name)
        if column is None or op.shape is None:
            continue
        m, n, k = op.shape.m, op.shape.n, op.shape.k
        if lora.dropout > 0:
            out.append(memory_op("lora_dropout_" + op.name, _DROPOUT_BYTES * m * k, 1.0))
        r = lora.rank
        out.append(gemm_op("lora_a_" + op.name, m, r / t if column else r, k))
        out.append(gemm_op("lora_b_" + op.name, m, n if column else n / t, r))
    return tuple(out)


def trained(ops: tuple[Op, ...], model: ModelShape) -> tuple[Op, ...]:
    """An embedding's kernels whose backward runs: none when the model is fine-tuned with LoRA (the frozen table
    gets no gradient rows), else `ops`."""
    return () if model.lora is not None else ops


def lora_chunks(chunks: list[ChunkCost], model: ModelShape, t: int) -> list[ChunkCost]:
    """The chunks of a LoRA run: each holds its layers' adapters beside its base weights (per tensor rank, split
    as the adapters' GEMMs are), and every base weight (layers, embedding, output layer) is frozen."""
    lora = model.lora
    if lora is None:
        return chunks
    per_layer = lora.parameters_per_layer(model) // t
    return [replace(c, parameters=c.parameters + c.layers * per_layer, frozen_parameters=c.parameters)
            for c in chunks]
