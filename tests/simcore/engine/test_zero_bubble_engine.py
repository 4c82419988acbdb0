"""Zero-bubble schedules on the engine: exact small timelines with hand-made costs, the papers' closed forms on
equal stages, and what an uneven split (stage_layers) does."""

from __future__ import annotations

import pytest
from pipeline_fixtures import idle_per_rank, run_costs

from simcore.domain.layout import Layout, Schedule
from simcore.domain.model import ModelShape, model_from_fields
from simcore.simulate import Outcome, Scenario, simulate
from topology import NODE_PRESETS, sized


def test_zb_h1_two_stages_exact_timeline() -> None:
    # T_F = T_B = T_W = 1 s, p = 2, m = 2. Rank 1 runs F0 I0 F1 I1 W0 W1, rank 0 (never split) F0 F1 B0 B1:
    # rank 0 idles from 2 to 3 s for I0's gradient, then runs B0 and B1 back to back; both end at 7 s.
    # 1F1B takes 9 s on the same costs.
    zb = run_costs(Schedule.ZB_H1, 2, 2, [(1.0, 1.0, 1.0)] * 2)
    assert zb.iteration_time_s == pytest.approx(7.0)
    assert idle_per_rank(zb) == pytest.approx([1.0, 1.0])  # (p - 1)(T_F + T_B - T_W) = 1 s on each stage
    assert run_costs(Schedule.ONE_F_ONE_B, 2, 2, [(1.0, 1.0, 1.0)] * 2).iteration_time_s == pytest.approx(9.0)


@pytest.mark.parametrize("pp,m", [(4, 4), (4, 8), (8, 8), (8, 24)])
@pytest.mark.parametrize("costs", [(1.0, 1.0, 1.0), (1.0, 1.2, 0.8), (1.0, 1.0, 0.5)])
def test_zb_h1_idle_is_p_minus_1_times_tf_plus_tb_minus_tw(pp: int, m: int, costs: tuple[float, float, float]) -> None:
    f, b, w = costs  # T_W <= T_F, where the closed form holds
    result = run_costs(Schedule.ZB_H1, pp, m, [costs] * pp)
    assert idle_per_rank(result) == pytest.approx([(pp - 1) * (f + b - w)] * pp, abs=1e-9)
    assert result.iteration_time_s == pytest.approx(m * (f + b + w) + (pp - 1) * (f + b - w))


@pytest.mark.parametrize("pp,m", [(4, 8), (8, 16)])
def test_unsplit_schedules_run_b_and_w_back_to_back(pp: int, m: int) -> None:
    # 1F1B's bubble is (p - 1)(T_F + T_B + T_W): the split costs change nothing for it.
    result = run_costs(Schedule.ONE_F_ONE_B, pp, m, [(1.0, 1.2, 0.8)] * pp)
    assert idle_per_rank(result) == pytest.approx([(pp - 1) * 3.0] * pp)


# -- a real model: equal stages, free communication --------------------------------------------------------
P = 8


def gpt(num_layers: int, hidden: int, heads: int, seq: int, vocab: int) -> ModelShape:
    return model_from_fields({"architecture": "decoder_only", "num_layers": num_layers, "hidden_size": hidden,
                              "num_attention_heads": heads, "vocab_size": vocab, "seq_length": seq})


EQUAL = gpt(16, 4096, 32, 2048, vocab=8)  # as tests/simcore/engine/test_engine.py's bubble model


def run(schedule: Schedule, m: int, stage_layers: tuple[int, ...] | None = None) -> Outcome:
    layout = Layout(dp=1, tp=1, pp=P, microbatch_size=4, global_batch_size=4 * m, schedule=schedule,
                    stage_layers=stage_layers)
    return simulate(Scenario(EQUAL, sized(NODE_PRESETS["dgx-a100"], P), layout, free_communication=True))


@pytest.mark.parametrize("m", [8, 16, 32])
def test_zb_h1_bubble_matches_the_closed_form_within_2_percent_of_the_iteration(m: int) -> None:
    metrics = run(Schedule.ZB_H1, m).metrics
    for stage in metrics.stages:
        f, b, w = stage.forward_s, stage.backward_input_s, stage.backward_weight_s
        assert w <= f
        assert b + w == pytest.approx(stage.backward_s, rel=1e-12)
        assert abs(stage.bubble_s - (P - 1) * (f + b - w)) < 0.02 * metrics.iteration_time_s


def test_the_weight_gradient_is_about_a_third_of_the_backward_pass() -> None:
    stage = run(Schedule.ZB_H1, 8).metrics.stages[3]
    # Half of each weight GEMM's backward FLOPs; the attention core and the memory-bound kernels are B.
    assert 0.3 < stage.backward_weight_s / stage.backward_s < 0.5
    assert stage.backward_weight_s < stage.forward_s < stage.backward_input_s


def test_zb_h1_is_faster_than_1f1b() -> None:
    assert run(Schedule.ZB_H1, 16).metrics.iteration_time_s < run(Schedule.ONE_F_ONE_B, 16).metrics.iteration_time_s


def test_stage_layers_give_one_stage_twice_the_layers() -> None:
    layers = (2, 2, 2, 4, 1, 2, 2, 1)
    metrics = run(Schedule.ONE_F_ONE_B, 16, layers).metrics
    assert [s.layers["transformer"] for s in metrics.stages] == list(layers)
    assert metrics.stages[3].forward_s == pytest.approx(2 * metrics.stages[2].forward_s, rel=0.01)


# -- ZB-H2, ZB-V and DualPipe on hand-made costs -------------------------------------------------------------
@pytest.mark.parametrize("pp,m", [(4, 8), (8, 16), (8, 32)])
@pytest.mark.parametrize("costs", [(1.0, 1.0, 1.0), (1.0, 1.0, 1.2), (1.0, 1.2, 0.8), (1.0, 1.4, 0.6)])
def test_zb_h2_with_post_validation_idle_is_the_closed_form(pp: int, m: int, costs: tuple[float, float, float]) -> None:
    f, b, w = costs
    result = run_costs(Schedule.ZB_H2, pp, m, [costs] * pp, post_validation=True)
    expected = max(0.0, (pp - 1) * (f + b - 2 * w))
    assert max(abs(idle - expected) for idle in idle_per_rank(result)) < 0.02 * result.iteration_time_s


def test_zb_h2_needs_post_validation_for_zero_bubble() -> None:
    # With the barrier before the step the stages' parallelogram is cut square: every stage idles as in ZB-H1.
    barrier = run_costs(Schedule.ZB_H2, 8, 16, [(1.0, 1.0, 1.0)] * 8)
    assert idle_per_rank(barrier) == pytest.approx([7.0] * 8)
    validated = run_costs(Schedule.ZB_H2, 8, 16, [(1.0, 1.0, 1.0)] * 8, post_validation=True)
    assert idle_per_rank(validated) == pytest.approx([0.0] * 8, abs=1e-9)
    assert validated.iteration_time_s == pytest.approx(16 * 3.0)  # the steady state's period: the work alone


@pytest.mark.parametrize("pp,m", [(4, 16), (4, 32), (8, 16), (8, 32)])
def test_zb_v_with_post_validation_idles_nothing_with_equal_costs(pp: int, m: int) -> None:
    # Two chunks a rank, each half a stage: T_F = T_B = T_W = 0.5 s a chunk. The authors' V order leaves no idle
    # time between a rank's first and last pass; with post-validation the next iteration starts on each rank when
    # its own work ends, and the period is the work alone (the authors' README: ZB-V's bubble is 0).
    costs = [(0.5, 0.5, 0.5)] * (2 * pp)
    validated = run_costs(Schedule.ZB_V, pp, m, costs, post_validation=True)
    assert idle_per_rank(validated) == pytest.approx([0.0] * pp, abs=1e-9)
    assert validated.iteration_time_s == pytest.approx(m * 3.0)
    # With the barrier before the step every rank waits the V's fill, p - 1 chunk forwards (the 7-10% the
    # authors measured without post-validation, paper Table 10): the last rank starts that late, the first ends
    # that early.
    barrier = run_costs(Schedule.ZB_V, pp, m, costs)
    assert idle_per_rank(barrier) == pytest.approx([(pp - 1) * 0.5] * pp, abs=1e-9)
    one_f_one_b = run_costs(Schedule.ONE_F_ONE_B, pp, m, [(1.0, 1.0, 1.0)] * pp)
    assert max(idle_per_rank(barrier)) <= max(idle_per_rank(one_f_one_b)) / 6


@pytest.mark.parametrize("m", [16, 32])
def test_zb_v_holds_at_most_1f1b_activations(m: int) -> None:
    # ZB-V's claim: 1F1B's peak (2p half-stage chunk-microbatches per rank, deferred W's inputs included). Its
    # first rank also computes the loss: one microbatch's fp32 logits more (4 b s V bytes) than 1F1B's first rank.
    v, one = run(Schedule.ZB_V, m).metrics, run(Schedule.ONE_F_ONE_B, m).metrics
    logits = 4.0 * 4 * EQUAL.seq_length * EQUAL.vocab_size
    assert v.stages[0].memory.activations == pytest.approx(one.stages[0].memory.activations + logits, rel=1e-12)
    assert max(s.memory.activations for s in v.stages[1:]) <= one.stages[0].memory.activations * (1 + 1e-12)
    assert v.iteration_time_s < run(Schedule.ZB_H1, m).metrics.iteration_time_s


@pytest.mark.parametrize("pp,m", [(4, 8), (8, 16), (8, 20), (8, 32)])
def test_dualpipe_idles_less_than_zb_h1_and_1f1b(pp: int, m: int) -> None:
    # DualPipe's ranks hold a stage of each direction; each of the m microbatches runs one of them.
    dual = run_costs(Schedule.DUALPIPE, pp, m, [(1.0, 1.0, 1.0)] * (2 * pp))
    assert dual.iteration_time_s == pytest.approx(m * 3.0 + max(idle_per_rank(dual)))
    zb = run_costs(Schedule.ZB_H1, pp, m, [(1.0, 1.0, 1.0)] * pp)
    assert max(idle_per_rank(dual)) < min(idle_per_rank(zb))


def test_dualpipe_at_pp8_m20_beats_1f1b_and_zb_h1_with_twice_the_parameters() -> None:
    runs = {s: run(s, 20).metrics for s in (Schedule.ONE_F_ONE_B, Schedule.ZB_H1, Schedule.DUALPIPE)}
    dual = runs[Schedule.DUALPIPE]
    assert dual.bubble_fraction < runs[Schedule.ZB_H1].bubble_fraction < runs[Schedule.ONE_F_ONE_B].bubble_fraction
    # every rank holds a stage of each copy (the end ranks an embedding or an output layer fewer than twice)
    for ours, theirs in zip(dual.stages[1:-1], runs[Schedule.ONE_F_ONE_B].stages[1:-1]):
        assert ours.memory.weights == pytest.approx(2 * theirs.memory.weights, rel=1e-12)
    assert sum(s.memory.weights for s in dual.stages) == pytest.approx(
        2 * sum(s.memory.weights for s in runs[Schedule.ONE_F_ONE_B].stages), rel=1e-12)


def test_a_double_stage_is_partly_absorbed_by_deferred_weight_gradients() -> None:
    # Stage 3 holds twice the layers: it sets the pace and the other stages wait for it. Under 1F1B it still
    # idles in the fill and the drain; ZB-H1 fills most of that with its deferred W. The idle each stage
    # reports is the idle of its timeline.
    even, heavy = (2,) * 8, (2, 2, 2, 4, 1, 2, 2, 1)
    layout = Layout(dp=1, tp=1, pp=P, microbatch_size=4, global_batch_size=64, schedule=Schedule.ZB_H1,
                    stage_layers=heavy)
    traced = simulate(Scenario(EQUAL, sized(NODE_PRESETS["dgx-a100"], P), layout, free_communication=True,
                               keep_spans=True))
    for stage in traced.metrics.stages:
        idle = sum(s.end_s - s.start_s for s in traced.spans
                   if s.track == f"stage {stage.index}" and s.category == "bubble")
        assert idle == pytest.approx(stage.bubble_s, rel=1e-9)
    zb, zb_even = run(Schedule.ZB_H1, 16, heavy).metrics, run(Schedule.ZB_H1, 16, even).metrics
    one = run(Schedule.ONE_F_ONE_B, 16, heavy).metrics
    assert traced.metrics.iteration_time_s == pytest.approx(zb.iteration_time_s)
    assert zb.stages[3].bubble_s < one.stages[3].bubble_s / 2
    assert zb.iteration_time_s < one.iteration_time_s
    # the light stages wait for the heavy one, but by less than m times its extra work per microbatch: part of
    # that goes into the W they defer
    extra = 16 * (zb.stages[3].forward_s + zb.stages[3].backward_s - zb_even.stages[3].forward_s
                  - zb_even.stages[3].backward_s)
    for i in (0, 1, 2, 5, 6):
        assert 0.7 * extra < zb.stages[i].bubble_s - zb_even.stages[i].bubble_s < extra
