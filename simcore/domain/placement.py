"""Rank placement: which GPU runs data-parallel rank d, tensor rank t, pipeline rank p, context-parallel rank c.

`order` lists the parallel dimensions innermost first ("tp,cp,dp,pp", Megatron-Core's default order
tp-cp-ep-dp-pp): consecutive GPUs differ first in the innermost dimension, so tensor-parallel groups fill a node
before anything else does, and context-parallel rings come next. An order that does not name cp (the spelling
from before context parallelism) puts cp right after tp, Megatron's place for it; with cp = 1 that changes
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from topology.errors import SpecError

DIMENSIONS = ("dp", "tp", "pp")
OPTIONAL_DIMENSIONS = ("cp",)


@dataclass(frozen=True, slots=True)
class Placement:
    dp: int
    tp: int
    pp: int
    order: tuple[str, ...]
    strides: tuple[int, int, int]  # GPU-index stride of (dp, tp, pp)
    cp: int = 1
    cp_stride: int = 0

    def gpu(self, dp_rank: int, tp_rank: int, pp_rank: int, cp_rank: int = 0) -> int:
        s_dp, s_tp, s_pp = self.strides
        return dp_rank * s_dp + tp_rank * s_tp + pp_rank * s_pp + cp_rank * self.cp_stride

    def dp_group(self, tp_rank: int, pp_rank: int) -> tuple[int, ...]:
        """The GPUs that reduce gradients together with tensor rank `tp_rank` of pipeline rank `pp_rank`: every
        data-parallel and context-parallel rank (DP x CP), data-parallel rank innermost."""
        s_dp = self.strides[0]
        first = self.gpu(0, tp_rank, pp_rank)
        if self.cp == 1:
            return tuple(range(first, first + self.dp * s_dp, s_dp))
        return tuple(g for c in range(self.cp)
                     for g in range(first + c * self.cp_stride, first + c * self.cp_stride + self.dp * s_dp, s_dp))

    def tp_group(self, dp_rank: int, pp_rank: int, cp_rank: int = 0) -> tuple[int, ...]:
        first, s_tp = self.gpu(dp_rank, 0, pp_rank, cp_rank), self.strides[1]
        return tuple(range(first, first + self.tp * s_tp, s_tp))

    def cp_group(self, dp_rank: int, tp_rank: int, pp_rank: int) -> tuple[int, ...]:
        """The context-parallel ring of one (dp, tp, pp) position, in ring order."""
        return tuple(self.gpu(dp_rank, tp_rank, pp_rank, c) for c in range(self.cp))


def place(dp: int, tp: int, pp: int, order: str, num_gpus: int, cp: int = 1) -> Placement:
    """Map (dp, tp, pp, cp) onto GPUs 0..num_gpus-1 in `order`; raise SpecError if the sizes do not match."""
    if dp * tp * pp * cp != num_gpus:
        product = "dp*tp*pp*cp" if cp > 1 else "dp*tp*pp"
        sizes_text = f"{dp}*{tp}*{pp}" + (f"*{cp}" if cp > 1 else "")
        raise SpecError("layout.dp",
                        f"{product} = {sizes_text} = {dp * tp * pp * cp} must equal the number of GPUs ({num_gpus})")
    names = [part.strip() for part in order.split(",")]
    if "cp" not in names and "tp" in names:
        names.insert(names.index("tp") + 1, "cp")
    if sorted(names) != sorted(DIMENSIONS + OPTIONAL_DIMENSIONS):
        raise SpecError("layout.placement", "must be a comma-separated order of dp, tp, pp (and cp), each once")
    sizes = {"dp": dp, "tp": tp, "pp": pp, "cp": cp}
    stride = 1
    strides: dict[str, int] = {}
    for name in names:
        strides[name] = stride
        stride *= sizes[name]
    return Placement(dp, tp, pp, tuple(names), (strides["dp"], strides["tp"], strides["pp"]), cp, strides["cp"])
