"""Pipeline schedules: complete, ordered, deadlock-free, with the warm-up and the order of the papers and of
Megatron-LM."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.domain.layout import Schedule
from simcore.domain.schedules import BACKWARD, FORWARD, POLICIES, GPipe, Interleaved1F1B, OneFOneB, Pass

CASES = [
    (Schedule.GPIPE, pp, m, 1) for pp in (1, 2, 4, 8) for m in (1, 3, 8, 16)
] + [
    (Schedule.ONE_F_ONE_B, pp, m, 1) for pp in (1, 2, 4, 8) for m in (1, 3, 8, 16)
] + [
    (Schedule.INTERLEAVED_1F1B, pp, m, v) for pp in (2, 4) for m in (pp, 2 * pp, 4 * pp) for v in (2, 3)
]


def ids(case: tuple[Schedule, int, int, int]) -> str:
    schedule, pp, m, v = case
    return f"{schedule}-pp{pp}-m{m}-v{v}"


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_each_rank_runs_one_forward_and_one_backward_per_microbatch_and_chunk(
        case: tuple[Schedule, int, int, int]) -> None:
    schedule, pp, m, v = case
    for rank in range(pp):
        order = POLICIES[schedule].passes(rank, pp, m, v)
        counts = Counter(order)
        expected = {Pass(d, mb, c) for d in (FORWARD, BACKWARD) for mb in range(m) for c in range(v)}
        assert set(counts) == expected
        assert all(n == 1 for n in counts.values())
        position = {ps: i for i, ps in enumerate(order)}
        for mb in range(m):
            for c in range(v):
                assert position[Pass(FORWARD, mb, c)] < position[Pass(BACKWARD, mb, c)]


@pytest.mark.parametrize("pp", [1, 2, 4, 8])
@pytest.mark.parametrize("m", [1, 2, 5, 8, 16])
def test_1f1b_warm_up_steady_state_and_cool_down(pp: int, m: int) -> None:
    for rank in range(pp):
        order = OneFOneB().passes(rank, pp, m, 1)
        warmup = min(pp - rank - 1, m)
        directions = "".join(ps.direction for ps in order)
        steady = m - warmup
        assert directions == "F" * warmup + "FB" * steady + "B" * warmup
        # Forwards in microbatch order, backwards in microbatch order.
        assert [ps.microbatch for ps in order if ps.direction == FORWARD] == list(range(m))
        assert [ps.microbatch for ps in order if ps.direction == BACKWARD] == list(range(m))
        # At most pp - rank microbatches are in flight (the memory bound of PipeDream-Flush).
        assert max_in_flight(order) == min(pp - rank, m)


def test_gpipe_runs_all_forwards_then_all_backwards() -> None:
    order = GPipe().passes(1, 4, 5, 1)
    assert [ps.direction for ps in order] == [FORWARD] * 5 + [BACKWARD] * 5
    assert [ps.microbatch for ps in order] == [0, 1, 2, 3, 4, 4, 3, 2, 1, 0]
    assert max_in_flight(order) == 5


def max_in_flight(order: list[Pass]) -> int:
    live = peak = 0
    for ps in order:
        live += 1 if ps.direction == FORWARD else -1
        peak = max(peak, live)
    return peak


# -- Megatron-LM's interleaved order -------------------------------------------------------------------------

def megatron_interleaved(rank: int, pp: int, m: int, v: int) -> list[Pass]:
    """Megatron-LM's forward_backward_pipelining_with_interleaving, written out independently: the k-th
    forward runs model chunk (k mod pp*v) // pp; the k-th backward the mirror chunk; each chunk takes its
    microbatches in order (its data iterator and the FIFO of saved inputs)."""
    total = m * v
    # When m == pp Megatron runs all forward passes and then all backward passes.
    warmup = total if m == pp else min((pp - rank - 1) * 2 + (v - 1) * pp, total)

    def chunk(k: int, forward: bool) -> int:
        c = (k % (pp * v)) // pp
        return c if forward else v - 1 - c

    next_forward = [0] * v
    next_backward = [0] * v

    def f(k: int) -> Pass:
        c = chunk(k, True)
        next_forward[c] += 1
        return Pass(FORWARD, next_forward[c] - 1, c)

    def b(k: int) -> Pass:
        c = chunk(k, False)
        next_backward[c] += 1
        return Pass(BACKWARD, next_backward[c] - 1, c)

    order = [f(k) for k in range(warmup)]
    for k in range(total - warmup):
        order.append(f(warmup + k))
        order.append(b(k))
    order += [b(k) for k in range(total - warmup, total)]
    return order


def test_interleaved_small_case_written_out() -> None:
    # pp = 2, m = 4, v = 2, rank 0: warm-up (2-0-1)*2 + (2-1)*2 = 4 forwards.
    F, B = FORWARD, BACKWARD
    expected = [
        Pass(F, 0, 0), Pass(F, 1, 0), Pass(F, 0, 1), Pass(F, 1, 1),
        Pass(F, 2, 0), Pass(B, 0, 1), Pass(F, 3, 0), Pass(B, 1, 1),
        Pass(F, 2, 1), Pass(B, 0, 0), Pass(F, 3, 1), Pass(B, 1, 0),
        Pass(B, 2, 1), Pass(B, 3, 1), Pass(B, 2, 0), Pass(B, 3, 0),
    ]
    assert Interleaved1F1B().passes(0, 2, 4, 2) == expected
    assert megatron_interleaved(0, 2, 4, 2) == expected


@pytest.mark.parametrize(("pp", "m", "v"), [(2, 4, 2), (2, 6, 2), (4, 8, 2), (4, 12, 3), (3, 6, 2), (8, 16, 2)])
def test_interleaved_order_matches_megatron(pp: int, m: int, v: int) -> None:
    for rank in range(pp):
        assert Interleaved1F1B().passes(rank, pp, m, v) == megatron_interleaved(rank, pp, m, v), f"rank {rank}"


@pytest.mark.parametrize(("pp", "m", "v"), [(2, 2, 2), (4, 4, 2)])
def test_interleaved_order_matches_megatron_when_m_equals_pp(pp: int, m: int, v: int) -> None:
    for rank in range(pp):
        assert Interleaved1F1B().passes(rank, pp, m, v) == megatron_interleaved(rank, pp, m, v), f"rank {rank}"


# -- executing the orders --------------------------------------------------------------------------------------

def makespan(schedule: Schedule, pp: int, m: int, v: int, forward_s: float, backward_s: float) -> float:
    """Run every rank's order with free communication: a forward of virtual stage s needs the forward of s-1,
    a backward of s needs the backward of s+1 (the last stage's needs its own forward). Fails on deadlock."""
    orders = [POLICIES[schedule].passes(r, pp, m, v) for r in range(pp)]
    last = pp * v - 1
    done: dict[tuple[str, int, int], float] = {}
    cursor = [0] * pp
    free = [0.0] * pp
    progress = True
    while progress:
        progress = False
        for r in range(pp):
            while cursor[r] < len(orders[r]):
                ps = orders[r][cursor[r]]
                vs = ps.chunk * pp + r
                if ps.direction == FORWARD:
                    dep = ("F", ps.microbatch, vs - 1) if vs > 0 else None
                else:
                    dep = ("B", ps.microbatch, vs + 1) if vs < last else ("F", ps.microbatch, vs)
                if dep is not None and dep not in done:
                    break
                start = max(free[r], done[dep] if dep is not None else 0.0)
                free[r] = start + (forward_s if ps.direction == FORWARD else backward_s)
                done[(ps.direction, ps.microbatch, vs)] = free[r]
                cursor[r] += 1
                progress = True
    assert all(cursor[r] == len(orders[r]) for r in range(pp)), "the schedule deadlocks"
    return max(free)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([Schedule.GPIPE, Schedule.ONE_F_ONE_B]), st.integers(1, 8), st.integers(1, 24))
def test_gpipe_and_1f1b_take_m_plus_p_minus_1_slots(schedule: Schedule, pp: int, m: int) -> None:
    # Equal stages, free communication: (m + p - 1)(t_f + t_b), so the bubble is (p-1)/(m+p-1) of it.
    assert makespan(schedule, pp, m, 1, 1.0, 2.0) == pytest.approx((m + pp - 1) * 3.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(1, 4), st.integers(2, 4))
def test_interleaved_is_deadlock_free_and_shrinks_the_bubble_by_v(pp: int, groups: int, v: int) -> None:
    m = groups * pp
    # Each chunk costs 1/v of a stage: t_f = 1/v, t_b = 2/v. Ideal m(t_f+t_b) per rank; bubble (p-1)(t_f+t_b)/v.
    span = makespan(Schedule.INTERLEAVED_1F1B, pp, m, v, 1.0 / v, 2.0 / v)
    assert span == pytest.approx(m * 3.0 + (pp - 1) * 3.0 / v)
