"""Rank placement: which GPU runs data-parallel rank d, tensor rank t, pipeline rank p.

`order` lists the parallel dimensions innermost first ("tp,dp,pp", Megatron's default): consecutive GPUs
differ first in the innermost dimension, so tensor-parallel groups fill a node before anything else does.
"""

from __future__ import annotations

from dataclasses import dataclass

from topology.errors import SpecError

DIMENSIONS = ("dp", "tp", "pp")


@dataclass(frozen=True, slots=True)
class Placement:
    dp: int
    tp: int
    pp: int
    order: tuple[str, str, str]
    strides: tuple[int, int, int]  # GPU-index stride of (dp, tp, pp)

    def gpu(self, dp_rank: int, tp_rank: int, pp_rank: int) -> int:
        s_dp, s_tp, s_pp = self.strides
        return dp_rank * s_dp + tp_rank * s_tp + pp_rank * s_pp

    def dp_group(self, tp_rank: int, pp_rank: int) -> tuple[int, ...]:
        return tuple(self.gpu(d, tp_rank, pp_rank) for d in range(self.dp))

    def tp_group(self, dp_rank: int, pp_rank: int) -> tuple[int, ...]:
        return tuple(self.gpu(dp_rank, t, pp_rank) for t in range(self.tp))


def place(dp: int, tp: int, pp: int, order: str, num_gpus: int) -> Placement:
    """Map (dp, tp, pp) onto GPUs 0..num_gpus-1 in `order`; raise SpecError if the sizes do not match."""
    if dp * tp * pp != num_gpus:
        raise SpecError("layout.dp",
                        f"dp*tp*pp = {dp}*{tp}*{pp} = {dp * tp * pp} must equal the number of GPUs ({num_gpus})")
    names = tuple(part.strip() for part in order.split(","))
    if sorted(names) != sorted(DIMENSIONS):
        raise SpecError("layout.placement", "must be a comma-separated order of exactly dp, tp and pp")
    sizes = {"dp": dp, "tp": tp, "pp": pp}
    stride = 1
    strides: dict[str, int] = {}
    for name in names:
        strides[name] = stride
        stride *= sizes[name]
    return Placement(dp, tp, pp, (names[0], names[1], names[2]), (strides["dp"], strides["tp"], strides["pp"]))
