"""The search space of a mixture-of-experts model: ep is generated where the model has experts (every divisor of
the stage's tp x cp x dp ranks that divides num_experts), a listed ep that breaks a rule is discarded with the rule, and
memory is judged per ep."""

from __future__ import annotations

import pytest

from simcore import MODEL_PRESETS, Recompute, model_from_fields
from simcore.domain.layout import Schedule
from simcore.planning.prune import MemoryModel
from simcore.planning.space import Space, enumerate_layouts
from topology.hardware import GPUS, GpuKind

QWEN = model_from_fields(MODEL_PRESETS["qwen3-30b-a3b"])  # 128 experts
NARROW = Space(tp=(1, 2), pp=(1,), zero_stage=(1,), recompute=(Recompute.NONE,), microbatch_size=(1,),
               sequence_parallel=(True, False), placement=("tp,dp,pp",))


def test_ep_is_generated_for_experts_only() -> None:
    layouts = list(enumerate_layouts(QWEN, 16, 8, 64, NARROW))
    assert {lay.ep for lay in layouts if lay.tp == 1 and lay.cp == 1} == {1, 2, 4, 8, 16}
    assert all((lay.tp * lay.cp * lay.dp) % (lay.ep * lay.expert_tp) == 0 for lay in layouts)
    # the CP ranks fold in too: tp 1, cp 2, dp 8 tries ep 16 (more than tp x dp)
    assert any(lay.tp == 1 and lay.cp == 2 and lay.dp == 8 and lay.ep == 16 for lay in layouts)
    dense = model_from_fields(MODEL_PRESETS["gpt3-1.3b"])
    assert {lay.ep for lay in enumerate_layouts(dense, 16, 8, 64, NARROW)} == {1}


def test_listed_ep_is_kept_and_memory_depends_on_it() -> None:
    space = Space(tp=(1,), pp=(1,), cp=(1,), zero_stage=(0,), recompute=(Recompute.NONE,), microbatch_size=(1,),
                  ep=(1, 16), expert_tp=(1,))
    layouts = list(enumerate_layouts(QWEN, 16, 8, 64, space))
    assert [lay.ep for lay in layouts] == [1, 16]
    memory = MemoryModel(QWEN, GPUS[GpuKind.H100_80GB])
    ep1, ep16 = (memory.peak(lay)[1] for lay in layouts)
    assert ep16.weights < ep1.weights / 8  # each rank holds 8 of 128 experts instead of all of them


def test_dualpipe_is_generated_for_experts_with_two_stages_of_weights() -> None:
    """A space listing DualPipe generates it for a MoE model (its rules still apply: pp even, m >= 2 pp), and
    its memory holds two stages' weights, experts included, per rank."""
    space = Space(tp=(1,), pp=(2,), cp=(1,), zero_stage=(0,), recompute=(Recompute.NONE,), microbatch_size=(1,),
                  ep=(8,), expert_tp=(1,), placement=("tp,dp,pp",),
                  schedule=(Schedule.ONE_F_ONE_B, Schedule.DUALPIPE))
    layouts = list(enumerate_layouts(QWEN, 16, 8, 64, space))
    assert [lay.schedule for lay in layouts] == [Schedule.ONE_F_ONE_B, Schedule.DUALPIPE]
    memory = MemoryModel(QWEN, GPUS[GpuKind.H100_80GB])
    one, dual = (memory.peak(lay)[1] for lay in layouts)
    assert dual.expert_weights == 2 * one.expert_weights
    # the rest: both copies' layers, the first stage's embedding beside the second copy's output layer
    assert dual.weights == pytest.approx(2 * one.weights, rel=0.01)
