"""Which layouts of a search space are discarded before simulation, and why. Pure logic: no I/O.

A layout is discarded when it breaks a rule of `validate_layout` or when its peak stage needs more memory per GPU
than the GPU has (less `min_free_memory_bytes`). Its memory is the simulator's own: `simcore.cost.memory` on the
layout's workload costed without communication (communication moves no memory, nor the split of the layers), so
what the search keeps is exactly what a simulation would report as fitting. A family (see
simcore.planning.space) is discarded when all its layouts are, and its reason is that of its first layout in
enumeration order (the smallest microbatch, 1F1B), the one most likely to fit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from simcore.cost.memory import MemoryShape, RankHolding, StageMemory, memory_shape, rank_holdings, sharded
from simcore.cost.parameters import FITTED, CostParameters
from simcore.cost.partition import default_partition
from simcore.cost.workload import build_workload
from simcore.domain.layout import Layout, Partition, validate_layout, validate_precision
from simcore.domain.model import ModelShape
from simcore.errors import SpecError
from simcore.planning.space import Family, Space, enumerate_layouts, family_of
from topology.hardware import GIB, GpuSpec

INVALID, MEMORY = "invalid", "memory"  # the two kinds of discard


class MemoryModel:
    """Memory per GPU of every pipeline stage of a layout, without simulating it: `simcore.cost.memory`'s
    `stage_memory`, in its three steps (`memory_shape`, `rank_holdings`, `sharded`), each cached by the layout
    fields it reads,
    since a search asks for tens of thousands of layouts that differ only in some of them: dp and the ZeRO stage
    change only the sharding, the schedule and the number of microbatches only the activations in flight."""

    def __init__(self, model: ModelShape, gpu: GpuSpec, params: CostParameters = FITTED) -> None:
        self.model, self.gpu, self.params = model, gpu, params
        self._shapes: dict[tuple[object, ...], MemoryShape] = {}
        self._holdings: dict[tuple[object, ...], tuple[RankHolding, ...]] = {}
        self._entries: dict[tuple[object, ...], tuple[tuple[StageMemory, ...], tuple[int, StageMemory]]] = {}

    def stages(self, layout: Layout) -> tuple[StageMemory, ...]:
        return self._entry(layout)[0]

    def peak(self, layout: Layout) -> tuple[int, StageMemory]:
        """The stage that needs the most memory (the lowest index on a tie) and its memory."""
        return self._entry(layout)[1]

    def _entry(self, layout: Layout) -> tuple[tuple[StageMemory, ...], tuple[int, StageMemory]]:
        key = (layout.dp_cp, layout.zero_stage, layout.zero_shard_size, *self._holding_key(layout))
        found = self._entries.get(key)
        if found is None:
            stages = sharded(self._holding(layout), layout)
            totals = [stage.total for stage in stages]
            index = totals.index(max(totals))
            found = self._entries[key] = (stages, (index, stages[index]))
        return found

    @staticmethod
    def _holding_key(layout: Layout) -> tuple[object, ...]:
        # What `rank_holdings` reads of the layout (its docstring), and what the split of the layers depends on.
        return (layout.tp, layout.pp, layout.virtual_stages, layout.microbatch_size, layout.num_microbatches,
                layout.schedule, layout.recompute, layout.sequence_parallel, layout.pipeline_partition,
                layout.encoder_pipeline_stages, layout.fp8, layout.cp, layout.cp_comm,
                layout.tp_comm_overlap and layout.tp > 1,  # userbuffers (simcore/cost/memory.py)
                layout.ep, layout.expert_tp)

    def _holding(self, layout: Layout) -> tuple[RankHolding, ...]:
        key = self._holding_key(layout)
        found = self._holdings.get(key)
        if found is None:
            found = self._holdings[key] = rank_holdings(self.model, layout, self._shape(layout))
        return found

    def _shape(self, layout: Layout) -> MemoryShape:
        """`memory_shape` of the layout's workload without communication. What memory reads of a workload (each
        chunk's layers, parameters and input message) depends on tp, pp, virtual stages, the microbatch size and
        the split (and the schedule's shape: ZB-V's V, DualPipe's two copies); the split depends on the kernels'
        costs (so on sequence parallelism and recomputation too) only
        when it balances cost (simcore.cost.partition)."""
        by_cost = (layout.pipeline_partition or default_partition(self.model)) is Partition.BALANCED
        key = (layout.tp, layout.pp, layout.cp, layout.shape, layout.microbatch_size,
               layout.pipeline_partition, layout.encoder_pipeline_stages, layout.ep, layout.expert_tp,
               *((layout.sequence_parallel, layout.recompute) if by_cost else ()))
        found = self._shapes.get(key)
        if found is None:
            workload = build_workload(self.model, layout, self.gpu, None, None, True, self.params)
            found = self._shapes[key] = memory_shape(workload, layout.pp)
        return found


@dataclass(frozen=True, slots=True)
class Discard:
    kind: str  # INVALID or MEMORY
    field: str
    rule: str

    @property
    def reason(self) -> str:
        return f"{self.field}: {self.rule}"


@dataclass(slots=True)
class FamilyRecord:
    layouts: int = 0
    feasible: int = 0
    first_discard: Discard | None = None


# Layouts enumerated between two looks at the clock (a few milliseconds of planning).
CHECK_EVERY = 256


@dataclass(slots=True)
class Plan:
    """The outcome of enumerating and pruning: feasible layouts in enumeration order, with their peak memory."""

    candidates: list[Layout] = field(default_factory=list)
    peak_memory_bytes: list[float] = field(default_factory=list)
    families: dict[Family, FamilyRecord] = field(default_factory=dict)
    generated: int = 0
    discarded: dict[str, int] = field(default_factory=lambda: {INVALID: 0, MEMORY: 0})
    truncated: bool = False  # enumeration stopped at the search's time limit

    @property
    def pruned(self) -> int:
        return sum(self.discarded.values())

    def discarded_families(self) -> list[tuple[Family, FamilyRecord]]:
        return [(f, r) for f, r in self.families.items() if r.feasible == 0 and r.first_discard is not None]


def judge(layout: Layout, model: ModelShape, num_gpus: int, gpu: GpuSpec, memory: MemoryModel,
          min_free_memory_bytes: float = 0.0) -> tuple[Discard | None, float]:
    """Why the layout is discarded (None if it is kept) and its peak memory per GPU in bytes (0 if invalid)."""
    try:
        validate_layout(layout, model, num_gpus)
        validate_precision(layout, gpu)  # FP8 needs FP8 tensor cores, MXFP8 Blackwell's
    except SpecError as err:
        return Discard(INVALID, err.field, err.rule), 0.0
    stage, peak = memory.peak(layout)
    usable = gpu.hbm_capacity_bytes - min_free_memory_bytes
    if peak.total > usable:
        keep = f" with {min_free_memory_bytes / GIB:.1f} GiB kept free" if min_free_memory_bytes else ""
        return Discard(MEMORY, "memory", (
            f"stage {stage} needs {peak.total / GIB:.1f} GiB per GPU, {(peak.total - usable) / GIB:.1f} GiB more "
            f"than the {gpu.hbm_capacity_bytes / GIB:.0f} GiB of one {gpu.kind}{keep} "
            f"(weights {peak.weights / GIB:.1f}, gradients {peak.gradients / GIB:.1f}, optimizer "
            f"{peak.optimizer_states / GIB:.1f}, activations {peak.activations / GIB:.1f} GiB)")), peak.total
    return None, peak.total


def plan_search(model: ModelShape, num_gpus: int, gpus_per_node: int, gpu: GpuSpec, global_batch_size: int,
                space: Space, params: CostParameters = FITTED, deadline: float | None = None) -> Plan:
    """Enumerate the space and discard what cannot run, recording per family the first reason; past `deadline`
    (time.perf_counter()), checked every CHECK_EVERY layouts once one is feasible, stop enumerating (the plan
    says `truncated`)."""
    memory = MemoryModel(model, gpu, params)
    plan = Plan()
    for layout in enumerate_layouts(model, num_gpus, gpus_per_node, global_batch_size, space):
        if (deadline is not None and plan.candidates and plan.generated % CHECK_EVERY == 0
                and time.perf_counter() > deadline):
            plan.truncated = True
            break
        plan.generated += 1
        record = plan.families.setdefault(family_of(layout), FamilyRecord())
        record.layouts += 1
        discard, peak = judge(layout, model, num_gpus, gpu, memory, space.min_free_memory_bytes)
        if discard is None:
            record.feasible += 1
            plan.candidates.append(layout)
            plan.peak_memory_bytes.append(peak)
        else:
            plan.discarded[discard.kind] += 1
            if record.first_discard is None:
                record.first_discard = discard
    return plan
