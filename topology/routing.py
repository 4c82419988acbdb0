"""Deterministic routing between GPUs over the cluster graph, as tuples of link ids.

Inside an NVLink domain (a node, or the nodes that `nvlink_domain_gpus` joins): GPU -> NVSwitch -> GPU.
Between domains: GPU -> its NIC -> leaf -> (spine) -> leaf -> the
destination GPU's NIC -> GPU. The spine is chosen the way a D-mod-k fat-tree router (or deterministic ECMP)
would: from the source and destination ports, so the same pair always takes the same path and the flows of a
symmetric pattern spread over the spines.

In a rail-optimized fabric a message between GPUs on different rails first crosses NVLink to the GPU of the
source node that sits on the destination's rail, then leaves through that GPU's NIC and stays on one rail (NCCL's
PXN, on by default since NCCL 2.12): it never needs a spine inside a scalable unit.
"""

from __future__ import annotations

from topology.cluster_spec import LEAF_DOWN_PORTS, Fabric
from topology.graph import Cluster, Node


class Router:
    """Routes of one cluster, cached per (src, dst) GPU pair."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._cache: dict[tuple[int, int], tuple[int, ...]] = {}

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        key = (src, dst)
        path = self._cache.get(key)
        if path is None:
            nodes, edge_link = self.nodes(src, dst), self.cluster.edge_link
            path = tuple(edge_link[pair] for pair in zip(nodes, nodes[1:]))
            self._cache[key] = path
        return path

    def nodes(self, src: int, dst: int) -> list[Node]:
        """The graph nodes a message from GPU `src` to GPU `dst` passes, both ends included."""
        c = self.cluster
        if src == dst:
            return [("gpu", src)]
        if c.domain_of(src) == c.domain_of(dst):
            return [("gpu", src), ("nvswitch", c.domain_of(src)), ("gpu", dst)]
        path: list[Node] = [("gpu", src)]
        nic_a, nic_b = c.nic_of(src), c.nic_of(dst)
        spec = c.spec
        if spec.fabric is Fabric.RAIL_OPTIMIZED and nic_a % spec.nics_per_node != nic_b % spec.nics_per_node:
            proxy = c.node_of(src) * spec.gpus_per_node + dst % spec.gpus_per_node
            if proxy < spec.num_gpus and c.nic_of(proxy) % spec.nics_per_node == nic_b % spec.nics_per_node:
                path += [("nvswitch", c.domain_of(src)), ("gpu", proxy)]
                nic_a = c.nic_of(proxy)
        leaf_a, leaf_b = c.nic_leaf[nic_a], c.nic_leaf[nic_b]
        path += [("nic", nic_a), ("leaf", leaf_a)]
        if leaf_a != leaf_b:
            port_a = (nic_a // c.spec.nics_per_node) % LEAF_DOWN_PORTS
            port_b = (nic_b // c.spec.nics_per_node) % LEAF_DOWN_PORTS
            spine = (port_a + port_b + nic_a % c.spec.nics_per_node) % c.num_spines
            path += [("spine", spine), ("leaf", leaf_b)]
        path += [("nic", nic_b), ("gpu", dst)]
        return path
