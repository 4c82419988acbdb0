"""A rank's communication stream as a chain of callbacks: its collectives one after another, in the order they
were submitted, each once it is ready (simcore/dp_sync.py submits them). It makes the events a SimPy process
reading a simpy.Store would make, at the same points, so simultaneous events keep their order; the few it leaves
out are ones nothing could see (each case says why). Also the small event helpers the streams and the
synchronisation share.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import simpy
from simpy.events import URGENT, Event

from simcore.cost.collectives import Collective
from simcore.engine.clock import Clock
from simcore.engine.recorder import RankRecord

if TYPE_CHECKING:
    from simcore.engine.dp_sync import GradientSync

Callback = Callable[[simpy.Event | None], None]  # an event's callback, also called with None when run at once

# A job's readiness: not yet; from this instant on (the event that says so is due); ready.
PENDING, RELEASED, READY = 0, 1, 2


class Job:
    __slots__ = ("kind", "what", "size", "ready", "taken", "done")

    def __init__(self, kind: Collective, what: str, size: float, ready: int, done: simpy.Event | None) -> None:
        self.kind, self.what, self.size, self.ready = kind, what, size, ready
        self.taken = False  # the stream has got it
        self.done = done  # None when nobody waits for the job (an event nobody waits for changes nothing)


class Stream:
    """One rank's communication stream ("grad" or "gather"): its collectives one after another, in the order
    they were submitted, each once it is ready. It stands for a process that gets jobs from a simpy.Store, waits
    for each job's `ready` event and runs its collective; the events of that process and store it leaves out:
    - a put while the stream is busy: the store's event would find no get waiting at this instant (the stream
      can only wait again once it has run this job, whose collective takes time), unless collectives can take no
      time (what-if free communication, or a phase without latency);
    - a job's `ready` event when the stream has not got the job yet: the event of any later get comes after it,
      so the stream finds the job ready either way;
    - the get of a job that is not ready yet: the process would wait for the job's readiness, as the stream does.

    It refers to its GradientSync weakly: the sync holds its streams, and a cycle would keep every event of the
    iteration alive until the cyclic garbage collector found it."""

    __slots__ = ("sync", "env", "replica", "rank", "name", "record", "jobs", "waiting", "count", "track", "job",
                 "blocked", "start", "comm")

    def __init__(self, sync: GradientSync, replica: int, rank: int, name: str, record: RankRecord) -> None:
        self.sync, self.env, self.replica, self.rank, self.name = weakref.proxy(sync), sync.env, replica, rank, name
        self.record = record
        self.jobs: deque[Job] = deque()
        self.waiting = False  # idle: the next put hands it its job
        self.count = 0  # collectives started, for the full-fidelity join of the replicas' streams
        self.track = f"stage {rank} {'dp' if name == 'grad' else 'gather'}" + (
            f"{replica}" if len(sync.replicas) > 1 else "")
        # the job running (from its get to its end), whether it waits to be ready, when it started and what it
        # counts as
        self.job: Job | None = None
        self.blocked = False
        self.start = 0.0
        self.comm = ""
        sync.urgently(self._get)  # as the process would start

    def put(self, job: Job) -> None:
        self.jobs.append(job)
        if self.waiting or self.sync.instant(job.kind, self.rank):
            soon(self.env, self._hand_over)

    def release(self, job: Job) -> None:
        """The job is ready from now on. Called by a timer's event, as the last thing it does."""
        if job.taken:
            job.ready = RELEASED
            soon_or_now(self.env, lambda _e: self._ready(job))
        else:
            job.ready = READY

    def _hand_over(self, _event: simpy.Event | None) -> None:
        if self.waiting and self.jobs:
            self.waiting = False
            self._take()

    def _get(self) -> None:
        if self.jobs:
            self._take()
        else:
            self.waiting = True

    def _take(self) -> None:
        job = self.job = self.jobs.popleft()
        job.taken = True
        if job.ready == PENDING:
            self._got(None)
        elif len(self.sync.replicas) == 1:
            # The last thing the callers do: a put's event, the start, or the end of a collective whose only
            # waiter is this stream. (In full fidelity the other replicas' streams may still have to go on.)
            soon_or_now(self.env, self._got)
        else:
            soon(self.env, self._got)

    def _got(self, _event: simpy.Event | None) -> None:
        assert self.job is not None
        if self.job.ready == READY:
            self._run()
        else:
            self.blocked = True  # until its `ready` event

    def _ready(self, job: Job) -> None:
        job.ready = READY
        if self.blocked and self.job is job:
            self.blocked = False
            self._run()

    def _run(self) -> None:
        sync, env, n, job = self.sync, self.env, self.sync.dp, self.job
        assert job is not None
        self.start = env.now
        self.comm = comm = "dp" if job.what == "grad" else "zero"
        factor = 2 * (n - 1) / n if job.kind is Collective.ALL_REDUCE else (n - 1) / n
        self.record.comm_bytes[comm] += factor * job.size
        self.count += 1
        if len(sync.replicas) == 1:  # no join; the collective's end is an event whose only waiter is this stream
            sync.collective(job.kind, self.rank, job.size, lambda: soon_or_now(env, self._finish))
            return
        arrived, complete = sync.joins.setdefault((self.name, self.rank, self.count - 1), ([0], Event(env)))
        arrived[0] += 1
        if arrived[0] == len(sync.replicas):
            sync.collective(job.kind, self.rank, job.size, complete.succeed)
        if complete.callbacks is None:  # processed: go on, as a process that yields it would
            self._finish(complete)
        else:
            complete.callbacks.append(self._finish)

    def _finish(self, _event: simpy.Event | None) -> None:
        now, start, job = self.env.now, self.start, self.job
        assert job is not None
        self.record.comm_busy_s[self.comm] += now - start
        if self.sync.rec.keep_spans:
            self.sync.rec.span(self.track, f"{job.kind.value.replace('_', '-')} {job.what}", "dp_comm", start, now)
        self.job = None
        if job.done is not None:
            job.done.succeed()
        self._get()


def urgently(env: Clock, call: Callable[[], None]) -> None:
    """Call `call` from an urgent entry at this instant, processed before the normal ones: what SimPy does to
    start a process (simpy.events.Initialize), for a callback."""
    env.call_in(0.0, call, priority=URGENT)


def soon(env: Clock, callback: Callback) -> None:
    """At this instant, after what is already due, call `callback(None)`: where an event succeeded now would be
    processed."""
    env.call_in(0.0, callback, None)


def soon_or_now(env: Clock, callback: Callback) -> None:
    """`soon`, or `callback(None)` now when no other event is due at this instant: the event would then be the
    very next one processed. Only for callers that make no more events after this call (nor does anything after
    them in the event being processed), so that calling back now sees and does what the event would."""
    if env.peek() > env.now:
        callback(None)
    else:
        soon(env, callback)


def release_all(env: Clock, stream: Stream, delays: list[tuple[Job, float]]) -> None:
    """Release each job after its delay."""
    for job, delay in delays:
        env.call_in(delay, stream.release, job)
