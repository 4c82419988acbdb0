"""Data-parallel collectives run on the flow network: a collective's phases one after another, each a flow group
on the links of the cluster (simcore/cost/comm/collectives.py builds them), then a completion callback.

It knows nothing of streams or ranks' schedules: the streams (simcore/engine/data_parallel/streams.py) get its `run` and
`instant`, bound to their pipeline rank, and nothing here refers back to them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simcore.cost.comm.collectives import Collective, CollectiveModel
from simcore.cost.comm.groups import data_parallel_groups
from simcore.cost.comm.interference import CommLoad, comm_load
from simcore.cost.comm.patterns import FlowPattern
from simcore.domain.placement import Placement
from simcore.engine.clock import Clock
from simcore.engine.flows import FlowNetwork


class DataParallelCollectives:
    """The collectives of the data-parallel groups of each pipeline rank (one group per tensor rank, run at
    once), on `net`. Counts the events it makes on the clock."""

    def __init__(self, clock: Clock, net: FlowNetwork, model: CollectiveModel, placement: Placement,
                 free_communication: bool, sm_share: float = 0.0) -> None:
        self.clock, self.net, self.model, self.placement = clock, net, model, placement
        self.free = free_communication  # what-if: every collective takes no time
        self.sm_share = sm_share  # of an SM, per channel, that compute beside a collective loses
        self._loads: dict[tuple[int, Collective, float], CommLoad] = {}
        self._phases: dict[tuple[Collective, int, float], tuple[FlowPattern, ...]] = {}
        self._instant: dict[tuple[Collective, int], bool] = {}

    def run(self, rank: int, kind: Collective, size_bytes: float, complete: Callable[[], None]) -> None:
        """Run a collective of `kind` on `size_bytes` over pipeline rank `rank`'s data-parallel groups, then call
        `complete()`. It starts from an urgent call at this instant, as a SimPy process would."""
        phases = () if self.free else self.phases(rank, kind, size_bytes)
        self.clock.call_urgently(self._phase, phases, 0, size_bytes, complete)

    def run_groups(self, groups: Sequence[Sequence[int]], kind: Collective, size_bytes: float,
                   complete: Callable[[], None]) -> None:
        """Run a collective of `kind` on `size_bytes` over the given GPU groups at once (e.g. the tied
        embedding's copies across pipeline stages), then call `complete()`."""
        phases = () if self.free else self.model.phases(kind, groups, size_bytes)  # cached by the model
        self.clock.call_urgently(self._phase, phases, 0, size_bytes, complete)

    def run_sequence(self, steps: Sequence[tuple[FlowPattern, float]], complete: Callable[[], None]) -> None:
        """Run flow patterns one after another, each on its own size in bytes (e.g. ZeRO++'s two all-to-alls of a
        quantized gradient, simcore/engine/data_parallel/sharded.py), then call `complete()`."""
        if self.free or not steps:
            self.clock.call_urgently(complete)
            return
        self.clock.call_urgently(self._step, steps, 0, complete)

    def _step(self, steps: Sequence[tuple[FlowPattern, float]], index: int, complete: Callable[[], None]) -> None:
        if index == len(steps):
            complete()
            return
        self.clock.events += 1
        pattern, size = steps[index]
        self.net.start(pattern, size, lambda: self.clock.call_soon(self._step, steps, index + 1, complete))

    def instant(self, rank: int, kind: Collective) -> bool:
        """Can a collective of `kind` on the rank's groups end at the instant it starts (no time to move bytes or
        no latency in a phase)?"""
        quick = self._instant.get((kind, rank))
        if quick is None:
            # NCCL's choice (auto) always has a latency: its base latency, or NVLS's switch latency.
            quick = self._instant[(kind, rank)] = self.free or (not self.model.auto and any(
                phase.latency_s <= 0 for phase in self.phases(rank, kind, 0.0)))
        return quick

    def phases(self, rank: int, kind: Collective, size_bytes: float) -> tuple[FlowPattern, ...]:
        """The phases of a collective of `size_bytes` (the size matters only to NCCL's choice, `auto`)."""
        key = (kind, rank, size_bytes if self.model.sized else 0.0)
        found = self._phases.get(key)
        if found is None:
            found = self._phases[key] = self.model.data_parallel_phases(kind, self.placement, rank, size_bytes)
        return found

    def load(self, rank: int, kind: Collective, size_bytes: float) -> CommLoad:
        """What a collective of `size_bytes` on the rank's groups takes from each GPU it runs on: its channels'
        SMs and the HBM bandwidth it moves at its pace alone on the links (simcore/cost/comm/interference.py)."""
        key = (rank, kind, size_bytes)
        found = self._loads.get(key)
        if found is None:
            group = self.placement.dp_group(0, rank)
            seconds = sum(p.latency_s + size_bytes / p.isolated_rate(self.model.capacity)
                          for p in self.phases(rank, kind, size_bytes))
            found = self._loads[key] = comm_load(kind, len(group), size_bytes, seconds,
                                                 self.model.communicator(group).channels, self.sm_share)
        return found

    def label(self, rank: int, kind: Collective, size_bytes: float) -> str:
        """NCCL's choice for the collective, as the trace names it ("tree/LL"); empty unless `auto`."""
        choice = self.model.choice(kind, data_parallel_groups(self.placement, rank), size_bytes)
        return "" if choice is None else choice.label

    def _phase(self, phases: tuple[FlowPattern, ...], index: int, size_bytes: float,
               complete: Callable[[], None]) -> None:
        if index == len(phases):
            complete()
            return
        self.clock.events += 1
        # A phase's end is an event that the next phase waits for: due at the instant the last byte arrives.
        self.net.start(phases[index], size_bytes,
                       lambda: self.clock.call_soon(self._phase, phases, index + 1, size_bytes, complete))
