"""The tied embedding's gradient synchronisation under pipelining: after their data-parallel reduction, the
pipeline ranks holding a copy of the shared word embedding (the first stage, a decoder's first stage, the last
stage's output layer) all-reduce its gradient, blocking, before the optimizer step (Megatron-Core's
finalize_model_grads, _allreduce_word_embedding_grads). One collective per replica on the flow network, started
when the last of its ranks arrives. It exists only because of pipelining, so its time and bytes count as
pipeline communication (`pp`)."""

from __future__ import annotations

from simcore.cost.comm.collectives import Collective
from simcore.cost.comm.groups import stage_groups
from simcore.cost.workload import Workload
from simcore.domain.placement import Placement
from simcore.engine.clock import Clock, Event
from simcore.engine.data_parallel.dp_collectives import DataParallelCollectives
from simcore.engine.recorder import RankRecord


class EmbeddingSync:
    """Counts its events on the clock. In representative fidelity (`mirrored`) the simulated replica's groups
    carry every replica's flows, as the data-parallel collectives do."""

    def __init__(self, clock: Clock, collectives: DataParallelCollectives, placement: Placement,
                 workload: Workload, mirrored: bool) -> None:
        self.clock, self.collectives, self.placement, self.workload = clock, collectives, placement, workload
        self.mirrored = mirrored
        self._done: dict[int, Event] = {}
        self._arrived: dict[int, int] = {}

    def holds_copy(self, rank: int) -> bool:
        return rank in self.workload.embedding_sync_ranks

    def wait(self, replica: int, record: RankRecord) -> Event:
        """The event that fires when `replica`'s all-reduce is done; this rank arrives at it now."""
        done = self._done.get(replica)
        if done is None:
            done = self._done[replica] = Event(self.clock)
        ranks, size = self.workload.embedding_sync_ranks, self.workload.embedding_sync_bytes
        record.comm_bytes["pp"] += size
        arrived = self._arrived[replica] = self._arrived.get(replica, 0) + 1
        if arrived == len(ranks):
            replicas = range(self.placement.dp) if self.mirrored else range(replica, replica + 1)
            groups = stage_groups(self.placement, ranks, replicas)
            started = self.clock.now

            def complete() -> None:
                record.comm_busy_s["pp"] += self.clock.now - started
                done.succeed()

            self.clock.events += 1
            self.collectives.run_groups(groups, Collective.ALL_REDUCE, size, complete)
        return done
