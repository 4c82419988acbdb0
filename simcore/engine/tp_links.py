"""Tensor-parallel collectives on the links, for tensor-parallel groups that cross NVLink domains (nodes).

Inside a node TP traffic only crosses NVLink, which nothing else in a training step loads much, so its
collectives stay folded into their pass (the fast path: simcore/cost/workload.py costs them on the real group
alone on its links). A TP group across nodes sends through the NICs that the data-parallel and pipeline traffic
use too: there each pass's TP collectives run as a transfer on the flow network after its kernels, so the
flows that share those NICs slow each other down.

One transfer per pass and direction: the pass's TP bytes (what each rank sends, `tp_bytes_forward` or
`tp_bytes_backward`, as the buffer bytes of a ring all-reduce) over the links of the layer's all-reduce (NCCL's
choice for the layer's message under `auto`), after a latency that makes it last, alone on its links, exactly the
exposed TP time the workload computed (the latency of its many collectives in one). Left folded: passes whose TP
collectives overlap their GEMMs (`tp_comm_overlap`) and ZeRO 3's sliced passes.
"""

from __future__ import annotations

from simcore.cost.comm.collectives import Collective, CollectiveModel, ring_factor
from simcore.cost.comm.patterns import FlowPattern
from simcore.cost.workload import ChunkCost
from simcore.domain.layout import Fidelity
from simcore.domain.placement import Placement
from simcore.engine.clock import Clock, Signal
from simcore.engine.flows import FlowNetwork


class TensorParallelLinks:
    """The TP transfers of an engine's passes, on `net`."""

    def __init__(self, clock: Clock, net: FlowNetwork, model: CollectiveModel, placement: Placement,
                 fidelity: Fidelity) -> None:
        self.clock, self.net, self.model, self.placement, self.fidelity = clock, net, model, placement, fidelity
        self._crosses: dict[int, bool] = {}
        self._transfers: dict[tuple[int, int, int, bool], tuple[tuple[FlowPattern, ...], float]] = {}

    def crosses(self, rank: int) -> bool:
        """Do pipeline rank `rank`'s TP groups span more than one NVLink domain?"""
        found = self._crosses.get(rank)
        if found is None:
            group = self.placement.tp_group(0, rank)
            found = self._crosses[rank] = len({self.model.cluster.domain_of(gpu) for gpu in group}) > 1
        return found

    def run(self, replica: int, rank: int, cost: ChunkCost, forward: bool, exposed_s: float) -> Signal:
        """Start the pass's TP transfer (`exposed_s` alone on its links); the signal fires when it ends."""
        phases, size = self._transfer(replica, rank, cost, forward, exposed_s)
        signal = Signal()
        self._phase(phases, 0, size, signal)
        return signal

    def _phase(self, phases: tuple[FlowPattern, ...], index: int, size: float, signal: Signal) -> None:
        if index == len(phases):
            signal.fire(self.clock)
            return
        self.clock.events += 1
        self.net.start(phases[index], size, lambda: self._phase(phases, index + 1, size, signal))

    def _transfer(self, replica: int, rank: int, cost: ChunkCost, forward: bool,
                  exposed_s: float) -> tuple[tuple[FlowPattern, ...], float]:
        key = (replica if self.fidelity is Fidelity.FULL else 0, rank, cost.virtual_stage, forward)
        found = self._transfers.get(key)
        if found is None:
            place = self.placement
            replicas = [replica] if self.fidelity is Fidelity.FULL else range(place.dp)
            groups = [place.tp_group(d, rank) for d in replicas]
            layer = self.model.phases(Collective.ALL_REDUCE, groups, cost.tp_message_bytes)
            sent = cost.tp_bytes_forward if forward else cost.tp_bytes_backward
            size = sent / ring_factor(Collective.ALL_REDUCE, place.tp)
            moving = sum(size / phase.isolated_rate(self.model.capacity) for phase in layer)
            latency = max(0.0, exposed_s - moving)
            phases = tuple(FlowPattern(phase.links, phase.loads, latency if k == 0 else 0.0)
                           for k, phase in enumerate(layer))
            found = self._transfers[key] = (phases, size)
        return found
