"""Data-parallel synchronisation as collectives on the flow network: gradient reduction and ZeRO's gathers.

- ZeRO 0: an all-reduce of each gradient bucket, once per iteration.
- ZeRO 1 (Megatron's distributed optimizer): a reduce-scatter of each gradient bucket once per iteration; each
  rank updates its 1/dp shard; then an all-gather of the updated 16-bit parameters.
- ZeRO 2: as ZeRO 1, but the full gradient is not kept, so the buckets are reduce-scattered after every
  microbatch's backward pass.
- ZeRO 3 (FSDP full-shard): ZeRO 2, and the parameters stay sharded: each layer's are all-gathered before its
  forward and again before its backward, for every microbatch, the next layer's gather prefetched while the
  current layer computes; no gather after the step. With `zero3_gather_bucket_elements` a layer is gathered in
  collectives of at most that many parameters, one after another: over a large group each is latency-bound,
  n - 1 ring steps for n times fewer bytes a step.
With one microbatch ZeRO 1 and 2 move 2x the parameters' bytes and ZeRO 3 3x (same width for gradients and
parameters; Rajbhandari et al. §7).

Buckets hold max(DP_BUCKET_ELEMENTS, 1M x dp) parameters when the reduction overlaps backward, else a chunk's
whole gradient goes as one (Megatron-Core's rules). Gradients are reduced in fp32 for bf16 training
(Megatron forces this) and in fp16 for fp16 training. With overlap_grad_reduce a pass's buckets become ready one
after another during the pass and go out at once; without it they go after the pass (ZeRO 2 and 3) or after the
rank's last backward pass. With ZeRO 1 or 2 and overlap, the parameter all-gather is the one Megatron overlaps
with the next iteration's forward (--overlap-param-gather): in a steady state it is in flight when an iteration
starts, and a chunk's first forward pass waits for its buckets.

Each rank has two communication streams, one for gradients and one for gathers; a stream runs its collectives
one after another. In full fidelity a collective starts when every simulated member of its group has reached it.

How it runs: a stream and a collective are chains of callbacks, not SimPy processes (a ZeRO 2 or 3 iteration runs
hundreds of thousands of collectives, and processes cost several times more). They make the events that the
processes did (SimPy's `Store` put and get events, a process's start as an urgent event, one event per phase's
end and one at the collective's end), at the same points, so simultaneous events keep their order and results
stay the same to the bit, with two kinds of exceptions, each exact:
- an event nothing can see is left out (each case says why, where it is left out);
- an event at this instant that would be the very next one processed (none other is due at this instant, see
  `soon_or_now`), made as the last thing its caller does, is not made: what its processing would do is done now.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import simpy

from simcore.cost.collectives import Collective
from simcore.cost.kernels import BYTES
from simcore.cost.parameters import DP_BUCKET_ELEMENTS
from simcore.cost.patterns import FlowPattern
from simcore.domain.schedules import BACKWARD, Pass
from simcore.engine.recorder import RankRecord
from simcore.engine.streams import PENDING, READY, Job, Stream, release_all, soon_or_now, urgently

if TYPE_CHECKING:
    from simcore.engine.pipeline import Engine

Gate = Callable[[], simpy.Event]  # asking for a gate issues its gather (if any) and returns its event


class GradientSync:
    """The data-parallel collectives of an engine's ranks. It keeps what it needs of the engine, not the engine,
    and counts its own events (the engine adds them to its count)."""

    def __init__(self, engine: Engine) -> None:
        self.env, self.c, self.net, self.rec = engine.env, engine.c, engine.net, engine.rec
        self.replicas = engine.replicas
        self.events = 0
        layout = engine.c.layout
        self.dp = layout.dp
        self.zero = layout.zero_stage
        self.overlap = layout.overlap_grad_reduce
        self.joins: dict[tuple[str, int, int], tuple[list[int], simpy.Event]] = {}  # full fidelity's
        self._streams: dict[tuple[int, int, str], Stream] = {}
        self._pass_ready: dict[tuple[int, int, int], list[Job]] = {}  # each backward pass's gradient jobs
        self._first_forward: dict[tuple[int, int, int], list[simpy.Event]] = {}
        self._phases: dict[tuple[Collective, int], tuple[FlowPattern, ...]] = {}
        self._instant: dict[tuple[Collective, int], bool] = {}
        self._last_backward: dict[tuple[int, int], int] = {}
        self._buckets: dict[tuple[int, int], list[int]] = {}
        self._urgent = 0  # urgent events due

    @property
    def active(self) -> bool:
        return self.dp > 1

    def buckets(self, rank: int, chunk: int) -> list[int]:
        """Parameters per gradient bucket of one chunk, in the order backward produces them: Megatron's buckets,
        or with ZeRO 3 one per layer (FSDP reduces each layer's flat parameter at once). Computed once per chunk;
        the list is shared, not to be changed."""
        found = self._buckets.get((rank, chunk))
        if found is None:
            found = self._buckets[(rank, chunk)] = self._chunk_buckets(rank, chunk)
        return found

    def _chunk_buckets(self, rank: int, chunk: int) -> list[int]:
        cost = next(c for c in self.c.workload.chunks if c.rank == rank and c.chunk == chunk)
        if self.zero >= 3:
            layers = max(cost.layers, 1)
            return [cost.parameters // layers] * layers
        # Megatron-Core: one bucket (the whole chunk) unless the reduction overlaps backward, and no bucketing
        # for the second model chunk onwards; buckets of max(40M, 1M x dp) elements otherwise.
        if not self.overlap or chunk > 0:
            return [cost.parameters]
        size = max(DP_BUCKET_ELEMENTS, 1_000_000 * self.dp)
        full, rest = divmod(cost.parameters, size)
        return [size] * full + ([rest] if rest else [])

    # -- set-up --------------------------------------------------------------------------------------------
    def start(self, replica: int, rank: int, record: RankRecord, passes: list[Pass]) -> simpy.Event:
        """Queue the rank's gradient reductions (and ZeRO 1/2's overlapped parameter gathers); return the event
        of its last gradient collective finishing."""
        env = self.env
        done = env.event()
        if not self.active:
            done.succeed()
            return done
        backward = [i for i, ps in enumerate(passes) if ps.direction == BACKWARD]
        last = {passes[i].chunk: i for i in backward}
        self._last_backward[(replica, rank)] = backward[-1]
        reducing = backward if self.zero >= 2 else sorted(last.values())
        kind = Collective.ALL_REDUCE if self.zero == 0 else Collective.REDUCE_SCATTER
        width = self.c.layout.grad_reduce_bytes
        job = None
        for i in reducing:
            jobs = []
            for n in self.buckets(rank, passes[i].chunk):
                job = Job(kind, "grad", float(n * width), PENDING, None)
                jobs.append(job)
                self._submit(replica, rank, "grad", job, record)
            self._pass_ready[(replica, rank, i)] = jobs
        if job is not None:  # only the last reduction is waited for
            job.done = env.event()
            job.done.callbacks.append(lambda _e: _trigger(done))
        else:
            done.succeed()
        if self.zero in (1, 2) and self.overlap:
            for chunk in sorted(last):
                self._first_forward[(replica, rank, chunk)] = [
                    self._gather(replica, rank, n, record) for n in reversed(self.buckets(rank, chunk))]
        return done

    def _stream(self, replica: int, rank: int, name: str, record: RankRecord) -> Stream:
        key = (replica, rank, name)
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = Stream(self, replica, rank, name, record)
        return stream

    def _submit(self, replica: int, rank: int, name: str, job: Job, record: RankRecord) -> None:
        self._stream(replica, rank, name, record).put(job)

    def _gather(self, replica: int, rank: int, parameters: float, record: RankRecord) -> simpy.Event:
        """Queue an all-gather of `parameters`; the event of its end."""
        done = self.env.event()
        self._queue_gather(replica, rank, parameters, record, done)
        return done

    def _queue_gather(self, replica: int, rank: int, parameters: float, record: RankRecord,
                      done: simpy.Event | None) -> None:
        # Ready at once: its `ready` event would come before the get of any stream (see Stream).
        self._submit(replica, rank, "gather", Job(Collective.ALL_GATHER, "param", parameters * BYTES, READY, done),
                     record)

    def _gather_layer(self, replica: int, rank: int, parameters: float, record: RankRecord) -> simpy.Event:
        """ZeRO 3's gather of one layer: one all-gather (FSDP's unit), or with a bucket size one all-gather per
        bucket, one after another on the gather stream; the last one's event."""
        bucket = self.c.layout.zero3_gather_bucket_elements
        count = max(1, math.ceil(parameters / bucket)) if bucket else 1
        for _ in range(count - 1):
            self._queue_gather(replica, rank, parameters / count, record, None)  # nobody waits for these
        return self._gather(replica, rank, parameters / count, record)

    def instant(self, kind: Collective, rank: int) -> bool:
        """Can a collective of `kind` on the rank's group end at the instant it starts?"""
        quick = self._instant.get((kind, rank))
        if quick is None:
            quick = self._instant[(kind, rank)] = self.c.free_communication or any(
                phase.latency_s <= 0 for phase in self._phase_list(kind, rank))
        return quick

    # -- what the rank's passes call -------------------------------------------------------------------------
    def pass_gates(self, replica: int, rank: int, index: int, ps: Pass, layers: int, parameters: int,
                   record: RankRecord) -> list[Gate]:
        """Gates a pass runs behind, one per slice of it: ZeRO 3's per-layer gathers, or ZeRO 1/2's overlapped
        gathers before a chunk's first forward pass; empty otherwise."""
        if self.zero >= 3 and self.dp > 1:
            per_layer = parameters / max(layers, 1)
            return [lambda: self._gather_layer(replica, rank, per_layer, record) for _ in range(max(layers, 1))]
        if not self._first_forward or ps.direction == BACKWARD:
            return []
        events = self._first_forward.pop((replica, rank, ps.chunk), None)
        return [_issued(event) for event in events] if events else []

    def backward_pass(self, replica: int, rank: int, index: int, start: float, end: float) -> None:
        """Backward pass `index` of the rank runs from `start` (now) to `end`: schedule its buckets' readiness."""
        if self.dp == 1:
            return
        env = self.env
        mine = self._pass_ready.get((replica, rank, index), [])
        if self.overlap:
            times = [(job, start + (end - start) * (k + 1) / len(mine)) for k, job in enumerate(mine)]
        elif self.zero >= 2:
            times = [(job, end) for job in mine]
        elif index == self._last_backward[(replica, rank)]:
            times = [(job, end) for key, jobs in self._pass_ready.items() if key[:2] == (replica, rank)
                     for job in jobs]
        else:
            return
        if times:
            # One timer per job, made from an urgent event at this instant, as the processes that the original
            # started here for them would (a process starts from an urgent event).
            stream = self._streams[(replica, rank, "grad")]
            delays = [(job, when - env.now) for job, when in times]
            self.urgently(lambda: release_all(env, stream, delays))
            self.events += len(times)

    def gather_after_step(self, replica: int, rank: int, record: RankRecord) -> simpy.Event | None:
        """ZeRO 1 and 2 without overlap: gather the updated parameters after the optimizer step."""
        if not self.active or self.zero not in (1, 2) or self.overlap:
            return None
        sizes = [n for chunk in sorted({c.chunk for c in self.c.workload.chunks if c.rank == rank})
                 for n in reversed(self.buckets(rank, chunk))]
        for n in sizes[:-1]:
            self._queue_gather(replica, rank, n, record, None)  # the rank waits for the last one only
        return self._gather(replica, rank, sizes[-1], record)

    # -- collectives -----------------------------------------------------------------------------------------
    def collective(self, kind: Collective, rank: int, size: float, complete: Callable[[], object]) -> None:
        """Run the collective's phases one after the other on the flow network, then call `complete` (as the
        collective's process would succeed its end event). It starts from an urgent event, as a process does.
        Callers call it as the last thing they do that makes events."""
        phases = () if self.c.free_communication else self._phase_list(kind, rank)
        if self._urgent or self.env.now <= 0 or self.instant(kind, rank):
            self.urgently(lambda: self._phase(phases, 0, size, complete))
        else:
            # No urgent event is due (at t > 0 SimPy makes none but ours) and the caller makes no more events: the
            # urgent event would be the next one processed, so the first phase may start now. (Not if a phase can
            # end at once: the collective's end would then come before what the caller has still to do.)
            self._phase(phases, 0, size, complete)

    def urgently(self, call: Callable[[], None]) -> None:
        """Call `call` from an urgent event at this instant: what SimPy does to start a process
        (simpy.events.Initialize), for a callback; counted while due."""
        self._urgent += 1
        urgently(self.env, lambda: self._urgent_call(call))

    def _urgent_call(self, call: Callable[[], None]) -> None:
        self._urgent -= 1
        call()

    def _phase(self, phases: tuple[FlowPattern, ...], index: int, size: float,
               complete: Callable[[], object]) -> None:
        if index == len(phases):
            complete()
            return
        env = self.env
        self.events += 1
        # A phase's end is an event the next phase waits for; the flow network calls this as the last thing it
        # does on the flow's last byte.
        self.net.start(phases[index], size,
                       lambda: soon_or_now(env, lambda _e: self._phase(phases, index + 1, size, complete)))

    def _phase_list(self, kind: Collective, rank: int) -> tuple[FlowPattern, ...]:
        phases = self._phases.get((kind, rank))
        if phases is None:
            phases = self._phases[(kind, rank)] = self.c.collectives.data_parallel_phases(kind, self.c.placement, rank)
        return phases


def _issued(event: simpy.Event) -> Gate:
    """A gate whose gather is already in flight."""

    def gate() -> simpy.Event:
        return event

    return gate


def _trigger(event: simpy.Event) -> None:
    event.succeed()
