"""`layout.bf16_layers`: the first and the last transformer layers of a low-precision layout kept in BF16.

Megatron-LM keeps `--num-layers-at-start-in-bf16` and `--num-layers-at-end-in-bf16` layers outside the FP8 or FP4
autocast when `--first-last-layers-bf16` is set (NVIDIA/Megatron-LM @d98e8a64 megatron/core/fp8_utils.py
is_first_last_bf16_layer, megatron/core/fp4_utils.py get_fp4_context): the whole layer then runs as BF16 training
runs it (its projections' GEMMs in BF16, its attention in 16 bits, no FP8/FP4 copies of its weights), counting by the
global layer number, so the first pipeline stage holds the first ones and the last stage the last ones. The layers
of multi-token prediction are not counted (they come after the model's `num_layers`).
"""

from __future__ import annotations

from typing import Protocol

from simcore.domain.fp8_params import validate_fp8_options
from simcore.domain.model import ModelShape
from topology.errors import SpecError


class _PrecisionOptions(Protocol):
    """What these rules read of a layout (simcore/domain/layout.py's Layout, which imports this module)."""

    @property
    def precision(self) -> str: ...
    @property
    def fp8_recipe(self) -> str | None: ...
    @property
    def fp8_attention(self) -> bool: ...
    @property
    def fp8_params(self) -> bool: ...
    @property
    def fp8_weight_cache(self) -> bool: ...
    @property
    def bf16_layers(self) -> tuple[int, int]: ...

__all__ = ["LOW_PRECISIONS", "validate_bf16_layers", "validate_model_precision"]

LOW_PRECISIONS = ("fp8", "mxfp8", "nvfp4")  # the precisions whose GEMMs a layer can leave for BF16


def validate_bf16_layers(bf16_layers: tuple[int, int], precision: str, model: ModelShape) -> None:
    """Raise SpecError naming `layout.bf16_layers` where (first, last) cannot apply: negative counts, a 16-bit
    precision (nothing to keep in BF16), an encoder-decoder model (Megatron-LM numbers the layers of one stack), or
    more layers than the model has."""
    first, last = bf16_layers
    if first < 0 or last < 0:
        raise SpecError("layout.bf16_layers", f"first and last must be >= 0 (given {first} and {last})")
    if first + last == 0:
        return
    if precision not in LOW_PRECISIONS:
        raise SpecError("layout.bf16_layers", f"needs precision fp8, mxfp8 or nvfp4 (the layers it keeps in BF16 "
                        f"leave a low-precision recipe); this layout is {precision}")
    if model.encoder_decoder:
        raise SpecError("layout.bf16_layers", "applies to single-stack models only (Megatron-LM's "
                        "--first-last-layers-bf16 numbers the layers of one stack), not encoder_decoder")
    if first + last > model.num_layers:
        raise SpecError("layout.bf16_layers", f"first + last = {first + last} exceeds the model's layers "
                        f"({model.num_layers})")


def validate_model_precision(layout: _PrecisionOptions, model: ModelShape) -> None:
    """The low-precision options whose rules read the model: `fp8_attention`, `fp8_params` (fp8_params.py) and
    `bf16_layers`; and `fp8_weight_cache`, which needs a low-precision recipe."""
    validate_fp8_options(layout.fp8_attention, layout.fp8_params, layout.precision, layout.fp8_recipe, model)
    if not layout.fp8_weight_cache and layout.precision not in LOW_PRECISIONS:
        raise SpecError("layout.fp8_weight_cache", f"false needs precision fp8, mxfp8 or nvfp4 (it re-makes the "
                        f"low-precision weight copies every microbatch); this layout is {layout.precision}")
    validate_bf16_layers(layout.bf16_layers, layout.precision, model)
