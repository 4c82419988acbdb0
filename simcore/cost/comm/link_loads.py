"""Collective algorithms as link loads: which links each algorithm's hops cross, and how many bytes per byte of
the buffer S (simcore/cost/comm/collectives.py turns them into flow patterns and chooses among them).

- ring: NCCL's rings; across NVLink domains one ring per channel, channel c rotating each domain's members by c
  so that every channel leaves a domain through a different GPU and NIC (NCCL builds one channel per NIC): as many
  channels as the domain has NICs (every node's, where a domain joins nodes: ClusterSpec.domain_nics) and the
  group has members there, at most NCCL's MAX_RINGS.
- tree: NCCL's double binary tree between domains (each tree carries half the buffer up and down) with a chain
  inside each domain, one per channel.
- NVLS: NVLink SHARP inside each domain (the switch reduces and multicasts) and, across domains, each local
  rank's share of the buffer over a double binary tree between the domains (NCCL's NVLS tree).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence

from simcore.cost.comm.groups import GroupCopies
from simcore.cost.comm.nccl_tuning import MAX_RINGS, Collective
from simcore.cost.comm.patterns import FlowPattern, keep_links
from simcore.cost.comm.translation import Counted, Run, block_of, counted_pattern
from simcore.cost.parameters import COLLECTIVE_LAUNCH_S, COLLECTIVE_STEP_OVERHEAD_S
from topology.cluster_spec import LEAF_DOWN_PORTS
from topology.graph import Cluster
from topology.links import PerLink
from topology.routing import Router


class LinkLoads:
    """Accumulates link loads (bytes per byte of S) and the worst per-step latency. The hops are recorded (runs of
    equally spaced hops, `run`) and added up link by link, in the order they came, when the loads are first read;
    `kept` counts a symmetric pattern per translation class instead (simcore/cost/comm/translation.py)."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.cluster = router.cluster
        self.runs: list[Run] = []  # (src, dst, step, count, weight); src -1: weight added to link `dst`
        self._loads: dict[int, float] | None = None
        self._latency = 0.0
        # Single hops of one weight join the run of hops with the same offset dst - src that they continue (the
        # tied embedding's rings of two, one per replica and tensor rank). Only while every hop so far has that
        # weight: a link's load is then the same float whatever the order of its hops.
        self._joinable: dict[int, int] | None = {}  # dst - src -> index of the last run with that offset
        self._block = LEAF_DOWN_PORTS * self.cluster.spec.gpus_per_node  # a joined step divides it

    def hop(self, src: int, dst: int, bytes_per_unit: float) -> None:
        if src == dst or bytes_per_unit <= 0:
            return
        self._append(src, dst, 0, 1, bytes_per_unit)

    def run(self, src: int, dst: int, step: int, count: int, bytes_per_unit: float) -> None:
        """`count` hops at once: src + i * step -> dst + i * step."""
        if src == dst or bytes_per_unit <= 0 or count <= 0:
            return
        self._append(src, dst, step, count, bytes_per_unit)

    def pair_runs(self, a: int, b: int, step: int, count: int, bytes_per_unit: float) -> bool:
        """Hops a + i * step -> b + i * step, then back, for i < count, as that many hop() pairs would add them
        to these loads while they are empty: the two runs the hops join into. False (nothing added) where the
        hops would not join so (loads not empty, fewer than two pairs, a step that does not divide the block)."""
        if self.runs or count < 2 or a == b or bytes_per_unit <= 0 or not step or self._block % abs(step):
            return False
        self.runs.extend(((a, b, step, count, bytes_per_unit), (b, a, step, count, bytes_per_unit)))
        self._joinable = {b - a: 0, a - b: 1}
        self._loads = None
        return True

    def add(self, link: int, bytes_per_unit: float) -> None:
        """Load one link directly (NVLink SHARP's switch traffic)."""
        self._joinable = None
        self.runs.append((-1, link, 0, 1, bytes_per_unit))
        self._loads = None

    def _append(self, src: int, dst: int, step: int, count: int, w: float) -> None:
        self._loads = None
        runs, joinable = self.runs, self._joinable
        if joinable is not None and runs and w != runs[0][4]:
            joinable = self._joinable = None
        if joinable is not None and count == 1:
            found = joinable.get(dst - src)
            if found is not None:
                first, last_dst, last_step, last_count, _w = runs[found]
                gap = src - first
                if last_count == 1 and gap and self._block % abs(gap) == 0:
                    runs[found] = (first, last_dst, gap, 2, w)
                    return
                if last_count > 1 and gap == last_step * last_count:
                    runs[found] = (first, last_dst, last_step, last_count + 1, w)
                    return
            joinable[dst - src] = len(runs)
        runs.append((src, dst, step, count, w))

    @property
    def loads(self) -> dict[int, float]:
        if self._loads is None:
            loads: dict[int, float] = defaultdict(float)
            worst = 0.0
            route = self.router.route_and_latency
            for src, dst, step, count, w in self.runs:
                if src < 0:
                    loads[dst] += w
                    continue
                for i in range(count):
                    path, latency = route(src + i * step, dst + i * step)
                    for link in path:
                        loads[link] += w
                    if latency > worst:
                        worst = latency
            self._loads, self._latency = loads, worst
        return self._loads

    @property
    def hop_latency(self) -> float:
        """The worst hop's latency (seconds)."""
        _ = self.loads
        return self._latency

    def pattern(self, latency_of: Callable[[float], float]) -> FlowPattern:
        """Every loaded link, in id order; the latency latency_of(the worst hop latency)."""
        links = tuple(sorted(self.loads))
        return FlowPattern(links, tuple(self.loads[link] for link in links), latency_of(self.hop_latency))

    def kept(self, primary: set[int], capacity: PerLink, extra: int, latency_of: Callable[[float], float],
             memo: dict[tuple[object, ...], Counted] | None = None) -> FlowPattern:
        """keep_links of the pattern (its latency latency_of(the worst hop latency)), counted per translation
        class where the pattern allows it (simcore/cost/comm/translation.py; `memo` keeps the counts of patterns
        that others repeat whole blocks away), else added up hop by hop."""
        block = block_of(self.router, self.runs)
        if block is not None:
            return counted_pattern(self.router, self.runs, block, primary, capacity, extra, latency_of, memo)
        return keep_links(self.pattern(latency_of), primary, capacity, extra)


Phase = tuple[LinkLoads, Callable[[float], float]]  # a phase's loads and its latency from the worst hop's


def step_latency(steps: int) -> Callable[[float], float]:
    """A collective phase's latency: a launch plus, per step, the worst hop's latency and a software overhead."""
    return lambda worst: COLLECTIVE_LAUNCH_S + steps * (worst + COLLECTIVE_STEP_OVERHEAD_S)


def worst_hop(worst: float) -> float:
    """A message's latency: its slowest path's."""
    return worst


def no_latency(_worst: float) -> float:
    return 0.0


def by_domain(cluster: Cluster, gpus: Sequence[int]) -> list[list[int]]:
    """The GPUs of `gpus` by NVLink domain, in order of first appearance."""
    # Grouped by NVLink domain (the node unless nvlink_domain_gpus joins nodes): NCCL treats a multi-node
    # NVLink domain as one node for its rings and trees.
    nodes: dict[int, list[int]] = {}
    for gpu in gpus:
        nodes.setdefault(cluster.domain_of(gpu), []).append(gpu)
    return list(nodes.values())


def ring_loads(acc: LinkLoads, gpus: Sequence[int], coef: float) -> int:
    """Add ring hops for one group (coef = bytes each hop moves per byte of S); return the ring size."""
    n = len(gpus)
    if n < 2:
        return n
    step = gpus[1] - gpus[0]
    if step >= acc.cluster.spec.domain_gpus and tuple(gpus) == tuple(range(gpus[0], gpus[0] + n * step, step)):
        # equally spaced, one GPU per domain (a data-parallel group, say): one channel, the ring in group order
        acc.run(gpus[0], gpus[1], step, n - 1, coef)
        acc.hop(gpus[-1], gpus[0], coef)
        return n
    nodes = by_domain(acc.cluster, gpus)
    channels = 1 if len(nodes) == 1 else max(1, min(acc.cluster.spec.domain_nics, max(map(len, nodes)), MAX_RINGS))
    for c in range(channels):
        order = [g for members in nodes for g in members[c % len(members):] + members[: c % len(members)]]
        for i in range(n):
            acc.hop(order[i], order[(i + 1) % n], coef / channels)
    return n


def ring_copies(acc: LinkLoads, groups: Sequence[Sequence[int]], coef: float) -> None:
    """ring_loads(acc, group, coef) for every group of `groups` in order (the same hops, the same runs). Copies of
    one group of one GPU per domain, equally spaced (a GroupCopies: every tensor rank's data-parallel group, the
    tied embedding's pair in every replica) are checked once, not copy by copy; a ring of two in every copy is
    added as the two runs its hops join into."""
    if not isinstance(groups, GroupCopies) or len(groups) < 2:
        for group in groups:
            ring_loads(acc, group, coef)
        return
    base, offsets = groups.base, groups.offsets
    n = len(base)
    if n < 2:
        return
    step = base[1] - base[0]
    if step < acc.cluster.spec.domain_gpus or base != tuple(range(base[0], base[0] + n * step, step)):
        for group in groups:
            ring_loads(acc, group, coef)
        return
    if n == 2 and acc.pair_runs(base[0], base[1], offsets.step, len(offsets), coef):
        return
    first, second, last = base[0], base[1], base[-1]
    for offset in offsets:  # (ring_loads's equally spaced case, copy by copy)
        acc.run(first + offset, second + offset, step, n - 1, coef)
        acc.hop(last + offset, first + offset, coef)


def tree_loads(acc: LinkLoads, gpus: Sequence[int]) -> int:
    """Double binary tree between nodes plus a chain in each node; returns the latency steps."""
    nodes = by_domain(acc.cluster, gpus)
    channels = max(1, min(acc.cluster.spec.domain_nics, max(map(len, nodes)), MAX_RINGS))
    for c in range(channels):
        leaders = []
        for members in nodes:
            chain = members[c % len(members):] + members[: c % len(members)]
            leaders.append(chain[0])
            for a, b in zip(chain, chain[1:]):  # reduce toward the leader, broadcast back
                acc.hop(b, a, 1.0 / channels)
                acc.hop(a, b, 1.0 / channels)
        for tree in (leaders, leaders[::-1]):
            for i in range(1, len(tree)):
                parent = tree[(i - 1) // 2]
                acc.hop(tree[i], parent, 0.5 / channels)
                acc.hop(parent, tree[i], 0.5 / channels)
    longest_chain = max(map(len, nodes))
    return 2 * (longest_chain - 1 + math.ceil(math.log2(max(len(nodes), 2))))


def nvls_loads(acc: LinkLoads, gpus: Sequence[int], kind: Collective) -> None:
    """NVLS inside each domain (loads per byte of S, module docstring) and, across domains, each local
    rank's share over a double binary tree between the domains."""
    cluster = acc.cluster
    nodes = by_domain(cluster, gpus)
    for members in nodes:
        n = len(members)
        up, down = {Collective.ALL_REDUCE: (1 + 1 / n, 1 + 1 / n), Collective.REDUCE_SCATTER: (1.0, 1 / n),
                    Collective.ALL_GATHER: (1 / n, 1.0)}[kind]
        switch = ("nvswitch", cluster.domain_of(members[0]))
        for gpu in members:
            acc.add(cluster.link(("gpu", gpu), switch), up)
            acc.add(cluster.link(switch, ("gpu", gpu)), down)
    if len(nodes) > 1:
        ppn = max(map(len, nodes))
        for j in range(ppn):
            heads = [members[j] for members in nodes if j < len(members)]
            for tree in (heads, heads[::-1]):
                for i in range(1, len(tree)):
                    parent = tree[(i - 1) // 2]
                    acc.hop(tree[i], parent, 0.5 / ppn)
                    acc.hop(parent, tree[i], 0.5 / ppn)
