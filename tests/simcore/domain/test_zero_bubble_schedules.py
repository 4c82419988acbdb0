"""Zero-bubble schedules: complete (each microbatch's forward, and its backward whole or split into I then W),
ordered, deadlock-free, and ZB-H1 as the authors' patch of Megatron-LM's 1F1B orders it."""

from __future__ import annotations

import random

import pytest

from simcore.domain.layout import Schedule
from simcore.domain.schedules import (
    BACKWARD,
    BACKWARD_INPUT,
    BACKWARD_WEIGHT,
    FORWARD,
    OVERLAPPED,
    POLICIES,
    Pass,
    ZbH1,
    releases_activations,
)

ZERO_BUBBLE = [Schedule.ZB_H1, Schedule.ZB_H2]


def in_flight(order: list[Pass]) -> int:
    held = peak = 0
    for ps in order:
        if ps.direction == FORWARD:
            held += 1
            peak = max(peak, held)
        elif releases_activations(ps.direction):
            held -= 1
    return peak


@pytest.mark.parametrize("schedule", ZERO_BUBBLE)
@pytest.mark.parametrize("pp,m", [(1, 1), (2, 2), (4, 4), (4, 9), (8, 8), (8, 24)])
def test_every_microbatch_runs_forward_then_input_then_weight_gradient(schedule: Schedule, pp: int, m: int) -> None:
    for rank in range(pp):
        order = POLICIES[schedule].passes(rank, pp, m, 1)
        position = {ps: i for i, ps in enumerate(order)}
        assert len(position) == len(order)
        for mb in range(m):
            f = position[Pass(FORWARD, mb, 0)]
            if Pass(BACKWARD, mb, 0) in position:
                assert f < position[Pass(BACKWARD, mb, 0)]
                assert Pass(BACKWARD_INPUT, mb, 0) not in position
            else:
                assert f < position[Pass(BACKWARD_INPUT, mb, 0)] < position[Pass(BACKWARD_WEIGHT, mb, 0)]
        # input gradients in microbatch order (the previous stage receives them in that order)
        grads = [ps.microbatch for ps in order if ps.direction in (BACKWARD, BACKWARD_INPUT)]
        assert grads == list(range(m))


def test_zb_h1_small_case_written_out() -> None:
    # p = 4, m = 6: rank 0 is 1F1B; rank r > 0 splits its first r steady backward passes, the last steady one and
    # the cool-down's, and delays each W by r backward passes.
    f, b, i, w = (lambda k: Pass(FORWARD, k, 0)), (lambda k: Pass(BACKWARD, k, 0)), \
        (lambda k: Pass(BACKWARD_INPUT, k, 0)), (lambda k: Pass(BACKWARD_WEIGHT, k, 0))
    policy = ZbH1()
    assert policy.passes(0, 4, 6, 1) == [f(0), f(1), f(2), f(3), b(0), f(4), b(1), f(5), b(2), b(3), b(4), b(5)]
    assert policy.passes(2, 4, 6, 1) == [f(0), f(1), i(0), f(2), i(1), f(3), b(2), f(4), b(3), f(5), i(4), w(0),
                                         i(5), w(1), w(4), w(5)]
    assert policy.passes(3, 4, 6, 1) == [f(0), i(0), f(1), i(1), f(2), i(2), f(3), b(3), f(4), b(4), f(5), i(5),
                                         w(0), w(1), w(2), w(5)]


@pytest.mark.parametrize("pp,m", [(4, 4), (4, 16), (8, 8), (8, 32)])
def test_zb_h1_holds_at_most_pp_microbatches_like_1f1b_on_its_first_stage(pp: int, m: int) -> None:
    peaks = [in_flight(ZbH1().passes(rank, pp, m, 1)) for rank in range(pp)]
    assert max(peaks) == pp


def expand(order: list[Pass]) -> list[Pass]:
    """DualPipe's overlapped pairs as their forward and whole backward passes."""
    out = []
    for ps in order:
        if ps.direction == OVERLAPPED:
            out += [Pass(FORWARD, ps.microbatch, ps.chunk), Pass(BACKWARD, ps.backward_microbatch, ps.backward_chunk)]
        else:
            out.append(ps)
    return out


@pytest.mark.parametrize("schedule", [Schedule.ZB_V, Schedule.DUALPIPE])
@pytest.mark.parametrize("pp,m", [(2, 4), (4, 8), (4, 12), (8, 16), (8, 20)])
def test_two_chunk_schedules_run_every_microbatch_through_their_chunks(schedule: Schedule, pp: int, m: int) -> None:
    for rank in range(pp):
        order = expand(POLICIES[schedule].passes(rank, pp, m, 2))
        position = {ps: i for i, ps in enumerate(order)}
        assert len(position) == len(order)
        for chunk in (0, 1):
            # ZB-V: every microbatch through both chunks; DualPipe: each direction's half through its chunk
            mbs = range(m) if schedule is Schedule.ZB_V else range(chunk * m // 2, (chunk + 1) * m // 2)
            for mb in mbs:
                f = position[Pass(FORWARD, mb, chunk)]
                if Pass(BACKWARD, mb, chunk) in position:
                    assert f < position[Pass(BACKWARD, mb, chunk)]
                else:
                    assert f < position[Pass(BACKWARD_INPUT, mb, chunk)] < position[Pass(BACKWARD_WEIGHT, mb, chunk)]
            assert len([ps for ps in order if ps.chunk == chunk]) <= 3 * len(mbs)


def test_dualpipe_first_rank_written_out() -> None:
    # pp = 4, m = 8 (four each way): deepseek-ai/DualPipe's eight steps on rank 0; microbatches 4-7 go up.
    order = POLICIES[Schedule.DUALPIPE].passes(0, 4, 8, 2)
    text = " ".join(ps.direction + str(ps.microbatch) + (f"/{ps.backward_microbatch}" if ps.direction == OVERLAPPED
                                                         else "") for ps in order)
    assert text == "F0 F1 F2 F4 I4 W4 F5 FB3/5 FB6/0 B6 FB7/1 B7 I2 W2 I3 W3"


@pytest.mark.parametrize("pp,m", [(4, 8), (8, 16), (8, 32)])
def test_zb_h2_holds_about_twice_1f1b_and_zb_v_1f1b(pp: int, m: int) -> None:
    h2 = max(in_flight(POLICIES[Schedule.ZB_H2].passes(r, pp, m, 1)) for r in range(pp))
    assert pp < h2 <= 2 * pp
    v = max(in_flight(POLICIES[Schedule.ZB_V].passes(r, pp, m, 2)) for r in range(pp))
    assert v <= 2 * pp  # chunk-microbatches: each chunk holds half a stage's layers


def written(order: list[Pass]) -> str:
    return " ".join(f"{ps.direction}{ps.microbatch}{'ab'[ps.chunk]}" for ps in order)


def test_zb_v_small_case_is_the_authors_order() -> None:
    # p = 2, m = 4, equal costs: sail-sg/zero-bubble-pipeline-parallelism's zbv.PipelineGraph.create_schedule
    # (chunk a = the way down, b = the way up to the loss on rank 0; I the input gradient, W the weight gradient).
    orders = [POLICIES[Schedule.ZB_V].passes(r, 2, 4, 2) for r in range(2)]
    assert written(orders[0]) == ("F0a F1a F2a F0b I0b W0b F1b I1b W1b F3a I0a W0a F2b I2b W2b I1a W1a F3b I3b I2a "
                                  "W3b I3a W2a W3a")
    assert written(orders[1]) == ("F0a F0b F1a F1b I0b W0b F2a I0a W0a F2b I1b W1b F3a I1a W1a F3b I2b I2a I3b I3a "
                                  "W2b W2a W3b W3a")


def held_between_forward_and_weight_gradient(order: list[Pass]) -> int:
    held = peak = 0
    for ps in order:
        held += 1 if ps.direction == FORWARD else -1 if ps.direction == BACKWARD_WEIGHT else 0
        peak = max(peak, held)
    return peak


@pytest.mark.parametrize("seed", range(12))
def test_zb_v_on_uneven_costs_is_complete_and_holds_at_most_2p(seed: int) -> None:
    rng = random.Random(seed)
    pp = rng.randint(2, 8)
    m = rng.randint(pp, 3 * pp)
    costs = tuple((rng.uniform(0.5, 2), rng.uniform(0.5, 3), rng.uniform(0.2, 2)) for _ in range(2 * pp))
    for rank in range(pp):
        order = POLICIES[Schedule.ZB_V].passes(rank, pp, m, 2, costs)
        assert sorted(order, key=lambda ps: (ps.chunk, ps.microbatch, ps.direction)) == sorted(
            (Pass(d, mb, c) for c in (0, 1) for mb in range(m) for d in (FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHT)),
            key=lambda ps: (ps.chunk, ps.microbatch, ps.direction))
        position = {ps: i for i, ps in enumerate(order)}
        for c in (0, 1):
            for mb in range(m):
                assert position[Pass(FORWARD, mb, c)] < position[Pass(BACKWARD_INPUT, mb, c)] < position[
                    Pass(BACKWARD_WEIGHT, mb, c)]
        assert held_between_forward_and_weight_gradient(order) <= 2 * pp
