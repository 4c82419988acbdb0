"""How each framework runs sharded data parallelism (ZeRO 3): its gather units, prefetching, synchronisations and
gradient reductions, with the defaults read from the frameworks' sources (the `framework_defaults` of
`training-runs-modern.json` record them, with the commits).

- megatron: one all-gather per transformer layer (or per `zero3_gather_bucket_elements`), the next layer's
  prefetched while the current one computes; one reduce-scatter per layer (simcore/engine/data_parallel/dp_sync.py).
- fsdp (PyTorch FSDP1 full shard / FSDP2 fully_shard, one unit per transformer layer): one all-gather of the
  unit's flat parameter (all_gather_into_tensor). Forward: implicit prefetch (the host runs ahead and issues
  the next unit's all-gather on the unshard stream) held back by `limit_all_gathers`: `_FreeEventQueue` with
  `_max_num_inflight_all_gathers = 2` (torch/distributed/fsdp/_limiter_utils.py): a unit's all-gather may
  start once the compute of the unit three before it has freed its parameters, two units ahead. Backward:
  BackwardPrefetch.BACKWARD_PRE with backward_prefetch_limit 1: the previous unit's all-gather is issued before
  the current unit's gradient computation, one unit ahead. Activation checkpointing wraps the layer inside the
  unit, so recomputation runs on the unit's gathered parameters: no second gather. Gradients: one
  reduce-scatter of the unit's flat gradient after its backward.
- deepspeed (DeepSpeed since PR #1453, January 2022, partitioned_param_coordinator.py): one coalesced
  all-gather per sub-module (each Linear), on its own stream; the compute stream waits for that event only;
  prefetch of the next stage3_prefetch_bucket_size (5e7) elements in trace order; parameters under
  stage3_param_persistence_threshold (1e5) elements stay gathered; the recomputed forward fires the
  sub-modules' hooks again and re-gathers; a parameter is kept if it is used again within
  stage3_max_reuse_distance (1e9) elements; gradients reduce-scattered coalesced in buckets of
  reduce_bucket_size (5e8) elements. The coalesced reduce-scatter is built on the host, rank by rank
  (runtime/comm/coalesced_collectives.py, reduce_scatter_coalesced: @v0.8.3 f1e4fb0b8 and v0.9.5 fc9e1ee0, the
  releases of the ZeRO++ evaluation's time, and unchanged @edaa7221 of 2025): a Python slice per rank of every
  gradient in the bucket (then, unless the bucket is one gradient the group divides, an interleave of those
  slices into one torch.cat), and torch.chunk's view per rank of the flat buffer: one eager op per rank per
  gradient, one more per rank, at HOST_DISPATCH_S each (the interleave's appends and the cat's per-input work
  taken within that floor).
- deepspeed_2021 (DeepSpeed v0.3-v0.4; tag v0.4.0, commit 2d302d6a, stage3.py and partition_parameters.py): one
  all-gather per parameter (`_allgather_param`), each preceded by a device-wide torch.cuda.synchronize(); after a
  sub-module's fetch `_synchronize_communication` waits for the handles, the comm stream and the device; the
  all-gather is list-based (`torch.distributed.all_gather` into one tensor per rank: ProcessGroupNCCL copies the
  result out with one copy kernel per rank, and DeepSpeed builds the list with one `narrow` per rank): host work
  per rank; a prefetch (5e7 elements) only when nothing is in flight; parameters under 1e5 elements resident;
  the same reuse rule as above; gradients reduce-scattered one parameter at a time
  (`_reduce_scatter_gradients`, list-based again: the flatten copies one tensor per rank), each bucket's
  reductions issued when the next parameter's gradient overflows the 5e8-element bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcore.cost.layer_params import layer_submodules
from simcore.cost.parameters import HOST_DISPATCH_S
from simcore.cost.workload import Workload
from simcore.domain.layout import Layout, ZeroImplementation
from simcore.domain.model import ModelShape

# Host time per op that DeepSpeed v0.4's list-based collectives issue per rank of the group (a `narrow` view in
# DeepSpeed, a copy in ProcessGroupNCCL), in the eager PyTorch of 2021 (1.8-1.9), seconds. FITTED on the two
# ZeRO 3 rows of Narayanan et al. 2021 (FITTED_ROWS; `python bench/fit_zero3_host.py`), within 5-25 us, the range
# measured for an eager op from Python to kernel launch ("From PyTorch op to kernel launch",
# jiahuanglin.xyz/all_lessons/gpu_kernel_serving/18_pytorch_to_kernel.html; simcore/cost/parameters.py takes its
# floor, HOST_DISPATCH_S, for today's ops). validate marks the two rows as calibration rows.
HOST_OP_2021_S = 7.0e-6
HOST_OP_RANGE_S = (5e-6, 25e-6)
FITTED_ROWS = ("narayanan21-t2-175b-zero3-384", "narayanan21-t2-175b-zero3-1536")


@dataclass(frozen=True, slots=True)
class ShardingPolicy:
    """What an implementation does (sizes in elements)."""

    per_submodule: bool  # gather units are sub-modules (each Linear) rather than whole transformer layers
    per_parameter: bool  # one collective per parameter instead of one coalesced collective per unit
    forward_depth: int  # forward: how many units ahead of the one computing a gather may run
    backward_depth: int  # backward: the same
    prefetch_elements: int  # DeepSpeed's prefetch bucket (0: whole units, `*_depth` of them)
    persistence_threshold: int  # parameters with fewer elements stay gathered (never re-sharded)
    reuse_distance_elements: int  # a parameter used again within this many elements of trace stays gathered
    regather_on_recompute: bool  # the recomputed forward gathers the parameters again
    device_sync: bool  # torch.cuda.synchronize() before each gather and after each fetch: the device drains
    prefetch_when_idle: bool  # a prefetch is issued only when no gather is in flight
    list_collectives: bool  # one tensor per rank: the host issues per-rank ops, the GPU one copy per rank
    host_ops_per_rank: int  # host ops per rank of a list collective (a narrow view, a copy)
    host_op_s: float  # host time of one such op
    reduce_bucket_elements: int  # gradients reduce when a bucket this large overflows (0: per unit)
    host_built_reduce: bool = False  # a coalesced reduce-scatter is built on the host rank by rank (reduce_host_s)

    def reduce_host_s(self, gradients: list[int], ranks: int) -> float:
        """Host time to build one coalesced reduce-scatter of `gradients` (elements each) over `ranks` ranks
        (DeepSpeed 2023, the module docstring): per rank, a slice of each gradient and a view of the flat buffer;
        0 for the policies that build none."""
        if not self.host_built_reduce or ranks < 2:
            return 0.0
        return ranks * (len(gradients) + 1) * HOST_DISPATCH_S


POLICIES: dict[ZeroImplementation, ShardingPolicy] = {
    ZeroImplementation.FSDP: ShardingPolicy(
        per_submodule=False, per_parameter=False, forward_depth=2, backward_depth=1, prefetch_elements=0,
        persistence_threshold=0, reuse_distance_elements=0, regather_on_recompute=False, device_sync=False,
        prefetch_when_idle=False, list_collectives=False, host_ops_per_rank=0, host_op_s=0.0,
        reduce_bucket_elements=0),
    ZeroImplementation.DEEPSPEED: ShardingPolicy(
        per_submodule=True, per_parameter=False, forward_depth=2, backward_depth=2, prefetch_elements=50_000_000,
        persistence_threshold=100_000, reuse_distance_elements=1_000_000_000, regather_on_recompute=True,
        device_sync=False, prefetch_when_idle=False, list_collectives=False, host_ops_per_rank=0, host_op_s=0.0,
        reduce_bucket_elements=500_000_000, host_built_reduce=True),
    ZeroImplementation.DEEPSPEED_2021: ShardingPolicy(
        per_submodule=True, per_parameter=True, forward_depth=1, backward_depth=1, prefetch_elements=50_000_000,
        persistence_threshold=100_000, reuse_distance_elements=1_000_000_000, regather_on_recompute=True,
        device_sync=True, prefetch_when_idle=True, list_collectives=True, host_ops_per_rank=2,
        host_op_s=HOST_OP_2021_S, reduce_bucket_elements=500_000_000),
}


def policy(implementation: ZeroImplementation) -> ShardingPolicy | None:
    """The implementation's policy; None for megatron (simcore/engine/data_parallel/dp_sync.py's own ZeRO 3)."""
    return POLICIES.get(implementation)


@dataclass(frozen=True, slots=True)
class Unit:
    """What a framework gathers as one: a sub-module's parameters (or a whole layer's, or the chunk's embedding
    and output layer), sizes in elements per tensor rank, in the module's order. `layer` is its layer's index in
    the chunk (-1 for the embedding); `weight` the elements its compute is proportional to (its matrices: each
    projection's GEMMs are 2 x tokens x its weight's elements)."""

    parameters: tuple[int, ...]
    layer: int
    weight: int

    @property
    def elements(self) -> int:
        return sum(self.parameters)

    def matrices(self) -> tuple[bool, ...]:
        """Which of its parameters are matrices: the leading ones whose elements make up its compute weight (a
        Linear's weight before its bias, the embedding unit's tensor); biases and norms are vectors."""
        left, flags = self.weight, []
        for p in self.parameters:
            matrix = 0 < p <= left
            left -= p if matrix else 0
            flags.append(matrix)
        return tuple(flags)


def chunk_units(model: ModelShape, layer_counts: tuple[tuple[str, int], ...], parameters: int, tp: int,
                per_submodule: bool) -> tuple[Unit, ...]:
    """A chunk's gather units in forward order: its embedding and output layer (the parameters beyond its
    layers', one unit, if any), then each layer's sub-modules (or each whole layer)."""
    kinds = {layer.kind: layer for layer, _ in model.layer_stacks()}
    layers: list[Unit] = []
    index = 0
    for kind, count in layer_counts:
        mods = layer_submodules(model, kinds[kind], tp)
        for _ in range(count):
            if per_submodule:
                layers += [Unit(params, index, weight) for params, weight in mods]
            else:
                elements = sum(p for params, _ in mods for p in params)
                layers.append(Unit((elements,), index, sum(w for _, w in mods)))
            index += 1
    rest = parameters - sum(u.elements for u in layers)
    embedding = [Unit((rest,), -1, rest)] if rest > 0 else []
    return tuple(embedding + layers)


@dataclass(frozen=True, slots=True)
class Visit:
    """A unit's turn in a pass: its compute (seconds), whether it produces gradients (a backward visit), and
    whether its parameters stay gathered afterwards (used again within the reuse distance)."""

    unit: int
    compute_s: float
    backward: bool
    keep: bool


def pass_visits(units: tuple[Unit, ...], forward_s: float, recompute_s: float, backward_s: float,
                regather: bool, reuse_elements: int) -> tuple[tuple[Visit, ...], tuple[Visit, ...]]:
    """The forward and backward visits of one microbatch. Each visit's compute is its pass's time in proportion
    to the unit's weight. Backward runs the layers in reverse; with `regather` (full recomputation whose
    recomputed forward fires the sub-modules' hooks) each layer's units are visited in forward order for the
    recomputation, then in reverse for the backward; else the backward visit covers both. A visit keeps its
    parameters gathered when the same unit is visited again within `reuse_elements` elements of the units
    visited in between (DeepSpeed's reuse distance: `get_reuse_distance_in_numel` looks ahead in the trace of
    one forward and backward)."""
    total = sum(u.weight for u in units) or 1
    forward = [(i, forward_s * u.weight / total, False) for i, u in enumerate(units)]
    backward: list[tuple[int, float, bool]] = []
    grads_s = backward_s - recompute_s if regather else backward_s
    for layer in sorted({u.layer for u in units}, reverse=True):
        mine = [i for i, u in enumerate(units) if u.layer == layer]
        if regather and layer >= 0:
            backward += [(i, recompute_s * units[i].weight / total, False) for i in mine]
        own = grads_s if layer >= 0 else backward_s  # the embedding has no hooks to recompute: all in one visit
        backward += [(i, own * units[i].weight / total, True) for i in reversed(mine)]
    trace = forward + backward
    keeps = _keeps([i for i, _, _ in trace], [u.elements for u in units], reuse_elements)
    visits = [Visit(i, s, b, k) for (i, s, b), k in zip(trace, keeps, strict=True)]
    return tuple(visits[:len(forward)]), tuple(visits[len(forward):])


def _keeps(trace: list[int], elements: list[int], reuse: int) -> list[bool]:
    """For each visit of a microbatch's trace: is its unit visited again later in the trace within `reuse`
    elements of the units visited in between? (The trace restarts with each forward: nothing is kept across.)"""
    keeps = []
    for j, unit in enumerate(trace):
        distance, again = 0, False
        for nxt in trace[j + 1:]:
            if nxt == unit:
                again = True
                break
            distance += elements[nxt]
            if distance >= reuse:
                break
        keeps.append(again and distance < reuse)
    return keeps


def sharding_units(model: ModelShape, layout: Layout, workload: Workload) -> tuple[tuple[Unit, ...], ...] | None:
    """Each virtual stage's gather units under the layout's implementation, when it gathers per sub-module
    (deepspeed, deepspeed_2021); None otherwise."""
    found = policy(layout.zero_implementation)
    if found is None or not found.per_submodule or layout.zero_stage < 3:
        return None
    return tuple(chunk_units(model, c.layer_counts, c.parameters, layout.tp, True) for c in workload.chunks)
