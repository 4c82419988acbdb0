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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

import simpy

from simcore.calibration import DP_BUCKET_ELEMENTS
from simcore.collectives import Collective
from simcore.costs import BYTES
from simcore.flows import FlowPattern
from simcore.recorder import RankRecord
from simcore.schedules import BACKWARD, Pass

if TYPE_CHECKING:
    from simcore.engine import Engine

Gate = Callable[[], simpy.Event]  # asking for a gate issues its gather (if any) and returns its event


class _Job:
    __slots__ = ("kind", "what", "size", "ready", "done")

    def __init__(self, kind: Collective, what: str, size: float, ready: simpy.Event, done: simpy.Event) -> None:
        self.kind, self.what, self.size, self.ready, self.done = kind, what, size, ready, done


class GradientSync:
    def __init__(self, engine: Engine) -> None:
        self.e = engine
        layout = engine.c.layout
        self.dp = layout.dp
        self.zero = layout.zero_stage
        self.overlap = layout.overlap_grad_reduce
        self._streams: dict[tuple[int, int, str], simpy.Store] = {}
        self._pass_ready: dict[tuple[int, int, int], list[simpy.Event]] = {}
        self._first_forward: dict[tuple[int, int, int], list[simpy.Event]] = {}
        self._joins: dict[tuple[str, int, int], tuple[list[int], simpy.Event]] = {}
        self._phases: dict[tuple[Collective, int], tuple[FlowPattern, ...]] = {}
        self._last_backward: dict[tuple[int, int], int] = {}

    @property
    def active(self) -> bool:
        return self.dp > 1

    def buckets(self, rank: int, chunk: int) -> list[int]:
        """Parameters per gradient bucket of one chunk, in the order backward produces them: Megatron's buckets,
        or with ZeRO 3 one per layer (FSDP reduces each layer's flat parameter at once)."""
        cost = next(c for c in self.e.c.workload.chunks if c.rank == rank and c.chunk == chunk)
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
        env = self.e.env
        done = env.event()
        if not self.active:
            done.succeed()
            return done
        backward = [i for i, ps in enumerate(passes) if ps.direction == BACKWARD]
        last = {passes[i].chunk: i for i in backward}
        self._last_backward[(replica, rank)] = backward[-1]
        reducing = backward if self.zero >= 2 else sorted(last.values())
        finished = done
        kind = Collective.ALL_REDUCE if self.zero == 0 else Collective.REDUCE_SCATTER
        width = self.e.c.layout.grad_reduce_bytes
        for i in reducing:
            events = []
            for n in self.buckets(rank, passes[i].chunk):
                ready = env.event()
                events.append(ready)
                job = _Job(kind, "grad", float(n * width), ready, env.event())
                finished = self._submit(replica, rank, "grad", job, record)
            self._pass_ready[(replica, rank, i)] = events
        if finished is not done:
            finished.callbacks.append(lambda _e: _trigger(done))
        else:
            done.succeed()
        if self.zero in (1, 2) and self.overlap:
            for chunk in sorted(last):
                self._first_forward[(replica, rank, chunk)] = [
                    self._gather(replica, rank, n, record) for n in reversed(self.buckets(rank, chunk))]
        return done

    def _stream(self, replica: int, rank: int, name: str, record: RankRecord) -> simpy.Store:
        key = (replica, rank, name)
        store = self._streams.get(key)
        if store is None:
            store = self._streams[key] = simpy.Store(self.e.env)
            self.e.env.process(self._run(replica, rank, name, store, record))
        return store

    def _submit(self, replica: int, rank: int, name: str, job: _Job, record: RankRecord) -> simpy.Event:
        self._stream(replica, rank, name, record).put(job)
        return job.done

    def _gather(self, replica: int, rank: int, parameters: float, record: RankRecord) -> simpy.Event:
        ready = self.e.env.event()
        ready.succeed()
        return self._submit(replica, rank, "gather",
                            _Job(Collective.ALL_GATHER, "param", parameters * BYTES, ready, self.e.env.event()), record)

    def _gather_layer(self, replica: int, rank: int, parameters: float, record: RankRecord) -> simpy.Event:
        """ZeRO 3's gather of one layer: one all-gather (FSDP's unit), or with a bucket size one all-gather per
        bucket, one after another on the gather stream; the last one's event."""
        bucket = self.e.c.layout.zero3_gather_bucket_elements
        count = max(1, math.ceil(parameters / bucket)) if bucket else 1
        for _ in range(count - 1):
            self._gather(replica, rank, parameters / count, record)
        return self._gather(replica, rank, parameters / count, record)

    # -- what the rank's passes call -------------------------------------------------------------------------
    def pass_gates(self, replica: int, rank: int, index: int, ps: Pass, layers: int, parameters: int,
                   record: RankRecord) -> list[Gate]:
        """Gates a pass runs behind, one per slice of it: ZeRO 3's per-layer gathers, or ZeRO 1/2's overlapped
        gathers before a chunk's first forward pass; empty otherwise."""
        if not self.active:
            return []
        if self.zero >= 3:
            per_layer = parameters / max(layers, 1)
            return [lambda: self._gather_layer(replica, rank, per_layer, record) for _ in range(max(layers, 1))]
        events = self._first_forward.pop((replica, rank, ps.chunk), None) if ps.direction != BACKWARD else None
        return [_issued(event) for event in events] if events else []

    def backward_pass(self, replica: int, rank: int, index: int, start: float, end: float) -> None:
        """Backward pass `index` of the rank runs from `start` (now) to `end`: schedule its buckets' readiness."""
        if not self.active:
            return
        env = self.e.env
        mine = self._pass_ready.get((replica, rank, index), [])
        if self.overlap:
            times = [(event, start + (end - start) * (k + 1) / len(mine)) for k, event in enumerate(mine)]
        elif self.zero >= 2:
            times = [(event, end) for event in mine]
        elif index == self._last_backward[(replica, rank)]:
            times = [(event, end) for key, events in self._pass_ready.items() if key[:2] == (replica, rank)
                     for event in events]
        else:
            return
        for event, when in times:
            env.process(self._release(event, when - env.now))
            self.e.events += 1

    def gather_after_step(self, replica: int, rank: int, record: RankRecord) -> simpy.Event | None:
        """ZeRO 1 and 2 without overlap: gather the updated parameters after the optimizer step."""
        if not self.active or self.zero not in (1, 2) or self.overlap:
            return None
        events = [self._gather(replica, rank, n, record)
                  for chunk in sorted({c.chunk for c in self.e.c.workload.chunks if c.rank == rank})
                  for n in reversed(self.buckets(rank, chunk))]
        return events[-1]

    # -- the streams -----------------------------------------------------------------------------------------
    def _release(self, event: simpy.Event, delay: float) -> Generator[simpy.Event, object, None]:
        yield self.e.env.timeout(delay)
        event.succeed()

    def _run(self, replica: int, rank: int, name: str, store: simpy.Store,
             record: RankRecord) -> Generator[simpy.Event, object, None]:
        env, n = self.e.env, self.dp
        track = f"stage {rank} {'dp' if name == 'grad' else 'gather'}" + (
            f"{replica}" if len(self.e.replicas) > 1 else "")
        count = 0
        while True:
            job = yield store.get()
            assert isinstance(job, _Job)
            yield job.ready
            start = env.now
            comm = "dp" if job.what == "grad" else "zero"
            factor = 2 * (n - 1) / n if job.kind is Collective.ALL_REDUCE else (n - 1) / n
            record.comm_bytes[comm] += factor * job.size
            arrived, complete = self._joins.setdefault((name, rank, count), ([0], env.event()))
            count += 1
            arrived[0] += 1
            if arrived[0] == len(self.e.replicas):
                env.process(self._collective(job.kind, rank, job.size, complete))
            yield complete
            record.comm_busy_s[comm] += env.now - start
            self.e.rec.span(track, f"{job.kind.value.replace('_', '-')} {job.what}", "dp_comm", start, env.now)
            job.done.succeed()

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


def _issued(event: simpy.Event) -> Gate:
    """A gate whose gather is already in flight."""

    def gate() -> simpy.Event:
        return event

    return gate


def _trigger(event: simpy.Event) -> None:
    event.succeed()
