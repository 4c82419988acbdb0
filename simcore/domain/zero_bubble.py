"""Zero-bubble pipeline schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024): each backward pass
is split into I (the input gradient, the papers' B) and W (the weight gradient), and W fills the bubble.

- ZB-H1 (`ZbH1`): 1F1B's warm-up, and 1F1B's peak of p microbatches held (on the first stage). As the authors'
  reference patch of Megatron-LM's 1F1B does it (sail-sg/zero-bubble-pipeline-parallelism, commit 95212f7,
  "Quick implementation for zb-h1", megatron/core/pipeline_parallel/schedules.py): rank r > 0 splits the
  backward passes of its first r steady-state steps and defers their W, splits every backward pass of the
  cool-down and runs one deferred W after each once r backward passes have run, and runs the remaining W at
  the end; the other backward passes run whole. Rank 0 never splits (no stage waits for its input gradient).
  Bubble (p-1)(T_F + T_B - T_W) for T_W <= T_F.
"""

from __future__ import annotations

from collections import deque

from simcore.domain.passes import BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, Pass


class ZbH1:
    def passes(self, rank: int, pp: int, m: int, v: int) -> list[Pass]:
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
