"""A PCIe-only node (no NVLink): GPUs under PCIe switches, the switches under the host's CPU sockets, the sockets
joined by their inter-socket link. What a node of L40S cards is.

Shape (per node, `switches` PCIe switches and `sockets` CPU sockets): GPU i of the node sits under switch
i // (gpus_per_node / switches); switch s hangs off socket s // (switches / sockets) by one x16 uplink; with two
sockets, one inter-socket link (UPI / xGMI) joins them. A message between two GPUs of one node goes GPU -> switch
-> GPU under one switch, else up through the switch's socket (and across to the other socket), down the other
switch. NCCL runs its rings over these paths: the GPUs of a switch next to each other, so a ring leaves each switch
once in each direction.

Simplifications, each named: a GPU's link into its switch and its link to its NIC are separate links (as on the
other presets: the NIC hangs off the same switch on the real server); the host forwards between its root ports at
the uplinks' rate, and only the inter-socket link is slower.

Link ids: after every other link of the cluster (topology/links.py), per node in node order: each switch's uplink
(switch -> socket, then back), then the inter-socket link (socket 0 -> socket 1, then back) when there are two.
Node keys: ("pcie_switch", node * switches + s) and ("host", node * sockets + k).
"""

from __future__ import annotations

from dataclasses import dataclass

from topology.errors import SpecError

__all__ = ["PcieFabric"]


@dataclass(frozen=True, slots=True)
class PcieFabric:
    """The PCIe tree of every node of a PCIe-only cluster. Bandwidths per direction, bytes/s."""

    switches: int  # PCIe switches per node, each with gpus_per_node / switches GPUs
    sockets: int  # CPU sockets per node: 1 or 2
    uplink_bandwidth_bytes_per_s: float  # a switch's x16 uplink to its socket
    socket_bandwidth_bytes_per_s: float  # the inter-socket link, as NCCL's topology search rates it (see preset)

    @property
    def links_per_node(self) -> int:
        """Directed links per node in the PCIe block: two per uplink, two for the inter-socket link."""
        return 2 * self.switches + (2 if self.sockets == 2 else 0)

    def switch_of(self, gpu: int, gpus_per_node: int) -> int:
        """Global index of the PCIe switch above `gpu`."""
        node, local = divmod(gpu, gpus_per_node)
        return node * self.switches + local // (gpus_per_node // self.switches)

    def socket_of_switch(self, switch: int) -> int:
        """Global index of the socket a switch hangs off."""
        node, local = divmod(switch, self.switches)
        return node * self.sockets + local // (self.switches // self.sockets)

    def validate(self, gpus_per_node: int) -> None:
        if self.switches < 1:
            raise SpecError("cluster.pcie.switches", "must be >= 1")
        if self.sockets not in (1, 2):
            raise SpecError("cluster.pcie.sockets", "must be 1 or 2")
        if self.switches % self.sockets:
            raise SpecError("cluster.pcie.switches", f"must be a multiple of the sockets ({self.sockets})")
        if gpus_per_node % self.switches:
            raise SpecError("cluster.gpus_per_node",
                            f"must be a multiple of the node's PCIe switches ({self.switches}): each switch holds "
                            "as many GPUs")
        if self.uplink_bandwidth_bytes_per_s <= 0 or self.socket_bandwidth_bytes_per_s <= 0:
            raise SpecError("cluster.pcie", "bandwidths must be > 0")
