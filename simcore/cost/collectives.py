"""Collective algorithms as flow patterns over the real paths of the cluster graph.

A collective on a buffer of S bytes runs as one or more phases; each phase is a FlowPattern whose unit of
progress is one byte of S, so a phase lasts latency + S / rate. Within a phase every hop of the algorithm runs at
once, as NCCL pipelines its chunks: the time is set by the most loaded link, which is what the bus bandwidth of
nccl-tests measures.

- ring: NCCL's rings. A group inside one node forms one ring; a group spanning nodes forms one ring per channel,
  channel c rotating each node's members by c so that every channel leaves a node through a different GPU and
  NIC (NCCL builds one channel per NIC). All-reduce moves 2(n-1)/n S over every hop, reduce-scatter and
  all-gather (n-1)/n S; 2(n-1) or n-1 steps of latency.
- tree: NCCL's double binary tree between nodes (each tree carries half the buffer up and down) with a chain
  inside each node; all-reduce only (reduce-scatter and all-gather use rings, as in NCCL).
- hierarchical: reduce-scatter inside each node, all-reduce across nodes among the GPUs of equal local rank,
  all-gather inside each node: three phases one after the other.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from enum import StrEnum

from simcore.cost.parameters import COLLECTIVE_LAUNCH_S, COLLECTIVE_STEP_OVERHEAD_S, LINK_EFFICIENCY
from simcore.cost.patterns import COLLECTIVE_KEPT_LINKS, MIRROR_KEPT_LINKS, FlowPattern, keep_links
from simcore.domain.layout import CollectiveAlgorithm
from simcore.domain.placement import Placement
from topology.graph import Cluster
from topology.routing import Router


class Collective(StrEnum):
    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"


def ring_factor(kind: Collective, n: int) -> float:
    """Bytes each of n ranks sends (and receives) per byte of the buffer in a ring: 2(n-1)/n for all-reduce (a
    reduce-scatter, then an all-gather), (n-1)/n for either half alone (Patarasuk and Yuan 2009; nccl-tests'
    bus-bandwidth factor)."""
    return 2 * (n - 1) / n if kind is Collective.ALL_REDUCE else (n - 1) / n


def nccl_bandwidth(line_rate_bytes_per_s: float, link_kind: str) -> float:
    """The bandwidth (bytes/s) NCCL's bulk protocol achieves on a link of this kind and line rate."""
    return line_rate_bytes_per_s * LINK_EFFICIENCY[link_kind]


def effective_capacity(cluster: Cluster) -> list[float]:
    """Per-link bandwidth (bytes/s) that NCCL's protocol achieves: line rate times the link kind's efficiency."""
    return [nccl_bandwidth(bw, kind) for bw, kind in zip(cluster.link_bandwidth_bytes_per_s, cluster.link_kind)]


class _Loads:
    """Accumulates link loads (bytes per byte of S) and the worst per-step latency."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.loads: dict[int, float] = defaultdict(float)
        self.hop_latency = 0.0

    def hop(self, src: int, dst: int, bytes_per_unit: float) -> None:
        if src == dst or bytes_per_unit <= 0:
            return
        path = self.router.route(src, dst)
        latency = 0.0
        for link in path:
            self.loads[link] += bytes_per_unit
            latency += self.router.cluster.link_latency_s[link]
        self.hop_latency = max(self.hop_latency, latency)

    def pattern(self, steps: int) -> FlowPattern:
        links = tuple(sorted(self.loads))
        latency = COLLECTIVE_LAUNCH_S + steps * (self.hop_latency + COLLECTIVE_STEP_OVERHEAD_S)
        return FlowPattern(links, tuple(self.loads[link] for link in links), latency)


class CollectiveModel:
    """Builds collective phases for groups of GPUs of one cluster, with one algorithm for all-reduce."""

    def __init__(self, cluster: Cluster, router: Router, algorithm: CollectiveAlgorithm) -> None:
        self.cluster = cluster
        self.router = router
        self.algorithm = algorithm
        self.capacity = effective_capacity(cluster)
        self._links_of_node: dict[int, set[int]] = {}
        self._phase_cache: dict[tuple[Collective, tuple[tuple[int, ...], ...]], tuple[FlowPattern, ...]] = {}
        self._dp_phases: dict[tuple[Collective, Placement, int], tuple[FlowPattern, ...]] = {}
        self._sends: dict[tuple[Placement, int, int, tuple[int, ...]], FlowPattern] = {}

    def _by_node(self, gpus: Sequence[int]) -> list[list[int]]:
        # Grouped by NVLink domain (the node unless nvlink_domain_gpus joins nodes): NCCL treats a multi-node
        # NVLink domain as one node for its rings and trees.
        nodes: dict[int, list[int]] = {}
        for gpu in gpus:
            nodes.setdefault(self.cluster.domain_of(gpu), []).append(gpu)
        return list(nodes.values())

    def _ring(self, acc: _Loads, gpus: Sequence[int], coef: float) -> int:
        """Add ring hops for one group (coef = bytes each hop moves per byte of S); return the ring size."""
        n = len(gpus)
        if n < 2:
            return n
        nodes = self._by_node(gpus)
        channels = 1 if len(nodes) == 1 else max(1, min(self.cluster.spec.nics_per_node, max(map(len, nodes))))
        for c in range(channels):
            order = [g for members in nodes for g in members[c % len(members):] + members[: c % len(members)]]
            for i in range(n):
                acc.hop(order[i], order[(i + 1) % n], coef / channels)
        return n

    def _tree(self, acc: _Loads, gpus: Sequence[int]) -> int:
        """Double binary tree between nodes plus a chain in each node; returns the latency steps."""
        nodes = self._by_node(gpus)
        channels = max(1, min(self.cluster.spec.nics_per_node, max(map(len, nodes))))
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

    def phases(self, kind: Collective, groups: Sequence[Sequence[int]]) -> tuple[FlowPattern, ...]:
        """Phases of `kind` run at once by every group in `groups` (the first is the one simulated; the others are
        concurrent copies whose traffic shares the same links).

        Each phase keeps the links of the first GPU's node and the COLLECTIVE_KEPT_LINKS most loaded links of the
        whole pattern (patterns.keep_links): that sets the same rate, keeps the contention the simulated rank's own
        flows see, and keeps a collective over thousands of GPUs cheap to reschedule."""
        key = (kind, tuple(tuple(group) for group in groups))
        phases = self._phase_cache.get(key)
        if phases is None:
            phases = self._phase_cache[key] = tuple(
                keep_links(p, self._node_links(groups[0][0]), self.capacity, COLLECTIVE_KEPT_LINKS)
                for p in self._all_phases(kind, groups))
        return phases

    def _node_links(self, gpu: int) -> set[int]:
        """Links that touch the NVLink domain (the node) of `gpu`: its GPUs, switch and NICs."""
        if not self._links_of_node:  # every domain's at once: one walk over the links
            spec = self.cluster.spec
            domain = spec.domain_gpus

            def domain_of(kind: str, index: int) -> int | None:
                if kind == "gpu":
                    return index // domain
                if kind == "nic":
                    return index // spec.nics_per_node * spec.gpus_per_node // domain
                return index if kind == "nvswitch" else None

            for i, ends in enumerate(self.cluster.link_ends):
                for kind, index, *_rest in ends:
                    owner = domain_of(kind, index)
                    if owner is not None:
                        self._links_of_node.setdefault(owner, set()).add(i)
        return self._links_of_node.get(self.cluster.domain_of(gpu), set())

    def _all_phases(self, kind: Collective, groups: Sequence[Sequence[int]]) -> tuple[FlowPattern, ...]:
        n = len(groups[0])
        if n < 2:
            return ()
        if kind is not Collective.ALL_REDUCE or self.algorithm is CollectiveAlgorithm.RING:
            coef = ring_factor(kind, n)
            acc = _Loads(self.router)
            for group in groups:
                self._ring(acc, group, coef)
            return (acc.pattern(2 * (n - 1) if kind is Collective.ALL_REDUCE else n - 1),)
        if self.algorithm is CollectiveAlgorithm.TREE:
            if len(self._by_node(groups[0])) == 1:
                return CollectiveModel(self.cluster, self.router, CollectiveAlgorithm.RING)._all_phases(kind, groups)
            acc = _Loads(self.router)
            steps = 0
            for group in groups:
                steps = self._tree(acc, group)
            return (acc.pattern(steps),)
        nodes = self._by_node(groups[0])
        if len(nodes) == 1 or len({len(members) for members in nodes}) > 1:
            # inside one node, or nodes holding unequal shares of the group: NCCL's rings do it
            return CollectiveModel(self.cluster, self.router, CollectiveAlgorithm.RING)._all_phases(kind, groups)
        return self._hierarchical(groups)

    def _hierarchical(self, groups: Sequence[Sequence[int]]) -> tuple[FlowPattern, ...]:
        local = _Loads(self.router)
        cross = _Loads(self.router)
        g = n_nodes = 1
        for group in groups:
            nodes = self._by_node(group)
            g, n_nodes = max(map(len, nodes)), len(nodes)
            for members in nodes:
                self._ring(local, members, (len(members) - 1) / len(members))
            for j in range(g):
                column = [members[j] for members in nodes if j < len(members)]
                if len(column) > 1:
                    self._ring(cross, column, 2 * (len(column) - 1) / len(column) / g)
        phases = []
        if g > 1:
            phases.append(local.pattern(g - 1))
        if n_nodes > 1:
            phases.append(cross.pattern(2 * (n_nodes - 1)))
        if g > 1:
            phases.append(local.pattern(g - 1))
        return tuple(phases)

    def p2p(self, pairs: Sequence[tuple[int, int]], mirrors: bool = False) -> FlowPattern:
        """A message sent at once by every (src, dst) pair; one unit = one byte of each message. With `mirrors`,
        the pairs after the first are symmetric copies of it and only the first pair's path and the
        MIRROR_KEPT_LINKS most loaded links are kept (see patterns.keep_links)."""
        acc = _Loads(self.router)
        for src, dst in pairs:
            acc.hop(src, dst, 1.0)
        links = tuple(sorted(acc.loads))
        pattern = FlowPattern(links, tuple(acc.loads[link] for link in links), acc.hop_latency)
        if mirrors and pairs:
            pattern = keep_links(pattern, set(self.router.route(*pairs[0])), self.capacity, MIRROR_KEPT_LINKS)
        return pattern

    def data_parallel_phases(self, kind: Collective, placement: Placement, pp_rank: int) -> tuple[FlowPattern, ...]:
        """`phases` of the data-parallel groups of pipeline rank `pp_rank` (one per tensor rank), cached by
        placement: the simulations of a search ask for the same ones for many layouts, and the flow network
        recognises a pattern it has seen by the object."""
        key = (kind, placement, pp_rank)
        found = self._dp_phases.get(key)
        if found is None:
            groups = [placement.dp_group(t, pp_rank) for t in range(placement.tp)]
            found = self._dp_phases[key] = self.phases(kind, groups)
        return found

    def pipeline_send(self, placement: Placement, src_rank: int, dst_rank: int,
                      replicas: Sequence[int]) -> FlowPattern:
        """`p2p` of the message every tensor rank of each data-parallel replica in `replicas` sends at once from
        pipeline rank `src_rank` to `dst_rank` (the replicas after the first as its mirrors); cached by placement,
        as `data_parallel_phases`."""
        key = (placement, src_rank, dst_rank, tuple(replicas))
        found = self._sends.get(key)
        if found is None:
            pairs = [(placement.gpu(d, t, src_rank, c), placement.gpu(d, t, dst_rank, c))
                     for d in replicas for c in range(placement.cp) for t in range(placement.tp)]
            found = self._sends[key] = self.p2p(pairs, mirrors=len(pairs) > placement.tp)
        return found

    def context_parallel_send(self, placement: Placement, pp_rank: int, replicas: Sequence[int]) -> FlowPattern:
        """`p2p` of one ring step of context parallelism on pipeline rank `pp_rank`: every context-parallel rank of
        each tensor rank and replica in `replicas` sends to the next rank of its ring at once (the first pair,
        replica replicas[0]'s tensor rank 0 from CP rank 0 to 1, is the simulated one; the rest its mirrors). A
        step lasts until its slowest hop has delivered: every rank waits for its own receive before the next
        step, so the ring moves at its slowest link's pace."""
        key = (placement, -1 - pp_rank, -1, tuple(replicas))
        found = self._sends.get(key)
        if found is None:
            cp = placement.cp
            pairs = [(placement.gpu(d, t, pp_rank, c), placement.gpu(d, t, pp_rank, (c + 1) % cp))
                     for d in replicas for t in range(placement.tp) for c in range(cp)]
            found = self._sends[key] = self.p2p(pairs, mirrors=len(pairs) > 1)
        return found

    def context_parallel_phases(self, kind: Collective, placement: Placement, pp_rank: int,
                                replicas: Sequence[int]) -> tuple[FlowPattern, ...]:
        """`phases` of a collective on the context-parallel groups of pipeline rank `pp_rank` (every tensor rank
        of each replica in `replicas` at once): all_gather's K/V gathers and dK/dV reduce-scatters."""
        groups = [placement.cp_group(d, t, pp_rank) for d in replicas for t in range(placement.tp)]
        return self.phases(kind, groups)

    def isolated_time(self, kind: Collective, groups: Sequence[Sequence[int]], size_bytes: float) -> float:
        """Seconds the collective takes when nothing else uses its links."""
        if size_bytes <= 0:
            return 0.0
        return sum(p.latency_s + size_bytes / p.isolated_rate(self.capacity) for p in self.phases(kind, groups))


def bus_bandwidth(kind: Collective, n: int, size_bytes: float, time_s: float) -> float:
    """nccl-tests' bus bandwidth (bytes/s): algbw = S/t times 2(n-1)/n for all-reduce, (n-1)/n otherwise."""
    return size_bytes / time_s * ring_factor(kind, n)
