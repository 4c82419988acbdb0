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
   microbatches N q lower, the periods cut out repeating the one before c_r), with K periods of the stretch left
   on both sides of the cut.
3. Simulates the reduced iteration (the same workload, collectives and ranks) while watching every simulated
   rank around its cut: at the start of each period (the top of the pass loop, before its wait) it takes the
   rank's record with what its passes added so far, the engine's event count, the passes finished, the clock's
   pending calls and the network's flows in flight; it notes each pass's start and end. It starts once every
   rank has run its last K periods at one common period (a rank running ahead at a shorter period of its own has
   not settled); a run that has not settled before its stretch ends is tried again with more periods left to
   settle (KEEPS).
4. Checks the steady state: on every rank, the K periods before the cut and the K after it have the same pass
   start and end offsets, one period P for all ranks, and the same increments of every quantity taken
   (busy, waits, communication time and bytes, events, pending calls, flows in flight). Any difference beyond
   rounding (a tolerance that keeps the put-back result within 1e-13 of the measured increments over N
   periods), and the iteration is simulated in full instead.
5. Puts the N periods back: every rank's accumulators gain N times their increment over the period that ends at
   its cut, its end time N P; the events gain N times theirs. The trace keeps the simulated spans, those after a
   rank's cut moved N P later, and marks the left-out span on the rank's track.

Why this is the full simulation, shifted: a pass after the cut depends on passes at most a period or so before
it (an activation, a gradient, a bucket), which in the full run are the left-out periods, copies of the ones
checked; the state that crosses the cut (flows, pending calls, collectives) is checked to be the same at each
period's start. Pass order and simultaneous events keep their order, so every figure is the full run's to
rounding (tests/golden compares the two: within 1e-12 relative).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import replace

from simcore.domain.layout import Fidelity
from simcore.domain.schedules import Pass
from simcore.engine.context_parallel import CpTotals
from simcore.engine.pass_work import PassTotals
from simcore.engine.periods import K_SIDE, Cut, aligned, consistent, plan_cut, schedule_lists
from simcore.engine.pipeline import Engine, EngineConfig, EngineResult, Progress
from simcore.engine.recorder import ALL_CATEGORIES, ALL_KINDS, RankRecord, Span

REL_TOLERANCE = 1e-13  # of a figure, what all N put-back periods may add up to in rounding differences
# What a failed try says when the pipeline had not settled in time: a second try, which waits longer, may pass.
SETTLING = "before its stretch ended"
UNSETTLED = (SETTLING, "its period changes", "moves from period to period")
# The tries: `keep` periods x (K + 1) more left to settle each time (the second also the lead, the latest stretch's
# start). A pipeline whose ranks first run at periods of their own settles late: ZB-V's ranks without the loss run
# ahead until the slack of the V order runs out (some 18 periods at pp 4), and only then at the loss rank's period.
KEEPS = (1, 2, 4, 8)


class Watch:
    """What the reduced run shows (the engine calls `top` and `passed`). Each rank's period starts (the tops of
    its stretch's periods) are followed; once every rank's last K periods took the same time, each takes its
    2K + 1 next period starts in full (its cut is the middle one) and notes its passes' times between them."""

    __slots__ = ("engine", "full", "cut", "settle", "follow", "armed", "tops", "times", "cuts", "_steady",
                 "_bounds", "_index")

    def __init__(self, engine: Engine, cut: Cut, full: Sequence[list[Pass]], settle: int = K_SIDE) -> None:
        self.engine, self.cut, self.settle = engine, cut, settle
        self.full = full  # the full lists, for the check of each cut
        self.follow: dict[tuple[int, int], list[float]] = {}  # (iteration, record index) -> its period starts
        self._steady: dict[int, dict[int, float]] = {}  # iteration -> the record indices steady now: their period
        self.armed: set[int] = set()  # iterations whose snapshots are being taken
        self.tops: dict[tuple[int, int], list[list[float]]] = {}
        self.times: dict[tuple[int, int], list[tuple[float, float]]] = {}
        self.cuts: dict[tuple[int, int], int] = {}
        self._bounds = [(a, b, n) for (a, b), n in zip(cut.stretches, cut.lengths, strict=True)]
        self._index: dict[int, int] = {}  # id(record) -> its index among the recorder's ranks

    def _key(self, iteration: int, record: RankRecord) -> tuple[int, int]:
        index = self._index.get(id(record))
        if index is None:
            index = self._index[id(record)] = self.engine.rec.ranks.index(record)
        return iteration, index

    def top(self, iteration: int, rank: int, i: int, record: RankRecord, totals: PassTotals,
            cp: CpTotals) -> None:
        a, b, n = self._bounds[rank]
        if i < a or i > b or (i - a) % n:
            return
        e = self.engine
        key = self._key(iteration, record)
        if i + 2 * K_SIDE * n > b and len(self.tops.get(key, ())) + (b - i) // n < 2 * K_SIDE:
            raise NotPeriodic(f"record {key[1]}: the steady state was not reached {SETTLING}")
        now = e.clock.now
        if iteration in self.armed:
            tops = self.tops.setdefault(key, [])
            if len(tops) > 2 * K_SIDE:
                return
            if len(tops) == K_SIDE:
                self.cuts[key] = i
            added = RankRecord(record.gpu, record.pipeline_rank)  # what the passes added, not in the record yet
            totals.add_to(added)
            cp.add_to(added)
            vector = [now, float(e.events_total()), float(e.passes_done), float(e.clock.pending()),
                      float(e.net.in_flight())]
            vector += [x + y for x, y in zip(_record_vector(record), _record_vector(added), strict=True)]
            tops.append(vector)
            return
        starts = self.follow.setdefault(key, [])
        starts.append(now)
        steps = [y - x for x, y in zip(starts[-self.settle - 1:], starts[-self.settle:])]
        tol = 8 * sys.float_info.epsilon * now
        steady = self._steady.setdefault(iteration, {})
        if len(steps) == self.settle and all(_close(d, steps[-1], tol) for d in steps):
            steady[key[1]] = steps[-1]
            ranks = e.rec.ranks
            for other, step in steady.items():  # replicas of one pipeline rank never join before the step
                if ranks[other].pipeline_rank == record.pipeline_rank and not _close(step, steps[-1], tol):
                    raise NotPeriodic(f"record {key[1]}: the replicas of pipeline rank {record.pipeline_rank} run "
                                      f"at different periods ({step!r} against {steps[-1]!r} s)")
            # every rank steady at one period: a rank that runs ahead at a shorter period of its own (ZB-V's
            # ranks without the loss, until the slack of their order runs out) has not settled yet
            if len(steady) == len(e.rec.ranks) and all(_close(d, steps[-1], tol) for d in steady.values()):
                self.armed.add(iteration)
        else:
            steady.pop(key[1], None)

    def passed(self, iteration: int, rank: int, i: int, record: RankRecord, start: float, end: float) -> None:
        if iteration not in self.armed:
            return
        key = self._key(iteration, record)
        tops = self.tops.get(key)
        if tops and len(tops) <= 2 * K_SIDE:
            self.times.setdefault(key, []).append((start, end))


def _record_vector(record: RankRecord) -> list[float]:
    return [*(record.time_s[k] for k in ALL_CATEGORIES), *(record.comm_busy_s[k] for k in ALL_KINDS),
            *(record.comm_bytes[k] for k in ALL_KINDS), record.busy_s]


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance


def _check(watch: Watch, result: EngineResult) -> tuple[float, dict[tuple[int, int], list[float]]] | str:
    """The period P and each (iteration, record)'s increments per period, or why the run is not periodic around
    its cuts.

    Tolerances: counts (events, passes, pending calls, flows) exactly; bytes to 1e-13 of their N-period total; a
    time or a sum of times, to that or to rounding (8 ulps of the clock there, as a wait is a difference of two
    clock readings), whichever is larger."""
    n, cut = watch.cut.periods, watch.cut
    ranks = result.recorder.ranks
    iterations = watch.engine.iterations
    if len(watch.tops) != len(ranks) * iterations or any(len(t) != 2 * K_SIDE + 1 for t in watch.tops.values()):
        return f"the steady state was not reached on every rank {SETTLING}"
    first = next(iter(watch.tops.values()))
    period = first[K_SIDE][0] - first[K_SIDE - 1][0]
    total = max(r.end_s for r in ranks) + iterations * n * period  # the scale of every time
    bytes_from, bytes_to = 5 + len(ALL_CATEGORIES) + len(ALL_KINDS), 5 + len(ALL_CATEGORIES) + 2 * len(ALL_KINDS)
    increments = {}
    labels: dict[int, set[int]] = {}
    for key, tops in watch.tops.items():
        rank = ranks[key[1]].pipeline_rank
        rounding = 8 * sys.float_info.epsilon * tops[-1][0]
        clock = max(REL_TOLERANCE * total / n, rounding)
        steps = [[b - a for a, b in zip(x, y, strict=True)] for x, y in zip(tops, tops[1:])]
        step = steps[K_SIDE - 1]  # the period that ends at the cut
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
        times = watch.times.get(key, [])
        length = cut.lengths[rank]
        if len(times) != 2 * K_SIDE * length:
            return f"record {key[1]}: {len(times)} passes timed around its cut, not {2 * K_SIDE * length}"
        if not aligned(cut.full_columns[rank], cut.columns[rank], watch.cuts[key], n, cut.q, length, labels):
            return f"pipeline rank {rank}: its list less {n} periods at index {watch.cuts[key]} is not the reduced one"
        for (s0, e0), (s1, e1) in zip(times, times[length:]):
            if not (_close(s1 - s0, period, clock) and _close(e1 - e0, period, clock)):
                return f"record {key[1]}: a pass's start or end moves from period to period"
        increments[key] = step
    if not consistent(labels, n * cut.q):
        return "the ranks' cuts relabel the microbatches differently"
    return period, increments


def _put_back(watch: Watch, result: EngineResult, period: float,
              increments: dict[tuple[int, int], list[float]]) -> EngineResult:
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
        for k, key in enumerate(ALL_KINDS):
            record.comm_busy_s[key] += n * values[len(ALL_CATEGORIES) + k]
            record.comm_bytes[key] += n * values[len(ALL_CATEGORIES) + len(ALL_KINDS) + k]
        record.busy_s += n * values[-1]
    for record in result.recorder.ranks:
        record.end_s += iterations * n * period
        if iterations > 1:
            record.previous_end_s += (iterations - 1) * n * period
    if result.recorder.keep_spans:
        _shift_spans(result, cut_times, n, period)
    last_rank = min(result.recorder.ranks, key=lambda r: (-r.end_s, r.gpu))
    return EngineResult(last_rank.end_s - last_rank.previous_end_s, result.recorder, events,
                        result.simulated_ranks, n * iterations)


_TRACK = re.compile(r"stage (\d+)(?: \D*(\d+))?")


def _shift_spans(result: EngineResult, cut_times: dict[tuple[int, int], list[float]], n: int,
                 period: float) -> None:
    """Spans after their rank's cut move N periods later; each rank's track marks the span left out."""
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
        shifted.append(replace(s, start_s=s.start_s + shift, end_s=s.end_s + shift) if shift else s)
    for rank, times in sorted(cuts_of.items()):
        for k, t in enumerate(times):
            at = t + k * n * period
            shifted.append(Span(f"stage {rank}", f"{n} steady-state periods extrapolated "
                                f"({period * 1e3:.6g} ms each)", "extrapolated", at, at + n * period))
    result.recorder.spans[:] = shifted


class NotPeriodic(Exception):
    """Raised from the watch to stop a reduced run that can no longer pass the check."""


def try_extrapolated(config: EngineConfig, progress: Progress | None = None, keep: int = 1) -> EngineResult | str:
    """The iteration simulated with periods left out and put back, or why that was not done: the lists have no
    long steady stretch, or the reduced run did not pass the check (`keep` > 1 keeps more periods, and asks for
    `keep` x K equal periods on every rank before it looks at the cut)."""
    full = config.passes if config.passes is not None else schedule_lists(config, config.layout.num_microbatches)
    cut = plan_cut(config, full, keep)
    if cut is None:
        return "no steady stretch long enough in the schedule's pass lists"
    layout = config.layout
    small = replace(layout, global_batch_size=cut.microbatches * layout.dp * layout.microbatch_size)
    engine = Engine(replace(config, layout=small, passes=cut.passes))
    watch = engine.watch = Watch(engine, cut, full, min(keep, 2) * K_SIDE)
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
