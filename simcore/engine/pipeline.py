"""The engine: one training iteration as compute passes and transfers over the cluster's links.

Each simulated rank is a process on the clock (simcore/engine/clock.py) that runs its schedule's passes in order. A
forward pass waits for its activation, a backward pass for its gradient; each pass is one event whose duration is
the chunk's cost (tensor-parallel collectives folded in). Activations and gradients travel as flow groups on the
FlowNetwork over the graph's links; data-parallel gradient reductions and ZeRO's parameter gathers are collectives
on the same network, on their own streams (simcore/engine/dp_sync.py). A pass that needs gathered parameters (ZeRO
3's layers, or ZeRO 1/2's overlapped gathers before a chunk's first forward) runs slice by slice behind them. After
its gradients are reduced a rank waits for every rank (the global gradient-norm all-reduce before the step) and
runs the optimizer.

Fidelity:
- representative: one replica (dp rank 0) per pipeline rank. The other replicas and tensor ranks provably do
  the same at the same time, so each transfer carries their flows too: link sharing counts every real flow.
- full: every data-parallel replica of every pipeline rank is its own process with its own flows; tensor ranks
  of a replica run in lock step (their per-layer collectives synchronise them) and send their own flows.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.cost.collectives import CollectiveModel
from simcore.cost.patterns import FlowPattern
from simcore.cost.workload import ChunkCost, Workload
from simcore.domain.layout import Fidelity, Layout
from simcore.domain.placement import Placement
from simcore.domain.schedules import (
    FORWARD,
    OVERLAPPED,
    POLICIES,
    Pass,
    produces_weight_gradients,
    sends_gradient,
)
from simcore.engine.clock import Clock, Event, Process, Signal, start
from simcore.engine.dp_collectives import DataParallelCollectives
from simcore.engine.dp_sync import Gate, GradientSync
from simcore.engine.flows import FlowNetwork
from simcore.engine.pass_work import LABELS, PassWork, pass_parts, pass_work
from simcore.engine.recorder import RankRecord, Recorder

# Directions by what a pass does (simcore/domain/passes.py), as sets for the pass loop.
_FORWARDS = frozenset({FORWARD, OVERLAPPED})
_GRADIENTS = frozenset(d for d in (FORWARD, "B", "I", "W", OVERLAPPED) if sends_gradient(d))
_WEIGHT_GRADIENTS = frozenset(d for d in (FORWARD, "B", "I", "W", OVERLAPPED) if produces_weight_gradients(d))


@dataclass(frozen=True, slots=True)
class EngineConfig:
    layout: Layout
    placement: Placement
    workload: Workload
    collectives: CollectiveModel
    fidelity: Fidelity = Fidelity.REPRESENTATIVE
    free_communication: bool = False  # what-if: every transfer and collective takes no time
    keep_spans: bool = False
    # Each pipeline rank's passes in schedule order, when the caller has them (simulate() keeps them across
    # simulations); else the engine asks the schedule.
    passes: tuple[list[Pass], ...] | None = None
    # Stragglers: {(replica, pipeline rank): compute time factor} of the simulated ranks that are not 1 (a rank's
    # factor is its slowest tensor-parallel GPU's: the group's per-layer collectives wait for it). Their passes
    # and optimizer step take that much longer; the data-parallel synchronisation and the pipeline make the
    # others wait, as events. Needs full fidelity (every replica its own process).
    compute_time_factors: dict[tuple[int, int], float] | None = None


@dataclass(frozen=True, slots=True)
class EngineResult:
    iteration_time_s: float
    recorder: Recorder
    events: int
    simulated_ranks: int


class _Arrival(Signal):
    """An activation or gradient on its way: fired when it has arrived; the producer's finish time."""

    __slots__ = ("produced_s",)

    def __init__(self) -> None:
        super().__init__()
        self.produced_s = 0.0


class Engine:
    def __init__(self, config: EngineConfig) -> None:
        self.c = config
        self.clock = Clock()
        self.net = FlowNetwork(self.clock, config.collectives.capacity)
        self.rec = Recorder(config.keep_spans)
        self.events = 0
        self._arrivals: dict[tuple[str, int, int, int], _Arrival] = {}
        self._patterns: dict[tuple[int, int, int], FlowPattern] = {}
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
                                                      config.free_communication)
        self.sync = GradientSync(self.clock, layout, config.workload, self.dp_collectives, self.rec, self.replicas)

    # -- helpers ---------------------------------------------------------------------------------------
    def _arrival(self, kind: str, replica: int, vstage: int, microbatch: int) -> _Arrival:
        key = (kind, replica, vstage, microbatch)
        arrival = self._arrivals.get(key)
        if arrival is None:
            arrival = self._arrivals[key] = _Arrival()
        return arrival

    def _p2p_pattern(self, src_rank: int, dst_rank: int, replica: int) -> FlowPattern:
        key = (src_rank, dst_rank, replica)
        pattern = self._patterns.get(key)
        if pattern is None:
            place = self.c.placement
            replicas = range(place.dp) if self.c.fidelity is Fidelity.REPRESENTATIVE else [replica]
            pattern = self._patterns[key] = self.c.collectives.pipeline_send(place, src_rank, dst_rank, replicas)
        return pattern

    def _send(self, kind: str, replica: int, src_rank: int, dst_rank: int, vstage: int, microbatch: int,
              record: RankRecord) -> None:
        arrival = self._arrival(kind, replica, vstage, microbatch)
        now = self.clock.now
        arrival.produced_s = now
        # An activation goes to `vstage` and is its input; a gradient is that of the sender's (vstage + 1) input.
        chunks = self.c.workload.chunks
        size = chunks[vstage].input_bytes if kind == "act" else chunks[vstage + 1].input_bytes
        record.comm_bytes["pp"] += size
        if self.c.free_communication or src_rank == dst_rank:
            arrival.fire(self.clock)
            return

        def done() -> None:
            record.comm_busy_s["pp"] += self.clock.now - now
            if self.rec.keep_spans:
                self.rec.span(f"stage {src_rank} pp", f"{kind} mb{microbatch}", "pp_comm", now, self.clock.now)
            arrival.fire(self.clock)

        self.events += 1
        self.net.start(self._p2p_pattern(src_rank, dst_rank, replica), size, done)

    # -- rank processes --------------------------------------------------------------------------------
    def _rank(self, replica: int, rank: int) -> Process:
        c = self.c
        layout, chunks = c.layout, c.workload.chunks
        factor = c.compute_time_factors.get((replica, rank), 1.0) if c.compute_time_factors else 1.0
        if factor != 1.0:
            chunks = tuple(chunk.slowed(factor) for chunk in chunks)
        record = RankRecord(gpu=c.placement.gpu(replica, 0, rank), pipeline_rank=rank)
        self.rec.ranks.append(record)
        track = f"stage {rank}" + (f" dp{replica}" if len(self.replicas) > 1 else "")
        passes = (c.passes[rank] if c.passes is not None
                  else POLICIES[layout.schedule].passes(rank, layout.pp, layout.num_microbatches,
                                                        layout.shape.chunks))
        for iteration in range(self.iterations):
            if iteration:  # the record keeps the last iteration only (post-validation's steady state)
                record.restart()
            dp_done = self.sync.start(replica, rank, record, passes)
            yield from self._passes(replica, rank, record, track, passes, chunks, iteration)
            yield from self._step(replica, rank, record, track, dp_done, factor)

    def _passes(self, replica: int, rank: int, record: RankRecord, track: str, passes: list[Pass],
                chunks: tuple[ChunkCost, ...], iteration: int) -> Process:
        clock, shape, t = self.clock, self.shape, record.time_s
        first, last, rank_of = self._first, self._last, self._rank_of
        stage_of = [shape.stage(rank, c) for c in range(shape.chunks)]
        works: dict[tuple[str, int, int], PassWork] = {}  # (direction, stage, backward stage) -> its work
        offset = iteration * self.c.layout.num_microbatches  # arrivals of later iterations are their own
        # What the passes add to the record, summed here in pass order (the same sums as adding to the record's
        # dicts pass by pass, which nothing else adds to) and added once at the end.
        busy = compute = recompute = tp_comm = tp_busy = tp_bytes = 0.0
        for i, ps in enumerate(passes):
            direction = ps.direction
            vs = stage_of[ps.chunk]
            cost = chunks[vs]
            forward = direction in _FORWARDS
            gradient = direction in _GRADIENTS
            back_vs, back_mb, backward = vs, ps.microbatch, None
            if direction == OVERLAPPED:
                back_vs, back_mb = stage_of[ps.backward_chunk], ps.backward_microbatch
                backward = chunks[back_vs]
            if forward and not first[vs]:
                arrival = self._arrival("act", replica, vs, ps.microbatch + offset)
                if not arrival.fired:
                    waited = clock.now
                    yield arrival
                    self._account_wait(t, track, waited, arrival.produced_s, ps)
            if gradient and not last[back_vs]:
                arrival = self._arrival("grad", replica, back_vs, back_mb + offset)
                if not arrival.fired:
                    waited = clock.now
                    yield arrival
                    self._account_wait(t, track, waited, arrival.produced_s, ps)
            start = clock.now
            work = works.get((direction, vs, back_vs))
            if work is None:
                work = works[(direction, vs, back_vs)] = pass_work(direction, cost, backward)
            duration = work.duration
            gates = self.sync.pass_gates(replica, rank, ps, cost.layers, cost.parameters, record)
            grads = direction in _WEIGHT_GRADIENTS
            if gates:  # the pass runs slice by slice, each behind its parameter gather
                yield from self._gated_pass(gates, duration, t, track, ps)
                if grads:
                    self.sync.backward_pass(replica, rank, i, clock.now, clock.now)
            else:
                if grads:
                    self.sync.backward_pass(replica, rank, i, start, start + duration)
                self.events += 1
                yield duration
            busy += duration
            compute += work.compute
            recompute += work.recompute
            tp_comm += work.tp_comm
            tp_busy += work.tp_busy
            tp_bytes += work.tp_bytes
            if self.rec.keep_spans and not gates:
                self._pass_spans(track, ps, cost, start, backward)
            if forward and not last[vs]:
                self._send("act", replica, rank, rank_of[vs + 1], vs + 1, ps.microbatch + offset, record)
            if gradient and not first[back_vs]:
                self._send("grad", replica, rank, rank_of[back_vs - 1], back_vs - 1, back_mb + offset, record)
        self._passes_end = max(self._passes_end, clock.now)
        record.busy_s += busy
        t["compute"] += compute
        t["recompute"] += recompute
        t["tp_comm"] += tp_comm
        record.comm_busy_s["tp"] += tp_busy
        record.comm_bytes["tp"] += tp_bytes

    def _gated_pass(self, gates: list[Gate], duration: float, t: dict[str, float], track: str,
                    ps: Pass) -> Process:
        """A pass of `duration` seconds in equal slices, each behind its gate (its parameters' gather), the next
        slice's gather issued when the current slice starts (prefetch)."""
        clock = self.clock
        pending = gates[0]()
        for k in range(len(gates)):
            current = pending
            if not current.triggered:
                waited = clock.now
                yield current
                t["dp_comm"] += clock.now - waited
                self.rec.span(track, "wait parameter gather", "dp_comm", waited, clock.now)
            if k + 1 < len(gates):
                pending = gates[k + 1]()  # prefetch the next slice's parameters
            self.events += 1
            yield duration / len(gates)
            self.rec.span(track, f"{LABELS[ps.direction]} mb{ps.microbatch} part {k + 1}",
                          "compute", clock.now - duration / len(gates), clock.now)

    def _step(self, replica: int, rank: int, record: RankRecord, track: str, dp_done: Event,
              factor: float = 1.0) -> Process:
        """After the rank's passes: wait for its gradient reduction (`dp_done`), then for every rank (the global
        gradient-norm all-reduce before the step), run the optimizer, and with ZeRO 1/2 without overlap wait for
        the updated parameters' gather."""
        clock, t = self.clock, record.time_s
        waited = clock.now
        yield dp_done
        t["dp_comm"] += clock.now - waited
        self.rec.span(track, "wait dp", "dp_comm", waited, clock.now)
        if not self.c.layout.optimizer_post_validation:  # the barrier before the step
            waited = clock.now
            self._barrier_waiting += 1
            if self._barrier_waiting == self._ranks_total:
                self._barrier.succeed()
            yield self._barrier
            # Until the last stage's last pass ends this is the pipeline's drain; after it, the wait is for other
            # stages' gradient reduction.
            drain_end = min(max(self._passes_end, waited), clock.now)
            t["bubble"] += drain_end - waited
            t["dp_comm"] += clock.now - drain_end
            self.rec.span(track, "idle: pipeline drain", "bubble", waited, drain_end)
            self.rec.span(track, "wait other stages' gradients", "dp_comm", drain_end, clock.now)
        start = clock.now
        self.events += 1
        yield self.c.workload.optimizer_s[rank] * factor
        record.busy_s += clock.now - start
        t["optimizer"] += clock.now - start
        self.rec.span(track, "optimizer", "optimizer", start, clock.now)
        gathered = self.sync.gather_after_step(replica, rank, record)
        if gathered is not None:
            waited = clock.now
            yield gathered
            t["dp_comm"] += clock.now - waited
            self.rec.span(track, "wait parameter gather", "dp_comm", waited, clock.now)
        record.end_s = clock.now

    def _pass_spans(self, track: str, ps: Pass, cost: ChunkCost, start: float,
                    backward: ChunkCost | None = None) -> None:
        """A pass as consecutive named spans: recomputation, compute and its tensor-parallel collectives."""
        label = f"{LABELS[ps.direction]} mb{ps.microbatch}"
        if ps.direction == OVERLAPPED:
            label += f"+mb{ps.backward_microbatch}"
        if self.shape.chunks > 1:
            label += f" chunk{ps.chunk}"
        for category, name, duration in pass_parts(ps.direction, cost, label, backward):
            self.rec.span(track, name, category, start, start + duration)
            start += duration

    def _account_wait(self, t: dict[str, float], track: str, waited: float, produced: float, ps: Pass) -> None:
        now = self.clock.now
        bubble_end = min(max(produced, waited), now)
        t["bubble"] += bubble_end - waited
        t["pp_comm"] += now - bubble_end
        if self.rec.keep_spans:
            self.rec.span(track, f"idle: wait {ps.direction}{ps.microbatch}", "bubble", waited, bubble_end)
            self.rec.span(track, f"recv {ps.direction}{ps.microbatch}", "pp_comm", bubble_end, now)

    # -- run -------------------------------------------------------------------------------------------
    def run(self) -> EngineResult:
        for rank in range(self.c.layout.pp):
            for replica in self.replicas:
                start(self.clock, self._rank(replica, rank))
        self.clock.run()
        # The rank that finishes last, its time since it finished the previous iteration (with post-validation's
        # overlapping iterations, the steady state's period; else since the start).
        last = min(self.rec.ranks, key=lambda r: (-r.end_s, r.gpu))
        iteration = last.end_s - last.previous_end_s
        events = self.events + self.sync.events + self.dp_collectives.events + self.net.events
        return EngineResult(iteration, self.rec, events, len(self.rec.ranks))
