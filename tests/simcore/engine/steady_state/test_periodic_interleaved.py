"""Periodic steady state of interleaved 1F1B with few microbatch groups (simcore/engine/steady_state/periods.py,
periodic.py): its period is pp microbatches (2 v pp passes a rank), so a stretch holds only about m/pp - 2 periods. At
m/pp = 12 four of its ten are left out and put back, equal to the full run; at m/pp = 6 the stretch is too short for the
check and the run says so and is simulated in full."""

from __future__ import annotations

from dataclasses import replace

import pytest
from periodic_checks import assert_same

from simcore.cost.workload import build_workload
from simcore.domain.layout import Fidelity, Layout, Schedule
from simcore.domain.model import model_from_fields
from simcore.domain.placement import place
from simcore.domain.schedules import POLICIES
from simcore.engine.pipeline import EngineConfig
from simcore.engine.steady_state.periodic import try_extrapolated
from simcore.engine.steady_state.periods import (
    FILL_AND_PHASE,
    K_SIDE,
    Columns,
    columns_of,
    kept_periods,
    plan_cut,
    schedule_lists,
)
from simcore.network import build_network
from simcore.simulate import Scenario, simulate
from topology import NODE_PRESETS, sized

MODEL = model_from_fields({"architecture": "decoder_only", "num_layers": 32, "hidden_size": 1024,
                           "num_attention_heads": 16, "vocab_size": 1024, "seq_length": 512})


def _scenario(pp: int, groups: int, v: int = 2, dp: int = 1) -> Scenario:
    m = groups * pp
    layout = Layout(dp=dp, tp=1, pp=pp, microbatch_size=1, global_batch_size=dp * m,
                    schedule=Schedule.INTERLEAVED_1F1B, virtual_stages=v, zero_stage=1, overlap_grad_reduce=True)
    return Scenario(MODEL, sized(NODE_PRESETS["dgx-a100"], dp * pp), layout)


def _config(scenario: Scenario) -> EngineConfig:
    layout, cluster = scenario.layout, scenario.cluster
    network = build_network(cluster, scenario.algorithm)
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, cluster.num_gpus, layout.cp)
    workload = build_workload(MODEL, layout, cluster.hardware, placement, network.collectives)
    return EngineConfig(layout, placement, workload, network.collectives, Fidelity.REPRESENTATIVE)


@pytest.mark.parametrize(("pp", "v"), [(8, 2), (8, 4), (16, 2)])
def test_twelve_microbatch_groups_extrapolate_to_the_full_run(pp: int, v: int) -> None:
    scenario = _scenario(pp, 12, v)
    extrapolated, full = simulate(scenario), simulate(replace(scenario, extrapolate=False))
    # Each rank's stretch holds 10 periods of pp microbatches: 2K + FILL_AND_PHASE kept, the other 4 put back.
    assert extrapolated.extrapolated_periods == 10 - 2 * K_SIDE - FILL_AND_PHASE == 4
    assert full.extrapolated_periods == 0
    assert_same(extrapolated, full)


def test_the_cut_of_twelve_groups_at_pp_8() -> None:
    config = _config(_scenario(8, 12))
    cut = plan_cut(config, schedule_lists(config, 96), 1)
    assert not isinstance(cut, str)
    # a period moves the labels pp on and holds 2 v pp = 32 passes a rank; 4 periods of 8 microbatches cut
    assert (cut.q, cut.periods, cut.microbatches) == (8, 4, 64)
    assert cut.lengths == (32,) * 8
    # the reduced lists keep 6 whole periods of the stretch on the shortest rank
    assert min((b - a) // n for (a, b), n in zip(cut.stretches, cut.lengths, strict=True)) == 6
    assert kept_periods(1, 32, 0) == 6 and kept_periods(2, 32, 5) == 9 and kept_periods(4, 32, 5) == 20
    assert kept_periods(1, 2, 0) == 13  # a 2-pass period (1F1B): 20 passes, and K + 1 periods timed alone


@pytest.mark.parametrize("groups", [3, 6])
def test_few_microbatch_groups_are_simulated_in_full_and_say_why(groups: int) -> None:
    scenario = _scenario(8, groups)
    why = try_extrapolated(_config(scenario))
    assert isinstance(why, str) and "steady stretch" in why
    extrapolated, full = simulate(scenario), simulate(replace(scenario, extrapolate=False))
    assert extrapolated.extrapolated_periods == 0
    assert extrapolated.metrics == full.metrics and extrapolated.events == full.events


def test_replicas_extrapolate_alike_in_full_fidelity() -> None:
    scenario = replace(_scenario(8, 12, dp=2), fidelity=Fidelity.FULL)
    extrapolated, full = simulate(scenario), simulate(replace(scenario, extrapolate=False))
    assert extrapolated.extrapolated_periods == 4
    assert_same(extrapolated, full)


def test_smaller_lists_and_columns_are_built_once_per_shape() -> None:
    config = _config(_scenario(8, 12))
    lists = schedule_lists(config, 64)
    assert all(a is b for a, b in zip(lists, schedule_lists(config, 64), strict=True))
    assert lists[0] == POLICIES[Schedule.INTERLEAVED_1F1B].passes(0, 8, 64, 2)
    assert columns_of(lists[3]) is columns_of(lists[3])
    assert columns_of(lists[3]).kinds == Columns(lists[3]).kinds
