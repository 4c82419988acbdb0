"""The engine's event loop: a clock with a queue of calls, events that many may wait for, signals that one waits
for, and generator processes. Times in seconds.

Order (SimPy's, kept so that results stay the same to the bit): entries run by time; at one instant the urgent
ones first (a process's start), then the others in the order they were scheduled. Ties are resolved by that
order alone, never by what is scheduled, so every run of a simulation processes the same entries in the same
order.

Three queues make that order cheap. A call for a later time goes on a heap keyed (time, sequence number). A call
for this instant goes on one of two FIFOs: urgent, or "soon" (after what is already due). An entry on the heap
due now was scheduled before the clock reached now, so before every FIFO entry: the next entry is the urgent
FIFO's head, else the heap's head if due now (or the soon FIFO is empty), else the soon FIFO's head. In a ZeRO 3
simulation about 60% of the entries are for this instant (an event succeeded now, a collective started now; 15%
in the 1T GPT's pipeline), and a FIFO costs less than the heap for them.

Why the loop is the engine's own and not SimPy's (simpy.Environment): the engine needs nothing of SimPy but the
order above, SimPy's public API costs more (an Event or Timeout object with its callback list and checks per
timer, a Process per started collective, for 10^5 to 10^6 entries a simulation), and the alternative that was as
fast, a simpy.Environment subclass that rewrote run() on SimPy's private fields (_queue, _eid, _now), would break
with any SimPy release that renamed them. Measured with `python bench/speed_1t.py 3` (the 1T GPT on 3072 A100s,
259,518 events), five rounds alternating three variants of the engine on the same cost side, on a 2-core
machine shared with other work; medians of the rounds' medians (CPU time is the steadier figure there):
- before, the simpy.Environment subclass on private fields:                     CPU 1.16 s, wall 2.36 s
- SimPy's public API (a Timeout per timed call, a Process per urgent call):      CPU 1.62 s, wall 3.27 s
- this clock (and the data-parallel streams on it):                             CPU 1.11 s, wall 2.53 s
Every variant gives the same results to the bit (tests/golden). So the loop is this module's; SimPy stays a
test dependency: tests/simcore/engine/test_clock.py runs random programs on both and checks the same order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from heapq import heappop, heappush
from itertools import count


class Clock:
    """The current time `now` (s) and the calls due later. Nothing runs until `run`."""

    __slots__ = ("now", "_heap", "_urgent", "_soon", "_sequence")

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[..., None], tuple[object, ...]]] = []
        self._urgent: deque[tuple[Callable[..., None], tuple[object, ...]]] = deque()
        self._soon: deque[tuple[Callable[..., None], tuple[object, ...]]] = deque()
        self._sequence = count()

    def call_in(self, delay: float, fn: Callable[..., None], *args: object) -> None:
        """Call `fn(*args)` after `delay` seconds (>= 0), after every call already due then."""
        when = self.now + delay
        if when > self.now:
            heappush(self._heap, (when, next(self._sequence), fn, args))
        elif delay >= 0:  # 0, or too small to move the clock: due at this instant
            self._soon.append((fn, args))
        else:
            raise ValueError(f"delay must be >= 0 s, got {delay}")

    def call_soon(self, fn: Callable[..., None], *args: object) -> None:
        """Call `fn(*args)` at this instant, after every call already due now (an event succeeded now)."""
        self._soon.append((fn, args))

    def call_urgently(self, fn: Callable[..., None], *args: object) -> None:
        """Call `fn(*args)` at this instant, before the calls `call_soon` and `call_in` made due now, after the
        urgent ones already made (a process's start)."""
        self._urgent.append((fn, args))

    def pending(self) -> int:
        """How many calls are waiting to be made."""
        return len(self._heap) + len(self._urgent) + len(self._soon)

    def run(self) -> None:
        """Process every call, in order, until none is left (calls may schedule more)."""
        heap, urgent, soon = self._heap, self._urgent, self._soon
        while True:
            if urgent:
                fn, args = urgent.popleft()
            elif heap and (not soon or heap[0][0] == self.now):
                self.now, _, fn, args = heappop(heap)
            elif soon:
                fn, args = soon.popleft()
            else:
                return
            fn(*args)

    def run_observed(self, observer: Callable[[], None], every: int) -> None:
        """`run`, calling `observer()` after every `every` calls (>= 1) and once at the end: how a caller follows
        a long simulation (its progress) without adding entries to the queue, so the order stays the same."""
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        heap, urgent, soon = self._heap, self._urgent, self._soon
        left = every
        while True:
            if urgent:
                fn, args = urgent.popleft()
            elif heap and (not soon or heap[0][0] == self.now):
                self.now, _, fn, args = heappop(heap)
            elif soon:
                fn, args = soon.popleft()
            else:
                observer()
                return
            fn(*args)
            left -= 1
            if not left:
                left = every
                observer()


class Event:
    """Something any number of callbacks (and processes) may wait for. `succeed()` makes it due at this instant;
    when it is processed its callbacks run in the order they were added, and it is `processed` (callbacks None)."""

    __slots__ = ("clock", "callbacks", "triggered")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.callbacks: list[Callable[[], None]] | None = []
        self.triggered = False  # succeeded (and processed, or due)

    @property
    def processed(self) -> bool:
        return self.callbacks is None

    def succeed(self) -> None:
        if self.triggered:
            raise RuntimeError("an event succeeds once")
        self.triggered = True
        self.clock.call_soon(self._process)

    def _process(self) -> None:
        callbacks, self.callbacks = self.callbacks, None
        assert callbacks is not None  # succeeds once, so processed once
        for callback in callbacks:
            callback()


class Signal:
    """What one process can wait for (by yielding it), fired at most once: firing it makes the waiter's
    resumption due at this instant, where an Event succeeded now would be processed. Lighter than an Event: no
    entry is queued when nobody waits yet."""

    __slots__ = ("fired", "waiter")

    def __init__(self) -> None:
        self.fired = False
        self.waiter: Callable[[], None] | None = None

    def fire(self, clock: Clock) -> None:
        if self.fired:
            raise RuntimeError("a signal fires once")
        self.fired = True
        if self.waiter is not None:
            clock.call_soon(self.waiter)
            self.waiter = None


# What a process yields: an event or a signal to wait for, or seconds to wait.
Step = Event | Signal | float
Process = Generator[Step, None, None]


def start(clock: Clock, process: Process) -> None:
    """Run `process` from an urgent call at this instant on: a yielded number of seconds is waited for; a yielded
    event or signal is waited for unless it is already processed (or fired), when the process goes on at once."""
    clock.call_urgently(_Resume(clock, process))


class _Resume:
    """A process's resumption: runs it to its next wait and hands itself to what it waits for. An object rather
    than a closure, which would refer to itself (a reference cycle left for the garbage collector)."""

    __slots__ = ("clock", "process")

    def __init__(self, clock: Clock, process: Process) -> None:
        self.clock, self.process = clock, process

    def __call__(self) -> None:
        process = self.process
        while True:
            try:
                step = next(process)
            except StopIteration:
                return
            if step.__class__ is float:
                self.clock.call_in(step, self)
                return
            if isinstance(step, Signal):
                if not step.fired:
                    step.waiter = self
                    return
            elif isinstance(step, Event):
                if step.callbacks is not None:
                    step.callbacks.append(self)
                    return
            else:
                self.clock.call_in(step, self)
                return
