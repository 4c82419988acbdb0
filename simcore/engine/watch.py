"""What may observe a rank's passes as the engine runs them (simcore/engine/periodic.py's check of a periodic
steady state): told at the top of each pass's loop, before its wait, and at each pass's end. It must change
nothing the engine sees."""

from __future__ import annotations

from typing import Protocol

from simcore.engine.context_parallel import CpTotals
from simcore.engine.pass_work import PassTotals
from simcore.engine.recorder import RankRecord


class PassWatch(Protocol):
    def top(self, iteration: int, rank: int, i: int, record: RankRecord, totals: PassTotals,
            cp: CpTotals) -> None:
        """Pipeline rank `rank` is about to wait for and run its pass `i`; `totals` and `cp` are what its passes
        added so far that its record does not hold yet."""

    def passed(self, iteration: int, rank: int, i: int, record: RankRecord, start: float, end: float) -> None:
        """Its pass `i` ran from `start` to `end` (s)."""
