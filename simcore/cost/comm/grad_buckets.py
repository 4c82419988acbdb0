"""How the frameworks bucket a chunk's gradients for their data-parallel reduction (no I/O): Megatron-Core's
DistributedDataParallel, or one bucket per layer under ZeRO 3 (FSDP reduces each layer's flat parameter at once).
The engine (simcore/engine/data_parallel/dp_sync.py) runs a chunk's buckets (`ChunkCost.grad_buckets`, set by
`with_gradient_buckets`) as collectives, in the order backward makes them ready, and gathers the parameters in the
reverse order; the search's estimate (simcore/planning/estimate.py) prices `gradient_buckets`, the same rule over
equal layers.

Megatron-Core's rules, as NVIDIA/Megatron-LM tag 25.09-alpha.rc1 (d33919011c) has them (the release MLPerf Training
v5.1's NeMo implementations build) and core_r0.5.0 on:
- the bucket: DistributedDataParallelConfig.bucket_size (`layout.grad_bucket_elements`; NeMo's `bucket_size`), else
  max(40,000,000, 1,000,000 x dp) with dp the data-parallel size without context parallelism
  (distributed_data_parallel.py:56-63, parallel_state.get_data_parallel_world_size(with_context_parallel=False));
  none (a chunk's gradients in one bucket) without overlap_grad_reduce (lines 64-66), on a pipeline rank other
  than the first (lines 119-125: "data-parallel communication on these stages is not on the critical path") and
  for model chunks after the first (disable_bucketing: partition_buckets puts a buffer's buckets in one group);
- parameters go into buffers by dtype: with FP8 parameters (`fp8_param_gather`: Transformer Engine's Float8Tensor
  weights, a uint8 buffer) the transformer layers' GEMM weights form one buffer and every other parameter
  (embedding, output layer, norms, biases) another (lines 152-178);
- each buffer takes its parameters in reverse order ("to roughly follow backprop order") and closes a bucket at
  the first parameter that brings it to bucket_size or more; a tied word embedding split across pipeline stages
  (`shared_embedding`) gets a bucket of its own (param_and_grad_buffer.py:623-660);
- with an FP8 buffer, every bucket of the other buffers joins the FP8 buffer's last bucket group (the first
  layers'), which is reduced once backward is over and gathered first in the next forward (partition_buckets,
  param_and_grad_buffer.py:892-907, 957-980). Bucket padding (to multiples of dp x 128) is left out.
A BF16 layer's weights (`layout.bf16_layers`) count as FP8 parameters here (the chunk records their elements, not
their places). A chunk that simcore/cost/layer_params.py does not describe (mixture of experts, whose experts
Megatron-Core buckets in buffers of their own, latent attention, LoRA adapters) is cut into buckets of exactly the
bucket size (`gradient_buckets`: parameters finer than a bucket).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from simcore.cost.chunk import ChunkCost
from simcore.cost.layer_params import layer_submodules
from simcore.cost.parameters import DP_BUCKET_ELEMENTS
from simcore.domain.layout import Layout
from simcore.domain.model import ModelShape

__all__ = ["BUCKET_ELEMENTS_PER_DP_RANK", "bucket_elements", "chunk_tensors", "gradient_buckets",
           "megatron_buckets", "with_gradient_buckets"]

# Megatron-Core's default bucket grows with the data-parallel group: max(40,000,000, 1,000,000 x dp).
BUCKET_ELEMENTS_PER_DP_RANK = 1_000_000

Tensor = tuple[int, bool, bool]  # (elements, an FP8 parameter, a bucket of its own)


def bucket_elements(dp: int, given: int | None = None) -> int:
    """Megatron-Core's gradient bucket (elements): the layout's, else its default for `dp` data-parallel ranks
    (without context parallelism)."""
    return given if given is not None else max(DP_BUCKET_ELEMENTS, BUCKET_ELEMENTS_PER_DP_RANK * dp)


def _buffer(tensors: Sequence[Tensor], size: int | None) -> list[int]:
    """One buffer's buckets (elements) over its parameters in backward order."""
    buckets, current = [], 0
    for elements, _fp8, alone in tensors:
        if alone and current:
            buckets.append(current)
            current = 0
        current += elements
        if alone or (size is not None and current >= size):
            buckets.append(current)
            current = 0
    if current:
        buckets.append(current)
    return buckets


def megatron_buckets(tensors: Sequence[Tensor], size: int | None) -> tuple[int, ...]:
    """Megatron-Core's bucket groups (elements) of a chunk whose parameters are `tensors` in backward order, in the
    order backward makes them ready; `size` None: one bucket per buffer (module docstring)."""
    fp8 = [x for x in tensors if x[1]]
    other = _buffer([x for x in tensors if not x[1]], size)
    if not fp8:
        return tuple(other)
    groups = _buffer(fp8, size)
    groups[-1] += sum(other)
    return tuple(groups)


def gradient_buckets(parameters: int, layers: int, group: int, zero_stage: int, overlap: bool,
                     chunk: int, size: int | None = None) -> list[int]:
    """Parameters per gradient bucket of one model chunk of `parameters` over `layers` layers, in the order backward
    produces them, its parameters taken as finer than a bucket: with ZeRO 3 one per layer; else buckets of the
    bucket size (`group` the data-parallel size Megatron-Core's default grows with, `size` the layout's), only when
    the reduction overlaps backward and only for the first model chunk."""
    if zero_stage >= 3:
        layers = max(layers, 1)
        return [parameters // layers] * layers
    if not overlap or chunk > 0:
        return [parameters]
    size = bucket_elements(group, size)
    full, rest = divmod(parameters, size)
    return [size] * full + ([rest] if rest else [])


def chunk_tensors(model: ModelShape, cost: ChunkCost, layout: Layout) -> list[Tensor] | None:
    """The parameters a chunk reduces over data parallelism, per tensor rank, in Megatron-Core's bucketing order
    (its modules' parameters reversed): the output layer, the layers from the last (each module's parameters,
    weight then bias, reversed), the embedding. FP8 parameters are the layers' GEMM weights under
    `fp8_param_gather`. None where the module list does not describe the chunk (module docstring)."""
    kinds = {layer.kind: layer for layer, _ in model.layer_stacks()}
    plain = model.moe is None and model.mla is None and model.lora is None
    fp8 = layout.fp8_param_gather
    layers: list[Tensor] = []
    for kind, count in cost.layer_counts:
        if not plain or kinds[kind].moe:
            return None
        one = [(p, fp8 and i == 0 and weight > 0, False)
               for params, weight in layer_submodules(model, kinds[kind], layout.tp) for i, p in enumerate(params)]
        layers += one * count
    rest = cost.reduced_parameters - sum(x[0] for x in layers)
    if rest < 0:
        return None
    # a tied embedding split over pipeline stages is Megatron's `shared_embedding` (its own bucket)
    shared = model.tied_embeddings and not (cost.has_embedding and cost.has_logits)
    embedding = min(rest, model.embedding_parameters() // layout.tp) if cost.has_embedding else 0
    head = [(rest - embedding, False, shared)] if cost.has_logits and rest > embedding else []
    tail = [(embedding, False, shared)] if embedding else []
    if not cost.has_logits and rest > embedding:  # (what else the chunk holds: an MTP depth, say)
        tail.append((rest - embedding, False, False))
    return head + layers[::-1] + tail


def with_gradient_buckets(chunks: Sequence[ChunkCost], model: ModelShape, layout: Layout) -> list[ChunkCost]:
    """The chunks with their gradient buckets (`ChunkCost.grad_buckets`, module docstring)."""
    out = []
    for c in chunks:
        if layout.zero_stage >= 3:
            buckets = tuple(gradient_buckets(c.reduced_parameters, c.layers, layout.dp, 3, True, c.chunk))
        elif not layout.overlap_grad_reduce or c.chunk > 0 or c.rank > 0:
            buckets = (c.reduced_parameters,)
        else:
            tensors = chunk_tensors(model, c, layout)
            buckets = tuple(gradient_buckets(c.reduced_parameters, c.layers, layout.dp, layout.zero_stage, True, 0,
                                             layout.grad_bucket_elements)) if tensors is None else \
                megatron_buckets(tensors, bucket_elements(layout.dp, layout.grad_bucket_elements))
        out.append(replace(c, grad_buckets=buckets))
    return out
