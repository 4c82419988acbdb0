"""The routes of the built-in fabrics in closed form, as topology/routing.py computed them before routes were found
on the cluster's networkx graph: the oracle that tests/topology/test_routing.py holds the graph's routes equal to.

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
from topology.routing import Router


class ArithmeticRouter(Router):
    """Routes of one built-in cluster, cached per (src, dst) GPU pair. `route_and_latency` computes the link ids
    by arithmetic (topology/links.py); `nodes` names the same path's graph nodes. It takes `route`, `latency` and
    `routed` from the graph's Router, and builds no graph (its __init__ is its own)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._cache: dict[int, tuple[tuple[int, ...], float]] = {}  # src * num_gpus + dst -> (links, latency)
        spec, index = cluster.spec, cluster.index
        self._shape = (spec.num_gpus, spec.gpus_per_node, spec.nics_per_node, spec.domain_gpus,
                       spec.fabric is Fabric.RAIL_OPTIMIZED, index.nic_base, index.spine_base, index.leaves,
                       cluster.num_spines)
        # a link's latency is its kind's (topology/links.py, LinkIndex.latency_s): inside a node below nic_base
        self._latencies = (spec.intra_node_latency_s, spec.inter_node_latency_s)

    def route_and_latency(self, src: int, dst: int) -> tuple[tuple[int, ...], float]:
        key = src * self._shape[0] + dst
        found = self._cache.get(key)
        if found is None:
            if not (0 <= src < self._shape[0] and 0 <= dst < self._shape[0]):
                raise KeyError((src, dst))
            path = self._links(src, dst)
            latency, (intra, inter), nic_base = 0.0, self._latencies, self._shape[5]
            for link in path:  # (added link by link from the source, as LinkIndex.latency_s gives them)
                latency += intra if link < nic_base else inter
            found = self._cache[key] = (path, latency)
        return found

    def _links(self, src: int, dst: int) -> tuple[int, ...]:
        # the ids of topology/links.py, inlined: GPU g of node n (k GPUs on it) has NVLink up 4ng + 2(g - ng)
        # and PCIe up that + 2k; NIC i's link to its leaf is nic_base + 2i; leaf l to spine s spine_base + 2(sL + l)
        gpus, gpn, nics, domain, rail, nic_base, spine_base, leaves, spines = self._shape
        if src == dst:
            return ()
        node_a, node_b = src // gpn, dst // gpn
        local_a, local_b = src - node_a * gpn, dst - node_b * gpn
        if src // domain == dst // domain:
            return 4 * node_a * gpn + 2 * local_a, 4 * node_b * gpn + 2 * local_b + 1
        rail_a, rail_b = local_a % nics, local_b % nics
        nic_a, nic_b = node_a * nics + rail_a, node_b * nics + rail_b
        head: tuple[int, ...]
        proxy = node_a * gpn + local_b
        if rail and rail_a != rail_b and proxy < gpus and local_b % nics == rail_b:
            # PXN: NVLink to the source node's GPU on the destination's rail, out through its NIC
            base = 4 * node_a * gpn
            on_node = min(gpn, gpus - node_a * gpn)
            head = (base + 2 * local_a, base + 2 * local_b + 1, base + 2 * local_b + 2 * on_node)
            nic_a = node_a * nics + rail_b
        else:
            head = (4 * node_a * gpn + 2 * local_a + 2 * min(gpn, gpus - node_a * gpn),)
        tail = (nic_base + 2 * nic_b + 1, 4 * node_b * gpn + 2 * local_b + 2 * min(gpn, gpus - node_b * gpn) + 1)
        # leaves (topology/links.py, leaf_of_nic): unit x nics + rail in a rail-optimized fabric, else NICs in order
        if rail:
            leaf_a = node_a // LEAF_DOWN_PORTS * nics + nic_a % nics
            leaf_b = node_b // LEAF_DOWN_PORTS * nics + rail_b
        else:
            leaf_a, leaf_b = nic_a // LEAF_DOWN_PORTS, nic_b // LEAF_DOWN_PORTS
        if leaf_a == leaf_b:
            return (*head, nic_base + 2 * nic_a, *tail)
        if rail:  # (_spine, inlined): a NIC's port is its place under its leaf
            spine = (node_a % LEAF_DOWN_PORTS + node_b % LEAF_DOWN_PORTS + nic_a % nics) % spines
        else:
            spine = (nic_a % LEAF_DOWN_PORTS + nic_b % LEAF_DOWN_PORTS + nic_a % nics) % spines
        return (*head, nic_base + 2 * nic_a, spine_base + 2 * (spine * leaves + leaf_a),
                spine_base + 2 * (spine * leaves + leaf_b) + 1, *tail)

    def _spine(self, nic_a: int, nic_b: int) -> int:
        nics = self.cluster.spec.nics_per_node
        rail = self.cluster.spec.fabric is Fabric.RAIL_OPTIMIZED  # a NIC's port: its place under its leaf
        port_a = (nic_a // nics if rail else nic_a) % LEAF_DOWN_PORTS
        port_b = (nic_b // nics if rail else nic_b) % LEAF_DOWN_PORTS
        return (port_a + port_b + nic_a % nics) % self.cluster.num_spines

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
        leaf_a, leaf_b = c.index.leaf_of(nic_a), c.index.leaf_of(nic_b)
        path += [("nic", nic_a), ("leaf", leaf_a)]
        if leaf_a != leaf_b:
            path += [("spine", self._spine(nic_a, nic_b)), ("leaf", leaf_b)]
        path += [("nic", nic_b), ("gpu", dst)]
        return path
