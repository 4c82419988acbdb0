"""The layout search space: what is generated from the model, cluster and batch, and how a space narrows it."""

from __future__ import annotations

import pytest

from simcore import MODEL_PRESETS, Layout, Recompute, Schedule, SpecError, model_from_fields
from simcore import validate_layout as check_layout
from simcore.planning.space import Space, distinct_placements, enumerate_layouts, family_of

GPT_1_3B = model_from_fields(MODEL_PRESETS["gpt3-1.3b"])  # 24 layers


def test_generated_space_follows_the_rules() -> None:
    layouts = list(enumerate_layouts(GPT_1_3B, 16, 8, 64, Space()))
    assert len(layouts) == len(set(layouts))
    assert {lay.tp for lay in layouts} == {1, 2, 4, 8}  # TP stays inside a node
    assert {lay.pp for lay in layouts} == {1, 2, 4, 8, 16}
    assert {lay.zero_stage for lay in layouts} == {0, 1, 2, 3}
    assert {str(lay.recompute) for lay in layouts} == {"none", "selective", "full"}
    assert {lay.sequence_parallel for lay in layouts} == {False, True}
    for lay in layouts:
        assert lay.dp * lay.tp * lay.pp == 16
        assert lay.microbatch_size <= 8 and 64 % (lay.dp * lay.microbatch_size) == 0
        assert lay.overlap_grad_reduce and not lay.tp_comm_overlap
        assert (lay.virtual_stages > 1) == (lay.schedule is Schedule.INTERLEAVED_1F1B)
        if lay.virtual_stages > 1:
            assert 24 % (lay.pp * lay.virtual_stages) == 0
        if lay.pp == 1:
            assert lay.schedule is Schedule.ONE_F_ONE_B
        if lay.dp == 1:
            assert lay.zero_stage == 0
        if lay.tp == 1:
            assert not lay.sequence_parallel
    interleaved = {lay.virtual_stages for lay in layouts if lay.pp == 4}
    assert interleaved == {1, 2, 3, 6}  # 24 layers / 4 stages = 6 per stage: v in 2..8 dividing it


def test_families_come_one_after_the_other() -> None:
    """Enumeration goes family by family, so a family's first layout is its smallest microbatch on 1F1B."""
    layouts = list(enumerate_layouts(GPT_1_3B, 16, 8, 64, Space(tp=(2,), pp=(2,))))
    families = [family_of(lay) for lay in layouts]
    runs = [f for i, f in enumerate(families) if i == 0 or families[i - 1] != f]
    assert len(runs) == len(set(runs)) == 4 * 3 * 2  # ZeRO 0-3, three recomputations, SP off and on
    first = layouts[0]
    assert (first.microbatch_size, first.schedule, first.zero_stage) == (1, Schedule.ONE_F_ONE_B, 0)


def test_placements_that_map_ranks_alike_are_generated_once() -> None:
    assert distinct_placements(4, 2, 2) == ["tp,dp,pp", "tp,pp,dp", "dp,tp,pp", "dp,pp,tp", "pp,tp,dp", "pp,dp,tp"]
    assert distinct_placements(16, 1, 1) == ["tp,dp,pp"]
    assert distinct_placements(4, 4, 1) == ["tp,dp,pp", "dp,tp,pp"]  # where pp goes does not matter


def test_space_can_be_narrowed_and_widened() -> None:
    space = Space(tp=(16,), pp=(1,), recompute=(Recompute.FULL,), zero_stage=(3,), sequence_parallel=(True,))
    layouts = list(enumerate_layouts(GPT_1_3B, 16, 8, 64, space))
    assert {(lay.dp, lay.tp, lay.pp, lay.zero_stage) for lay in layouts} == {(1, 16, 1, 3)}  # TP across nodes
    # degrees that cannot multiply to the GPU count are kept as one layout that carries the rule
    odd = list(enumerate_layouts(GPT_1_3B, 16, 8, 64, Space(tp=(3,))))
    assert odd == [Layout(dp=1, tp=3, pp=1, microbatch_size=1, global_batch_size=64)]
    with pytest.raises(SpecError) as err:
        check_layout(odd[0], GPT_1_3B, 16)
    assert err.value.field == "layout.dp"


def test_encoder_decoder_models_are_not_interleaved() -> None:
    t5 = model_from_fields(MODEL_PRESETS["t5-base"])
    layouts = list(enumerate_layouts(t5, 16, 8, 64, Space(tp=(1,))))
    assert layouts and all(lay.virtual_stages == 1 for lay in layouts)


def test_asynchronous_tp_collectives_are_tried_where_there_is_tp() -> None:
    """Listing both values of async_tensor_model_parallel_allreduce doubles the layouts with TP; without TP the
    switch changes nothing, so those are generated once."""
    base = list(enumerate_layouts(GPT_1_3B, 16, 8, 64, Space(tp=(1, 2), pp=(1,))))
    both = list(enumerate_layouts(GPT_1_3B, 16, 8, 64, Space(tp=(1, 2), pp=(1,),
                                                               async_tensor_model_parallel_allreduce=(False, True))))
    assert not any(lay.async_tensor_model_parallel_allreduce for lay in base)
    assert len(both) == len(set(both))
    with_tp = [lay for lay in both if lay.tp == 2]
    assert {lay.async_tensor_model_parallel_allreduce for lay in with_tp} == {False, True}
    assert len(with_tp) == 2 * sum(1 for lay in base if lay.tp == 2)
    assert [lay for lay in both if lay.tp == 1] == [lay for lay in base if lay.tp == 1]
