"""The screen: candidates over a limit are kept from simulation (and do not count against max_candidates), the
budget of estimated seconds ends the selection at the first candidate past it (the baseline's seconds first),
and a search under a screen simulates exactly what the selection chose."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore import MODEL_PRESETS, NODE_PRESETS, Layout, Recompute, Scenario, model_from_fields, sized
from simcore.planning.prune import plan_search
from simcore.planning.screen import MIB, CandidateCost, Ended, Screen, select
from simcore.planning.search import Bounds, StoppedBy, search
from simcore.planning.space import Space
from simcore.run_cost import estimate_cost
from topology.hardware import GPUS

BASE = Scenario(model=model_from_fields(MODEL_PRESETS["gpt3-350m"]), cluster=sized(NODE_PRESETS["dgx-a100"], 8),
                layout=Layout(dp=1, tp=1, pp=1, microbatch_size=1, global_batch_size=16))
SPACE = Space(tp=(2, 4), recompute=(Recompute.SELECTIVE,), zero_stage=(0, 1), max_microbatch_size=2)

# Candidate i (its layout's global batch carries i) costs COSTS[i]: (events, seconds, MiB).
COSTS = {0: (100, 1.0, 10), 1: (5_000, 1.0, 10), 2: (100, 2.0, 10), 3: (100, 1.0, 900), 4: (100, 3.0, 10),
         5: (100, 1.0, 10)}


def scenario_of(index: int) -> Scenario:
    return replace(BASE, layout=replace(BASE.layout, global_batch_size=index + 1))


def cost(scenario: Scenario) -> CandidateCost:
    events, seconds, mib = COSTS[scenario.layout.global_batch_size - 1]
    return CandidateCost(events, seconds, mib * MIB)


def test_without_a_screen_the_first_max_candidates_are_taken() -> None:
    chosen = select([3, 1, 2], scenario_of, 2)
    assert chosen.chosen == (3, 1) and chosen.ended is Ended.MAX_CANDIDATES and chosen.estimated_s is None
    assert select([3, 1, 2], scenario_of, None).ended is Ended.COMPLETE


def test_candidates_over_a_limit_are_screened_and_do_not_count() -> None:
    screen = Screen(cost, max_events=1_000, max_memory_bytes=500 * MIB)
    selection = select(list(range(6)), scenario_of, 3, screen)
    assert selection.chosen == (0, 2, 4)  # 1 is over the events, 3 over the memory: the limit of 3 reaches 4
    assert [(s.index, s.reason) for s in selection.screened] == [
        (1, "estimated 5,000 engine events, over the limit of 1,000"),
        (3, "estimated 900 MiB of memory to simulate, over the limit of 500 MiB")]
    assert selection.ended is Ended.MAX_CANDIDATES and selection.estimated_s == 6.0


def test_the_budget_ends_the_selection_at_the_first_candidate_past_it() -> None:
    screen = Screen(cost, budget_s=4.5)
    selection = select([0, 2, 4, 5], scenario_of, None, screen)
    # 1 + 2 = 3 s; candidate 4 (3 s) would make 6: the selection ends there, and 5 (1 s) does not take its place.
    assert selection.chosen == (0, 2) and selection.ended is Ended.BUDGET and selection.estimated_s == 3.0
    # The baseline's seconds are spent first.
    with_baseline = select([0, 2, 4, 5], scenario_of, None, screen, baseline=scenario_of(4))
    assert with_baseline.chosen == (0,) and with_baseline.estimated_s == 4.0
    # A candidate that alone is over the whole budget is screened, and the walk goes on past it.
    alone = select([4, 0], scenario_of, None, Screen(cost, budget_s=2.5))
    assert alone.chosen == (0,) and alone.ended is Ended.COMPLETE
    assert alone.screened[0].reason == "estimated 3.0 s to simulate, over the search's budget of 2.5 s"


def estimated(scenario: Scenario) -> CandidateCost:
    """The estimate the service screens by; every candidate here costs 1 s, so a budget counts candidates."""
    return CandidateCost(estimate_cost(scenario).events, 1.0, 0)


@pytest.mark.slow
def test_a_search_simulates_what_the_screen_chose() -> None:
    cluster = BASE.cluster
    plan = plan_search(BASE.model, cluster.num_gpus, cluster.gpus_per_node, GPUS[cluster.gpu], 16, SPACE,
                       BASE.cost_parameters)
    events = sorted(estimated(replace(BASE, layout=layout)).events for layout in plan.candidates)
    limit = events[len(events) // 2]
    screened = search(BASE, 16, SPACE, Bounds(max_candidates=None, exhaustive=True),
                      screen=Screen(estimated, max_events=limit))
    over = {layout for layout in plan.candidates if estimated(replace(BASE, layout=layout)).events > limit}
    assert over and {s.layout for s in screened.screened} == over
    assert all(s.reason.endswith(f"over the limit of {limit:,}") for s in screened.screened)
    assert screened.simulated == len(plan.candidates) - len(over) and screened.stopped_by is StoppedBy.COMPLETE
    assert not over & {r.layout for r in screened.top}
    # Simulating only what can win, the search meets (and reports) the screened candidates that could have won.
    bounded = search(BASE, 16, SPACE, Bounds(max_candidates=None), screen=Screen(estimated, max_events=limit))
    assert {s.layout for s in bounded.screened} <= over and not over & {r.layout for r in bounded.top}
    assert bounded.simulated < screened.simulated
    budgeted = search(BASE, 16, SPACE, Bounds(max_candidates=None), screen=Screen(estimated, budget_s=3.0))
    assert budgeted.simulated == 3 and budgeted.stopped_by is StoppedBy.ESTIMATED_TIME
    assert budgeted.estimated_s == 3.0
    assert search(BASE, 16, SPACE, Bounds(max_candidates=2)).estimated_s is None  # no screen
