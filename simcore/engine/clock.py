"""The engine's time: one `simpy.Environment`, used through its public API only (Environment, Event, Timeout,
Process, `schedule`, `step`, `run`). Times in seconds.

The engine's parts speak to it through `Clock`: a call after a delay (`call_in`, a Timeout), a call at this
instant after what is due now (`call_soon`, a Timeout of no delay), a call at this instant before that
(`call_urgently`: where SimPy would start a process); `Event`, a simpy.Event many may wait for; `Signal`, what one
process waits for; and `start`, which runs one of the engine's generators as a simpy.Process. A user who debugs a
stuck rank steps the same environment (`clock.env.step()`, `clock.env.run(until=...)`, `clock.env.peek()`) and
sees the engine's processes (`clock.env.active_process`).

Order (SimPy's): entries run by time; at one instant the urgent ones first (a process's start), then the others in
the order they were scheduled. Ties are resolved by that order alone, never by what is scheduled, so every run of
a simulation processes the same entries in the same order (tests/golden holds the results to the bit).

What it costs, and what keeps that low. Every timed call is a Timeout with a callback, every process a
simpy.Process stepping a generator. The calls at one instant that SimPy would make urgent (the starts of the
processes the data-parallel streams and collectives stand for) come in bursts: a ZeRO 3 step issues dozens at one
instant. They share one simpy.Process an instant (`_Urgent`): SimPy runs the urgent entries of an instant one after
another in the order they were made, before anything else, and runs nothing between two of them but other urgent
entries, so one process that makes them in that order gives the same order, as long as no other process starts in
between (a `start` closes the burst, and the next urgent call opens a new one). Where nothing at all is due at the
instant of the first (`env.peek()` later), a Timeout of no delay is as early, and costs a third of a process.
`python bench/engine_ab.py` measures the whole against an earlier tree; docs/engine.md, "Engine and speed", quotes it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import simpy
from simpy.core import EmptySchedule

__all__ = ["Clock", "Event", "Process", "Signal", "Step", "start"]


class Clock:
    """The current time `now` (s) of `env`, a simpy.Environment, and the engine's calls queued on it. Nothing runs
    until `run` (or the environment's own `step` / `run`). `events` is the one count of the engine's events: each
    part of the engine (passes, transfers, flows, collectives, gathers) adds the events it makes there."""

    __slots__ = ("env", "events", "waiting", "_burst")

    def __init__(self, env: simpy.Environment | None = None) -> None:
        # initial_time 0.0, not SimPy's default 0: times read off the clock are floats from the first instant
        self.env = simpy.Environment(0.0) if env is None else env
        self.events = 0  # the engine's events (the result's count): every part of the engine adds the ones it makes
        self.waiting = 0  # entries queued that will run engine code (`pending`)
        self._burst: _Urgent | None = None  # the urgent calls of this instant not yet made

    @property
    def now(self) -> float:
        return self.env.now

    def call_in(self, delay: float, fn: Callable[..., None], *args: object) -> None:
        """Call `fn(*args)` after `delay` seconds (>= 0), after every call already due then."""
        if not delay >= 0:  # (NaN too; SimPy refuses only negative delays)
            raise ValueError(f"delay must be >= 0 s, got {delay}")
        self.waiting += 1
        simpy.Timeout(self.env, delay).callbacks.append(_Call(self, fn, args))

    def call_soon(self, fn: Callable[..., None], *args: object) -> None:
        """Call `fn(*args)` at this instant, after every call already due now (where an event succeeded now is
        processed)."""
        self.waiting += 1
        simpy.Timeout(self.env, 0.0).callbacks.append(_Call(self, fn, args))

    def call_urgently(self, fn: Callable[..., None], *args: object) -> None:
        """Call `fn(*args)` at this instant, before the calls `call_soon` and `call_in` made due now, after the
        urgent ones already made (where a process started now would begin)."""
        self.waiting += 1
        burst = self._burst
        if burst is None:
            burst = self._burst = _Urgent(self)
            env = self.env
            if env.peek() > env.now:
                # Nothing is due at this instant yet: an entry of this instant made now comes before every other
                # one made here from now on, so a Timeout of no delay is as early as an urgent process start.
                burst.normal = True
                simpy.Timeout(env, 0.0).callbacks.append(burst.fire)
            else:
                env.process(burst.run())
        burst.calls.append((fn, args))

    def pending(self) -> int:
        """How many entries that run engine code are queued (calls, process starts and resumptions, events
        succeeded and not yet processed)."""
        return self.waiting

    def run(self) -> None:
        """Process every entry, in order, until none is left (entries may schedule more)."""
        try:
            self.env.run()
        except Exception as failed:
            raise _original(failed) from None

    def run_observed(self, observer: Callable[[], None], every: int) -> None:
        """`run`, calling `observer()` after every `every` entries processed (>= 1) and once at the end: how a
        caller follows a long simulation (its progress) without adding entries to the queue, so the order stays
        the same."""
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        step = self.env.step
        left = every
        try:
            while True:
                step()
                left -= 1
                if not left:
                    left = every
                    observer()
        except EmptySchedule:
            observer()
        except Exception as failed:
            raise _original(failed) from None


def _original(failed: Exception) -> Exception:
    """The exception a process raised, where SimPy re-raises a copy of it (with the original as its cause) once
    the failed process is processed; any other exception as it is."""
    cause = failed.__cause__
    if isinstance(cause, Exception) and type(cause) is type(failed) and cause.args == failed.args:
        return cause
    return failed


class _Call:
    """A callback that makes one call of the engine's (SimPy hands callbacks the event; the engine's calls
    take their own arguments)."""

    __slots__ = ("clock", "fn", "args")

    def __init__(self, clock: Clock, fn: Callable[..., None], args: tuple[object, ...]) -> None:
        self.clock, self.fn, self.args = clock, fn, args

    def __call__(self, _event: simpy.Event) -> None:
        self.clock.waiting -= 1
        self.fn(*self.args)


class _Urgent:
    """The urgent calls of one instant, made in the order they were asked for by one simpy.Process (the module's
    docstring says why that is SimPy's order), or, where nothing else was due at that instant when the first was
    asked for, by one Timeout of no delay (`normal`)."""

    __slots__ = ("clock", "calls", "normal")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.calls: list[tuple[Callable[..., None], tuple[object, ...]]] = []
        self.normal = False

    def make(self) -> None:
        clock, calls = self.clock, self.calls
        i = 0
        while i < len(calls):  # a call may ask for more: they come after it, as SimPy's would
            fn, args = calls[i]
            i += 1
            clock.waiting -= 1
            fn(*args)
        if clock._burst is self:
            clock._burst = None

    def run(self) -> Generator[simpy.Event, None, None]:
        self.make()
        yield from ()

    def fire(self, _event: simpy.Event) -> None:
        self.make()


class Event(simpy.Event):
    """Something any number of callbacks (and processes) may wait for: a simpy.Event of the clock's environment.
    `succeed()` makes it due at this instant; when it is processed its callbacks run in the order they were added
    (each is handed the event) and it is `processed` (callbacks None)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock.env)
        self.clock = clock
        # a function, not a bound method of the event: an event that never succeeds holds no cycle
        self.callbacks.append(_processed)

    def succeed(self, value: object = None) -> Event:
        if self.triggered:
            raise RuntimeError("an event succeeds once")
        self.clock.waiting += 1
        super().succeed(value)
        return self


def _processed(event: simpy.Event) -> None:
    """An Event's first callback: its entry has left the queue."""
    event.clock.waiting -= 1  # type: ignore[attr-defined]


class Signal:
    """What one process can wait for (by yielding it), fired at most once: firing it makes the waiter's
    resumption due at this instant, where an Event succeeded now would be processed. Lighter than an Event: a
    simpy.Event is made only when a process waits before it fires, and no entry is queued when nobody waits yet
    (a process that yields a fired signal goes on at once)."""

    __slots__ = ("fired", "waiter")

    def __init__(self) -> None:
        self.fired = False
        self.waiter: simpy.Event | None = None  # what the waiting process yielded

    def fire(self, clock: Clock) -> None:
        if self.fired:
            raise RuntimeError("a signal fires once")
        self.fired = True
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            clock.waiting += 1
            waiter.succeed()


# What the engine's processes yield: an event or a signal to wait for, or seconds to wait.
Step = Event | Signal | float
Process = Generator[Step, None, None]


def start(clock: Clock, process: Process) -> simpy.Process:
    """Run `process` as a simpy.Process of the clock's environment, from this instant on (SimPy starts it from an
    urgent entry): a yielded number of seconds is waited for (a Timeout); a yielded event is waited for unless it
    is already processed, a yielded signal unless it has fired, when the process goes on at once."""
    burst = clock._burst
    if burst is not None and burst.normal:
        # the start would come before that burst's calls, which were asked for first
        raise RuntimeError("a process starts at an instant whose urgent calls were not made yet")
    clock._burst = None  # urgent calls made from now on come after this start, as SimPy orders them
    clock.waiting += 1
    return clock.env.process(_steps(clock, process))


def _steps(clock: Clock, process: Process) -> Generator[simpy.Event, None, None]:
    """The engine's generator `process` as SimPy's: its steps turned into the events SimPy waits for."""
    env = clock.env
    clock.waiting -= 1  # started
    for step in process:
        if isinstance(step, Signal):
            if not step.fired:
                waiter = step.waiter = simpy.Event(env)
                yield waiter
                clock.waiting -= 1  # resumed
        elif isinstance(step, Event):
            yield step  # SimPy goes on at once where the event is processed
        else:
            if not step >= 0:
                raise ValueError(f"a process waits >= 0 s, got {step}")
            clock.waiting += 1
            yield simpy.Timeout(env, step)
            clock.waiting -= 1
