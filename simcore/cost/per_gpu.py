"""Per-GPU costing on a heterogeneous cluster (`cluster.node_groups`): every rank computes with its own GPU.

Each rank's passes are costed with the figures of the GPU that runs it: its peak FLOP/s, HBM bandwidth and the
GEMM efficiencies of its generation (the roofline of simcore/cost/compute/kernels.py per kernel, so GEMMs and
memory-bound kernels scale by different ratios from one GPU to another; no single slowdown factor). The
workload is built once per GPU kind (simcore/cost/workload.py) and each pipeline rank takes its chunks and its
optimizer step from its GPU's. Where the data-parallel replicas of a stage run on different GPUs, each replica
keeps its own (the engine then simulates every replica: the slower one holds its peers at the gradient
reduction, as a straggler does).

Rules (SpecError naming the field): a tensor-parallel group, a context-parallel ring and, with expert
parallelism, a stage's replicas (the all-to-alls run across them) each run on one GPU kind: their per-layer
collectives would hold every GPU to the slowest of them.

The pipeline split sees the hardware: `balanced` costs each model piece on the GPU that runs it (the slowest of
its replicas' GPUs), so a faster GPU gets more layers (simcore/cost/partition.py); `even` splits by count. HBM:
each stage's capacity is the smallest of its GPUs'.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from simcore.cost.comm.collectives import CollectiveModel
from simcore.cost.compute.measured_gemm import for_gpu
from simcore.cost.context_parallel import local_model
from simcore.cost.parameters import CostParameters
from simcore.cost.partition import StageCosts, partition, stage_costs
from simcore.cost.workload import Workload, build_workload
from simcore.domain.layout import Layout
from simcore.domain.model import ModelShape
from simcore.domain.placement import Placement
from topology.cluster_spec import ClusterSpec
from topology.errors import SpecError
from topology.hardware import GpuSpec

__all__ = ["GpuCosting", "cost_per_gpu", "hardware_split", "rank_gpus", "replicas_differ"]

RankGpus = dict[tuple[int, int], GpuSpec]  # {(data-parallel rank, pipeline rank): its GPU}


@dataclass(frozen=True, slots=True)
class GpuCosting:
    """A layout costed GPU by GPU."""

    workload: Workload  # every pipeline rank on data-parallel rank 0's GPU
    # {(replica, pipeline rank): workload} of the replicas whose GPU differs from replica 0's (their rank's chunks
    # and optimizer step are on their own GPU); empty when every stage's replicas share a GPU kind
    rank_workloads: dict[tuple[int, int], Workload]
    stage_gpus: tuple[GpuSpec, ...]  # data-parallel rank 0's GPU, per pipeline rank
    stage_capacity_bytes: tuple[float, ...]  # the smallest HBM among each pipeline rank's GPUs
    mean_peak_flops_per_s: float  # over the cluster's GPUs: MFU's denominator
    mean_tdp_w: float | None  # over the cluster's GPUs; None when one has no TDP


def rank_gpus(cluster: ClusterSpec, placement: Placement, layout: Layout) -> RankGpus:
    """Each (data-parallel rank, pipeline rank)'s GPU; SpecError where a tensor-parallel group, a
    context-parallel ring or (with ep > 1) a stage's replicas span GPU kinds."""
    out: RankGpus = {}
    for s in range(placement.pp):
        for d in range(placement.dp):
            ring: set[GpuSpec] = set()
            for c in range(placement.cp):
                group = placement.tp_group(d, s, c)
                kinds = {cluster.hardware_of(g) for g in group}
                if len(kinds) > 1:
                    raise SpecError("layout.tp", f"the tensor-parallel group of GPUs {group[0]}..{group[-1]} "
                                    f"(data-parallel rank {d}, pipeline rank {s}) spans GPU kinds "
                                    f"({_labels(kinds)}): a tensor-parallel group must run on one GPU kind; "
                                    "place it inside one node group")
                ring |= kinds
            if len(ring) > 1:
                raise SpecError("layout.cp", f"the context-parallel ring of data-parallel rank {d}, pipeline rank "
                                f"{s} spans GPU kinds ({_labels(ring)}): a ring must run on one GPU kind")
            out[(d, s)] = ring.pop()
        if layout.ep > 1:
            kinds = {out[(d, s)] for d in range(placement.dp)}
            if len(kinds) > 1:
                raise SpecError("layout.ep", f"pipeline rank {s}'s data-parallel replicas run on GPU kinds "
                                f"({_labels(kinds)}): with expert parallelism (its all-to-alls cross the replicas) "
                                "every replica of a stage must run on one GPU kind")
    return out


def replicas_differ(gpus: RankGpus, dp: int, pp: int) -> bool:
    """Whether some stage's data-parallel replicas run on different GPU kinds (the engine then simulates each)."""
    return any(gpus[(d, s)] != gpus[(0, s)] for s in range(pp) for d in range(dp))


def hardware_split(model: ModelShape, layout: Layout, gpus: RankGpus, params: CostParameters) -> tuple[int, ...]:
    """Layers per model piece (the layout's `stage_layers`), each piece costed on the slowest GPU that runs it."""
    if layout.stage_layers is not None:
        return layout.stage_layers
    shape, local = layout.shape, local_model(model, layout.cp)
    by_gpu: dict[GpuSpec, StageCosts] = {}
    for gpu in sorted(set(gpus.values()), key=_order):
        by_gpu[gpu] = stage_costs(local, layout.microbatch_size, layout.tp, layout.sequence_parallel,
                                  str(layout.recompute), gpu, for_gpu(params, gpu))
    per_piece: list[StageCosts] = []
    for piece in range(shape.pieces):
        ranks = {shape.rank(vs) for vs in range(shape.virtual_stages) if shape.piece(vs) == piece}
        costs = [by_gpu[gpus[(d, r)]] for r in sorted(ranks) for d in range(layout.dp)]
        per_piece.append(_slowest(costs))
    chunks, _ = partition(local, layout.pp, shape.pieces // layout.pp, layout.pipeline_partition, per_piece,
                          layout.encoder_pipeline_stages)
    return tuple(sum(n for _, n in runs) for runs in chunks)


def cost_per_gpu(model: ModelShape, layout: Layout, cluster: ClusterSpec, placement: Placement,
                 collectives: CollectiveModel | None, free_communication: bool,
                 params: CostParameters) -> GpuCosting:
    """The layout's workload with every rank on its own GPU (see the module docstring)."""
    gpus = rank_gpus(cluster, placement, layout)
    split = replace(layout, stage_layers=hardware_split(model, layout, gpus, params))
    workloads = {gpu: build_workload(model, split, gpu, placement, collectives, free_communication,
                                     for_gpu(params, gpu))
                 for gpu in sorted(set(gpus.values()), key=_order)}
    shape = layout.shape
    stage_gpus = tuple(gpus[(0, s)] for s in range(layout.pp))
    base = workloads[stage_gpus[0]]
    workload = replace(
        base, chunks=tuple(workloads[stage_gpus[shape.rank(vs)]].chunks[vs] for vs in range(shape.virtual_stages)),
        optimizer_s=tuple(workloads[stage_gpus[s]].optimizer_s[s] for s in range(layout.pp)))
    rank_workloads = {(d, s): workloads[gpu] for (d, s), gpu in sorted(gpus.items()) if gpu != stage_gpus[s]}
    capacity = tuple(min(gpus[(d, s)].hbm_capacity_bytes for d in range(layout.dp)) for s in range(layout.pp))
    every = [cluster.hardware_of(g) for g in range(cluster.num_gpus)]
    tdps = [g.tdp_w for g in every]
    mean_tdp = None if any(t is None for t in tdps) else sum(t for t in tdps if t is not None) / len(tdps)
    return GpuCosting(workload, rank_workloads, stage_gpus, capacity,
                      sum(g.peak_flops_per_s for g in every) / len(every), mean_tdp)


def _slowest(costs: list[StageCosts]) -> StageCosts:
    """Element by element, the costliest of `costs` (a piece whose replicas run on several GPU kinds waits for
    the slowest at every gradient reduction)."""
    first = costs[0]
    if all(c == first for c in costs):
        return first
    return StageCosts(layer={layer: max(c.layer[layer] for c in costs) for layer in first.layer},
                      embedding=max(c.embedding for c in costs),
                      decoder_embedding=max(c.decoder_embedding for c in costs), logits=max(c.logits for c in costs))


def _order(gpu: GpuSpec) -> tuple[float, str]:
    return (gpu.peak_flops_per_s, gpu.label)


def _labels(kinds: set[GpuSpec]) -> str:
    return ", ".join(g.label for g in sorted(kinds, key=_order))
