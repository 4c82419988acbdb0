"""The search estimate's tensor-parallel time (simcore.planning.estimate): per pipeline rank, what each layer
type's tensor-parallel collectives add to its kernels per microbatch, from the engine's own layer cost
(`simcore.cost.workload.layer_cost`) on the rank's real groups, every data-parallel replica's at once, so a group
across nodes gets what the collective model gives it there; no formula of its own (no I/O).

The collective model's patterns cost milliseconds a group set, and a search estimates tens of thousands of
layouts, so the figures are shared by groups of one shape: groups inside a node are costed on their node's alone
(the others' share no link with them, and run alike); groups across nodes are shared by the pipeline ranks whose
groups are the same moved by whole nodes (members as far apart and in as many nodes, the replicas' groups as far
apart). Both give every rank's own figure to the bit on the Llama-3-70B and GPT-3 175B search problems (32 and
128 DGX nodes); on the 1T's 384 nodes moving a group across the fabric's leaves can change it (at most 49%, a TP 2
group split over nodes 192 apart).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from simcore.cost.comm.collectives import CollectiveModel
from simcore.cost.comm.groups import tensor_parallel_groups
from simcore.cost.context_parallel import local_model
from simcore.cost.parameters import CostParameters
from simcore.cost.workload import layer_cost, layer_kernels
from simcore.domain.layout import Layout, Recompute
from simcore.domain.model import LayerType, ModelShape
from simcore.domain.placement import place
from topology.hardware import GpuSpec

Seconds = dict[LayerType, tuple[float, float]]  # per layer type: (all it adds, of it the forward pass's)


class TensorParallelTimes:
    """What tensor-parallel collectives add to the layers of one model on one cluster, per layout (cached).
    `collectives` gives the engine's collective model of the cluster (built when first needed)."""

    def __init__(self, model: ModelShape, num_gpus: int, gpus_per_node: int, gpu: GpuSpec, params: CostParameters,
                 collectives: Callable[[], CollectiveModel]) -> None:
        self.model, self.num_gpus, self.gpus_per_node, self.gpu, self.params = (model, num_gpus, gpus_per_node, gpu,
                                                                                params)
        self._collectives = collectives
        self._ranks: dict[tuple[object, ...], tuple[tuple[tuple[object, ...], Sequence[tuple[int, ...]]], ...]] = {}
        self._shapes: dict[tuple[object, ...], Seconds] = {}
        self._layouts: dict[tuple[object, ...], tuple[Seconds, ...]] = {}
        self._means: dict[tuple[object, ...], tuple[tuple[float, float], ...]] = {}

    @staticmethod
    def _costed(layout: Layout) -> tuple[object, ...]:
        """What of a layout, besides its groups, a layer's tensor-parallel time depends on."""
        return (layout.microbatch_size, layout.tp, layout.sequence_parallel, layout.recompute, layout.tp_comm_overlap,
                layout.async_tensor_model_parallel_allreduce, layout.fp8, layout.ep, layout.expert_tp, layout.cp)

    def per_rank(self, layout: Layout) -> tuple[Seconds, ...]:
        """Per pipeline rank, the seconds each layer type's tensor-parallel collectives add per microbatch to its
        kernels (forward, backward, and full recomputation's forward again), and of those its forward pass's."""
        costed = self._costed(layout)
        key = (layout.dp, layout.pp, layout.placement, costed)
        found = self._layouts.get(key)
        if found is not None:
            return found
        local = local_model(self.model, layout.cp)
        if layout.tp == 1:
            none = {layer: (0.0, 0.0) for layer, _ in local.layer_stacks()}
            found = self._layouts[key] = (none,) * layout.pp
            return found
        ranks = []
        for shape, groups in self._groups(layout):
            costs = self._shapes.get((shape, costed))
            if costs is None:
                costs = self._shapes[(shape, costed)] = {}
                redo = {Recompute.FULL: "forward", Recompute.SELECTIVE: "core"}.get(layout.recompute)
                for layer, _ in local.layer_stacks():
                    k = layer_kernels(local, layer, layout, self.gpu, self.params)
                    cost = layer_cost(local, layer, layout, k, self._collectives(), groups, False, self.gpu,
                                      self.params)
                    engine = (cost.forward + cost.backward + cost.tp_forward + cost.tp_backward
                              + cost.recompute(layout.recompute))
                    costs[layer] = (engine - k.forward - k.backward - (getattr(k, redo) if redo else 0.0),
                                    cost.forward + cost.tp_forward - k.forward)
            ranks.append(costs)
        found = self._layouts[key] = tuple(ranks)
        return found

    def mean(self, layout: Layout) -> tuple[tuple[float, float], ...]:
        """Per pipeline rank of a single stack, `per_rank` over its layer types weighted by their share of the
        layers: (all, of it the forward pass's)."""
        key = (layout.dp, layout.pp, layout.placement, self._costed(layout))
        found = self._means.get(key)
        if found is None:
            stacks = local_model(self.model, layout.cp).layer_stacks()
            count = sum(n for _, n in stacks)
            found = self._means[key] = tuple(
                (sum(n * costs[x][0] for x, n in stacks) / count, sum(n * costs[x][1] for x, n in stacks) / count)
                for costs in self.per_rank(layout))
        return found

    def _groups(self, layout: Layout) -> tuple[tuple[tuple[object, ...], Sequence[tuple[int, ...]]], ...]:
        """Per pipeline rank, the shape of its tensor-parallel groups and the groups to cost it on."""
        key = (layout.dp, layout.tp, layout.pp, layout.cp, layout.placement)
        found = self._ranks.get(key)
        if found is None:
            placement = place(layout.dp, layout.tp, layout.pp, layout.placement, self.num_gpus, layout.cp)
            gpn, ranks = self.gpus_per_node, []
            for r in range(layout.pp):
                groups: Sequence[tuple[int, ...]] = tensor_parallel_groups(placement, r, range(layout.dp))
                first = groups[0][0]
                node = first // gpn
                if all(g // gpn == node for g in groups[0]):  # inside a node
                    groups = tuple(g for g in groups if g[0] // gpn == node)
                    shape: tuple[object, ...] = tuple(tuple(x - node * gpn for x in g) for g in groups)
                else:  # its members and the next replica's group, relative to its first member and its node
                    shape = (tuple(x - first for x in groups[0]), tuple(x // gpn - node for x in groups[0]),
                             tuple(g[0] - first for g in groups[:2]), tuple(g[0] // gpn - node for g in groups[:2]),
                             len(groups))
                ranks.append((shape, groups))
            found = self._ranks[key] = tuple(ranks)
        return found
