"""Hand-made workloads for exact pipeline timelines: every chunk costs what the test says, communication is free."""

from __future__ import annotations

from simcore.cost.comm.collectives import CollectiveModel
from simcore.cost.workload import ChunkCost, Workload
from simcore.domain.layout import CollectiveAlgorithm, Layout, Schedule
from simcore.domain.placement import place
from simcore.domain.schedules import POLICIES
from simcore.engine.pipeline import Engine, EngineConfig, EngineResult
from topology import NODE_PRESETS, Router, build_cluster, sized


def chunk(vs: int, layout: Layout, forward: float, backward_input: float, backward_weight: float) -> ChunkCost:
    """A chunk whose forward, input-gradient and weight-gradient passes take the given seconds."""
    shape = layout.shape
    rank_, chunk_ = shape.rank(vs), shape.chunk(vs)
    return ChunkCost(
        virtual_stage=vs, rank=rank_, chunk=chunk_, layers=1, layer_counts=(("transformer", 1),),
        has_embedding=shape.is_first(vs), embeds_target=False, has_logits=False,
        forward_compute_s=forward, forward_tp_s=0.0, backward_compute_s=backward_input + backward_weight,
        backward_tp_s=0.0, recompute_s=0.0, recompute_tp_s=0.0, parameters=1000, input_bytes=1e6,
        tp_hidden_forward_s=0.0, tp_hidden_backward_s=0.0, tp_bytes_forward=0.0, tp_bytes_backward=0.0,
        backward_weight_s=backward_weight)


def run_costs(schedule: Schedule, pp: int, m: int, costs: list[tuple[float, float, float]],
              keep_spans: bool = False, post_validation: bool = False, costed: bool = False) -> EngineResult:
    """Run one iteration of `schedule` on pp ranks and m microbatches (one sample each), virtual stage i costing
    costs[i] = (T_F, T_B, T_W); no optimizer time, free communication. With `costed` the schedule builds its
    order on these costs (else on equal ones)."""
    layout = Layout(dp=1, tp=1, pp=pp, microbatch_size=1, global_batch_size=m, schedule=schedule,
                    optimizer_post_validation=post_validation)
    workload = Workload(tuple(chunk(vs, layout, *c) for vs, c in enumerate(costs)), (0.0,) * pp, (0.0,) * pp)
    spec = sized(NODE_PRESETS["dgx-a100"], pp)
    graph = build_cluster(spec)
    collectives = CollectiveModel(graph, Router(graph), CollectiveAlgorithm.RING)
    placement = place(1, 1, pp, layout.placement, pp)
    passes = tuple(POLICIES[schedule].passes(r, pp, m, layout.shape.chunks, tuple(costs)) for r in range(pp)) \
        if costed else None
    return Engine(EngineConfig(layout, placement, workload, collectives, free_communication=True,
                               keep_spans=keep_spans, passes=passes)).run()


def idle_per_rank(result: EngineResult) -> list[float]:
    """Seconds each pipeline rank's compute stream waited on another stage (its bubble)."""
    return [r.time_s["bubble"] for r in sorted(result.recorder.ranks, key=lambda r: r.pipeline_rank)]
