"""The cluster as a graph: GPUs, one NVSwitch fabric per NVLink domain (the node unless
`nvlink_domain_gpus` joins several nodes' GPUs in one, as a GB200 NVL72 rack does), NICs, leaf and spine switches.

Every directed edge carries `bandwidth_bytes_per_s`, `latency_s`, `kind` (nvlink | pcie | ib) and `link_id`, an
index into the flat link tables. `Cluster.graph` is the networkx DiGraph (topology/cluster_graph.py, built once per
spec in a process), on which every simulation's routes are found (topology/routing.py). A link's figures also
follow from the spec by arithmetic (topology/links.py, tested equal to the graph's edges), which is how the cost
model reads the figures of the links its flows cross; the flat tables are made when first asked for.

Shape of the inter-node fabric (two levels; `LEAF_DOWN_PORTS` NIC ports per leaf):
- fat_tree: NICs fill leaf switches in node order, so a leaf serves a few whole nodes.
- rail_optimized: nodes form scalable units of LEAF_DOWN_PORTS nodes; NIC i of every node in a unit goes to the
  unit's leaf i (rail i), as in a DGX SuperPOD.
Every leaf has ceil(LEAF_DOWN_PORTS / oversubscription) uplinks, one to each spine, each as fast as a NIC.

A heterogeneous cluster (`node_groups`) is built group by group on the one fabric: a node's GPUs, NVLink ports,
PCIe paths and NICs have its group's figures; the leaf-spine links run at the cluster's NIC rate (the fabric's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from topology.cluster_graph import cluster_graph, graph_nodes
from topology.cluster_spec import ClusterSpec
from topology.graph_links import GraphLinks
from topology.links import LinkIndex, LinkValues, Node

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["Cluster", "GraphParts", "Node", "build_cluster"]


@dataclass(slots=True)
class GraphParts:
    """The graph's nodes with their attributes, in the order they were added (its edges are the link tables)."""

    nodes: list[tuple[Node, dict[str, Any]]] = field(default_factory=list)

    def add_node(self, key: Node, /, **attrs: Any) -> None:
        self.nodes.append((key, attrs))


@dataclass(frozen=True, slots=True)
class Cluster:
    """A built cluster: its links by arithmetic (`index`, topology/links.py) and, made on first use, the flat
    per-link tables (indexed by link_id), the graph's nodes and the networkx graph. Building is O(1) in the
    cluster's size: a simulation asks only for the links its flows cross (`latency` keeps those it asked for)."""

    spec: ClusterSpec
    index: LinkIndex | GraphLinks  # GraphLinks: a user's graph (cluster.topology), read off its edges
    num_spines: int
    latency: LinkValues = field(compare=False, repr=False)  # latency_s of each link asked for
    made: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)  # tables, once made

    @property
    def graph(self) -> nx.DiGraph:
        """The cluster as a networkx DiGraph (topology/cluster_graph.py), built once per spec in a process; the
        routes of every simulation are found on it (topology/routing.py)."""
        return cluster_graph(self.spec)

    def _tables(self) -> dict[str, Any]:
        if "ends" not in self.made:
            described = [self.index.describe(link) for link in range(self.index.count)]
            self.made["ends"] = tuple(d[0] for d in described)
            self.made["bandwidth"] = tuple(d[1] for d in described)
            self.made["latency"] = tuple(d[2] for d in described)
            self.made["kind"] = tuple(d[3] for d in described)
        return self.made

    @property
    def link_ends(self) -> tuple[tuple[Node, Node], ...]:
        return self._tables()["ends"]

    @property
    def link_bandwidth_bytes_per_s(self) -> tuple[float, ...]:
        return self._tables()["bandwidth"]

    @property
    def link_latency_s(self) -> tuple[float, ...]:
        return self._tables()["latency"]

    @property
    def link_kind(self) -> tuple[str, ...]:
        return self._tables()["kind"]

    @property
    def edge_link(self) -> dict[tuple[Node, Node], int]:
        if "edge_link" not in self.made:
            self.made["edge_link"] = {ends: link for link, ends in enumerate(self.link_ends)}
        return self.made["edge_link"]

    @property
    def parts(self) -> GraphParts:
        """The graph's nodes with their attributes, in the order of the link ids."""
        if "parts" not in self.made:
            self.made["parts"] = _parts(self.spec, self.index)
        return self.made["parts"]

    @property
    def num_links(self) -> int:
        return self.index.count

    @property
    def num_gpus(self) -> int:
        return self.spec.num_gpus

    def node_of(self, gpu: int) -> int:
        return gpu // self.spec.gpus_per_node

    def domain_of(self, gpu: int) -> int:
        """Index of the NVLink domain (and of its switch) that `gpu` belongs to."""
        return gpu // self.spec.domain_gpus

    def nic_of(self, gpu: int) -> int:
        """Global index of the NIC nearest to `gpu` (GPU i of a node uses NIC i mod nics_per_node)."""
        spec = self.spec
        return self.node_of(gpu) * spec.nics_per_node + (gpu % spec.gpus_per_node) % spec.nics_per_node

    def link(self, u: Node, v: Node) -> int:
        """Id of the directed link u -> v (KeyError if there is none)."""
        return self.index.link(u, v)

    def bandwidth(self, link: int) -> float:
        """Line rate (bytes/s) of `link`."""
        return self.index.kind_and_bandwidth(link)[1]

    def kind(self, link: int) -> str:
        return self.index.kind_and_bandwidth(link)[0]


def _parts(spec: ClusterSpec, index: LinkIndex | GraphLinks) -> GraphParts:
    g = GraphParts()
    if spec.topology is not None:
        g.nodes.extend((key, dict(attrs)) for key, attrs in spec.topology.nodes)
        return g
    assert isinstance(index, LinkIndex)
    g.nodes.extend((key, {k: v for k, v in attrs.items() if k in ("kind", "node")})
                   for key, attrs in graph_nodes(spec, index))
    return g


def build_cluster(spec: ClusterSpec) -> Cluster:
    """Build the cluster of `spec` (validated first); pure function of the spec, O(1) in its size."""
    spec.validate()
    index: LinkIndex | GraphLinks = LinkIndex.of(spec) if spec.topology is None else GraphLinks.of(spec)
    return Cluster(spec=spec, index=index, num_spines=index.spines, latency=LinkValues(index.latency_s))

