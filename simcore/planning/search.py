"""Layout search over domain objects: enumerate a space (simcore.planning.space), discard what breaks a layout
rule or does not fit in memory (simcore.planning.prune), order the rest by a closed-form estimate
(simcore.planning.estimate), keep from simulation what a screen's limits exclude (simcore.planning.screen),
simulate the most promising ones up to the bounds on an executor
(simcore.planning.executor's protocol, each worker as simcore.planning.worker describes), and rank what was simulated by
tokens/s, saying why for each (simcore.planning.rank).

    result = search(base, global_batch_size=1536, space=Space(), bounds=Bounds(max_candidates=50))
    result.best.layout, result.best.evaluation.tokens_per_s

What a search returns is the same whichever executor ran it and however many workers it had; only `run` (the
executor, the workers, the times) and, under a time limit, how many candidates were simulated can differ.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from simcore.domain.layout import Layout
from simcore.domain.model import ModelShape
from simcore.planning.bounded import BASELINE, BoundedRun
from simcore.planning.executor import Executor, InlineExecutor
from simcore.planning.frontier import Frontier, KindReport, error_kind
from simcore.planning.objective import Goal, Objective, describe_score, plan_for, score
from simcore.planning.prune import Plan
from simcore.planning.rank import Evaluation, explain
from simcore.planning.screen import CandidateCost, Ended, Screen, select
from simcore.planning.slices import merge_plans, plan_in_slices
from simcore.planning.space import Space, family_of
from simcore.planning.twins import twins
from simcore.planning.worker import Overdue, evaluate_candidate
from simcore.simulate import Scenario
from topology.cluster_spec import ClusterSpec

# (candidates done, candidates to simulate: bounded, those done, running and not simulated that could still win)
Progress = Callable[[int, int], None]

FASTEST = Goal()


class StoppedBy(StrEnum):
    PROVEN = "proven_best"  # no candidate left can beat the best simulated, within the estimate's measured error
    COMPLETE = "complete"  # every feasible candidate was simulated
    MAX_CANDIDATES = "max_candidates"
    TIME_LIMIT = "time_limit"
    INTERRUPTED = "interrupted"  # Ctrl-C: the best of what had been simulated
    ESTIMATED_TIME = "estimated_time"  # the screen's budget of estimated seconds was spent


@dataclass(frozen=True, slots=True)
class Bounds:
    """How much a search simulates: the candidates that can still beat the best simulated
    (simcore.planning.frontier), at most `max_candidates` (None: no limit), none after `time_limit_s` seconds from
    its start (planning included; a candidate running then is stopped, except the search's first), and how many
    it returns. `exhaustive`: every feasible candidate in the estimate's order instead (up to the limits)."""

    top_k: int = 5
    max_candidates: int | None = 500
    time_limit_s: float | None = None
    exhaustive: bool = False


@dataclass(frozen=True, slots=True)
class Ranked:
    """A simulated candidate: its layout on its cluster, the simulator's figures (with the whole run when the
    search has one), the estimate that ordered it, and why it ranks where it does (for the baseline, why it is
    where it is)."""

    layout: Layout
    cluster: ClusterSpec
    evaluation: Evaluation
    estimated_tokens_per_s: float | None
    why: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ScreenedCandidate:
    """A candidate the screen kept from simulation: its layout on its cluster, the estimate that ordered it,
    what simulating it would cost and why it was not."""

    layout: Layout
    cluster: ClusterSpec
    estimated_tokens_per_s: float
    cost: CandidateCost
    reason: str


@dataclass(frozen=True, slots=True)
class RunInfo:
    executor: str
    workers: int
    planning_s: float  # enumerating, pruning and estimating
    wall_time_s: float


@dataclass(frozen=True, slots=True)
class SearchResult:
    plan: Plan  # every cluster size's plan together (candidates in cluster-size order)
    top: tuple[Ranked, ...]  # best first, by the goal's objective
    simulated: int
    stopped_by: StoppedBy
    baseline: Ranked | None
    baseline_family_discard: str | None  # why the baseline's family was discarded, when it was
    run: RunInfo
    goal: Goal = Goal()
    clusters: tuple[ClusterSpec, ...] = ()  # the cluster sizes searched
    screened: tuple[ScreenedCandidate, ...] = ()  # in the estimate's order
    estimated_s: float | None = None  # the screen's estimate of what was chosen to simulate (None: no screen)
    errors: tuple[KindReport, ...] = ()  # the estimate's error per kind, as the search learned it (not exhaustive)
    could_win: int | None = None  # candidates not simulated whose bound beats the best (0: proven; None: exhaustive)
    screened_could_win: int = 0  # of the screened candidates, those whose bound beats the best
    stopped_running: int = 0  # candidates stopped at the time limit while they ran
    # every candidate simulated or known as a placement twin of one (not the baseline), in index order
    simulated_layouts: tuple[Layout, ...] = ()

    @property
    def best(self) -> Ranked | None:
        return self.top[0] if self.top else None

    @property
    def best_speedup(self) -> float | None:
        """The best candidate's tokens/s over the baseline's."""
        if self.best is None or self.baseline is None:
            return None
        return self.best.evaluation.tokens_per_s / self.baseline.evaluation.tokens_per_s


def fold_placements(ordered: list[Evaluation], candidates: Sequence[Layout],
                    top_k: int) -> tuple[list[Evaluation], dict[int, list[str]]]:
    """The first `top_k` of `ordered` (best first) with layouts that differ from an earlier one only in
    placement, at equal figures, folded into it; returns them and, by the kept one's index, the folded
    placements."""
    kept: list[Evaluation] = []
    folded: dict[int, list[str]] = {}
    first: dict[tuple[Layout, float, float], Evaluation] = {}
    for e in ordered:
        key = (replace(candidates[e.index], placement=""), round(e.tokens_per_s, 6), round(e.peak_memory_gib, 6))
        if key in first:
            folded.setdefault(first[key].index, []).append(candidates[e.index].placement)
            continue
        if len(kept) == top_k:
            continue
        first[key] = e
        kept.append(e)
    return kept, folded

def _frontier(candidates: Sequence[Layout], estimates: Sequence[float], owner: Sequence[int],
              sizes: Sequence[ClusterSpec], goal: Goal, model: ModelShape, global_batch_size: int,
              scenario_of: Callable[[int], Scenario], screen: Screen | None, twin_of: dict[int, int]) -> Frontier:
    """The frontier of a search's candidates: their estimates, error kinds, objective at a speed, and what the
    screen says simulating each would cost (1 s each without a screen: the order is then the chance to win)."""
    costs: dict[int, CandidateCost] = {}

    def cost_of(i: int) -> CandidateCost:
        found = costs.get(i)
        if found is None:
            assert screen is not None
            found = costs[i] = screen.cost(scenario_of(i))
        return found

    def score_at(i: int, tokens_per_s: float) -> float:
        cluster = sizes[owner[i]]
        return score(goal, tokens_per_s, plan_for(goal, model, cluster, tokens_per_s, global_batch_size))

    return Frontier(estimates, [error_kind(layout) for layout in candidates], owner, score_at,
                    (lambda i: cost_of(i).seconds) if screen is not None else (lambda i: 1.0),
                    (lambda i: screen.reason(cost_of(i))) if screen is not None else (lambda i: None), twin_of)


def search(base: Scenario, global_batch_size: int, space: Space, bounds: Bounds = Bounds(), *,
           goal: Goal = FASTEST, clusters: Sequence[ClusterSpec] = (), baseline: Scenario | None = None,
           executor: Executor | None = None, progress: Progress | None = None,
           screen: Screen | None = None) -> SearchResult:
    """Search the layouts of `base`'s model on `clusters` (default: `base`'s cluster alone; its options apply to
    every candidate; its layout is not used) for `global_batch_size`, best first by `goal`. `baseline`, a
    scenario on the same model and one of the clusters, is simulated too, to be compared with (whatever the
    screen says of it; its estimated seconds count against the screen's budget). The candidates run on
    `executor` (default: this process), which the search ends: its block is left when the search returns or
    fails. Raises ExecutorError when the executor fails, SpecError when the goal lacks what it needs."""
    started = time.perf_counter()
    model = base.model
    sizes = tuple(clusters) or (base.cluster,)
    owner, estimates, scores = [], [], []
    runner_block = executor if executor is not None else InlineExecutor()
    runner = runner_block.__enter__()  # left below, by the block that runs the candidates (or by a failure)
    try:
        goal.validate()
        # The time limit covers planning too: enumeration stops at it (and at least one candidate is simulated).
        planned = plan_in_slices(runner, model, sizes, space, base, global_batch_size,
                      bounds.time_limit_s - (time.perf_counter() - started) if bounds.time_limit_s else None)
    except BaseException as exc:
        runner_block.__exit__(type(exc), exc, exc.__traceback__)
        raise
    for c, (cluster, (_, cluster_estimates)) in enumerate(zip(sizes, planned)):
        for estimate in cluster_estimates:
            owner.append(c)
            estimates.append(estimate)
            scores.append(score(goal, estimate, plan_for(goal, model, cluster, estimate, global_batch_size)))
    plans = [plan for plan, _ in planned]
    plan = merge_plans(plans)
    runs = [replace(base, cluster=cluster, training=goal.training) for cluster in sizes]
    base_run = replace(baseline, training=goal.training) if baseline is not None else None

    def scenario_of(i: int) -> Scenario:
        return replace(runs[owner[i]], layout=plan.candidates[i])

    wall_deadline = (time.time() + bounds.time_limit_s - (time.perf_counter() - started)
                     if bounds.time_limit_s is not None else None)

    def objective(e: Evaluation) -> float:
        return score(goal, e.tokens_per_s, e.training)

    run: BoundedRun | None = None
    if bounds.exhaustive:
        order = sorted(range(len(plan.candidates)), key=lambda i: (scores[i], i))
        selection = select(order, scenario_of, bounds.max_candidates, screen, base_run)

        def exhaustive() -> Iterator[object]:
            if base_run is not None:
                yield BASELINE, base_run, None
            for n, i in enumerate(selection.chosen):
                yield i, scenario_of(i), wall_deadline if n else None
        tasks: Iterator[object] = exhaustive()
    else:
        # Placement twins are not simulated: each is known when the candidate it is a twin of returns.
        run = BoundedRun(_frontier(plan.candidates, estimates, owner, sizes, goal, model, global_batch_size,
                                   scenario_of, screen, twins(plan.candidates, owner, sizes)),
                         scenario_of, bounds.max_candidates, screen, base_run, wall_deadline)
        tasks = run.tasks()
    planning_s = time.perf_counter() - started
    results: dict[int, Evaluation] = {}
    known_twins = [0]  # results of placement twins, known without simulating them
    returned = 0
    timed_out = False

    shown = [0]  # the last total reported (bounded: never raised again, so the bar only moves forward)

    def to_simulate() -> int:
        # Bounded: what returned, what runs, and what could still win (the frontier's count: it shrinks as the
        # best improves and the bounds tighten; a bound that widens can raise it, which the bar does not show).
        if run is None:
            return len(selection.chosen) + (baseline is not None)
        total = returned + run.outstanding + run.frontier.could_win()
        shown[0] = max(returned, min(shown[0], total) if shown[0] else total)
        return shown[0]

    def stop() -> bool:
        # The time limit counts from the start (planning included); at least one candidate is always simulated.
        nonlocal timed_out
        seconds = bounds.time_limit_s
        if seconds is not None and returned > 0 and time.perf_counter() - started >= seconds:
            timed_out = True
        return timed_out

    def on_result(e: Evaluation | Overdue) -> None:
        nonlocal returned
        returned += 1
        if run is not None:
            run.returned(e, objective)
        if isinstance(e, Evaluation):
            results[e.index] = e
            if run is not None:
                for twin in run.frontier.twins.get(e.index, ()):
                    results[twin] = replace(e, index=twin)
                    known_twins[0] += 1
        if progress is not None:
            progress(returned, max(to_simulate(), returned))

    interrupted = False
    executor_name, worker_count = runner.name, runner.workers
    try:
        with runner_block:
            if progress is not None:  # after the workers started: a progress bar's thread must not be forked
                progress(0, to_simulate())
            runner.run(evaluate_candidate, tasks, on_result, stop)
        if progress is not None and run is not None:  # the search is over: all it will simulate is done
            progress(returned, returned)
    except KeyboardInterrupt:  # Ctrl-C: the workers are ended (the executor's block did it); keep what returned
        if not results:
            raise
        interrupted = True
    if run is not None:
        selection = run.selection()

    base_eval = results.pop(BASELINE, None)

    # Ties go to the earlier candidate (enumeration order), so the order never depends on which worker finished
    # first.
    # Layouts that differ only in placement with equal figures are one row: the first keeps its place and names
    # the others' placements.
    top, folded = fold_placements(sorted(results.values(), key=lambda e: (objective(e), e.index)),
                                  plan.candidates, bounds.top_k)
    best = top[0] if top else None
    could_win = run.frontier.could_win() if run is not None else None
    simulated = len(results) - known_twins[0]
    simulated_all = simulated + (run.stopped_running if run else 0) >= len(selection.chosen)
    if interrupted:
        stopped_by = StoppedBy.INTERRUPTED
    elif plan.truncated or (timed_out and (could_win if run is not None else not simulated_all)):
        stopped_by = StoppedBy.TIME_LIMIT
    elif run is not None and not could_win:
        stopped_by = StoppedBy.PROVEN
    elif selection.ended is Ended.BUDGET:
        stopped_by = StoppedBy.ESTIMATED_TIME
    elif selection.ended is Ended.MAX_CANDIDATES:
        stopped_by = StoppedBy.MAX_CANDIDATES
    else:
        stopped_by = StoppedBy.COMPLETE

    def why(layout: Layout, e: Evaluation, against: Evaluation | None) -> tuple[str, ...]:
        lines = explain(layout, e, against if goal.objective is Objective.TIME else None)
        figure = describe_score(goal, e.training)
        if figure is not None:
            lines.insert(0, figure)
            if against is not None and against.index != e.index:
                worse = objective(e) / objective(against) - 1
                lines.append(f"{100 * worse:.1f}% more {'cost' if goal.objective is Objective.COST else 'days'} "
                             "than the best")
        variants = folded.get(e.index)
        if variants:
            lines.append(f"the same figures with placement {', '.join(variants)} (folded into this row)")
        return tuple(lines)

    ranked = tuple(Ranked(plan.candidates[e.index], sizes[owner[e.index]], e, estimates[e.index],
                          why(plan.candidates[e.index], e, best)) for e in top)
    base_ranked, family_discard = None, None
    if baseline is not None and base_eval is not None:
        base_ranked = Ranked(baseline.layout, baseline.cluster, base_eval, None,
                             why(baseline.layout, base_eval, None))
        record = plan.families.get(family_of(baseline.layout))
        if record is not None and record.feasible == 0 and record.first_discard is not None:
            family_discard = record.first_discard.reason
    screened = tuple(ScreenedCandidate(plan.candidates[s.index], sizes[owner[s.index]], estimates[s.index], s.cost,
                                       s.reason) for s in selection.screened)
    return SearchResult(plan, ranked, simulated, stopped_by, base_ranked, family_discard,
                        RunInfo(executor_name, worker_count, planning_s, time.perf_counter() - started), goal, sizes,
                        screened, selection.estimated_s, run.frontier.report() if run is not None else (),
                        could_win, run.frontier.screened_could_win() if run is not None else 0,
                        run.stopped_running if run is not None else 0,
                        tuple(plan.candidates[i] for i in sorted(results)))
