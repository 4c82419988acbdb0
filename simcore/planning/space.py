"""The layout search space of one model, cluster and global batch: which layouts exist, which are discarded
before simulation (and why), and their peak memory per GPU. Pure logic: no I/O.

Generated from the request (every list can be narrowed or widened by the request's `space`):
- tp: the divisors of the GPU count up to the GPUs of a node (tensor parallelism stays on NVLink);
- pp: the divisors of GPUs / tp up to the number of layers; dp = GPUs / (tp * pp);
- microbatch size: the divisors of global batch / dp up to `max_microbatch_size`;
- schedule: 1F1B, interleaved 1F1B with every v in 2..`max_virtual_stages` that divides the layers evenly
  (num_layers % (pp * v) == 0, as Megatron requires), and GPipe; a single stage (pp 1) runs 1F1B only;
- ZeRO 0-3 when dp > 1 (ZeRO with dp 1 shards nothing), recomputation none / selective / full, sequence
  parallelism off and on when tp > 1, and every order of the placement that maps ranks to different GPUs;
- overlap_grad_reduce on, tp_comm_overlap off, bf16 (the request's space can list others).

A layout is discarded when it breaks a rule of `validate_layout` or when its peak stage needs more memory per GPU
than the GPU has (less `min_free_memory_bytes`). A *family* is the layouts that share dp, tp, pp, ZeRO stage,
recomputation and sequence parallelism; a family is discarded when all its layouts are, and its reason is that
of its first layout in enumeration order (the smallest microbatch, 1F1B), the one most likely to fit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from simcore.cost.memory import BYTES as ACTIVATION_BYTES
from simcore.cost.memory import (
    GRADIENT_BYTES,
    OPTIMIZER_BYTES,
    RUNTIME_BYTES,
    WEIGHT_BYTES,
    StageMemory,
    in_flight,
    layer_activation_bytes,
    stage_memory,
)
from simcore.cost.partition import default_partition, split_layers
from simcore.cost.workload import Workload, build_workload
from simcore.domain.layout import Layout, Partition, Precision, Recompute, Schedule, validate_layout
from simcore.domain.model import ModelShape
from topology.errors import SpecError
from topology.hardware import GIB, GpuSpec

PLACEMENTS = ("tp,dp,pp", "tp,pp,dp", "dp,tp,pp", "dp,pp,tp", "pp,tp,dp", "pp,dp,tp")
SCHEDULE_ORDER = (Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED_1F1B, Schedule.GPIPE)
RECOMPUTE_ORDER = (Recompute.NONE, Recompute.SELECTIVE, Recompute.FULL)

INVALID, MEMORY = "invalid", "memory"  # the two kinds of discard


@dataclass(frozen=True, slots=True)
class Space:
    """What a search may vary. None: generated from the model, cluster and batch (see the module docstring)."""

    dp: tuple[int, ...] | None = None
    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    virtual_stages: tuple[int, ...] | None = None
    microbatch_size: tuple[int, ...] | None = None
    schedule: tuple[Schedule, ...] | None = None
    zero_stage: tuple[int, ...] | None = None
    recompute: tuple[Recompute, ...] | None = None
    sequence_parallel: tuple[bool, ...] | None = None
    placement: tuple[str, ...] | None = None
    overlap_grad_reduce: tuple[bool, ...] = (True,)
    tp_comm_overlap: tuple[bool, ...] = (False,)
    precision: tuple[Precision, ...] = (Precision.BF16,)
    max_microbatch_size: int = 8
    max_virtual_stages: int = 8
    min_free_memory_bytes: float = 0.0


Family = tuple[int, int, int, int, str, bool]  # dp, tp, pp, zero_stage, recompute, sequence_parallel


def family_of(layout: Layout) -> Family:
    return (layout.dp, layout.tp, layout.pp, layout.zero_stage, str(layout.recompute), layout.sequence_parallel)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def distinct_placements(dp: int, tp: int, pp: int, orders: tuple[str, ...] = PLACEMENTS) -> list[str]:
    """The orders that put ranks on different GPUs: two orders that differ only in where size-1 dimensions go
    give the same strides for the others, so only the first of them is kept."""
    sizes = {"dp": dp, "tp": tp, "pp": pp}
    seen: set[tuple[tuple[str, int], ...]] = set()
    out = []
    for order in orders:
        stride, key = 1, []
        for name in order.split(","):
            if sizes[name] > 1:
                key.append((name, stride))
            stride *= sizes[name]
        if tuple(key) not in seen:
            seen.add(tuple(key))
            out.append(order)
    return out


def _schedules(model: ModelShape, pp: int, space: Space) -> list[tuple[Schedule, int]]:
    given = space.schedule
    schedules = given if given is not None else (SCHEDULE_ORDER if pp > 1 else (Schedule.ONE_F_ONE_B,))
    if space.virtual_stages is not None:
        interleave = [v for v in space.virtual_stages if v > 1]
    elif model.encoder_decoder:
        interleave = []  # not for encoder-decoder models (Megatron's rule; validate_layout refuses it)
    else:
        interleave = [v for v in range(2, space.max_virtual_stages + 1) if model.num_layers % (pp * v) == 0]
    out: list[tuple[Schedule, int]] = []
    for schedule in schedules:
        if schedule is Schedule.INTERLEAVED_1F1B:
            out += [(schedule, v) for v in interleave]
        elif space.virtual_stages is None or 1 in space.virtual_stages:
            out.append((schedule, 1))
    return out


def enumerate_layouts(model: ModelShape, num_gpus: int, gpus_per_node: int, global_batch_size: int,
                      space: Space) -> Iterator[Layout]:
    """Every layout of the space, in a fixed order (family by family). Degrees that cannot multiply to the GPU
    count yield one layout that breaks that rule, so that their family is reported with the reason."""
    n, batch = num_gpus, global_batch_size
    tps = space.tp if space.tp is not None else tuple(t for t in divisors(n) if t <= gpus_per_node)
    for tp in tps:
        if n % tp:
            yield Layout(dp=1, tp=tp, pp=1, microbatch_size=1, global_batch_size=batch)
            continue
        pps = space.pp if space.pp is not None else tuple(p for p in divisors(n // tp) if p <= model.num_layers)
        for pp in pps:
            if (n // tp) % pp:
                yield Layout(dp=max(1, n // (tp * pp)), tp=tp, pp=pp, microbatch_size=1, global_batch_size=batch)
                continue
            dp = n // (tp * pp)
            if space.dp is not None and dp not in space.dp:
                continue
            yield from _family_members(model, dp, tp, pp, batch, space)


def _family_members(model: ModelShape, dp: int, tp: int, pp: int, batch: int, space: Space) -> Iterator[Layout]:
    zeros = space.zero_stage if space.zero_stage is not None else ((0, 1, 2, 3) if dp > 1 else (0,))
    recomputes = space.recompute if space.recompute is not None else RECOMPUTE_ORDER
    sps = space.sequence_parallel if space.sequence_parallel is not None else ((False, True) if tp > 1 else (False,))
    if space.microbatch_size is not None:
        mbs: tuple[int, ...] = space.microbatch_size
    elif batch % dp == 0:
        mbs = tuple(b for b in divisors(batch // dp) if b <= space.max_microbatch_size)
    else:
        mbs = (1,)  # no microbatch size divides the batch: one layout carries the reason
    schedules = _schedules(model, pp, space)
    placements = distinct_placements(dp, tp, pp, space.placement if space.placement is not None else PLACEMENTS)
    for zero in zeros:
        for recompute in recomputes:
            for sp in sps:
                overlaps = space.tp_comm_overlap
                if not sp:  # tp_comm_overlap needs sequence parallelism: without it, off (if the space allows it)
                    overlaps = (False,) if False in overlaps else overlaps
                for mb in mbs:
                    for schedule, v in schedules:
                        for placement in placements:
                            for grad_overlap in space.overlap_grad_reduce:
                                for tp_overlap in overlaps:
                                    for precision in space.precision:
                                        yield Layout(
                                            dp=dp, tp=tp, pp=pp, microbatch_size=mb, global_batch_size=batch,
                                            virtual_stages=v, schedule=schedule, sequence_parallel=sp,
                                            zero_stage=zero, recompute=recompute, overlap_grad_reduce=grad_overlap,
                                            placement=placement, tp_comm_overlap=tp_overlap, precision=precision)


@dataclass(frozen=True, slots=True)
class _Shape:
    """Per pipeline rank, what memory depends on besides ZeRO and the activation policy."""

    parameters: tuple[int, ...]
    largest_layer: tuple[float, ...]  # parameters of the rank's largest layer (ZeRO 3's gather buffers)
    layers_held: tuple[float, ...]  # transformer layers' worth of microbatch activations held at the peak


class MemoryModel:
    """Memory per GPU of every pipeline stage of a layout, without costing or running anything: the formulas of
    `simcore.cost.memory.stage_memory` (tested equal), with the parameters of each model chunk as `build_workload`
    counts them, and the schedule's microbatches in flight cached (they depend only on the schedule's shape)."""

    def __init__(self, model: ModelShape, gpu: GpuSpec | None = None) -> None:
        self.model, self.gpu = model, gpu
        self._shapes: dict[tuple[object, ...], _Shape] = {}
        self._workloads: dict[tuple[object, ...], Workload] = {}
        self._activations: dict[tuple[object, ...], tuple[float, float]] = {}
        self._entries: dict[tuple[object, ...], tuple[tuple[StageMemory, ...], tuple[int, StageMemory]]] = {}

    def stages(self, layout: Layout) -> tuple[StageMemory, ...]:
        return self._entry(layout)[0]

    def peak(self, layout: Layout) -> tuple[int, StageMemory]:
        """The stage that needs the most memory (the lowest index on a tie) and its memory."""
        return self._entry(layout)[1]

    def _entry(self, layout: Layout) -> tuple[tuple[StageMemory, ...], tuple[int, StageMemory]]:
        key = (layout.dp, layout.tp, layout.pp, layout.virtual_stages, layout.microbatch_size,
               layout.global_batch_size, layout.schedule, layout.zero_stage, layout.recompute,
               layout.sequence_parallel, layout.pipeline_partition, layout.encoder_pipeline_stages)
        found = self._entries.get(key)
        if found is None:
            stages = self._compute(layout) if self._by_count(layout) else self._costed(layout)
            index = max(range(len(stages)), key=lambda i: (stages[i].total, -i))
            found = self._entries[key] = (stages, (index, stages[index]))
        return found

    def _by_count(self, layout: Layout) -> bool:
        """Whether the layout's layers are split by count over one stack: the closed forms below apply."""
        mode = layout.pipeline_partition or default_partition(self.model)
        return not self.model.encoder_decoder and (mode is Partition.EVEN or layout.pp * layout.virtual_stages == 1)

    def _costed(self, layout: Layout) -> tuple[StageMemory, ...]:
        """Split by cost, or an encoder-decoder model: the simulator's own memory function on a workload costed
        without communication (which does not move the split)."""
        if self.gpu is None:
            raise ValueError("a cost-balanced or encoder-decoder split needs the GPU (MemoryModel(model, gpu))")
        # The chunks (layers, parameters, messages) depend only on these; the rest of the layout is stage_memory's.
        key = (layout.tp, layout.pp, layout.virtual_stages, layout.microbatch_size, layout.sequence_parallel,
               layout.recompute, layout.pipeline_partition, layout.encoder_pipeline_stages)
        workload = self._workloads.get(key)
        if workload is None:
            workload = self._workloads[key] = build_workload(self.model, layout, self.gpu, None, None, True)
        return stage_memory(self.model, layout, workload)

    def _shape(self, layout: Layout) -> _Shape:
        key = (layout.tp, layout.pp, layout.virtual_stages, layout.num_microbatches, layout.schedule)
        shape = self._shapes.get(key)
        if shape is None:
            shape = self._shapes[key] = self._build_shape(layout)
        return shape

    def _build_shape(self, layout: Layout) -> _Shape:
        model, t, p, v = self.model, layout.tp, layout.pp, layout.virtual_stages
        per_layer_params = model.parameters_per_layer() // t
        vocab_params = model.vocab_size * model.hidden_size // t
        last_vs = p * v - 1
        params = [0] * p
        largest = [0.0] * p
        layers_of: list[dict[int, int]] = [{} for _ in range(p)]
        for vs, layers in enumerate(split_layers(model.num_layers, p * v)):
            chunk, rank = divmod(vs, p)
            weights = layers * per_layer_params
            if vs == 0:
                weights += vocab_params + model.seq_length * model.hidden_size // t
            if vs == last_vs and (p * v > 1 or not model.tied_embeddings):
                weights += vocab_params
            params[rank] += weights
            largest[rank] = max(largest[rank], weights / max(layers, 1))
            layers_of[rank][chunk] = layers
        return _Shape(tuple(params), tuple(largest), tuple(self._held(layout, r, layers_of[r]) for r in range(p)))

    @staticmethod
    def _held(layout: Layout, rank: int, layers: dict[int, int]) -> float:
        # The two one-chunk schedules in closed form (tested equal to simcore.cost.memory.in_flight): 1F1B holds its
        # pp - rank - 1 warm-up forwards plus one; GPipe holds every microbatch.
        if len(layers) == 1 and layout.schedule is Schedule.ONE_F_ONE_B:
            return float(min(layout.pp - rank, layout.num_microbatches) * layers[0])
        if len(layers) == 1 and layout.schedule is Schedule.GPIPE:
            return float(layout.num_microbatches * layers[0])
        return in_flight(layout, rank, layers)

    def _layer_bytes(self, layout: Layout) -> tuple[float, float]:
        """Bytes one layer keeps per microbatch under the layout's recomputation, and without recomputation."""
        key = (layout.microbatch_size, layout.tp, layout.sequence_parallel, layout.recompute)
        found = self._activations.get(key)
        if found is None:
            b, t, sp = layout.microbatch_size, layout.tp, layout.sequence_parallel
            found = self._activations[key] = (layer_activation_bytes(self.model, b, t, sp, layout.recompute),
                                              layer_activation_bytes(self.model, b, t, sp, Recompute.NONE))
        return found

    def _compute(self, layout: Layout) -> tuple[StageMemory, ...]:
        model, shape = self.model, self._shape(layout)
        b, t, dp, zero, p = layout.microbatch_size, layout.tp, layout.dp, layout.zero_stage, layout.pp
        per_layer, full_layer = self._layer_bytes(layout)
        tokens = b * model.seq_length
        buffers = RUNTIME_BYTES + (2 * ACTIVATION_BYTES * tokens * model.hidden_size / t if p > 1 else 0.0)
        weight_share = dp if zero >= 3 else 1
        gradient_share = dp if zero >= 2 else 1
        optimizer_share = dp if zero >= 1 else 1
        last_rank = (p * layout.virtual_stages - 1) % p
        out = []
        for rank in range(p):
            activations = shape.layers_held[rank] * per_layer
            if layout.recompute is Recompute.FULL:
                activations += full_layer  # the layer being recomputed
            if rank == 0:
                activations += tokens * model.hidden_size  # embedding dropout mask
            if rank == last_rank:
                activations += 4.0 * tokens * model.vocab_size / t  # fp32 logits for the loss
            params = shape.parameters[rank]
            out.append(StageMemory(
                weights=WEIGHT_BYTES * params / weight_share,
                gradients=GRADIENT_BYTES * params / gradient_share,
                optimizer_states=OPTIMIZER_BYTES * params / optimizer_share,
                activations=activations,
                buffers=buffers + (2 * WEIGHT_BYTES * shape.largest_layer[rank] if zero >= 3 else 0.0),
            ))
        return tuple(out)


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


@dataclass(slots=True)
class Plan:
    """The outcome of enumerating and pruning: feasible layouts in enumeration order, with their peak memory."""

    candidates: list[Layout] = field(default_factory=list)
    peak_memory_bytes: list[float] = field(default_factory=list)
    families: dict[Family, FamilyRecord] = field(default_factory=dict)
    generated: int = 0
    discarded: dict[str, int] = field(default_factory=lambda: {INVALID: 0, MEMORY: 0})

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
                space: Space) -> Plan:
    """Enumerate the space and discard what cannot run, recording per family the first reason."""
    memory = MemoryModel(model, gpu)
    plan = Plan()
    for layout in enumerate_layouts(model, num_gpus, gpus_per_node, global_batch_size, space):
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
