"""A cluster graph the user brings (`cluster.topology`): read from networkx node-link JSON or GraphML, checked, and
put in the simulator's form.

What the file holds: nodes with a `kind` (gpu, nvswitch, nic, or a switch: switch, leaf, spine), edges with
`bandwidth_gb_per_s` (GB/s, 10^9 bytes, per direction) and `latency_us` (microseconds per hop). An undirected
graph's edge is a link both ways; a directed graph gives each direction (both must be there). Optional: a GPU's
`node` (the server it sits in; default its NVSwitch domain) and `local` (its place in the server; default file
order), a NIC's `port` (what an ECMP hash reads; default its place among its switch's NICs), the graph's `pxn`
(NCCL's PXN; default: on when every switch that NICs plug into serves one rail, as on a rail-optimized fabric).

What the simulator needs of it, checked here with errors naming the node or edge and the rule: each GPU has one
NVLink edge to an NVSwitch and one edge to a NIC; each NIC at most one switch; every server has as many GPUs and
NICs as every other, every NVLink domain as many whole servers; switches join every NIC's switch to every other's.

The simulator's form: GPUs numbered by domain, server and place (so GPU g's server is g // gpus_per_node and its
domain g // domain_gpus, as on the built-in clusters), NICs by server and the first GPU they serve (a NIC's rail
is that order), switches in file order; directed links numbered in that order of their first end, each link's two
directions adjacent. A UserTopology is hashed by a digest of its content, so a cluster spec holding one is cheap
to look up in the graph cache (topology/cluster_graph.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from topology.errors import SpecError
from topology.hardware import GB

if TYPE_CHECKING:
    import networkx as nx

Node = tuple[str, int]
WHERE = "cluster.topology"
SWITCH_ALIASES = frozenset({"switch", "leaf", "spine"})
KINDS = frozenset({"gpu", "nvswitch", "nic"}) | SWITCH_ALIASES
MAX_NODES = 300_000  # a 65,536-GPU cluster with a NIC per GPU and its switches fits
# The pairs of kinds a link may join, and the link's kind (the cost model's: its NCCL efficiency).
_LINK_KINDS = {("gpu", "nvswitch"): "nvlink", ("gpu", "nic"): "pcie", ("nic", "switch"): "ib",
               ("switch", "switch"): "ib"}


@dataclass(frozen=True, eq=False, slots=True)
class UserTopology:
    """A checked user graph in the simulator's form (module docstring). `links` are the directed links in id
    order: (u, v, bandwidth bytes/s, latency s, kind). `names` gives each node's id in the user's file."""

    nodes: tuple[tuple[Node, tuple[tuple[str, Any], ...]], ...]
    links: tuple[tuple[Node, Node, float, float, str], ...]
    names: dict[Node, str] = field(repr=False)
    gpus: int
    gpus_per_node: int
    nics_per_node: int
    domain_gpus: int
    pxn: bool
    nvlink_bandwidth_bytes_per_s: float  # the fastest GPU-NVSwitch link: the domain's line rate
    nic_bandwidth_bytes_per_s: float  # the fastest NIC-switch link (0 on one server)
    intra_latency_s: float
    inter_latency_s: float
    digest: str = field(repr=False)

    def __hash__(self) -> int:
        return hash(self.digest)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UserTopology) and other.digest == self.digest

    @property
    def num_nodes(self) -> int:
        return self.gpus // self.gpus_per_node

    def name(self, node: Node) -> str:
        return self.names.get(node, f"{node[0]} {node[1]}")


def parse_topology(document: Any) -> UserTopology:
    """The topology of a `cluster.topology` value: a node-link mapping, or GraphML text (a string)."""
    import networkx as nx

    if isinstance(document, str):
        if not document.lstrip().startswith("<"):
            raise SpecError(WHERE, "must be the graph itself (node-link JSON, or GraphML text): a file path is "
                                   "read only from a request file given to the CLI")
        try:
            graph = nx.parse_graphml(document)
        except Exception as e:  # networkx raises NetworkXError, ElementTree ParseError, ValueError...
            raise SpecError(WHERE, f"is not readable GraphML: {e}") from None
    elif isinstance(document, dict):
        graph = _from_node_link(document)
    else:
        raise SpecError(WHERE, "must be a node-link mapping (nodes, links) or GraphML text")
    return from_graph(graph)


def _from_node_link(document: dict[str, Any]) -> nx.Graph:
    import networkx as nx

    edges = "links" if "links" in document else "edges"
    for key in ("nodes", edges):
        if not isinstance(document.get(key), list):
            raise SpecError(f"{WHERE}.{key}", "must be a list (networkx node-link JSON: nodes and links)")
    for i, node in enumerate(document["nodes"]):
        if not isinstance(node, dict) or "id" not in node:
            raise SpecError(f"{WHERE}.nodes[{i}]", "must be a mapping with an id")
    for i, edge in enumerate(document[edges]):
        if not isinstance(edge, dict) or "source" not in edge or "target" not in edge:
            raise SpecError(f"{WHERE}.{edges}[{i}]", "must be a mapping with a source and a target")
    if len(document["nodes"]) > MAX_NODES:
        raise SpecError(f"{WHERE}.nodes", f"holds more than {MAX_NODES} nodes")
    try:
        return nx.node_link_graph(document, directed=bool(document.get("directed", False)), multigraph=False,
                                  edges=edges)
    except Exception as e:
        raise SpecError(WHERE, f"is not readable node-link JSON: {e}") from None


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" or kind == "nvswitch" else f"a {kind}"


def _number(attrs: dict[str, Any], key: str, what: str) -> float:
    value = attrs.get(key)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(WHERE, f"{what} needs {key}, a finite number (given {value!r})")
    return float(value)


def from_graph(graph: nx.Graph) -> UserTopology:
    """Check `graph` (nodes with kinds, edges with bandwidth and latency) and put it in the simulator's form."""
    if graph.number_of_nodes() > MAX_NODES:
        raise SpecError(WHERE, f"holds more than {MAX_NODES} nodes")
    kind: dict[Any, str] = {}
    for v, attrs in graph.nodes(data=True):
        k = attrs.get("kind")
        if k not in KINDS:
            raise SpecError(WHERE, f"node {v!r}: kind must be one of {', '.join(sorted(KINDS))} (given {k!r})")
        kind[v] = "switch" if k in SWITCH_ALIASES else k
    links = _directed_links(graph, kind)
    nbrs: dict[Any, list[Any]] = {v: [] for v in graph.nodes}
    for u, v in links:
        nbrs[u].append(v)
    gpus = [v for v in graph.nodes if kind[v] == "gpu"]
    if not gpus:
        raise SpecError(WHERE, "has no node of kind gpu")
    switch_of: dict[Any, Any] = {}
    nic_of: dict[Any, Any] = {}
    for g in gpus:
        for wanted, into in (("nvswitch", switch_of), ("nic", nic_of)):
            found = [v for v in nbrs[g] if kind[v] == wanted]
            if len(found) != 1:
                raise SpecError(WHERE, f"node {g!r}: a gpu needs exactly one edge to {_a(wanted)} "
                                       f"(it has {len(found)})")
            into[g] = found[0]
    servers = _servers(graph, gpus, switch_of)
    order = _gpu_order(graph, gpus, servers, switch_of)
    gpn = len(servers[order[0][0]])
    nic_rank, nics_per_node = _nics(graph, order, gpn, nic_of, nbrs, kind)
    key = _keys(graph, kind, order, switch_of, nic_rank)
    pxn = _pxn(graph, nic_of, nic_rank, nbrs, kind, nics_per_node)
    _connected(order, nic_of, nic_rank, nbrs, kind, pxn)
    domain = sum(1 for _s, g in order if switch_of[g] == switch_of[order[0][1]])
    first_gpu = {switch_of[g]: i for i, (_s, g) in reversed(list(enumerate(order)))}
    for i, (_s, g) in enumerate(order):
        if first_gpu[switch_of[g]] != i - i % domain or domain % gpn:
            raise SpecError(WHERE, f"node {switch_of[g]!r}: every NVLink domain must hold as many whole servers as "
                                   f"the first ({domain} GPUs, servers of {gpn})")
    return _assemble(graph, key, links, len(order), gpn, nics_per_node, domain, pxn)


def _directed_links(graph: nx.Graph, kind: dict[Any, str]) -> dict[tuple[Any, Any], tuple[float, float, str]]:
    """Every directed link (u, v) with its (bandwidth bytes/s, latency s, kind), in the graph's edge order."""
    links: dict[tuple[Any, Any], tuple[float, float, str]] = {}
    for u, v, attrs in graph.edges(data=True):
        what = f"edge {u!r} -> {v!r}" if graph.is_directed() else f"edge {u!r} - {v!r}"
        if u == v:
            raise SpecError(WHERE, f"{what}: a link joins two different nodes")
        pair = tuple(sorted((kind[u], kind[v])))
        link_kind = _LINK_KINDS.get(pair)  # type: ignore[arg-type]
        if link_kind is None:
            raise SpecError(WHERE, f"{what}: {_a(kind[u])} cannot link to {_a(kind[v])} (links join a gpu to an "
                                   "nvswitch or a nic, a nic to a switch, or two switches)")
        bw = _number(attrs, "bandwidth_gb_per_s", what)
        latency = _number(attrs, "latency_us", what)
        if bw <= 0 or latency < 0:
            raise SpecError(WHERE, f"{what}: bandwidth_gb_per_s must be > 0 and latency_us >= 0")
        links[(u, v)] = (bw * GB, latency * 1e-6, link_kind)
        if not graph.is_directed():
            links[(v, u)] = links[(u, v)]
    if graph.is_directed():
        for u, v in links:
            if (v, u) not in links:
                raise SpecError(WHERE, f"edge {u!r} -> {v!r} has no reverse edge {v!r} -> {u!r}: a link carries "
                                       "traffic both ways (or give an undirected graph)")
    return links


def _servers(graph: nx.Graph, gpus: list[Any], switch_of: dict[Any, Any]) -> dict[Any, list[Any]]:
    """The GPUs of each server (a GPU's `node`, else its NVSwitch), in file order; every server alike."""
    servers: dict[Any, list[Any]] = {}
    for g in gpus:
        server = graph.nodes[g].get("node")
        servers.setdefault(("node", server) if server is not None else ("domain", switch_of[g]), []).append(g)
    sizes = {len(members) for members in servers.values()}
    for name, members in servers.items():
        if len(members) != len(next(iter(servers.values()))):
            raise SpecError(WHERE, f"node {members[0]!r}: every server must hold as many GPUs as the first "
                                   f"(server {name[1]!r} holds {len(members)}; sizes {sorted(sizes)})")
        if len({switch_of[g] for g in members}) > 1:
            raise SpecError(WHERE, f"node {members[0]!r}: the GPUs of server {name[1]!r} must share one nvswitch")
    return servers


def _gpu_order(graph: nx.Graph, gpus: list[Any], servers: dict[Any, list[Any]],
               switch_of: dict[Any, Any]) -> list[tuple[Any, Any]]:
    """(server, GPU) in the simulator's order: by domain (file order of the switches), server, then place."""
    switches = {v: i for i, v in enumerate(v for v in graph.nodes if graph.nodes[v]["kind"] == "nvswitch")}
    first = {name: i for i, name in enumerate(servers)}  # servers in the file order of their first GPU
    order: list[tuple[Any, Any]] = []
    for name in sorted(servers, key=lambda s: (switches[switch_of[servers[s][0]]], first[s])):
        members = servers[name]
        places = [graph.nodes[g].get("local") for g in members]
        if all(p is not None for p in places):
            if sorted(places) != list(range(len(members))):
                raise SpecError(WHERE, f"node {members[0]!r}: the local places of server {name[1]!r}'s GPUs must "
                                       f"be 0 to {len(members) - 1}, once each (given {sorted(places)})")
            members = [g for _p, g in sorted(zip(places, members))]
        order.extend((name, g) for g in members)
    return order


def _nics(graph: nx.Graph, order: list[tuple[Any, Any]], gpn: int, nic_of: dict[Any, Any],
          nbrs: dict[Any, list[Any]], kind: dict[Any, str]) -> tuple[dict[Any, tuple[int, int]], int]:
    """Each NIC's (server, rail) and the NICs per server (all alike; a NIC serves GPUs of one server)."""
    rank: dict[Any, tuple[int, int]] = {}
    per_server = 0
    for s in range(len(order) // gpn):
        mine: list[Any] = []
        for _name, g in order[s * gpn:(s + 1) * gpn]:
            nic = nic_of[g]
            if nic in rank and rank[nic][0] != s:
                raise SpecError(WHERE, f"node {nic!r}: a nic serves the GPUs of one server")
            if nic not in rank:
                rank[nic] = (s, len(mine))
                mine.append(nic)
        if s and len(mine) != per_server:
            raise SpecError(WHERE, f"node {mine[0]!r}: every server must have as many NICs as the first "
                                   f"({per_server}; this one {len(mine)})")
        per_server = len(mine)
    for v in graph.nodes:
        if kind[v] == "nic":
            if v not in rank:
                raise SpecError(WHERE, f"node {v!r}: a nic needs an edge to a gpu")
            ups = [w for w in nbrs[v] if kind[w] == "switch"]
            if len(ups) > 1:
                raise SpecError(WHERE, f"node {v!r}: a nic links to one switch (it has {len(ups)}); give a "
                                       "multi-plane NIC as one nic per plane")
    return rank, per_server


def _keys(graph: nx.Graph, kind: dict[Any, str], order: list[tuple[Any, Any]], switch_of: dict[Any, Any],
          nic_rank: dict[Any, tuple[int, int]]) -> dict[Any, Node]:
    """Each user node's key in the simulator's graph."""
    key: dict[Any, Node] = {g: ("gpu", i) for i, (_s, g) in enumerate(order)}
    domains: dict[Any, int] = {}
    for _s, g in order:
        domains.setdefault(switch_of[g], len(domains))
    for v in graph.nodes:
        if kind[v] == "nvswitch" and v not in domains:
            raise SpecError(WHERE, f"node {v!r}: an nvswitch needs an edge to a gpu")
    key.update((v, ("nvswitch", d)) for v, d in domains.items())
    per = max(r for _s, r in nic_rank.values()) + 1
    key.update((v, ("nic", s * per + r)) for v, (s, r) in nic_rank.items())
    switches = [v for v in graph.nodes if kind[v] == "switch"]
    key.update((v, ("switch", i)) for i, v in enumerate(switches))
    return key


def _connected(order: list[tuple[Any, Any]], nic_of: dict[Any, Any], nic_rank: dict[Any, tuple[int, int]],
               nbrs: dict[Any, list[Any]], kind: dict[Any, str], pxn: bool) -> None:
    """Every GPU reaches every other: through its NVSwitch inside a domain, over switches between domains (hosts
    do not forward). With PXN a message first crosses NVLink to the GPU whose NIC is on the destination's rail,
    so it is enough that the switches join the NICs of each rail."""
    domains = {w for _s, g in order for w in nbrs[g] if kind[w] == "nvswitch"}
    if len(domains) < 2:
        return
    leaf: dict[Any, Any] = {}
    for _s, g in order:
        ups = [w for w in nbrs[nic_of[g]] if kind[w] == "switch"]
        if not ups:
            raise SpecError(WHERE, f"node {g!r}: no path to gpu {order[0][1]!r}: its nic {nic_of[g]!r} has no "
                                   "switch")
        leaf[g] = ups[0]
    component: dict[Any, int] = {}
    for label, start in enumerate(dict.fromkeys(leaf.values())):
        if start in component:
            continue
        component[start] = label
        front = [start]
        while front:
            reached = []
            for u in front:
                for w in nbrs[u]:
                    if kind[w] == "switch" and w not in component:
                        component[w] = label
                        reached.append(w)
            front = reached
    first: dict[int, Any] = {}  # per rail (or for all, without PXN): the first GPU, whose switches the rest reach
    for _s, g in order:
        rail = nic_rank[nic_of[g]][1] if pxn else 0
        other = first.setdefault(rail, g)
        if component[leaf[g]] != component[leaf[other]]:
            raise SpecError(WHERE, f"node {g!r}: no path to gpu {other!r} (the graph is disconnected: no switch "
                                   f"path from {leaf[g]!r} to {leaf[other]!r})")


def _pxn(graph: nx.Graph, nic_of: dict[Any, Any], nic_rank: dict[Any, tuple[int, int]], nbrs: dict[Any, list[Any]],
         kind: dict[Any, str], nics: int) -> bool:
    """The graph's `pxn`, else whether every switch that NICs plug into serves one rail (and there are several)."""
    given = graph.graph.get("pxn")
    if given is not None:
        if not isinstance(given, (bool, int)) or given not in (0, 1):
            raise SpecError(WHERE, f"the graph's pxn must be true or false (given {given!r})")
        return bool(given)
    if nics < 2:
        return False
    rails: dict[Any, set[int]] = {}
    for nic in set(nic_of.values()):
        for w in nbrs[nic]:
            if kind[w] == "switch":
                rails.setdefault(w, set()).add(nic_rank[nic][1])
    return bool(rails) and all(len(r) == 1 for r in rails.values())


def _assemble(graph: nx.Graph, key: dict[Any, Node], links: dict[tuple[Any, Any], tuple[float, float, str]],
              gpus: int, gpn: int, nics: int, domain: int, pxn: bool) -> UserTopology:
    back = {k: v for v, k in key.items()}
    rank = {"nvswitch": 0, "gpu": 0, "nic": 1, "switch": 2}
    ordered = sorted(key.values(), key=lambda k: (rank[k[0]], k[1] // domain if k[0] == "gpu" else k[1],
                                                  k[0] != "nvswitch", k[1]))
    under: dict[Any, list[int]] = {}  # a NIC's default port: its place among the NICs of its switch, in order
    for k in ordered:
        if k[0] == "nic":
            switch = next((w for w in graph.neighbors(back[k]) if key[w][0] == "switch"), None)
            under.setdefault(switch, []).append(k[1])
    default_port = {nic: i for nics_under in under.values() for i, nic in enumerate(nics_under)}
    nodes = []
    for k in ordered:
        v = back[k]
        attrs: dict[str, Any] = {"kind": graph.nodes[v]["kind"] if k[0] == "switch" else k[0], "name": str(v)}
        if k[0] == "gpu":
            attrs.update(node=k[1] // gpn, local=k[1] % gpn)
        elif k[0] == "nic":
            server, rail = divmod(k[1], nics)
            port = graph.nodes[v].get("port", default_port[k[1]])
            attrs.update(node=server, rail=rail,
                         port=int(port) if isinstance(port, (int, float)) else default_port[k[1]])
        nodes.append((k, tuple(sorted(attrs.items()))))
    place = {k: i for i, k in enumerate(ordered)}
    ends = sorted({(min(a, b, key=place.__getitem__), max(a, b, key=place.__getitem__))
                   for a, b in ((key[u], key[v]) for u, v in links)}, key=lambda e: (place[e[0]], place[e[1]]))
    out = []
    for a, b in ends:
        for u, v in ((a, b), (b, a)):
            bw, latency, link_kind = links[(back[u], back[v])]
            out.append((u, v, bw, latency, link_kind))
    nvlink = max(bw for _u, _v, bw, _l, k in out if k == "nvlink")
    ib = [bw for u, _v, bw, _l, k in out if k == "ib" and u[0] == "nic"]
    intra = [lat for _u, _v, _bw, lat, k in out if k == "nvlink"]
    inter = [lat for _u, _v, _bw, lat, k in out if k == "ib"]
    text = repr((nodes, out)).encode()
    return UserTopology(nodes=tuple(nodes), links=tuple(out), names={k: str(back[k]) for k in ordered}, gpus=gpus,
                        gpus_per_node=gpn, nics_per_node=nics, domain_gpus=domain, pxn=pxn,
                        nvlink_bandwidth_bytes_per_s=nvlink, nic_bandwidth_bytes_per_s=max(ib, default=0.0),
                        intra_latency_s=max(intra), inter_latency_s=max(inter, default=0.0),
                        digest=hashlib.sha256(text).hexdigest())
