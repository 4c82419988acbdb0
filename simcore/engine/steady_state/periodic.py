"""Periodic steady state: simulate an iteration with N periods of its steady state left out, check in that run
that the steady state does repeat, and put the N periods back by arithmetic.

A schedule's steady state repeats: period after period every pipeline rank runs the same passes (the next q
microbatches of the same chunks, in the same order), and once the pipeline has settled, at the same offsets. A
long run (the 1T GPT: 512 microbatches on 64 stages) spends most of its events there. The engine then:

1. Finds the period in the pass lists: the smallest q (microbatches) such that each rank's list holds a stretch
   where the pass L_r places on is the same pass q microbatches later (L_r = the rank's passes per q
   microbatches). No list of schedules: a schedule whose lists have no such stretch (GPipe's backward phase
   runs its microbatches in reverse, so its lists are not one stretch plus a prefix and a suffix) is simulated
   in full.
2. Builds the lists of the same schedule for m' = m - N q microbatches and checks that each rank's is its full
   list with N periods cut out at one place c_r (the prefix equal, the suffix equal to the full list's with its
   microbatches N q lower, the periods cut out repeating the one before c_r). The reduced lists keep what the
   check needs of the stretch (simcore/engine/steady_state/periods.py: 2K periods, one for the fill, one after).
3. Simulates the reduced iteration (the same workload, collectives and ranks) while watching every simulated
   rank's stretch: at the start of each period (the top of the pass loop, before its wait) it takes the rank's
   record with what its passes added so far, the engine's event count, the passes finished, the clock's pending
   calls and the network's flows in flight; it notes each pass's start and end. Once every rank's last K
   periods added the same to all of these, at one common period (a rank running ahead at a shorter period of its
   own has not settled), each rank's cut is its latest period start (so the cuts lie within a period of each
   other): the K periods that showed it settled are the K before its cut, and it takes K more. A run that has
   not settled while its stretch can still give a cut K + 1 periods before its end is tried again keeping more
   periods (KEEPS).
4. Checks the steady state: on every rank, the K periods before the cut and the K after it have the same pass
   start and end offsets, one period P for all ranks, and the same increments of every quantity taken
   (busy, waits, communication time and bytes, events, pending calls, flows in flight). Any difference beyond
   rounding (a tolerance that keeps the put-back result within 1e-13 of the measured increments over N
   periods, or 8 ulps of the clock per pass or event of the period for a time), and the iteration is simulated in full
   instead.
5. Puts the N periods back: every rank's accumulators gain N times their increment over the period that ends at
   its cut, its end time N P; the events gain N times theirs. The trace keeps the simulated spans, those after a
   rank's cut moved N P later and (in a run of one iteration) naming the microbatches as the full run does (N q
   later after the cut; a schedule that numbers from m renumbers before it too), and marks the left-out span on
   the rank's track.

Why this is the full simulation, shifted: a pass after the cut depends on passes at most a period or so before
it (an activation, a gradient, a bucket), which in the full run are the left-out periods, copies of the ones
checked; the state that crosses the cut (flows, pending calls, collectives) is checked to be the same at each
period's start. Pass order and simultaneous events keep their order, so every figure is the full run's to
rounding (tests/golden compares the two: within 1e-12 relative).
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from functools import partial

from simcore.domain.layout import Fidelity
from simcore.engine.context_parallel import CpTotals
from simcore.engine.pass_work import PassTotals
from simcore.engine.pipeline import Engine, EngineConfig, EngineResult, Progress
from simcore.engine.recorder import ALL_CATEGORIES, ALL_KINDS, Category, RankRecord, Span
from simcore.engine.steady_state.periods import FULL_EVERY, K_SIDE, Cut, aligned, consistent, plan_cut, schedule_lists

REL_TOLERANCE = 1e-13  # of a figure, what all N put-back periods may add up to in rounding differences
# What a failed try says when the pipeline had not settled in time: a second try, which waits longer, may pass.
SETTLING = "before its stretch ended"
UNSETTLED = (SETTLING, "its period changes", "moves from period to period")
# The tries: (keep - 1) x (K + 1) periods more kept to settle each time (from the third on also the lead, the
# latest stretch's start; simcore/engine/steady_state/periods.py's kept_periods). A pipeline whose ranks first run at
# periods of their own settles late: ZB-V's ranks without the loss run ahead until the slack of the V order runs out
# (some 18 periods at pp 4), and only then at the loss rank's period.
KEEPS = (1, 2, 4, 8)


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
        events = self._events[key] = e.events_total()  # the period's events bound its rounding (_rounding)
        if len(recent) > self.settle + 1:
            del recent[0]
        paced, steady = self._paced.setdefault(iteration, {}), self._steady.setdefault(iteration, {})
        now = recent[-1][1][0]
        period = now - recent[-2][1][0] if len(recent) > 1 else 0.0
        tol = self._tolerances([now, 0.0, 0.0, 0.0, 0.0], period, n, events - (last or events))[0]
        if len(recent) == self.settle + 1 and all(_close(y[1][0] - x[1][0], period, tol)
                                                  for x, y in zip(recent, recent[1:])):
            paced[key[1]] = period
            ranks = e.rec.ranks
            for other, step in paced.items():  # replicas of one pipeline rank never join before the step
                if ranks[other].pipeline_rank == record.pipeline_rank and not _close(step, period, tol):
                    raise NotPeriodic(f"record {key[1]}: the replicas of pipeline rank {record.pipeline_rank} run "
                                      f"at different periods ({step!r} against {period!r} s)")
        else:
            paced.pop(key[1], None)
        if key[1] in paced and (not full or self._settled([v for _i, v in recent], n)):
            steady[key[1]] = period
            # every rank steady at one period: a rank that runs ahead at a shorter period of its own (ZB-V's
            # ranks without the loss, until the slack of their order runs out) has not settled yet
            if len(steady) == len(e.rec.ranks) and all(_close(d, period, tol) for d in steady.values()):
                self._arm(iteration)
        else:
            steady.pop(key[1], None)
        # A cut here or later must leave K periods of the stretch after it, and one more: the other ranks' cuts
        # may come up to a period later, and their checked periods see this rank through the events, calls and
        # flows they count. (A short period's cut comes K periods after the cuts are fixed.)
        if (b - i) // n < (1 if full else 2) * K_SIDE + 1:
            raise NotPeriodic(f"record {key[1]}: the steady state was not reached {SETTLING}")

    def _tolerances(self, vector: list[float], step: float, length: int, events: float = 0.0) -> list[float]:
        """How far the steps of each quantity of `vector` (a period start's on a rank with `length` passes a
        period, `events` engine events a period) may differ between periods to be taken as equal: what the check
        allows, bounded from below before the run's end is known (the iteration taken as `now` and N periods,
        each record figure as what it is now)."""
        n, now = self.cut.periods, vector[0]
        rounding = _rounding(now, max(length, int(events)))
        tolerances = [max(rounding, REL_TOLERANCE * (now + n * step) / n), 0.0, 0.0, 0.0, 0.0]
        for k, value in enumerate(vector[5:], start=5):
            relative = REL_TOLERANCE * abs(value) / n
            tolerances.append(relative if _BYTES[0] <= k < _BYTES[1] else max(relative, rounding))
        return tolerances

    def _settled(self, vectors: list[list[float]], length: int) -> bool:
        """Whether the periods between these starts added the same to every quantity."""
        steps = [[b - a for a, b in zip(x, y, strict=True)] for x, y in zip(vectors, vectors[1:])]
        last = steps[-1]
        tolerances = self._tolerances(vectors[-1], last[0], length, last[1])
        return all(_close(a, b, tol) for other in steps[:-1] for a, b, tol in zip(other, last, tolerances, strict=True))

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
_BYTES = (5 + len(ALL_CATEGORIES) + len(ALL_KINDS), 5 + len(ALL_CATEGORIES) + 2 * len(ALL_KINDS))


def _vector(e: Engine, record: RankRecord, totals: PassTotals, cp: CpTotals) -> list[float]:
    """A period start in full: the clock, the engine's events, passes finished, pending calls and flows in flight,
    and the rank's record with what its passes added so far (`totals`, `cp`)."""
    added = RankRecord(record.gpu, record.pipeline_rank)  # what the passes added, not in the record yet
    totals.add_to(added)
    cp.add_to(added)
    vector = [e.clock.now, float(e.events_total()), float(e.passes_done), float(e.clock.pending()),
              float(e.net.in_flight())]
    vector += [x + y for x, y in zip(_record_vector(record), _record_vector(added), strict=True)]
    return vector


def _record_vector(record: RankRecord) -> list[float]:
    return [*(record.time_s[k] for k in ALL_CATEGORIES), *(record.comm_busy_s[k] for k in ALL_KINDS),
            *(record.comm_bytes[k] for k in ALL_KINDS), record.busy_s]


def _rounding(now: float, length: int) -> float:
    """What rounding alone may make two periods' increments of a time differ by, on a rank running `length`
    passes a period, around clock time `now`: 8 ulps of the clock a pass (each pass's end is its start plus its
    duration rounded to the clock's last bit, and each sum it adds to is rounded once more). Flows that share
    links have their ends recomputed at every event that changes the sharing, so callers pass the larger of the
    period's passes and its events (a CP ring of 8 over InfiniBand differed by ~800 ulps a period)."""
    return 8 * sys.float_info.epsilon * now * length


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance


Labels = dict[int, tuple[int, int]]  # a reduced run's microbatch -> its full-run label before and after the cuts


def _check(watch: Watch, result: EngineResult) -> tuple[float, dict[tuple[int, int], list[float]], Labels] | str:
    """The period P, each (iteration, record)'s increments per period and the full run's labels of the reduced
    run's microbatches, or why the run is not periodic around its cuts.

    Tolerances: counts (events, passes, pending calls, flows) exactly; bytes to 1e-13 of their N-period total; a
    time or a sum of times, to that or to rounding (8 ulps of the clock there per pass of the period: each pass's
    end is its start plus its duration rounded to the clock's last bit, and each sum it adds to is rounded
    again), whichever is larger."""
    n, cut = watch.cut.periods, watch.cut
    ranks = result.recorder.ranks
    iterations = watch.engine.iterations
    if len(watch.tops) != len(ranks) * iterations or any(len(t) != 2 * K_SIDE + 1 for t in watch.tops.values()):
        return f"the steady state was not reached on every rank {SETTLING}"
    first = next(iter(watch.tops.values()))
    period = first[K_SIDE][0] - first[K_SIDE - 1][0]
    total = max(r.end_s for r in ranks) + iterations * n * period  # the scale of every time
    bytes_from, bytes_to = _BYTES
    increments = {}
    labels: dict[int, set[int]] = {}
    for key, tops in watch.tops.items():
        rank = ranks[key[1]].pipeline_rank
        length = cut.lengths[rank]
        steps = [[b - a for a, b in zip(x, y, strict=True)] for x, y in zip(tops, tops[1:])]
        step = steps[K_SIDE - 1]  # the period that ends at the cut
        rounding = _rounding(tops[-1][0], max(length, int(step[1])))
        clock = max(REL_TOLERANCE * total / n, rounding)
        final = _record_vector(ranks[key[1]])
        tolerances = [clock, 0.0, 0.0, 0.0, 0.0]
        for k, (f, s) in enumerate(zip(final, step[5:], strict=True)):
            relative = REL_TOLERANCE * (abs(f) + n * abs(s)) / n
            tolerances.append(relative if bytes_from <= k + 5 < bytes_to else max(relative, rounding))
        for other in steps:
            for k, (a, b, tol) in enumerate(zip(other, step, tolerances, strict=True)):
                if not _close(a, b, tol):
                    what = "its period" if k == 0 else f"quantity {k}"
                    return f"record {key[1]}: {what} changes from period to period ({a!r} against {b!r})"
        if not _close(step[0], period, clock):
            return f"record {key[1]}: its period {step[0]!r} s is not the others' {period!r} s"
        at = watch.cuts[key]
        lo = 2 * (at - K_SIDE * length)  # the passes of the 2K periods around the cut
        times = watch.times.get(key, [])[lo:lo + 4 * K_SIDE * length] if lo >= 0 else []
        if len(times) != 4 * K_SIDE * length:
            return f"record {key[1]}: {len(times) // 2} passes timed around its cut, not {2 * K_SIDE * length}"
        if not aligned(cut.full_columns[rank], cut.columns[rank], at, n, cut.q, length, labels):
            return f"pipeline rank {rank}: its list less {n} periods at index {at} is not the reduced one"
        for t0, t1 in zip(times, times[2 * length:]):  # each pass's start and end against the next period's
            if not _close(t1 - t0, period, clock):
                return f"record {key[1]}: a pass's start or end moves from period to period"
        increments[key] = step
    if not consistent(labels, n * cut.q):
        return "the ranks' cuts relabel the microbatches differently"
    return period, increments, {small: (min(full), max(full)) for small, full in labels.items()}


def _put_back(watch: Watch, result: EngineResult, period: float,
              increments: dict[tuple[int, int], list[float]], labels: Labels) -> EngineResult:
    n = watch.cut.periods
    iterations = watch.engine.iterations
    last = iterations - 1
    events = result.events
    cut_times: dict[tuple[int, int], list[float]] = {}
    for (iteration, index), step in increments.items():
        record = result.recorder.ranks[index]
        cut_times.setdefault((record.pipeline_rank, record.gpu), []).append(watch.tops[(iteration, index)][K_SIDE][0])
        if index == 0:
            events += round(n * step[1])
        if iteration != last:
            continue
        values = step[5:]
        for k, key in enumerate(ALL_CATEGORIES):
            record.time_s[key] += n * values[k]
        for k, kind in enumerate(ALL_KINDS):
            record.comm_busy_s[kind] += n * values[len(ALL_CATEGORIES) + k]
            record.comm_bytes[kind] += n * values[len(ALL_CATEGORIES) + len(ALL_KINDS) + k]
        record.busy_s += n * values[-1]
    for record in result.recorder.ranks:
        record.end_s += iterations * n * period
        if iterations > 1:
            record.previous_end_s += (iterations - 1) * n * period
    if result.recorder.keep_spans:
        # the spans name the full run's microbatches (but post-validation's two iterations, whose passes interleave
        # around the cuts, keep the reduced run's)
        _shift_spans(result, cut_times, n, period, labels if iterations == 1 else {})
    last_rank = min(result.recorder.ranks, key=lambda r: (-r.end_s, r.gpu))
    return EngineResult(last_rank.end_s - last_rank.previous_end_s, result.recorder, events,
                        result.simulated_ranks, n * iterations)


_TRACK = re.compile(r"stage (\d+)(?: \D*(\d+))?")
# A microbatch in a span's name: 'fwd mb3', 'fwd+bwd mb5+mb1', 'act mb3', 'idle: wait B3', 'recv FB3'
_MICROBATCH = re.compile(r"(?<=mb)\d+|(?<=wait [FBIW])\d+|(?<=recv [FBIW])\d+|(?<=wait FB)\d+|(?<=recv FB)\d+")


def _relabel(labels: Labels, side: int, match: re.Match[str]) -> str:
    """The full run's label of the reduced run's microbatch `match` names, before (side 0) or after (1) the cut."""
    small = int(match[0])
    return str(labels[small][side]) if small in labels else match[0]


def _shift_spans(result: EngineResult, cut_times: dict[tuple[int, int], list[float]], n: int,
                 period: float, labels: Labels) -> None:
    """Spans after their rank's cut move N periods later; the microbatches the spans name take their full-run
    labels from `labels` (before or after the cut); each rank's track marks the span left out."""
    by_rank: dict[int, list[list[float]]] = {}
    for (rank, _gpu), times in cut_times.items():
        by_rank.setdefault(rank, []).append(sorted(times))
    cuts_of = {rank: min(lists) for rank, lists in by_rank.items()}
    shifted = []
    for s in result.recorder.spans:
        match = _TRACK.match(s.track)
        times = cuts_of.get(int(match.group(1)), []) if match else []
        before = sum(1 for t in times if s.start_s >= t)
        shift = before * n * period
        name = _MICROBATCH.sub(partial(_relabel, labels, 1 if before else 0), s.name) if labels else s.name
        if shift or name != s.name:
            s = replace(s, name=name, start_s=s.start_s + shift, end_s=s.end_s + shift)
        shifted.append(s)
    for rank, times in sorted(cuts_of.items()):
        for k, t in enumerate(times):
            at = t + k * n * period
            shifted.append(Span(f"stage {rank}", f"{n} steady-state periods extrapolated "
                                f"({period * 1e3:.6g} ms each)", Category.EXTRAPOLATED, at, at + n * period))
    result.recorder.spans[:] = shifted


class NotPeriodic(Exception):
    """Raised from the watch to stop a reduced run that can no longer pass the check."""


def try_extrapolated(config: EngineConfig, progress: Progress | None = None, keep: int = 1) -> EngineResult | str:
    """The iteration simulated with periods left out and put back, or why that was not done: the lists have no
    long steady stretch, or the reduced run did not pass the check (`keep` > 1 keeps more periods, and asks for
    `keep` x K equal periods on every rank before it looks at the cut)."""
    full = config.passes if config.passes is not None else schedule_lists(config, config.layout.num_microbatches)
    cut = plan_cut(config, full, keep)
    if isinstance(cut, str):
        return cut
    layout = config.layout
    small = replace(layout, global_batch_size=cut.microbatches * layout.dp * layout.microbatch_size)
    engine = Engine(replace(config, layout=small, passes=cut.passes))
    watch = engine.watch = Watch(engine, cut, min(keep, 2) * K_SIDE)
    try:
        result = engine.run(progress)
    except NotPeriodic as stopped:
        return str(stopped)
    checked = _check(watch, result)
    return checked if isinstance(checked, str) else _put_back(watch, result, *checked)


def run_engine(config: EngineConfig, progress: Progress | None = None, extrapolate: bool = True) -> EngineResult:
    """Run the engine on `config`; with `extrapolate`, leave out and put back the periods of a checked periodic
    steady state where the schedule has one (EngineResult.extrapolated_periods says how many), else simulate
    every period. `progress` sees the passes of the whole iteration: only growing, ending at their number."""
    report = None
    if progress is not None:
        layout = config.layout
        total = (len(range(layout.dp)) if config.fidelity is Fidelity.FULL else 1) * \
            (2 if layout.optimizer_post_validation else 1) * sum(
                len(order) for order in (config.passes or schedule_lists(config, layout.num_microbatches)))
        high = [0]

        def report(done: int, _total: int) -> None:
            high[0] = max(high[0], min(done, total))
            progress(high[0], total)

    if extrapolate:
        for keep in KEEPS:
            outcome = try_extrapolated(config, report, keep)
            if isinstance(outcome, EngineResult):
                if progress is not None:
                    progress(total, total)
                return outcome
            if not any(sign in outcome for sign in UNSETTLED):
                break
    return Engine(config).run(report)
