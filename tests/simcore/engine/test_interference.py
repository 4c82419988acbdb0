"""Interference: compute beside collectives runs slower by the SMs and HBM bandwidth their channels take
(simcore/cost/comm/interference.py), event by event (simcore/engine/compute.py): exact small timelines, the form's
closed cases, and an overlapped data-parallel reduction slowing the backward pass it overlaps by the modelled
amount while the same layout without overlap is unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore.cost.comm.collectives import Collective, CollectiveModel
from simcore.cost.comm.interference import CommLoad, comm_load, hbm_bytes_per_byte, slowdown
from simcore.cost.parameters import FITTED
from simcore.cost.workload import build_workload
from simcore.domain.layout import CollectiveAlgorithm, Layout, Schedule
from simcore.domain.model import model_from_fields
from simcore.domain.placement import place
from simcore.engine.clock import Clock, Process, start
from simcore.engine.compute import ComputeStream
from simcore.simulate import Outcome, Scenario, simulate
from topology import GPUS, NODE_PRESETS, Router, build_cluster, sized

A100 = GPUS[NODE_PRESETS["dgx-a100"].gpu]


def test_slowdown_form() -> None:
    # Compute-bound: the GEMMs run on N - c SMs; memory-bound: on B - H bytes/s.
    assert slowdown(16, 0.0, 108, 2e12, 1.0) == pytest.approx(1 + 16 / 92)
    assert slowdown(16, 5e11, 108, 2e12, 0.0) == pytest.approx(1 + 5e11 / 1.5e12)
    assert slowdown(16, 5e11, 108, 2e12, 0.75) == pytest.approx(1 + 0.75 * 16 / 92 + 0.25 * 5e11 / 1.5e12)
    assert slowdown(0.0, 0.0, 108, 2e12, 0.5) == 1.0
    # A ring all-reduce reads what each GPU sends and writes and reduces what it receives: 3 x 2(n-1)/n.
    assert hbm_bytes_per_byte(Collective.ALL_REDUCE, 8) == pytest.approx(3 * 2 * 7 / 8)
    load = comm_load(Collective.ALL_GATHER, 4, 1e9, 0.01, 16, 0.5)
    assert load == CommLoad(8.0, 2 * 3 / 4 * 1e9 / 0.01)


def test_a_pass_slows_while_a_collective_is_in_flight() -> None:
    # 1 s of work; a collective taking 25 of 100 SMs runs from 0.25 s to 0.55 s, when the pass runs at 3/4 speed:
    # done 0.25 + 0.3 x 3/4 = 0.475 by then, the 0.525 left at full speed: the pass ends at 1.075 s. A milestone
    # at 0.5 s of work is reached 0.025 s after the collective ends; one at 0.4 s while it runs, at
    # 0.25 + 0.15 x 4/3 s.
    clock = Clock()
    gpu = ComputeStream(clock, 100, 1e12)
    load = CommLoad(25.0, 0.0)
    reached: list[float] = []
    ended: list[float] = []

    def run() -> Process:
        yield gpu.run(1.0, 1.0, 1.0, [(0.4, lambda: reached.append(clock.now)),
                                      (0.5, lambda: reached.append(clock.now))])
        ended.append(clock.now)

    start(clock, run())
    clock.call_in(0.25, gpu.comm_started, load)
    clock.call_in(0.55, gpu.comm_ended, load)
    clock.run()
    assert reached == [pytest.approx(0.25 + 0.15 * 4 / 3), pytest.approx(0.575)]
    assert ended == [pytest.approx(1.075)]


MODEL = model_from_fields({"architecture": "decoder_only", "num_layers": 8, "hidden_size": 2048,
                           "num_attention_heads": 16, "vocab_size": 1024, "seq_length": 2048})
CLUSTER = sized(NODE_PRESETS["dgx-a100"], 16)


def run(layout: Layout, share: float) -> Outcome:
    return simulate(Scenario(MODEL, CLUSTER, layout, algorithm=CollectiveAlgorithm.AUTO, keep_spans=True,
                             cost_parameters=replace(FITTED, comm_sm_share=share)))


def test_an_overlapped_reduction_slows_the_backward_pass_by_the_modelled_amount() -> None:
    # GPipe, one pipeline stage, two microbatches, ZeRO 2: the gradient reduce-scatter of the first backward
    # pass (microbatch 1) runs beside the second (microbatch 0), alone on the links for C seconds. With
    # f = 1 + share x (slowdown - 1) the pass does C / f of work meanwhile: it ends C (1 - 1/f) later.
    layout = Layout(dp=16, tp=1, pp=1, microbatch_size=2, global_batch_size=64, zero_stage=2,
                    schedule=Schedule.GPIPE)
    free, slowed = run(layout, 0.0), run(layout, 1.0)

    def span(outcome: Outcome, name: str) -> tuple[float, float]:
        found = [(s.start_s, s.end_s) for s in outcome.spans if s.name == name]
        return found[0]

    reduce_start, reduce_end = span(slowed, "reduce-scatter grad (ring/Simple)")
    seconds = reduce_end - reduce_start
    pass_start, pass_end = span(slowed, "bwd mb0")
    assert pass_start == reduce_start  # the reduction starts as the second backward pass does
    cluster = build_cluster(CLUSTER)
    collectives = CollectiveModel(cluster, Router(cluster), CollectiveAlgorithm.AUTO)
    placement = place(16, 1, 1, layout.placement, 16)
    chunk = build_workload(MODEL, layout, A100, placement, collectives).chunks[0]
    size = chunk.parameters * layout.grad_reduce_bytes
    channels = collectives.communicator(list(range(16))).channels
    load = comm_load(Collective.REDUCE_SCATTER, 16, size, seconds, channels, 1.0)
    f = slowdown(load.sms, load.hbm_bytes_per_s, A100.sm_count, A100.hbm_bandwidth_bytes_per_s, chunk.gemm_fraction)
    assert 1.05 < f < 1.3  # the published overlap studies' 5-20%, give or take
    free_start, free_end = span(free, "bwd mb0")
    assert pass_end - pass_start == pytest.approx(free_end - free_start + seconds * (1 - 1 / f), rel=1e-9)
    assert slowed.metrics.iteration_time_s > free.metrics.iteration_time_s


@pytest.mark.parametrize("zero_stage", [0, 1])
def test_the_same_layout_without_overlap_is_unchanged(zero_stage: int) -> None:
    # The reduction waits for the end of backward: nothing runs beside the passes.
    layout = Layout(dp=16, tp=1, pp=1, microbatch_size=2, global_batch_size=64, zero_stage=zero_stage)
    free, slowed = run(layout, 0.0), run(layout, 1.0)
    assert slowed.metrics.iteration_time_s == free.metrics.iteration_time_s
    assert slowed.metrics.time_breakdown_s == free.metrics.time_breakdown_s


def test_overlap_grad_reduce_trades_exposed_communication_for_slower_compute() -> None:
    layout = Layout(dp=16, tp=1, pp=1, microbatch_size=2, global_batch_size=32, overlap_grad_reduce=True)
    free, slowed = run(layout, 0.0), run(layout, 1.0)
    assert slowed.metrics.time_breakdown_s["compute"] > free.metrics.time_breakdown_s["compute"]
    assert sum(slowed.metrics.time_breakdown_s.values()) == pytest.approx(slowed.metrics.iteration_time_s)
