"""DualPipe (DeepSeek-V3 technical report, section 3.2.1; deepseek-ai/DualPipe dualpipe.py, `DualPipe.step`):
microbatches enter from both ends of the pipeline. Rank r holds piece r of one copy of the model (chunk 0, the
"down" direction from rank 0) and piece pp - 1 - r of another (chunk 1, "up" from rank pp - 1): twice the
parameters. Half of the m microbatches go each way. In the middle of the schedule a forward pass of one direction
and a backward pass of the other run as one overlapped pair (`OVERLAPPED`), so that each one's communication
hides under the other's compute.

The order is the eight steps of `DualPipe.step`, with half_rank = min(r, pp - 1 - r) and phase 0 the direction in
which the rank sits in the first half of the pipeline:
 1. nF0: 2(pp/2 - half_rank - 1) forwards of phase 0;
 2. nF0F1: half_rank + 1 pairs of a phase-0 and a phase-1 forward;
 3. nB1W1F1: pp/2 - half_rank - 1 times a split phase-1 backward, its W and a phase-1 forward;
 4. nF0B1F1B0 (main): m/2 - pp + half_rank + 1 times two overlapped pairs (F0 with B1, F1 with B0); the middle
    ranks run their first F0 and B1 apart;
 5. nB1F1B0: pp/2 - half_rank - 1 times a phase-1 backward and an overlapped pair (F1, B0);
 6. nB1B0: half_rank + 1 times a phase-1 and a phase-0 backward, split (W deferred) from the middle on;
 7. nWB0: pp/2 - half_rank - 1 times a deferred W and a split phase-0 backward;
 8. nW: the deferred W that remain.
"""

from __future__ import annotations

from collections import deque

from simcore.domain.list_schedule import Costs
from simcore.domain.passes import BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD, OVERLAPPED, Pass


class DualPipe:
    def passes(self, rank: int, pp: int, m: int, v: int, costs: Costs | None = None) -> list[Pass]:
        half, per_direction = pp // 2, m // 2
        half_rank = min(rank, pp - 1 - rank)
        second = rank >= half
        middle = half_rank == half - 1
        next_f, next_b = [0, 0], [0, 0]
        deferred: deque[tuple[int, int]] = deque()
        order: list[Pass] = []

        def chunk(phase: int) -> int:  # phase ^ is_in_second_half in dualpipe.py
            return phase ^ int(second)

        def microbatch(c: int, k: int) -> int:  # the up direction's microbatches follow the down direction's
            return k + c * per_direction

        def take(counter: list[int], phase: int) -> tuple[int, int]:
            c = chunk(phase)
            k = counter[c]
            counter[c] += 1
            return microbatch(c, k), c

        def f(phase: int) -> None:
            order.append(Pass(FORWARD, *take(next_f, phase)))

        def b(phase: int, split: bool = False) -> None:
            mb, c = take(next_b, phase)
            if split:
                order.append(Pass(BACKWARD_INPUT, mb, c))
                deferred.append((mb, c))
            else:
                order.append(Pass(BACKWARD, mb, c))

        def w() -> None:
            mb, c = deferred.popleft()
            order.append(Pass(BACKWARD_WEIGHT, mb, c))

        def fb(phase0: int, phase1: int) -> None:
            fmb, fc = take(next_f, phase0)
            bmb, bc = take(next_b, phase1)
            order.append(Pass(OVERLAPPED, fmb, fc, bmb, bc))

        for _ in range(2 * (half - half_rank - 1)):  # step 1
            f(0)
        for _ in range(half_rank + 1):  # step 2
            f(0)
            f(1)
        for _ in range(half - half_rank - 1):  # step 3
            b(1, split=True)
            w()
            f(1)
        for i in range(per_direction - pp + half_rank + 1):  # step 4
            if i == 0 and middle:
                f(0)
                b(1)
            else:
                fb(0, 1)
            fb(1, 0)
        for _ in range(half - half_rank - 1):  # step 5
            b(1)
            fb(1, 0)
        steps = half_rank + 1  # step 6
        split = False
        for i in range(steps):
            if i == steps // 2 and half_rank % 2 == 1:
                split = True
            b(1, split)
            if i == steps // 2 and half_rank % 2 == 0:
                split = True
            b(0, split)
        for _ in range(half - half_rank - 1):  # step 7
            w()
            b(0, split=True)
        while deferred:  # step 8
            w()
        return order
