"""Deterministic routing between GPUs, found on the cluster's networkx graph (topology/cluster_graph.py), as tuples
of the link ids its edges carry.

Inside an NVLink domain: GPU -> its NVSwitch -> GPU. Inside a PCIe-only node (topology/pcie.py): GPU -> its PCIe
switch -> GPU under one switch, else up to the switch's CPU socket (across to the other socket if it is not the
same) and down the other switch. Between domains: GPU -> its NIC -> leaf -> the switches of a
shortest path -> leaf -> the destination GPU's NIC -> GPU. Among equal-cost switch paths the choice is the one a
D-mod-k fat-tree router or deterministic ECMP makes: a hash of the source and destination ports (the NICs'
`port` and the source NIC's `rail`) modulo the number of paths, the paths in sorted order; so the same pair always
takes the same path and the flows of a symmetric pattern spread over the spines. Hosts do not forward: the switch
paths run over leaf and spine (switch) nodes only.

With PXN (NCCL's default since 2.12; the graph's `pxn`, set for rail-optimized fabrics), a message between GPUs on
different rails first crosses NVLink to the GPU of the source server that sits at the destination's place (its
NIC on the destination's rail), then leaves through that GPU's NIC and stays on one rail: it never needs a spine
inside a scalable unit.

Made fast by the graph's structure, not by going around it: each GPU's ports are read once, the switch paths
between two leaves are found once per pair of leaves (a search from both ends that stops at the first depth they
meet), and every route is cached per (src, dst). tests/topology/test_routing.py holds the routes equal to the
closed forms of the built-in fabrics (tests/topology/arithmetic_router.py) on every pair of small clusters and on
random pairs of a 16,384-GPU one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from topology.graph import Cluster, Node

if TYPE_CHECKING:
    import networkx as nx

SWITCH_KINDS = frozenset({"leaf", "spine", "switch"})  # nodes a switch path may cross


Hop = tuple[int, float]  # a directed link's id and latency (s)


class _Port:
    """What routes need of one GPU, read off its edges once: its NVSwitch, its NIC and that NIC's leaf (None on a
    cluster of one server), its server, place and rail, and the hops between them (id, latency)."""

    __slots__ = ("switch", "nic", "leaf", "server", "local", "rail", "port", "to_switch", "from_switch", "to_nic",
                 "from_nic", "nic_up", "nic_down", "host", "host_up", "host_down")

    def __init__(self, graph: nx.DiGraph, gpu: int) -> None:
        nodes, succ = graph.nodes, graph.succ
        g: Node = ("gpu", gpu)
        switch = nic = None
        for v, edge in succ[g].items():
            kind = nodes[v]["kind"]
            if kind in ("nvswitch", "pcie_switch"):
                switch, self.to_switch = v, (edge["link_id"], edge["latency_s"])
            elif kind == "nic":
                nic, self.to_nic = v, (edge["link_id"], edge["latency_s"])
        if switch is None or nic is None:
            raise ValueError(f"cluster.topology: gpu {gpu} needs an edge to an nvswitch (or pcie_switch) and to a nic")
        self.switch, self.nic = switch, nic
        attrs, nic_attrs = nodes[g], nodes[nic]
        self.server, self.local = attrs.get("node", gpu), attrs.get("local", 0)
        self.rail, self.port = nic_attrs.get("rail", 0), nic_attrs.get("port", nic[1])
        self.from_switch, self.from_nic = _hop(succ, switch, g), _hop(succ, nic, g)
        self.host: Node | None = None  # a PCIe switch's CPU socket, and the hops up to it and back down
        self.host_up = self.host_down = (-1, 0.0)
        if nodes[switch]["kind"] == "pcie_switch":
            for v, edge in succ[switch].items():
                if nodes[v]["kind"] == "host":
                    self.host, self.host_up, self.host_down = v, (edge["link_id"], edge["latency_s"]), \
                        _hop(succ, v, switch)
        self.leaf = None
        self.nic_up = self.nic_down = (-1, 0.0)
        for v, edge in succ[nic].items():
            if nodes[v]["kind"] in SWITCH_KINDS:
                self.leaf, self.nic_up = v, (edge["link_id"], edge["latency_s"])
                self.nic_down = _hop(succ, v, nic)
                break


def _hop(succ: Any, u: Node, v: Node) -> Hop:
    edge = succ[u][v]
    return edge["link_id"], edge["latency_s"]


class Router:
    """Routes of one cluster on its graph, cached per (src, dst) GPU pair: a route is its hops composed from each
    end's GPU-to-NIC hops (per GPU) and the switch path between their leaves (per pair of leaves)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.graph: nx.DiGraph = cluster.graph
        self._num_gpus = cluster.spec.num_gpus
        self._pxn = bool(self.graph.graph.get("pxn", False))
        self._cache: dict[int, tuple[tuple[int, ...], float]] = {}  # src * num_gpus + dst -> (links, latency)
        self._ports: dict[int, _Port] = {}
        self._switch_paths: dict[tuple[Node, Node], list[tuple[Node, ...]]] = {}
        self._path_hops: dict[tuple[Node, ...], tuple[Hop, ...]] = {}  # a switch path's hops, leaf to leaf
        self._places: dict[Node, dict[tuple[int, int], int]] = {}  # NVSwitch -> (server, place) -> GPU
        # a switch's switch neighbours, read off the graph once each: downstream, upstream
        self._switch_succ = _SwitchNeighbours(self.graph, self.graph.succ)
        self._switch_pred = _SwitchNeighbours(self.graph, self.graph.pred)

    @property
    def routed(self) -> int:
        """Pairs routed so far."""
        return len(self._cache)

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        """Link ids of the path from GPU `src` to GPU `dst` (() for src == dst)."""
        return self.route_and_latency(src, dst)[0]

    def latency(self, src: int, dst: int) -> float:
        """Seconds of the route's link latencies, added link by link from the source."""
        return self.route_and_latency(src, dst)[1]

    def route_and_latency(self, src: int, dst: int) -> tuple[tuple[int, ...], float]:
        key = src * self._num_gpus + dst
        found = self._cache.get(key)
        if found is None:
            if not (0 <= src < self._num_gpus and 0 <= dst < self._num_gpus):
                raise KeyError((src, dst))
            hops = self._hops(src, dst)
            latency = 0.0
            for _link, seconds in hops:  # (added link by link from the source)
                latency += seconds
            found = self._cache[key] = (tuple(link for link, _s in hops), latency)
        return found

    def _hops(self, src: int, dst: int) -> list[Hop]:
        if src == dst:
            return []
        a, b = self._port(src), self._port(dst)
        if a.switch == b.switch:
            return [a.to_switch, b.from_switch]
        if a.host is not None and b.host is not None and a.server == b.server:  # a PCIe node, through its host
            across = [] if a.host == b.host else [_hop(self.graph.succ, a.host, b.host)]
            return [a.to_switch, a.host_up, *across, b.host_down, b.from_switch]
        out, proxy = self._exit(a, b)
        hops = [a.to_switch, proxy.from_switch, proxy.to_nic] if proxy is not a else [a.to_nic]
        hops.append(out.nic_up)
        if out.leaf != b.leaf:
            hops += self._switch_hops(out, b)
        hops += [b.nic_down, b.from_nic]
        return hops

    def nodes(self, src: int, dst: int) -> list[Node]:
        """The graph nodes a message from GPU `src` to GPU `dst` passes, both ends included."""
        if src == dst:
            return [("gpu", src)]
        a, b = self._port(src), self._port(dst)
        if a.switch == b.switch:
            return [("gpu", src), a.switch, ("gpu", dst)]
        if a.host is not None and b.host is not None and a.server == b.server:
            hosts = [a.host] if a.host == b.host else [a.host, b.host]
            return [("gpu", src), a.switch, *hosts, b.switch, ("gpu", dst)]
        out, proxy = self._exit(a, b)
        path: list[Node] = [("gpu", src)]
        if proxy is not a:
            path += [a.switch, ("gpu", self._place(a.switch, a.server, b.local))]  # type: ignore[list-item]
        path += [out.nic, out.leaf]  # type: ignore[list-item]
        if out.leaf != b.leaf:
            path += list(self._chosen(out, b)[1:])
        path += [b.nic, ("gpu", dst)]
        return path

    def _exit(self, a: _Port, b: _Port) -> tuple[_Port, _Port]:
        """The port a message from `a` to `b` (in another domain) leaves by, and the GPU whose NIC that is (`a`, or
        with PXN the GPU of a's server at b's place, its NIC on b's rail)."""
        if self._pxn and a.rail != b.rail:
            proxy = self._place(a.switch, a.server, b.local)
            if proxy is not None:
                p = self._port(proxy)
                if p.switch == a.switch and p.rail == b.rail:
                    return p, p
        return a, a

    def _chosen(self, out: _Port, b: _Port) -> tuple[Node, ...]:
        """The switch path, leaf to leaf, that D-mod-k / ECMP picks: the source and destination ports and the
        source's rail, modulo the number of equal-cost paths (in sorted order)."""
        paths = self.switch_paths(out.leaf, b.leaf)  # type: ignore[arg-type]
        return paths[(out.port + b.port + out.rail) % len(paths)]

    def _switch_hops(self, out: _Port, b: _Port) -> tuple[Hop, ...]:
        path = self._chosen(out, b)
        hops = self._path_hops.get(path)
        if hops is None:
            succ = self.graph.succ
            hops = self._path_hops[path] = tuple(_hop(succ, u, v) for u, v in zip(path, path[1:]))
        return hops

    def switch_paths(self, leaf_a: Node, leaf_b: Node) -> list[tuple[Node, ...]]:
        """Every shortest path between two leaves over switch nodes, in sorted order (found once per pair)."""
        key = (leaf_a, leaf_b)
        paths = self._switch_paths.get(key)
        if paths is None:
            paths = self._switch_paths[key] = sorted(_shortest_switch_paths(self._switch_succ, self._switch_pred,
                                                                              leaf_a, leaf_b))
            if not paths:
                raise ValueError(f"cluster.topology: no switch path from {_name(leaf_a)} to {_name(leaf_b)}")
        return paths

    def _port(self, gpu: int) -> _Port:
        found = self._ports.get(gpu)
        if found is None:
            found = self._ports[gpu] = _Port(self.graph, gpu)
        return found

    def _place(self, switch: Node, server: int, local: int) -> int | None:
        """The GPU at place `local` of `server` among the GPUs on `switch`, if there is one."""
        places = self._places.get(switch)
        if places is None:
            nodes = self.graph.nodes
            places = self._places[switch] = {(nodes[v].get("node", v[1]), nodes[v].get("local", 0)): v[1]
                                             for v in self.graph.succ[switch] if nodes[v]["kind"] == "gpu"}
        return places.get((server, local))


class _SwitchNeighbours(dict[Node, tuple[Node, ...]]):
    """A node's neighbours (by `adjacency`: the graph's succ or pred) that are switches, found on first use."""

    def __init__(self, graph: nx.DiGraph, adjacency: Any) -> None:
        super().__init__()
        self.nodes, self.adjacency = graph.nodes, adjacency

    def __missing__(self, u: Node) -> tuple[Node, ...]:
        nodes = self.nodes
        found = self[u] = tuple(v for v in self.adjacency[u] if nodes[v]["kind"] in SWITCH_KINDS)
        return found


def _shortest_switch_paths(succ: _SwitchNeighbours, pred: _SwitchNeighbours, a: Node,
                           b: Node) -> list[tuple[Node, ...]]:
    """All shortest paths from switch `a` to switch `b` through switch nodes: a breadth-first search from each end,
    one layer at a time (the smaller frontier first), stopped at the first depth where the two meet; then every
    path through the meeting layer, along the parents each search recorded."""
    if a == b:
        return [(a,)]
    # per end: each reached node's distance from it, and its parents (the nodes one closer to that end)
    dist_a: dict[Node, int] = {a: 0}
    dist_b: dict[Node, int] = {b: 0}
    up_a: dict[Node, list[Node]] = {a: []}
    up_b: dict[Node, list[Node]] = {b: []}
    front_a, front_b = [a], [b]
    meet: list[Node] = []
    while front_a and front_b and not meet:
        if len(front_a) <= len(front_b):
            front_a = _layer(front_a, dist_a, up_a, succ)
            meet = [x for x in front_a if x in dist_b]
        else:
            front_b = _layer(front_b, dist_b, up_b, pred)
            meet = [x for x in front_b if x in dist_a]
    paths: list[tuple[Node, ...]] = []
    for m in meet:
        for first in _walks(m, up_a):
            for second in _walks(m, up_b):
                paths.append((*reversed(first), *second[1:]))
    return paths


def _layer(front: list[Node], dist: dict[Node, int], up: dict[Node, list[Node]],
           adjacency: _SwitchNeighbours) -> list[Node]:
    """The next layer of a breadth-first search over switch nodes, recording each new node's distance and all
    its parents in `front`."""
    depth = dist[front[0]] + 1
    layer: list[Node] = []
    for u in front:
        for v in adjacency[u]:
            seen = dist.get(v)
            if seen is None:
                dist[v] = depth
                up[v] = [u]
                layer.append(v)
            elif seen == depth:
                up[v].append(u)
    return layer


def _walks(m: Node, up: dict[Node, list[Node]]) -> list[tuple[Node, ...]]:
    """The paths from `m` to its search's end, each step to a parent."""
    parents = up[m]
    if not parents:
        return [(m,)]
    return [(m, *rest) for p in parents for rest in _walks(p, up)]


def _name(node: Node) -> str:
    return f"{node[0]} {node[1]}" if len(node) == 2 else str(node)
