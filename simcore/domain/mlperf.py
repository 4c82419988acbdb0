"""MLPerf Training's time-to-train: the steps and evaluations a benchmark takes at a global batch size, from the
MLCommons reference convergence points (RCPs), and the minutes from `run_start` to `run_stop` they make.

Scoring (MLCommons training_policies, training_rules.adoc): a run's time is wall-clock from `run_start` to
`run_stop`, initialisation excluded (before `run_start`) and evaluation included; it stops at the first
evaluation that reaches the target quality. The RCP checker (mlcommons/logging, rcp_checker.py) holds, per batch
size, the samples the reference needed in 2N runs; their olympic mean (fastest and slowest dropped) is what a run at
that batch is expected to need, and a batch between two RCPs takes the linear interpolation of the two means
(`_create_interp_rcp`, over the RCPs left after `_prune_rcps`: the batches below the fastest-converging one, and any
point slower than the interpolation of its neighbours, dropped). Below the smallest batch the checker judges a run
against the smallest batch's RCP (`check_directory`: "RCP not found but slower convergence on smaller batch size",
`_find_min_rcp`), so its mean is what such a run is expected to need (NVIDIA's v5.0 Llama 3.1 405B runs at batch 448
and 896, under the smallest RCP's 1,008, were scored that way). Above the largest batch there is no RCP (the
checker asks for one): such a run is an error naming the nearest.

Closed forms (`plan`): with B the global batch, S the expected samples (tokens / sequence length for gpt3), I the
evaluation interval in samples, E the evaluation samples and K the evaluations the rules skip:
- steps = ceil(S / B); an evaluation every k = ceil(I / B) steps (the rules round the interval up to whole steps);
- evaluations = max(0, ceil(steps / k) - K): the last one is the one that reaches the target;
- time_to_train = steps x step_time + evaluations x eval_time;
- eval_time: forward passes only (no backward, no gradient reduction, no optimizer step) over E samples, in
  evaluation steps of the training's global batch B, each a forward-only pipeline of its own: Megatron-LM's
  evaluate() runs eval_iters iterations of forward_backward_func(forward_only=True) over eval_global_batch_size /
  (eval_micro_batch_size x dp) microbatches, both sizes the training's unless set (NVIDIA/Megatron-LM
  @d98e8a64ddf34856e74b24714e3bedb2f5a39553 megatron/training/training.py evaluate(), arguments.py
  eval_global_batch_size = global_batch_size), and a last partial batch is a whole step (NVIDIA's v3.1 gpt3 logs:
  three validation_step_timing of 4.1-4.5 s each for 5,660 samples at B = 2,048, mlcommons/training_results_v3.1
  NVIDIA/results/eos_n64_ngc23.09_nemo/gpt3/result_0.txt). With m = B / (dp x microbatch) microbatches a replica
  and p stages of v model chunks, a step takes (m + (p - 1) / v) x the slowest stage's forward time of one
  microbatch (the pipeline fills and drains once a step, one model chunk at a time), and an evaluation
  ceil(E / B) steps.
The data and their sources: simcore/calibration/reference/mlperf-rcps.json, read by
simcore/calibration/mlperf_rcps.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from simcore.errors import SpecError

__all__ = ["MlperfBenchmark", "MlperfPlan", "eval_time_s", "expected_samples", "olympic_mean", "plan"]


@dataclass(frozen=True, slots=True)
class MlperfBenchmark:
    """One benchmark in one MLPerf Training version: its RCPs and evaluation rules."""

    name: str
    version: str
    seq_length: int  # tokens per sample
    rcps: tuple[tuple[int, tuple[float, ...]], ...]  # (global batch, samples to converge of each reference run)
    eval_interval_samples: int
    eval_samples: int
    skip_evaluations: tuple[float, float] | None = None  # (a, b): the first floor(a x B + b) evaluations are skipped
    starts_from_checkpoint: bool = False  # fine-tunes or resumes a given checkpoint (loaded before run_start)


@dataclass(frozen=True, slots=True)
class MlperfPlan:
    benchmark: str
    version: str
    global_batch_size: int
    samples: float  # expected samples to reach the target (the RCP mean at this batch)
    rcp_interpolated: bool  # the batch lies between two RCPs
    steps: int
    evaluations: int
    step_time_s: float
    eval_time_s: float  # one evaluation
    time_to_train_s: float

    @property
    def time_to_train_min(self) -> float:
        return self.time_to_train_s / 60.0


def olympic_mean(samples: tuple[float, ...]) -> float:
    """The RCP checker's mean: the runs sorted, the fastest and the slowest dropped."""
    ordered = sorted(samples)
    kept = ordered[1:-1] if len(ordered) > 2 else ordered
    return sum(kept) / len(kept)


def _pruned(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The RCP checker's `_prune_rcps`: drop the batches below the fastest-converging one, then every point slower
    than the interpolation of its neighbours (the checker's loop, step back after a removal)."""
    fastest = min(points, key=lambda p: p[1])
    kept = [p for p in points if p[0] >= fastest[0]]
    i = 1
    while i < len(kept) - 1:
        (b0, m0), (b, m), (b1, m1) = kept[i - 1], kept[i], kept[i + 1]
        if m > m0 + (m1 - m0) * (b - b0) / (b1 - b0):
            del kept[i]
            i -= 1
        i += 1
    return kept


def expected_samples(benchmark: MlperfBenchmark, global_batch_size: int) -> tuple[float, bool]:
    """The RCP mean at this batch (exact, interpolated between the nearest RCPs, or the smallest batch's for a
    batch below it) and whether it was interpolated; SpecError above the largest batch, naming the nearest."""
    points = sorted((b, olympic_mean(runs)) for b, runs in benchmark.rcps)
    exact = dict(points)
    if global_batch_size in exact:
        return exact[global_batch_size], False
    batches = [b for b, _ in points]
    if global_batch_size < batches[0]:
        return points[0][1], False  # the RCP checker's rule below the smallest batch (module docstring)
    if global_batch_size > batches[-1]:
        raise SpecError("layout.global_batch_size", f"{benchmark.name} v{benchmark.version} has reference "
                        f"convergence points for global batches up to {batches[-1]} only (nearest: "
                        f"{batches[-1]}; all: {', '.join(map(str, batches))}); a larger batch needs its own RCP")
    for candidates in (_pruned(points), points):
        below = [p for p in candidates if p[0] < global_batch_size]
        above = [p for p in candidates if p[0] > global_batch_size]
        if below and above:
            (b0, m0), (b1, m1) = below[-1], above[0]
            return m0 + (m1 - m0) * (global_batch_size - b0) / (b1 - b0), True
    raise AssertionError("unreachable: the full set brackets the batch")


def plan(benchmark: MlperfBenchmark, global_batch_size: int, step_time_s: float, eval_time_s: float) -> MlperfPlan:
    """Steps, evaluations and time-to-train (module docstring's closed forms)."""
    samples, interpolated = expected_samples(benchmark, global_batch_size)
    steps = math.ceil(samples / global_batch_size - 1e-9)
    every = math.ceil(benchmark.eval_interval_samples / global_batch_size)
    skipped = 0
    if benchmark.skip_evaluations is not None:
        a, b = benchmark.skip_evaluations
        skipped = math.floor(a * global_batch_size + b)
    evaluations = max(0, math.ceil(steps / every) - skipped)
    return MlperfPlan(benchmark.name, benchmark.version, global_batch_size, samples, interpolated, steps,
                      evaluations, step_time_s, eval_time_s, steps * step_time_s + evaluations * eval_time_s)


def eval_time_s(stage_forward_s: list[float], samples_per_microbatch_round: int, pp: int, eval_samples: int,
                global_batch_size: int, virtual_stages: int = 1) -> float:
    """One evaluation's seconds (module docstring): `stage_forward_s` each stage's forward time of one microbatch,
    `samples_per_microbatch_round` dp x microbatch_size, evaluation steps of `global_batch_size` samples."""
    steps = math.ceil(eval_samples / global_batch_size)
    microbatches = math.ceil(global_batch_size / samples_per_microbatch_round)
    return steps * (microbatches + (pp - 1) / virtual_stages) * max(stage_forward_s)
