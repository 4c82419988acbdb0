"""The cluster's links by arithmetic: the id, ends, bandwidth, latency and kind of every directed link, computed
from the spec in O(1), without building the link tables (topology/graph.py builds them only when asked for).

The ids are the order in which the graph is built, two ids (u -> v, then v -> u) per physical link:
- per node, in node order: for each of its GPUs, GPU -> NVSwitch and back; then for each GPU, GPU -> its NIC and
  back (4 ids per GPU; only the last node may be partial, so node n's links start at 4 * n * gpus_per_node);
- then for each NIC, in global NIC order: NIC -> leaf and back (only when there is more than one node);
- then for each spine s and each leaf l: leaf -> spine and back, at index s * leaves + l;
- then, on a PCIe-only node (topology/pcie.py), per node its switches' uplinks and its inter-socket link. There
  each GPU's first two ids join it to its PCIe switch (kind pcie) instead of an NVSwitch.
tests/topology/test_links.py checks every id, end and figure against the tables of the explicit build.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from topology.cluster_spec import LEAF_DOWN_PORTS, ClusterSpec, Fabric

Node = tuple[str, int] | tuple[str, int, int]


def leaf_of_nic(spec: ClusterSpec, node: int, k: int) -> int:
    """Leaf switch of NIC k of `node` (module docstring of topology/graph.py: fabric shapes)."""
    if spec.fabric is Fabric.RAIL_OPTIMIZED:
        unit = node // LEAF_DOWN_PORTS
        return unit * spec.nics_per_node + k
    return (node * spec.nics_per_node + k) // LEAF_DOWN_PORTS


def fabric_size(spec: ClusterSpec) -> tuple[int, int]:
    """(leaves, spines) of the inter-node fabric: no leaf for one node, no spine under one leaf."""
    nodes = spec.num_nodes
    if nodes < 2:
        return 0, 0
    leaves = leaf_of_nic(spec, nodes - 1, spec.nics_per_node - 1) + 1  # the last NIC's leaf is the highest
    return leaves, (math.ceil(LEAF_DOWN_PORTS / spec.oversubscription) if leaves > 1 else 0)


@dataclass(frozen=True, slots=True)
class LinkIndex:
    """Closed-form link ids and figures of one validated cluster spec."""

    spec: ClusterSpec
    leaves: int
    spines: int
    nvlink_factor: dict[int, float]  # GPU -> bandwidth factor of its degraded NVLink port
    nic_factor: dict[int, float]  # global NIC index -> bandwidth factor of its degraded NIC (and PCIe path)

    nic_base: int = 0  # first NIC -> leaf id (4 per GPU before it)
    spine_base: int = 0  # first leaf -> spine id
    count: int = 0  # directed links in all
    uniform: bool = False  # one GPU kind and no degraded link: a link's figures follow from its kind
    pcie_base: int = 0  # first id of a PCIe-only node's uplinks and inter-socket links (= count without them)

    @classmethod
    def of(cls, spec: ClusterSpec) -> LinkIndex:
        nvlink_factor = {link.gpu: link.bandwidth_factor for link in spec.health.degraded_links
                         if link.gpu is not None}
        nic_factor = {link.node * spec.nics_per_node + (link.nic or 0): link.bandwidth_factor
                      for link in spec.health.degraded_links if link.node is not None}
        leaves, spines = fabric_size(spec)
        nic_base = 4 * spec.num_gpus
        spine_base = nic_base + 2 * spec.num_nodes * spec.nics_per_node
        pcie_base = spine_base + 2 * spines * leaves if leaves else nic_base
        count = pcie_base + (spec.num_nodes * spec.pcie.links_per_node if spec.pcie is not None else 0)
        # (a PCIe node's extra links have no translation stride: the shortcuts that need one stay off)
        uniform = not spec.node_groups and not spec.health.degraded_links and spec.pcie is None
        return cls(spec, leaves, spines, nvlink_factor, nic_factor, nic_base, spine_base, count, uniform, pcie_base)

    def latency_s(self, link: int) -> float:
        """Latency of `link` (its kind's: inside a node or across the fabric)."""
        if not 0 <= link < self.count:
            raise IndexError(f"link {link} out of range")
        inside = link < self.nic_base or link >= self.pcie_base
        return self.spec.intra_node_latency_s if inside else self.spec.inter_node_latency_s

    def kind_and_bandwidth(self, link: int) -> tuple[str, float]:
        """(kind, line rate in bytes/s) of `link`."""
        if not self.uniform or not 0 <= link < self.count:
            _ends, bw, _latency, kind = self.describe(link)
            return kind, bw
        spec = self.spec
        if link >= self.nic_base:
            return "ib", spec.nic_bandwidth_bytes_per_s
        gpn = spec.gpus_per_node
        node = link // (4 * gpn)
        if link - 4 * node * gpn < 2 * min(gpn, spec.num_gpus - node * gpn):
            return "nvlink", spec.nvlink_bandwidth_bytes_per_s
        return "pcie", spec.hardware.pcie_bandwidth_bytes_per_s

    def _gpu_slot(self, gpu: int) -> tuple[int, int]:
        """(first id of the GPU's node, GPUs on that node) and the GPU's place on it, as (base + 2 * local, count)."""
        spec = self.spec
        gpn = spec.gpus_per_node
        node = gpu // gpn
        return 4 * node * gpn + 2 * (gpu - node * gpn), min(gpn, spec.num_gpus - node * gpn)

    def nvlink_up(self, gpu: int) -> int:
        """GPU -> its NVSwitch (+1: back)."""
        return self._gpu_slot(gpu)[0]

    def pcie_up(self, gpu: int) -> int:
        """GPU -> its NIC (+1: back)."""
        slot, on_node = self._gpu_slot(gpu)
        return slot + 2 * on_node

    def nic_up(self, nic: int) -> int:
        """NIC -> its leaf (+1: back)."""
        return 4 * self.spec.num_gpus + 2 * nic

    def leaf_up(self, leaf: int, spine: int) -> int:
        """Leaf -> spine (+1: back)."""
        return self.spine_base + 2 * (spine * self.leaves + leaf)

    def domain_links(self, domain: int) -> set[int]:
        """Links that touch NVLink domain `domain`: its GPUs' NVLink and PCIe links are one run of ids, its NICs'
        links to their leaves another."""
        spec = self.spec
        first = domain * spec.domain_gpus
        end = min(first + spec.domain_gpus, spec.num_gpus)
        found = set(range(self.nvlink_up(first), self.pcie_up(end - 1) + 2))
        pcie = spec.pcie
        if pcie is not None:
            nodes = range(first // spec.gpus_per_node, -(-end // spec.gpus_per_node))
            found.update(range(self.pcie_base + nodes[0] * pcie.links_per_node,
                               self.pcie_base + (nodes[-1] + 1) * pcie.links_per_node))
        if self.leaves:
            nics = spec.nics_per_node
            found.update(range(self.nic_up(first // spec.gpus_per_node * nics),
                               self.nic_up(-(-end // spec.gpus_per_node) * nics)))
        return found

    def leaf_of(self, nic: int) -> int:
        per = self.spec.nics_per_node
        return leaf_of_nic(self.spec, nic // per, nic % per)

    def ends(self, link: int) -> tuple[Node, Node]:
        return self.describe(link)[0]

    def describe(self, link: int) -> tuple[tuple[Node, Node], float, float, str]:
        """((u, v), bandwidth bytes/s, latency s, kind) of directed link `link`."""
        spec = self.spec
        if not 0 <= link < self.count:
            raise IndexError(f"link {link} out of range")
        pair, back = divmod(link, 2)
        if link < self.nic_base:
            gpn = spec.gpus_per_node
            node = link // (4 * gpn)
            first = node * gpn
            on_node = min(gpn, spec.num_gpus - first)
            offset = pair - 2 * first
            if offset < on_node:
                gpu = first + offset
                u: Node = ("gpu", gpu)
                v: Node = switch_of(spec, gpu)
                bw = spec.nvlink_bandwidth_of(gpu) * self.nvlink_factor.get(gpu, 1.0)
                kind = "nvlink" if spec.pcie is None else "pcie"
            else:
                gpu = first + offset - on_node
                nic = node * spec.nics_per_node + (gpu - first) % spec.nics_per_node
                u, v = ("gpu", gpu), ("nic", nic)
                bw = spec.hardware_of(gpu).pcie_bandwidth_bytes_per_s * self.nic_factor.get(nic, 1.0)
                kind = "pcie"
            latency = spec.intra_node_latency_s
        elif link >= self.pcie_base:
            ends, bw = self._pcie_link(link - self.pcie_base)  # (already turned round for a back link)
            return ends, bw, spec.intra_node_latency_s, "pcie"
        elif link < self.spine_base:
            nic = pair - 2 * spec.num_gpus
            u, v = ("nic", nic), ("leaf", self.leaf_of(nic))
            bw = spec.nic_bandwidth_of(nic // spec.nics_per_node) * self.nic_factor.get(nic, 1.0)
            kind, latency = "ib", spec.inter_node_latency_s
        else:
            spine, leaf = divmod(pair - self.spine_base // 2, self.leaves)
            u, v = ("leaf", leaf), ("spine", spine)
            bw, kind, latency = spec.nic_bandwidth_bytes_per_s, "ib", spec.inter_node_latency_s
        return ((v, u) if back else (u, v)), bw, latency, kind

    def _pcie_link(self, offset: int) -> tuple[tuple[Node, Node], float]:
        """Ends (up, or back for an odd offset) and line rate of the PCIe block's link at `offset`."""
        pcie = self.spec.pcie
        assert pcie is not None
        node, within = divmod(offset, pcie.links_per_node)
        pair, back = divmod(within, 2)
        if pair < pcie.switches:
            switch = node * pcie.switches + pair
            u: Node = ("pcie_switch", switch)
            v: Node = ("host", pcie.socket_of_switch(switch))
            bw = pcie.uplink_bandwidth_bytes_per_s
        else:
            u, v = ("host", node * pcie.sockets), ("host", node * pcie.sockets + 1)
            bw = pcie.socket_bandwidth_bytes_per_s
        return ((v, u) if back else (u, v)), bw

    def pcie_link(self, u: Node, v: Node) -> int:
        """Id of a PCIe block's link u -> v (a switch's uplink or the inter-socket link); KeyError if none."""
        pcie = self.spec.pcie
        if pcie is None:
            raise KeyError((u, v))
        for a, b, back in ((u, v, 0), (v, u, 1)):
            if a[0] == "pcie_switch" and b[0] == "host" and 0 <= a[1] < self.spec.num_nodes * pcie.switches \
                    and b[1] == pcie.socket_of_switch(a[1]):
                node, local = divmod(a[1], pcie.switches)
                return self.pcie_base + node * pcie.links_per_node + 2 * local + back
            if a[0] == b[0] == "host" and pcie.sockets == 2 and a[1] % 2 == 0 and b[1] == a[1] + 1 \
                    and a[1] // 2 < self.spec.num_nodes:
                return self.pcie_base + a[1] // 2 * pcie.links_per_node + 2 * pcie.switches + back
        raise KeyError((u, v))

    def link(self, u: Node, v: Node) -> int:
        """Id of the directed link u -> v; KeyError if the graph has no such edge."""
        spec = self.spec
        if spec.pcie is not None and "host" in (u[0], v[0]):
            return self.pcie_link(u, v)
        for a, b, up in ((u, v, 0), (v, u, 1)):
            kind_a, kind_b = a[0], b[0]
            ia, ib = a[1], b[1]
            if kind_a == "gpu" and 0 <= ia < spec.num_gpus:
                if (kind_b, ib) == switch_of(spec, ia):
                    return self.nvlink_up(ia) + up
                node = ia // spec.gpus_per_node
                nic = node * spec.nics_per_node + (ia % spec.gpus_per_node) % spec.nics_per_node
                if kind_b == "nic" and ib == nic:
                    return self.pcie_up(ia) + up
            if (kind_a == "nic" and kind_b == "leaf" and self.leaves and 0 <= ia < spec.num_nodes * spec.nics_per_node
                    and ib == self.leaf_of(ia)):
                return self.nic_up(ia) + up
            if kind_a == "leaf" and kind_b == "spine" and 0 <= ia < self.leaves and 0 <= ib < self.spines:
                return self.leaf_up(ia, ib) + up
        raise KeyError((u, v))


def switch_of(spec: ClusterSpec, gpu: int) -> Node:
    """The switch a GPU's first link joins it to: its NVLink domain's NVSwitch, or on a PCIe-only node its PCIe
    switch."""
    if spec.pcie is not None:
        return ("pcie_switch", spec.pcie.switch_of(gpu, spec.gpus_per_node))
    return ("nvswitch", gpu // spec.domain_gpus)


class PerLink(Protocol):
    """A figure per link id: a list of every link's, or LinkValues."""

    def __getitem__(self, link: int, /) -> float: ...


class LinkValues(dict[int, float]):
    """A per-link figure computed on first use and kept: reads like the full table indexed by link id, at a
    dict's speed, without computing the figure of links nothing asks about."""

    def __init__(self, figure: Callable[[int], float]) -> None:
        super().__init__()
        self.figure = figure

    def __missing__(self, link: int) -> float:
        value = self[link] = self.figure(link)
        return value
