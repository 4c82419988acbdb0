"""clustersim's simulator: the public face of the domain, the cost model and the engine.

    import simcore
    outcome = simcore.simulate(simcore.Scenario(model=simcore.model_from_fields(simcore.MODEL_PRESETS["gpt3-1.3b"]),
                                                cluster=simcore.sized(simcore.NODE_PRESETS["dgx-a100"], 16),
                                                layout=simcore.Layout(dp=2, tp=4, pp=2, microbatch_size=1,
                                                                      global_batch_size=16)))
    outcome.metrics.iteration_time_s

Everything a caller above simcore (service/, bench/, examples/) needs is named here; the subpackages are
domain/ (what is simulated), cost/ (what things cost), engine/ (how time passes), planning/ (layout search) and
calibration/ (the reference data and `validate`).
"""

from __future__ import annotations

from simcore.cost.compute.gemm_ceilings import ceiling_basis, ceiling_fraction
from simcore.cost.memory import StageMemory
from simcore.cost.parameters import FITTED, CostParameters
from simcore.domain.grad_reduce import GradReduce, default_grad_reduce
from simcore.domain.layout import (
    AttentionBackend,
    CollectiveAlgorithm,
    CpComm,
    ElementwiseKernels,
    Fidelity,
    Fp8Recipe,
    Fp8Scaling,
    Layout,
    Partition,
    Precision,
    Recompute,
    Schedule,
    ZeroImplementation,
    validate_layout,
)
from simcore.domain.model import Activation, Architecture, AttentionKind, ModelShape, model_from_fields
from simcore.domain.presets import MODEL_PRESET_SOURCES, MODEL_PRESETS
from simcore.domain.training import Checkpointing, Failures, TrainingRun
from simcore.errors import SpecError
from simcore.metrics import Metrics, StageReport
from simcore.network import Network, build_network
from simcore.run_cost import Cost, estimate_cost
from simcore.simulate import Outcome, Scenario, check, simulate
from simcore.trace import chrome_trace
from simcore.training_plan import RunTotals, TrainingPlan, plan_training
from topology import builders as graph_builders
from topology.cluster_spec import NODE_PRESET_NOTES, NODE_PRESETS, ClusterSpec, Fabric, sized
from topology.hardware import GB, GIB, GPUS, GpuKind, GpuSpec, nearest_catalog_gpu
from topology.health import ClusterHealth, DegradedLink, SlowGpu
from topology.measured import Measured, MeasuredCollective, MeasuredGemm
from topology.node_groups import NodeGroup
from topology.user_topology import UserTopology, parse_topology

__all__ = [
    "FITTED", "GB", "GIB", "GPUS", "MODEL_PRESETS", "MODEL_PRESET_SOURCES", "NODE_PRESETS", "NODE_PRESET_NOTES",
    "Activation", "Architecture", "AttentionBackend", "AttentionKind", "Checkpointing", "ClusterHealth", "ClusterSpec",
    "CollectiveAlgorithm", "Cost", "CostParameters", "CpComm", "DegradedLink", "ElementwiseKernels", "Fabric",
    "Failures", "Fidelity", "Fp8Recipe", "Fp8Scaling", "GpuKind",
    "GpuSpec", "Layout", "Metrics", "ModelShape", "Network", "NodeGroup", "Outcome", "Partition", "Precision",
    "Recompute", "RunTotals", "Scenario", "Schedule", "SlowGpu", "SpecError", "StageMemory", "StageReport",
    "TrainingPlan", "TrainingRun", "ZeroImplementation", "build_network", "check", "chrome_trace", "estimate_cost",
    "model_from_fields", "nearest_catalog_gpu", "plan_training", "simulate", "sized", "validate_layout",
    "UserTopology", "graph_builders", "parse_topology", "Measured", "MeasuredCollective", "MeasuredGemm",
    "GradReduce", "default_grad_reduce",
    "ceiling_basis", "ceiling_fraction",
]
