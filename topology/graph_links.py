"""The links of a user's cluster graph (topology/user_topology.py), read off the graph: the same calls as the
closed forms of the built-in fabrics (topology/links.py's LinkIndex), for a graph that has no closed form.

Link ids are the order of UserTopology.links (the two directions of a link adjacent). Nothing here assumes a
shape: a link's figures are its edge's, the links of an NVLink domain are the edges that touch its GPUs, switch
and NICs. `uniform` is False, so the cost model's shortcuts that rely on a fabric's regularity (translation
classes, symmetric copies) stay off and every flow is routed on the graph itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from topology.cluster_spec import ClusterSpec
from topology.user_topology import Node, UserTopology


@dataclass(frozen=True, slots=True)
class GraphLinks:
    """Link ids and figures of a cluster spec that carries a user topology."""

    spec: ClusterSpec
    topology: UserTopology
    leaves: int  # switches that NICs plug into
    spines: int  # the other switches
    count: int
    ids: dict[tuple[Node, Node], int] = field(repr=False)
    touching: dict[Node, list[int]] = field(repr=False)  # node -> the ids of the links it is an end of
    uniform: bool = False
    nic_base: int = 0  # no id run per kind: the shortcuts that read it are off (uniform is False)

    @classmethod
    def of(cls, spec: ClusterSpec) -> GraphLinks:
        topology = spec.topology
        if topology is None:
            raise ValueError("GraphLinks needs a cluster spec with a topology")
        ids: dict[tuple[Node, Node], int] = {}
        touching: dict[Node, list[int]] = {}
        for i, (u, v, _bw, _l, _k) in enumerate(topology.links):
            ids[(u, v)] = i
            touching.setdefault(u, []).append(i)
            touching.setdefault(v, []).append(i)
        leaves = {v for u, v, *_rest in topology.links if u[0] == "nic" and v[0] == "switch"}
        switches = sum(1 for key, _attrs in topology.nodes if key[0] == "switch")
        return cls(spec, topology, len(leaves), switches - len(leaves), len(topology.links), ids, touching)

    def _check(self, link: int) -> None:
        if not 0 <= link < self.count:
            raise IndexError(f"link {link} out of range")

    def latency_s(self, link: int) -> float:
        self._check(link)
        return self.topology.links[link][3]

    def kind_and_bandwidth(self, link: int) -> tuple[str, float]:
        self._check(link)
        _u, _v, bw, _latency, kind = self.topology.links[link]
        return kind, bw

    def ends(self, link: int) -> tuple[Node, Node]:
        self._check(link)
        u, v, *_rest = self.topology.links[link]
        return u, v

    def describe(self, link: int) -> tuple[tuple[Node, Node], float, float, str]:
        """((u, v), bandwidth bytes/s, latency s, kind) of directed link `link`."""
        self._check(link)
        u, v, bw, latency, kind = self.topology.links[link]
        return (u, v), bw, latency, kind

    def link(self, u: Any, v: Any) -> int:  # a graph node key (topology.links.Node)
        """Id of the directed link u -> v; KeyError if the graph has no such edge."""
        return self.ids[(u, v)]

    def domain_links(self, domain: int) -> set[int]:
        """Links that touch NVLink domain `domain`: its GPUs' links, its switch's, its NICs' (to their switch)."""
        spec = self.spec
        first, end = domain * spec.domain_gpus, min((domain + 1) * spec.domain_gpus, spec.num_gpus)
        per = spec.nics_per_node
        inside = {("nvswitch", domain)} | {("gpu", g) for g in range(first, end)} | {
            ("nic", n) for n in range(first // spec.gpus_per_node * per, -(-end // spec.gpus_per_node) * per)}
        return {i for node in inside for i in self.touching.get(node, ())}
