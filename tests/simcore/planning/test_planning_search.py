"""A search on domain objects: the candidates simulated are the estimate's most promising, ranked by the
simulator's tokens/s; the bounds say why it stopped; the baseline is compared; workers keep one network."""

from __future__ import annotations

import gc
import time
from dataclasses import replace

import pytest

from service.executors import make_executor
from simcore import (
    MODEL_PRESETS,
    NODE_PRESETS,
    CollectiveAlgorithm,
    Layout,
    Recompute,
    Scenario,
    Schedule,
    model_from_fields,
    simulate,
    sized,
)
from simcore.planning.estimate import Estimator
from simcore.planning.search import Bounds, StoppedBy, search
from simcore.planning.space import Space
from simcore.planning.worker import NetworkCache, gc_paused, simulate_in_worker

pytestmark = pytest.mark.slow  # minutes under load: outside the fast lane (pytest -m "not slow")

BASE = Scenario(model=model_from_fields(MODEL_PRESETS["gpt3-350m"]), cluster=sized(NODE_PRESETS["dgx-a100"], 8),
                layout=Layout(dp=1, tp=1, pp=1, microbatch_size=1, global_batch_size=16))
SPACE = Space(tp=(2, 4), recompute=(Recompute.SELECTIVE,), zero_stage=(0, 1), max_microbatch_size=2)


def test_the_most_promising_are_simulated_and_ranked_by_the_simulator() -> None:
    result = search(BASE, 16, SPACE, Bounds(top_k=3, max_candidates=6))
    plan = result.plan
    estimator = Estimator(BASE.model, BASE.cluster)
    estimates = sorted(((-estimator.tokens_per_s(lay), i) for i, lay in enumerate(plan.candidates)))
    promising = {plan.candidates[i] for _, i in estimates[:6]}
    assert result.simulated == 6 and result.stopped_by is StoppedBy.MAX_CANDIDATES
    assert len(result.top) == 3 and {r.layout for r in result.top} <= promising
    speeds = [r.evaluation.tokens_per_s for r in result.top]
    assert speeds == sorted(speeds, reverse=True)
    best = result.best
    assert best is not None and best.estimated_tokens_per_s == estimator.tokens_per_s(best.layout)
    assert simulate(replace(BASE, layout=best.layout)).metrics.tokens_per_s == best.evaluation.tokens_per_s
    assert result.run.executor == "inline" and result.run.workers == 1


def test_a_whole_space_completes_and_a_baseline_is_compared() -> None:
    baseline = replace(BASE, layout=Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=16))
    space = replace(SPACE, tp=(4,), zero_stage=(1,), placement=("tp,dp,pp",))
    result = search(BASE, 16, space, Bounds(max_candidates=None, exhaustive=True), baseline=baseline)
    assert result.stopped_by is StoppedBy.COMPLETE and result.simulated == len(result.plan.candidates)
    assert result.baseline is not None and result.baseline.layout == baseline.layout
    assert result.best is not None and result.best_speedup == (
        result.best.evaluation.tokens_per_s / result.baseline.evaluation.tokens_per_s)
    assert result.baseline_family_discard is None  # DP 8 x TP 1 x PP 1 is not in this space


def test_a_proven_best_is_the_exhaustive_best_with_fewer_simulated() -> None:
    space = replace(SPACE, zero_stage=(0, 1, 2), recompute=(Recompute.NONE, Recompute.SELECTIVE))
    everything = search(BASE, 16, space, Bounds(max_candidates=None, exhaustive=True))
    proven = search(BASE, 16, space, Bounds(max_candidates=None))
    assert proven.stopped_by is StoppedBy.PROVEN and proven.could_win == 0
    assert proven.simulated < everything.simulated == len(everything.plan.candidates)
    assert proven.best is not None and everything.best is not None
    assert proven.best.evaluation.tokens_per_s == everything.best.evaluation.tokens_per_s
    # every kind it simulated says how far the estimate was off, and its bound covers what it saw
    assert proven.errors and all(r.low <= r.ratio_min and r.ratio_max <= r.high
                                 for r in proven.errors if r.simulated)


def test_the_same_candidates_whatever_the_workers() -> None:
    one = search(BASE, 16, SPACE, Bounds(max_candidates=None))
    two = search(BASE, 16, SPACE, Bounds(max_candidates=None), executor=make_executor("local", workers=2))
    assert one.simulated == two.simulated and [r.layout for r in one.top] == [r.layout for r in two.top]
    assert [r.evaluation.tokens_per_s for r in one.top] == [r.evaluation.tokens_per_s for r in two.top]


def test_a_time_limit_still_simulates_one() -> None:
    result = search(BASE, 16, SPACE, Bounds(max_candidates=None, time_limit_s=1e-9))
    assert result.stopped_by is StoppedBy.TIME_LIMIT and result.simulated == 1


def test_a_time_limit_covers_planning() -> None:
    # GPT-3 175B on 1,024 GPUs: 77,436 layouts to enumerate and prune (seconds); the limit stops enumerating.
    base = replace(BASE, model=model_from_fields(MODEL_PRESETS["gpt3-175b"]),
                   cluster=sized(NODE_PRESETS["dgx-a100"], 1024))
    started = time.perf_counter()
    result = search(base, 1536, Space(), Bounds(max_candidates=1, time_limit_s=0.2))
    assert result.plan.truncated and 0 < result.plan.generated < 77_436
    assert result.stopped_by is StoppedBy.TIME_LIMIT and result.simulated == 1
    assert result.run.planning_s < 2.0 and time.perf_counter() - started < 60


def test_a_worker_keeps_the_network_of_its_cluster() -> None:
    cache = NetworkCache()
    first = cache.network_for(BASE)
    assert cache.network_for(replace(BASE, layout=Layout(dp=2, tp=4, pp=1, microbatch_size=1,
                                                         global_batch_size=16))) is first
    tree = cache.network_for(replace(BASE, algorithm=CollectiveAlgorithm.TREE))
    assert tree is not first and tree.algorithm is CollectiveAlgorithm.TREE
    assert cache.network_for(replace(BASE, cluster=sized(BASE.cluster, 16))).spec.num_gpus == 16


def test_the_collector_pauses_for_a_candidate_only() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_reused_network_gives_the_same_results() -> None:
    """Scenarios on one cluster, then another, then the first again: each as simulate gives it on its own."""
    layouts = [Layout(dp=2, tp=4, pp=1, microbatch_size=1, global_batch_size=16, zero_stage=1),
               Layout(dp=1, tp=2, pp=4, microbatch_size=1, global_batch_size=16)]
    scenarios = [replace(BASE, layout=layouts[0]), replace(BASE, layout=layouts[1]),
                 replace(BASE, layout=replace(layouts[0], dp=4), cluster=sized(BASE.cluster, 16)),
                 replace(BASE, layout=layouts[0])]
    for scenario in scenarios:
        assert simulate_in_worker(scenario).metrics == simulate(scenario).metrics


def test_a_space_listing_the_new_schedules_searches_them_with_their_rules() -> None:
    space = replace(SPACE, tp=(1,), zero_stage=(0,), recompute=(Recompute.NONE,), placement=("tp,dp,pp",),
                    schedule=(Schedule.ONE_F_ONE_B, Schedule.ZB_H1, Schedule.ZB_H2, Schedule.ZB_V, Schedule.DUALPIPE))
    result = search(BASE, 16, space, Bounds(max_candidates=None))
    schedules = {r.layout.schedule for r in result.top} | {lay.schedule for lay in result.plan.candidates}
    assert {Schedule.ZB_H1, Schedule.ZB_H2, Schedule.ZB_V, Schedule.DUALPIPE} <= schedules
    # m = 16 / (dp x microbatch): DualPipe with pp 8 needs m >= 16, so with dp 1 and microbatch 2 it is discarded
    assert all(not (lay.schedule is Schedule.DUALPIPE and lay.num_microbatches < 2 * lay.pp)
               for lay in result.plan.candidates)
