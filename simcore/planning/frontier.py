"""Which of a search's candidates can still win, and which to simulate next: the closed-form estimate's error,
learned per kind of layout from the candidates simulated so far, turned into an optimistic bound of every other
candidate (no I/O).

The estimate (simcore.planning.estimate) is wrong by a factor r = estimated / simulated tokens/s that depends on
what kind of layout it is: the schedule formula, the context-parallel ring, ZeRO-3's gathers and where the
placement puts each group are each modelled more or less closely than the engine runs them. So the error is
kept per *error kind*: the layout's kind (context-parallel, with ZeRO-3 or without, expert-parallel, ZeRO-3,
interleaved, zero-bubble, DualPipe, GPipe or plain 1F1B) and its placement. Before a kind has been simulated its
bound is the prior (estimates [0.8, 1.25] x the truth); once it has, the bound is the range of the ratios seen,
widened by a margin that shrinks as the kind is sampled more (10% / sqrt(n), at least 2%), its low end never above
1. A candidate's optimistic bound is its estimate over the low end of its
kind's range: the most the simulator could say of it, as far as the sample tells. A candidate simulated below the
low end its kind had (a *miss*: the kind's sample had not reached its tail) widens the kind's bound from then on
(`KindError.learn`), and every choice re-checks every candidate against the bounds as they are then, so candidates
pruned with the narrower bound come back.

The search simulates, a batch at a time, the candidates whose optimistic bound beats the best simulated so far,
the one with the most chance to win per estimated simulation second first (chance: the share of its bound's
range above the best so far, or above the best candidate's pessimistic bound before anything is simulated). It
stops when no candidate's bound beats the best simulated: that answer is then *proven best within the
estimate's measured error*. A batch is chosen only from what earlier batches returned, so the same search
simulates the same candidates whichever executor runs it and however many workers it has.

Candidates are grouped in *classes* (cluster size, error kind), each kept in the estimate's order: the best
candidate of a class is its first one not yet taken, so a choice looks at one candidate a class.

A placement twin (simcore.planning.twins: the same events on relabelled GPUs) is never chosen: it is known when
the candidate it is a twin of returns, and its kind learns its ratio then.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from simcore.domain.layout import Layout, Schedule

PRIOR = (0.8, 1.25)  # estimated / simulated before a kind has been simulated
MARGIN = 0.10  # the bound's widening beyond the ratios seen, over sqrt(samples)
MIN_MARGIN = 0.02
MAX_MARGIN = 0.5  # however often a kind's bound was missed
BATCH = 4  # candidates chosen together (a fixed number: the choices do not depend on the workers)


def error_kind(layout: Layout) -> tuple[str, str]:
    """The kind of a layout whose estimate errs alike, and its placement."""
    if layout.cp > 1:  # ZeRO 3's gathers share the ring's NICs: a kind of their own
        kind = "context-parallel ZeRO-3" if layout.zero_stage == 3 else "context-parallel"
    elif layout.ep > 1:
        kind = "expert-parallel"
    elif layout.zero_stage == 3:
        kind = "ZeRO-3"
    elif layout.schedule is Schedule.INTERLEAVED_1F1B:
        kind = "interleaved"
    elif layout.schedule in (Schedule.ZB_H1, Schedule.ZB_H2, Schedule.ZB_V):
        kind = "zero-bubble"
    elif layout.schedule is Schedule.DUALPIPE:
        kind = "DualPipe"
    elif layout.schedule is Schedule.GPIPE:
        kind = "GPipe"
    else:
        kind = "1F1B"
    return kind, layout.placement


@dataclass(slots=True)
class KindError:
    """The ratios estimated / simulated tokens/s seen for one error kind, and its *misses*: ratios that came in
    below the low end the kind had then, so that candidates of the kind were being pruned with a bound their
    kind does not keep (the sample had not reached the kind's tail)."""

    ratios: list[float] = field(default_factory=list)
    misses: int = 0
    ceiling: float = math.inf  # the low end after the last miss: it never rises above it again

    def learn(self, ratio: float) -> bool:
        """Add a simulated candidate's ratio; True when it is a miss. A miss widens the kind's bound from then on:
        its margin grows by the base margin for every miss and the low end never again rises above where the miss
        left it, however often the kind is sampled. So a kind whose estimate was off by more than its
        bound gets more candidates simulated, never fewer; the frontier re-checks every candidate against it."""
        missed = ratio < self.low
        self.ratios.append(ratio)
        if missed:
            self.misses += 1
            self.ceiling = min(self.ceiling, self.low)
        return missed

    @property
    def margin(self) -> float:
        if not self.ratios:
            return 0.0
        return min(MAX_MARGIN, max(MIN_MARGIN, MARGIN / math.sqrt(len(self.ratios))) * (1 + self.misses))

    @property
    def low(self) -> float:
        """The smallest ratio the kind's candidates are taken to have (their estimate's most pessimistic): the
        lowest ratio seen less the margin, never above 1 however high and however many the ratios seen: the ones
        simulated first are the kind's most promising, where an optimistic estimate is likeliest, so they say
        nothing of its other layouts (bench/search_proof.py --check-bounds: the context-parallel ZeRO-3 kind of
        Llama-3-70B seen at 1.12-1.19 in ten samples, others of it at 1.00-1.03)."""
        if not self.ratios:
            return PRIOR[0]
        return min(min(self.ratios) * (1 - self.margin), 1.0, self.ceiling)

    @property
    def high(self) -> float:
        return max(self.ratios) * (1 + self.margin) if self.ratios else PRIOR[1]


@dataclass(frozen=True, slots=True)
class KindReport:
    """One error kind as the search ended: how many of its candidates were simulated, the ratios seen (min, max)
    and the bound it pruned with."""

    kind: str
    placement: str
    simulated: int
    ratio_min: float | None
    ratio_max: float | None
    low: float
    high: float
    exceeded: int = 0  # simulated candidates whose ratio fell below the bound in force when they came (misses)


Score = Callable[[int, float], float]  # (candidate, tokens/s) -> its objective's score; lower is better


class Frontier:
    """The candidates not yet simulated, by class, with the bounds that say which can still win.

    `estimates[i]` is candidate i's estimated tokens/s, `kinds[i]` its error kind, `owners[i]` its cluster
    size's index; `score(i, tokens_per_s)` is its objective's score at a speed (lower is better, decreasing in
    tokens/s); `cost(i)` its estimated simulation seconds (called once, when it is first considered); `screened(i)`
    a reason it may not be simulated (events, memory), or None; `twins` maps each placement twin to the
    candidate it is a twin of."""

    def __init__(self, estimates: Sequence[float], kinds: Sequence[Hashable], owners: Sequence[int], score: Score,
                 cost: Callable[[int], float], screened: Callable[[int], str | None],
                 twins: Mapping[int, int] | None = None) -> None:
        self.estimates, self.kinds, self.score = estimates, kinds, score
        self._cost, self._screened = cost, screened
        self.twin_of = dict(twins or {})
        self.twins: dict[int, list[int]] = {}
        for twin, of in sorted(self.twin_of.items()):
            self.twins.setdefault(of, []).append(twin)
        self.errors: dict[Hashable, KindError] = {}
        classes: dict[tuple[int, Hashable], list[int]] = {}
        for i in sorted(range(len(estimates)), key=lambda i: (-estimates[i], i)):
            classes.setdefault((owners[i], kinds[i]), []).append(i)
            self.errors.setdefault(kinds[i], KindError())
        self._classes = list(classes.values())
        self._next = [0] * len(self._classes)
        self.costs: dict[int, float] = {}
        self.refused: list[tuple[int, str]] = []  # screened on the way, in the order they were met
        self.best_score: float | None = None
        self.simulated: dict[Hashable, int] = {}

    def bound(self, i: int) -> tuple[float, float]:
        """Candidate i's (optimistic, pessimistic) tokens/s as far as its kind's error is known."""
        error = self.errors[self.kinds[i]]
        return self.estimates[i] / error.low, self.estimates[i] / error.high

    def can_win(self, i: int) -> bool:
        """Whether candidate i's optimistic bound beats the best simulated (any can before one is)."""
        return self.best_score is None or self.score(i, self.bound(i)[0]) < self.best_score

    def _head(self, c: int) -> int | None:
        """The first candidate of class c not yet taken nor screened (screening the ones met on the way)."""
        members, k = self._classes[c], self._next[c]
        while k < len(members):
            i = members[k]
            if i in self.twin_of:  # known when its twin is
                k += 1
                continue
            if i not in self.costs:
                reason = self._screened(i)
                if reason is not None:
                    self.refused.append((i, reason))
                    k += 1
                    continue
                self.costs[i] = max(self._cost(i), 1e-3)
            self._next[c] = k
            return i
        self._next[c] = k
        return None

    def heads(self) -> list[int]:
        """The best candidate of every class that can still win."""
        found = []
        for c in range(len(self._classes)):
            i = self._head(c)
            if i is not None and self.can_win(i):
                found.append(i)
        return found

    def choose(self, limit: int = BATCH) -> list[int]:
        """Up to `limit` candidates to simulate next, the most chance to win per estimated second first; empty
        when none can win."""
        chosen: list[int] = []
        heads = self.heads()
        if not heads:
            return chosen
        # (nothing simulated yet: the best any candidate is sure to reach)
        target = self.best_score if self.best_score is not None else min(
            self.score(i, self.bound(i)[1]) for i in heads)
        taken: set[int] = set()
        for _ in range(limit):
            best, best_value = None, -1.0
            for c in range(len(self._classes)):
                i = self._head(c)
                if i is None or i in taken or not self.can_win(i):
                    continue
                high, low = self.bound(i)
                s_high, s_low = self.score(i, high), self.score(i, low)
                chance = 1.0 if s_low <= target else (target - s_high) / (s_low - s_high) if s_low > s_high \
                    else 1.0
                value = max(chance, 1e-3) / self.costs[i]
                if value > best_value:
                    best, best_value = c, value
            if best is None:
                break
            i = self._classes[best][self._next[best]]
            self._next[best] += 1  # taken
            taken.add(i)
            chosen.append(i)
        return chosen

    def learn(self, i: int, tokens_per_s: float, score: float) -> None:
        """Candidate i was simulated at `tokens_per_s` (its objective's `score`); so were its twins."""
        for j in (i, *self.twins.get(i, ())):
            kind = self.kinds[j]
            self.errors[kind].learn(self.estimates[j] / tokens_per_s)
            self.simulated[kind] = self.simulated.get(kind, 0) + 1
        if self.best_score is None or score < self.best_score:
            self.best_score = score

    def could_win(self) -> int:
        """How many candidates not simulated nor screened can still win (0: the best simulated is proven best
        among what the limits let the search simulate; `screened_could_win` says how many of the screened could
        have beaten it). Candidates met later may still be screened: the count is the most that remain."""
        count = 0
        for c, members in enumerate(self._classes):
            for i in members[self._next[c]:]:
                if i in self.twin_of:
                    continue
                if not self.can_win(i):
                    break  # the rest of the class is estimated slower still (same kind, same cluster size)
                count += 1
        return count

    def screened_could_win(self) -> int:
        """How many of the candidates screened (over the limits, not simulated) have a bound that beats the best."""
        return sum(1 for i, _ in self.refused if self.can_win(i))

    def report(self) -> tuple[KindReport, ...]:
        out = []
        for kind, error in self.errors.items():
            name, placement = kind if isinstance(kind, tuple) else (str(kind), "")
            out.append(KindReport(name, placement, len(error.ratios), min(error.ratios, default=None),
                                  max(error.ratios, default=None), error.low, error.high, error.misses))
        return tuple(sorted(out, key=lambda r: (-r.simulated, r.kind, r.placement)))
