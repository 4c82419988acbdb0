"""The tasks of a search that simulates only what can still win: a batch of candidates at a time from the
frontier (simcore.planning.frontier), each batch chosen once the last one has returned, until none can beat the
best simulated or a limit ends it (no I/O).

Each task is (index, scenario, deadline): the deadline (a `time.time()`, None: none) is the search's time limit,
at which a running candidate stops (simcore.planning.worker); the search's first candidate has none, so a search
under any time limit simulates at least one. Between batches the executor is handed `WAIT` while results are
outstanding, so what is chosen never depends on which worker finished first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from simcore.planning.executor import WAIT
from simcore.planning.frontier import BATCH, Frontier
from simcore.planning.rank import Evaluation
from simcore.planning.screen import Ended, Screen, Screened, Selection
from simcore.planning.worker import Overdue
from simcore.simulate import Scenario

BASELINE = -1  # the index of the baseline layout among the simulated tasks


class BoundedRun:
    """Feeds an executor the candidates worth simulating and learns from what they return."""

    def __init__(self, frontier: Frontier, scenario_of: Callable[[int], Scenario], max_candidates: int | None,
                 screen: Screen | None, baseline: Scenario | None, deadline: float | None) -> None:
        self.frontier, self.scenario_of = frontier, scenario_of
        self.max_candidates, self.screen, self.baseline, self.deadline = max_candidates, screen, baseline, deadline
        self.chosen: list[int] = []
        self.ended = Ended.COMPLETE
        self.spent = screen.cost(baseline).seconds if screen is not None and baseline is not None else 0.0
        self.outstanding = 0
        self.stopped_running = 0

    def tasks(self) -> Iterator[Any]:
        if self.baseline is not None:
            self.outstanding += 1
            yield BASELINE, self.baseline, None
        while True:
            while self.outstanding:
                yield WAIT
            room = None if self.max_candidates is None else self.max_candidates - len(self.chosen)
            if room is not None and room <= 0:
                if self.frontier.heads():
                    self.ended = Ended.MAX_CANDIDATES
                return
            batch = self.frontier.choose(BATCH if room is None else min(BATCH, room))
            if not batch:
                return
            for i in batch:
                seconds = self.frontier.costs[i]
                if self.screen is not None and self.screen.budget_s is not None \
                        and self.spent + seconds > self.screen.budget_s and (self.chosen or self.outstanding):
                    self.ended = Ended.BUDGET
                    break
                self.spent += seconds
                self.chosen.append(i)
                self.outstanding += 1
                yield i, self.scenario_of(i), self.deadline if len(self.chosen) > 1 else None
            if self.ended is Ended.BUDGET:
                while self.outstanding:
                    yield WAIT
                return

    def returned(self, e: Evaluation | Overdue, score: Callable[[Evaluation], float]) -> None:
        """A task's result: the frontier learns the estimate's error from it."""
        self.outstanding -= 1
        if isinstance(e, Overdue):
            self.stopped_running += 1
        elif e.index != BASELINE:
            self.frontier.learn(e.index, e.tokens_per_s, score(e))

    def selection(self) -> Selection:
        """What was chosen and screened, as the exhaustive path's selection says it."""
        screened = tuple(Screened(i, self.screen.cost(self.scenario_of(i)), reason)
                         for i, reason in self.frontier.refused) if self.screen is not None else ()
        return Selection(tuple(self.chosen), screened, self.ended,
                         self.spent if self.screen is not None else None)
