"""The cluster as a graph: GPUs, one NVSwitch fabric per NVLink domain (the node unless
`nvlink_domain_gpus` joins several nodes' GPUs in one, as a GB200 NVL72 rack does), NICs, leaf and spine switches.

Every directed edge carries `bandwidth_bytes_per_s`, `latency_s`, `kind` (nvlink | pcie | ib) and `link_id`, an
index into the flat link tables that the simulator uses on its hot path. The simulator needs only those tables, so
the build keeps the nodes and edges as lists and `Cluster.graph` makes the networkx DiGraph from them when asked
(networkx is imported then: a simulation neither imports it nor builds its 24,576 edges for a 3072-GPU cluster).

Shape of the inter-node fabric (two levels; `LEAF_DOWN_PORTS` NIC ports per leaf):
- fat_tree: NICs fill leaf switches in node order, so a leaf serves a few whole nodes.
- rail_optimized: nodes form scalable units of LEAF_DOWN_PORTS nodes; NIC i of every node in a unit goes to the
  unit's leaf i (rail i), as in a DGX SuperPOD.
Every leaf has ceil(LEAF_DOWN_PORTS / oversubscription) uplinks, one to each spine, each as fast as a NIC.

A heterogeneous cluster (`node_groups`) is built group by group on the one fabric: a node's GPUs, NVLink ports,
PCIe paths and NICs have its group's figures; the leaf-spine links run at the cluster's NIC rate (the fabric's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from topology.cluster_spec import LEAF_DOWN_PORTS, ClusterSpec, Fabric

if TYPE_CHECKING:
    import networkx as nx

Node = tuple[str, int] | tuple[str, int, int]


@dataclass(slots=True)
class GraphParts:
    """The graph's nodes with their attributes, in the order they were added (its edges are the link tables)."""

    nodes: list[tuple[Node, dict[str, Any]]] = field(default_factory=list)

    def add_node(self, key: Node, /, **attrs: Any) -> None:
        self.nodes.append((key, attrs))


@dataclass(frozen=True, slots=True)
class Cluster:
    """A built cluster: the graph plus flat per-link tables (indexed by link_id)."""

    spec: ClusterSpec
    parts: GraphParts
    link_ends: tuple[tuple[Node, Node], ...]
    link_bandwidth_bytes_per_s: tuple[float, ...]
    link_latency_s: tuple[float, ...]
    link_kind: tuple[str, ...]
    edge_link: dict[tuple[Node, Node], int]
    nic_leaf: tuple[int, ...]  # leaf index of global NIC index (node * nics_per_node + k)
    num_spines: int
    made: list[nx.DiGraph] = field(default_factory=list, compare=False, repr=False)  # the graph, once made

    @property
    def graph(self) -> nx.DiGraph:
        """The cluster as a networkx DiGraph (made on the first call)."""
        if not self.made:
            import networkx as nx

            g = nx.DiGraph()
            g.add_nodes_from(self.parts.nodes)
            g.add_edges_from((u, v, {"bandwidth_bytes_per_s": bw, "latency_s": lat, "kind": kind, "link_id": i})
                             for i, ((u, v), bw, lat, kind) in enumerate(zip(
                                 self.link_ends, self.link_bandwidth_bytes_per_s, self.link_latency_s,
                                 self.link_kind, strict=True)))
            self.made.append(g)
        return self.made[0]

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
        return self.edge_link[(u, v)]


def _leaf_of_nic(spec: ClusterSpec, node: int, k: int) -> int:
    if spec.fabric is Fabric.RAIL_OPTIMIZED:
        unit = node // LEAF_DOWN_PORTS
        return unit * spec.nics_per_node + k
    return (node * spec.nics_per_node + k) // LEAF_DOWN_PORTS


def build_cluster(spec: ClusterSpec) -> Cluster:
    """Build the graph of `spec` (validated first); pure function of the spec."""
    spec.validate()
    g = GraphParts()
    ends: list[tuple[Node, Node]] = []
    bws: list[float] = []
    lats: list[float] = []
    kinds: list[str] = []
    edge_link: dict[tuple[Node, Node], int] = {}

    def add_pair(u: Node, v: Node, bw: float, lat: float, kind: str) -> None:
        link_id = len(ends)
        ends.extend(((u, v), (v, u)))
        bws.extend((bw, bw))
        lats.extend((lat, lat))
        kinds.extend((kind, kind))
        edge_link[(u, v)] = link_id
        edge_link[(v, u)] = link_id + 1

    nvlink_factor = {link.gpu: link.bandwidth_factor for link in spec.health.degraded_links if link.gpu is not None}
    nic_factor = {link.node * spec.nics_per_node + (link.nic or 0): link.bandwidth_factor
                  for link in spec.health.degraded_links if link.node is not None}
    nodes = spec.num_nodes
    nic_leaf: list[int] = []
    for n in range(nodes):
        first = n * spec.gpus_per_node
        switch: Node = ("nvswitch", first // spec.domain_gpus)
        if first % spec.domain_gpus == 0:  # the domain's first node brings its switch
            g.add_node(switch, kind="nvswitch", node=n)
        for i in range(first, min(first + spec.gpus_per_node, spec.num_gpus)):
            g.add_node(("gpu", i), kind="gpu", node=n)
            add_pair(("gpu", i), switch, spec.nvlink_bandwidth_of(i) * nvlink_factor.get(i, 1.0),
                     spec.intra_node_latency_s, "nvlink")
        for k in range(spec.nics_per_node):
            nic: Node = ("nic", n * spec.nics_per_node + k)
            g.add_node(nic, kind="nic", node=n)
            nic_leaf.append(_leaf_of_nic(spec, n, k))
        for i in range(first, min(first + spec.gpus_per_node, spec.num_gpus)):
            nic_index = n * spec.nics_per_node + (i - first) % spec.nics_per_node
            add_pair(("gpu", i), ("nic", nic_index),
                     spec.hardware_of(i).pcie_bandwidth_bytes_per_s * nic_factor.get(nic_index, 1.0),
                     spec.intra_node_latency_s, "pcie")

    num_spines = 0
    if nodes > 1:
        leaves = max(nic_leaf) + 1
        for nic_index, leaf in enumerate(nic_leaf):
            g.add_node(("leaf", leaf), kind="leaf")
            add_pair(("nic", nic_index), ("leaf", leaf),
                     spec.nic_bandwidth_of(nic_index // spec.nics_per_node) * nic_factor.get(nic_index, 1.0),
                     spec.inter_node_latency_s, "ib")
        if leaves > 1:
            num_spines = math.ceil(LEAF_DOWN_PORTS / spec.oversubscription)
            for s in range(num_spines):
                g.add_node(("spine", s), kind="spine")
                for leaf in range(leaves):
                    add_pair(("leaf", leaf), ("spine", s), spec.nic_bandwidth_bytes_per_s,
                             spec.inter_node_latency_s, "ib")
    return Cluster(
        spec=spec,
        parts=g,
        link_ends=tuple(ends),
        link_bandwidth_bytes_per_s=tuple(bws),
        link_latency_s=tuple(lats),
        link_kind=tuple(kinds),
        edge_link=edge_link,
        nic_leaf=tuple(nic_leaf),
        num_spines=num_spines,
    )
