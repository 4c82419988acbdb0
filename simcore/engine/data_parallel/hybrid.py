"""Hybrid sharding's groups and streams (HSDP, `layout.zero_shard_size`; simcore/domain/hybrid_shard.py says how
PyTorch runs it): for pipeline rank `rank`, each tensor rank's data-parallel group splits into shard groups of
`shard` consecutive data-parallel ranks, which run the parameters' all-gathers and the gradients' reduce-scatters
(the rank's "gather" stream, as with full sharding), and replicate groups (the ranks at the same place in every shard
group), which all-reduce each reduce-scatter's output shard on a stream of their own ("replicate": FSDP's
`_all_reduce_stream` on its inter-node process group). Megatron-Core's partial distributed optimizer runs both on one
stream instead (`grad_stream`).

Simulating replica 0 alone (representative fidelity), a stream's collective runs every group of its kind at once,
as the other replicas do the same at the same time. In full fidelity each simulated replica runs its own group and
meets the simulated members of that group before each collective, as hpZ's streams do
(simcore/engine/data_parallel/zeropp_streams.py).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from simcore.cost.comm.collectives import Collective
from simcore.cost.comm.interference import CommLoad, comm_load
from simcore.engine.clock import Clock
from simcore.engine.compute import ComputeStream
from simcore.engine.data_parallel.dp_collectives import DataParallelCollectives
from simcore.engine.data_parallel.streams import Rendezvous, Stream, meeting
from simcore.engine.recorder import RankRecord, Recorder

__all__ = ["HybridStreams"]

SHARD, REPLICATE = "gather", "replicate"


class HybridStreams:
    """The shard-group and replicate-group streams of the simulated ranks, made on first use."""

    def __init__(self, clock: Clock, collectives: DataParallelCollectives, shard: int, dp: int, replicas: list[int],
                 recorder: Recorder) -> None:
        self.clock, self.collectives, self.rec = clock, collectives, recorder
        self.shard, self.dp, self.replicas = shard, dp, replicas
        self._streams: dict[tuple[int, int, str], Stream] = {}
        self._rendezvous: dict[tuple[object, ...], Rendezvous] = {}
        self._groups: dict[tuple[int, str], list[tuple[int, ...]]] = {}
        self._loads: dict[tuple[int, str, Collective, float], CommLoad] = {}

    def groups(self, rank: int, kind: str) -> list[tuple[int, ...]]:
        """Pipeline rank `rank`'s shard groups (kind SHARD) or replicate groups (REPLICATE), tensor rank by tensor
        rank, each in data-parallel rank order."""
        found = self._groups.get((rank, kind))
        if found is None:
            placement, s = self.collectives.placement, self.shard
            found = []
            for t in range(placement.tp):
                gpus = placement.dp_group(t, rank)
                if kind == SHARD:
                    found += [gpus[i:i + s] for i in range(0, len(gpus), s)]
                else:
                    found += [gpus[j::s] for j in range(s)]
            self._groups[(rank, kind)] = found
        return found

    def index(self, replica: int, kind: str) -> int:
        """Which group of its kind data-parallel rank `replica` belongs to (within one tensor rank)."""
        return replica // self.shard if kind == SHARD else replica % self.shard

    def load(self, rank: int, kind: str, collective: Collective, nbytes: float) -> CommLoad:
        """What a collective of `nbytes` on the rank's groups of `kind` takes from each GPU it runs on (its channels'
        SMs and HBM traffic, simcore/cost/comm/interference.py), as DataParallelCollectives.load for a whole group."""
        key = (rank, kind, collective, nbytes)
        found = self._loads.get(key)
        if found is None:
            collectives, groups = self.collectives, self.groups(rank, kind)
            seconds = sum(p.latency_s + nbytes / p.isolated_rate(collectives.model.capacity)
                          for p in collectives.model.phases(collective, groups, nbytes))
            found = self._loads[key] = comm_load(collective, len(groups[0]), nbytes, seconds,
                                                 collectives.model.communicator(groups[0]).channels,
                                                 collectives.sm_share)
        return found

    def label(self, rank: int, kind: str, collective: Collective, nbytes: float) -> str:
        """NCCL's choice for a collective on the rank's groups of `kind`, as the trace names it; empty unless auto."""
        choice = self.collectives.model.choice(collective, self.groups(rank, kind), nbytes)
        return "" if choice is None else choice.label

    def stream(self, replica: int, rank: int, kind: str, record: RankRecord,
               gpu: ComputeStream | None = None) -> Stream:
        key = (replica, rank, kind)
        found = self._streams.get(key)
        if found is None:
            many = len(self.replicas) > 1
            groups = self.groups(rank, kind)
            if many:  # its own group, on every tensor rank
                index, per_tensor_rank = self.index(replica, kind), len(groups) // self.collectives.placement.tp
                groups = groups[index::per_tensor_rank]
                members = sum(1 for r in self.replicas if self.index(r, kind) == index)
                rendezvous: Rendezvous | None = self._meeting(rank, kind, index, members)
            else:
                rendezvous = None
            size = self.shard if kind == SHARD else self.dp // self.shard
            collectives = self.collectives

            def run(collective: Collective, nbytes: float, done: Callable[[], None]) -> None:
                collectives.run_groups(groups, collective, nbytes, done)

            track = f"stage {rank} {'gather' if kind == SHARD else 'replicate'}" + (f"{replica}" if many else "")
            found = self._streams[key] = Stream(
                self.clock, run, partial(collectives.instant, rank), rendezvous, size, record, self.rec, track,
                lambda collective, nbytes: self.label(rank, kind, collective, nbytes), gpu,
                lambda collective, nbytes: self.load(rank, kind, collective, nbytes))
        return found

    def made(self, replica: int, rank: int, kind: str) -> Stream:
        """A stream already made (`stream`, `grad_stream`)."""
        return self._streams[(replica, rank, kind)]

    def grad_stream(self, replica: int, rank: int, record: RankRecord, gpu: ComputeStream | None = None) -> Stream:
        """Megatron-Core's partial distributed optimizer (zero_stage 1): one stream (its `communication_stream`)
        runs each gradient bucket's reduce-scatter over the shard groups and then its shard's all-reduce over the
        replicate groups (param_and_grad_buffer.py start_grad_sync). Every simulated replica meets before each
        collective, which then runs every group of its kind."""
        key = (replica, rank, "grad")
        found = self._streams.get(key)
        if found is None:
            collectives = self.collectives

            def kind_of(collective: Collective) -> str:
                return SHARD if collective is Collective.REDUCE_SCATTER else REPLICATE

            def run(collective: Collective, nbytes: float, done: Callable[[], None]) -> None:
                collectives.run_groups(self.groups(rank, kind_of(collective)), collective, nbytes, done)

            many = len(self.replicas) > 1
            rendezvous = self._meeting(rank, "grad", 0, len(self.replicas)) if many else None
            track = f"stage {rank} dp" + (f"{replica}" if many else "")
            found = self._streams[key] = Stream(
                self.clock, run, partial(collectives.instant, rank), rendezvous, self.shard, record, self.rec,
                track, lambda collective, nbytes: self.label(rank, kind_of(collective), collective, nbytes), gpu,
                lambda collective, nbytes: self.load(rank, kind_of(collective), collective, nbytes))
        return found

    def _meeting(self, rank: int, kind: str, index: int, members: int) -> Rendezvous:
        return meeting(self._rendezvous, self.clock, (rank, kind, index), members)
