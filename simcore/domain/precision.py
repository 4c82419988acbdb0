"""The numeric formats a layout trains in (`layout.precision`, `layout.fp8_recipe`, `layout.fp8_scaling`); whether a
GPU runs them is simcore/domain/layout.py's validate_precision."""

from __future__ import annotations

from enum import StrEnum

from topology.errors import SpecError

__all__ = ["Fp8Recipe", "Fp8Scaling", "Precision", "projection_recipe", "validate_fp8_scaling"]


class Precision(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"  # same speed; Megatron reduces fp16 gradients in fp16 (the 2020-2021 runs trained in fp16)
    FP8 = "fp8"  # the transformer layers' GEMMs in FP8, Transformer Engine style (simcore/cost/compute/fp8.py)
    MXFP8 = "mxfp8"  # fp8 with the mxfp8 recipe (Blackwell's block-scaled FP8): Megatron's --fp8-recipe mxfp8
    # the projections' GEMMs in NVFP4, Transformer Engine's NVFP4BlockScaling (simcore/cost/compute/nvfp4.py)
    NVFP4 = "nvfp4"


class Fp8Recipe(StrEnum):
    """How the low-precision GEMMs' tensors are scaled (simcore/cost/compute/fp8.py costs each recipe's kernels). The
    first four are `layout.fp8_recipe`'s values; TENSORWISE_CURRENT is tensorwise with `fp8_scaling: current` and
    NVFP4 the recipe precision nvfp4 runs, neither ever a user's fp8_recipe."""

    TENSORWISE = "tensorwise"  # one scale per tensor, delayed: from the amax history of earlier iterations
    ROWWISE = "rowwise"  # one scale per row (torchao's float8 rowwise)
    MXFP8 = "mxfp8"  # OCP microscaling: one 8-bit exponent scale per 32 elements (Blackwell tensor cores)
    BLOCKWISE = "blockwise"  # 1x128 activation and 128x128 weight blocks with fp32 scales (DeepSeek-V3 style)
    # 4-bit E2M1 in 16-element blocks with E4M3 scales and an fp32 tensor scale (simcore/cost/compute/nvfp4.py)
    NVFP4 = "nvfp4"
    # one scale per tensor from the tensor's own amax (Transformer Engine's Float8CurrentScaling)
    TENSORWISE_CURRENT = "tensorwise_current"


class Fp8Scaling(StrEnum):
    """Where the tensorwise recipe's scale comes from (`layout.fp8_scaling`; default delayed): Transformer Engine's
    DelayedScaling (Megatron-Core's --fp8-recipe delayed, TE's default recipe) or Float8CurrentScaling
    (--fp8-recipe tensorwise; torchao's dynamic float8)."""

    DELAYED = "delayed"
    CURRENT = "current"


def validate_fp8_scaling(scaling: Fp8Scaling | None, precision: Precision, recipe: Fp8Recipe | None) -> None:
    """Raise SpecError naming layout.fp8_scaling when it is given for anything but the tensorwise FP8 recipe (the
    others take their scales from the tensor itself)."""
    if scaling is None:
        return
    if precision is not Precision.FP8 or (recipe or Fp8Recipe.TENSORWISE) is not Fp8Recipe.TENSORWISE:
        raise SpecError("layout.fp8_scaling", "applies to precision fp8 with fp8_recipe tensorwise only (rowwise, "
                        f"mxfp8, blockwise and nvfp4 scale from the tensor itself); this layout is {precision}"
                        + (f" with fp8_recipe {recipe}" if recipe else ""))


def projection_recipe(precision: Precision, recipe: Fp8Recipe | None, scaling: Fp8Scaling | None) -> Fp8Recipe | None:
    """The recipe a layout's projection GEMMs run with (Layout.fp8): precision mxfp8 is fp8's mxfp8 recipe, nvfp4
    its own; fp8 the layout's recipe (default tensorwise, TENSORWISE_CURRENT with current scaling); None in 16 bits."""
    if precision is Precision.MXFP8:
        return Fp8Recipe.MXFP8
    if precision is Precision.NVFP4:
        return Fp8Recipe.NVFP4
    if precision is not Precision.FP8:
        return None
    recipe = recipe or Fp8Recipe.TENSORWISE
    current = recipe is Fp8Recipe.TENSORWISE and scaling is Fp8Scaling.CURRENT
    return Fp8Recipe.TENSORWISE_CURRENT if current else recipe
