"""The cluster as a networkx DiGraph, built from its spec: the graph routes are found on (topology/routing.py).

Nodes, keyed (kind, index): `("gpu", g)` with attributes kind, node (the server) and local (its place on it);
`("nvswitch", d)`, one switch fabric per NVLink domain; `("nic", i)` with node, rail (its index on the server)
and port (the NIC's place under its leaf: `node % LEAF_DOWN_PORTS` on a rail-optimized fabric, whose leaf serves one
rail, else `nic % LEAF_DOWN_PORTS`; what a D-mod-k / ECMP hash reads);
`("leaf", l)` and `("spine", s)`; on a PCIe-only node (topology/pcie.py) `("pcie_switch", s)` in place of the
NVSwitch and `("host", k)`, one per CPU socket. Every directed edge carries `bandwidth_bytes_per_s`, `latency_s`, `kind`
(nvlink | pcie | ib) and `link_id`, the link's index in the simulator's per-link tables, numbered as
topology/links.py computes them (tests/topology/test_links.py holds the two equal). Graph attributes: `fabric`
and `pxn` (whether NCCL's PXN applies: a rail-optimized fabric whose GPUs share NVLink; PXN forwards over NVLink).

A spec that carries the user's own graph (`cluster.topology`) is built from it instead (`user_graph`): the user's
nodes under the same keys (switches as `("switch", i)`, with the user's kind and `name`), each edge with a
`link_id` in the order topology/user_topology.py numbers them.

The graph is built once per cluster spec in a process (`cluster_graph`, a small cache: a search or a sweep
simulates many layouts on one cluster); nothing may change a graph it returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from topology.cluster_spec import LEAF_DOWN_PORTS, ClusterSpec, Fabric
from topology.links import LinkIndex, Node, switch_of
from topology.user_topology import UserTopology

if TYPE_CHECKING:
    import networkx as nx

GRAPHS_KEPT = 4  # cluster specs whose graphs a process keeps


@lru_cache(maxsize=GRAPHS_KEPT)
def cluster_graph(spec: ClusterSpec) -> nx.DiGraph:
    """The networkx DiGraph of the (validated) `spec`, its nodes in the order of the link ids."""
    import networkx as nx

    if spec.topology is not None:
        return user_graph(spec.topology)
    index = LinkIndex.of(spec)
    g = nx.DiGraph(fabric=str(spec.fabric), pxn=spec.fabric is Fabric.RAIL_OPTIMIZED and spec.pcie is None)
    g.add_nodes_from(graph_nodes(spec, index))
    g.add_edges_from(_edges(spec, index))
    return g


def user_graph(topology: UserTopology) -> nx.DiGraph:
    """The DiGraph of a user's topology (topology/user_topology.py): its nodes with their attributes (and the
    user's `name`), its links with their ids in the order of UserTopology.links."""
    import networkx as nx

    g = nx.DiGraph(fabric="user", pxn=topology.pxn)
    g.add_nodes_from((key, dict(attrs)) for key, attrs in topology.nodes)
    g.add_edges_from((u, v, {"bandwidth_bytes_per_s": bw, "latency_s": latency, "kind": kind, "link_id": i})
                     for i, (u, v, bw, latency, kind) in enumerate(topology.links))
    return g


def graph_nodes(spec: ClusterSpec, index: LinkIndex) -> list[tuple[Node, dict[str, Any]]]:
    """The graph's nodes with their attributes: per server its domain's switch (the domain's first server brings
    it), its GPUs and its NICs; then the leaves and the spines."""
    nodes: list[tuple[Node, dict[str, Any]]] = []
    gpn, nics, domain = spec.gpus_per_node, spec.nics_per_node, spec.domain_gpus
    rail = spec.fabric is Fabric.RAIL_OPTIMIZED
    pcie = spec.pcie
    for n in range(spec.num_nodes):
        first = n * gpn
        if pcie is not None:
            nodes.extend((("host", n * pcie.sockets + k), {"kind": "host", "node": n}) for k in range(pcie.sockets))
            nodes.extend((("pcie_switch", n * pcie.switches + s), {"kind": "pcie_switch", "node": n})
                         for s in range(pcie.switches))
        elif first % domain == 0:
            nodes.append((("nvswitch", first // domain), {"kind": "nvswitch", "node": n}))
        nodes.extend((("gpu", i), {"kind": "gpu", "node": n, "local": i - first})
                     for i in range(first, min(first + gpn, spec.num_gpus)))
        nodes.extend((("nic", n * nics + k),
                       {"kind": "nic", "node": n, "rail": k, "port": (n if rail else n * nics + k) % LEAF_DOWN_PORTS})
                      for k in range(nics))
    if index.leaves:
        nodes.extend((("leaf", leaf), {"kind": "leaf"}) for leaf in range(index.leaves))
        nodes.extend((("spine", s), {"kind": "spine"}) for s in range(index.spines))
    return nodes


def _edges(spec: ClusterSpec, index: LinkIndex) -> Iterator[tuple[Node, Node, dict[str, Any]]]:
    """Every directed link as (u, v, attributes), in link-id order (topology/links.py): per server, each GPU's
    NVLink port (up, then down), then each GPU's PCIe path to its NIC; each NIC to its leaf; each leaf to each
    spine. A non-uniform cluster (node groups, degraded links) reads each link's figures off the index."""
    intra, inter = spec.intra_node_latency_s, spec.inter_node_latency_s
    gpn, nics, num_gpus = spec.gpus_per_node, spec.nics_per_node, spec.num_gpus
    figures = None if index.uniform else index.describe
    nvlink, pcie, ib = spec.nvlink_bandwidth_bytes_per_s, spec.hardware.pcie_bandwidth_bytes_per_s, \
        spec.nic_bandwidth_bytes_per_s
    into = "nvlink" if spec.pcie is None else "pcie"
    link = 0
    for n in range(spec.num_nodes):
        first = n * gpn
        last = min(first + gpn, num_gpus)
        for g in range(first, last):
            u, v = ("gpu", g), switch_of(spec, g)
            bw = nvlink if figures is None else figures(link)[1]
            yield u, v, {"bandwidth_bytes_per_s": bw, "latency_s": intra, "kind": into, "link_id": link}
            yield v, u, {"bandwidth_bytes_per_s": bw, "latency_s": intra, "kind": into, "link_id": link + 1}
            link += 2
        for g in range(first, last):
            u, v = ("gpu", g), ("nic", n * nics + (g - first) % nics)
            bw = pcie if figures is None else figures(link)[1]
            yield u, v, {"bandwidth_bytes_per_s": bw, "latency_s": intra, "kind": "pcie", "link_id": link}
            yield v, u, {"bandwidth_bytes_per_s": bw, "latency_s": intra, "kind": "pcie", "link_id": link + 1}
            link += 2
    if index.leaves:
        for nic in range(spec.num_nodes * nics):
            u, v = ("nic", nic), ("leaf", index.leaf_of(nic))
            bw = ib if figures is None else figures(link)[1]
            yield u, v, {"bandwidth_bytes_per_s": bw, "latency_s": inter, "kind": "ib", "link_id": link}
            yield v, u, {"bandwidth_bytes_per_s": bw, "latency_s": inter, "kind": "ib", "link_id": link + 1}
            link += 2
        for s in range(index.spines):
            spine: Node = ("spine", s)
            for leaf in range(index.leaves):
                u = ("leaf", leaf)
                yield u, spine, {"bandwidth_bytes_per_s": ib, "latency_s": inter, "kind": "ib", "link_id": link}
                yield spine, u, {"bandwidth_bytes_per_s": ib, "latency_s": inter, "kind": "ib", "link_id": link + 1}
                link += 2
    for link in range(index.pcie_base, index.count):  # a PCIe-only node's uplinks and inter-socket links
        ends, bw, latency, kind = index.describe(link)
        yield ends[0], ends[1], {"bandwidth_bytes_per_s": bw, "latency_s": latency, "kind": kind, "link_id": link}
