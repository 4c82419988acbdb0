"""Zero-bubble schedules: complete (each microbatch's forward, and its backward whole or split into I then W),
ordered, deadlock-free, and ZB-H1 as the authors' patch of Megatron-LM's 1F1B orders it."""

from __future__ import annotations

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
