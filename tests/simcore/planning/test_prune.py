"""Pruning before simulation: the layout rules, and memory from simcore.cost.memory itself (the simulator's own
numbers, cached by what they depend on), with the first reason of each discarded family."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import pytest

from simcore import (
    GPUS,
    MODEL_PRESETS,
    NODE_PRESETS,
    Layout,
    Recompute,
    Scenario,
    Schedule,
    model_from_fields,
    simulate,
    sized,
    validate_layout,
)
from simcore.cost.memory import stage_memory
from simcore.cost.workload import build_workload
from simcore.planning.prune import INVALID, MEMORY, MemoryModel, plan_search
from simcore.planning.space import Space, enumerate_layouts

A100 = GPUS[NODE_PRESETS["dgx-a100"].gpu]
GPT_1_3B = model_from_fields(MODEL_PRESETS["gpt3-1.3b"])
BASE = Scenario(model=GPT_1_3B, cluster=sized(NODE_PRESETS["dgx-a100"], 16),
                layout=Layout(dp=1, tp=1, pp=1, microbatch_size=1, global_batch_size=64))

MEMORY_CASES = [
    dict(dp=2, tp=2, pp=4, microbatch_size=2, global_batch_size=64),
    dict(dp=1, tp=2, pp=8, microbatch_size=1, global_batch_size=64, schedule=Schedule.GPIPE),
    dict(dp=4, tp=1, pp=4, microbatch_size=1, global_batch_size=64, schedule=Schedule.INTERLEAVED_1F1B,
         virtual_stages=3, zero_stage=3, recompute=Recompute.SELECTIVE),
    dict(dp=2, tp=4, pp=2, microbatch_size=4, global_batch_size=64, zero_stage=2, recompute=Recompute.FULL,
         sequence_parallel=True),
    dict(dp=16, tp=1, pp=1, microbatch_size=4, global_batch_size=64, zero_stage=1),
    # uneven split: 24 layers over 5 x 2 chunks, interleaved
    dict(dp=1, tp=2, pp=5, microbatch_size=1, global_batch_size=20, schedule=Schedule.INTERLEAVED_1F1B,
         virtual_stages=2),
    dict(dp=1, tp=2, pp=5, microbatch_size=1, global_batch_size=3),  # fewer microbatches than stages
]


@pytest.mark.parametrize("fields", MEMORY_CASES)
def test_memory_model_gives_the_simulators_memory(fields: dict[str, Any]) -> None:
    layout = Layout(**fields)
    outcome = simulate(replace(BASE, layout=layout, cluster=replace(BASE.cluster, num_gpus=layout.num_gpus)))
    assert MemoryModel(GPT_1_3B, A100).stages(layout) == tuple(stage.memory for stage in outcome.metrics.stages)


@pytest.mark.parametrize("preset, gpus", [("gpt3-1.3b", 16), ("t5-base", 8)])
def test_cached_memory_equals_stage_memory_of_a_fresh_workload(preset: str, gpus: int) -> None:
    """The caches share work between layouts that differ only in fields that do not change it: for a sample of
    the space (a T5 too, whose split balances cost), each answer is stage_memory on the layout's own workload."""
    model = model_from_fields(MODEL_PRESETS[preset])
    layouts = list(enumerate_layouts(model, gpus, 8, 32, Space(recompute=tuple(Recompute))))
    memory = MemoryModel(model, A100)
    for layout in random.Random(7).sample(layouts, 120):
        workload = build_workload(model, layout, A100, None, None, True)
        assert memory.stages(layout) == stage_memory(model, layout, workload), layout


def test_zero_shards_the_model_states_over_dp() -> None:
    memory = MemoryModel(GPT_1_3B, A100)
    plain = Layout(dp=4, tp=2, pp=2, microbatch_size=1, global_batch_size=64)
    stages = [memory.stages(replace(plain, zero_stage=z))[0] for z in range(4)]
    assert stages[1].optimizer_states == stages[0].optimizer_states / 4
    assert stages[2].gradients == stages[0].gradients / 4 and stages[1].gradients == stages[0].gradients
    assert stages[3].weights == stages[0].weights / 4 and stages[2].weights == stages[0].weights
    assert stages[3].buffers > stages[2].buffers == stages[0].buffers  # ZeRO 3's gather buffers
    assert len({s.activations for s in stages}) == 1


def test_pruned_layouts_would_not_fit_and_kept_ones_do() -> None:
    model = model_from_fields(MODEL_PRESETS["gpt3-6.7b"])
    base = replace(BASE, model=model)
    space = Space(zero_stage=(0,), recompute=(Recompute.NONE,), placement=("tp,dp,pp",))
    plan = plan_search(model, 16, 8, A100, 64, space)
    assert plan.discarded[MEMORY] > 0 and plan.candidates
    assert plan.generated == plan.pruned + len(plan.candidates)
    kept = set(plan.candidates)
    over = [lay for lay in enumerate_layouts(model, 16, 8, 64, space) if lay not in kept and lay.pp <= 2]
    assert over
    for layout in over[:3]:
        validate_layout(layout, model, 16)  # a valid layout, discarded for memory only
        outcome = simulate(replace(base, layout=layout))
        assert not outcome.metrics.fits and outcome.warnings[0].startswith("does not fit")
    for layout, peak in list(zip(plan.candidates, plan.peak_memory_bytes))[:3]:
        metrics = simulate(replace(base, layout=layout)).metrics
        assert metrics.fits and metrics.peak_stage.memory.total == peak


def test_discarded_families_keep_their_first_reason() -> None:
    model = model_from_fields(MODEL_PRESETS["gpt3-6.7b"])
    plan = plan_search(model, 16, 8, A100, 64, Space(tp=(1, 3), zero_stage=(0,), recompute=(Recompute.NONE,)))
    families = {(f[0], f[1], f[2]): record for f, record in plan.discarded_families()}
    no_fit = families[(16, 1, 1)]
    assert no_fit.first_discard is not None and no_fit.first_discard.kind == MEMORY
    assert no_fit.first_discard.reason.startswith("memory: stage 0 needs ")
    assert no_fit.layouts > 1 and no_fit.feasible == 0
    odd = [record for (dp, tp, pp), record in families.items() if tp == 3]
    assert odd and odd[0].first_discard is not None and odd[0].first_discard.kind == INVALID
    assert odd[0].first_discard.reason.startswith("layout.dp: dp*tp*pp")


def test_free_memory_kept_discards_more() -> None:
    space = Space(tp=(2,), recompute=(Recompute.NONE,))
    loose = plan_search(GPT_1_3B, 16, 8, A100, 64, space)
    tight = plan_search(GPT_1_3B, 16, 8, A100, 64, replace(space, min_free_memory_bytes=A100.hbm_capacity_bytes / 2))
    assert set(tight.candidates) < set(loose.candidates)
    assert all(peak <= A100.hbm_capacity_bytes / 2 for peak in tight.peak_memory_bytes)
