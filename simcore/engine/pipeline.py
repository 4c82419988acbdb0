"""The engine: one training iteration as compute passes and transfers over the cluster's links.

Each simulated rank is a process on the clock (simcore/engine/clock.py) that runs its schedule's passes in order. A
forward pass waits for its activation, a backward pass for its gradient; each pass is one event whose duration is
the chunk's cost (tensor-parallel collectives folded in); zero-bubble schedules split a backward pass into its
input gradient (I) and weight gradient (W), DualPipe overlaps a forward and a backward (simcore/engine/
pass_work.py). Activations and gradients travel as flow groups on the FlowNetwork over the graph's links;
data-parallel gradient reductions and ZeRO's parameter gathers are collectives on the same network, on their own
streams (simcore/engine/data_parallel/dp_sync.py). A pass that needs gathered parameters (ZeRO 3's layers, or ZeRO 1/2's
overlapped gathers before a chunk's first forward) runs slice by slice behind them. After its gradients are
reduced a rank waits for every rank (the global gradient-norm all-reduce before the step) and runs the optimizer.

Fidelity:
- representative: one replica (dp rank 0) per pipeline rank. The other replicas and tensor ranks provably do
  the same at the same time, so each transfer carries their flows too: link sharing counts every real flow.
- full: every data-parallel replica of every pipeline rank is its own process with its own flows; tensor ranks
  of a replica run in lock step (their per-layer collectives synchronise them) and send their own flows.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial

from simcore.cost.comm.collectives import CollectiveModel
from simcore.cost.sharding import Unit
from simcore.cost.workload import ChunkCost, Workload
from simcore.cost.zeropp import ZeroppCosts
from simcore.domain.layout import Fidelity, Layout, Recompute
from simcore.domain.placement import Placement
from simcore.domain.schedules import FORWARD, OVERLAPPED, POLICIES, Pass, produces_weight_gradients, sends_gradient
from simcore.engine.clock import Clock, Event, Process, Step, start
from simcore.engine.compute import ComputeStream
from simcore.engine.context_parallel import ContextRing, CpTotals
from simcore.engine.data_parallel.dp_collectives import DataParallelCollectives
from simcore.engine.data_parallel.dp_sync import Gate, GradientSync
from simcore.engine.data_parallel.embedding_sync import EmbeddingSync
from simcore.engine.data_parallel.sharded import ShardedPasses
from simcore.engine.flows import FlowNetwork
from simcore.engine.pass_spans import account_wait, pass_label, record_pass_spans, wait_reductions
from simcore.engine.pass_work import PassTotals, PassWork, pass_work
from simcore.engine.recorder import Category, RankRecord, Recorder
from simcore.engine.tp_links import TensorParallelLinks
from simcore.engine.transfers import PipelineTransfers
from simcore.engine.watch import PassWatch
from topology.hardware import GpuSpec

Progress = Callable[[int, int], None]
"""Called as the engine runs with (compute passes finished, compute passes in the iteration)."""
PROGRESS_STEPS = 200  # progress reports per run, about (more for runs with few clock calls a pass)
CALLS_PER_PASS = 4  # clock calls per compute pass, about: the pass, its send and the send's flow (simcore/run_cost.py)
_DIRECTIONS = (FORWARD, "B", "I", "W", OVERLAPPED)
_FORWARDS = frozenset({FORWARD, OVERLAPPED})
_GRADIENTS = frozenset(d for d in _DIRECTIONS if sends_gradient(d))
_WEIGHT_GRADIENTS = frozenset(d for d in _DIRECTIONS if produces_weight_gradients(d))
# direction -> (runs a forward, sends a gradient, makes weight gradients): one lookup a pass
_KIND = {d: (d in _FORWARDS, d in _GRADIENTS, d in _WEIGHT_GRADIENTS) for d in _DIRECTIONS}


@dataclass(frozen=True, slots=True)
class EngineConfig:
    layout: Layout
    placement: Placement
    workload: Workload
    collectives: CollectiveModel
    fidelity: Fidelity = Fidelity.REPRESENTATIVE
    free_communication: bool = False  # what-if: every transfer and collective takes no time
    keep_spans: bool = False
    # Interference (simcore/engine/compute.py): the GPU and the share of an SM each NCCL channel takes from the
    # compute beside it; 0 (or no GPU) runs every pass at full speed.
    gpu: GpuSpec | None = None
    comm_sm_share: float = 0.0
    # Each pipeline rank's passes in schedule order, when the caller has them (simulate() keeps them across
    # simulations); else the engine asks the schedule.
    passes: tuple[list[Pass], ...] | None = None
    # Stragglers: {(replica, pipeline rank): compute time factor} of the simulated ranks that are not 1 (a rank's
    # factor is its slowest tensor-parallel GPU's: the group's per-layer collectives wait for it). Their passes
    # and optimizer step take that much longer; the data-parallel synchronisation and the pipeline make the
    # others wait, as events. Needs full fidelity (every replica its own process).
    compute_time_factors: dict[tuple[int, int], float] | None = None
    # Heterogeneous clusters: {(replica, pipeline rank): workload} of the simulated ranks whose GPU differs from
    # `workload`'s for that rank (simcore/cost/per_gpu.py); their chunks and optimizer step. Needs full fidelity.
    rank_workloads: dict[tuple[int, int], Workload] | None = None
    # Each virtual stage's gather units, for implementations that gather per sub-module
    # (simcore/engine/data_parallel/sharded.py).
    units: tuple[tuple[Unit, ...], ...] | None = None
    zeropp: ZeroppCosts | None = None  # DeepSpeed's ZeRO++ options priced (simcore/cost/zeropp.py); None: off


@dataclass(frozen=True, slots=True)
class EngineResult:
    iteration_time_s: float
    recorder: Recorder
    events: int
    simulated_ranks: int
    extrapolated_periods: int = 0  # steady-state periods put back by simcore/engine/steady_state/periodic.py


class Engine:
    def __init__(self, config: EngineConfig) -> None:
        self.c = config
        self.clock = Clock()
        self.net = FlowNetwork(self.clock, config.collectives.capacity)
        self.rec = Recorder(config.keep_spans)
        self.watch: PassWatch | None = None  # what simcore/engine/steady_state/periodic.py observes of the passes
        self.passes_done = 0  # compute passes finished, every simulated rank (what progress counts)
        self._barrier_waiting = 0
        layout = config.layout
        self.replicas = list(range(layout.dp)) if config.fidelity is Fidelity.FULL else [0]
        self._barrier = Event(self.clock)
        self._passes_end = 0.0  # latest end of any rank's last pass
        self._ranks_total = len(self.replicas) * layout.pp
        self.shape = shape = layout.shape
        self._first = [shape.is_first(vs) for vs in range(shape.virtual_stages)]
        self._last = [shape.is_last(vs) for vs in range(shape.virtual_stages)]
        self._rank_of = [shape.rank(vs) for vs in range(shape.virtual_stages)]
        # With post-validation consecutive iterations overlap: two are simulated and the second is reported.
        self.iterations = 2 if layout.optimizer_post_validation else 1
        self.dp_collectives = DataParallelCollectives(self.clock, self.net, config.collectives, config.placement,
                                                      config.free_communication, config.comm_sm_share)
        self.interference = (config.comm_sm_share > 0 and config.gpu is not None and layout.dp > 1
                             and not config.free_communication)
        self.sync = GradientSync(self.clock, layout, config.workload, self.dp_collectives, self.rec, self.replicas)
        self.transfers = PipelineTransfers(self.clock, self.net, config.collectives, config.placement,
                                           config.workload, config.fidelity is Fidelity.REPRESENTATIVE,
                                           config.free_communication, self.rec)
        self.embedding = EmbeddingSync(self.clock, self.dp_collectives, config.placement, config.workload,
                                       config.fidelity is Fidelity.REPRESENTATIVE)
        self.ring = ContextRing(self.clock, self.net, config.collectives, config.placement,
                                config.fidelity is Fidelity.REPRESENTATIVE, config.free_communication, self.rec)
        # TP groups across nodes load the links (simcore/engine/tp_links.py), unless hidden under the GEMMs.
        self.tp_links = None if config.free_communication or layout.tp < 2 or layout.tp_comm_overlap else \
            TensorParallelLinks(self.clock, self.net, config.collectives, config.placement, config.fidelity)
        policy = self.sync.policy
        self.sharded = None
        if policy is not None and policy.per_submodule and config.units is not None and self.sync.active:
            self.sharded = ShardedPasses(self.clock, self.sync, policy, config.units, self.rec, layout.dp,
                                         layout.recompute is Recompute.FULL, config.zeropp)

    # -- helpers ---------------------------------------------------------------------------------------
    def _passes_of(self, rank: int) -> list[Pass]:
        """Pipeline rank `rank`'s passes in schedule order."""
        if self.c.passes is not None:
            return self.c.passes[rank]
        layout = self.c.layout
        return POLICIES[layout.schedule].passes(rank, layout.pp, layout.num_microbatches, layout.shape.chunks)

    # -- rank processes --------------------------------------------------------------------------------
    def _rank(self, replica: int, rank: int) -> Process:
        c, clock = self.c, self.clock
        workload = c.rank_workloads.get((replica, rank), c.workload) if c.rank_workloads else c.workload
        chunks = workload.chunks
        factor = c.compute_time_factors.get((replica, rank), 1.0) if c.compute_time_factors else 1.0
        if factor != 1.0:
            chunks = tuple(chunk.slowed(factor) for chunk in chunks)
        record = RankRecord(gpu=c.placement.gpu(replica, 0, rank), pipeline_rank=rank)
        self.rec.ranks.append(record)
        track = f"stage {rank}" + (f" dp{replica}" if len(self.replicas) > 1 else "")
        passes = self._passes_of(rank)
        gpu = None
        if self.interference:
            assert c.gpu is not None
            gpu = self.sync.gpus[(replica, rank)] = ComputeStream(clock, c.gpu.sm_count,
                                                                   c.gpu.hbm_bandwidth_bytes_per_s)
        for iteration in range(self.iterations):
            if iteration:  # the record keeps the last iteration only (post-validation's steady state)
                record.restart()
            dp_done = self.sync.start(replica, rank, record, passes)
            yield from self._passes(replica, rank, record, track, passes, chunks, iteration, gpu)
            yield from self._step(replica, rank, record, track, dp_done, workload.optimizer_s[rank] * factor)

    def _passes(self, replica: int, rank: int, record: RankRecord, track: str, passes: list[Pass],
                chunks: tuple[ChunkCost, ...], iteration: int, gpu: ComputeStream | None) -> Process:
        clock, layout, t = self.clock, self.c.layout, record.time_s
        first, last, rank_of = self._first, self._last, self._rank_of
        stage_of = [self.shape.stage(rank, c) for c in range(self.shape.chunks)]
        offset = iteration * layout.num_microbatches  # arrivals of later iterations are their own
        totals, cp = PassTotals(), CpTotals()  # what the passes add to the record, added once at the end
        transfers, sync, keep_spans, watch = self.transfers, self.sync, self.rec.keep_spans, self.watch
        tops, timed = watch.follow(iteration, rank, record) if watch is not None else ((), None)
        works: dict[tuple[str, int, int], tuple[PassWork, float]] = {}  # each kind of pass's work and kernel share
        reduced = [chunk.reduced_parameters for chunk in chunks]
        crosses = self.tp_links is not None and self.tp_links.crosses(rank)  # the same for all its passes
        # Gates: ZeRO 3's on every pass, else ZeRO 1/2's on a chunk's first forward of the iteration alone
        gated_always, first_forwards = not self.sharded and sync.zero >= 3 and sync.dp > 1, set()
        for i, ps in enumerate(passes):
            if watch is not None and i in tops:
                watch.top(iteration, rank, i, record, totals, cp)
            direction, vs = ps.direction, stage_of[ps.chunk]
            cost = chunks[vs]
            forward, gradient, grads = _KIND[direction]
            back_vs, back_mb, backward = vs, ps.microbatch, None
            if direction == OVERLAPPED:
                back_vs, back_mb = stage_of[ps.backward_chunk], ps.backward_microbatch
                backward = chunks[back_vs]
            if forward and not first[vs]:
                arrival = transfers.arrival("act", replica, vs, ps.microbatch + offset)
                if not arrival.fired:
                    waited = clock.now
                    yield arrival
                    account_wait(self.rec, t, track, waited, clock.now, arrival.produced_s, ps)
            if gradient and not last[back_vs]:
                arrival = transfers.arrival("grad", replica, back_vs, back_mb + offset)
                if not arrival.fired:
                    waited = clock.now
                    yield arrival
                    account_wait(self.rec, t, track, waited, clock.now, arrival.produced_s, ps)
            start = clock.now
            cached = works.get((direction, vs, back_vs))
            if cached is None:
                work = pass_work(direction, cost, backward)
                cached = works[(direction, vs, back_vs)] = (work, work.kernel_share)
            (work, share), duration = cached, cached[0].duration  # share: what slows beside collectives
            slowed, on_links = 0.0, False  # what interference added to the pass; TP collectives on the links
            # (the expert gradients' share weighted by their group's ring factor: ChunkCost.reduced_parameters)
            gates: list[Gate] = []  # (GradientSync.pass_gates answers [] to the passes not asked)
            if gated_always or (direction == FORWARD and ps.chunk not in first_forwards and not self.sharded):
                first_forwards.add(ps.chunk)
                gates = sync.pass_gates(replica, rank, ps, cost.layers, reduced[vs], record)
            plan = cost.cp_forward if forward else cost.cp_backward
            if self.sharded:  # sub-module by sub-module, behind their gathers and synchronisations
                yield from self.sharded.run(replica, rank, ps, cost, record, track, gpu, share)
            elif gates:  # the pass runs slice by slice, each behind its parameter gather
                if plan is None:
                    slowed = yield from self._gated_pass(gates, duration, t, track, ps,
                                                         (replica, rank, reduced[vs], record), gpu,
                                                         share, cost.gemm_fraction)
                else:
                    reduce = partial(sync.unit_reduced, replica, rank, reduced[vs] / len(gates), record)  # FSDP's
                    yield from self.ring.run_gated(list(gates), plan, cp, replica, rank, t, track,
                                                   pass_label(ps, self.shape.chunks), reduce if grads else None)
                if grads:
                    self.sync.backward_pass(replica, rank, i, clock.now, clock.now)
            elif plan is not None:
                # With context parallelism a pass may end after its compute time (its exposed ring waits): its
                # buckets are released at its end, or, when the reduction overlaps backward, over its compute
                # time from its start (an approximation: they may be ready a little early). Its ring plan runs
                # without the interference and link models of the passes below (not combined yet).
                ends_late = not layout.overlap_grad_reduce
                if not forward and not ends_late:
                    self.sync.backward_pass(replica, rank, i, start, start + duration)
                yield from self.ring.run(replica, rank, plan, cp, track, pass_label(ps, self.shape.chunks))
                if not forward and ends_late:
                    self.sync.backward_pass(replica, rank, i, clock.now, clock.now)
            else:
                # TP across nodes: the pass's kernels, then its TP collectives as a transfer on the links.
                tp_s = work.tp_comm
                on_links = tp_s > 0 and crosses
                body = duration - tp_s if on_links else duration
                if on_links:
                    share = 1.0
                times = [] if not grads or gpu is None else sync.release_times(replica, rank, i, start, start + body)
                self.clock.events += 1
                if gpu is not None and (gpu.in_flight or times):
                    # Interference: the pass runs beside collectives, and makes its buckets ready as it goes.
                    yield gpu.run(body, share, cost.gemm_fraction,
                                  [(when - start, partial(self.sync.release, replica, rank, job))
                                   for job, when in times])
                    slowed = max(0.0, clock.now - start - body)
                else:
                    if grads:
                        sync.backward_pass(replica, rank, i, start, start + body)
                    yield body
                if on_links:
                    assert self.tp_links is not None
                    tp_start = clock.now
                    yield self.tp_links.run(replica, rank, cost, forward, tp_s)
                    tp_late = clock.now - tp_start - tp_s  # what the links' sharing added to the TP time
                    totals.tp_late(tp_late)
                    if self.rec.keep_spans:
                        record_pass_spans(self.rec, track, ps, cost, start, 1.0 + slowed / body if body > 0
                                          else 1.0, self.shape.chunks, clock.now, tp_start, backward)
            totals.add(work, slowed)
            if keep_spans and not gates and not self.sharded and plan is None and not on_links:
                record_pass_spans(self.rec, track, ps, cost, start, (duration + slowed) / duration if duration > 0
                                  else 1.0, self.shape.chunks, clock.now, None, backward)
            self.passes_done += 1
            if timed is not None:
                timed += (start, clock.now)
            if forward and not last[vs]:
                transfers.send("act", replica, rank, rank_of[vs + 1], vs + 1, ps.microbatch + offset, record)
            if gradient and not first[back_vs]:
                transfers.send("grad", replica, rank, rank_of[back_vs - 1], back_vs - 1, back_mb + offset, record)
        self._passes_end = max(self._passes_end, clock.now)
        totals.add_to(record)
        cp.add_to(record)

    def _gated_pass(self, gates: list[Gate], duration: float, t: dict[str, float], track: str, ps: Pass,
                    owner: tuple[int, int, int, RankRecord], gpu: ComputeStream | None, share: float,
                    gemm_fraction: float) -> Generator[Step, None, float]:
        """A pass of `duration` seconds in equal slices, each behind its gate (its parameters' gather), the next
        slices' gathers issued when the current slice starts (prefetch: as many as the implementation lets run
        ahead, simcore/cost/sharding.py). Returns what interference added to it (the slices run beside the
        gathers)."""
        clock = self.clock
        slowed = 0.0
        depth = self.sync.gather_depth(ps.direction)
        issued = [gates[0]()]
        reductions: list[Event] = []
        for k in range(len(gates)):
            current = issued[k]
            if not current.triggered:
                waited = clock.now
                yield current
                t[Category.DP_COMM] += clock.now - waited
                self.rec.span(track, "wait parameter gather", Category.DP_COMM, waited, clock.now)
            while len(issued) < min(len(gates), k + 1 + depth):
                issued.append(gates[len(issued)]())  # prefetch the next slices' parameters
            self.clock.events += 1
            piece, began = duration / len(gates), clock.now
            if gpu is not None and gpu.in_flight:
                yield gpu.run(piece, share, gemm_fraction)
                slowed += max(0.0, clock.now - began - piece)
            else:
                yield piece
            self.rec.span(track, f"{pass_label(ps, 1)} part {k + 1}", Category.COMPUTE, began, clock.now)
            if ps.direction in _WEIGHT_GRADIENTS:
                replica, rank, parameters, record = owner
                reduced = self.sync.unit_reduced(replica, rank, parameters / len(gates), record)
                if reduced is not None:
                    reductions.append(reduced)
        if reductions:  # FSDP's end of backward: the compute stream waits for the reduce-scatters
            yield from wait_reductions(clock, self.rec, t, track, reductions)
        return slowed

    def _step(self, replica: int, rank: int, record: RankRecord, track: str, dp_done: Event,
              optimizer_s: float) -> Process:
        """After the rank's passes: wait for its gradient reduction (`dp_done`), then for every rank (the global
        gradient-norm all-reduce before the step), run the optimizer, and with ZeRO 1/2 without overlap wait for
        the updated parameters' gather."""
        clock, t = self.clock, record.time_s
        waited = clock.now
        yield dp_done
        t[Category.DP_COMM] += clock.now - waited
        self.rec.span(track, "wait dp", Category.DP_COMM, waited, clock.now)
        if self.embedding.holds_copy(rank):
            waited = clock.now
            yield self.embedding.wait(replica, record)
            # As at the barrier below: until the latest pass ended this waits for the pipeline's drain (the
            # first stage's last backward passes), after it for the all-reduce itself.
            drain_end = min(max(self._passes_end, waited), clock.now)
            t[Category.BUBBLE] += drain_end - waited
            t[Category.PP_COMM] += clock.now - drain_end
            self.rec.span(track, "idle: pipeline drain", Category.BUBBLE, waited, drain_end)
            self.rec.span(track, "wait embedding all-reduce", Category.PP_COMM, drain_end, clock.now)
        if not self.c.layout.optimizer_post_validation:  # the barrier before the step
            waited = clock.now
            self._barrier_waiting += 1
            if self._barrier_waiting == self._ranks_total:
                self._barrier.succeed()
            yield self._barrier
            # Until the last stage's last pass ends this is the pipeline's drain; after it, the wait is for
            # other stages' gradient reduction.
            drain_end = min(max(self._passes_end, waited), clock.now)
            t[Category.BUBBLE] += drain_end - waited
            t[Category.DP_COMM] += clock.now - drain_end
            self.rec.span(track, "idle: pipeline drain", Category.BUBBLE, waited, drain_end)
            self.rec.span(track, "wait other stages' gradients", Category.DP_COMM, drain_end, clock.now)
        start = clock.now
        self.clock.events += 1
        yield optimizer_s
        record.busy_s += clock.now - start
        t[Category.OPTIMIZER] += clock.now - start
        self.rec.span(track, Category.OPTIMIZER, Category.OPTIMIZER, start, clock.now)
        gathered = self.sync.gather_after_step(replica, rank, record)
        if gathered is not None:
            waited = clock.now
            yield gathered
            t[Category.DP_COMM] += clock.now - waited
            self.rec.span(track, "wait parameter gather", Category.DP_COMM, waited, clock.now)
        record.end_s = clock.now

    # -- run -------------------------------------------------------------------------------------------
    def run(self, progress: Progress | None = None) -> EngineResult:
        """Simulate the iteration. `progress(done, total)`, when given, is called as it runs (about every
        `PROGRESS_STEPS`-th of the passes, and at the end) with the compute passes finished and their number."""
        for rank in range(self.c.layout.pp):
            for replica in self.replicas:
                start(self.clock, self._rank(replica, rank))
        if progress is None:
            self.clock.run()
        else:
            total = self.iterations * len(self.replicas) * sum(len(self._passes_of(rank))
                                                               for rank in range(self.c.layout.pp))
            every = max(1, total * CALLS_PER_PASS // PROGRESS_STEPS)
            self.clock.run_observed(lambda: progress(self.passes_done, total), every)
        # The rank that finishes last, its time since it finished the previous iteration (with post-validation's
        # overlapping iterations, the steady state's period; else since the start).
        last = min(self.rec.ranks, key=lambda r: (-r.end_s, r.gpu))
        return EngineResult(last.end_s - last.previous_end_s, self.rec, self.events_total(), len(self.rec.ranks))

    def events_total(self) -> int:
        """The events counted so far, by every part of the engine (each adds the ones it makes to `Clock.events`)."""
        return self.clock.events
