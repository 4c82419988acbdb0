"""Pipeline schedules: the order in which each pipeline rank runs its forward and backward passes.

A schedule only orders work; the engine runs the orders as events over the real per-stage costs, so waiting on
another stage shows up as real idle time. Each pass is (direction, microbatch, chunk): chunk is the model chunk
of the rank (always 0 unless interleaved); the virtual stage it runs is chunk * pp + rank (Megatron's layout).

- GPipe: all forwards, then all backwards in reverse order (Huang et al. 2019).
- 1F1B (PipeDream-Flush): pp - rank - 1 warm-up forwards, then one forward and one backward in turn, then the
  remaining backwards (Narayanan et al. 2021, §2.2.1).
- Interleaved 1F1B: each rank holds `virtual_stages` chunks; microbatches advance through the chunks in groups
  of pp (Narayanan et al. 2021, §2.2.2; Megatron-LM's forward_backward_pipelining_with_interleaving).
- Zero-bubble schedules, which split the backward pass (simcore/domain/zero_bubble.py), and DualPipe
  (simcore/domain/dualpipe.py). `v` is the number of chunks per rank (the layout's shape).
The passes themselves are simcore/domain/passes.py's.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Protocol

from simcore.domain.dualpipe import DualPipe
from simcore.domain.layout import Schedule
from simcore.domain.list_schedule import Costs
from simcore.domain.passes import (
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    FORWARD,
    OVERLAPPED,
    Pass,
    produces_weight_gradients,
    releases_activations,
    sends_gradient,
)
from simcore.domain.zero_bubble import ZbH1, ZbH2, ZbV

__all__ = ["BACKWARD", "BACKWARD_INPUT", "BACKWARD_WEIGHT", "COSTED", "FORWARD", "OVERLAPPED", "POLICIES",
           "DualPipe", "GPipe", "Interleaved1F1B", "OneFOneB", "Pass", "SchedulePolicy", "ZbH1", "ZbH2", "ZbV",
           "produces_weight_gradients", "releases_activations", "sends_gradient"]


class SchedulePolicy(Protocol):
    """A rank's passes in order; `costs` (per virtual stage: T_F, T_B, T_W in seconds) for the schedules that
    build their order on a timeline (zb_h2, zb_v), ignored by the others."""

    def passes(self, rank: int, pp: int, m: int, v: int, costs: Costs | None = None) -> list[Pass]: ...


class GPipe:
    def passes(self, rank: int, pp: int, m: int, v: int, costs: Costs | None = None) -> list[Pass]:
        return [Pass(FORWARD, i, 0) for i in range(m)] + [Pass(BACKWARD, i, 0) for i in reversed(range(m))]


class OneFOneB:
    def passes(self, rank: int, pp: int, m: int, v: int, costs: Costs | None = None) -> list[Pass]:
        warmup = min(pp - rank - 1, m)
        forwards, backwards = _single_chunk_passes(m)
        steady: list[Pass] = [*forwards[warmup:], *backwards[:m - warmup]]  # F warmup + i, then B i, in turn
        steady[0::2], steady[1::2] = forwards[warmup:], backwards[:m - warmup]
        return [*forwards[:warmup], *steady, *backwards[m - warmup:]]


@lru_cache(maxsize=16)
def _single_chunk_passes(m: int) -> tuple[tuple[Pass, ...], tuple[Pass, ...]]:
    """The forward and the backward pass of each of m microbatches on chunk 0, shared by the ranks' lists (a long
    pipeline's are built from them by slicing: 64 ranks x 1,024 passes for the 1T example)."""
    return tuple(Pass(FORWARD, i, 0) for i in range(m)), tuple(Pass(BACKWARD, i, 0) for i in range(m))


class Interleaved1F1B:
    """Megatron's interleaved schedule; needs m to be a multiple of pp."""

    def passes(self, rank: int, pp: int, m: int, v: int, costs: Costs | None = None) -> list[Pass]:
        total = m * v

        def forward(k: int) -> Pass:
            group, within = divmod(k, pp * v)
            return Pass(FORWARD, group * pp + within % pp, (k // pp) % v)

        def backward(k: int) -> Pass:
            group, within = divmod(k, pp * v)
            return Pass(BACKWARD, group * pp + within % pp, v - 1 - (k // pp) % v)

        # Megatron: with exactly pp microbatches every forward runs before any backward.
        warmup = total if m == pp else min((pp - rank - 1) * 2 + (v - 1) * pp, total)
        order = [forward(k) for k in range(warmup)]
        for k in range(total - warmup):
            order.append(forward(warmup + k))
            order.append(backward(k))
        order += [backward(k) for k in range(total - warmup, total)]
        return order


POLICIES: dict[Schedule, SchedulePolicy] = {
    Schedule.GPIPE: GPipe(),
    Schedule.ONE_F_ONE_B: OneFOneB(),
    Schedule.INTERLEAVED_1F1B: Interleaved1F1B(),
    Schedule.ZB_H1: ZbH1(),
    Schedule.ZB_H2: ZbH2(),
    Schedule.ZB_V: ZbV(),
    Schedule.DUALPIPE: DualPipe(),
}
# The schedules whose order depends on the stages' costs (list-scheduled on them).
COSTED = frozenset({Schedule.ZB_H2, Schedule.ZB_V})
