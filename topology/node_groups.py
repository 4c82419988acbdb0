"""Heterogeneous clusters: the cluster's nodes in groups, each group with its own GPU kind (the request's
`cluster.node_groups`).

Groups fill the cluster in order: group 0's nodes come first (GPUs 0 .. its nodes x gpus_per_node - 1), then
group 1's, and so on. Every group joins the same inter-node fabric (topology/graph.py builds the graph group by
group). A group's GPU sets its compute (peak FLOP/s, HBM bandwidth and capacity, its GEMM efficiencies by
generation) and its PCIe path to the NICs; its NVLink and NIC bandwidths are its own (the converter fills them
from the GPU kind's catalog node or the cluster's, see docs/usage.md). All groups share the cluster's
`gpus_per_node` and `nics_per_node`: ranks are placed and NICs numbered node by node on one node shape (a group
that names another count is refused).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from topology.errors import SpecError
from topology.hardware import GPUS, GpuKind, GpuSpec


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """`num_nodes` whole nodes of one GPU kind. Bandwidths per direction, bytes/s."""

    num_nodes: int
    gpu: GpuKind
    gpus_per_node: int
    nvlink_bandwidth_bytes_per_s: float  # per GPU, through its node's switch
    nics_per_node: int
    nic_bandwidth_bytes_per_s: float  # per NIC
    gpu_spec: GpuSpec | None = None  # a user-defined GPU (`gpu` then names the catalog GPU nearest to it)

    @property
    def hardware(self) -> GpuSpec:
        return self.gpu_spec if self.gpu_spec is not None else GPUS[self.gpu]


def validate_groups(groups: Sequence[NodeGroup], num_gpus: int, gpus_per_node: int, nics_per_node: int) -> None:
    """Raise SpecError naming the first group field that breaks a rule: node counts >= 1 that add up to the
    cluster, the cluster's node shape (gpus_per_node, nics_per_node), positive bandwidths."""
    for i, group in enumerate(groups):
        where = f"cluster.node_groups[{i}]"
        if group.num_nodes < 1:
            raise SpecError(f"{where}.num_nodes", "must be >= 1")
        if group.gpus_per_node != gpus_per_node:
            raise SpecError(f"{where}.gpus_per_node",
                            f"is {group.gpus_per_node}, but every group must have the cluster's gpus_per_node "
                            f"({gpus_per_node}): ranks are placed node by node on one node shape")
        if group.nics_per_node != nics_per_node:
            raise SpecError(f"{where}.nics_per_node",
                            f"is {group.nics_per_node}, but every group must have the cluster's nics_per_node "
                            f"({nics_per_node}): the fabric numbers NICs node by node")
        if not (math.isfinite(group.nvlink_bandwidth_bytes_per_s) and group.nvlink_bandwidth_bytes_per_s > 0):
            raise SpecError(f"{where}.nvlink_bandwidth_gb_per_s", "must be > 0")
        if not (math.isfinite(group.nic_bandwidth_bytes_per_s) and group.nic_bandwidth_bytes_per_s > 0):
            raise SpecError(f"{where}.nic_bandwidth_gbit_per_s", "must be > 0")
    nodes = sum(group.num_nodes for group in groups)
    if nodes * gpus_per_node != num_gpus:
        raise SpecError("cluster.node_groups",
                        f"the groups' nodes ({' + '.join(str(g.num_nodes) for g in groups)} = {nodes}) x "
                        f"gpus_per_node ({gpus_per_node}) = {nodes * gpus_per_node} GPUs must add up to the "
                        f"cluster's {num_gpus}")


def group_of_node(groups: Sequence[NodeGroup], node: int) -> int:
    """Index of the group that node `node` belongs to (groups fill the cluster in order)."""
    first = 0
    for i, group in enumerate(groups):
        first += group.num_nodes
        if node < first:
            return i
    raise IndexError(f"node {node} is outside the groups' {first} nodes")
