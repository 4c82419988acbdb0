"""The engine end to end (simulate): pipeline-bubble closed forms, the time breakdown, determinism, the two
fidelities, data-parallel synchronisation, and tensor parallelism across nodes."""

from __future__ import annotations

import dataclasses

import pytest

from simcore.cost.comm.collectives import CollectiveModel
from simcore.cost.workload import Workload, build_workload
from simcore.domain.layout import CollectiveAlgorithm, Fidelity, Layout, Recompute, Schedule
from simcore.domain.model import ModelShape, model_from_fields
from simcore.domain.placement import place
from simcore.simulate import Outcome, Scenario, simulate
from topology import GPUS, NODE_PRESETS, Router, build_cluster, sized
from topology.cluster_spec import ClusterSpec

DGX_A100 = NODE_PRESETS["dgx-a100"]


def gpt(num_layers: int, hidden: int, heads: int, seq: int, vocab: int = 51200) -> ModelShape:
    return model_from_fields({"architecture": "decoder_only", "num_layers": num_layers, "hidden_size": hidden,
                              "num_attention_heads": heads, "vocab_size": vocab, "seq_length": seq})


def run(model: ModelShape, cluster: ClusterSpec, layout: Layout, **options: object) -> Outcome:
    return simulate(Scenario(model, cluster, layout, **options))  # type: ignore[arg-type]


def workload_of(model: ModelShape, cluster: ClusterSpec, layout: Layout) -> Workload:
    """The workload simulate() builds for this scenario (same construction, no engine)."""
    built = build_cluster(cluster)
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, cluster.num_gpus)
    collectives = CollectiveModel(built, Router(built), CollectiveAlgorithm.RING)
    return build_workload(model, layout, GPUS[cluster.gpu], placement, collectives)


# -- the pipeline bubble ---------------------------------------------------------------------------------------
# Equal stages: 16 layers of h = 4096 on 8 stages (2 per stage, 1 per chunk when interleaved with v = 2) and a
# vocabulary of 8, so the embedding and the logits add almost nothing to the first and last stages. Four
# samples per microbatch keep the optimizer step (in iteration_time_s, outside the pipeline) under 1%.
# (Smaller layers, e.g. h = 1024 with s = 1024, are not equal enough: the fixed kernel overheads of the
# embedding and the logits make the end stages ~2% slower, which adds ~m x 2% of a pass to every stage's wait.)
P = 8
BUBBLE_MODEL = gpt(16, 4096, 32, 2048, vocab=8)
BUBBLE_MICROBATCH = 4


def bubble_run(schedule: Schedule, m: int, v: int = 1) -> Outcome:
    layout = Layout(dp=1, tp=1, pp=P, microbatch_size=BUBBLE_MICROBATCH, global_batch_size=m * BUBBLE_MICROBATCH,
                    schedule=schedule, virtual_stages=v)
    return run(BUBBLE_MODEL, sized(DGX_A100, P), layout, free_communication=True)


def test_bubble_model_has_equal_stages() -> None:
    stages = bubble_run(Schedule.ONE_F_ONE_B, 8).metrics.stages
    costs = [s.forward_s + s.backward_s for s in stages]
    assert len(costs) == P
    assert max(costs) / min(costs) - 1 < 0.005
    assert all(s.backward_s == pytest.approx(2 * s.forward_s, rel=0.15) for s in stages)


@pytest.mark.parametrize("m", [8, 16, 32, 64])
def test_1f1b_bubble_is_p_minus_1_over_m_plus_p_minus_1(m: int) -> None:
    metrics = bubble_run(Schedule.ONE_F_ONE_B, m).metrics
    assert metrics.bubble_fraction == pytest.approx((P - 1) / (m + P - 1), abs=0.01)
    assert metrics.pipeline_overhead == pytest.approx((P - 1) / m, abs=0.02)


@pytest.mark.parametrize("m", [8, 16, 32, 64])
def test_gpipe_bubble_equals_1f1b_bubble(m: int) -> None:
    gpipe = bubble_run(Schedule.GPIPE, m).metrics
    one_f_one_b = bubble_run(Schedule.ONE_F_ONE_B, m).metrics
    assert gpipe.bubble_fraction == pytest.approx(one_f_one_b.bubble_fraction, abs=0.01)
    assert gpipe.bubble_fraction == pytest.approx((P - 1) / (m + P - 1), abs=0.01)


@pytest.mark.parametrize("m", [8, 16, 32, 64])
def test_interleaved_bubble_is_p_minus_1_over_v_m_plus_p_minus_1(m: int) -> None:
    v = 2
    metrics = bubble_run(Schedule.INTERLEAVED_1F1B, m, v).metrics
    assert metrics.bubble_fraction == pytest.approx((P - 1) / (v * m + P - 1), abs=0.01)
    assert metrics.bubble_fraction < bubble_run(Schedule.ONE_F_ONE_B, m).metrics.bubble_fraction


def test_bubble_shrinks_as_microbatches_grow() -> None:
    fractions = [bubble_run(Schedule.ONE_F_ONE_B, m).metrics.bubble_fraction for m in (8, 16, 32, 64)]
    assert all(a > b for a, b in zip(fractions, fractions[1:]))


def test_no_pipeline_no_bubble() -> None:
    layout = Layout(dp=1, tp=1, pp=1, microbatch_size=1, global_batch_size=4)
    metrics = run(gpt(4, 1024, 16, 1024), sized(DGX_A100, 1), layout).metrics
    assert metrics.bubble_fraction == pytest.approx(0.0, abs=1e-12)
    assert metrics.time_breakdown_s["bubble"] == pytest.approx(0.0, abs=1e-12)


# -- the time breakdown -------------------------------------------------------------------------------------------

SMALL = gpt(8, 2048, 16, 2048)

BREAKDOWN_LAYOUTS = {
    "dp8": (8, Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=16)),
    "dp8-overlap": (8, Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=16, overlap_grad_reduce=True)),
    "tp8": (8, Layout(dp=1, tp=8, pp=1, microbatch_size=1, global_batch_size=4)),
    "pp4": (8, Layout(dp=1, tp=2, pp=4, microbatch_size=1, global_batch_size=8)),
    "dp2-tp4-pp2": (16, Layout(dp=2, tp=4, pp=2, microbatch_size=1, global_batch_size=8)),
    "dp2-tp4-pp2-overlap": (16, Layout(dp=2, tp=4, pp=2, microbatch_size=1, global_batch_size=8,
                                       overlap_grad_reduce=True)),
    "dp2-tp2-pp4-interleaved": (16, Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=16,
                                           schedule=Schedule.INTERLEAVED_1F1B, virtual_stages=2,
                                           overlap_grad_reduce=True)),
    "dp2-tp4-pp2-recompute-sp": (16, Layout(dp=2, tp=4, pp=2, microbatch_size=2, global_batch_size=8,
                                            recompute=Recompute.FULL, sequence_parallel=True)),
    "tp-across-nodes": (16, Layout(dp=1, tp=16, pp=1, microbatch_size=1, global_batch_size=2)),
    "gpipe-dp4": (16, Layout(dp=4, tp=1, pp=4, microbatch_size=1, global_batch_size=16, schedule=Schedule.GPIPE)),
}


@pytest.mark.parametrize("name", list(BREAKDOWN_LAYOUTS))
@pytest.mark.parametrize("fidelity", [Fidelity.REPRESENTATIVE, Fidelity.FULL])
def test_time_breakdown_sums_to_the_iteration_time(name: str, fidelity: Fidelity) -> None:
    gpus, layout = BREAKDOWN_LAYOUTS[name]
    metrics = run(SMALL, sized(DGX_A100, gpus), layout, fidelity=fidelity).metrics
    breakdown = metrics.time_breakdown_s
    assert set(breakdown) == {"compute", "recompute", "tp_comm", "pp_comm", "dp_comm", "optimizer", "bubble",
                              "other"}
    assert all(value >= 0 for value in breakdown.values()), breakdown
    assert sum(breakdown.values()) == pytest.approx(metrics.iteration_time_s, rel=1e-9)
    assert breakdown["compute"] > 0 and breakdown["optimizer"] > 0
    assert 0 <= metrics.bubble_fraction < 1
    assert all(0 < s.busy_fraction <= 1 + 1e-9 for s in metrics.stages)
    if layout.tp > 1:
        assert breakdown["tp_comm"] > 0
    if layout.recompute is Recompute.FULL:
        assert breakdown["recompute"] > 0
    else:
        assert breakdown["recompute"] == 0


# -- determinism and fidelity -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fidelity", [Fidelity.REPRESENTATIVE, Fidelity.FULL])
def test_same_scenario_gives_identical_metrics(fidelity: Fidelity) -> None:
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=16, schedule=Schedule.INTERLEAVED_1F1B,
                    virtual_stages=2, overlap_grad_reduce=True)
    first = run(SMALL, sized(DGX_A100, 16), layout, fidelity=fidelity)
    second = run(SMALL, sized(DGX_A100, 16), layout, fidelity=fidelity)
    assert first.metrics == second.metrics
    assert first.events == second.events
    assert first.simulated_ranks == second.simulated_ranks


@pytest.mark.parametrize(("dp", "tp", "pp", "overlap", "placement", "nics"), [
    (2, 4, 2, False, "tp,dp,pp", 8),
    (4, 2, 2, False, "tp,dp,pp", 8),
    (4, 2, 2, True, "tp,dp,pp", 8),
    (8, 1, 2, False, "tp,dp,pp", 8),
    (2, 4, 2, True, "tp,pp,dp", 1),  # data-parallel groups across the nodes, through one NIC
])
def test_representative_and_full_fidelity_agree_on_a_symmetric_case(dp: int, tp: int, pp: int, overlap: bool,
                                                                    placement: str, nics: int) -> None:
    layout = Layout(dp=dp, tp=tp, pp=pp, microbatch_size=1, global_batch_size=4 * dp, overlap_grad_reduce=overlap,
                    placement=placement)
    assert layout.num_microbatches == 4
    cluster = dataclasses.replace(sized(DGX_A100, 16), nics_per_node=nics)
    representative = run(SMALL, cluster, layout, fidelity=Fidelity.REPRESENTATIVE)
    full = run(SMALL, cluster, layout, fidelity=Fidelity.FULL)
    r, f = representative.metrics, full.metrics
    assert f.iteration_time_s == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert f.bubble_fraction == pytest.approx(r.bubble_fraction, rel=1e-9, abs=1e-12)
    for key, value in r.time_breakdown_s.items():
        assert f.time_breakdown_s[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    assert f.communication_bytes == pytest.approx(r.communication_bytes, rel=1e-9)
    assert representative.simulated_ranks == pp
    assert full.simulated_ranks == dp * pp > representative.simulated_ranks


# -- data parallelism ----------------------------------------------------------------------------------------------

DP_MODEL = gpt(24, 2048, 16, 2048)  # ~1.3B parameters: 33 gradient buckets on one pipeline rank


@pytest.mark.parametrize("pp", [1, 2])
def test_dp_gradient_reduction_shows_up_and_overlap_hides_most_of_it(pp: int) -> None:
    cluster = sized(DGX_A100, 8)
    base = Layout(dp=8 // pp, tp=1, pp=pp, microbatch_size=1, global_batch_size=4 * 8 // pp)
    plain = run(DP_MODEL, cluster, base).metrics
    overlapped = run(DP_MODEL, cluster, dataclasses.replace(base, overlap_grad_reduce=True)).metrics
    assert plain.time_breakdown_s["dp_comm"] > 0
    assert plain.communication_s["dp"] > 0
    assert overlapped.time_breakdown_s["dp_comm"] < 0.5 * plain.time_breakdown_s["dp_comm"]
    assert overlapped.iteration_time_s < plain.iteration_time_s
    # The same bytes move either way.
    assert overlapped.communication_bytes["dp"] == pytest.approx(plain.communication_bytes["dp"], rel=1e-12)


def test_no_data_parallelism_no_dp_traffic() -> None:
    layout = Layout(dp=1, tp=4, pp=2, microbatch_size=1, global_batch_size=4)
    metrics = run(SMALL, sized(DGX_A100, 8), layout).metrics
    assert metrics.time_breakdown_s["dp_comm"] == 0
    assert metrics.communication_s["dp"] == 0
    assert metrics.communication_bytes["dp"] == 0


@pytest.mark.parametrize(("gpus", "dp", "tp", "pp"), [(8, 8, 1, 1), (16, 2, 4, 2), (16, 4, 1, 4), (16, 4, 2, 2)])
def test_dp_bytes_follow_the_ring_formula(gpus: int, dp: int, tp: int, pp: int) -> None:
    cluster = sized(DGX_A100, gpus)
    layout = Layout(dp=dp, tp=tp, pp=pp, microbatch_size=1, global_batch_size=4 * dp)
    metrics = run(SMALL, cluster, layout).metrics
    grads = workload_of(SMALL, cluster, layout).grad_bytes
    assert len(grads) == pp and all(g > 0 for g in grads)
    expected = sum(2 * (dp - 1) / dp * g for g in grads)
    assert metrics.communication_bytes["dp"] == pytest.approx(expected, rel=1e-9)


# -- tensor parallelism across nodes -----------------------------------------------------------------------------

GPT3_LIKE = gpt(8, 12288, 96, 2048)  # GPT-3 175B's layer shape, 8 layers


def tp_layouts() -> tuple[Layout, Layout]:
    return (Layout(dp=1, tp=16, pp=1, microbatch_size=1, global_batch_size=8),
            Layout(dp=1, tp=8, pp=2, microbatch_size=1, global_batch_size=8))


def test_tp16_across_two_nodes_is_slower_than_tp8_pp2() -> None:
    cluster = sized(DGX_A100, 16)
    tp16, tp8_pp2 = tp_layouts()
    slow = run(GPT3_LIKE, cluster, tp16).metrics
    fast = run(GPT3_LIKE, cluster, tp8_pp2).metrics
    assert slow.iteration_time_s > fast.iteration_time_s
    assert slow.communication_s["tp"] > fast.communication_s["tp"]


def tp_seconds_per_layer(workload: Workload) -> float:
    """Tensor-parallel time per layer per microbatch (backward: no embedding collective is folded in)."""
    per_layer = {round(c.backward_tp_s / c.layers, 15) for c in workload.chunks}
    assert len(per_layer) == 1
    return per_layer.pop()


def test_one_nic_per_node_makes_tp16_per_layer_at_least_3x_tp8() -> None:
    cluster = dataclasses.replace(sized(DGX_A100, 16), nics_per_node=1)
    tp16, tp8_pp2 = tp_layouts()
    across = tp_seconds_per_layer(workload_of(GPT3_LIKE, cluster, tp16))
    inside = tp_seconds_per_layer(workload_of(GPT3_LIKE, cluster, tp8_pp2))
    assert across >= 3 * inside
    slow = run(GPT3_LIKE, cluster, tp16).metrics
    fast = run(GPT3_LIKE, cluster, tp8_pp2).metrics
    assert slow.communication_s["tp"] >= 3 * fast.communication_s["tp"]
    assert slow.iteration_time_s > 2 * fast.iteration_time_s


def test_tp8_inside_a_node_does_not_care_about_nics() -> None:
    _tp16, tp8_pp2 = tp_layouts()
    eight = tp_seconds_per_layer(workload_of(GPT3_LIKE, sized(DGX_A100, 16), tp8_pp2))
    one = tp_seconds_per_layer(workload_of(GPT3_LIKE, dataclasses.replace(sized(DGX_A100, 16), nics_per_node=1),
                                           tp8_pp2))
    assert one == pytest.approx(eight, rel=1e-12)


# -- what the wait before the optimizer step is -----------------------------------------------------------------
def test_wait_for_other_stages_gradients_is_not_bubble() -> None:
    """Stages 1 and 2 finish early and then wait for stages 0 and 3, whose huge embedding and output layers
    take long to reduce over one NIC per node: that wait is data-parallel time, not pipeline bubble."""
    model = gpt(8, 1024, 16, 1024, vocab=256000)
    cluster = dataclasses.replace(sized(DGX_A100, 16), nics_per_node=1)
    layout = Layout(dp=4, tp=1, pp=4, microbatch_size=1, global_batch_size=32, placement="tp,pp,dp")
    metrics = run(model, cluster, layout).metrics
    free = run(model, cluster, layout, free_communication=True).metrics
    assert metrics.bubble_fraction < free.bubble_fraction * 1.5 + 0.05
    middle = run(model, cluster, layout, keep_spans=True)
    waits = [s for s in middle.spans if s.name == "wait other stages' gradients" and s.track == "stage 1"]
    assert waits and waits[0].category == "dp_comm" and waits[0].end_s - waits[0].start_s > 0.01


def test_untied_output_layer_is_reduced_with_one_stage() -> None:
    """Untied embeddings: the output layer's gradients are reduced even when one stage holds everything."""
    tied = gpt(2, 1024, 16, 1024, vocab=64000)
    untied = dataclasses.replace(tied, tied_embeddings=False)
    layout = Layout(dp=8, tp=1, pp=1, microbatch_size=1, global_batch_size=8)
    extra = workload_of(untied, sized(DGX_A100, 8), layout).grad_bytes[0] - \
        workload_of(tied, sized(DGX_A100, 8), layout).grad_bytes[0]
    assert extra == pytest.approx(64000 * 1024 * 4)
