"""ZeRO 3 as DeepSpeed runs it (`zero_implementation` deepspeed and deepspeed_2021): a pass is a sequence of
visits of sub-modules (simcore/cost/sharding.py builds them), each behind the gathers of its parameters, with the
framework's prefetch, synchronisations and gradient reductions as events.

For each visit, in order:
1. Fetch. A unit whose parameters are resident (persistent, or kept from a visit within the reuse distance)
   needs nothing. Else its gathers, if not prefetched, are issued now, and the compute stream waits for them.
   deepspeed_2021: `_synchronize_communication` then waits for every gather in flight and for the device
   (torch.cuda.synchronize: every stream, the gradient reductions included): the compute stream stalls.
2. Prefetch. deepspeed: gathers of the next units in trace order until the elements in flight reach the
   prefetch bucket (at least one unit, at most `forward_depth` units in flight). deepspeed_2021: the same bucket,
   but only when no gather is in flight.
3. Issue costs (deepspeed_2021): each parameter's all-gather is preceded by torch.cuda.synchronize() (the
   device drains: the previous gather and its copies, the reductions) and is list-based: the host issues
   `host_ops_per_rank` ops per rank of the group (DeepSpeed's `narrow` per rank, ProcessGroupNCCL's copy of each
   rank's part) at HOST_DISPATCH_S each, during which the compute stream has nothing to run; on the GPU the
   copies follow the NCCL kernel, one kernel (KERNEL_OVERHEAD_S at least) per rank.
4. Compute: the visit's share of the pass (under interference, when the engine models it, beside the gathers
   and reductions in flight).
5. Gradients (backward visits): each parameter's gradient goes into the reduce bucket; when the next one would
   overflow it, the bucket is reduce-scattered: deepspeed one coalesced collective, which the host first builds
   rank by rank (ShardingPolicy.reduce_host_s); deepspeed_2021 one per parameter, each list-based (the host
   flattens the per-rank inputs: the same host ops per rank), issued by the host one after another while the
   compute runs. The end of the backward pass reduces what is left and waits
   for every reduction (DeepSpeed's epilogue synchronises the reduction stream).
The host cannot launch the next visit before it has issued the reductions; the time the compute stream waits,
for gathers, the device or the host's issuing, is `dp_comm`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from simcore.cost.comm.collectives import Collective
from simcore.cost.parameters import KERNEL_OVERHEAD_S
from simcore.cost.sharding import ShardingPolicy, Unit, Visit, pass_visits
from simcore.cost.workload import ChunkCost
from simcore.cost.zeropp import ZeroppCosts
from simcore.domain.schedules import BACKWARD, Pass
from simcore.engine.clock import Clock, Event, Process
from simcore.engine.compute import ComputeStream
from simcore.engine.data_parallel.dp_sync import GradientSync
from simcore.engine.data_parallel.streams import READY, Job
from simcore.engine.data_parallel.zeropp_streams import ZeroppStreams
from simcore.engine.recorder import Category, RankRecord, Recorder


@dataclass(slots=True)
class _RankState:
    """One simulated rank's parameters and collectives in flight."""

    resident: set[int] = field(default_factory=set)  # units whose parameters are gathered
    inflight: dict[int, list[Event]] = field(default_factory=dict)  # unit -> its gathers' ends
    reductions: list[Event] = field(default_factory=list)  # gradient reductions not known to have ended
    # gradients waiting in the reduce bucket: (elements, whether a matrix)
    bucket: list[tuple[int, bool]] = field(default_factory=list)
    host_free_s: float = 0.0  # when the host has issued what it was asked to


class ShardedPasses:
    """Runs the passes of ranks under a per-sub-module policy; `units` are each virtual stage's units."""

    def __init__(self, clock: Clock, sync: GradientSync, policy: ShardingPolicy, units: tuple[tuple[Unit, ...], ...],
                 recorder: Recorder, dp: int, regather: bool, zeropp: ZeroppCosts | None = None) -> None:
        self.clock, self.sync, self.policy, self.units, self.rec = clock, sync, policy, units, recorder
        self.dp, self.regather = dp, regather
        self.zeropp = zeropp  # DeepSpeed's ZeRO++ options (simcore/cost/zeropp.py), None when off
        self.extra = None if zeropp is None else ZeroppStreams(clock, sync.collectives, zeropp, sync.replicas,
                                                               recorder)
        host = dp * policy.host_ops_per_rank * policy.host_op_s if policy.list_collectives else 0.0
        self.host_s = host  # host time to issue one collective
        self.copies_s = dp * KERNEL_OVERHEAD_S if policy.list_collectives else 0.0  # GPU copies after a gather
        # DeepSpeed reduces gradients in its communication_data_type: the parameters' 16-bit type unless the layout
        # says otherwise (layout.grad_reduce_dtype)
        self.grad_bytes = sync.sharded_grad_bytes
        self._visits: dict[tuple[int, float, float, float], tuple[tuple[Visit, ...], tuple[Visit, ...]]] = {}
        self._states: dict[tuple[int, int], _RankState] = {}

    def visits(self, cost: ChunkCost) -> tuple[tuple[Visit, ...], tuple[Visit, ...]]:
        key = (cost.virtual_stage, cost.forward_s, cost.recompute_s, cost.backward_s)  # a straggler's are slower
        found = self._visits.get(key)
        if found is None:
            found = self._visits[key] = pass_visits(
                self.units[cost.virtual_stage], cost.forward_s, cost.recompute_s, cost.backward_s,
                self.regather and self.policy.regather_on_recompute, self.policy.reuse_distance_elements)
        return found

    def gathered(self, unit: Unit) -> tuple[int, ...]:
        """The parameters a unit's fetch gathers: those at or above the persistence threshold; one coalesced
        collective unless the policy gathers per parameter."""
        big = tuple(p for p in unit.parameters if p >= self.policy.persistence_threshold)
        if self.policy.per_parameter or not big:
            return big
        return (sum(big),)

    # -- collectives -------------------------------------------------------------------------------------------
    def _gather(self, replica: int, rank: int, elements: int, record: RankRecord, secondary: bool = False) -> Event:
        """All-gather a unit's parameters; with ZeRO++ (`secondary`: hpZ's gather of a backward hook, within the
        secondary group) its bytes and kernels are ZeroppCosts's."""
        end = Event(self.clock)
        # 16-bit parameters, or FSDP's float8 all-gather of the FP8 GEMM weights (layout.fp8_param_gather)
        element_bytes = self.sync.gather_bytes(rank)
        zpp, extra = self.zeropp, self.extra
        if zpp is None or extra is None:
            job = Job(Collective.ALL_GATHER, "param", float(elements * element_bytes), READY, end, self.copies_s)
            self.sync.stream(replica, rank, "gather", record).put(job)
            return end
        # qwZ's quantization and dequantization after the gather; a forward gather's secondary shard copy (hpZ)
        kernels = zpp.after_gather_s(elements, zpp.hpz if secondary else self.dp)
        kernels += 0.0 if secondary else zpp.secondary_copy_s(elements)
        weights, scales = zpp.gather_bytes(elements, element_bytes)
        stream = extra.hpz(replica, rank, record) if secondary else self.sync.stream(replica, rank, "gather", record)
        if scales:  # qwZ: the int8 weights' all-gather, then the scales' on the same group
            stream.put(Job(Collective.ALL_GATHER, "param", weights, READY, None))
            weights = scales
        stream.put(Job(Collective.ALL_GATHER, "param", weights, READY, end, self.copies_s + kernels))
        return end

    def _reduce(self, replica: int, rank: int, bucket: list[tuple[int, bool]], record: RankRecord,
                st: _RankState) -> None:
        """Reduce-scatter the bucket's gradients: one collective, or one per parameter issued by the host one
        after another (each once the host has done its per-rank ops); with qgZ, `_reduce_quantized`."""
        if self.zeropp is not None and self.zeropp.quantized_gradients:
            self._reduce_quantized(replica, rank, bucket, record, st)
            return
        elements = [e for e, _ in bucket]
        sizes = elements if self.policy.per_parameter else [sum(elements)]
        stream = self.sync.stream(replica, rank, "gather", record)  # one process group: one NCCL stream
        # (deepspeed: the host first builds the coalesced collective rank by rank, ShardingPolicy.reduce_host_s)
        when = max(self.clock.now, st.host_free_s) + self.policy.reduce_host_s(elements, self.dp)
        for size in sizes:
            when += self.host_s
            end = Event(self.clock)
            job = Job(Collective.REDUCE_SCATTER, "grad", float(size * self.grad_bytes), READY, end, self.copies_s)
            st.reductions.append(end)
            self.clock.call_in(when - self.clock.now, stream.put, job)
            self.clock.events += 1
        st.host_free_s = when

    def _reduce_quantized(self, replica: int, rank: int, bucket: list[tuple[int, bool]], record: RankRecord,
                          st: _RankState) -> None:
        """qgZ (all_to_all_quant_reduce): each matrix's gradient on the qgZ stream (two all-to-alls, its kernels
        after them), each vector's as a reduce-scatter of its own, which the host first builds rank by rank; in
        the bucket's order, issued by the host one after another."""
        zpp, extra = self.zeropp, self.extra
        assert zpp is not None and extra is not None
        when = max(self.clock.now, st.host_free_s)
        for elements, matrix in bucket:
            end = Event(self.clock)
            if matrix:
                job = Job(Collective.REDUCE_SCATTER, "grad", zpp.qgz_bytes(elements)[0], READY, end,
                          zpp.qgz_kernels_s(elements))
                stream = extra.qgz(replica, rank, record)
            else:  # (one process group with the gathers: one NCCL stream)
                when += self.policy.reduce_host_s([elements], self.dp)
                job = Job(Collective.REDUCE_SCATTER, "grad", float(elements * self.grad_bytes), READY, end)
                stream = self.sync.stream(replica, rank, "gather", record)
            st.reductions.append(end)
            self.clock.call_in(when - self.clock.now, stream.put, job)
            self.clock.events += 1
        st.host_free_s = when

    # -- a pass ------------------------------------------------------------------------------------------------
    def run(self, replica: int, rank: int, ps: Pass, cost: ChunkCost, record: RankRecord, track: str,
            gpu: ComputeStream | None = None, share: float = 0.0) -> Process:
        """Run one pass's visits (a process); waits are added to the record's `dp_comm`. With `gpu` (interference
        modelled) each visit's compute runs on it, `share` of it slowed by the collectives in flight."""
        st = self._states.setdefault((replica, rank), _RankState())
        forward, backward = self.visits(cost)
        visits = backward if ps.direction == BACKWARD else forward
        units = self.units[cost.virtual_stage]
        for j, visit in enumerate(visits):
            yield from self._wait_host(st, record, track)
            gathers = self.gathered(units[visit.unit])
            if gathers and visit.unit not in st.resident:
                if visit.unit not in st.inflight:
                    yield from self._issue(replica, rank, visit.unit, gathers, record, track, st,
                                           self._secondary(visit))
                yield from self._wait(st.inflight.pop(visit.unit), record, track, "wait parameter gather")
                if self.policy.device_sync:
                    yield from self._drain(st, record, track)
                st.resident.add(visit.unit)
            yield from self._prefetch(replica, rank, visits, j, units, record, track, st)
            start = self.clock.now
            if visit.backward:
                self._collect(replica, rank, units[visit.unit], record, st)
            self.clock.events += 1
            if gpu is None:
                yield visit.compute_s
            else:  # the gathers and reductions in flight take SMs and HBM from it (interference.py)
                yield gpu.run(visit.compute_s, share, cost.gemm_fraction)
            self.rec.span(track, f"{'bwd' if visit.backward else 'fwd'} mb{ps.microbatch} unit {visit.unit}",
                          Category.COMPUTE, start, self.clock.now)
            if not visit.keep:
                st.resident.discard(visit.unit)
        if ps.direction == BACKWARD:  # the epilogue: what is left in the bucket, then wait for every reduction
            if st.bucket:
                self._reduce(replica, rank, st.bucket, record, st)
                st.bucket = []
            yield from self._wait_host(st, record, track)
            yield from self._wait(st.reductions, record, track, "wait gradient reduce-scatter")
            st.reductions = []

    def _secondary(self, visit: Visit) -> bool:
        """hpZ: does this visit's fetch (and what it prefetches) gather within the secondary group? Those of a
        backward hook do (fetch_sub_module(forward=False)); a recomputed forward's are forward hooks."""
        return visit.backward and self.zeropp is not None and self.zeropp.hpz > 1

    def _collect(self, replica: int, rank: int, unit: Unit, record: RankRecord, st: _RankState) -> None:
        limit = self.policy.reduce_bucket_elements
        for p, matrix in zip(unit.parameters, unit.matrices(), strict=True):
            if st.bucket and sum(e for e, _ in st.bucket) + p > limit:
                self._reduce(replica, rank, st.bucket, record, st)
                st.bucket = []
            st.bucket.append((p, matrix))

    def _issue(self, replica: int, rank: int, unit: int, gathers: tuple[int, ...], record: RankRecord,
               track: str, st: _RankState, secondary: bool = False) -> Process:
        """Issue a unit's gathers (deepspeed_2021: each after a device-wide synchronisation, then the host's
        per-rank ops)."""
        events: list[Event] = []
        for size in gathers:
            if self.policy.device_sync:
                yield from self._drain(st, record, track, events)
            events.append(self._gather(replica, rank, size, record, secondary))
            if self.host_s:
                start = self.clock.now
                yield self.host_s
                record.time_s[Category.DP_COMM] += self.clock.now - start
                self.rec.span(track, "host: issue all-gather", Category.DP_COMM, start, self.clock.now)
        st.inflight[unit] = events

    def _prefetch(self, replica: int, rank: int, visits: tuple[Visit, ...], j: int, units: tuple[Unit, ...],
                  record: RankRecord, track: str, st: _RankState) -> Process:
        policy = self.policy
        if policy.prefetch_when_idle and st.inflight:
            return
        elements = sum(sum(self.gathered(units[u])) for u in st.inflight)
        for visit in visits[j + 1:]:
            if elements >= policy.prefetch_elements or len(st.inflight) >= policy.forward_depth:
                return
            u = visit.unit
            gathers = self.gathered(units[u])
            if not gathers or u in st.resident or u in st.inflight:
                continue
            yield from self._issue(replica, rank, u, gathers, record, track, st, self._secondary(visits[j]))
            elements += sum(gathers)

    def _drain(self, st: _RankState, record: RankRecord, track: str, issuing: list[Event] | None = None) -> Process:
        """torch.cuda.synchronize(): wait for every gather (those of a unit being issued too) and reduction in
        flight; the gathered units are then resident."""
        pending = [e for events in st.inflight.values() for e in events] + st.reductions + (issuing or [])
        yield from self._wait(pending, record, track, "wait device synchronize")
        st.reductions = []
        st.resident.update(st.inflight)
        st.inflight.clear()

    def _wait_host(self, st: _RankState, record: RankRecord, track: str) -> Process:
        if st.host_free_s > self.clock.now:
            start = self.clock.now
            yield st.host_free_s - start
            record.time_s[Category.DP_COMM] += self.clock.now - start
            self.rec.span(track, "host: issue reduce-scatters", Category.DP_COMM, start, self.clock.now)

    def _wait(self, events: list[Event], record: RankRecord, track: str, label: str) -> Process:
        start = self.clock.now
        for event in events:
            if not event.processed:
                yield event
        record.time_s[Category.DP_COMM] += self.clock.now - start
        self.rec.span(track, label, Category.DP_COMM, start, self.clock.now)
