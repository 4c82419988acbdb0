"""The SimPy engine: one training iteration as compute passes and transfers over the cluster's links.

Each simulated rank is a SimPy process that runs its schedule's passes in order. A forward pass waits for its
activation, a backward pass for its gradient; each pass is one event whose duration is the chunk's cost
(tensor-parallel collectives folded in). Activations and gradients travel as flow groups on the FlowNetwork over
the graph's links; data-parallel gradient buckets are collectives on the same network, launched on a separate
stream as buckets become ready (overlap_grad_reduce) or after the last backward pass. After its gradients are
reduced a rank waits for every rank (the global gradient-norm all-reduce before the step) and runs the optimizer.

Fidelity:
- representative: one replica (dp rank 0) per pipeline rank. The other replicas and tensor ranks provably do
  the same at the same time, so each transfer carries their flows too: link sharing counts every real flow.
- full: every data-parallel replica of every pipeline rank is its own process with its own flows; tensor ranks
  of a replica run in lock step (their per-layer collectives synchronise them) and send their own flows.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import simpy

from simcore.calibration import DP_BUCKET_ELEMENTS, GRAD_REDUCE_BYTES
from simcore.collectives import Collective, CollectiveModel
from simcore.flows import FlowNetwork, FlowPattern
from simcore.layout import Fidelity, Layout
from simcore.recorder import Recorder, RankRecord
from simcore.schedules import BACKWARD, POLICIES, Pass
from simcore.workload import ChunkCost, Workload
from topology.placement import Placement


@dataclass(frozen=True, slots=True)
class EngineConfig:
    layout: Layout
    placement: Placement
    workload: Workload
    collectives: CollectiveModel
    fidelity: Fidelity = Fidelity.REPRESENTATIVE
    free_communication: bool = False  # what-if: every transfer and collective takes no time
    keep_spans: bool = False


@dataclass(frozen=True, slots=True)
class EngineResult:
    iteration_time_s: float
    recorder: Recorder
    events: int
    simulated_ranks: int


class _Arrival:
    """An activation or gradient on its way: the producer's finish time and the event of its arrival."""

    __slots__ = ("event", "produced_s")

    def __init__(self, env: simpy.Environment) -> None:
        self.event = env.event()
        self.produced_s = 0.0


class Engine:
    def __init__(self, config: EngineConfig) -> None:
        self.c = config
        self.env = simpy.Environment()
        self.net = FlowNetwork(self.env, config.collectives.capacity)
        self.rec = Recorder(config.keep_spans)
        self.events = 0
        self._arrivals: dict[tuple[str, int, int, int], _Arrival] = {}
        self._patterns: dict[tuple[int, int, int], FlowPattern] = {}
        self._dp_phases: dict[int, tuple[FlowPattern, ...]] = {}
        self._barrier_waiting = 0
        layout = config.layout
        self.replicas = list(range(layout.dp)) if config.fidelity is Fidelity.FULL else [0]
        self._barrier = self.env.event()
        self._ranks_total = len(self.replicas) * layout.pp
        self._buckets_of: dict[tuple[int, int], tuple[list[tuple[int, float]], list[simpy.Event]]] = {}
        self._joins: dict[tuple[int, int], tuple[list[int], simpy.Event]] = {}

    # -- helpers ---------------------------------------------------------------------------------------
    def _arrival(self, kind: str, replica: int, vstage: int, microbatch: int) -> _Arrival:
        key = (kind, replica, vstage, microbatch)
        arrival = self._arrivals.get(key)
        if arrival is None:
            arrival = self._arrivals[key] = _Arrival(self.env)
        return arrival

    def _p2p_pattern(self, src_rank: int, dst_rank: int, replica: int) -> FlowPattern:
        key = (src_rank, dst_rank, replica)
        pattern = self._patterns.get(key)
        if pattern is None:
            place = self.c.placement
            replicas = range(place.dp) if self.c.fidelity is Fidelity.REPRESENTATIVE else [replica]
            pairs = [(place.gpu(d, t, src_rank), place.gpu(d, t, dst_rank)) for d in replicas for t in range(place.tp)]
            pattern = self._patterns[key] = self.c.collectives.p2p(pairs, mirrors=len(pairs) > place.tp)
        return pattern

    def _send(self, kind: str, replica: int, src_rank: int, dst_rank: int, vstage: int, microbatch: int,
              record: RankRecord) -> None:
        arrival = self._arrival(kind, replica, vstage, microbatch)
        now = self.env.now
        arrival.produced_s = now
        size = self.c.workload.chunks[vstage].activation_bytes
        record.comm_bytes["pp"] += size
        if self.c.free_communication or src_rank == dst_rank:
            arrival.event.succeed()
            return

        def done() -> None:
            record.comm_busy_s["pp"] += self.env.now - now
            self.rec.span(f"stage {src_rank} pp", f"{kind} mb{microbatch}", "pp_comm", now, self.env.now)
            arrival.event.succeed()

        self.events += 1
        self.net.start(self._p2p_pattern(src_rank, dst_rank, replica), size, done)

    # -- rank processes --------------------------------------------------------------------------------
    def _rank(self, replica: int, rank: int) -> Generator[simpy.Event, object, None]:
        c, env = self.c, self.env
        layout, chunks = c.layout, c.workload.chunks
        p, v = layout.pp, layout.virtual_stages
        last_vs = p * v - 1
        record = RankRecord(gpu=c.placement.gpu(replica, 0, rank), pipeline_rank=rank)
        self.rec.ranks.append(record)
        t = record.time_s
        track = f"stage {rank}" + (f" dp{replica}" if len(self.replicas) > 1 else "")
        passes: list[Pass] = POLICIES[layout.schedule].passes(rank, p, layout.num_microbatches, v)
        last_backward = {ps.chunk: i for i, ps in enumerate(passes) if ps.direction == BACKWARD}
        dp_done = self._start_dp_stream(replica, rank, record)
        for i, ps in enumerate(passes):
            vs = ps.chunk * p + rank
            cost = chunks[vs]
            forward = ps.direction != BACKWARD
            if (forward and vs > 0) or (not forward and vs < last_vs):
                arrival = self._arrival("act" if forward else "grad", replica, vs, ps.microbatch)
                if not arrival.event.triggered:
                    waited = env.now
                    yield arrival.event
                    self._account_wait(t, track, waited, arrival.produced_s, ps)
            start = env.now
            duration = cost.forward_s if forward else cost.backward_s
            self.events += 1
            yield env.timeout(duration)
            record.busy_s += duration
            if forward:
                t["compute"] += cost.forward_compute_s
                t["tp_comm"] += cost.forward_tp_s
            else:
                t["compute"] += cost.backward_compute_s
                t["recompute"] += cost.recompute_s - cost.recompute_tp_s
                t["tp_comm"] += cost.backward_tp_s + cost.recompute_tp_s
            record.comm_busy_s["tp"] += cost.forward_tp_s if forward else cost.backward_tp_s + cost.recompute_tp_s
            record.comm_bytes["tp"] += cost.tp_bytes_forward if forward else cost.tp_bytes_backward
            if self.rec.keep_spans:
                self._pass_spans(track, ps, cost, start)
            if forward and vs < last_vs:
                self._send("act", replica, rank, (vs + 1) % p, vs + 1, ps.microbatch, record)
            elif not forward and vs > 0:
                self._send("grad", replica, rank, (vs - 1) % p, vs - 1, ps.microbatch, record)
            if not forward and last_backward[ps.chunk] == i:
                self._grads_ready(replica, rank, ps.chunk, start, env.now)
        waited = env.now
        yield dp_done
        t["dp_comm"] += env.now - waited
        self.rec.span(track, "wait dp", "dp_comm", waited, env.now)
        waited = env.now
        self._barrier_waiting += 1
        if self._barrier_waiting == self._ranks_total:
            self._barrier.succeed()
        yield self._barrier
        t["bubble"] += env.now - waited
        self.rec.span(track, "idle: wait all stages", "bubble", waited, env.now)
        start = env.now
        self.events += 1
        yield env.timeout(c.workload.optimizer_s[rank])
        record.busy_s += env.now - start
        t["optimizer"] += env.now - start
        self.rec.span(track, "optimizer", "optimizer", start, env.now)
        record.end_s = env.now

    def _pass_spans(self, track: str, ps: Pass, cost: ChunkCost, start: float) -> None:
        """A pass as consecutive named spans: recomputation, compute and its tensor-parallel collectives."""
        label = f"{'fwd' if ps.direction != BACKWARD else 'bwd'} mb{ps.microbatch}" + (f" chunk{ps.chunk}" if
                                                                                    self.c.layout.virtual_stages > 1 else "")
        if ps.direction != BACKWARD:
            parts = [("compute", label, cost.forward_compute_s), ("tp_comm", "tp " + label, cost.forward_tp_s)]
        else:
            parts = [("recompute", "recompute " + label, cost.recompute_s - cost.recompute_tp_s),
                     ("tp_comm", "tp recompute " + label, cost.recompute_tp_s),
                     ("compute", label, cost.backward_compute_s), ("tp_comm", "tp " + label, cost.backward_tp_s)]
        for category, name, duration in parts:
            self.rec.span(track, name, category, start, start + duration)
            start += duration

    def _account_wait(self, t: dict[str, float], track: str, waited: float, produced: float, ps: Pass) -> None:
        now = self.env.now
        bubble_end = min(max(produced, waited), now)
        t["bubble"] += bubble_end - waited
        t["pp_comm"] += now - bubble_end
        self.rec.span(track, f"idle: wait {ps.direction}{ps.microbatch}", "bubble", waited, bubble_end)
        self.rec.span(track, f"recv {ps.direction}{ps.microbatch}", "pp_comm", bubble_end, now)

    # -- data-parallel gradient reduction --------------------------------------------------------------
    def _buckets(self, rank: int) -> list[tuple[int, float]]:
        """(chunk, bytes) per bucket, in the order backward produces them (last chunk first)."""
        out: list[tuple[int, float]] = []
        for cost in sorted((ch for ch in self.c.workload.chunks if ch.rank == rank), key=lambda ch: -ch.chunk):
            remaining = cost.parameters
            while remaining > 0:
                n = min(remaining, DP_BUCKET_ELEMENTS)
                out.append((cost.chunk, float(n * GRAD_REDUCE_BYTES)))
                remaining -= n
        return out

    def _start_dp_stream(self, replica: int, rank: int, record: RankRecord) -> simpy.Event:
        done = self.env.event()
        if self.c.layout.dp < 2:
            done.succeed()
            return done
        buckets = self._buckets(rank)
        ready = [self.env.event() for _ in buckets]
        self._buckets_of[(replica, rank)] = (buckets, ready)
        self.env.process(self._dp_stream(replica, rank, buckets, ready, done, record))
        return done

    def _grads_ready(self, replica: int, rank: int, chunk: int, start: float, end: float) -> None:
        """The last backward pass of `chunk` ran from start to end: its buckets became ready along the way (or,
        without overlap, all buckets are released once the rank's last backward pass ends)."""
        if self.c.layout.dp < 2:
            return
        buckets, ready = self._buckets_of[(replica, rank)]
        mine = [i for i, (ch, _size) in enumerate(buckets) if ch == chunk]
        if self.c.layout.overlap_grad_reduce:
            for k, i in enumerate(mine):
                delay = (end - start) * ((k + 1) / len(mine) - 1.0)  # negative: readiness happened inside the pass
                ready[i].succeed(value=end + delay)
        elif chunk == 0:
            for i in range(len(buckets)):
                ready[i].succeed(value=end)

    def _dp_stream(self, replica: int, rank: int, buckets: list[tuple[int, float]], ready: list[simpy.Event],
                   done: simpy.Event, record: RankRecord) -> Generator[simpy.Event, object, None]:
        env = self.env
        n = self.c.layout.dp
        track = f"stage {rank} dp" + (f"{replica}" if len(self.replicas) > 1 else "")
        for i, (_chunk, size) in enumerate(buckets):
            yield ready[i]
            start = env.now
            record.comm_bytes["dp"] += 2 * (n - 1) / n * size
            # The collective starts once every simulated member of the group has reached it.
            arrived, finished = self._joins.setdefault((rank, i), ([0], env.event()))
            arrived[0] += 1
            if arrived[0] == len(self.replicas):
                env.process(self._collective(rank, size, finished))
            yield finished
            record.comm_busy_s["dp"] += env.now - start
            self.rec.span(track, f"all-reduce bucket {i}", "dp_comm", start, env.now)
        done.succeed()

    def _collective(self, rank: int, size: float, finished: simpy.Event) -> Generator[simpy.Event, object, None]:
        if not self.c.free_communication:
            for phase in self._dp_phase_list(rank):
                step = self.env.event()
                self.events += 1
                self.net.start(phase, size, step.succeed)
                yield step
        finished.succeed()

    def _dp_phase_list(self, rank: int) -> tuple[FlowPattern, ...]:
        phases = self._dp_phases.get(rank)
        if phases is None:
            place = self.c.placement
            groups = [place.dp_group(t, rank) for t in range(place.tp)]
            phases = self._dp_phases[rank] = self.c.collectives.phases(Collective.ALL_REDUCE, groups)
        return phases

    # -- run -------------------------------------------------------------------------------------------
    def run(self) -> EngineResult:
        for rank in range(self.c.layout.pp):
            for replica in self.replicas:
                self.env.process(self._rank(replica, rank))
        self.env.run()
        iteration = max(r.end_s for r in self.rec.ranks)
        return EngineResult(iteration, self.rec, self.events + self.net.events, len(self.rec.ranks))
