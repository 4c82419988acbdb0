"""The result document (contract: Result): what one simulated training iteration gives.

Times are seconds, memory GiB (2^30 bytes), communication bytes per iteration. The memory fields are nullable
while the memory model is optional. Used for the OpenAPI schema and to check responses.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CommunicationBytes",
    "CommunicationTimes",
    "MemoryBreakdown",
    "MemoryResult",
    "RunTotalsResult",
    "SimulationResult",
    "SimulatorInfo",
    "StageMemory",
    "StageResult",
    "TimeBreakdown",
    "TrainingResult",
]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _where_used(description: str) -> Any:
    """An optional kind (context parallelism's, expert parallelism's) that appears only where used: absent from the
    document and from model_dump() when None, as the result JSON leaves it out."""
    return Field(default=None, description=description, exclude_if=lambda value: value is None)


class TimeBreakdown(_Out):
    """Seconds of the critical rank's iteration, an exclusive split that sums to iteration_time_s.

    Communication counts only what the compute stream waited for; dp_comm covers DP and ZeRO.
    """

    compute: float
    recompute: float
    tp_comm: float
    pp_comm: float
    dp_comm: float
    optimizer: float
    bubble: float
    other: float
    cp_comm: float | None = _where_used("context parallelism (cp > 1) only: waits for the K/V ring or all-gather "
                                        "that attention could not hide")
    ep_comm: float | None = _where_used("mixture of experts only: all-to-all waited for")


class CommunicationTimes(_Out):
    """Seconds each kind of communication was busy, including what overlapped with compute."""

    tp: float
    pp: float
    dp: float
    zero: float
    cp: float | None = _where_used("context parallelism (cp > 1) only: the K/V exchanges")
    ep: float | None = _where_used("mixture of experts only: dispatch and combine all-to-alls")


class CommunicationBytes(_Out):
    """Bytes one rank of each stage sends per iteration, summed over stages, per kind."""

    tp: float
    pp: float
    dp: float
    zero: float
    cp: float | None = _where_used("context parallelism (cp > 1) only: K/V and their gradients")
    ep: float | None = _where_used("mixture of experts only: dispatch and combine all-to-alls")


class MemoryBreakdown(_Out):
    """GiB per GPU by kind."""

    weights: float | None = None
    gradients: float | None = None
    optimizer_states: float | None = None
    activations: float | None = None
    buffers: float | None = None
    # the experts' parts are left out of the document, not null, for a dense model
    expert_weights: float | None = _where_used("MoE only: the experts' part of weights")
    expert_gradients: float | None = _where_used("MoE only: the experts' part of gradients")
    expert_optimizer_states: float | None = _where_used("MoE only: the experts' part of optimizer_states")


class StageMemory(_Out):
    """GiB per GPU of one pipeline stage: its peak and what makes it up."""

    peak_gib_per_gpu: float | None = None
    capacity_gib: float | None = _where_used("heterogeneous clusters only: the HBM of the stage's GPUs (the "
                                             "smallest, where its replicas differ)")
    breakdown_gib: MemoryBreakdown | None = None


class StageResult(_Out):
    """One pipeline stage: what it holds and its per-microbatch compute times in seconds."""

    index: int
    layers: dict[str, int] = Field(description="e.g. encoder/decoder layer counts, embedding, logits")
    forward_s: float = Field(description="seconds per microbatch")
    backward_s: float = Field(description="seconds per microbatch")
    backward_input_s: float = Field(description="of backward_s, the input gradient (B, with any recomputation), "
                                    "seconds per microbatch")
    backward_weight_s: float = Field(description="of backward_s, the weight gradient (W), seconds per microbatch")
    bubble_s: float = Field(description="seconds per iteration this stage's compute stream is idle waiting on "
                            "pipeline dependencies (fill, drain, waits for another stage); the mean of these over "
                            "stages, over iteration_time_s, is bubble_fraction")
    busy_fraction: float
    gpu: str | None = _where_used("heterogeneous clusters only: the GPU kind that runs the stage (its first "
                                  "data-parallel replica's)")
    memory: StageMemory | None = None


class MemoryResult(_Out):
    """Memory per GPU in GiB: the peak over stages, the GPU's capacity, and the peak stage's breakdown. On a
    heterogeneous cluster, the stage with the least room left on its GPUs (the worst) and their capacity; fits is
    false when any stage overflows its GPUs."""

    peak_gib_per_gpu: float | None = None
    capacity_gib: float | None = None
    fits: bool | None = None
    breakdown_gib: MemoryBreakdown | None = None


class SimulatorInfo(_Out):
    """How the result was produced; wall_time_s is the only field that varies between identical runs."""

    version: str
    events: int
    fidelity: str
    simulated_ranks: int
    extrapolated_periods: int = Field(default=0, description="steady-state periods of the iteration put back "
                                      "rather than simulated, once checked to repeat (options.extrapolate)")
    wall_time_s: float


class RunTotalsResult(_Out):
    """A whole run's totals: wall-clock days, GPU-hours, cost (when a price is given) and energy."""

    days: float
    gpu_hours: float
    cost_usd: float | None = Field(default=None, description="GPU-hours x training.gpu_hour_usd; absent without")
    energy_mwh: float | None = Field(default=None, description="wall time x GPUs x power per GPU x PUE; absent "
                                     "where no power is known (training.mlperf on a GPU without a sourced TDP)")


class MlperfResult(_Out):
    """MLPerf Training's score for the run (docs/contract-mlperf.md): minutes from run_start to run_stop."""

    benchmark: str
    version: str
    time_to_train_min: float = Field(description="steps x step_time_s + evaluations x eval_time_s, minutes")
    steps: int = Field(description="ceil(samples / global_batch_size)")
    evaluations: int = Field(description="the evaluations up to the one that reaches the target, less the skipped")
    step_time_s: float = Field(description="the simulated iteration_time_s")
    eval_time_s: float = Field(description="one evaluation: forward passes over the benchmark's evaluation samples")
    samples: float = Field(description="expected samples to the target: the reference convergence points' mean")
    rcp_interpolated: bool = Field(description="the global batch lies between two reference convergence points")


class TrainingResult(_Out):
    """The whole training run (request section `training`); formulas in docs/usage.md, "A whole training run"."""

    tokens: float
    iterations: int = Field(description="optimizer steps: tokens over tokens per iteration, rounded up")
    without_failures: RunTotalsResult = Field(description="the training work alone: tokens / tokens_per_s")
    with_failures: RunTotalsResult = Field(description="checkpoints, expected failures and restarts included")
    checkpoint_size_gb: float = Field(description="14 bytes per parameter: 16-bit weights, fp32 master and Adam")
    checkpoint_write_s: float | None = None
    checkpoint_interval_s: float | None = Field(default=None, description="seconds of training between checkpoints")
    young_interval_s: float | None = Field(default=None, description="sqrt(2 x write time x job MTBF), Young 1974")
    daly_interval_s: float | None = Field(default=None, description="Daly 2006's higher-order optimum (auto)")
    job_mtbf_hours: float | None = None
    expected_interruptions: float
    checkpoint_overhead_days: float
    lost_work_days: float = Field(description="recomputed work and restarts, expected")
    lost_work_per_failure_s: float | None = Field(
        default=None, description="(interval + write time) / 2 + restart time, to first order"
    )
    goodput: float = Field(description="training work over wall time")
    mlperf: MlperfResult | None = Field(default=None, description="with training.mlperf: the time-to-train")


class SimulationResult(_Out):
    """One optimizer step of the requested layout, as simulated."""

    iteration_time_s: float
    samples_per_s: float
    tokens_per_s: float = Field(description="samples x (seq_length + decoder_seq_length where there is one)")
    model_flops_per_iteration: float = Field(description="3 x forward matmul FLOPs of the global batch")
    model_tflops_per_gpu: float
    mfu: float = Field(description="model FLOPs / time / GPUs over the GPU's dense 16-bit peak")
    hardware_tflops_per_gpu: float
    hfu: float = Field(description="as mfu, counting recomputed forward work")
    bubble_fraction: float = Field(description="mean over stages of pipeline-wait time over iteration_time_s")
    pipeline_overhead: float = Field(description="bubble time over ideal compute time")
    time_breakdown_s: TimeBreakdown
    communication_s: CommunicationTimes
    communication_bytes: CommunicationBytes
    stages: list[StageResult]
    memory: MemoryResult | None
    warnings: list[str]
    simulator: SimulatorInfo
    trace: dict[str, Any] | None = Field(
        default=None,
        description="Chrome trace (Trace Event Format) when options.trace is true; absent otherwise",
    )
    training: TrainingResult | None = Field(
        default=None, description="the whole training run when the request has a training section; absent otherwise"
    )
    request: dict[str, Any] | None = Field(
        default=None,
        description="the request as simulated, validated, with every default it took written out: a saved result "
                    "can be run again or exported (`clustersim export KIND RESULT.json`); absent from results "
                    "saved before results echoed it")
