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
from dataclasses import replace
from functools import partial

from simcore.domain.layout import Fidelity
from simcore.engine.pipeline import Engine, EngineConfig, EngineResult, Progress
from simcore.engine.recorder import ALL_CATEGORIES, ALL_KINDS, Category, Span
from simcore.engine.steady_state.periods import K_SIDE, aligned, consistent, plan_cut, schedule_lists
from simcore.engine.steady_state.watch import (
    BYTES,
    REL_TOLERANCE,
    SETTLING,
    NotPeriodic,
    Watch,
    close,
    record_vector,
    rounding_bound,
)

UNSETTLED = (SETTLING, "its period changes", "moves from period to period")
# The tries: (keep - 1) x (K + 1) periods more kept to settle each time (from the third on also the lead, the
# latest stretch's start; simcore/engine/steady_state/periods.py's kept_periods). A pipeline whose ranks first run at
# periods of their own settles late: ZB-V's ranks without the loss run ahead until the slack of the V order runs out
# (some 18 periods at pp 4), and only then at the loss rank's period.
KEEPS = (1, 2, 4, 8)


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
    bytes_from, bytes_to = BYTES
    increments = {}
    labels: dict[int, set[int]] = {}
    for key, tops in watch.tops.items():
        rank = ranks[key[1]].pipeline_rank
        length = cut.lengths[rank]
        steps = [[b - a for a, b in zip(x, y, strict=True)] for x, y in zip(tops, tops[1:])]
        step = steps[K_SIDE - 1]  # the period that ends at the cut
        rounding = rounding_bound(tops[-1][0], max(length, int(step[1])))
        clock = max(REL_TOLERANCE * total / n, rounding)
        final = record_vector(ranks[key[1]])
        tolerances = [clock, 0.0, 0.0, 0.0, 0.0]
        for k, (f, s) in enumerate(zip(final, step[5:], strict=True)):
            relative = REL_TOLERANCE * (abs(f) + n * abs(s)) / n
            tolerances.append(relative if bytes_from <= k + 5 < bytes_to else max(relative, rounding))
        for other in steps:
            for k, (a, b, tol) in enumerate(zip(other, step, tolerances, strict=True)):
                if not close(a, b, tol):
                    what = "its period" if k == 0 else f"quantity {k}"
                    return f"record {key[1]}: {what} changes from period to period ({a!r} against {b!r})"
        if not close(step[0], period, clock):
            return f"record {key[1]}: its period {step[0]!r} s is not the others' {period!r} s"
        at = watch.cuts[key]
        lo = 2 * (at - K_SIDE * length)  # the passes of the 2K periods around the cut
        times = watch.times.get(key, [])[lo:lo + 4 * K_SIDE * length] if lo >= 0 else []
        if len(times) != 4 * K_SIDE * length:
            return f"record {key[1]}: {len(times) // 2} passes timed around its cut, not {2 * K_SIDE * length}"
        if not aligned(cut.full_columns[rank], cut.columns[rank], at, n, cut.q, length, labels):
            return f"pipeline rank {rank}: its list less {n} periods at index {at} is not the reduced one"
        for t0, t1 in zip(times, times[2 * length:]):  # each pass's start and end against the next period's
            if not close(t1 - t0, period, clock):
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
