"""FP8 training, Transformer Engine style: the transformer layers' GEMMs at the GPU's FP8 rate, and the kernels
that FP8 adds (casts, amax and scale updates, transposes), per scaling recipe.

What runs in FP8 (TE's `te.Linear` / `LayerNormLinear` / `LayerNormMLP` inside `fp8_autocast`, as NeMo and
Megatron-Core use it): the projections of every transformer layer (QKV, attention output, MLP up and down, and
the cross-attention ones), forward and both backward GEMMs. Attention (the fused kernel), norms, dropout, the
embedding, the logits and the optimizer stay in 16/32 bits, and so do TP, PP and DP messages.

The speed-up comes only out of kernels:
- an FP8 GEMM runs against the FP8 peak (`GpuSpec.peak_fp8_flops_per_s`) with its own size-dependent
  efficiency: the 16-bit roofline of kernel_time.op_time, with a large-GEMM efficiency of
  FP8_GEMM_EFFICIENCY_RATIO x the 16-bit one of the same generation and the same half time. The half time is a
  time, so at twice the rate an FP8 GEMM needs twice the FLOPs to reach the same fraction of its peak: FP8 GEMMs
  reach a lower fraction of their peak than 16-bit ones of the same shape.
- every FP8 GEMM's 16-bit input is quantized before it (forward), and its output gradient before the two
  backward GEMMs: memory-bound kernels whose traffic per element depends on the recipe (QUANTIZE_BYTES);
- the weights are quantized once per iteration (Megatron passes `is_first_microbatch`, so TE caches them across
  the microbatches of a step): costed with the optimizer step (WEIGHT_QUANTIZE_BYTES), and kept in memory
  (FP8_WEIGHT_COPY_BYTES);
- delayed per-tensor scaling updates every FP8 tensor's amax history and scale once per layer per pass
  (`fp8_scale_update`, one small kernel); current scaling computes each tensor's scale beside its quantization.

Bytes per element of each recipe's quantization (read the 16-bit tensor, write what the GEMMs need), from what
the kernels read and write:
- tensorwise: TE's fused cast-transpose with amax: read 2 bytes, write the FP8 copy (1) and its transpose (1),
  which the weight-gradient GEMM needs (Hopper's FP8 tensor cores take only TN layouts): 4. Where the scale comes
  from changes what runs around it (`layout.fp8_scaling`, kernels.fp8_ops), as Transformer Engine 2.x runs it
  (transformer_engine/pytorch/csrc/extensions/normalization.cpp, layernorm_fwd / rmsnorm_fwd; quantizer.cpp,
  Float8CurrentScalingQuantizer::quantize_impl):
  - delayed (the default; the scale from earlier iterations' amax history): the amax comes out of the cast, and a
    GEMM fed by its own LayerNormLinear's norm (Megatron-Core's TELayerNormColumnParallelLinear: qkv, mlp_up;
    MLA's q_up and kv_up) gets its FP8 input from the norm kernel itself (Impl::FULLY_FUSED: the norm writes 1
    byte an element instead of 2), then only the transpose (read 1, write 1);
  - current (Float8CurrentScaling, Megatron-Core's --fp8-recipe tensorwise, torchao's float8): the scale needs the
    tensor's amax first. A norm-fed input gets it from the norm (Impl::FUSED_NORM_AMAX_FP8: the norm writes its
    16-bit output and the amax, then the cast-transpose: 4, as above); every other tensor (the other projections'
    inputs, every output gradient: Megatron-Core computes activations and their gradients outside Transformer
    Engine) is read once more by an amax kernel (AMAX_BYTES), and each quantized tensor's scale is computed by a
    one-thread kernel of its own; no amax history is kept;
- rowwise (torchao float8 rowwise): an amax pass over rows and columns (read 2), then a row-scaled copy and a
  column-scaled copy (read 2, write 1, twice): 8, plus one fp32 scale per row (negligible);
- mxfp8: one read, a row-wise and a column-wise quantized copy, each with one 8-bit scale per 32 elements
  (OCP Microscaling Formats spec v1.0: block 32, E8M0 scales): 2 + 2 x (1 + 1/32);
- blockwise: as mxfp8 with 1x128 blocks and fp32 scales (DeepSeek-V3 report §3.3.2): 2 + 2 x (1 + 4/128).
"""

from __future__ import annotations

from simcore.cost.compute.nvfp4 import NVFP4_OPERAND_BYTES, NVFP4_QUANTIZE_BYTES, NVFP4_WEIGHT_COPY_BYTES
from simcore.domain.fp8_params import FP8_PARAM_GATHER_BYTES
from simcore.domain.layout import Fp8Recipe, Layout
from simcore.domain.model import LayerType, ModelShape

# Fitted (python bench/fit_fp8.py, on the BF16/FP8 step-time ratios of the 8 Nemotron-4-15B pairs of
# dgxc-benchmarking v24.11.1; tests/simcore/cost/compute/test_fp8_fit.py fails when this is not what the fit gives
# on the current code; every other FP8 and Blackwell row of the modern reference judges it): the large-GEMM
# efficiency of an FP8 GEMM, as a fraction of its FP8 peak, over the 16-bit GEMM efficiency of the same generation
# as a fraction of the 16-bit peak.
FP8_GEMM_EFFICIENCY_RATIO = 0.865

# Bytes moved per element of a 16-bit tensor quantized for FP8 GEMMs (module docstring).
QUANTIZE_BYTES: dict[Fp8Recipe, float] = {
    Fp8Recipe.TENSORWISE: 2 + 1 + 1,
    Fp8Recipe.ROWWISE: 2 + 2 * (2 + 1),
    Fp8Recipe.MXFP8: 2 + 2 * (1 + 1 / 32),
    Fp8Recipe.BLOCKWISE: 2 + 2 * (1 + 4 / 128),
    Fp8Recipe.NVFP4: NVFP4_QUANTIZE_BYTES,  # simcore/cost/compute/nvfp4.py
    Fp8Recipe.TENSORWISE_CURRENT: 2 + 1 + 1,  # the cast-transpose; its amax pass where unfused: AMAX_BYTES
}
AMAX_BYTES = 2  # current scaling's separate amax kernel: one read of the 16-bit tensor
TRANSPOSE_BYTES = 1 + 1  # delayed scaling after a fused norm-and-cast: read the FP8 copy, write its transpose
FUSED_NORM_SAVING_BYTES = 2 - 1  # ... whose norm writes the 1-byte FP8 element instead of the 16-bit one
# The weights: the same kernels, once per iteration (128x128 weight blocks for blockwise: fp32 scales per 16,384).
WEIGHT_QUANTIZE_BYTES: dict[Fp8Recipe, float] = {
    Fp8Recipe.TENSORWISE: 2 + 1 + 1,
    Fp8Recipe.ROWWISE: 2 + 2 * (2 + 1),
    Fp8Recipe.MXFP8: 2 + 2 * (1 + 1 / 32),
    Fp8Recipe.BLOCKWISE: 2 + 2 * (1 + 4 / 128**2),
    Fp8Recipe.NVFP4: NVFP4_QUANTIZE_BYTES,
    Fp8Recipe.TENSORWISE_CURRENT: AMAX_BYTES + 2 + 1 + 1,  # the weight's own amax pass first
}
# What the quantized weights occupy between the first microbatch and the optimizer step, per weight.
FP8_WEIGHT_COPY_BYTES: dict[Fp8Recipe, float] = {recipe: b - 2 for recipe, b in WEIGHT_QUANTIZE_BYTES.items()}
FP8_WEIGHT_COPY_BYTES[Fp8Recipe.ROWWISE] = 2 * 1  # the two scaled copies (the amax pass writes nothing)
FP8_WEIGHT_COPY_BYTES[Fp8Recipe.NVFP4] = NVFP4_WEIGHT_COPY_BYTES  # likewise: its amax pass reads only
FP8_WEIGHT_COPY_BYTES[Fp8Recipe.TENSORWISE_CURRENT] = 1 + 1  # likewise
# Bytes per element of a quantized GEMM operand: one for the FP8 recipes (their scales are in the quantize bytes),
# half a byte and a sixteenth of a scale for NVFP4.
OPERAND_BYTES: dict[Fp8Recipe, float] = {recipe: 1.0 for recipe in Fp8Recipe}
OPERAND_BYTES[Fp8Recipe.NVFP4] = NVFP4_OPERAND_BYTES

# TE's delayed scaling keeps an amax history per FP8 tensor, 1024 steps in NeMo's GPT configs
# (`fp8_amax_history_len: 1024`, with `fp8_amax_compute_algo: max`); the update reads and writes it and the scale
# (fp32) of the three tensors of each GEMM (input, weight, output gradient).
AMAX_HISTORY_LEN = 1024


def scale_update_bytes(gemms: int) -> float:
    """Bytes the delayed-scaling update of a layer with `gemms` FP8 GEMMs moves: it reads and writes the amax
    history and the scale (fp32) of each GEMM's three tensors."""
    return 2 * 4 * (AMAX_HISTORY_LEN + 1) * 3 * gemms


def fp8_gemm_efficiency(efficiency_16bit: float) -> float:
    """An FP8 GEMM's large-size efficiency (of the FP8 peak) from the 16-bit one of the same generation."""
    return FP8_GEMM_EFFICIENCY_RATIO * efficiency_16bit


def fp8_weight_elements(model: ModelShape, layer: LayerType, t: int) -> float:
    """Weights of one layer's FP8 GEMMs on one tensor-parallel rank (the projection matrices, no biases)."""
    h, d, f = model.hidden_size, model.head_dim, model.ffn_hidden_size
    a, g = model.num_attention_heads, model.num_kv_heads
    up = 2 if model.gated_mlp else 1
    attention = h * (a + 2 * g) * d + a * d * h
    cross = (h * a * d + h * 2 * g * d + a * d * h) if layer.cross_seq else 0
    return (attention + cross + up * h * f + f * h) / t


def fp8_gemm_weights(model: ModelShape, layer_counts: list[tuple[str, int]], t: int) -> float:
    """Weights of a pipeline rank's FP8 GEMMs, per tensor-parallel rank (the projections of its layers, given
    as (kind, count) over its chunks)."""
    layers = {layer.kind: layer for layer, _ in model.layer_stacks()}
    return sum(n * fp8_weight_elements(model, layers[kind], t) for kind, n in layer_counts)


def parameter_gather_bytes(layout: Layout, parameters: float, fp8_parameters: float) -> float:
    """Bytes per parameter of a data-parallel all-gather of `parameters`, of which `fp8_parameters` are FP8 GEMM
    weights: 2 (16-bit) each, or with `layout.fp8_param_gather` the recipe's FP8_PARAM_GATHER_BYTES for the FP8
    ones (1: half the bytes where every parameter is an FP8 GEMM weight). The average over a chunk: Megatron-Core
    buckets its FP8 and 16-bit parameters apart, which moves the same bytes in all."""
    recipe = layout.fp8
    if not layout.fp8_param_gather or recipe is None or parameters <= 0:
        return 2.0
    fp8 = min(fp8_parameters, parameters)
    return (2.0 * (parameters - fp8) + FP8_PARAM_GATHER_BYTES[recipe] * fp8) / parameters
