"""A rank's communication stream on its own, with a stand-in collective of 1 s per GB: its jobs one after
another in the order they were submitted, each once it is ready; and full fidelity's rendezvous, where the last
replica to arrive starts the collective and every replica goes on when it ends."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from simcore.cost.comm.collectives import Collective
from simcore.engine.clock import Clock, Event
from simcore.engine.data_parallel.streams import PENDING, READY, Job, Rendezvous, Stream
from simcore.engine.recorder import RankRecord, Recorder

GB = 1e9


class Collectives:
    """A collective of `size` bytes takes size / 1 GB seconds; remembers when each one started."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.started: list[float] = []

    def run(self, kind: Collective, size: float, complete: Callable[[], None]) -> None:
        self.started.append(self.clock.now)
        self.clock.call_in(size / GB, complete)


def stream(clock: Clock, collectives: Collectives, rendezvous: Rendezvous | None = None,
           recorder: Recorder | None = None) -> Stream:
    return Stream(clock, collectives.run, lambda _kind: False, rendezvous, 4, RankRecord(gpu=0, pipeline_rank=0),
                  recorder or Recorder(keep_spans=False), "stage 0 dp")


def ends(clock: Clock, events: dict[str, Event]) -> dict[str, float]:
    out: dict[str, float] = {}

    def note(name: str, _event: Event) -> None:
        out[name] = clock.now

    for name, event in events.items():
        assert event.callbacks is not None
        event.callbacks.append(partial(note, name))
    clock.run()
    return out


def test_jobs_run_one_after_another_in_order_each_once_ready() -> None:
    clock = Clock()
    collectives = Collectives(clock)
    recorder = Recorder(keep_spans=True)
    s = stream(clock, collectives, recorder=recorder)
    done = {name: Event(clock) for name in "abc"}
    a = Job(Collective.ALL_REDUCE, "grad", 1 * GB, READY, done["a"])
    b = Job(Collective.REDUCE_SCATTER, "grad", 2 * GB, PENDING, done["b"])
    c = Job(Collective.ALL_GATHER, "param", 1 * GB, READY, done["c"])
    for job in (a, b, c):
        s.put(job)
    clock.call_in(3.5, s.release, b)  # b is ready only after a has ended: c, ready all along, waits behind b
    assert ends(clock, done) == {"a": 1.0, "b": 5.5, "c": 6.5}
    assert collectives.started == [0.0, 3.5, 5.5]
    assert [(sp.name, sp.start_s, sp.end_s) for sp in recorder.spans] == [
        ("all-reduce grad", 0.0, 1.0), ("reduce-scatter grad", 3.5, 5.5), ("all-gather param", 5.5, 6.5)]
    # bytes each of the 4 ranks sends: 2(n-1)/n of an all-reduce, (n-1)/n of the others
    assert s.record.comm_bytes["dp"] == 1.5 * GB + 0.75 * 2 * GB
    assert s.record.comm_bytes["zero"] == 0.75 * GB
    assert s.record.comm_busy_s["dp"] == 3.0


def test_the_last_replica_to_arrive_starts_the_collective_and_all_go_on_at_its_end() -> None:
    clock = Clock()
    collectives = Collectives(clock)
    rendezvous = Rendezvous(clock, members=2)
    first, second = stream(clock, collectives, rendezvous), stream(clock, collectives, rendezvous)
    done = {"first": Event(clock), "second": Event(clock)}
    first.put(Job(Collective.ALL_REDUCE, "grad", 1 * GB, READY, done["first"]))
    late = Job(Collective.ALL_REDUCE, "grad", 1 * GB, PENDING, done["second"])
    second.put(late)
    clock.call_in(2.0, second.release, late)
    assert ends(clock, done) == {"first": 3.0, "second": 3.0}
    assert collectives.started == [2.0]  # one collective for the group, started by the last to arrive
    assert first.record.comm_busy_s["dp"] == 3.0 and second.record.comm_busy_s["dp"] == 1.0
