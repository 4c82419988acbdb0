"""ZeRO++'s communication streams beside a rank's data-parallel ones (simcore/domain/zeropp.py says what each
option does; simcore/engine/data_parallel/sharded.py puts the jobs on them):
- "hpz": the backward's parameter gathers within the rank's secondary group, the `zero_hpz_partition_size`
  consecutive data-parallel ranks it belongs to (DeepSpeed's zero_param_process_group, its own NCCL
  communicator, so its own stream);
- "qgz": each 2-D gradient's quantized averaging, an all-to-all among the GPUs of each node, then one among the
  GPUs of the same local rank on every node (all_to_all_quant_reduce's `local_{i}` and `global_{j}` groups), one
  after the other; a job's size is the first all-to-all's buffer, the second moves 1/local of it.
The groups are DeepSpeed's, by rank: the secondary group of data-parallel rank r holds ranks r - r % n to
r - r % n + n - 1; qgZ's node i holds ranks i*local to i*local + local - 1. Both options run with every rank
data-parallel (tp = cp = 1), so data-parallel rank r is the r-th GPU of pipeline rank `rank`'s group.

In full fidelity the replicas meet before each collective, as the data-parallel streams do: a secondary group's
members before their group's gather (which then moves that group's bytes), every replica before a qgZ step.
Simulating replica 0 alone, each gather runs every secondary group at once. A qgZ step's flows are the simulated
GPU's node group's, then across nodes the sends and receives of every GPU of the simulated node (its NICs carry
all they carry in the whole exchange): the other nodes' intra-node flows touch none of its links, and routing
every pair across thousands of nodes would cost n^2 routes (the load of the other nodes' exchanges on the fabric
beyond the simulated node is left out).
"""

from __future__ import annotations

from collections.abc import Callable

from simcore.cost.comm.collectives import Collective
from simcore.cost.comm.patterns import FlowPattern
from simcore.cost.moe import all_to_all_pattern
from simcore.cost.zeropp import ZeroppCosts
from simcore.engine.clock import Clock
from simcore.engine.data_parallel.dp_collectives import DataParallelCollectives
from simcore.engine.data_parallel.streams import Rendezvous, Stream, meeting
from simcore.engine.recorder import RankRecord, Recorder


class ZeroppStreams:
    """The hpZ and qgZ streams of the simulated ranks, made on first use."""

    def __init__(self, clock: Clock, collectives: DataParallelCollectives, costs: ZeroppCosts, replicas: list[int],
                 recorder: Recorder) -> None:
        self.clock, self.collectives, self.costs, self.rec = clock, collectives, costs, recorder
        self.replicas = replicas
        self._streams: dict[tuple[int, int, str], Stream] = {}
        self._rendezvous: dict[tuple[object, ...], Rendezvous] = {}
        self._qgz: dict[int, tuple[FlowPattern, FlowPattern]] = {}

    def _dp_gpus(self, rank: int) -> tuple[int, ...]:
        return self.collectives.placement.dp_group(0, rank)

    def hpz_groups(self, rank: int) -> list[tuple[int, ...]]:
        """Pipeline rank `rank`'s secondary groups, in data-parallel rank order."""
        gpus, n = self._dp_gpus(rank), self.costs.hpz
        return [gpus[i:i + n] for i in range(0, len(gpus), n)]

    def qgz_groups(self, rank: int) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
        """qgZ's intra-node groups and inter-node groups (same local rank on every node)."""
        gpus, local = self._dp_gpus(rank), self.costs.local
        nodes = len(gpus) // local
        intra = [gpus[i * local:(i + 1) * local] for i in range(nodes)]
        inter = [tuple(gpus[i * local + j] for i in range(nodes)) for j in range(local)]
        return intra, inter

    def hpz(self, replica: int, rank: int, record: RankRecord) -> Stream:
        key = (replica, rank, "hpz")
        found = self._streams.get(key)
        if found is None:
            groups = self.hpz_groups(rank)
            index = replica // self.costs.hpz
            many = len(self.replicas) > 1
            own = [groups[index]] if many else groups
            members = sum(1 for r in self.replicas if r // self.costs.hpz == index)
            found = self._streams[key] = self._stream(
                replica, rank, "hpz", record, self.costs.hpz,
                lambda kind, size, done: self.collectives.run_groups(own, kind, size, done),
                self._meeting(rank, "hpz", index, members) if many else None)
        return found

    def qgz(self, replica: int, rank: int, record: RankRecord) -> Stream:
        key = (replica, rank, "qgz")
        found = self._streams.get(key)
        if found is None:
            many = len(self.replicas) > 1

            def run(_kind: Collective, size: float, done: Callable[[], None]) -> None:
                intra, inter = self._patterns(rank)
                self.collectives.run_sequence(((intra, size), (inter, size / self.costs.local)), done)

            found = self._streams[key] = self._stream(
                replica, rank, "qgz", record, self.costs.local, run,
                self._meeting(rank, "qgz", 0, len(self.replicas)) if many else None)
        return found

    def _patterns(self, rank: int) -> tuple[FlowPattern, FlowPattern]:
        found = self._qgz.get(rank)
        if found is None:
            intra, inter = self.qgz_groups(rank)
            model = self.collectives.model
            # the node's group alone (the others' flows stay on their own nodes' links); across nodes the sends
            # and receives of the simulated node's GPUs (n routes each, not n^2: thousands of nodes stay cheap)
            found = self._qgz[rank] = (all_to_all_pattern(model, intra[:1]),
                                       all_to_all_pattern(model, inter, own_flows=True))
        return found

    def _meeting(self, rank: int, name: str, index: int, members: int) -> Rendezvous:
        return meeting(self._rendezvous, self.clock, (rank, name, index), members)

    def _stream(self, replica: int, rank: int, name: str, record: RankRecord, group: int,
                run: Callable[[Collective, float, Callable[[], None]], None],
                rendezvous: Rendezvous | None) -> Stream:
        many = len(self.replicas) > 1
        track = f"stage {rank} {name}" + (f"{replica}" if many else "")
        free = self.collectives.free
        return Stream(self.clock, run, lambda _kind: free, rendezvous, group, record, self.rec, track)
