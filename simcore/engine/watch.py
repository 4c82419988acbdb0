"""What may observe a rank's passes as the engine runs them (simcore/engine/steady_state/periodic.py's check of a
periodic steady state): told at the start of a rank's passes which of them it follows, at the top of each of those
(before its wait), and given each pass's start and end as a list the engine appends to. It must change nothing
the engine sees."""

from __future__ import annotations

from collections.abc import Container
from typing import Protocol

from simcore.engine.context_parallel import CpTotals
from simcore.engine.pass_work import PassTotals
from simcore.engine.recorder import RankRecord


class PassWatch(Protocol):
    def follow(self, iteration: int, rank: int, record: RankRecord) -> tuple[Container[int], list[float] | None]:
        """Pipeline rank `rank` (its record `record`) starts its passes of `iteration`: the indices of the passes
        to call `top` at, and a list to which the engine appends each pass's start and end (s), in order (None:
        not wanted)."""

    def top(self, iteration: int, rank: int, i: int, record: RankRecord, totals: PassTotals,
            cp: CpTotals) -> None:
        """Pipeline rank `rank` is about to wait for and run its pass `i`; `totals` and `cp` are what its passes
        added so far that its record does not hold yet."""
