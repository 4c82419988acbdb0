"""A floor under a layout's simulated iteration time, from the same workload the engine runs: each pipeline rank runs
its passes' kernels one after another on its compute stream and then its optimizer step, so no simulation of the
layout ends before the busiest rank's kernels and step are done, whatever its communication, bubbles and
interference add (they only ever add: a pass takes at least its kernels' time, simcore/engine/pass_work.py, and
where the engine runs it whole on the compute stream, its exposed tensor-parallel and all-to-all time too).

So `tokens_ceiling` is a speed no simulation of the layout can beat. It is loose (no bubble, no exposed
communication), but it holds without any estimate: bench/search_proof.py uses it to find the exhaustive best of a
space by simulating only the layouts whose ceiling beats the best simulated, and checks the floor under every
layout it simulates (tests/simcore/planning/test_floor.py checks it on every kind of layout).
"""

from __future__ import annotations

from simcore.cost.chunk import ChunkCost
from simcore.cost.compute.measured_gemm import measured_parameters
from simcore.cost.workload import build_workload
from simcore.domain.passes import BACKWARD, FORWARD, OVERLAPPED
from simcore.domain.pipeline_shape import PipelineShape, ShapeKind
from simcore.domain.placement import place
from simcore.engine.pass_work import pass_work
from simcore.network import Network, shared_network
from simcore.simulate import Scenario


def iteration_floor_s(scenario: Scenario, network: Network | None = None) -> float:
    """Seconds under which no simulation of `scenario` ends: the busiest pipeline rank's kernels and optimizer
    step (0.0 where ranks differ from the first replica's: heterogeneous GPUs or stragglers)."""
    cluster, layout, model = scenario.cluster, scenario.layout, scenario.model
    if cluster.node_groups or cluster.health.uneven_compute:
        return 0.0
    if network is None:
        network = shared_network(cluster, scenario.algorithm)
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, cluster.num_gpus, layout.cp)
    params = measured_parameters(scenario.cost_parameters, cluster)
    workload = build_workload(model, layout, cluster.hardware, placement, network.collectives,
                              scenario.free_communication, params)
    chunks, shape = workload.chunks, layout.shape
    domain_of = network.collectives.cluster.domain_of
    orders = network.passes(layout, workload)
    totals, first_forward, first_backward = [], [], []
    for rank, passes in enumerate(orders):
        # A pass takes its whole duration (its exposed tensor-parallel and all-to-all time with its kernels) on
        # the compute stream, unless its tensor-parallel collectives run on the links between domains, ZeRO 3
        # runs it sub-module by sub-module, a context-parallel ring plan runs it, or it is an overlapped pair:
        # those take at least their kernels.
        whole = (not scenario.free_communication and layout.zero_stage < 3
                 and len({domain_of(gpu) for gpu in placement.tp_group(0, rank)}) == 1)
        seconds = _PassSeconds(chunks, shape, rank, whole)
        totals.append(sum(seconds(ps.direction, ps.chunk, ps.backward_chunk) for ps in passes))
        first_forward.append(seconds(FORWARD, 0))
        last = passes[-1] if passes else None
        # The pass after which the last microbatch's backward still has every stage below to cross: a whole
        # backward of the rank's first stage (1F1B, GPipe, interleaved: their last pass).
        ends_chain = last is not None and last.direction == BACKWARD and shape.stage(rank, last.chunk) == rank
        first_backward.append(seconds(BACKWARD, 0) if ends_chain else None)
    # Before its first pass a rank waits for the first microbatch's forward on every stage below it (a stage's
    # first chunk on a loop or V: stage r is rank r's chunk 0); after a last pass that ends the chain, the
    # microbatch's backward crosses every stage below it before the first rank's optimizer step. (DualPipe feeds
    # both ends: no chain.)
    chained = shape.kind is not ShapeKind.DUAL
    floor = 0.0
    for rank, total in enumerate(totals):
        before = sum(first_forward[:rank]) if chained else 0.0
        below = first_backward[:rank]
        if chained and first_backward[rank] is not None and all(b is not None for b in below):
            after = sum(b for b in below if b is not None) + (workload.optimizer_s[0] if rank else 0.0)
            floor = max(floor, before + total + max(after, workload.optimizer_s[rank]))
        else:
            floor = max(floor, before + total + workload.optimizer_s[rank])
    return floor


def tokens_ceiling(scenario: Scenario, network: Network | None = None) -> float:
    """Tokens/s no simulation of `scenario` exceeds (inf where there is no floor)."""
    floor = iteration_floor_s(scenario, network)
    tokens = scenario.layout.global_batch_size * scenario.model.tokens_per_sample
    return tokens / floor if floor > 0 else float("inf")


class _PassSeconds(dict[tuple[str, int, int], float]):
    """A rank's pass times by (direction, chunk, backward chunk): the whole pass where `whole`
    (iteration_floor_s), else its kernels."""

    def __init__(self, chunks: tuple[ChunkCost, ...], shape: PipelineShape, rank: int, whole: bool) -> None:
        super().__init__()
        self.chunks, self.shape, self.rank, self.whole = chunks, shape, rank, whole

    def __call__(self, direction: str, chunk: int, backward_chunk: int = -1) -> float:
        key = (direction, chunk, backward_chunk)
        found = self.get(key)
        if found is None:
            cost = self.chunks[self.shape.stage(self.rank, chunk)]
            backward = self.chunks[self.shape.stage(self.rank, backward_chunk)] if direction == OVERLAPPED else None
            work = pass_work(direction, cost, backward)
            planned = cost.cp_forward if direction == FORWARD else cost.cp_backward
            found = self[key] = (work.duration if self.whole and planned is None and backward is None
                                 else work.compute + work.recompute)
        return found
