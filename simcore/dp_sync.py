"""Data-parallel gradient synchronisation as collectives on the flow network, bucket by bucket.

- ZeRO 0 (plain data parallelism): an all-reduce of each gradient bucket.
- ZeRO 1 (Megatron's distributed optimizer): a reduce-scatter of each gradient bucket; each rank updates its
  1/dp shard; then an all-gather of the updated bf16 parameters. With overlap, that all-gather is the one that
  Megatron overlaps with the next iteration's forward pass (--overlap-param-gather): in a steady state it is in
  flight at the start of every iteration, and a chunk's first forward pass waits for its buckets.

Buckets hold DP_BUCKET_ELEMENTS parameters (Megatron's default). Gradients are reduced in fp32 for bf16
training (Megatron forces this) and in fp16 for fp16 training. With overlap_grad_reduce a chunk's buckets
become ready one after another during its last backward pass and go out at once; without it they go after the
rank's last backward pass. Buckets of one rank go one after another on its communication stream. In full
fidelity a collective starts when every simulated member of its group has reached it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

import simpy

from simcore.calibration import DP_BUCKET_ELEMENTS
from simcore.collectives import Collective
from simcore.costs import BYTES
from simcore.flows import FlowPattern
from simcore.recorder import RankRecord

if TYPE_CHECKING:
    from simcore.engine import Engine


class GradientSync:
    def __init__(self, engine: Engine) -> None:
        self.e = engine
        layout = engine.c.layout
        self.dp = layout.dp
        self.zero = layout.zero_stage
        self.overlap = layout.overlap_grad_reduce
        self._ready: dict[tuple[int, int], list[simpy.Event]] = {}
        self._gathered: dict[tuple[int, int, int], list[simpy.Event]] = {}
        self._joins: dict[tuple[str, int, int], tuple[list[int], simpy.Event]] = {}
        self._phases: dict[tuple[Collective, int], tuple[FlowPattern, ...]] = {}

    @property
    def active(self) -> bool:
        return self.dp > 1

    def buckets(self, rank: int) -> list[tuple[int, int]]:
        """(chunk, parameters) per bucket, in the order backward produces them (last chunk first)."""
        out: list[tuple[int, int]] = []
        for cost in sorted((ch for ch in self.e.c.workload.chunks if ch.rank == rank), key=lambda ch: -ch.chunk):
            remaining = cost.parameters
            while remaining > 0:
                n = min(remaining, DP_BUCKET_ELEMENTS)
                out.append((cost.chunk, n))
                remaining -= n
        return out

    # -- gradients ---------------------------------------------------------------------------------------
    def start(self, replica: int, rank: int, record: RankRecord) -> simpy.Event:
        """Start the rank's gradient stream (and, with ZeRO 1 and overlap, its parameter gathers); return the
        event of its last gradient bucket being reduced."""
        env = self.e.env
        done = env.event()
        if not self.active:
            done.succeed()
            return done
        buckets = self.buckets(rank)
        ready = [env.event() for _ in buckets]
        self._ready[(replica, rank)] = ready
        kind = Collective.ALL_REDUCE if self.zero == 0 else Collective.REDUCE_SCATTER
        width = self.e.c.layout.grad_reduce_bytes
        jobs = [(kind, "grad", float(n * width), ready[i]) for i, (_c, n) in enumerate(buckets)]
        env.process(self._stream(replica, rank, jobs, done, record))
        if self.zero >= 1 and self.overlap:
            self._gather(replica, rank, record)
        return done

    def grads_ready(self, replica: int, rank: int, chunk: int, start: float, end: float) -> None:
        """The last backward pass of `chunk` runs from `start` (now) to `end`: schedule its buckets' readiness."""
        if not self.active:
            return
        env = self.e.env
        ready = self._ready[(replica, rank)]
        mine = [i for i, (c, _n) in enumerate(self.buckets(rank)) if c == chunk]
        if self.overlap:
            times = [(i, start + (end - start) * (k + 1) / len(mine)) for k, i in enumerate(mine)]
        elif chunk == 0:
            times = [(i, end) for i in range(len(ready))]
        else:
            return
        for i, when in times:
            env.process(self._release(ready[i], when - env.now))
            self.e.events += 1

    def _release(self, event: simpy.Event, delay: float) -> Generator[simpy.Event, object, None]:
        yield self.e.env.timeout(delay)
        event.succeed()

    # -- parameters (ZeRO 1) -----------------------------------------------------------------------------
    def _gather(self, replica: int, rank: int, record: RankRecord) -> None:
        env = self.e.env
        order = list(reversed(self.buckets(rank)))  # forward order: first chunk, first layers first
        jobs = []
        for _chunk, n in order:
            event = env.event()
            event.succeed()
            jobs.append((Collective.ALL_GATHER, "param", float(n * BYTES), event))
        finished = [env.event() for _ in jobs]
        for (chunk, _n), event in zip(order, finished):
            self._gathered.setdefault((replica, rank, chunk), []).append(event)
        env.process(self._stream(replica, rank, jobs, env.event(), record, finished))

    def first_forward_gates(self, replica: int, rank: int, chunk: int) -> list[simpy.Event]:
        """Parameter gathers a chunk's first forward pass needs (empty unless ZeRO 1 with overlap)."""
        return self._gathered.get((replica, rank, chunk), [])

    def gather_after_step(self, replica: int, rank: int, record: RankRecord) -> simpy.Event | None:
        """ZeRO 1 without overlap: gather the updated parameters after the optimizer step."""
        if not self.active or self.zero < 1 or self.overlap:
            return None
        env = self.e.env
        jobs = []
        for _chunk, n in reversed(self.buckets(rank)):
            event = env.event()
            event.succeed()
            jobs.append((Collective.ALL_GATHER, "param", float(n * BYTES), event))
        done = env.event()
        env.process(self._stream(replica, rank, jobs, done, record))
        return done

    # -- the stream ----------------------------------------------------------------------------------------
    def _stream(self, replica: int, rank: int, jobs: list[tuple[Collective, str, float, simpy.Event]],
                done: simpy.Event, record: RankRecord,
                finished: list[simpy.Event] | None = None) -> Generator[simpy.Event, object, None]:
        env, n = self.e.env, self.dp
        track = f"stage {rank} dp" + (f"{replica}" if len(self.e.replicas) > 1 else "")
        for i, (kind, what, size, ready) in enumerate(jobs):
            yield ready
            start = env.now
            comm = "dp" if what == "grad" else "zero"
            factor = 2 * (n - 1) / n if kind is Collective.ALL_REDUCE else (n - 1) / n
            record.comm_bytes[comm] += factor * size
            arrived, complete = self._joins.setdefault((what + str(kind), rank, i), ([0], env.event()))
            arrived[0] += 1
            if arrived[0] == len(self.e.replicas):
                env.process(self._collective(kind, rank, size, complete))
            yield complete
            record.comm_busy_s[comm] += env.now - start
            self.e.rec.span(track, f"{kind.value.replace('_', '-')} {what} bucket {i}", "dp_comm", start, env.now)
            if finished is not None:
                finished[i].succeed()
        done.succeed()

    def _collective(self, kind: Collective, rank: int, size: float,
                    complete: simpy.Event) -> Generator[simpy.Event, object, None]:
        e = self.e
        if not e.c.free_communication:
            for phase in self._phase_list(kind, rank):
                step = e.env.event()
                e.events += 1
                e.net.start(phase, size, _succeeder(step))
                yield step
        complete.succeed()

    def _phase_list(self, kind: Collective, rank: int) -> tuple[FlowPattern, ...]:
        phases = self._phases.get((kind, rank))
        if phases is None:
            place = self.e.c.placement
            groups = [place.dp_group(t, rank) for t in range(place.tp)]
            phases = self._phases[(kind, rank)] = self.e.c.collectives.phases(kind, groups)
        return phases


def _succeeder(event: simpy.Event) -> Callable[[], None]:
    def succeed() -> None:
        event.succeed()

    return succeed
