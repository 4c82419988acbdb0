"""The built network of a cluster: its graph's routes, its collective model (with the patterns counted on it) and
the pipeline ranks' pass orders, and the process-wide cache that builds it once per cluster spec and collective
algorithm, as the graph itself is (topology/cluster_graph.py).

What a Network caches is a function of the cluster spec and the algorithm alone (routes, link capacities, the
kept links and loads of each collective's phases, the schedules' pass orders), so a simulation on a network
built for an earlier one gives the same results to the bit as on a new one (tests/simcore/test_network.py).
The exception is a cluster with the user's measured collective tables (`cluster.measured.collectives`): their
record of what priced what is per run (CollectiveModel.start_run), so such a cluster gets a network of its own
per simulation. A cached network whose caches have grown past NETWORK_ENTRIES_KEPT entries (a long search over
many layouts and sizes) is built again, so that a long-lived process's memory stays bounded.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from simcore.cost.comm.collectives import CollectiveModel
from simcore.cost.workload import Workload
from simcore.domain.layout import CollectiveAlgorithm, Layout
from simcore.domain.schedules import COSTED, POLICIES, Pass
from topology.cluster_graph import GRAPHS_KEPT
from topology.cluster_spec import ClusterSpec
from topology.graph import build_cluster
from topology.routing import Router

NETWORKS_KEPT = GRAPHS_KEPT  # (cluster spec, algorithm) pairs whose networks a process keeps
NETWORK_ENTRIES_KEPT = 100_000  # cached routes, patterns and pass orders a kept network may hold


@dataclass(frozen=True, slots=True)
class Network:
    """A built cluster and its collective model (with its routes and collective phases cached as they are
    asked for): what every simulation on the same cluster and algorithm can share. It also keeps the pipeline
    ranks' pass orders that simulations on it asked for (they depend only on the schedule's shape)."""

    spec: ClusterSpec
    algorithm: CollectiveAlgorithm
    collectives: CollectiveModel
    _passes: dict[tuple[object, ...], list[Pass]] = field(
        default_factory=dict, init=False, repr=False, compare=False)

    def passes(self, layout: Layout, workload: Workload | None = None) -> tuple[list[Pass], ...]:
        """Each pipeline rank's passes in schedule order (shared lists: not to be changed). The schedules that
        build their order on the stages' costs take them from `workload`."""
        schedule, p, m, v = layout.schedule, layout.pp, layout.num_microbatches, layout.shape.chunks
        costs = None
        if schedule in COSTED and workload is not None:
            costs = tuple((c.forward_s, c.backward_input_s, c.backward_weight_s) for c in workload.chunks)
        out = []
        for rank in range(p):
            key = (schedule, rank, p, m, v, costs)
            order = self._passes.get(key)
            if order is None:
                order = self._passes[key] = POLICIES[schedule].passes(rank, p, m, v, costs)
            out.append(order)
        return tuple(out)

    def cached_entries(self) -> int:
        """How many routes, collective patterns and pass orders the network holds."""
        return len(self._passes) + self.collectives.cached_entries()


def build_network(spec: ClusterSpec, algorithm: CollectiveAlgorithm) -> Network:
    """A new network of `spec` (its graph from the process's graph cache)."""
    cluster = build_cluster(spec)
    return Network(spec, algorithm, CollectiveModel(cluster, Router(cluster), algorithm))


_KEPT: OrderedDict[tuple[ClusterSpec, CollectiveAlgorithm], Network] = OrderedDict()


def shared_network(spec: ClusterSpec, algorithm: CollectiveAlgorithm) -> Network:
    """The process's network of `spec` and `algorithm`: built on first use, then shared by every simulation
    on them (the NETWORKS_KEPT last used are kept; the module docstring says when one is built again)."""
    if spec.measured is not None and spec.measured.collectives:
        return build_network(spec, algorithm)
    key = (spec, algorithm)
    network = _KEPT.get(key)
    if network is None or network.cached_entries() > NETWORK_ENTRIES_KEPT:
        network = _KEPT[key] = build_network(spec, algorithm)
        while len(_KEPT) > NETWORKS_KEPT:
            _KEPT.popitem(last=False)
    _KEPT.move_to_end(key)
    return network


def forget_networks() -> None:
    """Drop the process's kept networks (the graphs stay cached): the next simulation on a cluster builds its
    routes and patterns again, as the first one in a process does."""
    _KEPT.clear()
