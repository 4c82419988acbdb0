"""FP8 weights made again every microbatch (`layout.fp8_weight_cache: false`): Megatron-Core's
`disable_parameter_transpose_cache`, which hands Transformer Engine no `is_first_microbatch`, so TE keeps nothing of a
weight across the microbatches of a step.

Megatron-Core's TELinear and TELayerNormColumnParallelLinear pass `is_first_microbatch=None` when the option is set
(NVIDIA/Megatron-LM core_v0.7.0 megatron/core/transformer/custom_layers/transformer_engine.py lines 161-166 and
273-278); by default they pass True for a step's first microbatch and False after it, and TE reuses what it made then
(simcore/cost/compute/fp8.py: weights quantized once per iteration). With None:
- a weight kept in 16 bits (the default, FP8 copies made by TE) is quantized in every microbatch's forward: TE's
  `update_workspace = is_first_microbatch is None or is_first_microbatch` with no cache name
  (NVIDIA/TransformerEngine v1.10 @08a85d3 transformer_engine/pytorch/module/linear.py lines 979-988;
  layernorm_linear.py and layernorm_mlp.py the same): WEIGHT_QUANTIZE_BYTES a weight, each microbatch, and no
  quantization with the optimizer step;
- a weight that is itself an FP8 tensor (`fp8_params`, `fp8_param_gather`) with per-tensor scaling has the transpose
  the data-gradient GEMM needs made in every backward: TE v1.6rc2 @090e724 module/linear.py lines 410-413
  `weight.transpose_2d(cache=ctx.is_first_microbatch is not None)`, whose uncached branch runs tex.fp8_transpose
  (float8_tensor.py lines 574-576; layernorm_mlp.py lines 606-613 for fc1 and fc2); v1.10 module/linear.py line 449
  calls `weight_fp8.transpose_2d()` without filling the cache (its forward fills it only for a first microbatch,
  lines 967-977), so float8_tensor.py computes a fresh transpose each call (lines 623-656). TRANSPOSE_BYTES a weight
  (read the FP8 weight, write its transpose), each microbatch, in backward. This is Transformer Engine 1.x, whose FP8
  GEMMs take TN operands only on every GPU; TE 2.x keeps the transpose of a weight that does not change
  (float8_tensor_storage.py update_usage), so a TE 2 layout keeps `fp8_weight_cache` on. Block-scaled weights
  (mxfp8, blockwise) exist in TE 2.x only: nothing per microbatch.
NVIDIA's MLPerf Training v4.0 and v4.1 llama2_70b_lora implementations (NeMo 1) set it
(megatron_gpt_peft_tuning_config.yaml `disable_parameter_transpose_cache: True`); v5.0 and v5.1 pass False.
Memory is left as the cached case counts it (the per-microbatch copies are transient).
"""

from __future__ import annotations

from simcore.cost.compute.fp8 import WEIGHT_QUANTIZE_BYTES
from simcore.cost.compute.kernels import Op, OpKind
from simcore.domain.layout import Fp8Recipe, Layout

__all__ = ["TRANSPOSE_BYTES", "weight_recasts"]

TRANSPOSE_BYTES = 1 + 1  # tex.fp8_transpose: read the 1-byte weight, write its 1-byte transpose


def weight_recasts(ops: tuple[Op, ...], layout: Layout) -> tuple[tuple[Op, ...], tuple[Op, ...]]:
    """The forward and the backward kernels one microbatch of a layer adds when Transformer Engine keeps no FP8
    weight across microbatches (module docstring), for the layer's low-precision projections `ops`; none with the
    cache on (the default) or in 16-bit precision."""
    recipe = layout.fp8
    if layout.fp8_weight_cache or recipe is None:
        return (), ()
    primary = layout.fp8_params or layout.fp8_param_gather
    forward: list[Op] = []
    backward: list[Op] = []
    for op in ops:
        if not (op.weight and (op.fp8 or op.fp4) and op.shape is not None):
            continue
        weights = op.shape.k * op.shape.n * op.shape.batch
        if not primary:
            forward.append(Op("fp8_weight_quantize_" + op.name, OpKind.MEMORY, 0.0,
                              WEIGHT_QUANTIZE_BYTES[recipe] * weights))
        elif recipe in (Fp8Recipe.TENSORWISE, Fp8Recipe.TENSORWISE_CURRENT):
            backward.append(Op("fp8_weight_transpose_" + op.name, OpKind.MEMORY, 0.0, TRANSPOSE_BYTES * weights,
                               backward_pass=True))
    return tuple(forward), tuple(backward)
