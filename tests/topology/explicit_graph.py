"""The cluster's link tables built edge by edge, as topology/graph.py built them before its links were computed
by arithmetic (topology/links.py): the reference that tests/topology/test_links.py holds the arithmetic to."""

from __future__ import annotations

import math

from topology.cluster_spec import LEAF_DOWN_PORTS, ClusterSpec, Fabric
from topology.links import Node

Tables = tuple[list[tuple[Node, Node]], list[float], list[float], list[str]]


def _leaf_of_nic(spec: ClusterSpec, node: int, k: int) -> int:
    if spec.fabric is Fabric.RAIL_OPTIMIZED:
        unit = node // LEAF_DOWN_PORTS
        return unit * spec.nics_per_node + k
    return (node * spec.nics_per_node + k) // LEAF_DOWN_PORTS


def explicit_tables(spec: ClusterSpec) -> Tables:
    """(ends, bandwidth bytes/s, latency s, kind) of every directed link, in link-id order."""
    ends: list[tuple[Node, Node]] = []
    bws: list[float] = []
    lats: list[float] = []
    kinds: list[str] = []

    def add_pair(u: Node, v: Node, bw: float, lat: float, kind: str) -> None:
        ends.extend(((u, v), (v, u)))
        bws.extend((bw, bw))
        lats.extend((lat, lat))
        kinds.extend((kind, kind))

    nvlink_factor = {link.gpu: link.bandwidth_factor for link in spec.health.degraded_links if link.gpu is not None}
    nic_factor = {link.node * spec.nics_per_node + (link.nic or 0): link.bandwidth_factor
                  for link in spec.health.degraded_links if link.node is not None}
    nodes = spec.num_nodes
    nic_leaf: list[int] = []
    for n in range(nodes):
        first = n * spec.gpus_per_node
        switch: Node = ("nvswitch", first // spec.domain_gpus)
        for i in range(first, min(first + spec.gpus_per_node, spec.num_gpus)):
            add_pair(("gpu", i), switch, spec.nvlink_bandwidth_of(i) * nvlink_factor.get(i, 1.0),
                     spec.intra_node_latency_s, "nvlink")
        for k in range(spec.nics_per_node):
            nic_leaf.append(_leaf_of_nic(spec, n, k))
        for i in range(first, min(first + spec.gpus_per_node, spec.num_gpus)):
            nic_index = n * spec.nics_per_node + (i - first) % spec.nics_per_node
            add_pair(("gpu", i), ("nic", nic_index),
                     spec.hardware_of(i).pcie_bandwidth_bytes_per_s * nic_factor.get(nic_index, 1.0),
                     spec.intra_node_latency_s, "pcie")
    if nodes > 1:
        leaves = max(nic_leaf) + 1
        for nic_index, leaf in enumerate(nic_leaf):
            add_pair(("nic", nic_index), ("leaf", leaf),
                     spec.nic_bandwidth_of(nic_index // spec.nics_per_node) * nic_factor.get(nic_index, 1.0),
                     spec.inter_node_latency_s, "ib")
        if leaves > 1:
            for s in range(math.ceil(LEAF_DOWN_PORTS / spec.oversubscription)):
                for leaf in range(leaves):
                    add_pair(("leaf", leaf), ("spine", s), spec.nic_bandwidth_bytes_per_s,
                             spec.inter_node_latency_s, "ib")
    return ends, bws, lats, kinds
