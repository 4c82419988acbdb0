"""Where each model chunk of a pipeline sits: which rank runs which virtual stage, and which stages a microbatch
runs through in turn (the chains of the pipeline).

Three shapes:
- `loop` (GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-H2): pp x v virtual stages, chunk c of rank r is virtual stage
  c * pp + r (Megatron's layout): a microbatch loops over the ranks v times. One chain, 0 .. pp*v - 1.
- `v` (ZB-V): two chunks per rank in a V: chunk 0 of rank r is virtual stage r, chunk 1 is 2pp - 1 - r, so the
  first and the last virtual stage (the embedding and the loss) are both on rank 0. One chain, 0 .. 2pp - 1.
- `dual` (DualPipe): the model in pp pieces, twice: rank r holds piece r of the first copy (chunk 0, virtual
  stage r) and piece pp - 1 - r of the second (chunk 1, virtual stage pp + (pp - 1 - r)). Two chains, 0 .. pp - 1
  from rank 0 down and pp .. 2pp - 1 from rank pp - 1 up; half of the microbatches run each way
  (DeepSeek-V3 report, section 3.2.1; deepseek-ai/DualPipe dualpipe.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ShapeKind(StrEnum):
    LOOP = "loop"
    V = "v"
    DUAL = "dual"


@dataclass(frozen=True, slots=True)
class PipelineShape:
    kind: ShapeKind
    pp: int
    chunks: int  # model chunks per rank

    @property
    def virtual_stages(self) -> int:
        return self.pp * self.chunks

    @property
    def pieces(self) -> int:
        """How many pieces the model is cut into (DualPipe's two copies share a cut)."""
        return self.pp if self.kind is ShapeKind.DUAL else self.virtual_stages

    def stage(self, rank: int, chunk: int) -> int:
        """The virtual stage chunk `chunk` of rank `rank` runs."""
        if self.kind is ShapeKind.LOOP or chunk == 0:
            return chunk * self.pp + rank
        return 2 * self.pp - 1 - rank

    def rank(self, vs: int) -> int:
        if self.kind is ShapeKind.LOOP or vs < self.pp:
            return vs % self.pp
        return 2 * self.pp - 1 - vs

    def chunk(self, vs: int) -> int:
        return vs // self.pp

    def piece(self, vs: int) -> int:
        """The piece of the model virtual stage `vs` holds."""
        return vs % self.pp if self.kind is ShapeKind.DUAL else vs

    def is_first(self, vs: int) -> bool:
        """A chain starts here: the stage embeds its microbatch and receives no activation."""
        return vs == 0 or (self.kind is ShapeKind.DUAL and vs == self.pp)

    def is_last(self, vs: int) -> bool:
        """A chain ends here: the stage computes the loss and receives no gradient."""
        return vs == self.virtual_stages - 1 or (self.kind is ShapeKind.DUAL and vs == self.pp - 1)

    def microbatches_per_chunk(self, m: int) -> int:
        """How many of the m microbatches each chunk runs (DualPipe sends half each way)."""
        return m // 2 if self.kind is ShapeKind.DUAL else m
