"""Results of one simulated iteration, derived from what the engine recorded (contract: Result)."""

from __future__ import annotations

from dataclasses import dataclass

from simcore.cost.compute.flops import hardware_flops_per_iteration, model_flops_per_iteration
from simcore.cost.memory import StageMemory
from simcore.cost.workload import Workload
from simcore.domain.layout import Layout
from simcore.domain.model import ModelShape
from simcore.engine.pipeline import EngineResult
from simcore.engine.recorder import (
    CATEGORIES,
    COMM_KINDS,
    CP_CATEGORY,
    CP_KIND,
    EP_CATEGORY,
    EP_KIND,
    Category,
    RankRecord,
)
from topology.hardware import GIB, GpuSpec


@dataclass(frozen=True, slots=True)
class StageReport:
    index: int
    layers: dict[str, int]
    forward_s: float
    backward_s: float
    backward_input_s: float  # B: the input gradient (with recomputation), per microbatch
    backward_weight_s: float  # W: the weight gradient, per microbatch
    bubble_s: float  # seconds per iteration the stage's compute stream idles on pipeline dependencies (rank mean)
    busy_fraction: float
    memory: StageMemory


@dataclass(frozen=True, slots=True)
class Metrics:
    iteration_time_s: float
    samples_per_s: float
    tokens_per_s: float
    model_flops_per_iteration: float
    model_tflops_per_gpu: float
    mfu: float
    hardware_tflops_per_gpu: float
    hfu: float
    bubble_fraction: float
    pipeline_overhead: float
    time_breakdown_s: dict[str, float]
    communication_s: dict[str, float]
    communication_bytes: dict[str, float]
    stages: tuple[StageReport, ...]
    capacity_gib: float  # the peak stage's GPU's HBM
    critical_gpu: int
    # A heterogeneous cluster's stages: each one's HBM (the smallest of its GPUs') and its GPU's name (data-parallel
    # rank 0's); empty on a cluster of one GPU kind, where every stage has `capacity_gib`.
    stage_capacity_gib: tuple[float, ...] = ()
    stage_gpus: tuple[str, ...] = ()

    @property
    def peak_stage(self) -> StageReport:
        """The stage that needs the most memory (the lowest index on a tie); on a heterogeneous cluster the one
        with the least room left on its GPUs (the worst)."""
        if self.stage_capacity_gib:
            return min(self.stages, key=lambda s: (self.stage_capacity_gib[s.index] * GIB - s.memory.total, s.index))
        return max(self.stages, key=lambda s: (s.memory.total, -s.index))

    @property
    def fits(self) -> bool:
        """Every stage fits its GPUs' HBM."""
        if self.stage_capacity_gib:
            return all(s.memory.total <= self.stage_capacity_gib[s.index] * GIB for s in self.stages)
        return self.peak_stage.memory.total <= self.capacity_gib * GIB


def _critical(ranks: list[RankRecord]) -> RankRecord:
    """The rank that finishes last; ties go to the lowest GPU index."""
    return min(ranks, key=lambda r: (-r.end_s, r.gpu))


def compute_metrics(model: ModelShape, layout: Layout, gpu: GpuSpec, workload: Workload,
                    result: EngineResult, memory: tuple[StageMemory, ...],
                    stage_gpus: tuple[GpuSpec, ...] = (), stage_capacity_bytes: tuple[float, ...] = ()) -> Metrics:
    """`gpu`'s peak is MFU's denominator and its HBM the capacity; on a heterogeneous cluster `stage_gpus` and
    `stage_capacity_bytes` give each stage's GPU and HBM (simcore/cost/per_gpu.py)."""
    T = result.iteration_time_s
    ranks = result.recorder.ranks
    gpus = layout.num_gpus
    model_flops = model_flops_per_iteration(model, layout)
    hardware_flops = hardware_flops_per_iteration(model, layout)
    by_stage: dict[int, list[RankRecord]] = {}
    for record in ranks:
        by_stage.setdefault(record.pipeline_rank, []).append(record)

    def stage_mean(values: dict[int, list[float]]) -> float:
        return sum(sum(v) / len(v) for v in values.values()) / len(values)

    # Idle on pipeline dependencies: fill, waits for a producer, and the drain.
    bubble = {s: [r.time_s[Category.BUBBLE] for r in rs] for s, rs in by_stage.items()}
    m = layout.num_microbatches
    # each chunk runs m microbatches (DualPipe's m / 2: half go each way)
    per_chunk = layout.shape.microbatches_per_chunk(m)
    passes = {s: [per_chunk * sum(c.forward_s + c.backward_s for c in workload.chunks if c.rank == s)]
              for s in by_stage}
    bubble_mean = stage_mean(bubble)

    critical = _critical(ranks)
    breakdown = dict(critical.time_s)
    breakdown[Category.OTHER] = max(0.0, T - sum(v for k, v in breakdown.items() if k != Category.OTHER))

    representatives = [min(rs, key=lambda r: r.gpu) for _s, rs in sorted(by_stage.items())]
    # Context parallelism's figures appear where it is used (contract: "cp_comm", "cp" where used), expert
    # parallelism's for a mixture of experts (the others' results keep their keys).
    categories: tuple[str, ...] = CATEGORIES
    kinds: tuple[str, ...] = COMM_KINDS
    if layout.cp > 1:
        categories, kinds = (*categories, CP_CATEGORY), (*kinds, CP_KIND)
    if model.moe is not None:
        categories, kinds = (*categories, EP_CATEGORY), (*kinds, EP_KIND)
    comm_s = {k: sum(r.comm_busy_s[k] for r in representatives) for k in kinds}
    comm_bytes = {k: sum(r.comm_bytes[k] for r in representatives) for k in kinds}

    # A stage's times per microbatch: its chunks' sum, each weighted by the share of the microbatches it runs
    # (all of them, or half with DualPipe: the mean of its two chunks).
    share = per_chunk / m if per_chunk != m else 1
    stages = []
    for s, rs in sorted(by_stage.items()):
        mine = [c for c in workload.chunks if c.rank == s]
        layers: dict[str, int] = {}
        for c in mine:
            for kind, n in c.layer_counts:
                layers[kind] = layers.get(kind, 0) + n
        if any(c.has_embedding for c in mine):
            layers["embedding"] = sum(1 for c in mine if c.has_embedding)
        if any(c.has_logits for c in mine):
            layers["logits"] = 1
        stages.append(StageReport(
            index=s, layers=layers,
            forward_s=share * sum(c.forward_s for c in mine), backward_s=share * sum(c.backward_s for c in mine),
            backward_input_s=share * sum(c.backward_input_s for c in mine),
            backward_weight_s=share * sum(c.backward_weight_s for c in mine),
            bubble_s=sum(bubble[s]) / len(bubble[s]),
            busy_fraction=sum(r.busy_s for r in rs) / len(rs) / T,
            memory=memory[s],
        ))
    samples_per_s = layout.global_batch_size / T
    capacity = gpu.hbm_capacity_bytes / GIB
    if stage_capacity_bytes:
        worst = min(range(len(stages)), key=lambda i: (stage_capacity_bytes[i] - stages[i].memory.total, i))
        capacity = stage_capacity_bytes[worst] / GIB
    return Metrics(
        iteration_time_s=T,
        samples_per_s=samples_per_s,
        tokens_per_s=samples_per_s * model.tokens_per_sample,
        model_flops_per_iteration=model_flops,
        model_tflops_per_gpu=model_flops / T / gpus / 1e12,
        mfu=model_flops / T / gpus / gpu.peak_flops_per_s,
        hardware_tflops_per_gpu=hardware_flops / T / gpus / 1e12,
        hfu=hardware_flops / T / gpus / gpu.peak_flops_per_s,
        bubble_fraction=bubble_mean / T,
        pipeline_overhead=bubble_mean / stage_mean(passes),
        time_breakdown_s={k: breakdown[k] for k in categories},
        communication_s=comm_s,
        communication_bytes=comm_bytes,
        stages=tuple(stages),
        capacity_gib=capacity,
        critical_gpu=critical.gpu,
        stage_capacity_gib=tuple(c / GIB for c in stage_capacity_bytes),
        stage_gpus=tuple(g.label for g in stage_gpus),
    )
