"""Context parallelism's passes as events: each layer's attention ring steps, their K/V sends as flows on the ring's
links, all_gather's collectives and a2a's all-to-alls on the context-parallel groups.

A pass of a model chunk with cp > 1 runs its segments (simcore/cost/context_parallel.py) in order: compute is a
timer; a ring step starts its send on the flow network, computes its attention block, and waits for the send
(what the block could not hide is the step's exposed `cp_comm`); an exchange (all_gather) or an all-to-all (a2a)
is communication the compute stream waits for entirely. In representative fidelity a send carries the flows of
every context-parallel rank, tensor rank and data-parallel replica of the pipeline rank (they run the same step at
the same time), so link sharing counts every real flow; in full fidelity each replica sends its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from simcore.cost.comm.collectives import Collective, CollectiveModel, ring_factor
from simcore.cost.comm.patterns import FlowPattern
from simcore.cost.context_parallel import AllToAll, CpPass, RingStep
from simcore.cost.moe import all_to_all_pattern
from simcore.domain.placement import Placement
from simcore.engine.clock import Clock, Event, Process, Signal
from simcore.engine.flows import FlowNetwork
from simcore.engine.pass_spans import wait_reductions
from simcore.engine.recorder import Category, RankRecord, Recorder


@dataclass(slots=True)
class CpTotals:
    """What a rank's context-parallel passes add up to (seconds and bytes), added to its record at the end."""

    exposed_s: float = 0.0  # the compute stream's waits for ring sends and exchanges
    busy_s: float = 0.0  # the sends' and exchanges' own durations, overlapped or not
    bytes: float = 0.0  # bytes one rank sent

    def add_to(self, record: RankRecord) -> None:
        record.time_s[Category.CP_COMM] += self.exposed_s
        record.comm_busy_s["cp"] += self.busy_s
        record.comm_bytes["cp"] += self.bytes


class _Done(Signal):
    """A send or exchange on its way: fired when its last byte has arrived, which is `end_s`."""

    __slots__ = ("end_s",)

    def __init__(self) -> None:
        super().__init__()
        self.end_s = 0.0


class ContextRing:
    """Runs context-parallel passes on `net` for the engine's ranks; counts the events it makes on the clock."""

    def __init__(self, clock: Clock, net: FlowNetwork, collectives: CollectiveModel, placement: Placement,
                 representative: bool, free_communication: bool, recorder: Recorder) -> None:
        self.clock, self.net, self.collectives, self.placement = clock, net, collectives, placement
        self.representative = representative
        self.free = free_communication
        self.rec = recorder
        self._sends: dict[tuple[int, int], FlowPattern] = {}
        self._phases: dict[tuple[Collective, int, int, float], tuple[FlowPattern, ...]] = {}
        self._all_to_all: dict[tuple[int, int], FlowPattern] = {}

    def _replicas(self, replica: int) -> list[int]:
        return list(range(self.placement.dp)) if self.representative else [replica]

    def _send_pattern(self, replica: int, rank: int) -> tuple[FlowPattern, ...]:
        key = (replica, rank)
        found = self._sends.get(key)
        if found is None:
            found = self._sends[key] = self.collectives.context_parallel_send(
                self.placement, rank, self._replicas(replica))
        return (found,)

    def _exchange_phases(self, kind: Collective, replica: int, rank: int, size: float) -> tuple[FlowPattern, ...]:
        key = (kind, replica, rank, size)
        found = self._phases.get(key)
        if found is None:
            found = self._phases[key] = self.collectives.context_parallel_phases(
                kind, self.placement, rank, self._replicas(replica), size)
        return found

    def _all_to_all_pattern(self, replica: int, rank: int) -> tuple[FlowPattern, ...]:
        """An all-to-all on the context-parallel groups of pipeline rank `rank` (every tensor rank of each replica
        at once; MoE's all-to-all pattern: one send to every peer, all in flight together)."""
        key = (replica, rank)
        found = self._all_to_all.get(key)
        if found is None:
            placement = self.placement
            groups = [placement.cp_group(d, t, rank) for d in self._replicas(replica) for t in range(placement.tp)]
            found = self._all_to_all[key] = all_to_all_pattern(self.collectives, groups)
        return (found,)

    def _transfer(self, patterns: tuple[FlowPattern, ...], size: float) -> _Done:
        """Run `patterns` one after another on `size` units; the signal fires when the last ends."""
        done = _Done()
        clock = self.clock

        def phase(index: int) -> None:
            if index == len(patterns):
                done.end_s = clock.now
                done.fire(clock)
                return
            self.clock.events += 1
            self.net.start(patterns[index], size, lambda: phase(index + 1))

        if self.free or size <= 0:
            phase(len(patterns))
        else:
            phase(0)
        return done

    def run(self, replica: int, rank: int, plan: CpPass, totals: CpTotals, track: str, label: str,
            layers: range | None = None, extra: bool = True) -> Process:
        """Run one pass (a generator for the rank's process), or the `layers` of it (with its `extra` work first
        or not): compute as timers, ring steps with their sends, exchanges. With spans kept, the compute between
        two waits is one span, and each wait and each send its own."""
        clock, spans = self.clock, self.rec.keep_spans
        busy_from = clock.now
        if extra and plan.extra_s > 0:
            self.clock.events += 1
            yield plan.extra_s
        for layer in layers if layers is not None else range(plan.layers):
            for segment in plan.layer:
                if isinstance(segment, float):
                    self.clock.events += 1
                    yield segment
                    continue
                started = clock.now
                if isinstance(segment, RingStep):
                    if segment.send_bytes <= 0:
                        self.clock.events += 1
                        yield segment.compute_s
                        continue
                    done = self._transfer(self._send_pattern(replica, rank), segment.send_bytes)
                    totals.bytes += segment.send_bytes
                    self.clock.events += 1
                    yield segment.compute_s
                    name = f"kv send L{layer}"
                elif isinstance(segment, AllToAll):  # a2a's exchange of Q/K/V, O or their gradients, waited for
                    done = self._transfer(self._all_to_all_pattern(replica, rank), segment.size_bytes)
                    cp = self.placement.cp
                    totals.bytes += (cp - 1) / cp * segment.size_bytes
                    name = f"all-to-all L{layer}"
                else:  # an exchange: all_gather's collective, waited for entirely
                    done = self._transfer(self._exchange_phases(segment.kind, replica, rank, segment.size_bytes),
                                          segment.size_bytes)
                    totals.bytes += ring_factor(segment.kind, self.placement.cp) * segment.size_bytes
                    name = f"kv {segment.kind.value.replace('_', '-')} L{layer}"
                waited = clock.now
                if not done.fired:
                    yield done
                totals.exposed_s += clock.now - waited
                totals.busy_s += done.end_s - started
                if spans:
                    self.rec.span(track + " cp", f"{name} {label}", Category.CP_COMM, started, done.end_s)
                    if clock.now > waited:
                        self.rec.span(track, label, Category.COMPUTE, busy_from, waited)
                        self.rec.span(track, f"wait {name} {label}", Category.CP_COMM, waited, clock.now)
                        busy_from = clock.now
        if spans:
            self.rec.span(track, label, Category.COMPUTE, busy_from, clock.now)

    def run_gated(self, gates: list[Callable[[], Event]], plan: CpPass, totals: CpTotals, replica: int, rank: int,
                  t: dict[str, float], track: str, label: str,
                  reduce: Callable[[], Event | None] | None = None) -> Process:
        """A context-parallel pass behind its gates (each returns its parameter gather's event): gate k opens
        before the k-th of len(gates) equal runs of its layers (ZeRO 3: one gate a layer), the next gate's gather
        issued when a run starts. `reduce` (FSDP's backward): called after each run, it reduce-scatters that run's
        gradients; the pass ends when every reduction has (FSDP's end of backward)."""
        clock, n, layers = self.clock, len(gates), plan.layers
        reductions: list[Event] = []
        pending = gates[0]()
        for k in range(n):
            current = pending
            if not current.triggered:
                waited = clock.now
                yield current
                t[Category.DP_COMM] += clock.now - waited
                self.rec.span(track, "wait parameter gather", Category.DP_COMM, waited, clock.now)
            if k + 1 < n:
                pending = gates[k + 1]()
            yield from self.run(replica, rank, plan, totals, track, label,
                                range(k * layers // n, (k + 1) * layers // n), extra=k == 0)
            reduced = reduce() if reduce is not None else None
            if reduced is not None:
                reductions.append(reduced)
        if reductions:
            yield from wait_reductions(clock, self.rec, t, track, reductions)
