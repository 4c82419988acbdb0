"""The closed-form fill and drain of a pipeline with unequal stages (simcore.planning.pipeline_time), against the
schedules' own pass orders (simcore.domain.schedules) run pass by pass with no communication."""

from __future__ import annotations

import random

import pytest

from simcore.domain.layout import Schedule
from simcore.domain.schedules import FORWARD, GPipe, OneFOneB, SchedulePolicy
from simcore.planning.pipeline_time import BUBBLE_SHARE, fill_drain_s, one_f_one_b_s


def run_passes(policy: SchedulePolicy, forward: list[float], backward: list[float], m: int) -> float:
    """The iteration of `policy`'s orders: each pass starts when its rank is free and its input is there (a
    forward's from the rank before, a backward's from the rank after, or the last rank's own forward)."""
    p = len(forward)
    orders = [policy.passes(r, p, m, 1) for r in range(p)]
    done: dict[tuple[int, str, int], float] = {}
    free, at = [0.0] * p, [0] * p
    while any(at[r] < len(orders[r]) for r in range(p)):
        moved = False
        for r in range(p):
            while at[r] < len(orders[r]):
                step = orders[r][at[r]]
                forward_pass = step.direction == FORWARD
                needs = (r - 1, FORWARD, step.microbatch) if forward_pass else \
                    (r, FORWARD, step.microbatch) if r == p - 1 else (r + 1, step.direction, step.microbatch)
                if forward_pass and r == 0:
                    ready = 0.0
                elif needs in done:
                    ready = done[needs]
                else:
                    break
                free[r] = max(free[r], ready) + (forward[r] if forward_pass else backward[r])
                done[(r, step.direction, step.microbatch)] = free[r]
                at[r] += 1
                moved = True
        assert moved, "the orders deadlock"
    return max(free)


@pytest.mark.parametrize(("p", "m"), [(1, 1), (1, 5), (2, 1), (4, 2), (4, 4), (8, 3), (8, 32)])
def test_equal_stages_give_narayanans_bubble(p: int, m: int) -> None:
    assert one_f_one_b_s([1.0] * p, [2.0] * p, m) == pytest.approx((m + p - 1) * 3.0)
    assert fill_drain_s([3.0] * p, 1 / 3, m, 1, Schedule.ONE_F_ONE_B) == pytest.approx((p - 1) * 3.0)
    assert fill_drain_s([3.0] * p, 1 / 3, m, 4, Schedule.INTERLEAVED_1F1B) == pytest.approx((p - 1) * 3.0 / 4)
    assert fill_drain_s([3.0] * p, 1 / 3, m, 1, Schedule.ZB_H1) == pytest.approx(
        (p - 1) * 3.0 * BUBBLE_SHARE[Schedule.ZB_H1])


def test_unequal_stages_under_1f1b_are_never_shorter_than_the_schedule_and_at_most_3_percent_longer() -> None:
    draw = random.Random(11)
    worst = 1.0
    for _ in range(300):
        p = draw.choice([2, 3, 4, 6, 8, 16])
        m = draw.choice([1, 2, 3, p // 2 or 1, p - 1 or 1, p, 2 * p + 1, 4 * p])
        layers = [draw.choice([1, 2, 3]) for _ in range(p)]
        share = draw.uniform(0.25, 0.4)  # the forward's share of a stage
        stages = [n + (0.3 if r == 0 else 0.0) + (0.5 * draw.random() if r == p - 1 else 0.0)
                  for r, n in enumerate(layers)]
        forward, backward = [share * s for s in stages], [(1 - share) * s for s in stages]
        exact = run_passes(OneFOneB(), forward, backward, m)
        closed = one_f_one_b_s(forward, backward, m)
        assert closed <= exact * (1 + 1e-12)  # never pessimistic: a bound built on it is not exceeded by it
        worst = max(worst, exact / closed)
        assert fill_drain_s(stages, share, m, 1, Schedule.ONE_F_ONE_B) == pytest.approx(closed - m * max(stages))
    assert worst <= 1.03


def test_a_split_with_a_remainder_hides_part_of_its_fill_and_drain() -> None:
    # 96 layers on 64 stages: 32 hold two layers. (p-1) x the slowest stage is over 1.5 times the fill and drain
    # the schedule gives; the closed form is within 1% of it.
    from simcore.cost.partition import split_layers

    layers = split_layers(96, 64)
    forward, backward = [0.05 * n for n in layers], [0.12 * n for n in layers]
    stages = [f + b for f, b in zip(forward, backward)]
    exact = run_passes(OneFOneB(), forward, backward, 192) - 192 * max(stages)
    closed = fill_drain_s(stages, 0.05 / 0.17, 192, 1, Schedule.ONE_F_ONE_B)
    assert closed == pytest.approx(exact, rel=0.01)
    assert 63 * max(stages) > 1.5 * exact


def test_gpipe_is_two_flow_shops() -> None:
    stages = [1.0, 3.0, 2.0, 2.5]
    share = 1 / 3
    exact = run_passes(GPipe(), [share * s for s in stages], [(1 - share) * s for s in stages], 5)
    assert exact == pytest.approx(sum(stages) + 4 * max(stages))
    assert fill_drain_s(stages, share, 5, 1, Schedule.GPIPE) == pytest.approx(exact - 5 * max(stages))
