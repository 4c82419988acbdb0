"""Collective algorithms as flow patterns over the real paths of the cluster graph.

A collective on a buffer of S bytes runs as one or more phases; each phase is a FlowPattern whose unit of
progress is one byte of S, so a phase lasts latency + S / rate. Within a phase every hop of the algorithm runs at
once, as NCCL pipelines its chunks: the time is set by the most loaded link, which is what the bus bandwidth of
nccl-tests measures.

The algorithms' link loads are simcore/cost/comm/link_loads.py's:
- ring: NCCL's rings; all-reduce moves 2(n-1)/n S over every hop, reduce-scatter and all-gather (n-1)/n S.
- tree: NCCL's double binary tree between nodes with a chain inside each node; all-reduce only (reduce-scatter
  and all-gather use rings, as in NCCL).
- hierarchical: reduce-scatter inside each node, all-reduce across nodes among the GPUs of equal local rank,
  all-gather inside each node: three phases one after the other.
The forced algorithms (`ring`, `tree`, `hierarchical`) run with NCCL's bulk protocol and a latency of a launch
plus, per step (2(n-1) or n-1 for the ring), the hops' latency and a software overhead.

- auto: NCCL's choice (simcore/cost/comm/nccl_tuning.py) of algorithm (ring, tree, NVLS inside an NVLink domain
  whose switch does NVLink SHARP, NVLS tree across domains) and protocol (LL, LL128, Simple) for each
  collective's size: one phase, the chosen algorithm's flow pattern with its link loads divided by the
  protocol's bandwidth factor, and NCCL's latency for the pair. NCCL chooses by its own model, in which the tree
  and the ring see the same graph bandwidth; the tree's flow pattern then runs on the real links, where across
  two nodes it moves half the ring's bytes through the NICs (collectives.json: "2-node runs default to trees
  and can show up to ~2x NIC BW in busbw").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from simcore.cost.comm.groups import GroupCopies, as_groups, data_parallel_groups
from simcore.cost.comm.link_loads import (
    LinkLoads,
    Phase,
    by_domain,
    no_latency,
    nvls_loads,
    ring_copies,
    ring_loads,
    step_latency,
    tree_loads,
)
from simcore.cost.comm.measured_collectives import MeasuredCollectives
from simcore.cost.comm.nccl_kernels import nvls_latency_s
from simcore.cost.comm.nccl_tuning import (
    Choice,
    Collective,
    Communicator,
    NcclAlgorithm,
    Protocol,
    algorithm_bandwidth,
    algorithms,
    channels,
    choose,
)
from simcore.cost.comm.patterns import COLLECTIVE_KEPT_LINKS, FlowPattern
from simcore.cost.comm.sends import PointToPoint
from simcore.cost.comm.symmetry import kept_phases
from simcore.cost.comm.translation import Counted
from simcore.cost.parameters import LINK_EFFICIENCY
from simcore.domain.layout import CollectiveAlgorithm
from simcore.domain.placement import Placement
from topology.graph import Cluster
from topology.links import LinkValues
from topology.routing import Router


def ring_factor(kind: Collective, n: int) -> float:
    """Bytes each of n ranks sends (and receives) per byte of the buffer in a ring: 2(n-1)/n for all-reduce (a
    reduce-scatter, then an all-gather), (n-1)/n for either half alone (Patarasuk and Yuan 2009; nccl-tests'
    bus-bandwidth factor)."""
    return 2 * (n - 1) / n if kind is Collective.ALL_REDUCE else (n - 1) / n


def nccl_bandwidth(line_rate_bytes_per_s: float, link_kind: str) -> float:
    """The bandwidth (bytes/s) NCCL's bulk protocol achieves on a link of this kind and line rate."""
    return line_rate_bytes_per_s * LINK_EFFICIENCY[link_kind]


def effective_capacity(cluster: Cluster) -> LinkValues:
    """Per-link bandwidth (bytes/s) that NCCL's protocol achieves: line rate times the link kind's efficiency
    (indexed by link id; each link's figure is computed when first read)."""
    def figure(link: int) -> float:
        kind, bw = cluster.index.kind_and_bandwidth(link)
        return nccl_bandwidth(bw, kind)

    return LinkValues(figure)


def algorithm_bus(kind: Collective, algorithm: NcclAlgorithm, ranks: int, algbw_bytes_per_s: float) -> float:
    """Bus bandwidth (NCCL's sense) of an algorithm that moves `algbw_bytes_per_s` of the buffer."""
    return algbw_bytes_per_s / algorithm_bandwidth(kind, algorithm, ranks, 1.0)


# GPU generations whose NVSwitch does NVLink SHARP (NVSwitch 3 and later: DGX H100/H200, B200, GB200 NVL72).
NVLS_GENERATIONS = ("hopper", "blackwell")


Groups = tuple[tuple[int, ...], ...] | GroupCopies


class CollectiveModel(PointToPoint):
    """Builds collective phases for groups of GPUs of one cluster, with one algorithm for all-reduce (or, with
    `auto`, NCCL's choice for each collective's size)."""

    def __init__(self, cluster: Cluster, router: Router, algorithm: CollectiveAlgorithm) -> None:
        self.cluster = cluster
        self.router = router
        self.algorithm = algorithm
        self.capacity = effective_capacity(cluster)
        self._links_of_node: dict[int, set[int]] = {}
        self._phase_cache: dict[tuple[Collective, Groups], tuple[FlowPattern, ...]] = {}
        self._dp_phases: dict[tuple[Collective, Placement, int, float | None], tuple[FlowPattern, ...]] = {}
        self._sends: dict[tuple[Placement, int, int, tuple[int, ...]], FlowPattern] = {}
        self.auto = algorithm is CollectiveAlgorithm.AUTO
        self._choices: dict[tuple[Collective, Groups, float], Choice | None] = {}
        self._bases: dict[tuple[Collective | float, Groups, NcclAlgorithm], FlowPattern] = {}
        self._counted: dict[tuple[object, ...], Counted] = {}  # patterns counted by class (translation.py)
        self._chosen: dict[tuple[Collective, Groups, NcclAlgorithm, Protocol, float, float], FlowPattern] = {}
        self._communicators: dict[tuple[int, ...], Communicator] = {}
        # The user's nccl-tests tables (cluster.measured, simcore/cost/comm/measured_collectives.py): the phases then
        # depend on the size whatever the algorithm.
        tables = cluster.spec.measured.collectives if cluster.spec.measured else ()
        self.measured = MeasuredCollectives(cluster, tables) if tables else None
        self.sized = self.auto or self.measured is not None
        self._measured_phases: dict[tuple[Collective, Groups, float], tuple[FlowPattern, ...]] = {}

    def start_run(self) -> None:
        """Forget what the user's tables priced for an earlier simulation on this model (their `used` record, and
        the patterns they scaled, cached above them), so that a simulation's uses of them, its extrapolation
        warnings, are its own."""
        if self.measured is not None:
            self.measured.used.clear()
            self._measured_phases.clear()
            self._dp_phases.clear()
            self._sends.clear()

    def cached_entries(self) -> int:
        """How many routes and patterns the model holds (what a long-lived network's memory grows with)."""
        caches: tuple[dict[Any, Any], ...] = (
            self._phase_cache, self._dp_phases, self._sends, self._choices, self._bases, self._counted, self._chosen,
            self._communicators, self._measured_phases)
        return self.router.routed + sum(len(cache) for cache in caches)

    def phases(self, kind: Collective, groups: Sequence[Sequence[int]],
               size_bytes: float | None = None) -> tuple[FlowPattern, ...]:
        """`model_phases`, with their loads and latencies scaled to the user's measured time where a measured
        table covers the collective (simcore/cost/comm/measured_collectives.py)."""
        found = self.model_phases(kind, groups, size_bytes)
        if self.measured is None or not found or not size_bytes or not self.measured.covers(kind):
            return found
        key = (kind, as_groups(groups), size_bytes)
        scaled = self._measured_phases.get(key)
        if scaled is None:
            factor = self.measured.factor(kind, key[1], size_bytes, lambda some, size: sum(
                p.latency_s + size / p.isolated_rate(self.capacity) for p in self.model_phases(kind, some, size)))
            scaled = self._measured_phases[key] = found if factor == 1.0 else tuple(
                FlowPattern(p.links, tuple(w * factor for w in p.loads), p.latency_s * factor) for p in found)
        return scaled

    def model_phases(self, kind: Collective, groups: Sequence[Sequence[int]],
                     size_bytes: float | None = None) -> tuple[FlowPattern, ...]:
        """Phases of `kind` on `size_bytes` run at once by every group in `groups` (the first is the one
        simulated; the others are concurrent copies whose traffic shares the same links). The size matters only
        to `auto`, which must be given it.

        Each phase keeps the links of the first GPU's node and the COLLECTIVE_KEPT_LINKS most loaded links of the
        whole pattern (patterns.keep_links): that sets the same rate, keeps the contention the simulated rank's own
        flows see, and keeps a collective over thousands of GPUs cheap to reschedule."""
        if self.auto:
            if size_bytes is None:
                raise ValueError("auto collectives need the size to choose an algorithm")
            return self._auto_phases(kind, as_groups(groups), size_bytes)
        key = (kind, as_groups(groups))
        phases = self._phase_cache.get(key)
        if phases is None:
            phases = self._phase_cache[key] = kept_phases(
                self.cluster, key[1], lambda some: self._all_phases(kind, some), self._node_links(groups[0][0]),
                self.capacity, COLLECTIVE_KEPT_LINKS, self._counted)
        return phases

    def _node_links(self, gpu: int) -> set[int]:
        """Links that touch the NVLink domain (the node) of `gpu`: its GPUs, switch and NICs."""
        domain = self.cluster.domain_of(gpu)
        found = self._links_of_node.get(domain)
        if found is None:
            found = self.cluster.index.domain_links(domain)
            self._links_of_node[domain] = found
        return found

    def _all_phases(self, kind: Collective, groups: Sequence[Sequence[int]]) -> tuple[Phase, ...]:
        n = len(groups[0])
        if n < 2:
            return ()
        if kind is not Collective.ALL_REDUCE or self.algorithm is CollectiveAlgorithm.RING:
            acc = LinkLoads(self.router)
            ring_copies(acc, groups, ring_factor(kind, n))
            return ((acc, step_latency(2 * (n - 1) if kind is Collective.ALL_REDUCE else n - 1)),)
        if self.algorithm is CollectiveAlgorithm.TREE:
            if len(by_domain(self.cluster, groups[0])) == 1:
                return CollectiveModel(self.cluster, self.router, CollectiveAlgorithm.RING)._all_phases(kind, groups)
            acc = LinkLoads(self.router)
            steps = 0
            for group in groups:
                steps = tree_loads(acc, group)
            return ((acc, step_latency(steps)),)
        nodes = by_domain(self.cluster, groups[0])
        if len(nodes) == 1 or len({len(members) for members in nodes}) > 1:
            # inside one node, or nodes holding unequal shares of the group: NCCL's rings do it
            return CollectiveModel(self.cluster, self.router, CollectiveAlgorithm.RING)._all_phases(kind, groups)
        return self._hierarchical(groups)

    def _hierarchical(self, groups: Sequence[Sequence[int]]) -> tuple[Phase, ...]:
        local = LinkLoads(self.router)
        cross = LinkLoads(self.router)
        g = n_nodes = 1
        for group in groups:
            nodes = by_domain(self.cluster, group)
            g, n_nodes = max(map(len, nodes)), len(nodes)
            for members in nodes:
                ring_loads(local, members, (len(members) - 1) / len(members))
            for j in range(g):
                column = [members[j] for members in nodes if j < len(members)]
                if len(column) > 1:
                    ring_loads(cross, column, 2 * (len(column) - 1) / len(column) / g)
        phases: list[Phase] = []
        if g > 1:
            phases.append((local, step_latency(g - 1)))
        if n_nodes > 1:
            phases.append((cross, step_latency(2 * (n_nodes - 1))))
        if g > 1:
            phases.append((local, step_latency(g - 1)))
        return tuple(phases)

    def data_parallel_phases(self, kind: Collective, placement: Placement, pp_rank: int,
                             size_bytes: float | None = None) -> tuple[FlowPattern, ...]:
        """`phases` of the data-parallel groups of pipeline rank `pp_rank` (one per tensor rank), cached by
        placement: the simulations of a search ask for the same ones for many layouts, and the flow network
        recognises a pattern it has seen by the object."""
        size = size_bytes if self.sized else None
        key = (kind, placement, pp_rank, size)
        found = self._dp_phases.get(key)
        if found is None:
            found = self._dp_phases[key] = self.phases(kind, data_parallel_groups(placement, pp_rank), size)
        return found

    def context_parallel_phases(self, kind: Collective, placement: Placement, pp_rank: int,
                                replicas: Sequence[int], size_bytes: float) -> tuple[FlowPattern, ...]:
        """`phases` of a collective of `size_bytes` on the context-parallel groups of pipeline rank `pp_rank` (every
        tensor rank of each replica in `replicas` at once): all_gather's K/V gathers and dK/dV reduce-scatters."""
        groups = [placement.cp_group(d, t, pp_rank) for d in replicas for t in range(placement.tp)]
        return self.phases(kind, groups, size_bytes)

    def isolated_time(self, kind: Collective, groups: Sequence[Sequence[int]], size_bytes: float) -> float:
        """Seconds the collective takes when nothing else uses its links."""
        if size_bytes <= 0:
            return 0.0
        return sum(p.latency_s + size_bytes / p.isolated_rate(self.capacity)
                   for p in self.phases(kind, groups, size_bytes))

    # -- auto: NCCL's choice --------------------------------------------------------------------------------
    def choice(self, kind: Collective, groups: Sequence[Sequence[int]], size_bytes: float) -> Choice | None:
        """NCCL's (algorithm, protocol) for `kind` on `size_bytes` over the first group (the others run beside
        it); None unless the model is `auto`, or for a group of one."""
        if not self.auto:
            return None
        return self._choice(kind, as_groups(groups), size_bytes)

    def communicator(self, group: Sequence[int]) -> Communicator:
        """What NCCL's tuning sees of `group` on this cluster (simcore/cost/comm/nccl_tuning.py)."""
        key = tuple(group)
        found = self._communicators.get(key)
        if found is not None:
            return found
        spec = self.cluster.spec
        # (a group over GPUs of several kinds, in a heterogeneous cluster: NCCL's ranks agree on one tuning; its
        # oldest GPU's, whose channels and protocols every rank can run)
        gpu = spec.hardware if not spec.node_groups else min(
            (spec.hardware_of(g) for g in group), key=lambda h: (h.peak_flops_per_s, h.kind))
        n = len(key)
        step = key[1] - key[0] if n > 1 else 0
        if step >= spec.domain_gpus and key == tuple(range(key[0], key[0] + n * step, step)):
            domains, most = n, 1  # equally spaced, one GPU per domain (a data-parallel group)
        else:
            nodes = by_domain(self.cluster, key)
            domains, most = len(nodes), max(map(len, nodes))
        nics = min(spec.domain_nics, most)  # (a multi-node NVLink domain's rings may use all its nodes' NICs)
        # (on a PCIe-only node NCCL's rings run over the GPUs' PCIe links, and there is no NVSwitch for NVLS)
        intra = gpu.nvlink_bandwidth_bytes_per_s if spec.has_nvlink else spec.nvlink_bandwidth_bytes_per_s
        found = self._communicators[key] = Communicator(
            ranks=n, nodes=domains, generation=gpu.generation,
            channels=channels(gpu.generation, domains, nics, intra),
            amd_host=gpu.generation == "ampere", nvls=gpu.generation in NVLS_GENERATIONS and spec.has_nvlink,
            pcie=not spec.has_nvlink)
        return found

    def _choice(self, kind: Collective, groups: Groups, size_bytes: float) -> Choice | None:
        key = (kind, groups, size_bytes)
        if key in self._choices:
            return self._choices[key]
        found = None
        if len(groups[0]) >= 2 and size_bytes > 0:
            comm = self.communicator(groups[0])
            # NCCL's graph bus bandwidth per algorithm: each pattern's alone on the links, as bus bandwidth; the
            # tree's is the ring's (NCCL's search gives both the same per-channel bandwidth).
            bus: dict[NcclAlgorithm, float] = {
                a: algorithm_bus(kind, a, comm.ranks, self._base(kind, groups, a).isolated_rate(self.capacity))
                for a in algorithms(kind, comm) if a is not NcclAlgorithm.TREE}
            if NcclAlgorithm.TREE in algorithms(kind, comm):
                bus[NcclAlgorithm.TREE] = bus[NcclAlgorithm.RING]
            found = choose(kind, size_bytes, comm, bus)
            if found.algorithm in (NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE):
                # NCCL chose by its flat estimate; the kernel runs a pipeline of chunks (nccl_kernels.py) over
                # the links at NVLink's bulk efficiency.
                rate = self._base(kind, groups, found.algorithm).isolated_rate(self.capacity)
                found = replace(found, latency_s=nvls_latency_s(kind, found.algorithm, comm, size_bytes, rate),
                                bandwidth_factor=1.0)
        self._choices[key] = found
        return found

    def _auto_phases(self, kind: Collective, groups: Groups, size_bytes: float) -> tuple[FlowPattern, ...]:
        choice = self._choice(kind, groups, size_bytes)
        if choice is None:
            return ()
        key = (kind, groups, choice.algorithm, choice.protocol, choice.latency_s, choice.bandwidth_factor)
        found = self._chosen.get(key)
        if found is None:
            base = self._base(kind, groups, choice.algorithm)
            scale = 1.0 / choice.bandwidth_factor
            found = self._chosen[key] = FlowPattern(base.links, tuple(w * scale for w in base.loads), choice.latency_s)
        return (found,)

    def _base(self, kind: Collective, groups: Groups, algorithm: NcclAlgorithm) -> FlowPattern:
        """The algorithm's link loads for the bulk protocol (no latency), trimmed as `phases` trims."""
        # (a ring's loads depend on the kind only through its factor: reduce-scatter and all-gather share them)
        key = (ring_factor(kind, len(groups[0])) if algorithm is NcclAlgorithm.RING else kind, groups, algorithm)
        found = self._bases.get(key)
        if found is None:
            def build(some: Groups) -> tuple[Phase, ...]:
                acc = LinkLoads(self.router)
                if algorithm is NcclAlgorithm.RING and isinstance(some, GroupCopies):  # (groups of one size)
                    ring_copies(acc, some, ring_factor(kind, len(some.base)))
                    return ((acc, no_latency),)
                for group in some:
                    if algorithm is NcclAlgorithm.RING:
                        ring_loads(acc, group, ring_factor(kind, len(group)))
                    elif algorithm is NcclAlgorithm.TREE:
                        tree_loads(acc, group)
                    else:
                        nvls_loads(acc, group, kind)
                return ((acc, no_latency),)

            found = self._bases[key] = kept_phases(self.cluster, groups, build, self._node_links(groups[0][0]),
                                                   self.capacity, COLLECTIVE_KEPT_LINKS, self._counted)[0]
        return found


def bus_bandwidth(kind: Collective, n: int, size_bytes: float, time_s: float) -> float:
    """nccl-tests' bus bandwidth (bytes/s): algbw = S/t times 2(n-1)/n for all-reduce, (n-1)/n otherwise."""
    return size_bytes / time_s * ring_factor(kind, n)
