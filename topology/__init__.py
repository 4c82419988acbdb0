"""Hardware catalog, cluster specs, the cluster's networkx graph and the routes found on it."""

from topology.cluster_spec import NODE_PRESET_NOTES, NODE_PRESETS, ClusterSpec, Fabric, sized
from topology.errors import SpecError
from topology.graph import Cluster, build_cluster
from topology.hardware import GB, GIB, GPUS, GpuKind, GpuSpec
from topology.routing import Router

__all__ = [
    "GB", "GIB", "GPUS", "NODE_PRESETS", "NODE_PRESET_NOTES", "Cluster", "ClusterSpec", "Fabric", "GpuKind",
    "GpuSpec", "Router", "SpecError", "build_cluster", "sized",
]
