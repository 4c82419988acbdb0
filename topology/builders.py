"""Cluster graphs of the shapes users have, in the form `cluster.topology` reads (topology/user_topology.py): an
undirected networkx Graph whose nodes carry `kind` and whose edges carry `bandwidth_gb_per_s` and `latency_us`.
`clustersim topology` writes them as node-link JSON or GraphML for a user to edit; a test reads them back.

Servers (`Server`: GPUs, NICs and their figures) hang under the inter-node fabric by their NICs:
- `fat_tree`: NICs fill leaves in server order (a leaf serves whole servers); two tiers (every leaf to every
  spine) or three (pods of leaves, each leaf to every aggregation switch of its pod, aggregation switch j of every
  pod to core group j). The oversubscription ratio sets a leaf's uplinks: ceil(down ports / ratio).
- `rail_optimized`: scalable units of `down` servers; NIC k of every server in a unit to the unit's leaf k (rail
  k), leaves to spines; NCCL's PXN applies.
- `multi_plane`: the NICs split over `planes` separate two-tier fabrics (NIC k in plane k mod planes), nothing
  joining the planes: traffic between planes crosses NVLink first (PXN).
- `nvl_racks`: racks whose GPUs share one NVLink domain (GB200 NVL72: 72 GPUs in 18 trays of 4), each tray a
  server with its own NICs, the racks joined by a fat tree.
And failures on any of them: `degrade_link` (a link at a share of its rate), `remove_link`, `remove_switch`.
With the same figures, the two-tier `fat_tree` and `rail_optimized` are the built-in fabrics of
topology/graph.py (tests/topology/test_user_topology.py holds their results equal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from topology.errors import SpecError

if TYPE_CHECKING:
    import networkx as nx

    from topology.cluster_spec import ClusterSpec

DOWN_PORTS = 32  # a leaf's ports down to NICs (topology/cluster_spec.py's LEAF_DOWN_PORTS)


@dataclass(frozen=True, slots=True)
class Server:
    """One server's shape and figures: GB/s per direction (NVLink per GPU, PCIe per GPU-NIC path, the NIC's line
    rate), microseconds per hop inside it and across the fabric."""

    gpus: int = 8
    nics: int = 8
    nvlink_gb_per_s: float = 450.0
    pcie_gb_per_s: float = 64.0
    nic_gb_per_s: float = 50.0
    intra_latency_us: float = 0.35
    inter_latency_us: float = 1.0


def _graph(**attrs: Any) -> nx.Graph:
    import networkx as nx

    return nx.Graph(**attrs)


def _add_servers(g: nx.Graph, server: Server, servers: int, gpus_per_domain: int | None = None,
                 prefix: str = "n") -> list[list[str]]:
    """Add `servers` servers (GPUs, NVSwitch, NICs); the NICs of each, in rail order. With `gpus_per_domain`,
    consecutive servers share one NVSwitch of that many GPUs (a rack's NVLink domain)."""
    nics_of = []
    per_domain = (gpus_per_domain or server.gpus) // server.gpus
    for n in range(servers):
        domain = n // per_domain
        switch = f"{prefix}{n}.nvswitch" if per_domain == 1 else f"rack{domain}.nvswitch"
        if n % per_domain == 0:
            g.add_node(switch, kind="nvswitch")
        nics = [f"{prefix}{n}.nic{k}" for k in range(server.nics)]
        for i in range(server.gpus):
            gpu = f"{prefix}{n}.gpu{i}"
            g.add_node(gpu, kind="gpu", node=n, local=i)
            g.add_edge(gpu, switch, bandwidth_gb_per_s=server.nvlink_gb_per_s, latency_us=server.intra_latency_us)
        for nic in nics:  # port: the server's place under a rail's leaf (a fat tree's leaves set their own)
            g.add_node(nic, kind="nic", port=n % DOWN_PORTS)
        for i in range(server.gpus):
            g.add_edge(f"{prefix}{n}.gpu{i}", nics[i % server.nics], bandwidth_gb_per_s=server.pcie_gb_per_s,
                       latency_us=server.intra_latency_us)
        nics_of.append(nics)
    return nics_of


def _uplinks(down: int, oversubscription: float) -> int:
    if not (math.isfinite(oversubscription) and oversubscription >= 1):
        raise SpecError("oversubscription", "must be >= 1 (1 = full bisection)")
    return math.ceil(down / oversubscription)


def _switch_link(g: nx.Graph, a: str, b: str, server: Server) -> None:
    g.add_edge(a, b, bandwidth_gb_per_s=server.nic_gb_per_s, latency_us=server.inter_latency_us)


def _two_tier(g: nx.Graph, leaves: list[str], server: Server, oversubscription: float, down: int,
              prefix: str = "") -> None:
    """Spines over `leaves`: ceil(down / ratio) of them, every leaf linked to every spine (none under one leaf)."""
    if len(leaves) < 2:
        return
    spines = [f"{prefix}spine{s}" for s in range(_uplinks(down, oversubscription))]
    for spine in spines:
        g.add_node(spine, kind="spine")
    for spine in spines:
        for leaf in leaves:
            _switch_link(g, leaf, spine, server)


def _leaves_in_order(g: nx.Graph, nics: list[str], server: Server, down: int, prefix: str = "") -> list[str]:
    """Leaves filled by `nics` in order, `down` NICs a leaf."""
    leaves = [f"{prefix}leaf{i}" for i in range(-(-len(nics) // down))]
    for leaf in leaves:
        g.add_node(leaf, kind="leaf")
    for i, nic in enumerate(nics):
        _switch_link(g, nic, leaves[i // down], server)
        g.nodes[nic]["port"] = i % down  # its place under the leaf: what the ECMP hash reads
    return leaves


def fat_tree(servers: int, server: Server = Server(), *, tiers: int = 2, oversubscription: float = 1.0,
             down: int = DOWN_PORTS) -> nx.Graph:
    """A fat tree of two or three tiers (module docstring)."""
    if servers < 1:
        raise SpecError("nodes", "must be >= 1")
    if tiers not in (2, 3):
        raise SpecError("tiers", "must be 2 or 3")
    g = _graph()
    nics = [nic for row in _add_servers(g, server, servers) for nic in row]
    if servers == 1:
        return g
    leaves = _leaves_in_order(g, nics, server, down)
    if tiers == 2:
        _two_tier(g, leaves, server, oversubscription, down)
        return g
    up = _uplinks(down, oversubscription)
    pods = [leaves[i:i + down] for i in range(0, len(leaves), down)]
    for j in range(up):
        for c in range(down):
            g.add_node(f"core{j}.{c}", kind="spine")
    for p, pod in enumerate(pods):
        for j in range(up):
            agg = f"pod{p}.agg{j}"
            g.add_node(agg, kind="switch")
            for leaf in pod:
                _switch_link(g, leaf, agg, server)
            if len(pods) > 1:
                for c in range(down):
                    _switch_link(g, agg, f"core{j}.{c}", server)
    if len(pods) == 1:
        g.remove_nodes_from([v for v, kind in g.nodes(data="kind") if v.startswith("core")])
    return g


def rail_optimized(servers: int, server: Server = Server(), *, oversubscription: float = 1.0,
                   down: int = DOWN_PORTS) -> nx.Graph:
    """Scalable units of `down` servers, one leaf per rail and unit, leaves to spines (module docstring)."""
    if servers < 1:
        raise SpecError("nodes", "must be >= 1")
    g = _graph(pxn=True)
    rows = _add_servers(g, server, servers)
    if servers == 1:
        return g
    leaves = []
    for unit in range(-(-servers // down)):
        for k in range(server.nics):
            leaf = f"leaf{unit * server.nics + k}"
            g.add_node(leaf, kind="leaf")
            leaves.append(leaf)
            for row in rows[unit * down:(unit + 1) * down]:
                _switch_link(g, row[k], leaf, server)
    _two_tier(g, leaves, server, oversubscription, down)
    return g


def multi_plane(servers: int, server: Server = Server(), *, planes: int = 2, oversubscription: float = 1.0,
                down: int = DOWN_PORTS) -> nx.Graph:
    """`planes` separate two-tier fabrics, NIC k of every server in plane k mod planes (module docstring)."""
    if servers < 1:
        raise SpecError("nodes", "must be >= 1")
    if planes < 1 or server.nics % planes:
        raise SpecError("planes", f"must be >= 1 and divide the NICs per server ({server.nics})")
    g = _graph(pxn=True)
    rows = _add_servers(g, server, servers)
    if servers == 1:
        return g
    for p in range(planes):
        nics = [row[k] for row in rows for k in range(p, server.nics, planes)]
        leaves = _leaves_in_order(g, nics, server, down, prefix=f"plane{p}.")
        _two_tier(g, leaves, server, oversubscription, down, prefix=f"plane{p}.")
    return g


def nvl_racks(racks: int, server: Server = Server(gpus=4, nics=4, nvlink_gb_per_s=900.0), *,
              gpus_per_rack: int = 72, oversubscription: float = 1.0, down: int = DOWN_PORTS) -> nx.Graph:
    """Racks of `gpus_per_rack` GPUs in one NVLink domain, trays of `server` GPUs with their own NICs, the racks'
    NICs joined by a two-tier fat tree (module docstring)."""
    if racks < 1:
        raise SpecError("racks", "must be >= 1")
    if gpus_per_rack < 1 or gpus_per_rack % server.gpus:
        raise SpecError("gpus_per_rack", f"must be a multiple of the GPUs per tray ({server.gpus})")
    g = _graph()
    trays = racks * gpus_per_rack // server.gpus
    nics = [nic for row in _add_servers(g, server, trays, gpus_per_domain=gpus_per_rack) for nic in row]
    if racks > 1:
        _two_tier(g, _leaves_in_order(g, nics, server, down), server, oversubscription, down)
    return g


def _edge(g: nx.Graph, u: str, v: str) -> dict[str, Any]:
    if not g.has_edge(u, v):
        raise SpecError("link", f"the graph has no link {u!r} - {v!r}")
    return g.edges[u, v]


def degrade_link(g: nx.Graph, u: str, v: str, share: float) -> nx.Graph:
    """The link u - v at `share` of its bandwidth (0 < share <= 1)."""
    if not 0 < share <= 1:
        raise SpecError("share", "must be > 0 and <= 1")
    edge = _edge(g, u, v)
    edge["bandwidth_gb_per_s"] = edge["bandwidth_gb_per_s"] * share
    return g


def remove_link(g: nx.Graph, u: str, v: str) -> nx.Graph:
    _edge(g, u, v)
    g.remove_edge(u, v)
    return g


def remove_switch(g: nx.Graph, name: str) -> nx.Graph:
    """A failed switch: it and its links gone."""
    if g.nodes.get(name, {}).get("kind") not in ("switch", "leaf", "spine"):
        raise SpecError("switch", f"the graph has no switch {name!r}")
    g.remove_node(name)
    return g


def node_link(g: nx.Graph) -> dict[str, Any]:
    """The graph as networkx node-link data (what `cluster.topology` reads, as JSON)."""
    import networkx as nx

    return nx.node_link_data(g, edges="links")


def built_in(spec: ClusterSpec) -> nx.DiGraph:
    """The built-in cluster of `spec` (topology/cluster_graph.py) as a user graph: nodes named kind and index
    ("gpu12", "nic3", "leaf0", "spine7"), each direction's bandwidth in GB/s and latency in microseconds. Read back
    as `cluster.topology` it routes and simulates as the built-in does (a starting point to edit)."""
    import networkx as nx

    from topology.cluster_graph import cluster_graph

    source = cluster_graph(spec)
    name = {n: f"{n[0]}{n[1]}" for n in source.nodes}
    g = nx.DiGraph()
    for n, attrs in source.nodes(data=True):
        g.add_node(name[n], **attrs)
    for u, v, attrs in source.edges(data=True):
        g.add_edge(name[u], name[v], bandwidth_gb_per_s=attrs["bandwidth_bytes_per_s"] / 1e9,
                   latency_us=attrs["latency_s"] * 1e6)
    return g
