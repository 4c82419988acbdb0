"""The event loop the engine runs on: SimPy's environment, events and queue, with the hot paths made lean.

- `Clock` is a simpy.Environment whose `run()` processes the queue in one loop instead of one `step()` call per
  event (the order is SimPy's: time, then priority, then scheduling order), and which also queues plain calls
  (`call_in`) where a timeout with one callback would go.
- `start` runs a generator as a process the way simpy.Process does (started by an urgent entry at this instant;
  a yielded event is waited for, an already processed one continues at once) and also takes a number of
  seconds to wait, which it waits with `call_in`: a rank runs tens of thousands of passes, and a Process's
  bookkeeping and a Timeout's checks on each were a tenth of a simulation's time.

Entries go in the queue at the same points as the simpy Processes and Timeouts they replace, so simultaneous
events keep their order and results are identical.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from heapq import heappop, heappush
from typing import Any

import simpy
from simpy.core import EventPriority
from simpy.events import NORMAL, URGENT, Event


class Clock(simpy.Environment):
    """A simpy.Environment that also queues plain calls: `call_in(delay, fn, *args)` puts `(fn, args)` in the
    queue where an event would go (same time, priority and scheduling order), and processing it calls
    `fn(*args)`. The engine's timers (a pass's end, a transfer's latency and completion) need nothing more than
    that, and an event object, its callback list and a closure for each cost more than the call itself."""

    def call_in(self, delay: float, fn: Callable[..., None], *args: object, priority: EventPriority = NORMAL) -> None:
        if delay < 0:
            raise ValueError(f"negative delay {delay}")
        entry: Any = (self._now + delay, priority, next(self._eid), (fn, args))
        heappush(self._queue, entry)

    def step(self) -> None:
        raise NotImplementedError("a Clock's queue holds plain calls that only Clock.run processes")

    def run(self, until: object = None) -> None:
        """Process every event until none is left (the engine never stops earlier)."""
        if until is not None:
            raise ValueError("Clock.run runs until no event is left; `until` is not supported")
        queue = self._queue
        while queue:
            self._now, _, _, event = heappop(queue)
            if event.__class__ is tuple:
                event[0](*event[1])
                continue
            callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc


class Signal:
    """What one process can wait for (by yielding it), fired at most once: firing it queues the waiter's
    resumption at this instant, where simpy would queue an Event succeeded now."""

    __slots__ = ("fired", "waiter")

    def __init__(self) -> None:
        self.fired = False
        self.waiter: Callable[[], None] | None = None

    def fire(self, env: Clock) -> None:
        if self.fired:
            raise RuntimeError("a signal fires once")
        self.fired = True
        if self.waiter is not None:
            env.call_in(0.0, self.waiter)
            self.waiter = None


# What a process yields: an event or a signal to wait for, or seconds to wait.
Step = Event | Signal | float
Process = Generator[Step, None, None]


def start(env: Clock, process: Process) -> None:
    """Run `process` from this instant on, as simpy.Process would."""

    def on_event(event: Event) -> None:
        if not event._ok:  # a failed event ends the run, as an unhandled failure does in SimPy
            raise event._value
        resume()

    def resume() -> None:
        while True:
            try:
                step = next(process)
            except StopIteration:
                return
            if step.__class__ is float:
                env.call_in(step, resume)
                return
            if isinstance(step, Signal):
                if not step.fired:
                    step.waiter = resume
                    return
            elif isinstance(step, Event):
                if step.callbacks is not None:  # not processed yet: continue when it is
                    step.callbacks.append(on_event)
                    return
            else:
                env.call_in(step, resume)
                return

    env.call_in(0.0, resume, priority=URGENT)
