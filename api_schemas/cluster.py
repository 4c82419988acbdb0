"""The request's `cluster` section: a preset or hardware fields, a user-defined GPU, stragglers and degraded
links, and heterogeneous node groups (pydantic v2 models; the converter in service/ turns them into the domain's
ClusterSpec)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr, ValidationInfo, field_validator

from api_schemas.gpu_kind import GpuKindName
from api_schemas.measured import MeasuredIn

__all__ = ["ClusterIn", "DegradedLinkIn", "GpuSpecIn", "NodeGroupIn", "NonNegativeFloat", "PositiveFloat", "Size",
           "SlowGpuIn"]

Size = Annotated[StrictInt, Field(ge=1)]
"""A count: int >= 1."""
PositiveFloat = Annotated[StrictFloat, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[StrictFloat, Field(ge=0, allow_inf_nan=False)]
# Physical maxima (see api_schemas/request.py): a value past one describes nothing real.
GpusPerNode = Annotated[StrictInt, Field(ge=1, le=1_024)]
NicsPerNode = Annotated[StrictInt, Field(ge=1, le=64)]
DomainGpus = Annotated[StrictInt, Field(ge=1, le=65_536)]
Tflops = Annotated[StrictFloat, Field(gt=0, le=1e6, allow_inf_nan=False)]  # a GPU's peak, TFLOP/s
GBps = Annotated[StrictFloat, Field(gt=0, le=1e6, allow_inf_nan=False)]  # GB/s of memory or NVLink
Gbitps = Annotated[StrictFloat, Field(gt=0, le=1e7, allow_inf_nan=False)]  # a NIC's Gbit/s
LatencyUs = Annotated[StrictFloat, Field(ge=0, le=1e6, allow_inf_nan=False)]  # up to a second per hop


class GpuSpecIn(BaseModel):
    """A user-defined GPU. GEMM efficiencies come from the catalog GPU nearest in 16-bit peak (a warning says so)."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(default="custom", description="what messages call it")
    peak_tflops_bf16: Tflops | None = Field(default=None, description="dense 16-bit tensor peak, TFLOP/s")
    peak_tflops_fp8: NonNegativeFloat | None = Field(
        default=None, description="dense FP8 tensor peak, TFLOP/s; 0 = no FP8 tensor cores"
    )
    memory_gib: PositiveFloat | None = Field(default=None, description="HBM capacity, GiB")
    hbm_bandwidth_gb_per_s: GBps | None = Field(default=None, description="HBM bandwidth, GB/s")
    tdp_w: PositiveFloat | None = Field(default=None, description="board power, W")
    nvlink_bandwidth_gb_per_s: GBps | None = Field(
        default=None, description="per GPU, per direction; default the cluster's"
    )


GpuIndex = Annotated[StrictInt, Field(ge=0, le=2**31)]
BandwidthFactor = Annotated[StrictFloat, Field(gt=0, le=1, allow_inf_nan=False)]


class SlowGpuIn(BaseModel):
    """A GPU whose compute takes longer than its peers' (a straggler)."""

    model_config = ConfigDict(extra="forbid")

    gpu: GpuIndex = Field(description="global GPU index: node x gpus_per_node + local index")
    compute_time_factor: Annotated[StrictFloat, Field(gt=0, le=100, allow_inf_nan=False)] = Field(
        description="its compute takes this many times as long (1.2: 20% longer)")


class DegradedLinkIn(BaseModel):
    """A link carrying less than its rate: a node's NIC (node and nic) or a GPU's NVLink port (gpu)."""

    model_config = ConfigDict(extra="forbid")

    node: GpuIndex | None = None
    nic: GpuIndex | None = None
    gpu: GpuIndex | None = None
    bandwidth_factor: BandwidthFactor = Field(description="the share of its bandwidth it still carries")


class NodeGroupIn(BaseModel):
    """Nodes of one GPU kind in a heterogeneous cluster. Groups fill the cluster in order (group 0's nodes first).
    Unset fields default to the cluster's; NVLink defaults to the group's GPU's own (catalog, or its gpu_spec)."""

    model_config = ConfigDict(extra="forbid")

    num_nodes: Size = Field(description="whole nodes in the group")
    gpu: GpuKindName | None = Field(default=None, description="its GPU kind; default the cluster's")
    gpu_spec: GpuSpecIn | None = Field(default=None, description="a user-defined GPU instead of a catalog one")
    gpus_per_node: GpusPerNode | None = Field(default=None, description="must equal the cluster's (one node shape)")
    nvlink_bandwidth_gb_per_s: GBps | None = Field(
        default=None, description="GB/s per GPU, per direction; default the group's GPU's NVLink")
    nics_per_node: NicsPerNode | None = Field(default=None, description="must equal the cluster's")
    nic_bandwidth_gbit_per_s: Gbitps | None = Field(default=None, description="per NIC; default the cluster's")


class ClusterIn(BaseModel):
    """The cluster: a preset plus num_nodes or num_gpus, or the hardware fields (bandwidth, latency)."""

    model_config = ConfigDict(extra="forbid")

    preset: StrictStr | None = Field(default=None, description="a cluster preset, e.g. dgx-a100")
    num_nodes: Size | None = Field(default=None, description="whole nodes")
    num_gpus: Size | None = Field(default=None, description="any GPU count, a partial node allowed")
    gpu: GpuKindName | None = None
    gpu_spec: GpuSpecIn | None = Field(default=None, description="a user-defined GPU instead of a catalog one")
    nvlink_domain_gpus: DomainGpus | None = Field(
        default=None, description="GPUs sharing one NVLink switch domain, whole nodes; default the node"
    )
    gpus_per_node: GpusPerNode | None = None
    nvlink_bandwidth_gb_per_s: GBps | None = Field(
        default=None, description="GB/s (10^9 bytes) per GPU, per direction, through the node's switch"
    )
    nics_per_node: NicsPerNode | None = None
    nic_bandwidth_gbit_per_s: Gbitps | None = Field(
        default=None, description="Gbit/s (10^9 bits) per NIC, per direction"
    )
    fabric: Literal["fat_tree", "rail_optimized"] | None = Field(
        default=None, description="inter-node network shape"
    )
    oversubscription: Annotated[StrictFloat, Field(ge=1, le=1_024, allow_inf_nan=False)] | None = Field(
        default=None, description="1 = full bisection"
    )
    intra_node_latency_us: LatencyUs | None = Field(default=None, description="microseconds per hop")
    inter_node_latency_us: LatencyUs | None = Field(default=None, description="microseconds per hop")
    slow_gpus: list[SlowGpuIn] = Field(default_factory=list, json_schema_extra={"default": []}, max_length=65536,
                                       description="stragglers: GPUs whose compute takes longer")
    degraded_links: list[DegradedLinkIn] = Field(default_factory=list, json_schema_extra={"default": []},
                                                 max_length=65536,
                                                 description="NICs or NVLink ports carrying less than their rate")
    compute_variability: Annotated[StrictFloat, Field(ge=0, le=1, allow_inf_nan=False)] = Field(
        default=0.0, description="coefficient of variation of the GPUs' compute time; each GPU's factor is drawn "
                                 "from options.seed and its index (log-normal, mean 1)")

    topology: dict[str, Any] | StrictStr | None = Field(
        default=None,
        description="the user's own cluster graph: networkx node-link JSON (nodes with a kind: gpu, nvswitch, nic, "
                    "switch; edges with bandwidth_gb_per_s and latency_us), or GraphML text; from the CLI also a "
                    "file path (.json, .graphml), relative to the request file. Routes are found on it; the "
                    "cluster's size and node shape are the graph's")
    measured: MeasuredIn | None = Field(
        default=None,
        description="the user's own measurements, written by `clustersim calibrate`: nccl-tests tables and a GEMM "
                    "sweep that replace the model's collective times and GEMM rates where they exist; from the CLI "
                    "also a file path (YAML or JSON), relative to the request file")
    node_groups: list[NodeGroupIn] | None = Field(
        default=None, min_length=1, max_length=64,
        description="a heterogeneous cluster: groups of whole nodes, each of its own GPU kind, in order")

    @field_validator("num_gpus")
    @classmethod
    def _one_size(cls, value: int | None, info: ValidationInfo) -> int | None:
        # num_nodes is declared first, so it has been validated when num_gpus is.
        if value is not None and info.data.get("num_nodes") is not None:
            raise ValueError("give num_nodes or num_gpus, not both")
        return value
