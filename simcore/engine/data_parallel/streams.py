"""A rank's communication stream: its collectives one after another, in the order they were submitted, each once
it is ready (simcore/engine/data_parallel/dp_sync.py submits them), as a chain of calls on the clock rather than a
process.

It makes the calls a SimPy process reading a simpy.Store would make, at the same points, so simultaneous events
keep their order; the few events it leaves out are ones nothing could see (`Stream` says why for each). In full
fidelity the data-parallel replicas' streams of one pipeline rank meet at a `Rendezvous` before each collective.

A stream is given what it uses, not the synchronisation that made it: `run` and `instant` (the collectives of
its pipeline rank, simcore/engine/data_parallel/dp_collectives.py), the rank's record and the recorder.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from functools import partial

from simcore.cost.comm.collectives import Collective
from simcore.cost.comm.interference import CommLoad
from simcore.engine.clock import Clock, Event
from simcore.engine.compute import ComputeStream
from simcore.engine.recorder import Category, RankRecord, Recorder

RunCollective = Callable[[Collective, float, Callable[[], None]], None]  # (kind, bytes, on completion)
Describe = Callable[[Collective, float], str]  # (kind, bytes) -> how it runs ("tree/LL"), for the trace

# A job's readiness: not yet; from this instant on (the event that says so is due); ready.
PENDING, RELEASED, READY = 0, 1, 2


class Job:
    """One collective a stream runs: its kind, what it moves ("grad" or "param"), its size (bytes) and
    readiness, and the event of its end (None when nobody waits for it: an event nobody waits for changes
    nothing)."""

    __slots__ = ("kind", "what", "size", "ready", "taken", "done", "copies_s", "ranks")

    def __init__(self, kind: Collective, what: str, size: float, ready: int, done: Event | None,
                 copies_s: float = 0.0, ranks: int = 0) -> None:
        self.kind, self.what, self.size, self.ready = kind, what, size, ready
        self.ranks = ranks  # the group it runs over, for the bytes each rank sends; 0: the stream's group
        self.taken = False  # the stream has got it
        self.done = done
        # Copy kernels the stream runs with the collective (a list-based collective's one copy per rank), s
        self.copies_s = copies_s


class Rendezvous:
    """Where the streams of the `members` data-parallel replicas of one pipeline rank meet, collective by
    collective (full fidelity): the last to arrive at the k-th starts it, and every member goes on when it ends."""

    __slots__ = ("clock", "members", "_arrived")

    def __init__(self, clock: Clock, members: int) -> None:
        self.clock, self.members = clock, members
        self._arrived: dict[int, tuple[list[int], Event]] = {}

    def arrive(self, index: int) -> tuple[Event, bool]:
        """Arrive at collective `index`: the event of its end, and whether this member is the last to arrive
        (who then starts it and succeeds that event at its end)."""
        arrived, end = self._arrived.setdefault(index, ([0], Event(self.clock)))
        arrived[0] += 1
        if arrived[0] == self.members:
            del self._arrived[index]
            return end, True
        return end, False



def meeting(table: dict[tuple[object, ...], Rendezvous], clock: Clock, key: tuple[object, ...],
            members: int) -> Rendezvous:
    """The rendezvous of `key` in `table`, made on first use for `members` replicas."""
    found = table.get(key)
    if found is None:
        found = table[key] = Rendezvous(clock, members)
    return found

class Stream:
    """One rank's communication stream ("grad" or "gather"). It stands for a process that gets jobs from a
    simpy.Store, waits for each job's `ready` event and runs its collective; the events of that process and
    store it leaves out:
    - a put while the stream is busy: the store's event would find no get waiting at this instant (the stream
      can only wait again once it has run this job, whose collective takes time), unless collectives can take no
      time (`instant`: what-if free communication, or a phase without latency);
    - a job's `ready` event when the stream has not got the job yet: the event of any later get comes after it,
      so the stream finds the job ready either way;
    - the get of a job that is not ready yet: the process would wait for the job's readiness, as the stream does.
    """

    __slots__ = ("clock", "run_collective", "instant", "rendezvous", "dp", "record", "recorder", "track", "jobs",
                 "waiting", "count", "job", "blocked", "start", "comm", "describe", "gpu", "load", "taking")

    def __init__(self, clock: Clock, run: RunCollective, instant: Callable[[Collective], bool],
                 rendezvous: Rendezvous | None, dp: int, record: RankRecord, recorder: Recorder,
                 track: str, describe: Describe | None = None, gpu: ComputeStream | None = None,
                 load: Callable[[Collective, float], CommLoad] | None = None) -> None:
        self.clock, self.run_collective, self.instant, self.rendezvous = clock, run, instant, rendezvous
        self.describe = describe
        # The GPU whose compute its collectives slow down, and what each takes from it (interference).
        self.gpu, self.load = gpu, load
        self.taking: CommLoad | None = None
        self.dp = dp  # the data-parallel group's size, for the bytes each rank sends
        self.record, self.recorder, self.track = record, recorder, track
        self.jobs: deque[Job] = deque()
        self.waiting = False  # idle: the next put hands it its job
        self.count = 0  # collectives started
        # the job running (from its get to its end), whether it waits to be ready, when it started and what it
        # counts as
        self.job: Job | None = None
        self.blocked = False
        self.start = 0.0
        self.comm = ""
        clock.call_urgently(self._get)  # as the process would start

    def put(self, job: Job) -> None:
        self.jobs.append(job)
        if self.waiting or self.instant(job.kind):
            self.clock.call_soon(self._hand_over)

    def release(self, job: Job) -> None:
        """The job is ready from now on."""
        if job.taken:
            job.ready = RELEASED
            self.clock.call_soon(self._ready, job)
        else:
            job.ready = READY

    def _hand_over(self) -> None:
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
            self._got()
        else:  # the get's event, due now
            self.clock.call_soon(self._got)

    def _got(self) -> None:
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
        job = self.job
        assert job is not None
        n = job.ranks or self.dp
        self.start = self.clock.now
        self.comm = comm = "dp" if job.what == "grad" else "zero"
        # bytes each rank sends: ring all-reduce 2(n-1)/n of the buffer, reduce-scatter and all-gather (n-1)/n
        factor = 2 * (n - 1) / n if job.kind is Collective.ALL_REDUCE else (n - 1) / n
        self.record.comm_bytes[comm] += factor * job.size
        self.count += 1
        if self.gpu is not None and self.load is not None:  # its kernels take SMs and HBM bandwidth from now on
            self.taking = self.load(job.kind, job.size)
            self.gpu.comm_started(self.taking)
        if self.rendezvous is None:  # the collective's end is an event whose only waiter is this stream
            self.run_collective(job.kind, job.size, self._after_copies(job, self._end_event))
            return
        end, last = self.rendezvous.arrive(self.count - 1)
        if last:
            self.run_collective(job.kind, job.size, self._after_copies(job, partial(_succeed, end)))
        if end.callbacks is None:  # processed: go on, as a process that yields it would
            self._finish()
        else:
            end.callbacks.append(self._ended)

    def _after_copies(self, job: Job, then: Callable[[], None]) -> Callable[[], None]:
        """`then`, or `then` once the job's copy kernels have run after its collective."""
        if not job.copies_s:
            return then
        return lambda: self.clock.call_in(job.copies_s, then)

    def _end_event(self) -> None:
        self.clock.call_soon(self._finish)

    def _ended(self, _event: Event) -> None:  # (a callback of the rendezvous's end event)
        self._finish()

    def _finish(self) -> None:
        now, start, job = self.clock.now, self.start, self.job
        assert job is not None
        self.record.comm_busy_s[self.comm] += now - start
        if self.gpu is not None and self.taking is not None:
            self.gpu.comm_ended(self.taking)
            self.taking = None
        if self.recorder.keep_spans:
            name = f"{job.kind.value.replace('_', '-')} {job.what}"
            how = self.describe(job.kind, job.size) if self.describe is not None else ""
            self.recorder.span(self.track, f"{name} ({how})" if how else name, Category.DP_COMM, start, now)
        self.job = None
        if job.done is not None:
            job.done.succeed()
        self._get()


def _succeed(event: Event) -> None:
    event.succeed()


def release_all(stream: Stream, delays: list[tuple[Job, float]]) -> None:
    """Release each job after its delay (s)."""
    call_in = stream.clock.call_in
    for job, delay in delays:
        call_in(delay, stream.release, job)
