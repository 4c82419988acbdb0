"""The request's `cluster` section -> the domain's ClusterSpec (part of service/convert.py's conversions, apart
by concept): a preset and its overrides, a user-defined GPU, stragglers, heterogeneous node groups, and the user's
own measurements (`cluster.measured`, beside whichever of the above).

Node groups (a heterogeneous cluster): each group's unset fields default to the cluster's (its GPU kind, node
shape and NIC rate), except NVLink, which belongs to the GPU: a group that names a catalog GPU gets its NVLink, a
group with a gpu_spec the spec's (else the cluster's), unless the group gives `nvlink_bandwidth_gb_per_s`. A
cluster with groups needs no preset or gpu (the first group's GPU's catalog node then gives the cluster's
figures); its size is the groups' nodes, and a `num_nodes` or `num_gpus` beside them must agree.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from api_schemas import GpuSpecIn, SimulationRequest
from api_schemas.cluster import ClusterIn, NodeGroupIn
from api_schemas.measured import MeasuredIn
from simcore import (
    GB,
    GIB,
    GPUS,
    NODE_PRESETS,
    ClusterHealth,
    ClusterSpec,
    DegradedLink,
    Fabric,
    GpuKind,
    GpuSpec,
    Measured,
    MeasuredCollective,
    MeasuredGemm,
    NodeGroup,
    SlowGpu,
    SpecError,
    nearest_catalog_gpu,
    parse_topology,
)

__all__ = ["to_cluster"]


def _base(c: ClusterIn) -> ClusterSpec:
    """The node preset the request starts from."""
    if c.preset is not None:
        if c.preset not in NODE_PRESETS:
            raise SpecError("cluster.preset",
                            f"unknown cluster preset '{c.preset}' (see `clustersim presets clusters`)")
        return NODE_PRESETS[c.preset]
    gpu, gpu_spec, where = c.gpu, c.gpu_spec, "cluster.gpu_spec"
    if gpu is None and gpu_spec is None and c.node_groups:  # the first group's GPU's catalog node
        gpu, gpu_spec, where = c.node_groups[0].gpu, c.node_groups[0].gpu_spec, "cluster.node_groups[0].gpu_spec"
    if gpu is not None:
        return next(spec for spec in NODE_PRESETS.values() if spec.gpu == GpuKind(gpu))
    if gpu_spec is not None:
        return next(spec for spec in NODE_PRESETS.values()
                    if spec.gpu == nearest_catalog_gpu(_peak_bf16(gpu_spec, where)).kind)
    raise SpecError("cluster.preset", "give a cluster preset, a gpu kind, a gpu_spec or node_groups")


def to_cluster(request: SimulationRequest) -> ClusterSpec:
    spec = _sized(request)
    measured = request.cluster.measured
    if measured is None:
        return spec
    return replace(spec, measured=to_measured(measured)).validate()


def to_measured(m: MeasuredIn) -> Measured:
    """The overlay's tables in the domain's units: sizes in bytes, times in seconds (the out-of-place time, as
    nccl-tests reports it first), GEMM rates in FLOP/s."""
    tables = tuple(MeasuredCollective(t.collective, t.ranks, t.nodes, tuple(float(p.size_bytes) for p in t.points),
                                      tuple(p.time_us * 1e-6 for p in t.points)) for t in m.collectives)
    sweep = m.gemm
    gemms = () if sweep is None else tuple(
        MeasuredGemm(float(p.m), float(p.n), float(p.k), p.dtype, p.tflops * 1e12, sweep.gpu) for p in sweep.points)
    return Measured(tables, gemms)


def _sized(request: SimulationRequest) -> ClusterSpec:
    c = request.cluster
    base = _base(c)
    if c.gpu is not None:
        if c.gpu_spec is not None:
            raise SpecError("cluster.gpu_spec", "give gpu or gpu_spec, not both")
        base = replace(base, gpu=GpuKind(c.gpu))
    if c.gpu_spec is not None:
        custom = _custom_gpu(c.gpu_spec, base.nvlink_bandwidth_bytes_per_s)
        base = replace(base, gpu=custom.kind, gpu_spec=custom,
                       nvlink_bandwidth_bytes_per_s=custom.nvlink_bandwidth_bytes_per_s)
    overrides: dict[str, Any] = {}
    if c.nvlink_domain_gpus is not None:
        overrides["nvlink_domain_gpus"] = c.nvlink_domain_gpus
    if c.gpus_per_node is not None:
        overrides["gpus_per_node"] = c.gpus_per_node
    if c.nvlink_bandwidth_gb_per_s is not None:
        overrides["nvlink_bandwidth_bytes_per_s"] = c.nvlink_bandwidth_gb_per_s * GB
    if c.nics_per_node is not None:
        overrides["nics_per_node"] = c.nics_per_node
    if c.nic_bandwidth_gbit_per_s is not None:
        overrides["nic_bandwidth_bytes_per_s"] = c.nic_bandwidth_gbit_per_s * GB / 8
    if c.fabric is not None:
        overrides["fabric"] = Fabric(c.fabric)
    if c.oversubscription is not None:
        overrides["oversubscription"] = float(c.oversubscription)
    if c.intra_node_latency_us is not None:
        overrides["intra_node_latency_s"] = c.intra_node_latency_us * 1e-6
    if c.inter_node_latency_us is not None:
        overrides["inter_node_latency_s"] = c.inter_node_latency_us * 1e-6
    if c.slow_gpus or c.degraded_links or c.compute_variability:
        overrides["health"] = ClusterHealth(
            slow_gpus=tuple(SlowGpu(s.gpu, s.compute_time_factor) for s in c.slow_gpus),
            degraded_links=tuple(DegradedLink(d.bandwidth_factor, d.node, d.nic, d.gpu) for d in c.degraded_links),
            compute_variability=c.compute_variability)
    spec = replace(base, **overrides)
    if c.node_groups:
        return _with_groups(spec, c, c.node_groups).validate()
    if c.topology is not None:
        return _with_topology(spec, c).validate()
    if c.num_nodes is not None:
        spec = replace(spec, num_gpus=c.num_nodes * spec.gpus_per_node)
    elif c.num_gpus is not None:
        spec = replace(spec, num_gpus=c.num_gpus)
    else:
        raise SpecError("cluster.num_nodes", "give num_nodes or num_gpus")
    return spec.validate()


# Fields the graph gives when cluster.topology is there; a request that also sets one is refused (it would be lost).
_GRAPH_GIVES = ("gpus_per_node", "nvlink_bandwidth_gb_per_s", "nics_per_node", "nic_bandwidth_gbit_per_s",
                "fabric", "oversubscription", "intra_node_latency_us", "inter_node_latency_us", "nvlink_domain_gpus")


def _with_topology(spec: ClusterSpec, c: ClusterIn) -> ClusterSpec:
    """`spec` on the user's graph: the GPU kind is the request's, the sizes, node shape, bandwidths and latencies
    the graph's (its fastest NVLink and NIC links are the nominal rates NCCL's tuning reads; every link's own
    figure is what its flows see)."""
    for name in _GRAPH_GIVES:
        if getattr(c, name) is not None:
            raise SpecError(f"cluster.{name}", "cannot be given with cluster.topology: the graph gives it")
    t = parse_topology(c.topology)
    if c.num_nodes is not None and c.num_nodes != t.num_nodes:
        raise SpecError("cluster.num_nodes", f"must be the topology's servers ({t.num_nodes}; given {c.num_nodes})")
    if c.num_gpus is not None and c.num_gpus != t.gpus:
        raise SpecError("cluster.num_gpus", f"must be the topology's GPUs ({t.gpus}; given {c.num_gpus})")
    return replace(spec, topology=t, num_gpus=t.gpus, gpus_per_node=t.gpus_per_node, nics_per_node=t.nics_per_node,
                   nvlink_domain_gpus=t.domain_gpus if t.domain_gpus != t.gpus_per_node else None,
                   nvlink_bandwidth_bytes_per_s=t.nvlink_bandwidth_bytes_per_s,
                   nic_bandwidth_bytes_per_s=t.nic_bandwidth_bytes_per_s or spec.nic_bandwidth_bytes_per_s,
                   fabric=Fabric.RAIL_OPTIMIZED if t.pxn else Fabric.FAT_TREE, oversubscription=1.0,
                   intra_node_latency_s=t.intra_latency_s,
                   inter_node_latency_s=t.inter_latency_s if t.nics_per_node and t.num_nodes > 1
                   else spec.inter_node_latency_s)


def _with_groups(spec: ClusterSpec, c: ClusterIn, docs: list[NodeGroupIn]) -> ClusterSpec:
    """`spec` made of the node groups (see the module docstring); the cluster's GPU becomes the first group's."""
    groups = []
    for i, doc in enumerate(docs):
        where = f"cluster.node_groups[{i}]"
        if doc.gpu is not None and doc.gpu_spec is not None:
            raise SpecError(f"{where}.gpu_spec", "give gpu or gpu_spec, not both")
        kind, custom, nvlink = spec.gpu, spec.gpu_spec, spec.nvlink_bandwidth_bytes_per_s
        if doc.gpu is not None:
            kind, custom, nvlink = GpuKind(doc.gpu), None, GPUS[GpuKind(doc.gpu)].nvlink_bandwidth_bytes_per_s
        elif doc.gpu_spec is not None:
            custom = _custom_gpu(doc.gpu_spec, spec.nvlink_bandwidth_bytes_per_s, f"{where}.gpu_spec")
            kind, nvlink = custom.kind, custom.nvlink_bandwidth_bytes_per_s
        if doc.nvlink_bandwidth_gb_per_s is not None:
            nvlink = doc.nvlink_bandwidth_gb_per_s * GB
        groups.append(NodeGroup(
            num_nodes=doc.num_nodes, gpu=kind, gpu_spec=custom,
            gpus_per_node=doc.gpus_per_node if doc.gpus_per_node is not None else spec.gpus_per_node,
            nvlink_bandwidth_bytes_per_s=nvlink,
            nics_per_node=doc.nics_per_node if doc.nics_per_node is not None else spec.nics_per_node,
            nic_bandwidth_bytes_per_s=(doc.nic_bandwidth_gbit_per_s * GB / 8 if doc.nic_bandwidth_gbit_per_s
                                       is not None else spec.nic_bandwidth_bytes_per_s)))
    nodes = sum(g.num_nodes for g in groups)
    counts = " + ".join(str(g.num_nodes) for g in groups)
    if c.num_nodes is not None and c.num_nodes != nodes:
        raise SpecError("cluster.node_groups", f"the groups' nodes ({counts} = {nodes}) must add up to "
                        f"cluster.num_nodes ({c.num_nodes})")
    if c.num_gpus is not None and c.num_gpus != nodes * spec.gpus_per_node:
        raise SpecError("cluster.node_groups", f"the groups' nodes ({counts} = {nodes}) x gpus_per_node "
                        f"({spec.gpus_per_node}) must add up to cluster.num_gpus ({c.num_gpus})")
    return replace(spec, gpu=groups[0].gpu, gpu_spec=groups[0].gpu_spec, num_gpus=nodes * spec.gpus_per_node,
                   node_groups=tuple(groups))


def _peak_bf16(spec: GpuSpecIn, where: str = "cluster.gpu_spec") -> float:
    if spec.peak_tflops_bf16 is None:
        raise SpecError(f"{where}.peak_tflops_bf16",
                        "is required: a user-defined GPU needs its dense peak for each precision (bf16, fp8)")
    return spec.peak_tflops_bf16 * 1e12


def _custom_gpu(spec: GpuSpecIn, nvlink_bytes_per_s: float, where: str = "cluster.gpu_spec") -> GpuSpec:
    """A user-defined GPU; its GEMM efficiencies (its generation) and NIC path come from the catalog GPU
    nearest to it in 16-bit peak."""
    peak = _peak_bf16(spec, where)
    required = {"peak_tflops_fp8": "is required: a user-defined GPU needs its dense peak for each precision "
                "(bf16, fp8; 0 for a GPU without FP8 tensor cores)",
                "memory_gib": "is required: the GPU's HBM capacity", "hbm_bandwidth_gb_per_s":
                "is required: the GPU's HBM bandwidth"}
    for name, rule in required.items():
        if getattr(spec, name) is None:
            raise SpecError(f"{where}.{name}", rule)
    assert spec.memory_gib is not None and spec.hbm_bandwidth_gb_per_s is not None  # checked just above
    assert spec.peak_tflops_fp8 is not None
    nearest = nearest_catalog_gpu(peak)
    nvlink = spec.nvlink_bandwidth_gb_per_s * GB if spec.nvlink_bandwidth_gb_per_s is not None else nvlink_bytes_per_s
    return GpuSpec(kind=nearest.kind, peak_flops_per_s=peak, hbm_capacity_bytes=spec.memory_gib * GIB,
                   hbm_bandwidth_bytes_per_s=spec.hbm_bandwidth_gb_per_s * GB,
                   nvlink_bandwidth_bytes_per_s=nvlink, pcie_bandwidth_bytes_per_s=nearest.pcie_bandwidth_bytes_per_s,
                   generation=nearest.generation, peak_fp8_flops_per_s=spec.peak_tflops_fp8 * 1e12,
                   tdp_w=spec.tdp_w, name=spec.name)
