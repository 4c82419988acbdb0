"""Megatron's asynchronous tensor-parallel input-gradient collectives (`layout.async_tensor_model_parallel_allreduce`):
how much of a layer's backward tensor-parallel time they hide under its weight-gradient GEMMs.

In a column-parallel projection's backward (the QKV, cross-attention query and key/value, and MLP up projections)
Megatron computes the input gradient first, launches its all-reduce over the tensor ranks asynchronously (with
sequence parallelism its reduce-scatter), computes the weight gradient meanwhile and only then waits for the
collective. Sources: Megatron-LM megatron/mpu/layers.py, ColumnParallelLinearWithAsyncAllreduce (commit
f3e57f6fee, September 2021: a tiny kernel delays the weight-gradient GEMM so that the all-reduce is scheduled
first; on by default since, `--no-async-tensor-model-parallel-allreduce` turns it off), later
LinearWithGradAccumulationAndAsyncCommunication (Megatron-Core, ordered by CUDA_DEVICE_MAX_CONNECTIONS=1); apex
transformer/tensor_parallel/layers.py (since 83b1e42f30, February 2022), which NeMo's Megatron models of 2022
build on (NeMo v1.11 nemo/collections/nlp/modules/common/megatron/transformer.py: on whenever TP > 1 without
sequence parallelism). The row-parallel projections' collectives (the forward all-reduces, and their backward
counterparts with sequence parallelism) stay on the critical path. Each collective hides under its own
projection's weight gradient only: what lasts longer than that GEMM is exposed.
"""

from __future__ import annotations

from simcore.cost.compute.kernel_time import weight_gradient_time
from simcore.cost.compute.kernels import Op
from simcore.cost.parameters import CostParameters
from topology.hardware import GpuSpec

# The column-parallel projections whose input gradient is reduced over the tensor ranks in backward: one per block
# (attention, cross-attention, MLP) with the block's collective, and the key/value projection of the encoder
# output with that output's gradient.
BLOCK_PROJECTIONS = ("qkv", "cross_q", "mlp_up")
ENCODER_PROJECTION = "cross_kv"


def column_weight_gradients(ops: tuple[Op, ...], gpu: GpuSpec, params: CostParameters) -> tuple[tuple[str, float], ...]:
    """(name, weight-gradient seconds) of a layer's column-parallel projections, from its forward kernels."""
    names = (*BLOCK_PROJECTIONS, ENCODER_PROJECTION)
    return tuple((op.name, weight_gradient_time(op.backward(), gpu, params)) for op in ops if op.name in names)


def hidden_backward_s(weight_gradients: tuple[tuple[str, float], ...], block_collective_s: float,
                      encoder_collective_s: float) -> float:
    """Seconds of a layer's backward tensor-parallel time hidden under its weight-gradient GEMMs: each
    column-parallel projection's input-gradient collective (`block_collective_s`, or `encoder_collective_s` for
    the encoder output's) up to that projection's weight-gradient time."""
    return sum(min(encoder_collective_s if name == ENCODER_PROJECTION else block_collective_s, seconds)
               for name, seconds in weight_gradients)
