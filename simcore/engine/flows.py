"""Bandwidth sharing on the cluster's links: fluid flows with max-min fair rates, driven by the engine's clock.

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

from collections import Counter
from collections.abc import Callable, Sequence
from itertools import chain
from operator import attrgetter, itemgetter

from simcore.cost.comm.patterns import FlowPattern
from simcore.engine.clock import Clock
from topology.links import PerLink

# A shared link whose unfrozen groups load it less than this (bytes per unit of progress) constrains nothing:
# it guards the division in water_fill, far below any real load (a byte per byte of S over a few channels).
_NO_LOAD = 1e-12


class _Group:
    __slots__ = ("seq", "pattern", "pid", "meets", "remaining", "rate", "stamp", "generation", "on_done")

    def __init__(self, seq: int, pattern: FlowPattern, pid: int, meets: dict[int, int], size: float, now: float,
                 on_done: Callable[[], None]) -> None:
        self.seq = seq
        self.pattern = pattern
        self.pid = pid  # the network's number for the pattern
        self.meets = meets  # the pattern's row of FlowNetwork._meets
        self.remaining = size
        self.rate = 0.0
        self.stamp = now
        self.generation = 0
        self.on_done = on_done


_SEQ = attrgetter("seq")


_FIRST_TWO = itemgetter(0, 1)


class FlowNetwork:
    """Active flow groups on links with the given capacities (bytes/s, already derated for protocol efficiency).

    Which groups share links is worked out pattern by pattern, not link by link: callers reuse a few pattern
    objects (a pipeline send, a collective phase) for thousands of transfers. The network numbers each pattern
    the first time it sees one and records, for every pattern it meets (loads a common link), the index of its
    first link the other one loads too; the groups in flight are kept by pattern number. Finding who shares
    links with a group then walks the few patterns its pattern meets, not its links. Rates depend only on the
    patterns of a component, never on sizes or times, so a pattern's rate when alone and the max-min rates of a
    component (by its patterns, in admission order) are memoised too. All of this gives exactly what a walk over
    the links gives: the same groups, in the same order."""

    def __init__(self, clock: Clock, capacity: PerLink) -> None:
        self.clock = clock
        self.capacity = capacity
        self._admitted = 0
        self._in_flight: dict[int, list[_Group]] = {}  # pattern number -> its groups in flight, in admission order
        # Per pattern number: the pattern (kept, so that its id() is never recycled), the patterns it meets (number
        # -> index of its first link that the other loads too; itself included, at 0), whether it loads a link
        # twice (so shares it with itself), and its rate when alone.
        self._pids: dict[int, int] = {}  # id(pattern) -> its number
        self._patterns: list[FlowPattern] = []
        self._meets: list[dict[int, int]] = []
        self._self_shared: list[bool] = []
        self._isolated: list[float] = []
        self._on_link: dict[int, list[int]] = {}  # link -> numbers of the patterns that load it
        self._shared: dict[tuple[int, ...], list[float]] = {}  # pattern numbers in admission order -> rates

    def in_flight(self) -> int:
        """How many flow groups are on the links now."""
        return sum(len(groups) for groups in self._in_flight.values())

    def start(self, pattern: FlowPattern, size_units: float, on_done: Callable[[], None]) -> None:
        """Start a group after its latency (s); `on_done()` is called when its last byte arrives."""
        if pattern.latency_s > 0:
            self.clock.call_in(pattern.latency_s, self._admit, pattern, size_units, on_done)
            self.clock.events += 1
        else:
            self._admit(pattern, size_units, on_done)

    def _number(self, pattern: FlowPattern) -> int:
        pid = len(self._patterns)
        self._pids[id(pattern)] = pid
        links = pattern.links
        meets: dict[int, int] = {pid: 0}
        for index, link in enumerate(links):
            for other in self._on_link.get(link, ()):
                if other not in meets:
                    meets[other] = index
        mine = set(links)
        for other in meets:
            if other != pid:
                theirs = self._patterns[other].links
                self._meets[other][pid] = next(i for i, link in enumerate(theirs) if link in mine)
        for link in mine:
            self._on_link.setdefault(link, []).append(pid)
        self._patterns.append(pattern)
        self._meets.append(meets)
        self._self_shared.append(len(mine) < len(links))
        self._isolated.append(pattern.isolated_rate(self.capacity))
        return pid

    def _admit(self, pattern: FlowPattern, size: float, on_done: Callable[[], None]) -> None:
        if size <= 0 or not pattern.links:
            on_done()
            return
        pid = self._pids.get(id(pattern))
        if pid is None:
            pid = self._number(pattern)
        self._admitted += 1
        group = _Group(self._admitted, pattern, pid, self._meets[pid], size, self.clock.now, on_done)
        in_flight = self._in_flight
        shared = self._self_shared[pid] or not group.meets.keys().isdisjoint(in_flight.keys())
        groups = in_flight.get(pid)
        if groups is None:
            in_flight[pid] = [group]
        else:
            groups.append(group)
        if shared:
            self._rebalance(group)
        else:  # alone on its links: `_schedule`, inline (a call per transfer)
            group.rate = rate = self._isolated[pid]
            group.generation = 1
            self.clock.call_in(size / rate, self._finish, group, 1)
            self.clock.events += 1

    def _component(self, seed: _Group) -> list[_Group]:
        """The groups in flight that share links with `seed`, transitively, in admission order."""
        in_flight = self._in_flight
        found = [seed]
        seen = {seed}
        for group in found:  # the list grows as the search goes (in any order: it is sorted at the end)
            for pid in group.meets.keys() & in_flight.keys():
                for other in in_flight[pid]:
                    if other not in seen:
                        seen.add(other)
                        found.append(other)
        if len(found) > 1:
            found.sort(key=_SEQ)
        return found

    def _rates(self, groups: list[_Group]) -> list[float]:
        key = tuple([group.pid for group in groups])
        rates = self._shared.get(key)
        if rates is None:
            rates = self._shared[key] = water_fill([group.pattern for group in groups], self.capacity)
        return rates

    def _rebalance(self, seed: _Group) -> list[_Group]:
        now = self.clock.now
        groups = self._component(seed)
        for group in groups:  # settle progress at the old rates
            group.remaining -= group.rate * (now - group.stamp)
            group.stamp = now
        for group, rate in zip(groups, self._rates(groups)):
            if rate != group.rate or group is seed:
                group.rate = rate
                self._schedule(group)
        return groups

    def _schedule(self, group: _Group) -> None:
        group.generation += 1
        self.clock.call_in(max(group.remaining, 0.0) / group.rate, self._finish, group, group.generation)
        self.clock.events += 1

    def _finish(self, group: _Group, generation: int) -> None:
        if generation != group.generation:
            return  # rescheduled since
        in_flight = self._in_flight
        groups = in_flight[group.pid]
        if len(groups) == 1:
            del in_flight[group.pid]
        else:
            groups.remove(group)
        group.remaining = 0.0
        if in_flight:
            # The groups left that share a link with this one, in the order a walk over its links meets them: by
            # the place of the first shared link in its pattern, then by admission. Each component is rebalanced
            # once, from its first member in that order.
            meets = group.meets
            if len(meets) == 1:  # a pattern that meets no other: only its own groups can share its links
                met = [(0, other.seq, other) for other in in_flight.get(group.pid, ())]
            else:
                met = [(meets[pid], other.seq, other)
                       for pid in meets.keys() & in_flight.keys() for other in in_flight[pid]]
            if met:
                if len(met) > 1:
                    met.sort(key=_FIRST_TWO)
                seen: set[_Group] = set()
                for _index, _seq, other in met:
                    if other not in seen:
                        seen.update(self._rebalance(other))
        group.on_done()


def water_fill(patterns: Sequence[FlowPattern], capacity: PerLink) -> list[float]:
    """Max-min fair rates (units/s) by progressive filling: raise every unfrozen group's rate together until a
    link saturates, freeze the groups on it, repeat. A link only one group uses constrains only that group, so
    each group's private links reduce to one cap (the tightest), and the loop walks the shared links alone.

    Each shared link's level (the rate at which it would saturate) is kept between rounds and recomputed, by the
    same sums, only for the links of the groups just frozen: the others' sums have not changed."""
    count = len(patterns)
    rates = [0.0] * count
    frozen = [False] * count
    uses = Counter(chain.from_iterable(pattern.links for pattern in patterns))
    inf = float("inf")
    private = [inf] * count
    members: dict[int, list[tuple[int, float]]] = {}  # shared link -> (group, load), links in order of first use
    place: dict[int, int] = {}  # shared link -> its index in that order
    on_shared: list[list[tuple[int, float]]] = [[] for _ in range(count)]  # group -> (shared link index, load)
    for i, pattern in enumerate(patterns):
        cap = inf
        mine = on_shared[i]
        for link, load in zip(pattern.links, pattern.loads):
            if uses[link] == 1:
                ratio = capacity[link] / load
                if ratio < cap:
                    cap = ratio
            else:
                found = members.get(link)
                if found is None:
                    place[link] = len(members)
                    members[link] = [(i, load)]
                else:
                    found.append((i, load))
                mine.append((place[link], load))
        private[i] = cap
    shared = list(members.items())
    used = [0.0] * len(shared)

    def level(k: int) -> float:  # inf stands for a link with no unfrozen group left (it constrains nothing)
        link, on_link = shared[k]
        denom = sum([load for i, load in on_link if not frozen[i]])
        return (capacity[link] - used[k]) / denom if denom > _NO_LOAD else inf

    levels = [level(k) for k in range(len(shared))]
    left = count
    while left:
        # The lowest level, the first link to reach it; a private cap only if strictly lower (the first such).
        best_level = min(levels, default=inf)
        best_link = levels.index(best_level) if best_level < inf else -1
        best_group = -1
        for i in range(count):
            if not frozen[i] and private[i] < best_level:
                best_level, best_group = private[i], i
        if best_group >= 0:
            best_link = -1
        elif best_link < 0:
            break
        best_level = max(best_level, 0.0)
        freeze = [best_group] if best_group >= 0 else [i for i, _load in shared[best_link][1] if not frozen[i]]
        touched = set()
        for i in freeze:
            frozen[i] = True
            rates[i] = best_level
            left -= 1
            for k, load in on_shared[i]:
                used[k] += load * best_level
                touched.add(k)
        for k in touched:
            levels[k] = level(k)
    return rates
