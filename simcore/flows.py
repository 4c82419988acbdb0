"""Bandwidth sharing on the cluster's links: fluid flows with max-min fair rates, driven by SimPy.

A transfer is a `FlowGroup`: one or more flows that move together (a point-to-point message, or every hop of a
pipelined collective, or the mirror copies of a transfer that symmetric ranks make at the same instant). Its
`pattern` gives, for each link it crosses, the link's load in "units": bytes crossing that link per unit of the
group's progress. The group is done when `size_units` units have progressed. Rates follow progressive filling
(max-min fairness per unit of progress): a link's capacity is shared by the groups on it, and a group runs at the
rate of its most loaded link. Every time a group starts or finishes, the rates of the groups that share links
with it (transitively) are recomputed, and their completions rescheduled.

Exact small cases this must reproduce: two 1 MB transfers on one 1 GB/s link starting together both end at 2 ms;
a 0.5 MB and a 1.5 MB transfer starting together end at 1 ms and 2 ms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import simpy

_EPS = 1e-12


@dataclass(frozen=True, slots=True)
class FlowPattern:
    """Links a group loads (link ids) and its load on each (bytes per unit of progress), plus fixed latency."""

    links: tuple[int, ...]
    loads: tuple[float, ...]
    latency_s: float = 0.0

    def isolated_rate(self, capacity: Sequence[float]) -> float:
        """Units per second when nothing else shares the links."""
        return min(capacity[link] / load for link, load in zip(self.links, self.loads))


def keep_links(pattern: FlowPattern, primary: set[int], capacity: Sequence[float], extra: int = 4) -> FlowPattern:
    """The pattern restricted to the `primary` links (the simulated flow's own path) and the `extra` links that
    the pattern loads most (load over capacity). Used for the mirror copies of a representative transfer: they
    are symmetric images of the simulated flow, so contention on their other links repeats what happens on the
    kept ones, and the kept bottlenecks still set the rate."""
    ranked = sorted(zip(pattern.links, pattern.loads), key=lambda lw: (-lw[1] / capacity[lw[0]], lw[0]))
    chosen = {link for link, _w in ranked[:extra]} | primary
    kept = [(link, w) for link, w in zip(pattern.links, pattern.loads) if link in chosen]
    return FlowPattern(tuple(link for link, _w in kept), tuple(w for _l, w in kept), pattern.latency_s)


class _Group:
    __slots__ = ("seq", "pattern", "remaining", "rate", "stamp", "generation", "on_done")

    def __init__(self, seq: int, pattern: FlowPattern, size: float, on_done: Callable[[], None]) -> None:
        self.seq = seq
        self.pattern = pattern
        self.remaining = size
        self.rate = 0.0
        self.stamp = 0.0
        self.generation = 0
        self.on_done = on_done


class FlowNetwork:
    """Active flow groups on links with the given capacities (bytes/s, already derated for protocol efficiency)."""

    def __init__(self, env: simpy.Environment, capacity: Sequence[float]) -> None:
        self.env = env
        self.capacity = capacity
        self._on_link: dict[int, list[_Group]] = {}
        self._admitted = 0
        # A pattern's rate when alone, by pattern (the callers reuse their pattern objects); the pattern is kept
        # beside its rate so that a recycled id() can never match another pattern.
        self._isolated: dict[int, tuple[FlowPattern, float]] = {}
        self.events = 0

    def start(self, pattern: FlowPattern, size_units: float, on_done: Callable[[], None]) -> None:
        """Start a group after its latency; `on_done()` runs when its last byte arrives."""
        if pattern.latency_s > 0:
            timer = self.env.timeout(pattern.latency_s)
            timer.callbacks.append(lambda _e: self._admit(pattern, size_units, on_done))
            self.events += 1
        else:
            self._admit(pattern, size_units, on_done)

    def _admit(self, pattern: FlowPattern, size: float, on_done: Callable[[], None]) -> None:
        if size <= 0 or not pattern.links:
            on_done()
            return
        self._admitted += 1
        group = _Group(self._admitted, pattern, size, on_done)
        group.stamp = self.env.now
        shared = False
        for link in pattern.links:
            groups = self._on_link.setdefault(link, [])
            if groups:
                shared = True
            groups.append(group)
        if shared:
            self._rebalance(group)
        else:
            rate = self._isolated.get(id(pattern))
            if rate is None or rate[0] is not pattern:
                rate = self._isolated[id(pattern)] = (pattern, pattern.isolated_rate(self.capacity))
            group.rate = rate[1]
            self._schedule(group)

    def _component(self, seed: _Group) -> list[_Group]:
        seen = {seed.seq: seed}
        stack = [seed]
        while stack:
            group = stack.pop()
            for link in group.pattern.links:
                for other in self._on_link.get(link, ()):
                    if other.seq not in seen:
                        seen[other.seq] = other
                        stack.append(other)
        return sorted(seen.values(), key=lambda g: g.seq)

    def _rebalance(self, seed: _Group) -> list[_Group]:
        now = self.env.now
        groups = self._component(seed)
        for group in groups:  # settle progress at the old rates
            group.remaining -= group.rate * (now - group.stamp)
            group.stamp = now
        rates = water_fill([g.pattern for g in groups], self.capacity)
        for group, rate in zip(groups, rates):
            if rate != group.rate or group is seed:
                group.rate = rate
                self._schedule(group)
        return groups

    def _schedule(self, group: _Group) -> None:
        group.generation += 1
        generation = group.generation
        delay = max(group.remaining, 0.0) / group.rate
        timer = self.env.timeout(delay)
        timer.callbacks.append(lambda _e: self._finish(group, generation))
        self.events += 1

    def _finish(self, group: _Group, generation: int) -> None:
        if generation != group.generation:
            return  # rescheduled since
        neighbours: list[_Group] = []
        for link in group.pattern.links:
            groups = self._on_link[link]
            groups.remove(group)
            neighbours.extend(groups)
            if not groups:
                del self._on_link[link]
        group.remaining = 0.0
        if neighbours:
            seen: set[int] = set()
            for other in neighbours:
                if other.seq not in seen:
                    seen.update(g.seq for g in self._rebalance(other))
        group.on_done()


def water_fill(patterns: Sequence[FlowPattern], capacity: Sequence[float]) -> list[float]:
    """Max-min fair rates (units/s) by progressive filling: raise every unfrozen group's rate together until a
    link saturates, freeze the groups on it, repeat. A link only one group uses constrains only that group, so
    each group's private links reduce to one cap (the tightest), and the loop walks the shared links alone."""
    count = len(patterns)
    rates = [0.0] * count
    frozen = [False] * count
    on_link: dict[int, list[tuple[int, float]]] = {}
    for i, pattern in enumerate(patterns):
        for link, load in zip(pattern.links, pattern.loads):
            on_link.setdefault(link, []).append((i, load))
    private = [float("inf")] * count
    shared: dict[int, list[tuple[int, float]]] = {}
    for link, members in on_link.items():
        if len(members) == 1:
            i, load = members[0]
            private[i] = min(private[i], capacity[link] / load)
        else:
            shared[link] = members
    used = dict.fromkeys(shared, 0.0)
    left = count
    while left:
        best_level = float("inf")
        best_link, best_group = -1, -1
        for link, members in shared.items():
            denom = sum(load for i, load in members if not frozen[i])
            if denom <= _EPS:
                continue
            level = (capacity[link] - used[link]) / denom
            if level < best_level:
                best_level, best_link, best_group = level, link, -1
        for i in range(count):
            if not frozen[i] and private[i] < best_level:
                best_level, best_link, best_group = private[i], -1, i
        if best_link < 0 and best_group < 0:
            break
        best_level = max(best_level, 0.0)
        freeze = [best_group] if best_group >= 0 else [i for i, _load in shared[best_link] if not frozen[i]]
        for i in freeze:
            frozen[i] = True
            rates[i] = best_level
            left -= 1
            for link, load in zip(patterns[i].links, patterns[i].loads):
                if link in used:
                    used[link] += load * best_level
    return rates
