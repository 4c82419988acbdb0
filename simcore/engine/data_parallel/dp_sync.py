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
parameters; Rajbhandari et al. §7). Parameters are gathered in 16 bits, or with `fp8_param_gather` the FP8 GEMM
weights in FP8 (simcore/domain/fp8_params.py: 1 byte each, MXFP8's 2).

Buckets are Megatron-Core's (simcore/cost/comm/grad_buckets.py, `ChunkCost.grad_buckets`): parameter by parameter
from the chunk's end, each closed at layout.grad_bucket_elements (default max(40M, 1M x dp)) or more, with FP8
parameters' buckets apart and the other parameters joining the last, when the reduction overlaps backward on the
first pipeline rank's first chunk; else a chunk's whole gradient as one. Gradients are reduced in fp32 for bf16 training
(Megatron's default) and in fp16 for fp16 training, unless layout.grad_reduce_dtype says otherwise (bf16:
Megatron-LM's --grad-reduce-in-bf16, half the bytes). With overlap_grad_reduce a pass's buckets become ready one
after another during the pass and go out at once; without it they go after the pass (ZeRO 2 and 3) or after the
rank's last backward pass. With ZeRO 1 or 2 and overlap, the parameter all-gather is the one Megatron overlaps
with the next iteration's forward (--overlap-param-gather): in a steady state it is in flight when an iteration
starts, and a chunk's first forward pass waits for its buckets.

Each rank has two communication streams, one for gradients and one for gathers; a stream runs its collectives
one after another. In full fidelity a collective starts when every simulated member of its group has reached it.

How it runs: a stream (simcore/engine/data_parallel/streams.py) and a collective
(simcore/engine/data_parallel/dp_collectives.py) are chains of calls on the clock, not processes (a ZeRO 2 or 3
iteration runs hundreds of thousands of collectives, and processes cost several times more). They make the calls that
SimPy's processes and `Store` did, at the same points and in the same order, so results stay the same to the bit; the
only events left out are ones nothing can see (each case says why, where it is left out). Objects point one way: the
engine holds this synchronisation, which holds the streams and the collectives; a stream holds the collectives' `run`
and `instant` for its rank and the rendezvous of its replicas, never the synchronisation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from simcore.cost.comm.collectives import Collective
from simcore.cost.comm.grad_buckets import gradient_buckets
from simcore.cost.compute.fp8 import parameter_gather_bytes
from simcore.cost.sharding import policy as sharding_policy
from simcore.cost.workload import Workload
from simcore.domain.grad_reduce import GRAD_REDUCE_DTYPE_BYTES
from simcore.domain.hybrid_shard import hybrid, shard_ranks
from simcore.domain.layout import Layout
from simcore.domain.schedules import BACKWARD_WEIGHT, FORWARD, Pass, produces_weight_gradients
from simcore.engine.clock import Clock, Event
from simcore.engine.compute import ComputeStream
from simcore.engine.data_parallel.dp_collectives import DataParallelCollectives
from simcore.engine.data_parallel.hybrid import REPLICATE, SHARD, HybridStreams
from simcore.engine.data_parallel.streams import PENDING, READY, Job, Rendezvous, Stream, meeting, release_all
from simcore.engine.recorder import RankRecord, Recorder

Gate = Callable[[], Event]  # asking for a gate issues its gather (if any) and returns its event


class GradientSync:
    """The data-parallel collectives of an engine's ranks (`replicas` are the simulated data-parallel ones). It
    counts the events it makes on the clock (`Clock.events`)."""

    def __init__(self, clock: Clock, layout: Layout, workload: Workload, collectives: DataParallelCollectives,
                 recorder: Recorder, replicas: list[int]) -> None:
        self.clock, self.workload, self.collectives, self.rec = clock, workload, collectives, recorder
        self.replicas = replicas
        self.dp = layout.dp_cp  # the gradient-reduction group: data-parallel x context-parallel ranks
        self.layout = layout
        self.zero = layout.zero_stage
        self.overlap = layout.overlap_grad_reduce
        self.grad_reduce_bytes = layout.grad_reduce_bytes
        self.sharded_grad_bytes = GRAD_REDUCE_DTYPE_BYTES[layout.reduce_dtype]  # DeepSpeed's (sharded.py)
        self.zero3_bucket = layout.zero3_gather_bucket_elements
        self.policy = sharding_policy(layout.zero_implementation)
        # Bytes per parameter of each chunk's parameter gathers: 16-bit, or with fp8_param_gather its FP8 GEMM
        # weights at the recipe's FP8 bytes (simcore/cost/compute/fp8.py parameter_gather_bytes).
        self._gather_bytes: dict[tuple[int, int | None], float] = {
            (c.rank, c.chunk): parameter_gather_bytes(layout, c.parameters, c.fp8_parameters)
                              for c in workload.chunks}
        self._streams: dict[tuple[int, int, str], Stream] = {}
        self._rendezvous: dict[tuple[object, ...], Rendezvous] = {}  # full fidelity's
        self._pass_ready: dict[tuple[int, int, int], list[Job]] = {}  # each backward pass's gradient jobs
        self._first_forward: dict[tuple[int, int, int], list[Event]] = {}
        self._last_backward: dict[tuple[int, int], int] = {}
        self._buckets: dict[tuple[int, int], list[int]] = {}
        # Each simulated GPU's compute stream, where interference is modelled: its collectives slow its passes.
        self.gpus: dict[tuple[int, int], ComputeStream] = {}
        # HSDP: the gathers and reduce-scatters within shard groups, the all-reduces across them (hybrid.py)
        self.hybrid = HybridStreams(clock, collectives, shard_ranks(layout), self.dp, replicas, recorder) \
            if hybrid(layout) else None

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
        cost = next(c for c in self.workload.chunks if c.rank == rank and c.chunk == chunk)
        if cost.grad_buckets:
            return list(cost.grad_buckets)
        return gradient_buckets(cost.reduced_parameters, cost.layers, self.layout.dp, self.zero, self.overlap, chunk,
                                self.layout.grad_bucket_elements)

    # -- set-up --------------------------------------------------------------------------------------------
    def start(self, replica: int, rank: int, record: RankRecord, passes: list[Pass]) -> Event:
        """Queue the rank's gradient reductions (and ZeRO 1/2's overlapped parameter gathers); return the event
        of its last gradient collective finishing."""
        done = Event(self.clock)
        if not self.active or self.policy is not None:
            # The frameworks' implementations reduce from their passes: FSDP after each unit's backward
            # (`unit_reduced`), DeepSpeed from simcore/engine/data_parallel/sharded.py.
            done.succeed()
            return done
        makes = {d: produces_weight_gradients(d) for d in {ps.direction for ps in passes}}
        backward = [i for i, ps in enumerate(passes) if makes[ps.direction]]
        last = {passes[i].chunk: i for i in backward}
        self._last_backward[(replica, rank)] = backward[-1]
        reducing = backward if self.zero >= 2 else sorted(last.values())
        kind = Collective.ALL_REDUCE if self.zero == 0 else Collective.REDUCE_SCATTER
        grads = self._stream(replica, rank, "grad", record)
        job = None
        for i in reducing:
            jobs = []
            for n in self.buckets(rank, passes[i].chunk):
                job = Job(kind, "grad", float(n * self.grad_reduce_bytes), PENDING, None)
                jobs.append(job)
                grads.put(job)
                if self.hybrid is not None:  # the shard's all-reduce across the instances, after its reduce-scatter
                    job = Job(Collective.ALL_REDUCE, "grad", float(n * self.grad_reduce_bytes) / self.hybrid.shard,
                              READY, None, ranks=self.dp // self.hybrid.shard)
                    grads.put(job)
            self._pass_ready[(replica, rank, i)] = jobs
        if job is not None:  # only the last reduction is waited for
            job.done = Event(self.clock)
            job.done.callbacks.append(_succeeds(done))
        else:
            done.succeed()
        if self.zero in (1, 2) and self.overlap:
            for chunk in sorted(last):
                self._first_forward[(replica, rank, chunk)] = [
                    self._gather(replica, rank, chunk, n, record) for n in reversed(self.buckets(rank, chunk))]
        return done

    def stream(self, replica: int, rank: int, name: str, record: RankRecord) -> Stream:
        """The rank's communication stream `name` ("grad" or "gather"), made on first use."""
        return self._stream(replica, rank, name, record)

    def _stream(self, replica: int, rank: int, name: str, record: RankRecord) -> Stream:
        if self.hybrid is not None and name in (SHARD, REPLICATE):
            return self.hybrid.stream(replica, rank, name, record, self.gpus.get((replica, rank)))
        if self.hybrid is not None and name == "grad":  # Megatron's partial distributed optimizer
            return self.hybrid.grad_stream(replica, rank, record, self.gpus.get((replica, rank)))
        key = (replica, rank, name)
        stream = self._streams.get(key)
        if stream is None:
            many = len(self.replicas) > 1
            rendezvous = meeting(self._rendezvous, self.clock, (rank, name), len(self.replicas)) if many else None
            track = f"stage {rank} {'dp' if name == 'grad' else 'gather'}" + (f"{replica}" if many else "")
            stream = self._streams[key] = Stream(
                self.clock, partial(self.collectives.run, rank), partial(self.collectives.instant, rank),
                rendezvous, self.dp, record, self.rec, track, partial(self.collectives.label, rank),
                self.gpus.get((replica, rank)), partial(self.collectives.load, rank))
        return stream

    def _grads(self, replica: int, rank: int) -> Stream:
        """The rank's gradient stream, made by `start`."""
        if self.hybrid is not None:
            return self.hybrid.made(replica, rank, "grad")
        return self._streams[(replica, rank, "grad")]

    def gather_bytes(self, rank: int, chunk: int | None = None) -> float:
        """Bytes per parameter of the rank's parameter gathers: of one chunk's, or on average over its chunks."""
        if chunk is not None:
            return self._gather_bytes[(rank, chunk)]
        found = self._gather_bytes.get((rank, None))
        if found is None:
            mine = [c for c in self.workload.chunks if c.rank == rank]
            total = sum(c.parameters for c in mine)
            found = sum(c.parameters * self._gather_bytes[(rank, c.chunk)] for c in mine) / total if total else 2.0
            self._gather_bytes[(rank, None)] = found
        return found

    def _gather(self, replica: int, rank: int, chunk: int, parameters: float, record: RankRecord) -> Event:
        """Queue an all-gather of `parameters` of a chunk; the event of its end."""
        done = Event(self.clock)
        self._queue_gather(replica, rank, chunk, parameters, record, done)
        return done

    def _queue_gather(self, replica: int, rank: int, chunk: int, parameters: float, record: RankRecord,
                      done: Event | None) -> None:
        # Ready at once: its `ready` event would come before the get of any stream (see Stream).
        job = Job(Collective.ALL_GATHER, "param", parameters * self._gather_bytes[(rank, chunk)], READY, done)
        self._stream(replica, rank, "gather", record).put(job)

    def _gather_layer(self, replica: int, rank: int, chunk: int, parameters: float, record: RankRecord) -> Event:
        """ZeRO 3's gather of one layer: one all-gather (FSDP's unit), or with a bucket size one all-gather per
        bucket, one after another on the gather stream; the last one's event."""
        bucket = self.zero3_bucket
        count = max(1, math.ceil(parameters / bucket)) if bucket else 1
        for _ in range(count - 1):
            self._queue_gather(replica, rank, chunk, parameters / count, record, None)  # nobody waits for these
        return self._gather(replica, rank, chunk, parameters / count, record)

    def gather_depth(self, direction: str) -> int:
        """How many slices ahead of the one computing the gathers may run: one (Megatron's ZeRO 3), or the
        implementation's limits (FSDP: two in forward, `limit_all_gathers`; one in backward, BACKWARD_PRE)."""
        if self.policy is None:
            return 1
        return self.policy.backward_depth if direction != FORWARD else self.policy.forward_depth

    def unit_reduced(self, replica: int, rank: int, parameters: float, record: RankRecord) -> Event | None:
        """FSDP: reduce-scatter a unit's gradient as its backward ends, on the stream its all-gathers use (one
        process group runs its collectives on one NCCL stream: pytorch/pytorch#65299, #64803); the event of its
        end. None for Megatron's ZeRO 3, whose gradient buckets `start` queues."""
        if self.policy is None or not self.active:
            return None
        done = Event(self.clock)
        job = Job(Collective.REDUCE_SCATTER, "grad", parameters * self.grad_reduce_bytes, READY, done)
        self._stream(replica, rank, "gather", record).put(job)
        if self.hybrid is None:
            return done
        # HSDP: the reduce-scatter's output shard all-reduced across the replicas once it is there
        shard = parameters / self.hybrid.shard * self.grad_reduce_bytes
        average = Job(Collective.ALL_REDUCE, "grad", shard, PENDING, Event(self.clock))
        replicate = self._stream(replica, rank, REPLICATE, record)
        replicate.put(average)
        done.callbacks.append(lambda _ended: self._release(replicate, average))
        return average.done

    def _release(self, stream: Stream, job: Job) -> None:
        stream.release(job)
        self.clock.events += 1

    # -- what the rank's passes call -------------------------------------------------------------------------
    def pass_gates(self, replica: int, rank: int, ps: Pass, layers: int, parameters: int,
                   record: RankRecord) -> list[Gate]:
        """Gates a pass runs behind, one per slice of it: ZeRO 3's per-layer gathers, or ZeRO 1/2's overlapped
        gathers before a chunk's first forward pass; empty otherwise."""
        if ps.direction == BACKWARD_WEIGHT:  # a weight gradient reads activations and gradients, not weights
            return []
        if self.zero >= 3 and self.dp > 1:
            per_layer = parameters / max(layers, 1)
            return [partial(self._gather_layer, replica, rank, ps.chunk, per_layer, record)
                    for _ in range(max(layers, 1))]
        if not self._first_forward or ps.direction != FORWARD:
            return []
        events = self._first_forward.pop((replica, rank, ps.chunk), None)
        return [_issued(event) for event in events] if events else []

    def backward_pass(self, replica: int, rank: int, index: int, start: float, end: float) -> None:
        """Backward pass `index` of the rank runs from `start` (now) to `end`: schedule its buckets' readiness."""
        times = self.release_times(replica, rank, index, start, end)
        if times:
            # One timer per job, made from an urgent call at this instant, as the processes that SimPy started
            # here for them would (a process starts from an urgent event).
            now = self.clock.now
            delays = [(job, when - now) for job, when in times]
            self.clock.call_urgently(release_all, self._grads(replica, rank), delays)
            self.clock.events += len(times)

    def release_times(self, replica: int, rank: int, index: int, start: float,
                      end: float) -> list[tuple[Job, float]]:
        """When the gradient jobs that backward pass `index` makes ready become ready, for a pass from `start` to
        `end` at full speed: during it (overlap: bucket k of K at k/K of the pass), at its end, or none."""
        if self.dp == 1:
            return []
        mine = self._pass_ready.get((replica, rank, index), [])
        if self.overlap:
            return [(job, start + (end - start) * (k + 1) / len(mine)) for k, job in enumerate(mine)]
        if self.zero >= 2:
            return [(job, end) for job in mine]
        if index == self._last_backward[(replica, rank)]:
            return [(job, end) for key, jobs in self._pass_ready.items() if key[:2] == (replica, rank)
                    for job in jobs]
        return []

    def release(self, replica: int, rank: int, job: Job) -> None:
        """Make a gradient job ready now (a milestone of the pass that made it, run under interference)."""
        self._grads(replica, rank).release(job)
        self.clock.events += 1

    def gather_after_step(self, replica: int, rank: int, record: RankRecord) -> Event | None:
        """ZeRO 1 and 2 without overlap: gather the updated parameters after the optimizer step."""
        if not self.active or self.zero not in (1, 2) or self.overlap:
            return None
        sizes = [(chunk, n) for chunk in sorted({c.chunk for c in self.workload.chunks if c.rank == rank})
                 for n in reversed(self.buckets(rank, chunk))]
        for chunk, n in sizes[:-1]:
            self._queue_gather(replica, rank, chunk, n, record, None)  # the rank waits for the last one only
        return self._gather(replica, rank, *sizes[-1], record)


def _succeeds(event: Event) -> Callable[[object], None]:
    """A callback that succeeds `event` (the rank's last gradient reduction ending ends its reductions)."""

    def callback(_ended: object) -> None:
        event.succeed()

    return callback


def _issued(event: Event) -> Gate:
    """A gate whose gather is already in flight."""

    def gate() -> Event:
        return event

    return gate
