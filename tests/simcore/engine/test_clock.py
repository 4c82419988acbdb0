"""The engine's clock (simcore/engine/clock.py), a simpy.Environment: the order of calls at one instant, exact on
small cases and the same as plain SimPy processes' on random programs (the urgent calls of one instant made by one
process included); waits on events and signals; stepping it as a user who debugs a stuck rank would; what it
refuses."""

from __future__ import annotations

import math
from collections.abc import Generator
from functools import partial

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from simcore.engine.clock import Clock, Event, Process, Signal, start

# A program: per process, steps of ("wait", seconds), ("soon", tag) or ("urgent", tag). A process logs each step
# it reaches; a soon call logs its tag where an event succeeded now is processed, an urgent one where a process
# started now begins.
Program = list[list[tuple[str, float]]]
Log = list[tuple[float, str]]


def _note_event(log: Log, env: simpy.Environment, tag: str, _event: simpy.Event) -> None:
    log.append((env.now, tag))


def _on_simpy(program: Program) -> Log:
    env = simpy.Environment()
    log: Log = []

    def note(what: str) -> Generator[simpy.Event, object, None]:
        log.append((env.now, what))
        yield from ()

    def proc(name: int, steps: list[tuple[str, float]]) -> Generator[simpy.Event, object, None]:
        for i, (kind, value) in enumerate(steps):
            tag = f"p{name}.{i}"
            if kind == "wait":
                yield env.timeout(value)
                log.append((env.now, tag))
            elif kind == "soon":
                event = env.event()
                event.callbacks.append(partial(_note_event, log, env, tag))
                event.succeed()
            else:
                env.process(note(tag))

    for name, steps in enumerate(program):
        env.process(proc(name, steps))
    env.run()
    return log


def _on_clock(program: Program, every: int | None = None, observed: list[float] | None = None) -> Log:
    """The program on the clock: `run`, or with `every` `run_observed`, whose observer notes the time in
    `observed`."""
    clock = Clock()
    log: Log = []

    def note(tag: str) -> None:
        log.append((clock.now, tag))

    def proc(name: int, steps: list[tuple[str, float]]) -> Process:
        for i, (kind, value) in enumerate(steps):
            tag = f"p{name}.{i}"
            if kind == "wait":
                yield value
                log.append((clock.now, tag))
            elif kind == "soon":
                clock.call_soon(note, tag)
            else:
                clock.call_urgently(note, tag)

    for name, steps in enumerate(program):
        start(clock, proc(name, steps))
    if every is None:
        clock.run()
    else:
        clock.run_observed(lambda: (observed if observed is not None else []).append(clock.now), every)
    return log


# 1e-300 s moves the clock only at t = 0 (after that, now + 1e-300 == now): a timer due at the instant it is made.
_STEP = st.one_of(st.tuples(st.just("wait"), st.sampled_from([0.0, 0.5, 1.0, 1.5, 1e-300])),
                  st.tuples(st.sampled_from(["soon", "urgent"]), st.just(0.0)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_STEP, max_size=8), min_size=1, max_size=5))
def test_calls_run_in_simpys_order_even_when_simultaneous(program: Program) -> None:
    assert _on_clock(program) == _on_simpy(program)


def test_at_one_instant_urgent_calls_come_first_then_timers_due_now_then_soon_calls() -> None:
    clock = Clock()
    log: list[str] = []

    def at_one() -> None:
        log.append("timer a")
        clock.call_soon(log.append, "soon 1")
        clock.call_in(0.0, log.append, "soon 2")  # no delay: the same as call_soon
        clock.call_urgently(log.append, "urgent")
        clock.call_in(1e-300, log.append, "soon 3")  # too small to move the clock at t = 1

    clock.call_in(1.0, at_one)
    clock.call_in(1.0, log.append, "timer b")  # made before the clock reached 1: before every soon call
    clock.call_in(2.0, log.append, "later")
    clock.run()
    assert log == ["timer a", "urgent", "timer b", "soon 1", "soon 2", "soon 3", "later"]
    assert clock.now == 2.0


def test_equal_times_keep_the_order_they_were_scheduled_in() -> None:
    clock = Clock()
    log: list[int] = []
    for i in range(20):
        clock.call_in(0.25 if i % 2 else 0.5, log.append, i)
    clock.run()
    assert log == [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18]


def test_a_process_waits_for_a_signal_and_for_an_event() -> None:
    clock = Clock()
    signal, event = Signal(), Event(clock)
    log: list[tuple[str, float]] = []

    def waiter() -> Process:
        yield signal
        log.append(("signal", clock.now))
        yield event
        log.append(("event", clock.now))
        yield signal  # already fired: continues at once
        yield event  # already processed: continues at once
        log.append(("again", clock.now))

    def firer() -> Process:
        yield 2.0
        signal.fire(clock)
        yield 3.0
        event.succeed()

    start(clock, waiter())
    start(clock, firer())
    clock.run()
    assert log == [("signal", 2.0), ("event", 5.0), ("again", 5.0)]
    assert event.processed


def test_an_events_callbacks_run_once_in_order_when_it_is_processed() -> None:
    clock = Clock()
    event = Event(clock)
    log: list[str] = []
    event.callbacks.append(lambda e: log.append(f"first {e is event}"))
    clock.call_in(1.0, lambda: event.succeed() and None)
    clock.call_in(1.0, lambda: log.append(f"due before it, triggered={event.triggered}"))
    event.callbacks.append(lambda _e: log.append("second"))
    clock.run()
    assert log == ["due before it, triggered=True", "first True", "second"]
    assert isinstance(event, simpy.Event) and event.env is clock.env


def test_a_signal_fired_before_the_wait_does_not_block() -> None:
    clock = Clock()
    signal = Signal()
    signal.fire(clock)
    times: list[float] = []

    def waiter() -> Process:
        yield 1.0
        yield signal
        times.append(clock.now)

    start(clock, waiter())
    clock.run()
    assert times == [1.0]


def test_what_the_clock_refuses() -> None:
    clock = Clock()
    signal, event = Signal(), Event(clock)
    signal.fire(clock)
    with pytest.raises(RuntimeError, match="once"):
        signal.fire(clock)
    event.succeed()
    with pytest.raises(RuntimeError, match="once"):
        event.succeed()
    for delay in (-1.0, math.nan):
        with pytest.raises(ValueError, match="delay"):
            clock.call_in(delay, lambda: None)


def test_an_error_in_a_call_ends_the_run() -> None:
    clock = Clock()

    def fail() -> None:
        raise KeyError("lost")

    clock.call_in(1.0, fail)
    clock.call_in(2.0, lambda: None)
    with pytest.raises(KeyError):
        clock.run()
    assert clock.now == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_STEP, max_size=8), min_size=1, max_size=5), st.integers(1, 4))
def test_an_observed_run_keeps_the_order_and_calls_its_observer_every_n_entries(program: Program,
                                                                                every: int) -> None:
    observed: list[float] = []
    assert _on_clock(program, every, observed) == _on_simpy(program)
    assert len(observed) >= 1  # and once at the end
    assert observed == sorted(observed)
    with pytest.raises(ValueError, match="every"):
        Clock().run_observed(lambda: None, 0)


def test_the_observer_sees_every_nth_entry_of_the_environment() -> None:
    clock = Clock()
    for i in range(10):
        clock.call_in(float(i), lambda: None)
    seen: list[float] = []
    clock.run_observed(lambda: seen.append(clock.now), 3)
    assert seen == [2.0, 5.0, 8.0, 9.0]  # after entries 3, 6 and 9, and at the end


def test_pending_counts_the_entries_that_run_engine_code() -> None:
    clock = Clock()
    event, signal = Event(clock), Signal()
    counts: list[int] = []

    def waiter() -> Process:
        yield 1.0
        counts.append(clock.pending())  # the firer's timer (due at 2) only
        yield signal
        yield event

    def firer() -> Process:
        yield 2.0
        signal.fire(clock)  # the waiter's resumption
        event.succeed()  # and the event's processing
        counts.append(clock.pending())
        clock.call_urgently(lambda: None)
        clock.call_soon(lambda: None)
        counts.append(clock.pending())

    assert clock.pending() == 0
    start(clock, waiter())
    start(clock, firer())
    assert clock.pending() == 2  # two starts
    clock.run()
    assert counts == [1, 2, 4]
    assert clock.pending() == 0


def test_the_engine_is_a_simpy_environment_a_user_can_step() -> None:
    """A user who debugs a stuck rank steps the environment by its public API and sees the engine's process."""
    clock = Clock()
    env = clock.env
    assert isinstance(env, simpy.Environment)
    seen: list[object] = []

    def rank() -> Process:
        yield 1.0
        seen.append(env.active_process)
        yield 2.0

    proc = start(clock, rank())
    assert isinstance(proc, simpy.Process) and proc.is_alive
    env.run(until=2.0)  # SimPy's own run, stopped part-way
    assert clock.now == 2.0 and proc.is_alive and seen == [proc]
    while env.peek() < 3.0:  # (what run's `until` left at 2 s)
        env.step()
    env.step()  # the rank's timer, due at 3 s
    assert clock.now == 3.0
    clock.run()
    assert not proc.is_alive


def test_urgent_calls_of_one_instant_keep_simpys_order_around_a_process_start() -> None:
    """The urgent calls of an instant share one process; a process started in between still comes between."""
    clock = Clock()
    log: list[str] = []

    def urgent(tag: str) -> None:
        log.append(tag)
        if tag == "a":
            clock.call_urgently(log.append, "a's own")

    def proc() -> Process:
        log.append("started")
        yield from ()

    def at_one() -> None:
        clock.call_soon(log.append, "soon")
        clock.call_urgently(urgent, "a")
        start(clock, proc())
        clock.call_urgently(urgent, "b")

    clock.call_in(1.0, at_one)
    clock.run()
    assert log == ["a", "started", "b", "a's own", "soon"]


def test_an_error_in_a_process_ends_the_run_as_itself() -> None:
    clock = Clock()

    class Stopped(Exception):
        pass

    def proc() -> Process:
        yield 1.0
        raise Stopped("at one second")

    start(clock, proc())
    clock.call_in(5.0, lambda: None)
    with pytest.raises(Stopped, match="at one second"):
        clock.run()
    assert clock.now == 1.0


def test_a_burst_ahead_of_an_empty_instant_is_a_timeout_and_refuses_a_start_after_it() -> None:
    """Where nothing is due at the instant of an urgent call, its burst is a Timeout of no delay (as early as a
    process start there); a process started after it would come first, so that is refused."""
    clock = Clock()
    log: list[str] = []

    def at_one() -> None:
        clock.call_urgently(log.append, "urgent")
        clock.call_soon(log.append, "soon")
        clock.call_urgently(log.append, "urgent 2")
        with pytest.raises(RuntimeError, match="urgent calls"):
            start(clock, iter(()))

    clock.call_in(1.0, at_one)
    clock.run()
    assert log == ["urgent", "urgent 2", "soon"]
