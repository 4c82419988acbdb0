"""DualPipe's overlapped pair on a mixture of experts (simcore/engine/pair_overlap.py): exact small timelines of
the two halves' pieces on a compute and a communication stream (an all-to-all shorter than the other half's
compute beside it is hidden, a longer one shows its excess), interference while an all-to-all is in flight,
and whole runs: DualPipe hides the all-to-alls that 1F1B leaves on the compute stream."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from api_schemas import SimulationRequest
from service import convert
from simcore.cost.chunk import ChunkCost
from simcore.cost.workload import build_workload
from simcore.domain.passes import OVERLAPPED
from simcore.domain.placement import place
from simcore.engine.pair_overlap import COMM, COMPUTE, WEIGHT, backward_pieces, forward_pieces, overlap
from simcore.engine.pass_work import PassTotals, pass_parts, pass_work
from simcore.network import build_network
from simcore.simulate import simulate

# One MoE layer per chunk: forward = attention side 4 s, dispatch 1 s, expert side 4 s, combine 1 s;
# backward = combine's gradient 1 s, expert side 3 s, dispatch's gradient 1 s, attention side 3 s.
FORWARD = ChunkCost(
    virtual_stage=0, rank=0, chunk=0, layers=1, layer_counts=(("moe", 1),), has_embedding=False,
    embeds_target=False, has_logits=False, forward_compute_s=8.0, forward_tp_s=0.0, backward_compute_s=6.0,
    backward_tp_s=0.0, recompute_s=0.0, recompute_tp_s=0.0, parameters=10, input_bytes=1.0,
    tp_hidden_forward_s=0.0, tp_hidden_backward_s=0.0, tp_bytes_forward=0.0, tp_bytes_backward=0.0,
    forward_ep_s=2.0, backward_ep_s=2.0, ep_bytes_forward=11.0, ep_bytes_backward=22.0, backward_weight_s=2.0,
    moe_layers=1, moe_forward_s=(4.0, 4.0), moe_backward_s=(3.0, 3.0))
BACKWARD = replace(FORWARD, virtual_stage=1, chunk=1)


def test_the_pieces_follow_the_layer() -> None:
    assert forward_pieces(FORWARD) == [(COMPUTE, 4.0), (COMM, 1.0), (COMPUTE, 4.0), (COMM, 1.0)]
    assert backward_pieces(BACKWARD) == [(COMM, 1.0), (COMPUTE, 3.0), (COMM, 1.0), (COMPUTE, 3.0)]


def test_all_to_alls_shorter_than_the_other_half_are_hidden() -> None:
    """t 0-4 forward attention beside the combine's gradient (0-1); 4-7 backward experts beside the dispatch
    (4-5); 7-11 forward experts beside the dispatch's gradient (7-8); 11-14 backward attention beside the
    combine (11-12): the pair takes its kernels' 14 s, and its 4 s of all-to-alls are all hidden."""
    work = pass_work(OVERLAPPED, FORWARD, BACKWARD)
    assert work.duration == pytest.approx(14.0, rel=1e-12)
    assert work.compute == pytest.approx(14.0, rel=1e-12)
    assert work.ep_comm == pytest.approx(0.0, abs=1e-12)
    assert work.ep_hidden == pytest.approx(4.0, rel=1e-12)
    assert work.ep_bytes == 33.0


def test_an_all_to_all_longer_than_the_other_half_shows_its_excess() -> None:
    """The forward's dispatch and combine take 5 s each: the dispatch (4-9) outlasts the backward experts (4-7),
    so the forward experts start at 9 and the dispatch's gradient runs 9-10; the combine (13-18) outlasts the
    backward attention (13-16). 2 + 2 s exposed: the pair takes 18 s."""
    forward = replace(FORWARD, forward_ep_s=10.0)
    work = pass_work(OVERLAPPED, forward, BACKWARD)
    assert work.duration == pytest.approx(18.0, rel=1e-12)
    assert work.ep_comm == pytest.approx(4.0, rel=1e-12)
    assert work.ep_hidden == pytest.approx(12.0 - 4.0, rel=1e-12)
    # the same chunks run one after the other (1F1B's forward and backward) expose all 14 s... of all-to-alls
    assert pass_work("F", forward).ep_comm + pass_work("B", BACKWARD).ep_comm == pytest.approx(12.0)


def test_deferred_weight_gradients_fill_the_wait_for_an_all_to_all() -> None:
    """Forward: attention 4, dispatch 1, experts 1, combine 1. Backward: combine's gradient 2, experts 4 of which
    W 2, dispatch's gradient 2, attention 2. With W in the experts' piece the dispatch's gradient starts at 8
    and the compute stream idles 9-10 waiting for it: 12 s. With W deferred it starts at 6, W runs 7-9 beside it
    and the combine (8-9), and the pair takes its 11 s of kernels."""
    forward = replace(FORWARD, forward_compute_s=5.0, moe_forward_s=(4.0, 1.0))
    backward = replace(BACKWARD, backward_ep_s=4.0, moe_backward_s=(2.0, 4.0))
    together = pass_work(OVERLAPPED, forward, backward)
    assert together.duration == pytest.approx(12.0, rel=1e-12) and together.ep_comm == pytest.approx(1.0)
    split = pass_work(OVERLAPPED, forward, replace(backward, moe_weight_s=(0.0, 2.0)))
    assert backward_pieces(replace(backward, moe_weight_s=(0.0, 2.0))) == [
        (COMM, 2.0), (COMPUTE, 2.0), (WEIGHT, 2.0), (COMM, 2.0), (COMPUTE, 2.0)]
    assert split.duration == pytest.approx(11.0, rel=1e-12) and split.ep_comm == pytest.approx(0.0, abs=1e-12)


def test_compute_beside_an_all_to_all_runs_slower() -> None:
    """A 4 s kernel beside a 1 s all-to-all at slowdown 1.5: 2/3 s of work in the first second, the remaining
    10/3 s at full speed; the pair ends at 13/3 s, 1/3 s of it interference."""
    timing = overlap(([(COMPUTE, 4.0)], [(COMM, 1.0)]), (1.5, 1.5))
    assert timing.duration == pytest.approx(13 / 3, rel=1e-12)
    assert timing.slowed == pytest.approx(1 / 3, rel=1e-12)
    assert timing.exposed == pytest.approx(0.0, abs=1e-12)
    slowed = pass_work(OVERLAPPED, replace(FORWARD, ep_slowdown=1.5), replace(BACKWARD, ep_slowdown=1.5))
    assert slowed.duration > 14.0 and slowed.compute == pytest.approx(slowed.duration, rel=1e-12)


def test_a_pair_is_never_shorter_than_either_stream() -> None:
    for forward_ep in (0.0, 1.0, 3.0, 10.0, 40.0):
        for backward_ep in (0.0, 2.0, 9.0):
            work = pass_work(OVERLAPPED, replace(FORWARD, forward_ep_s=forward_ep),
                             replace(BACKWARD, backward_ep_s=backward_ep))
            assert work.duration >= 14.0 - 1e-12
            assert work.duration >= forward_ep + backward_ep - 1e-12
            assert work.duration <= 14.0 + forward_ep + backward_ep + 1e-12
            assert work.ep_comm + work.ep_hidden == pytest.approx(forward_ep + backward_ep)


def test_spans_and_totals_account_the_pair() -> None:
    forward = replace(FORWARD, forward_ep_s=10.0)
    work = pass_work(OVERLAPPED, forward, BACKWARD)
    parts = pass_parts(OVERLAPPED, forward, "x", BACKWARD)
    assert sum(d for _c, _n, d in parts) == pytest.approx(work.duration)
    totals = PassTotals()
    totals.add(work, 0.0)
    assert (totals.ep_comm, totals.ep_hidden) == pytest.approx((4.0, 8.0))


SMALL: dict[str, Any] = {
    "model": {"architecture": "decoder_only", "num_layers": 8, "hidden_size": 2048, "num_attention_heads": 16,
              "ffn_hidden_size": 8192, "vocab_size": 32000, "seq_length": 2048, "activation": "swiglu",
              "attention": "flash", "num_experts": 16, "moe_top_k": 4, "moe_ffn_hidden_size": 1024},
    "cluster": {"preset": "dgx-h100", "num_nodes": 4},
    "layout": {"dp": 8, "tp": 1, "pp": 4, "ep": 8, "microbatch_size": 1, "global_batch_size": 128},
}


def run(schedule: str) -> dict[str, Any]:
    doc = copy.deepcopy(SMALL)
    doc["layout"]["schedule"] = schedule
    return convert.to_response(simulate(convert.to_scenario(SimulationRequest.model_validate(doc))))


def test_dualpipe_hides_the_all_to_alls_that_1f1b_exposes() -> None:
    """The same MoE model, EP across nodes: both runs carry the same all-to-all bytes and about the same
    all-to-all time, but 1F1B runs all of it on the compute stream, while DualPipe's overlapped pairs hide most
    of it under the other half's kernels; DualPipe holds two stages' weights per rank."""
    one, dual = run("1f1b"), run("dualpipe")
    assert dual["communication_bytes"]["ep"] == pytest.approx(one["communication_bytes"]["ep"], rel=1e-9)
    assert dual["communication_s"]["ep"] == pytest.approx(one["communication_s"]["ep"], rel=0.05)
    exposed_one, exposed_dual = one["time_breakdown_s"]["ep_comm"], dual["time_breakdown_s"]["ep_comm"]
    # (the breakdown is per rank, the busy time summed over the 4 ranks) 1F1B hides nothing
    assert exposed_one * 4 == pytest.approx(one["communication_s"]["ep"], rel=1e-9)
    assert exposed_dual < 0.5 * exposed_one
    assert dual["iteration_time_s"] < one["iteration_time_s"]
    weights = [s["memory"]["breakdown_gib"]["expert_weights"] for s in (one["stages"][0], dual["stages"][0])]
    assert weights[1] == pytest.approx(2 * weights[0], rel=1e-9)


def test_interference_slows_the_pairs_kernels_only_when_it_is_on() -> None:
    """With comm_sm_share 0 (the fitted default, as the engine's interference) the all-to-alls take nothing
    from the kernels beside them; with 1 each channel takes an SM, and the pairs' compute grows."""
    doc = copy.deepcopy(SMALL)
    doc["layout"]["schedule"] = "dualpipe"
    scenario = convert.to_scenario(SimulationRequest.model_validate(doc))
    off = simulate(scenario).metrics
    on = simulate(replace(scenario, cost_parameters=replace(scenario.cost_parameters, comm_sm_share=1.0))).metrics
    assert scenario.cost_parameters.comm_sm_share == 0.0
    assert on.time_breakdown_s["compute"] > off.time_breakdown_s["compute"]
    assert on.communication_s["ep"] == pytest.approx(off.communication_s["ep"], rel=1e-12)
    network = build_network(scenario.cluster, scenario.algorithm)
    layout = scenario.layout
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, scenario.cluster.num_gpus, layout.cp)
    slowdowns = [{chunk.ep_slowdown for chunk in build_workload(
        scenario.model, layout, scenario.cluster.hardware, placement, network.collectives, False,
        replace(scenario.cost_parameters, comm_sm_share=share)).chunks} for share in (0.0, 1.0)]
    assert slowdowns[0] == {1.0} and min(slowdowns[1]) > 1.0
