"""From one simulated iteration to a whole training run: days, GPU-hours, cost, energy, and what checkpoints and
failures take from it.

Every figure comes from the simulated throughput and the formulas below (docs/usage.md, "A whole training run"):
- work W = tokens / tokens_per_s (seconds of training without interruptions); iterations = ceil(tokens / tokens
  per iteration);
- GPU-hours = wall time / 3600 x GPUs; cost = GPU-hours x price; energy = wall time x GPUs x power x PUE;
- checkpoint write time delta = checkpoint bytes / (write bandwidth per node x nodes), unless given;
- the job's MTBF M = MTBF per GPU / GPUs (or per node / nodes): independent failures, exponentially distributed;
- Young's interval sqrt(2 delta M) (Young 1974, "A first order approximation to the optimum checkpoint interval",
  CACM 17(9)); Daly's higher-order optimum sqrt(2 delta M) [1 + (delta / 2M)^(1/2) / 3 + (delta / 2M) / 9] - delta
  for delta < 2M, else M (Daly 2006, "A higher order estimate of the optimum checkpoint interval for restart
  dumps", FGCS 22(3), eq. 37), which `auto` uses;
- the expected wall time with checkpoints every tau seconds of work, each restart taking R:
  T = M e^(R/M) (e^((tau + delta)/M) - 1) W / tau (Daly 2006, eq. 13, the exponential failure model); without
  failures T = W (1 + delta / tau);
- expected interruptions T / M; checkpoint overhead (W / tau) delta; work lost to failures (recomputation and
  restarts) T - W - checkpoint overhead; to first order each failure loses (tau + delta) / 2 + R; goodput W / T.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcore.domain.mlperf import MlperfPlan, plan
from simcore.domain.training import TrainingRun, validate_training
from simcore.errors import SpecError

# What a checkpoint holds per parameter for mixed-precision Adam: the 16-bit working weights (2 bytes) and the
# optimizer's fp32 master weights, first and second moments (12 bytes); ZeRO (Rajbhandari et al. 2020, §3.1) counts
# the same 2 + 12 bytes of model states besides the gradients, which a checkpoint does not save.
CHECKPOINT_BYTES_PER_PARAMETER = 14

SECONDS_PER_DAY = 86_400.0
JOULES_PER_MWH = 3.6e9
# Beyond this, e^((tau + delta) / M) describes a run that does not finish in any meaningful time.
_MAX_EXPONENT = 50.0


@dataclass(frozen=True, slots=True)
class RunTotals:
    days: float
    gpu_hours: float
    cost_usd: float | None
    energy_mwh: float | None  # None: no power known (an MLPerf run on a GPU without a sourced TDP)


@dataclass(frozen=True, slots=True)
class TrainingPlan:
    tokens: float
    iterations: int
    without_failures: RunTotals  # the work alone: no checkpoints, no failures
    with_failures: RunTotals  # checkpoints and the expected failures and restarts included
    checkpoint_bytes: float
    checkpoint_write_s: float | None
    checkpoint_interval_s: float | None
    young_interval_s: float | None
    daly_interval_s: float | None
    job_mtbf_s: float | None
    expected_interruptions: float
    checkpoint_overhead_s: float
    lost_work_s: float
    lost_work_per_failure_s: float | None
    goodput: float
    mlperf: MlperfPlan | None = None  # an MLPerf benchmark's steps, evaluations and time-to-train


def young_interval_s(write_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum checkpoint interval, seconds of work between checkpoints."""
    return math.sqrt(2.0 * write_s * mtbf_s)


def daly_interval_s(write_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum (2006, eq. 37)."""
    if write_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = write_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * write_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - write_s


def wall_time_s(work_s: float, interval_s: float, write_s: float, mtbf_s: float | None, restart_s: float) -> float:
    """Expected wall time of `work_s` seconds of training with a checkpoint every `interval_s` seconds of work."""
    if mtbf_s is None:
        return work_s * (1.0 + write_s / interval_s)
    exponent = (interval_s + write_s) / mtbf_s
    if exponent + restart_s / mtbf_s > _MAX_EXPONENT:
        raise SpecError("training.checkpoint.interval_s",
                        f"interval plus write time is {exponent:.0f} times the job's MTBF: the run would not finish")
    return mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1(exponent) * work_s / interval_s


def _totals(wall_s: float, gpus: int, run: TrainingRun, power_w: float | None) -> RunTotals:
    gpu_hours = wall_s / 3600.0 * gpus
    cost = gpu_hours * run.gpu_hour_usd if run.gpu_hour_usd is not None else None
    return RunTotals(days=wall_s / SECONDS_PER_DAY, gpu_hours=gpu_hours, cost_usd=cost,
                     energy_mwh=None if power_w is None else wall_s * gpus * power_w * run.pue / JOULES_PER_MWH)


def plan_training(run: TrainingRun, *, tokens_per_s: float, tokens_per_iteration: float, parameters: int,
                  num_gpus: int, num_nodes: int, gpu_power_w: float | None, global_batch_size: int = 1,
                  eval_time_s: float = 0.0, iteration_time_s: float | None = None) -> TrainingPlan:
    """The whole run, from the simulated throughput. `gpu_power_w` is the catalog's TDP (None if unknown). With an
    MLPerf benchmark (run.mlperf) the work is its time-to-train (simcore/domain/mlperf.py: the steps at the
    simulated iteration time plus the evaluations of `eval_time_s` each, for `global_batch_size`)."""
    validate_training(run)
    power = run.gpu_power_w if run.gpu_power_w is not None else gpu_power_w
    if power is None and run.mlperf is None:
        raise SpecError("training.gpu_power_w", "required: the GPU has no sourced TDP in the catalog")
    mlperf = None
    if run.mlperf is not None:
        step_s = iteration_time_s if iteration_time_s is not None else tokens_per_iteration / tokens_per_s
        mlperf = plan(run.mlperf, global_batch_size, step_s, eval_time_s)
        tokens, work_s, iterations = mlperf.steps * tokens_per_iteration, mlperf.time_to_train_s, mlperf.steps
    else:
        tokens = run.tokens if run.tokens is not None else float(run.tokens_per_parameter or 0.0) * parameters
        work_s = tokens / tokens_per_s
        iterations = math.ceil(tokens / tokens_per_iteration - 1e-9)
    ideal = _totals(work_s, num_gpus, run, power)
    checkpoint_bytes = float(CHECKPOINT_BYTES_PER_PARAMETER * parameters)

    ckpt, fail = run.checkpoint, run.failures
    mtbf: float | None = None
    if fail is not None:
        mtbf = fail.mtbf_s_per_gpu / num_gpus if fail.mtbf_s_per_gpu is not None else (
            float(fail.mtbf_s_per_node or 0.0) / num_nodes)
    if ckpt is None:
        return TrainingPlan(tokens, iterations, ideal, ideal, checkpoint_bytes, None, None, None, None, None,
                            0.0, 0.0, 0.0, None, 1.0, mlperf)
    write_s = ckpt.write_s if ckpt.write_s is not None else (
        checkpoint_bytes / (float(ckpt.write_bytes_per_s_per_node or 0.0) * num_nodes))
    young = young_interval_s(write_s, mtbf) if mtbf is not None else None
    daly = daly_interval_s(write_s, mtbf) if mtbf is not None else None
    interval = ckpt.interval_s if ckpt.interval_s is not None else daly
    if interval is None or interval <= 0:
        raise SpecError("training.checkpoint.interval_s", "auto needs a checkpoint write time > 0")
    restart = fail.restart_s if fail is not None else 0.0
    wall = wall_time_s(work_s, interval, write_s, mtbf, restart)
    overhead = work_s / interval * write_s
    return TrainingPlan(
        tokens=tokens, iterations=iterations, without_failures=ideal,
        with_failures=_totals(wall, num_gpus, run, power), checkpoint_bytes=checkpoint_bytes,
        checkpoint_write_s=write_s, checkpoint_interval_s=interval, young_interval_s=young, daly_interval_s=daly,
        job_mtbf_s=mtbf, expected_interruptions=wall / mtbf if mtbf is not None else 0.0,
        checkpoint_overhead_s=overhead, lost_work_s=max(wall - work_s - overhead, 0.0),
        lost_work_per_failure_s=(interval + write_s) / 2.0 + restart if mtbf is not None else None,
        goodput=work_s / wall, mlperf=mlperf)
