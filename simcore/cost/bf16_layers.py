"""The layers `layout.bf16_layers` keeps in BF16 (simcore/domain/bf16_layers.py), in a workload: which chunk holds
them and what they run.

The partition cuts the layers as before (by count, or by cost without the difference); the first `first` and the
last `last` of the model's layers then become BF16 layers of their kind (`LayerType.bf16`), costed with the layout's
precision replaced by bf16: their projections' GEMMs at the 16-bit rate with no quantization kernels, their attention
in 16 bits, and no FP8 or FP4 copies of their weights to keep or to refresh after the optimizer step. The chunks that
hold them (the first and the last pipeline stage) are slower, which the schedule runs as unequal stages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from simcore.cost.compute.fp8 import fp8_weight_elements
from simcore.domain.layout import Layout
from simcore.domain.model import LayerType, ModelShape
from simcore.domain.precision import Precision

__all__ = ["bf16_layout", "bf16_weight_elements", "layer_counts", "mark_bf16_layers"]

Runs = list[tuple[LayerType, int]]


def mark_bf16_layers(chunks: Sequence[Runs], first: int, last: int, mtp_layers: int = 0) -> list[Runs]:
    """The chunks' runs (in model order) with the model's first `first` and last `last` layers as BF16 layers; the
    `mtp_layers` multi-token prediction layers (the last chunk's, after the model's layers) are not counted."""
    if first == last == 0:
        return [list(runs) for runs in chunks]
    sequence = [(i, layer) for i, runs in enumerate(chunks) for layer, n in runs for _ in range(n)]
    total = len(sequence) - mtp_layers
    out: list[Runs] = [[] for _ in chunks]
    for number, (i, layer) in enumerate(sequence):
        if number < first or total - last <= number < total:
            layer = replace(layer, bf16=True)
        runs = out[i]
        if runs and runs[-1][0] == layer:
            runs[-1] = (layer, runs[-1][1] + 1)
        else:
            runs.append((layer, 1))
    return out


def bf16_layout(layout: Layout) -> Layout:
    """The layout a BF16 layer runs with: its precision bf16, no FP8 recipe, attention or parameter options."""
    return replace(layout, precision=Precision.BF16, fp8_recipe=None, fp8_attention=False, fp8_param_gather=False,
                   fp8_params=False, bf16_layers=(0, 0))


def layer_counts(runs: Sequence[tuple[LayerType, int]]) -> tuple[tuple[str, int], ...]:
    """A chunk's layers by kind, consecutive runs of one kind (a BF16 run beside the others) counted together."""
    counts: list[tuple[str, int]] = []
    for layer, n in runs:
        if counts and counts[-1][0] == layer.kind:
            counts[-1] = (layer.kind, counts[-1][1] + n)
        else:
            counts.append((layer.kind, n))
    return tuple(counts)


def bf16_weight_elements(model: ModelShape, runs: Sequence[tuple[LayerType, int]], t: int) -> float:
    """The GEMM weights of the chunk's BF16 layers per tensor rank: what has no FP8 or FP4 copy."""
    return sum(n * fp8_weight_elements(model, layer, t) for layer, n in runs if layer.bf16)
