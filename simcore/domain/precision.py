"""The numeric formats a layout trains in (`layout.precision`, `layout.fp8_recipe`); whether a GPU runs them is
simcore/domain/layout.py's validate_precision."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Fp8Recipe", "Precision"]


class Precision(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"  # same speed; Megatron reduces fp16 gradients in fp16 (the 2020-2021 runs trained in fp16)
    FP8 = "fp8"  # the transformer layers' GEMMs in FP8, Transformer Engine style (simcore/cost/compute/fp8.py)
    MXFP8 = "mxfp8"  # fp8 with the mxfp8 recipe (Blackwell's block-scaled FP8): Megatron's --fp8-recipe mxfp8
    # the projections' GEMMs in NVFP4, Transformer Engine's NVFP4BlockScaling (simcore/cost/compute/nvfp4.py)
    NVFP4 = "nvfp4"


class Fp8Recipe(StrEnum):
    """How the low-precision GEMMs' tensors are scaled (simcore/cost/compute/fp8.py costs each recipe's kernels). The
    first four are `layout.fp8_recipe`'s values; NVFP4 is the recipe precision nvfp4 runs, never a user's fp8_recipe."""

    TENSORWISE = "tensorwise"  # one scale per tensor, delayed (from an amax history) or current
    ROWWISE = "rowwise"  # one scale per row (torchao's float8 rowwise)
    MXFP8 = "mxfp8"  # OCP microscaling: one 8-bit exponent scale per 32 elements (Blackwell tensor cores)
    BLOCKWISE = "blockwise"  # 1x128 activation and 128x128 weight blocks with fp32 scales (DeepSeek-V3 style)
    # 4-bit E2M1 in 16-element blocks with E4M3 scales and an fp32 tensor scale (simcore/cost/compute/nvfp4.py)
    NVFP4 = "nvfp4"
