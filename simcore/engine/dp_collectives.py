"""Data-parallel collectives run on the flow network: a collective's phases one after another, each a flow group
on the links of the cluster (simcore/cost/collectives.py builds them), then a completion callback.

It knows nothing of streams or ranks' schedules: the streams (simcore/engine/streams.py) get its `run` and
`instant`, bound to their pipeline rank, and nothing here refers back to them.
"""

from __future__ import annotations

from collections.abc import Callable

from simcore.cost.collectives import Collective, CollectiveModel
from simcore.cost.patterns import FlowPattern
from simcore.domain.placement import Placement
from simcore.engine.clock import Clock
from simcore.engine.flows import FlowNetwork


class DataParallelCollectives:
    """The collectives of the data-parallel groups of each pipeline rank (one group per tensor rank, run at
    once), on `net`. Counts the events it makes in `events`."""

    def __init__(self, clock: Clock, net: FlowNetwork, model: CollectiveModel, placement: Placement,
                 free_communication: bool) -> None:
        self.clock, self.net, self.model, self.placement = clock, net, model, placement
        self.free = free_communication  # what-if: every collective takes no time
        self.events = 0
        self._phases: dict[tuple[Collective, int], tuple[FlowPattern, ...]] = {}
        self._instant: dict[tuple[Collective, int], bool] = {}

    def run(self, rank: int, kind: Collective, size_bytes: float, complete: Callable[[], None]) -> None:
        """Run a collective of `kind` on `size_bytes` over pipeline rank `rank`'s data-parallel groups, then call
        `complete()`. It starts from an urgent call at this instant, as a SimPy process would."""
        phases = () if self.free else self.phases(rank, kind)
        self.clock.call_urgently(self._phase, phases, 0, size_bytes, complete)

    def run_groups(self, groups: tuple[tuple[int, ...], ...], kind: Collective, size_bytes: float,
                   complete: Callable[[], None]) -> None:
        """Run a collective of `kind` on `size_bytes` over the given GPU groups at once (e.g. the tied
        embedding's copies across pipeline stages), then call `complete()`."""
        phases = () if self.free else self.model.phases(kind, groups)  # the model caches them by groups
        self.clock.call_urgently(self._phase, phases, 0, size_bytes, complete)

    def instant(self, rank: int, kind: Collective) -> bool:
        """Can a collective of `kind` on the rank's groups end at the instant it starts (no time to move bytes or
        no latency in a phase)?"""
        quick = self._instant.get((kind, rank))
        if quick is None:
            quick = self._instant[(kind, rank)] = self.free or any(
                phase.latency_s <= 0 for phase in self.phases(rank, kind))
        return quick

    def phases(self, rank: int, kind: Collective) -> tuple[FlowPattern, ...]:
        found = self._phases.get((kind, rank))
        if found is None:
            found = self._phases[(kind, rank)] = self.model.data_parallel_phases(kind, self.placement, rank)
        return found

    def _phase(self, phases: tuple[FlowPattern, ...], index: int, size_bytes: float,
               complete: Callable[[], None]) -> None:
        if index == len(phases):
            complete()
            return
        self.events += 1
        # A phase's end is an event that the next phase waits for: due at the instant the last byte arrives.
        self.net.start(phases[index], size_bytes,
                       lambda: self.clock.call_soon(self._phase, phases, index + 1, size_bytes, complete))
