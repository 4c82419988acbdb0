"""The request's `training` section (contract: Request, training): a whole run's tokens or MLPerf benchmark, its
price and power, checkpoints and failures. Per-field rules only, as in api_schemas/request.py."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat

from api_schemas.cluster import NonNegativeFloat, PositiveFloat

__all__ = ["CheckpointIn", "FailuresIn", "MlperfIn", "TrainingIn"]


class CheckpointIn(BaseModel):
    """How checkpoints are written: an interval (seconds of training between checkpoints, or `auto` for Daly's
    optimum) and the write speed (per node, every node writing its shard at once) or the write time."""

    model_config = ConfigDict(extra="forbid")

    interval_s: PositiveFloat | Literal["auto"] = Field(
        default="auto", description="seconds of training between checkpoints, or auto (Daly 2006's optimum)"
    )
    write_gb_per_s_per_node: PositiveFloat | None = Field(
        default=None, description="write bandwidth per node, GB/s; every node writes its shard at once"
    )
    write_s: NonNegativeFloat | None = Field(default=None, description="the write time of one checkpoint, seconds")


class FailuresIn(BaseModel):
    """Interruptions: a mean time between failures per GPU or per node, and the restart time."""

    model_config = ConfigDict(extra="forbid")

    mtbf_hours_per_gpu: PositiveFloat | None = None
    mtbf_hours_per_node: PositiveFloat | None = None
    restart_s: NonNegativeFloat = Field(description="time to restart the job and reload the last checkpoint, seconds")


class MlperfIn(BaseModel):
    """An MLPerf Training benchmark: its reference convergence points set the samples (docs/contract-mlperf.md)."""

    model_config = ConfigDict(extra="forbid")

    benchmark: Literal["gpt3", "llama31_8b", "llama31_405b", "llama2_70b_lora"]
    version: str = Field(description='the MLPerf Training version, e.g. "5.1"')


class TrainingIn(BaseModel):
    """A whole training run: the result then carries a `training` section (days, GPU-hours, cost, energy)."""

    model_config = ConfigDict(extra="forbid")

    tokens: PositiveFloat | None = Field(default=None, description="tokens to train on")
    tokens_per_parameter: PositiveFloat | None = Field(
        default=None, description="tokens per model parameter (20 is Chinchilla's)"
    )
    gpu_hour_usd: NonNegativeFloat | None = Field(default=None, description="price of one GPU-hour, USD")
    gpu_power_w: PositiveFloat | None = Field(default=None, description="power per GPU, W; default the GPU's TDP")
    pue: Annotated[StrictFloat, Field(ge=1, allow_inf_nan=False)] = Field(
        default=1.0, description="power usage effectiveness; 1 counts the GPUs' own draw only"
    )
    checkpoint: CheckpointIn | None = None
    failures: FailuresIn | None = None
    mlperf: MlperfIn | None = Field(default=None, description="an MLPerf Training benchmark instead of tokens")
