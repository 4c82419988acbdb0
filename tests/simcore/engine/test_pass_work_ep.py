"""A MoE chunk's all-to-alls in pass_work: on the compute stream of its forward and whole or input-gradient
backward passes (as the engine ran them before passes were split), never in a weight-gradient pass."""

from __future__ import annotations

import pytest

from simcore.cost.chunk import ChunkCost
from simcore.domain.passes import BACKWARD_INPUT, BACKWARD_WEIGHT, FORWARD
from simcore.engine.pass_work import PassTotals, pass_parts, pass_work

COST = ChunkCost(
    virtual_stage=0, rank=0, chunk=0, layers=2, layer_counts=(("moe", 2),), has_embedding=True,
    embeds_target=False, has_logits=True, forward_compute_s=1.0, forward_tp_s=0.1, backward_compute_s=2.0,
    backward_tp_s=0.2, recompute_s=1.4, recompute_tp_s=0.1, parameters=10, input_bytes=0.0,
    tp_hidden_forward_s=0.0, tp_hidden_backward_s=0.0, tp_bytes_forward=5.0, tp_bytes_backward=7.0,
    forward_ep_s=0.3, backward_ep_s=0.6, recompute_ep_s=0.3, ep_bytes_forward=11.0, ep_bytes_backward=22.0,
    backward_weight_s=0.8)


def test_forward_and_backward_take_their_all_to_alls() -> None:
    forward = pass_work(FORWARD, COST)
    assert forward.duration == pytest.approx(COST.forward_s) == pytest.approx(1.4)
    assert (forward.ep_comm, forward.ep_bytes) == (0.3, 11.0)
    backward = pass_work("B", COST)
    assert backward.duration == pytest.approx(COST.backward_s) == pytest.approx(4.2)
    assert backward.recompute == pytest.approx(1.0)  # the recomputed forward's kernels only
    assert backward.ep_comm == pytest.approx(0.9)
    assert backward.ep_bytes == 22.0


def test_the_split_keeps_the_all_to_alls_on_the_input_gradient() -> None:
    split = pass_work(BACKWARD_INPUT, COST)
    weight = pass_work(BACKWARD_WEIGHT, COST)
    assert split.duration + weight.duration == pytest.approx(COST.backward_s)
    assert split.ep_comm == pytest.approx(0.9) and weight.ep_comm == 0.0


def test_spans_add_up_to_the_pass_and_show_the_all_to_alls() -> None:
    for direction in (FORWARD, "B", BACKWARD_INPUT):
        parts = pass_parts(direction, COST, "x")
        assert sum(d for _c, _n, d in parts) == pytest.approx(pass_work(direction, COST).duration)
        assert sum(d for c, _n, d in parts if c == "ep_comm") == pytest.approx(pass_work(direction, COST).ep_comm)


def test_totals_account_the_all_to_alls() -> None:
    totals = PassTotals()
    totals.add(pass_work(FORWARD, COST), 0.0)
    totals.add(pass_work("B", COST), 0.5)
    assert totals.ep_comm == pytest.approx(1.2) and totals.ep_bytes == 33.0
    assert totals.busy == pytest.approx(1.4 + 4.2 + 0.5)
