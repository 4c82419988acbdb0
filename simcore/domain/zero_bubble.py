"""Zero-bubble pipeline schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): each backward pass
is split into I (the input gradient, the papers' B) and W (the weight gradient), and W fills the bubble.

- ZB-H1 (`ZbH1`): 1F1B's warm-up, and 1F1B's peak of p microbatches held (on the first stage). As the authors'
  reference patch of Megatron-LM's 1F1B does it (sail-sg/zero-bubble-pipeline-parallelism, commit 95212f7,
  "Quick implementation for zb-h1", megatron/core/pipeline_parallel/schedules.py): rank r > 0 splits the
  backward passes of its first r steady-state steps and defers their W, splits every backward pass of the
  cool-down and runs one deferred W after each once r backward passes have run, and runs the remaining W at
  the end; the other backward passes run whole. Rank 0 never splits (no stage waits for its input gradient).
  Bubble (p-1)(T_F + T_B - T_W) for T_W <= T_F.
- ZB-H2 (`ZbH2`): up to 2p microbatches in flight per rank (about twice 1F1B's): the extra forward passes fill
  the warm-up and the deferred W the cool-down, so that each rank's work becomes a parallelogram. Bubble
  max(0, (p-1)(T_F + T_B - 2T_W)), zero when 2T_W >= T_F + T_B; with a barrier before the optimizer step the
  stages still wait for each other at the end, so it is reached only with post-validation.
- ZB-V (`ZbV`): two chunks per rank in a V (simcore/domain/pipeline_shape.py), at most 2p chunk-microbatches in
  flight per rank (1F1B's memory: a chunk holds half a stage), ordered by the authors' V scheduler
  (simcore/domain/v_schedule.py). Zero bubble for T_F = T_B = T_W, m >= 2p, with post-validation; with the barrier
  before the step every rank also waits the V's fill, p - 1 chunk forwards.
ZB-H2 is list-scheduled (simcore/domain/list_schedule.py), as the authors' scheduler builds it.
"""

from __future__ import annotations

from collections import deque

from simcore.domain.list_schedule import Costs, list_orders
from simcore.domain.passes import BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, Pass
from simcore.domain.pipeline_shape import PipelineShape, ShapeKind
from simcore.domain.v_schedule import v_orders


class ZbH1:
    def passes(self, rank: int, pp: int, m: int, v: int, costs: Costs | None = None) -> list[Pass]:
        warmup = min(pp - rank - 1, m)
        remaining = m - warmup
        order = [Pass(FORWARD, i, 0) for i in range(warmup)]
        deferred: deque[int] = deque()

        def backward(i: int, split: bool) -> None:
            if split:
                order.append(Pass(BACKWARD_INPUT, i, 0))
                deferred.append(i)
            else:
                order.append(Pass(BACKWARD, i, 0))

        def pop() -> None:
            if deferred:
                order.append(Pass(BACKWARD_WEIGHT, deferred.popleft(), 0))

        for i in range(remaining):
            order.append(Pass(FORWARD, warmup + i, 0))
            last = i == remaining - 1
            backward(i, (i < rank or last) and rank > 0)
            if last and i >= rank > 0:  # W delayed by `rank` backward passes
                pop()
        for i in range(warmup):
            backward(remaining + i, rank > 0)
            if rank > 0 and remaining + i >= rank:
                pop()
        while deferred:
            pop()
        return order


class ZbH2:
    def passes(self, rank: int, pp: int, m: int, v: int, costs: Costs | None = None) -> list[Pass]:
        return list(list_orders(PipelineShape(ShapeKind.LOOP, pp, 1), m, 2 * pp, costs)[rank])


class ZbV:
    def passes(self, rank: int, pp: int, m: int, v: int, costs: Costs | None = None) -> list[Pass]:
        return list(v_orders(pp, m, costs)[rank])
