"""A search's planning in slices: the space of each cluster size cut into one slice per (tp, cp), each
enumerated, pruned (simcore.planning.prune) and estimated (simcore.planning.estimate) as one task on the search's
executor, and the slices joined again in the space's enumeration order (simcore.planning.space enumerates tp,
then cp, outermost), so the plan is the same however many workers made it. With one worker the space is one
slice, planned in this process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from simcore.cost.comm.collectives import CollectiveAlgorithm
from simcore.cost.compute.measured_gemm import measured_parameters
from simcore.cost.parameters import CostParameters
from simcore.domain.model import ModelShape
from simcore.planning.estimate import Estimator
from simcore.planning.executor import Executor
from simcore.planning.prune import Plan, plan_search
from simcore.planning.space import Space, context_parallel_sizes, divisors
from simcore.simulate import Scenario
from topology.cluster_spec import ClusterSpec
from topology.hardware import GPUS


@dataclass(frozen=True, slots=True)
class PlanSlice:
    """A part of a search's planning: the layouts of `space` (narrowed to one tp and cp) on one cluster size,
    enumerated, pruned and estimated; `seconds` (None: no limit) is the time left to enumerate."""

    index: int
    model: ModelShape
    cluster: ClusterSpec
    global_batch_size: int
    space: Space
    params: CostParameters
    seconds: float | None
    algorithm: CollectiveAlgorithm = CollectiveAlgorithm.AUTO


# The last estimator a worker made: a search's slices share their cluster and model, so a worker builds the
# estimator's network (simcore.planning.estimate) once for all the slices it plans, not once a slice.
_last: list[tuple[tuple[object, ...], Estimator]] = []


def estimator_for(model: ModelShape, cluster: ClusterSpec, params: CostParameters,
                  algorithm: CollectiveAlgorithm) -> Estimator:
    """An estimator of `model` on `cluster`: the last one made in this process when it was made for the same."""
    key = (model, cluster, params, algorithm)
    if _last and _last[0][0] == key:
        return _last[0][1]
    estimator = Estimator(model, cluster, params, algorithm)
    _last[:] = [(key, estimator)]
    return estimator


def plan_slice(task: PlanSlice) -> tuple[int, Plan, list[float]]:
    """Plan one slice (simcore.planning.prune.plan_search) and estimate its candidates' tokens/s
    (simcore.planning.estimate): (its index, its plan, the estimates). A module-level function, so that the
    process pool and Ray can run it."""
    deadline = time.perf_counter() + task.seconds if task.seconds is not None else None
    cluster = task.cluster
    plan = plan_search(task.model, cluster.num_gpus, cluster.gpus_per_node, GPUS[cluster.gpu], task.global_batch_size,
                       task.space, task.params, deadline)
    estimator = estimator_for(task.model, cluster, task.params, task.algorithm)
    return task.index, plan, [estimator.tokens_per_s(layout) for layout in plan.candidates]


def merge_plans(plans: Sequence[Plan]) -> Plan:
    """One plan of several cluster sizes: candidates in size order; a family's dp x tp x pp names its size."""
    if len(plans) == 1:
        return plans[0]
    merged = Plan()
    for plan in plans:
        merged.candidates.extend(plan.candidates)
        merged.peak_memory_bytes.extend(plan.peak_memory_bytes)
        merged.families.update(plan.families)
        merged.generated += plan.generated
        merged.truncated |= plan.truncated
        for kind, count in plan.discarded.items():
            merged.discarded[kind] = merged.discarded.get(kind, 0) + count
    return merged


def plan_in_slices(runner: Executor, model: ModelShape, sizes: Sequence[ClusterSpec], space: Space, base: Scenario,
          global_batch_size: int, seconds: float | None) -> list[tuple[Plan, list[float]]]:
    """Each cluster size's plan and its candidates' estimates. With more than one worker the space is planned in
    slices, one a (tp, cp) of each size, on the workers: the slices' candidates, in slice order, are the whole
    space's in its enumeration order (simcore.planning.space enumerates tp, then cp, outermost)."""
    slices: list[PlanSlice] = []
    for c, cluster in enumerate(sizes):
        params = measured_parameters(base.cost_parameters, cluster)  # with the user's GEMM sweep, if any
        n = cluster.num_gpus
        parts = [space]
        if runner.workers > 1:
            tps = space.tp if space.tp is not None else tuple(t for t in divisors(n) if t <= cluster.gpus_per_node)
            parts = []
            for tp in tps:
                cps = (space.cp if space.cp is not None else context_parallel_sizes(model, n // tp)) \
                    if n % tp == 0 else None
                parts += [replace(space, tp=(tp,))] if cps is None else [replace(space, tp=(tp,), cp=(cp,))
                                                                          for cp in cps]
        slices += [PlanSlice(c, model, cluster, global_batch_size, part, params, seconds, base.algorithm)
                   for part in parts]
    done: dict[int, tuple[int, Plan, list[float]]] = {}
    items = iter(list(enumerate(slices)))

    def task(item: tuple[int, PlanSlice]) -> PlanSlice:
        return replace(item[1], index=item[0])

    runner.run(plan_slice, (task(item) for item in items), lambda out: done.__setitem__(out[0], out), lambda: False)
    out = []
    for c in range(len(sizes)):
        mine = [done[k] for k in sorted(done) if slices[k].index == c]
        out.append((merge_plans([plan for _, plan, _ in mine]), [e for _, _, found in mine for e in found]))
    return out
