"""NVFP4 training, as Transformer Engine's NVFP4BlockScaling recipe runs it (Megatron-LM's `--fp4-format e2m1
--fp4-recipe nvfp4`): which GEMMs run in FP4, what the quantization kernels move, what the FP4 copies occupy, and
the rate an FP4 GEMM reaches.

Source: NVIDIA/TransformerEngine (snapshot d0067d0), transformer_engine/common/recipe/__init__.py NVFP4BlockScaling,
docs/features/low_precision_training/nvfp4/nvfp4.rst, transformer_engine/pytorch/csrc/quantizer.cpp
NVFP4Quantizer::quantize_impl, transformer_engine/common/cast/nvfp4/quantize_transpose_nvfp4.cuh and
transformer_engine/common/hadamard_transform/hadamard_transform_cast_fusion.cu; Megatron-LM (snapshot d98e8a6)
megatron/core/fp4_utils.py. The paper: "Pretraining Large Language Models with NVFP4" (arXiv 2509.25149).

What runs in FP4: the projections of every transformer layer (QKV, attention output, MLP up and down, and the
latent and expert projections), all three GEMMs of each: fprop (input x weight), dgrad (output gradient x weight)
and wgrad (output gradient x input). Attention stays in 16 bits (the recipe's `fp8_dpa = False`: "not applying
quantization to attention for now"), and so do the norms, the embedding, the logits, the optimizer and every
message. Megatron can keep the first and last N transformer layers in BF16 (`first_last_layers_bf16`, off by
default; NVIDIA's MLPerf Training v5.1 Llama 3.1 8B NVFP4 configs leave it off): not modelled here.

The format: E2M1 values (half a byte), one FP8 E4M3 scale per 16 consecutive elements along the GEMM's reduction
dimension, and one fp32 scale per tensor. NVFP4 GEMMs take only the TN layout, so every tensor that feeds two
GEMMs along different dimensions is quantized twice, row-wise and column-wise (transposed), both from the 16-bit
tensor. Weights use 16x16 2D blocks (one scale shared by a 16x16 block, so that both copies agree), still stored
as one scale per 16 elements of each copy; activations and gradients use 1x16 blocks.

Quantization traffic, per element of a 16-bit tensor (NVFP4Quantizer::quantize_impl): the tensor scale needs the
tensor's amax before any element can be scaled, so a first kernel reads the tensor (2 bytes; with the random
Hadamard transform, `nvte_hadamard_transform_amax`, the amax of the transformed columns in the same pass); then
one fused kernel reads it again (2) and writes the row-wise and the column-wise FP4 copies with their E4M3 scales
(2 x (1/2 + 1/16)). The random Hadamard transform (16x16, applied to the column-wise copies of inputs and output
gradients, the wgrad GEMM's operands) runs inside that kernel on the tensor cores, and stochastic rounding of the
gradients in its conversion instructions: neither adds traffic, so the recipe's switches (NVTE_NVFP4_DISABLE_RHT,
..._STOCHASTIC_ROUNDING, ..._2D_QUANTIZATION) leave the cost as it is. Inputs are quantized before fprop, output
gradients before dgrad and wgrad, the weights once per iteration (cached over the microbatches, as for FP8).

The FP4 GEMM rate: the GPU's FP4 peak (`GpuSpec.peak_fp4_flops_per_s`, dense) times an efficiency. No measured
NVFP4 GEMM ceiling is in the reference data (gemm-ceilings.json has bf16 and fp8 rows only), so both figures are
derived, not measured:
- efficiency: each doubling of the rate costs what the fitted FP8 one costs over 16 bits
  (fp8.FP8_GEMM_EFFICIENCY_RATIO), once more: FP4's = that ratio x the FP8 efficiency;
- ceiling: the FP8 ceiling's share of the FP8 peak (B200's measured row, 3,432.5 of 4,500 TFLOP/s), scaled for
  another GPU by its 16-bit ceiling over B200's (as gemm_ceilings.DERIVED does): `fp4_ceiling_fraction`.
At 2x the FP8 peak and 0.875 x its efficiency an FP4 GEMM runs 1.75x an FP8 one of the same shape at large sizes,
never slower at any size (tests/simcore/cost/compute/test_nvfp4.py sweeps shapes).
"""

from __future__ import annotations

from simcore.cost.compute.gemm_ceilings import ceiling_fraction
from topology.hardware import GPUS, GpuKind, GpuSpec

__all__ = ["FP4_GEMM_EFFICIENCY_RATIO", "NVFP4_OPERAND_BYTES", "NVFP4_QUANTIZE_BYTES", "NVFP4_WEIGHT_COPY_BYTES",
           "fp4_ceiling_fraction", "fp4_gemm_efficiency"]

BLOCK = 16  # elements per E4M3 scale
# One FP4 copy of an element: half a byte of E2M1 and a sixteenth of a one-byte E4M3 scale.
NVFP4_OPERAND_BYTES = 0.5 + 1 / BLOCK
# The amax pass (read 2) and the fused quantization (read 2, write the row-wise and the column-wise copies).
NVFP4_QUANTIZE_BYTES = 2 + 2 + 2 * NVFP4_OPERAND_BYTES
# What the cached FP4 weights occupy between the first microbatch and the optimizer step, per weight.
NVFP4_WEIGHT_COPY_BYTES = 2 * NVFP4_OPERAND_BYTES
# Derived (module docstring): the fitted FP8 ratio, applied once more per doubling of the rate.
FP4_GEMM_EFFICIENCY_RATIO = 0.875
# The GPU whose measured FP8 ceiling the FP4 ceilings are derived from.
CEILING_REFERENCE = GpuKind.B200_180GB


def fp4_gemm_efficiency(fp8_efficiency: float) -> float:
    """An FP4 GEMM's large-size efficiency (of the FP4 peak) from the FP8 one (of the FP8 peak)."""
    return FP4_GEMM_EFFICIENCY_RATIO * fp8_efficiency


def fp4_ceiling_fraction(gpu: GpuSpec) -> float | None:
    """The derived FP4 GEMM ceiling as a fraction of the FP4 peak: the GPU's own measured FP8 ceiling fraction where
    it has one, else the reference GPU's scaled by the two 16-bit ceilings; None where neither exists (a GPU with
    no 16-bit ceiling, or a user-defined one)."""
    own = ceiling_fraction(gpu, "fp8")
    if own is not None:
        return own
    reference = GPUS[CEILING_REFERENCE]
    fp8, bf16, mine = ceiling_fraction(reference, "fp8"), ceiling_fraction(reference, "bf16"), ceiling_fraction(
        gpu, "bf16")
    if fp8 is None or bf16 is None or mine is None:
        return None
    return fp8 * mine / bf16
