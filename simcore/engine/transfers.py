"""Pipeline transfers: a stage's activations to the next stage and gradients to the previous, each a flow group on
the cluster's links (in representative fidelity carrying every replica's mirrored flows), and the arrival a pass
waits for."""

from __future__ import annotations

from simcore.cost.comm.collectives import CollectiveModel
from simcore.cost.comm.patterns import FlowPattern
from simcore.cost.workload import Workload
from simcore.domain.placement import Placement
from simcore.engine.clock import Clock, Signal
from simcore.engine.flows import FlowNetwork
from simcore.engine.recorder import Category, RankRecord, Recorder


class Arrival(Signal):
    """An activation or gradient on its way: fired when it has arrived; the producer's finish time."""

    __slots__ = ("produced_s",)

    def __init__(self) -> None:  # Signal's fields set here, without a call to its __init__ (one arrival a pass)
        self.fired = False
        self.waiter = None
        self.produced_s = 0.0


class PipelineTransfers:
    """Counts the transfers it starts on the clock."""

    def __init__(self, clock: Clock, net: FlowNetwork, collectives: CollectiveModel, placement: Placement,
                 workload: Workload, mirrored: bool, free_communication: bool, recorder: Recorder) -> None:
        self.clock, self.net, self.collectives, self.placement = clock, net, collectives, placement
        self.workload, self.mirrored, self.free, self.rec = workload, mirrored, free_communication, recorder
        self._arrivals: dict[tuple[str, int, int, int], Arrival] = {}
        self._patterns: dict[tuple[int, int, int], FlowPattern] = {}

    def arrival(self, kind: str, replica: int, vstage: int, microbatch: int) -> Arrival:
        """The arrival of an activation (`kind` "act") or a gradient ("grad") for `vstage`'s `microbatch`: its
        sender and its receiver each ask once; the first to ask makes it, the second takes it (so that the
        table holds only the transfers under way, not every one of the iteration)."""
        key = (kind, replica, vstage, microbatch)
        arrival = self._arrivals.pop(key, None)
        if arrival is None:
            arrival = self._arrivals[key] = Arrival()
        return arrival

    def _pattern(self, src_rank: int, dst_rank: int, replica: int) -> FlowPattern:
        key = (src_rank, dst_rank, replica)
        pattern = self._patterns.get(key)
        if pattern is None:
            place = self.placement
            replicas = range(place.dp) if self.mirrored else [replica]
            pattern = self._patterns[key] = self.collectives.pipeline_send(place, src_rank, dst_rank, replicas)
        return pattern

    def send(self, kind: str, replica: int, src_rank: int, dst_rank: int, vstage: int, microbatch: int,
             record: RankRecord) -> None:
        key = (kind, replica, vstage, microbatch)  # as `arrival` does, inline (a call per pass)
        arrival = self._arrivals.pop(key, None)
        if arrival is None:
            arrival = self._arrivals[key] = Arrival()
        now = self.clock.now
        arrival.produced_s = now
        # An activation goes to `vstage` and is its input; a gradient is that of the sender's (vstage + 1) input.
        chunks = self.workload.chunks
        size = chunks[vstage].input_bytes if kind == "act" else chunks[vstage + 1].input_bytes
        record.comm_bytes["pp"] += size
        if self.free or src_rank == dst_rank:
            arrival.fire(self.clock)
            return

        def done() -> None:
            record.comm_busy_s["pp"] += self.clock.now - now
            if self.rec.keep_spans:
                self.rec.span(f"stage {src_rank} pp", f"{kind} mb{microbatch}", Category.PP_COMM, now, self.clock.now)
            arrival.fire(self.clock)

        self.clock.events += 1
        pattern = self._patterns.get((src_rank, dst_rank, replica))
        self.net.start(pattern if pattern is not None else self._pattern(src_rank, dst_rank, replica), size, done)
