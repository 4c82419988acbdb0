"""A whole training run from one simulated iteration: the closed forms of simcore/training_plan.py, checked."""

from __future__ import annotations

import math

import pytest

import simcore
from simcore.domain.training import Checkpointing, Failures, TrainingRun
from simcore.training_plan import (
    CHECKPOINT_BYTES_PER_PARAMETER,
    daly_interval_s,
    plan_training,
    wall_time_s,
    young_interval_s,
)

# Llama 3 405B: 466 interruptions in 54 days of training on 16,384 H100s (Dubey et al. 2024, §3.3.4).
LLAMA3_JOB_MTBF_S = 54 * 86_400 / 466
GPUS = 16_384


def _plan(run: TrainingRun, tokens_per_s: float = 2.0e6, parameters: int = 405_000_000_000):
    return plan_training(run, tokens_per_s=tokens_per_s, tokens_per_iteration=16.0e6, parameters=parameters,
                         num_gpus=GPUS, num_nodes=GPUS // 8, gpu_power_w=700.0)


def _llama3(write_s: float = 60.0, restart_s: float = 600.0, interval_s: float | None = None) -> TrainingRun:
    return TrainingRun(tokens=15e12, gpu_hour_usd=2.0, checkpoint=Checkpointing(interval_s=interval_s, write_s=write_s),
                       failures=Failures(restart_s=restart_s, mtbf_s_per_gpu=LLAMA3_JOB_MTBF_S * GPUS))


def _simulated(training: TrainingRun) -> simcore.Outcome:
    return simcore.simulate(simcore.Scenario(
        model=simcore.model_from_fields(simcore.MODEL_PRESETS["gpt3-1.3b"]),
        cluster=simcore.sized(simcore.NODE_PRESETS["dgx-a100"], 16),
        layout=simcore.Layout(dp=2, tp=4, pp=2, microbatch_size=1, global_batch_size=16),
        training=training))


def test_days_gpu_hours_and_cost_follow_from_the_simulated_throughput() -> None:
    outcome = _simulated(TrainingRun(tokens=3e10, gpu_hour_usd=2.5))
    plan, metrics = outcome.training, outcome.metrics
    assert plan is not None
    days = 3e10 / metrics.tokens_per_s / 86_400
    assert plan.without_failures.days == pytest.approx(days, rel=1e-9)
    assert plan.without_failures.gpu_hours == pytest.approx(days * 24 * 16, rel=1e-9)
    assert plan.without_failures.cost_usd == pytest.approx(days * 24 * 16 * 2.5, rel=1e-9)
    assert plan.with_failures == plan.without_failures and plan.goodput == 1.0
    tokens_per_iteration = 16 * 2048
    assert plan.iterations == math.ceil(3e10 / tokens_per_iteration)


def test_tokens_per_parameter_counts_the_models_parameters() -> None:
    outcome = _simulated(TrainingRun(tokens_per_parameter=20))
    model = simcore.model_from_fields(simcore.MODEL_PRESETS["gpt3-1.3b"])
    assert outcome.training is not None
    assert outcome.training.tokens == 20 * model.total_parameters()
    assert outcome.training.checkpoint_bytes == CHECKPOINT_BYTES_PER_PARAMETER * model.total_parameters()


def test_energy_is_wall_time_times_power_times_pue() -> None:
    run = TrainingRun(tokens=1e12, gpu_power_w=650.0, pue=1.2)
    plan = _plan(run)
    wall_s = 1e12 / 2.0e6
    assert plan.without_failures.energy_mwh == pytest.approx(wall_s * GPUS * 650.0 * 1.2 / 3.6e9, rel=1e-12)


def test_young_and_daly_intervals() -> None:
    assert young_interval_s(60.0, 10_000.0) == pytest.approx(math.sqrt(2 * 60.0 * 10_000.0))
    x = 60.0 / 20_000.0
    assert daly_interval_s(60.0, 10_000.0) == pytest.approx(
        math.sqrt(2 * 60.0 * 10_000.0) * (1 + math.sqrt(x) / 3 + x / 9) - 60.0)
    assert daly_interval_s(500.0, 100.0) == 100.0  # write time past twice the MTBF: Daly's rule


def test_lost_work_per_failure_and_interruptions() -> None:
    plan = _plan(_llama3(interval_s=1800.0))
    assert plan.job_mtbf_s == pytest.approx(LLAMA3_JOB_MTBF_S)
    assert plan.lost_work_per_failure_s == pytest.approx((1800.0 + 60.0) / 2 + 600.0)
    wall_s = plan.with_failures.days * 86_400
    assert plan.expected_interruptions == pytest.approx(wall_s / LLAMA3_JOB_MTBF_S)
    work_s = plan.without_failures.days * 86_400
    assert plan.checkpoint_overhead_s == pytest.approx(work_s / 1800.0 * 60.0)
    assert plan.lost_work_s == pytest.approx(wall_s - work_s - plan.checkpoint_overhead_s)


def test_llama3_goodput_at_the_optimum_matches_the_closed_form() -> None:
    plan = _plan(_llama3())
    m, d, r = LLAMA3_JOB_MTBF_S, 60.0, 600.0
    tau = daly_interval_s(d, m)
    assert plan.checkpoint_interval_s == pytest.approx(tau)
    assert plan.goodput == pytest.approx(tau / (m * math.exp(r / m) * math.expm1((tau + d) / m)), rel=1e-12)
    assert plan.goodput == pytest.approx(0.84, abs=0.01)


def test_goodput_curve_peaks_at_the_daly_optimum_within_one_grid_step() -> None:
    step_s = 60.0
    grid = [step_s * k for k in range(1, 121)]
    goodputs = [_plan(_llama3(interval_s=tau)).goodput for tau in grid]
    best = grid[goodputs.index(max(goodputs))]
    assert abs(best - daly_interval_s(60.0, LLAMA3_JOB_MTBF_S)) <= step_s


def test_without_failures_checkpoints_cost_their_write_time() -> None:
    assert wall_time_s(1000.0, 100.0, 5.0, None, 0.0) == pytest.approx(1050.0)
    # and the exponential model tends to it as failures become rare
    assert wall_time_s(1000.0, 100.0, 5.0, 1e12, 0.0) == pytest.approx(1050.0, rel=1e-6)


@pytest.mark.parametrize(("run", "field"), [
    (TrainingRun(), "training.tokens"),
    (TrainingRun(tokens=1.0, tokens_per_parameter=20.0), "training.tokens"),
    (TrainingRun(tokens=0.0), "training.tokens"),
    (TrainingRun(tokens=1.0, pue=0.9), "training.pue"),
    (TrainingRun(tokens=1.0, checkpoint=Checkpointing(write_s=60.0)), "training.checkpoint.interval_s"),
    (TrainingRun(tokens=1.0, checkpoint=Checkpointing(interval_s=100.0)), "training.checkpoint"),
    (TrainingRun(tokens=1.0, failures=Failures(restart_s=1.0, mtbf_s_per_gpu=1.0)), "training.checkpoint"),
    (TrainingRun(tokens=1.0, checkpoint=Checkpointing(interval_s=100.0, write_s=1.0),
                 failures=Failures(restart_s=1.0)), "training.failures"),
    (TrainingRun(tokens=1.0, checkpoint=Checkpointing(interval_s=100.0, write_s=1.0),
                 failures=Failures(restart_s=1.0, mtbf_s_per_gpu=0.0)), "training.failures.mtbf_hours_per_gpu"),
])
def test_bad_sections_name_the_field(run: TrainingRun, field: str) -> None:
    with pytest.raises(simcore.SpecError) as err:
        _plan(run)
    assert err.value.field == field


def test_a_gpu_without_a_tdp_needs_the_power_field() -> None:
    with pytest.raises(simcore.SpecError) as err:
        plan_training(TrainingRun(tokens=1e9), tokens_per_s=1e6, tokens_per_iteration=1e6, parameters=1,
                      num_gpus=8, num_nodes=1, gpu_power_w=None)
    assert err.value.field == "training.gpu_power_w"


def test_a_run_that_cannot_finish_is_refused() -> None:
    with pytest.raises(simcore.SpecError) as err:
        _plan(_llama3(interval_s=LLAMA3_JOB_MTBF_S * 80))
    assert err.value.field == "training.checkpoint.interval_s"


def test_catalog_gpus_carry_their_sourced_tdp() -> None:
    tdp = {str(kind): gpu.tdp_w for kind, gpu in simcore.GPUS.items()}
    assert tdp == {"v100-32gb": 300, "a100-40gb": 400, "a100-80gb": 400, "h100-80gb": 700, "h200-141gb": 700,
                   "b200-180gb": 1000, "gb200-186gb": None, "b300-288gb": 1100, "gb300-288gb": 1400,
                   "l40s-48gb": 350}  # the sources give GB200 none: it needs gpu_power_w
