"""Which of a search's ordered candidates are simulated, by what simulating each would cost.

A search run under limits (a service job: engine events and memory per simulation, and a time limit) costs each
candidate it would simulate, most promising first, before anything runs. The cost is the caller's `CostModel`
(the service passes the estimate its simulations are admitted by, simcore.run_cost.estimate_cost, which this
layer does not import):
- a candidate whose estimated engine events or peak memory are over the limit is *screened*: kept with its
  estimate and the reason, and not simulated (the closed-form estimate that ordered it is all the search says
  of it); so is one whose estimated seconds alone are over the whole budget;
- the others are simulated, in order, while the sum of their estimated seconds (the baseline's first) stays
  within `budget_s`; the first that would go past it ends the selection: the order is the estimate's, and a
  cheaper but less promising candidate after it does not take its place.
Screened candidates do not count against `max_candidates`. The selection depends only on the estimates, so the
same search always simulates the same candidates, unlike a time limit (cacheable: the service caches it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from simcore.simulate import Scenario

__all__ = ["CandidateCost", "CostModel", "Ended", "Screen", "Screened", "Selection", "select"]

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class CandidateCost:
    """What simulating one candidate is estimated to take: engine events, CPU seconds, peak memory in bytes of
    the process that runs it."""

    events: int
    seconds: float
    memory_bytes: int


class CostModel(Protocol):
    def __call__(self, scenario: Scenario) -> CandidateCost:
        """The estimated cost of simulating `scenario` (cheap: nothing is built)."""


@dataclass(frozen=True, slots=True)
class Screen:
    """The limits a search simulates under; None: no such limit."""

    cost: CostModel
    max_events: int | None = None
    max_memory_bytes: int | None = None
    budget_s: float | None = None  # estimated seconds of every simulation of the search together

    def reason(self, cost: CandidateCost) -> str | None:
        """Why a candidate of this cost is not simulated, or None when it may be."""
        if self.max_events is not None and cost.events > self.max_events:
            return f"estimated {cost.events:,} engine events, over the limit of {self.max_events:,}"
        if self.max_memory_bytes is not None and cost.memory_bytes > self.max_memory_bytes:
            return (f"estimated {cost.memory_bytes // MIB:,} MiB of memory to simulate, over the limit of "
                    f"{self.max_memory_bytes // MIB:,} MiB")
        if self.budget_s is not None and cost.seconds > self.budget_s:
            return f"estimated {cost.seconds:,.1f} s to simulate, over the search's budget of {self.budget_s:,.1f} s"
        return None


@dataclass(frozen=True, slots=True)
class Screened:
    """A candidate kept from simulation: its index among the planned candidates, its cost and why."""

    index: int
    cost: CandidateCost
    reason: str


class Ended(StrEnum):
    """What ended a selection: every candidate was taken or screened, max_candidates, or the budget."""

    COMPLETE = "complete"
    MAX_CANDIDATES = "max_candidates"
    BUDGET = "budget"


@dataclass(frozen=True, slots=True)
class Selection:
    """The candidates to simulate (indices, in order), those screened on the way, what ended it, and the
    estimated seconds of what is simulated (the baseline's included; None without a screen)."""

    chosen: tuple[int, ...]
    screened: tuple[Screened, ...]
    ended: Ended
    estimated_s: float | None


def select(order: Sequence[int], scenario_of: Callable[[int], Scenario], limit: int | None,
           screen: Screen | None = None, baseline: Scenario | None = None) -> Selection:
    """Walk `order` (candidate indices, most promising first; `scenario_of(i)` is candidate i's scenario) and
    take at most `limit` (None: all) as the module docstring says; without a screen, the first `limit`."""
    if screen is None:
        chosen = tuple(order if limit is None else order[:limit])
        ended = Ended.MAX_CANDIDATES if len(chosen) < len(order) else Ended.COMPLETE
        return Selection(chosen, (), ended, None)
    spent = screen.cost(baseline).seconds if baseline is not None else 0.0
    chosen_list: list[int] = []
    screened: list[Screened] = []
    for index in order:
        if limit is not None and len(chosen_list) >= limit:
            return Selection(tuple(chosen_list), tuple(screened), Ended.MAX_CANDIDATES, spent)
        cost = screen.cost(scenario_of(index))
        reason = screen.reason(cost)
        if reason is not None:
            screened.append(Screened(index, cost, reason))
        elif screen.budget_s is not None and spent + cost.seconds > screen.budget_s:
            return Selection(tuple(chosen_list), tuple(screened), Ended.BUDGET, spent)
        else:
            chosen_list.append(index)
            spent += cost.seconds
    return Selection(tuple(chosen_list), tuple(screened), Ended.COMPLETE, spent)
