"""Cluster description (domain object) and the node presets of the contract."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from topology.errors import SpecError
from topology.hardware import GB, GPUS, GpuKind, GpuSpec
from topology.health import ClusterHealth
from topology.measured import Measured
from topology.node_groups import NodeGroup, group_of_node, validate_groups
from topology.pcie import PcieFabric
from topology.user_topology import UserTopology


class Fabric(StrEnum):
    FAT_TREE = "fat_tree"
    RAIL_OPTIMIZED = "rail_optimized"


# Ports a leaf switch gives to NICs. A 40-port HDR or 64-port NDR switch in a non-blocking two-level tree gives
# half its ports down; 32 keeps the numbers simple and matches a DGX SuperPOD scalable unit of 32 nodes per rail.
LEAF_DOWN_PORTS = 32


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A GPU cluster. Bandwidths per direction, in bytes/s; latencies per hop, in seconds. With `node_groups`
    (a heterogeneous cluster, topology/node_groups.py) each group's GPU and bandwidths replace the cluster's on its
    nodes; `gpu`, `gpu_spec` and the bandwidths above are then the first group's."""

    gpu: GpuKind
    num_gpus: int
    gpus_per_node: int
    nvlink_bandwidth_bytes_per_s: float
    nics_per_node: int
    nic_bandwidth_bytes_per_s: float
    fabric: Fabric
    oversubscription: float
    intra_node_latency_s: float
    inter_node_latency_s: float
    # A user-defined GPU (cluster.gpu_spec); `gpu` then names the catalog GPU nearest to it, whose GEMM
    # efficiencies it borrows. None: the catalog's `gpu`.
    gpu_spec: GpuSpec | None = None
    # GPUs that share one NVLink switch domain, in whole nodes (GB200 NVL72: 72). None: the node.
    nvlink_domain_gpus: int | None = None
    # Slow GPUs, degraded links, compute variability (topology/health.py); the default is a healthy cluster.
    health: ClusterHealth = ClusterHealth()
    # Heterogeneous clusters: the nodes in groups of their own GPU kind, in order; () = one kind throughout.
    node_groups: tuple[NodeGroup, ...] = ()
    # The user's own cluster graph (cluster.topology, topology/user_topology.py): its links and routes replace the
    # fabric's; the counts above are the graph's (service/convert_cluster.py sets them from it). None: the fabric.
    topology: UserTopology | None = None
    # The user's own measurements (cluster.measured, topology/measured.py): collective times and GEMM rates that
    # replace the cost model's where they exist. None: the model's figures throughout.
    measured: Measured | None = None
    # A PCIe-only node (topology/pcie.py): no NVLink; the GPUs reach each other through PCIe switches and the host,
    # and `nvlink_bandwidth_bytes_per_s` is then each GPU's PCIe link into its switch. None: an NVLink switch.
    pcie: PcieFabric | None = None

    @property
    def has_nvlink(self) -> bool:
        """Whether the GPUs of a node share an NVLink switch (False on a PCIe-only node)."""
        return self.pcie is None

    @property
    def num_nodes(self) -> int:
        return -(-self.num_gpus // self.gpus_per_node)

    @property
    def hardware(self) -> GpuSpec:
        """The GPU's figures: the user-defined GPU, else the catalog entry of `gpu`."""
        return self.gpu_spec if self.gpu_spec is not None else GPUS[self.gpu]

    def _group(self, gpu: int) -> NodeGroup | None:
        return self.node_groups[group_of_node(self.node_groups, gpu // self.gpus_per_node)] if self.node_groups \
            else None

    def hardware_of(self, gpu: int) -> GpuSpec:
        """The figures of GPU `gpu` (global index): its group's GPU, else the cluster's."""
        group = self._group(gpu)
        return group.hardware if group is not None else self.hardware

    def nvlink_bandwidth_of(self, gpu: int) -> float:
        group = self._group(gpu)
        return group.nvlink_bandwidth_bytes_per_s if group is not None else self.nvlink_bandwidth_bytes_per_s

    def nic_bandwidth_of(self, node: int) -> float:
        group = self._group(node * self.gpus_per_node)
        return group.nic_bandwidth_bytes_per_s if group is not None else self.nic_bandwidth_bytes_per_s

    @property
    def domain_gpus(self) -> int:
        """GPUs per NVLink switch domain."""
        return self.nvlink_domain_gpus if self.nvlink_domain_gpus is not None else self.gpus_per_node

    @property
    def domain_nics(self) -> int:
        """NICs of one NVLink domain: the node's, times the nodes a domain joins (`nvlink_domain_gpus`: a GB200
        NVL72 rack of compute trays has every tray's NICs). A collective's rings across domains can leave a domain
        through any of them (NCCL fuses the topologies of a multi-node NVLink clique into one node:
        NVIDIA/nccl @5067397c src/graph/topo.cc, "MNNVL clique support", ncclTopoFuseXml)."""
        return self.nics_per_node * max(1, self.domain_gpus // self.gpus_per_node)

    @property
    def host_gpus(self) -> int:
        """GPUs per host (one server, what nccl-tests' `# Using devices` lists a host name for): the node, but a
        Grace Blackwell compute tray where the node is a whole rack's NVLink domain (the gb200-nvl72 preset)."""
        tray = TRAY_GPUS.get(self.gpu)
        return tray if tray is not None and self.gpus_per_node > tray and self.gpus_per_node % tray == 0 \
            else self.gpus_per_node

    @property
    def peak_flops_per_s(self) -> float:
        return self.hardware.peak_flops_per_s

    def validate(self) -> ClusterSpec:
        """Raise SpecError naming the first field that breaks a rule; return self."""
        ints = {"cluster.num_gpus": self.num_gpus, "cluster.gpus_per_node": self.gpus_per_node,
                "cluster.nics_per_node": self.nics_per_node}
        for name, value in ints.items():
            if value < 1:
                raise SpecError(name, "must be >= 1")
        if self.nvlink_bandwidth_bytes_per_s <= 0:
            raise SpecError("cluster.nvlink_bandwidth_gb_per_s", "must be > 0")
        if self.nic_bandwidth_bytes_per_s <= 0:
            raise SpecError("cluster.nic_bandwidth_gbit_per_s", "must be > 0")
        if self.oversubscription < 1:
            raise SpecError("cluster.oversubscription", "must be >= 1 (1 = full bisection)")
        if self.intra_node_latency_s < 0 or self.inter_node_latency_s < 0:
            raise SpecError("cluster.inter_node_latency_us", "must be >= 0")
        domain = self.nvlink_domain_gpus
        if domain is not None:
            if domain < 1:
                raise SpecError("cluster.nvlink_domain_gpus", "must be >= 1")
            if domain > self.num_gpus:
                raise SpecError("cluster.nvlink_domain_gpus",
                                f"must not exceed the cluster's GPUs ({self.num_gpus}): a domain holds GPUs that exist")
            if domain % self.gpus_per_node:
                raise SpecError("cluster.nvlink_domain_gpus",
                                f"must be a multiple of gpus_per_node ({self.gpus_per_node}): "
                                "a domain joins whole nodes")
        if self.node_groups:
            validate_groups(self.node_groups, self.num_gpus, self.gpus_per_node, self.nics_per_node)
            if domain is not None and domain != self.gpus_per_node and len(self.node_groups) > 1:
                raise SpecError("cluster.nvlink_domain_gpus",
                                "must be the node with node_groups: an NVLink domain joins GPUs of one kind")
        if self.pcie is not None:
            self._validate_pcie(self.pcie)
        else:
            kinds = [("cluster.gpu", self.hardware)] + [(f"cluster.node_groups[{i}].gpu", g.hardware)
                                                       for i, g in enumerate(self.node_groups)]
            for name, gpu in kinds:
                if not gpu.has_nvlink and gpu.name == "":
                    raise SpecError(name, f"{gpu.label} has no NVLink: put it on a PCIe-only node (the l40s-pcie "
                                    "preset)")
        self.health.validate(self.num_gpus, self.num_nodes, self.nics_per_node)
        if self.topology is not None:
            self._validate_topology(self.topology)
        if self.measured is not None:
            self.measured.validate()
            if self.measured.gemms:
                self._validate_gemm_gpu()
        return self

    def _validate_gemm_gpu(self) -> None:
        """A GEMM sweep applies to the GPU it ran on: with node groups of several GPUs it must name one of them (a
        catalog GPU of a group), and a named GPU must be one the cluster has."""
        assert self.measured is not None
        gpus = [g.hardware for g in self.node_groups] or [self.hardware]
        catalog = sorted({str(h.kind) for h in gpus if h == GPUS[h.kind]})
        named = {g.gpu for g in self.measured.gemms}
        if None in named and len(set(gpus)) > 1:
            raise SpecError("cluster.measured.gemm.gpu", "is required with node_groups of several GPUs ("
                            f"{', '.join(sorted({h.label for h in gpus}))}): name the GPU the sweep ran on; it "
                            "applies to the groups of that GPU, the others keep the model's GEMM times")
        for kind in sorted(k for k in named if k is not None):
            if kind not in catalog:
                raise SpecError("cluster.measured.gemm.gpu", f"{kind} is not a GPU of this cluster (its catalog "
                                f"GPUs: {', '.join(catalog) or 'none, only user-defined ones'}): a sweep applies to "
                                "the GPU it ran on")

    def _validate_pcie(self, pcie: PcieFabric) -> None:
        pcie.validate(self.gpus_per_node)
        for name, given in (("cluster.nvlink_domain_gpus", self.nvlink_domain_gpus not in (None, self.gpus_per_node)),
                            ("cluster.node_groups", bool(self.node_groups)),
                            ("cluster.topology", self.topology is not None)):
            if given:
                raise SpecError(name, "cannot be given with a PCIe-only node (no NVLink): its GPUs talk through "
                                "PCIe switches and the host")

    def _validate_topology(self, t: UserTopology) -> None:
        if self.node_groups:
            raise SpecError("cluster.node_groups", "cannot be given with cluster.topology: one GPU kind per graph")
        if self.health.degraded_links:
            raise SpecError("cluster.degraded_links", "cannot be given with cluster.topology: give the link's "
                            "lower bandwidth_gb_per_s in the graph")
        shape = {"cluster.num_gpus": (self.num_gpus, t.gpus), "cluster.gpus_per_node": (self.gpus_per_node,
                 t.gpus_per_node), "cluster.nics_per_node": (self.nics_per_node, t.nics_per_node),
                 "cluster.nvlink_domain_gpus": (self.domain_gpus, t.domain_gpus)}
        for name, (given, graph) in shape.items():
            if given != graph:
                raise SpecError(name, f"must be the topology's ({graph}; given {given})")


def _node(gpu: GpuKind, gpus: int, nics: int, nic_gbit: float) -> ClusterSpec:
    return ClusterSpec(
        gpu=gpu,
        num_gpus=gpus,
        gpus_per_node=gpus,
        nvlink_bandwidth_bytes_per_s=GPUS[gpu].nvlink_bandwidth_bytes_per_s,
        nics_per_node=nics,
        nic_bandwidth_bytes_per_s=nic_gbit * GB / 8,
        fabric=Fabric.RAIL_OPTIMIZED,
        oversubscription=1.0,
        intra_node_latency_s=0.35e-6,
        inter_node_latency_s=1.0e-6,
    )


# GPUs in one host of a GPU kind whose NVLink domain spans hosts: a GB200 NVL72 rack is 18 compute trays of 4 GPUs
# (2 Grace CPUs and 4 Blackwell GPUs each, one operating system; topology/builders.nvl_racks builds them so).
TRAY_GPUS = {GpuKind.GB200_186GB: 4}

# One node of each kind; `num_nodes` / `num_gpus` of a request scales it. Sources: reference README §4, §10.
NODE_PRESETS: dict[str, ClusterSpec] = {
    "dgx-a100": _node(GpuKind.A100_80GB, 8, 8, 200),
    "dgx-a100-40gb": _node(GpuKind.A100_40GB, 8, 8, 200),
    "dgx-h100": _node(GpuKind.H100_80GB, 8, 8, 400),
    "dgx-h200": _node(GpuKind.H200_141GB, 8, 8, 400),
    "dgx-2-v100": _node(GpuKind.V100_32GB, 16, 8, 100),
    # DGX B200: 8 GPUs, 8 x 400 Gbit/s InfiniBand compute links (modern reference, `hardware` and its
    # hardware-b200 rows: dgxc-benchmarking README @841f546 "B200 Reference Architecture").
    "dgx-b200": _node(GpuKind.B200_180GB, 8, 8, 400),
    # GB200 NVL72: a node is the rack's 72-GPU NVLink domain (modern reference: nvlink_domain_gpus 72). Its
    # scale-out NIC rate is "not stated in the source"; assumed: one 400 Gbit/s InfiniBand NIC per GPU, as on
    # DGX H100 and DGX B200. Racks join through the InfiniBand fabric.
    "gb200-nvl72": _node(GpuKind.GB200_186GB, 72, 72, 400),
    # DGX B300: 8 B300 SXM GPUs, one ConnectX-8 at 800 Gbit/s per GPU (NVIDIA DGX B300 datasheet: "8x OSFP ports
    # serving 8x single-port NVIDIA ConnectX-8 VPI, up to 800Gb/s"; MLPerf v5.1 Nebius B300 system description:
    # "8x ConnectX-8 IB XDR 800Gb/s").
    "dgx-b300": _node(GpuKind.B300_288GB, 8, 8, 800),
    # GB300 NVL72: a node is the rack's 72-GPU NVLink domain; one ConnectX-8 at 800 Gbit/s per GPU (MLPerf v5.1
    # NVIDIA Theia system description, 1x GB300 NVL72: 18 trays of 4 GPUs, "4x ConnectX-8 IB XDR 800 Gb/s" each;
    # NVIDIA's GB300 NVL72 page: 72 ConnectX-8 SuperNICs).
    "gb300-nvl72": _node(GpuKind.GB300_288GB, 72, 72, 800),
    # 8 x L40S, PCIe only: NVIDIA's recommended L40S server is the "2-2-4" layout (2 CPU sockets, 2 PCIe Gen4
    # switches, 4 GPUs under each; naddod.com "High-Performance GPU Server Hardware Topology and Cluster
    # Networking-L40S", 2023), each GPU and each switch uplink PCIe Gen4 x16 (32 GB/s per direction); the sockets'
    # link at 22 GB/s, NCCL's own rating of an Intel Sapphire Rapids UPI link (NVIDIA/nccl @5067397c
    # src/graph/topo.h SRP_QPI_BW). NICs: one 200 Gbit/s NIC per 2 GPUs, the layout's 200 Gbit/s RoCE or IB
    # network (naddod, ibid.: "it is crucial to have a 200Gbps RoCE or IB network").
    "l40s-pcie": replace(_node(GpuKind.L40S_48GB, 8, 4, 200), nvlink_bandwidth_bytes_per_s=32 * GB,
                         pcie=PcieFabric(2, 2, 32 * GB, 22 * GB)),
}

NODE_PRESET_NOTES: dict[str, str] = {
    "dgx-a100": "8 x A100 80GB, NVSwitch (300 GB/s per GPU per direction), 8 x 200 Gbit/s HDR InfiniBand",
    "dgx-a100-40gb": "8 x A100 40GB, NVSwitch, 8 x 200 Gbit/s HDR InfiniBand",
    "dgx-h100": "8 x H100 80GB, NVSwitch (450 GB/s per GPU per direction), 8 x 400 Gbit/s NDR InfiniBand",
    "dgx-h200": "8 x H200 141GB, NVSwitch (450 GB/s per GPU per direction), 8 x 400 Gbit/s NDR InfiniBand",
    "dgx-2-v100": "16 x V100 32GB, NVSwitch (150 GB/s per GPU per direction), 8 x 100 Gbit/s EDR InfiniBand",
    "dgx-b200": "8 x B200 180GB, NVSwitch (900 GB/s per GPU per direction), 8 x 400 Gbit/s NDR InfiniBand",
    "gb200-nvl72": "72 x GB200 186GB in one NVLink domain (900 GB/s per GPU per direction), one 400 Gbit/s "
                   "InfiniBand NIC per GPU (assumed: the source states no NIC rate)",
    "dgx-b300": "8 x B300 (Blackwell Ultra, 268.6 GiB), NVSwitch (900 GB/s per GPU per direction), 8 x 800 Gbit/s "
                "ConnectX-8",
    "gb300-nvl72": "72 x GB300 (Blackwell Ultra, 277.5 GiB) in one NVLink domain (900 GB/s per GPU per direction), "
                   "one 800 Gbit/s ConnectX-8 per GPU",
    "l40s-pcie": "8 x L40S 48GB, no NVLink: 2 PCIe Gen4 switches of 4 GPUs under 2 CPU sockets (32 GB/s per GPU "
                 "and per uplink per direction, 22 GB/s between the sockets), 4 x 200 Gbit/s NICs",
}


def sized(spec: ClusterSpec, num_gpus: int) -> ClusterSpec:
    """The same cluster with `num_gpus` GPUs (the last node may be partial)."""
    return replace(spec, num_gpus=num_gpus)
