"""The watch over a reduced run of the periodic steady state (simcore/engine/steady_state/periodic.py): at the top of
each period of every simulated rank it takes the rank's record, the engine's events, passes, pending calls and
flows in flight, waits until every rank repeats one period, fixes the cuts there, and stops a run that can no
longer pass the check (`NotPeriodic`); with the tolerances (rounding) the check uses (no I/O).

A run that stops because its pipeline had not settled before its stretch ended says so (SETTLING), and is tried
again keeping more periods; one whose period still jitters far beyond rounding at that point (JITTER: a steady
state that never repeats to the bit, such as context-parallel rings whose flows share InfiniBand links with
pipeline transfers) says that instead, and is simulated in full at once.
"""

from __future__ import annotations

import sys

from simcore.engine.context_parallel import CpTotals
from simcore.engine.pass_work import PassTotals
from simcore.engine.pipeline import Engine
from simcore.engine.recorder import ALL_CATEGORIES, ALL_KINDS, RankRecord
from simcore.engine.steady_state.periods import FULL_EVERY, K_SIDE, Cut

REL_TOLERANCE = 1e-13  # of a figure, what all N put-back periods may add up to in rounding differences
# What a failed try says when the pipeline had not settled in time: a second try, which waits longer, may pass.
SETTLING = "before its stretch ended"
# The relative change of the period between its last two periods that marks a run that has not settled as
# jittering rather than settling late: above 1e-9 (1e4 times the rounding a period is allowed) and below 1e-3. A
# schedule's own transient moves the period by whole passes, 1e-3 of a period or more (ZB-H2's ranks alternate
# between periods 5% apart before they settle); flows that keep re-sharing links move it by a sliver of a
# transfer. Measured on a Llama-3-70B search's 71 layouts: every try that failed and was followed by one that
# passed ended at 1e-13 or less; context-parallel rings of 8 across nodes ended at 1e-7 to 1e-5 and failed every
# try (4 s of CPU spent before a 4.5 s full run).
JITTER = (1e-9, 1e-3)


class NotPeriodic(Exception):
    """Raised from the watch to stop a reduced run that can no longer pass the check."""


class Watch:
    """What the reduced run shows (the engine calls `follow` and `top`, and appends each pass's start and end to
    the list `follow` gives). At each period start of its stretch a rank's record is taken in full, its last
    `settle` + 1 kept; once every rank's last `settle` periods added the same to every quantity, one period for
    all, each rank's cut is its latest period start: the K periods before it are those just seen, and it takes K
    more."""

    __slots__ = ("engine", "cut", "settle", "armed", "tops", "times", "cuts", "_recent", "_paced", "_steady",
                 "_bounds", "_index", "_events")

    def __init__(self, engine: Engine, cut: Cut, settle: int = K_SIDE) -> None:
        self.engine, self.cut, self.settle = engine, cut, max(settle, K_SIDE)
        self.armed: set[int] = set()  # iterations whose cuts are fixed
        # (iteration, record index) -> its period starts in full, K before its cut to K after
        self.tops: dict[tuple[int, int], list[list[float]]] = {}
        self.times: dict[tuple[int, int], list[float]] = {}  # the start and end of each of its passes
        self.cuts: dict[tuple[int, int], int] = {}  # its cut: an index in the reduced list
        self._recent: dict[tuple[int, int], list[tuple[int, list[float]]]] = {}  # its last settle + 1 starts
        # iteration -> the record indices whose last `settle` periods took the same time / added the same to
        # every quantity: their period
        self._paced: dict[int, dict[int, float]] = {}
        self._steady: dict[int, dict[int, float]] = {}
        self._bounds = [(a, b, n) for (a, b), n in zip(cut.stretches, cut.lengths, strict=True)]
        self._index: dict[int, int] = {}  # id(record) -> its index among the recorder's ranks
        self._events: dict[tuple[int, int], int] = {}  # (iteration, record index) -> engine events at its last top

    def _key(self, iteration: int, record: RankRecord) -> tuple[int, int]:
        index = self._index.get(id(record))
        if index is None:
            index = self._index[id(record)] = self.engine.rec.ranks.index(record)
        return iteration, index

    def follow(self, iteration: int, rank: int, record: RankRecord) -> tuple[range, list[float]]:
        """The rank's period starts (the tops of its stretch's periods), and its passes' times."""
        a, b, n = self._bounds[rank]
        times = self.times[self._key(iteration, record)] = []
        return range(a, b + 1, n), times

    def top(self, iteration: int, rank: int, i: int, record: RankRecord, totals: PassTotals,
            cp: CpTotals) -> None:
        _a, b, n = self._bounds[rank]
        e = self.engine
        key = self._key(iteration, record)
        full = n >= FULL_EVERY  # every period start taken in full before the cuts are fixed, or its time alone
        if iteration in self.armed:
            tops = self.tops[key]
            if len(tops) <= 2 * K_SIDE:
                if not full and len(tops) == K_SIDE:
                    self.cuts[key] = i
                tops.append(_vector(e, record, totals, cp))
            return
        recent, last = self._recent.setdefault(key, []), self._events.get(key)
        recent.append((i, _vector(e, record, totals, cp) if full else [e.clock.now]))
        events = self._events[key] = e.events_total()  # the period's events bound its rounding (rounding_bound)
        if len(recent) > self.settle + 1:
            del recent[0]
        paced, steady = self._paced.setdefault(iteration, {}), self._steady.setdefault(iteration, {})
        now = recent[-1][1][0]
        period = now - recent[-2][1][0] if len(recent) > 1 else 0.0
        tol = self._tolerances([now, 0.0, 0.0, 0.0, 0.0], period, n, events - (last or events))[0]
        if len(recent) == self.settle + 1 and all(close(y[1][0] - x[1][0], period, tol)
                                                  for x, y in zip(recent, recent[1:])):
            paced[key[1]] = period
            ranks = e.rec.ranks
            for other, step in paced.items():  # replicas of one pipeline rank never join before the step
                if ranks[other].pipeline_rank == record.pipeline_rank and not close(step, period, tol):
                    raise NotPeriodic(f"record {key[1]}: the replicas of pipeline rank {record.pipeline_rank} run "
                                      f"at different periods ({step!r} against {period!r} s)")
        else:
            paced.pop(key[1], None)
        if key[1] in paced and (not full or self._settled([v for _i, v in recent], n)):
            steady[key[1]] = period
            # every rank steady at one period: a rank that runs ahead at a shorter period of its own (ZB-V's
            # ranks without the loss, until the slack of their order runs out) has not settled yet
            if len(steady) == len(e.rec.ranks) and all(close(d, period, tol) for d in steady.values()):
                self._arm(iteration)
        else:
            steady.pop(key[1], None)
        # A cut here or later must leave K periods of the stretch after it, and one more: the other ranks' cuts
        # may come up to a period later, and their checked periods see this rank through the events, calls and
        # flows they count. (A short period's cut comes K periods after the cuts are fixed.)
        if (b - i) // n < (1 if full else 2) * K_SIDE + 1:
            if len(recent) > 2:
                newest, before = (recent[-1][1][0] - recent[-2][1][0]), (recent[-2][1][0] - recent[-3][1][0])
                if JITTER[0] * newest < abs(newest - before) < JITTER[1] * newest:
                    raise NotPeriodic(f"record {key[1]}: its period still jitters at the end of its stretch "
                                      f"({before!r} s, then {newest!r} s): no steady state repeats to the bit")
            raise NotPeriodic(f"record {key[1]}: the steady state was not reached {SETTLING}")

    def _tolerances(self, vector: list[float], step: float, length: int, events: float) -> list[float]:
        """How far the steps of each quantity of `vector` (a period start's on a rank with `length` passes a
        period, `events` engine events a period) may differ between periods to be taken as equal: what the check
        allows, bounded from below before the run's end is known (the iteration taken as `now` and N periods,
        each record figure as what it is now)."""
        n, now = self.cut.periods, vector[0]
        rounding = rounding_bound(now, max(length, int(events)))
        tolerances = [max(rounding, REL_TOLERANCE * (now + n * step) / n), 0.0, 0.0, 0.0, 0.0]
        for k, value in enumerate(vector[5:], start=5):
            relative = REL_TOLERANCE * abs(value) / n
            tolerances.append(relative if BYTES[0] <= k < BYTES[1] else max(relative, rounding))
        return tolerances

    def _settled(self, vectors: list[list[float]], length: int) -> bool:
        """Whether the periods between these starts added the same to every quantity."""
        steps = [[b - a for a, b in zip(x, y, strict=True)] for x, y in zip(vectors, vectors[1:])]
        last = steps[-1]
        tolerances = self._tolerances(vectors[-1], last[0], length, last[1])
        return all(close(a, b, tol) for other in steps[:-1] for a, b, tol in zip(other, last, tolerances, strict=True))

    def _arm(self, iteration: int) -> None:
        """Fix every rank's cut: a long period's at its latest period start (all within one period of each
        other), the K periods before it those just taken in full; a short period's K period starts on, the 2K + 1
        from now on taken in full (its starts so far were timed alone: a snapshot costs about what a few passes
        do, and the last stages of a deep pipeline wait for most of its fill)."""
        self.armed.add(iteration)
        for key, recent in self._recent.items():
            if key[0] == iteration:
                if len(recent[-1][1]) > 1:
                    self.cuts[key] = recent[-1][0]
                    self.tops[key] = [vector for _i, vector in recent[-K_SIDE - 1:]]
                else:
                    self.tops[key] = []


# the vector's bytes: after the clock, the four counts, the time categories and the communication busy times
BYTES = (5 + len(ALL_CATEGORIES) + len(ALL_KINDS), 5 + len(ALL_CATEGORIES) + 2 * len(ALL_KINDS))


def _vector(e: Engine, record: RankRecord, totals: PassTotals, cp: CpTotals) -> list[float]:
    """A period start in full: the clock, the engine's events, passes finished, pending calls and flows in flight,
    and the rank's record with what its passes added so far (`totals`, `cp`)."""
    added = RankRecord(record.gpu, record.pipeline_rank)  # what the passes added, not in the record yet
    totals.add_to(added)
    cp.add_to(added)
    vector = [e.clock.now, float(e.events_total()), float(e.passes_done), float(e.clock.pending()),
              float(e.net.in_flight())]
    vector += [x + y for x, y in zip(record_vector(record), record_vector(added), strict=True)]
    return vector


def record_vector(record: RankRecord) -> list[float]:
    return [*(record.time_s[k] for k in ALL_CATEGORIES), *(record.comm_busy_s[k] for k in ALL_KINDS),
            *(record.comm_bytes[k] for k in ALL_KINDS), record.busy_s]


def rounding_bound(now: float, length: int) -> float:
    """What rounding alone may make two periods' increments of a time differ by, on a rank running `length`
    passes a period, around clock time `now`: 8 ulps of the clock a pass (each pass's end is its start plus its
    duration rounded to the clock's last bit, and each sum it adds to is rounded once more). Flows that share
    links have their ends recomputed at every event that changes the sharing, so callers pass the larger of the
    period's passes and its events (a CP ring of 8 over InfiniBand differed by ~800 ulps a period)."""
    return 8 * sys.float_info.epsilon * now * length


def close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance
