"""Deterministic routing between GPUs, found on the cluster's networkx graph (topology/cluster_graph.py), as tuples
of the link ids its edges carry.

Inside an NVLink domain: GPU -> its NVSwitch -> GPU. Between domains: GPU -> its NIC -> leaf -> the switches of a
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


class Router:
    """Routes of one cluster on its graph, cached per (src, dst) GPU pair."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.graph: nx.DiGraph = cluster.graph
        self._succ = self.graph.succ
        self._num_gpus = cluster.spec.num_gpus
        self._pxn = bool(self.graph.graph.get("pxn", False))
        self._cache: dict[int, tuple[tuple[int, ...], float]] = {}  # src * num_gpus + dst -> (links, latency)
        self._ports: dict[int, tuple[Node, Node, Node]] = {}  # GPU -> (its NVSwitch, its NIC, the NIC's leaf)
        self._switch_paths: dict[tuple[Node, Node], list[tuple[Node, ...]]] = {}
        self._places: dict[tuple[int, int], int] | None = None  # (server, place on it) -> GPU
        # a switch's switch neighbours, read off the graph once each: downstream, upstream
        self._switch_succ = _SwitchNeighbours(self.graph, self._succ)
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
            succ = self._succ
            path = self.nodes(src, dst)
            links, latency = [], 0.0
            for u, v in zip(path, path[1:]):
                edge = succ[u][v]
                links.append(edge["link_id"])
                latency += edge["latency_s"]  # (added link by link from the source)
            found = self._cache[key] = (tuple(links), latency)
        return found

    def nodes(self, src: int, dst: int) -> list[Node]:
        """The graph nodes a message from GPU `src` to GPU `dst` passes, both ends included."""
        a, b = ("gpu", src), ("gpu", dst)
        if src == dst:
            return [a]
        switch_a, nic_a, leaf_a = self._ports_of(src)
        switch_b, nic_b, leaf_b = self._ports_of(dst)
        if switch_a == switch_b:
            return [a, switch_a, b]
        head: list[Node] = [a]
        if self._pxn:
            nodes = self.graph.nodes
            rail_b = nodes[nic_b]["rail"]
            if nodes[nic_a]["rail"] != rail_b:
                proxy = self._place(nodes[a]["node"], nodes[b]["local"])
                if proxy is not None:
                    switch_p, nic_p, leaf_p = self._ports_of(proxy)
                    if switch_p == switch_a and nodes[nic_p]["rail"] == rail_b:
                        head += [switch_a, ("gpu", proxy)]
                        nic_a, leaf_a = nic_p, leaf_p
        head += [nic_a, leaf_a]
        tail: list[Node] = [nic_b, b]
        if leaf_a == leaf_b:
            return [*head, *tail]
        paths = self.switch_paths(leaf_a, leaf_b)
        chosen = paths[self._hash(nic_a, nic_b) % len(paths)]
        return [*head, *chosen[1:-1], leaf_b, *tail]

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

    def _hash(self, nic_a: Node, nic_b: Node) -> int:
        """D-mod-k / ECMP: the source and destination ports and the source's rail."""
        nodes = self.graph.nodes
        a, b = nodes[nic_a], nodes[nic_b]
        return a.get("port", nic_a[1]) + b.get("port", nic_b[1]) + a.get("rail", 0)

    def _ports_of(self, gpu: int) -> tuple[Node, Node, Node]:
        """(NVSwitch, NIC, the NIC's leaf) of `gpu`, read off its edges once."""
        found = self._ports.get(gpu)
        if found is None:
            nodes, succ = self.graph.nodes, self._succ
            switch = nic = leaf = None
            for v in succ[("gpu", gpu)]:
                kind = nodes[v]["kind"]
                if kind == "nvswitch":
                    switch = v
                elif kind == "nic":
                    nic = v
            if nic is not None:
                leaf = next((v for v in succ[nic] if nodes[v]["kind"] in SWITCH_KINDS), None)
            if switch is None or nic is None:
                raise ValueError(f"cluster.topology: gpu {gpu} needs an edge to an nvswitch and to a nic")
            found = self._ports[gpu] = (switch, nic, leaf)  # type: ignore[assignment]
        return found  # type: ignore[return-value]

    def _place(self, server: int, local: int) -> int | None:
        """The GPU at place `local` of `server`, if there is one."""
        if self._places is None:
            self._places = {(attrs["node"], attrs["local"]): key[1] for key, attrs in self.graph.nodes.items()
                            if attrs["kind"] == "gpu"}
        return self._places.get((server, local))


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
