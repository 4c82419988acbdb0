"""The engine's event loop (simcore/events.py) against SimPy's own processes and timeouts: the same order of
simultaneous events, waits on events and signals, and clear errors for what it does not support."""

from __future__ import annotations

from collections.abc import Generator

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.cost.memory import walk_in_flight
from simcore.domain.layout import Layout, Schedule
from simcore.domain.schedules import BACKWARD, POLICIES
from simcore.engine.clock import Clock, Process, Signal, start


def _simpy_trace(delays: list[list[float]]) -> list[tuple[float, int, int]]:
    env = simpy.Environment()
    log: list[tuple[float, int, int]] = []

    def proc(name: int, steps: list[float]) -> Generator[simpy.Event, object, None]:
        for i, d in enumerate(steps):
            yield env.timeout(d)
            log.append((env.now, name, i))

    for name, steps in enumerate(delays):
        env.process(proc(name, steps))
    env.run()
    return log


def _clock_trace(delays: list[list[float]]) -> list[tuple[float, int, int]]:
    env = Clock()
    log: list[tuple[float, int, int]] = []

    def proc(name: int, steps: list[float]) -> Process:
        for i, d in enumerate(steps):
            yield d
            log.append((env.now, name, i))

    for name, steps in enumerate(delays):
        start(env, proc(name, steps))
    env.run()
    return log


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.5]), max_size=6), min_size=1, max_size=5))
def test_processes_wake_in_simpys_order_even_when_simultaneous(delays: list[list[float]]) -> None:
    assert _clock_trace(delays) == _simpy_trace(delays)


def test_a_process_waits_for_a_signal_and_for_an_event() -> None:
    env = Clock()
    signal, event = Signal(), env.event()
    log: list[tuple[str, float]] = []

    def waiter() -> Process:
        yield signal
        log.append(("signal", env.now))
        yield event
        log.append(("event", env.now))
        yield signal  # already fired: continues at once
        log.append(("again", env.now))

    def firer() -> Process:
        yield 2.0
        signal.fire(env)
        yield 3.0
        event.succeed()

    start(env, waiter())
    start(env, firer())
    env.run()
    assert log == [("signal", 2.0), ("event", 5.0), ("again", 5.0)]


def test_a_signal_fired_before_the_wait_does_not_block() -> None:
    env = Clock()
    signal = Signal()
    signal.fire(env)
    times: list[float] = []

    def waiter() -> Process:
        yield 1.0
        yield signal
        times.append(env.now)

    start(env, waiter())
    env.run()
    assert times == [1.0]


def test_what_the_clock_refuses() -> None:
    env = Clock()
    signal = Signal()
    signal.fire(env)
    with pytest.raises(RuntimeError, match="once"):
        signal.fire(env)
    with pytest.raises(ValueError, match="negative delay"):
        env.call_in(-1.0, lambda: None)
    with pytest.raises(NotImplementedError):
        env.step()
    with pytest.raises(ValueError, match="until"):
        env.run(until=1.0)


def test_a_failed_event_ends_the_run() -> None:
    env = Clock()
    event = env.event()

    def waiter() -> Process:
        yield event

    start(env, waiter())
    env.call_in(1.0, lambda: event.fail(KeyError("lost")))
    with pytest.raises(KeyError):
        env.run()


@pytest.mark.parametrize("schedule, v", [(Schedule.GPIPE, 1), (Schedule.ONE_F_ONE_B, 1),
                                         (Schedule.INTERLEAVED_1F1B, 2), (Schedule.INTERLEAVED_1F1B, 3)])
def test_memoised_walk_gives_the_walks_peak(schedule: Schedule, v: int) -> None:
    pp, m = 4, 8
    layout = Layout(dp=1, tp=1, pp=pp, microbatch_size=1, global_batch_size=m, schedule=schedule, virtual_stages=v)
    for rank in range(pp):
        for sizes in ({c: 3.0 + 2 * c for c in range(v)}, {c: 7.0 - c for c in range(v)}):
            held = peak = 0.0
            for ps in POLICIES[schedule].passes(rank, pp, m, v):
                held += sizes[ps.chunk] * (-1 if ps.direction == BACKWARD else 1)
                peak = max(peak, held)
            assert walk_in_flight(layout, rank, sizes) == peak
