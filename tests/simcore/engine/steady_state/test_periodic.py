"""Periodic steady-state extrapolation (simcore/engine/steady_state/periodic.py): the extrapolated result against the
same iteration simulated period by period, for every schedule; a case the check must refuse; the option off; the
trace and the progress of an extrapolated run."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from periodic_checks import REL, assert_same

from api_schemas import load_request_file
from service.convert import to_scenario
from simcore.cost.workload import build_workload
from simcore.domain.layout import Fidelity, Layout, Schedule
from simcore.domain.model import model_from_fields
from simcore.domain.passes import Pass
from simcore.domain.placement import place
from simcore.engine.pipeline import EngineConfig
from simcore.engine.steady_state.periodic import try_extrapolated
from simcore.engine.steady_state.periods import Columns, aligned, consistent
from simcore.network import build_network
from simcore.simulate import Outcome, Scenario, simulate, straggler_factors
from topology import NODE_PRESETS, sized
from topology.health import ClusterHealth, SlowGpu

MODEL = model_from_fields({"architecture": "decoder_only", "num_layers": 8, "hidden_size": 1024,
                           "num_attention_heads": 16, "vocab_size": 1024, "seq_length": 512})
CLUSTER = sized(NODE_PRESETS["dgx-a100"], 16)


def _pair(scenario: Scenario) -> tuple[Outcome, Outcome]:
    return simulate(scenario), simulate(replace(scenario, extrapolate=False))


@pytest.mark.parametrize(("schedule", "m", "v"), [
    (Schedule.ONE_F_ONE_B, 48, 1),
    (Schedule.INTERLEAVED_1F1B, 128, 2),
    (Schedule.ZB_H1, 48, 1),
    (Schedule.ZB_H2, 192, 1),
    (Schedule.DUALPIPE, 96, 1),
])
def test_every_schedule_extrapolates_to_the_full_simulation(schedule: Schedule, m: int, v: int) -> None:
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=2 * m, schedule=schedule,
                    virtual_stages=v, zero_stage=1, overlap_grad_reduce=True)
    extrapolated, full = _pair(Scenario(MODEL, CLUSTER, layout))
    assert extrapolated.extrapolated_periods > 0 and full.extrapolated_periods == 0
    assert_same(extrapolated, full)


def test_zb_v_extrapolates_once_its_ranks_share_one_period() -> None:
    # The authors' V order (simcore/domain/v_schedule.py) repeats every microbatch (6 passes a rank) from its
    # first periods on, but the engine's timeline settles late: the ranks without the loss (rank 0 holds the
    # embedding and the logits) run ahead at a shorter period of their own until the slack of the order runs
    # out, some 18 periods on rank 3, and only then at rank 0's. The check waits for one common period and the
    # tries leave more periods to settle until it is reached.
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=384, schedule=Schedule.ZB_V,
                    zero_stage=1, overlap_grad_reduce=True)
    extrapolated, full = _pair(Scenario(MODEL, CLUSTER, layout))
    assert extrapolated.extrapolated_periods > 100 and full.extrapolated_periods == 0
    assert_same(extrapolated, full)


def test_gpipe_has_no_single_steady_stretch_and_is_simulated_in_full() -> None:
    # Its backward phase runs the microbatches in reverse: no one cut leaves the smaller schedule.
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=96, schedule=Schedule.GPIPE)
    extrapolated, full = _pair(Scenario(MODEL, CLUSTER, layout))
    assert extrapolated.extrapolated_periods == 0
    assert extrapolated.metrics == full.metrics


@pytest.mark.parametrize("fidelity", [Fidelity.REPRESENTATIVE, Fidelity.FULL])
def test_sharded_data_parallelism_and_full_fidelity(fidelity: Fidelity) -> None:
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=96, zero_stage=3)
    extrapolated, full = _pair(Scenario(MODEL, CLUSTER, layout, fidelity=fidelity))
    assert extrapolated.extrapolated_periods > 0
    assert_same(extrapolated, full)


def test_post_validation_extrapolates_both_iterations() -> None:
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=96, schedule=Schedule.ZB_H1,
                    optimizer_post_validation=True)
    extrapolated, full = _pair(Scenario(MODEL, CLUSTER, layout))
    assert extrapolated.extrapolated_periods > 0
    assert_same(extrapolated, full)


def test_the_check_refuses_replicas_at_different_periods_and_the_run_falls_back() -> None:
    # A slow GPU in one replica: the two replicas' pipelines run at different periods, so the iteration as a
    # whole never repeats (only the data-parallel reduction at the end joins them).
    cluster = replace(CLUSTER, health=ClusterHealth(slow_gpus=(SlowGpu(gpu=5, compute_time_factor=1.3),)))
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=96, zero_stage=1,
                    overlap_grad_reduce=True)
    scenario = Scenario(MODEL, cluster, layout)
    extrapolated, full = _pair(scenario)
    assert extrapolated.extrapolated_periods == 0
    assert extrapolated.metrics == full.metrics and extrapolated.events == full.events
    # and why: the replicas of a pipeline rank settle at different periods
    network = build_network(cluster, scenario.algorithm)
    placement = place(layout.dp, layout.tp, layout.pp, layout.placement, cluster.num_gpus, layout.cp)
    workload = build_workload(MODEL, layout, cluster.hardware, placement, network.collectives)
    config = EngineConfig(layout, placement, workload, network.collectives, Fidelity.FULL,
                          compute_time_factors=straggler_factors(scenario, placement))
    why = try_extrapolated(config)
    assert isinstance(why, str) and "run at different periods" in why


def test_option_off_simulates_every_period() -> None:
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=96)
    assert simulate(Scenario(MODEL, CLUSTER, layout, extrapolate=False)).extrapolated_periods == 0
    assert simulate(Scenario(MODEL, CLUSTER, layout)).extrapolated_periods > 0


@pytest.mark.parametrize(("schedule", "m", "v"), [
    (Schedule.ONE_F_ONE_B, 48, 1), (Schedule.INTERLEAVED_1F1B, 128, 2), (Schedule.DUALPIPE, 96, 1)])
def test_the_trace_marks_the_elided_span_and_ends_with_the_iteration(schedule: Schedule, m: int, v: int) -> None:
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=2 * m, schedule=schedule,
                    virtual_stages=v)
    extrapolated, full = _pair(Scenario(MODEL, CLUSTER, layout, keep_spans=True))
    n = extrapolated.extrapolated_periods
    marks = [s for s in extrapolated.spans if s.category == "extrapolated"]
    assert len(marks) == layout.pp and all(m.name.startswith(f"{n} steady-state periods") for m in marks)
    assert len(extrapolated.spans) < len(full.spans)
    end = max(s.end_s for s in extrapolated.spans)
    assert end == pytest.approx(max(s.end_s for s in full.spans), rel=REL)
    # before its rank's mark a span is where the full run has it; nothing else lies inside the mark
    for mark in marks:
        rank = mark.track
        mine = [s for s in extrapolated.spans if s.track == rank and s.category != "extrapolated"]
        assert not [s for s in mine if mark.start_s < s.start_s < mark.end_s - 1e-9]
        before = sorted((s.name, s.start_s) for s in mine if s.end_s <= mark.start_s)
        theirs = sorted((s.name, s.start_s) for s in full.spans if s.track == rank and s.end_s <= mark.start_s)
        assert before == theirs
        # after it, a span is the full run's too: moved N periods later, its microbatch labelled as the full run's
        after = sorted((s.name, round(s.start_s, 9)) for s in mine if s.start_s >= mark.end_s - 1e-9)
        full_after = sorted((s.name, round(s.start_s, 9)) for s in full.spans
                            if s.track == rank and s.start_s >= mark.end_s - 1e-9)
        assert [name for name, _ in after] == [name for name, _ in full_after]
        assert [t for _, t in after] == pytest.approx([t for _, t in full_after], rel=REL, abs=1e-9)
    last = max(int(m) for s in extrapolated.spans for m in re.findall(r"mb(\d+)", s.name))
    assert last == m - 1  # the microbatches labelled 0 to m - 1 as in the full run


def test_progress_counts_the_whole_iteration() -> None:
    layout = Layout(dp=2, tp=2, pp=4, microbatch_size=1, global_batch_size=96)
    seen: list[tuple[int, int]] = []
    outcome = simulate(Scenario(MODEL, CLUSTER, layout), progress=lambda done, total: seen.append((done, total)))
    assert outcome.extrapolated_periods > 0
    total = 2 * 48 * 4
    assert {t for _, t in seen} == {total}
    done = [d for d, _ in seen]
    assert done == sorted(done) and done[-1] == total


def test_alignment_relabels_consistently() -> None:
    def one_f_one_b(m: int) -> list[Pass]:
        from simcore.domain.schedules import POLICIES
        return POLICIES[Schedule.ONE_F_ONE_B].passes(0, 2, m, 1)

    full, reduced = Columns(one_f_one_b(20)), Columns(one_f_one_b(12))
    labels: dict[int, set[int]] = {}
    # rank 0 of 2: F0, then (F k+1, B k) pairs: cut 8 periods (of 2 passes, 1 microbatch) at index 9
    assert aligned(full, reduced, 9, 8, 1, 2, labels)
    assert consistent(labels, 8)
    assert not aligned(full, reduced, 9, 7, 1, 2, {})  # the lengths do not add up
    bad: dict[int, set[int]] = {0: {0, 3}}
    assert not consistent(bad, 8)  # one microbatch relabelled two ways


@pytest.mark.slow
def test_the_1t_example_extrapolates_most_of_its_periods_within_the_full_runs_rounding() -> None:
    # docs/engine.md, "Periodic steady state", quotes these figures.
    scenario = to_scenario(load_request_file("examples/gpt-1t-3072-a100.yaml"))
    extrapolated, full = _pair(scenario)
    assert extrapolated.extrapolated_periods == 436  # of 512 microbatches' periods (1F1B on 64 stages)
    assert_same(extrapolated, full)
    a, b = extrapolated.metrics, full.metrics
    assert a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-13)  # the full run rounds per event
    assert abs(a.communication_s["pp"] - b.communication_s["pp"]) / b.communication_s["pp"] < 5e-12
    assert abs(a.time_breakdown_s["pp_comm"] - b.time_breakdown_s["pp_comm"]) < 2e-12


@pytest.mark.slow
def test_a_context_parallel_ring_over_infiniband_extrapolates_within_the_full_runs_rounding() -> None:
    # Flows sharing InfiniBand links round their end times at every event that changes the sharing: the periods
    # of this run differ by about 800 ulps, which a bound of 8 ulps a pass refused (simulated in full, 4.7 s of
    # CPU); the bound now counts the period's events, and the put-back run still equals the full one.
    request = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32},
               "layout": {"dp": 8, "tp": 1, "pp": 4, "cp": 8, "virtual_stages": 4, "microbatch_size": 1,
                          "global_batch_size": 1024, "zero_stage": 2, "schedule": "interleaved_1f1b"}}
    from api_schemas import SimulationRequest

    extrapolated, full = _pair(to_scenario(SimulationRequest.model_validate(request)))
    assert extrapolated.extrapolated_periods > 0
    assert_same(extrapolated, full)


@pytest.mark.slow
def test_a_period_that_jitters_beyond_rounding_is_simulated_in_full_after_one_try(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # With its gradients reduced during backward, this CP ring of 8 across nodes (data parallelism inside a node,
    # context parallelism across 8 of them) never repeats to the bit (its period moves by 1e-7 to 1e-5 of itself from
    # one period to the next): one try says so, and the iteration is simulated in full at once rather than after
    # three longer tries that fail alike.
    from api_schemas import SimulationRequest
    from simcore.engine.steady_state import periodic

    request = {"model": {"preset": "llama3-70b"}, "cluster": {"preset": "dgx-h100", "num_nodes": 32},
               "layout": {"dp": 8, "tp": 1, "pp": 4, "cp": 8, "virtual_stages": 4, "microbatch_size": 1,
                          "global_batch_size": 1024, "zero_stage": 2, "schedule": "interleaved_1f1b",
                          "overlap_grad_reduce": True, "placement": "tp,dp,cp,pp"}}
    tries: list[tuple[int, object]] = []
    original = periodic.try_extrapolated

    def recorded(config: EngineConfig, progress: object = None, keep: int = 1) -> object:
        outcome = original(config, progress, keep)  # type: ignore[arg-type]
        tries.append((keep, outcome))
        return outcome

    monkeypatch.setattr(periodic, "try_extrapolated", recorded)
    outcome = simulate(to_scenario(SimulationRequest.model_validate(request)))
    assert outcome.extrapolated_periods == 0
    assert len(tries) == 1 and isinstance(tries[0][1], str) and "jitters" in tries[0][1], tries
