"""A whole training run: how many tokens, what a GPU-hour costs, power, checkpointing and failures.

The domain side of the `training` request section; simcore/training_plan.py turns it and a simulated iteration into
days, GPU-hours, cost, energy and goodput.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcore.domain.mlperf import MlperfBenchmark
from simcore.errors import SpecError


@dataclass(frozen=True, slots=True)
class Checkpointing:
    """How checkpoints are written. The write time is `write_s` when given, else the checkpoint's bytes over
    every node writing its shard at `write_bytes_per_s_per_node` at once (a fully parallel distributed save).
    `interval_s` None means `auto`: Daly's optimum for the job's failure rate."""

    interval_s: float | None = None
    write_bytes_per_s_per_node: float | None = None
    write_s: float | None = None


@dataclass(frozen=True, slots=True)
class Failures:
    """Interruptions: a mean time between failures per GPU or per node (the job's is that over the count), and
    the time to restart the job and reload the last checkpoint."""

    restart_s: float
    mtbf_s_per_gpu: float | None = None
    mtbf_s_per_node: float | None = None


@dataclass(frozen=True, slots=True)
class TrainingRun:
    tokens: float | None = None
    tokens_per_parameter: float | None = None
    gpu_hour_usd: float | None = None
    gpu_power_w: float | None = None  # None: the GPU's TDP from the catalog
    pue: float = 1.0  # 1: the GPUs' own draw only
    checkpoint: Checkpointing | None = None
    failures: Failures | None = None
    mlperf: MlperfBenchmark | None = None  # an MLPerf Training benchmark: its RCPs set the samples, not tokens


def _positive(field: str, value: float | None) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise SpecError(field, "must be a finite number > 0")


def validate_training(run: TrainingRun) -> TrainingRun:
    """The rules that tie the section's fields together; raises SpecError naming the field."""
    if run.mlperf is not None and (run.tokens is not None or run.tokens_per_parameter is not None):
        raise SpecError("training.mlperf", "sets the samples from the benchmark's reference convergence points: "
                        "give it without tokens or tokens_per_parameter")
    if run.mlperf is None and (run.tokens is None) == (run.tokens_per_parameter is None):
        raise SpecError("training.tokens", "give tokens, tokens_per_parameter or mlperf (one of them)")
    _positive("training.tokens", run.tokens)
    _positive("training.tokens_per_parameter", run.tokens_per_parameter)
    _positive("training.gpu_power_w", run.gpu_power_w)
    if run.gpu_hour_usd is not None and not (math.isfinite(run.gpu_hour_usd) and run.gpu_hour_usd >= 0):
        raise SpecError("training.gpu_hour_usd", "must be a finite number >= 0")
    if not (math.isfinite(run.pue) and run.pue >= 1):
        raise SpecError("training.pue", "must be >= 1")
    ckpt, fail = run.checkpoint, run.failures
    if ckpt is not None:
        _positive("training.checkpoint.interval_s", ckpt.interval_s)
        _positive("training.checkpoint.write_gb_per_s_per_node", ckpt.write_bytes_per_s_per_node)
        if ckpt.write_s is not None and not (math.isfinite(ckpt.write_s) and ckpt.write_s >= 0):
            raise SpecError("training.checkpoint.write_s", "must be a finite number >= 0")
        if (ckpt.write_s is None) == (ckpt.write_bytes_per_s_per_node is None):
            raise SpecError("training.checkpoint", "give write_gb_per_s_per_node or write_s (one of them)")
        if ckpt.interval_s is None and fail is None:
            raise SpecError("training.checkpoint.interval_s", "auto needs training.failures (a failure rate)")
    if fail is not None:
        if ckpt is None:
            raise SpecError("training.checkpoint",
                            "required with training.failures: without checkpoints a failure loses the whole run")
        _positive("training.failures.mtbf_hours_per_gpu", fail.mtbf_s_per_gpu)
        _positive("training.failures.mtbf_hours_per_node", fail.mtbf_s_per_node)
        if (fail.mtbf_s_per_gpu is None) == (fail.mtbf_s_per_node is None):
            raise SpecError("training.failures", "give mtbf_hours_per_gpu or mtbf_hours_per_node (one of them)")
        if not (math.isfinite(fail.restart_s) and fail.restart_s >= 0):
            raise SpecError("training.failures.restart_s", "must be a finite number >= 0")
    return run
