"""ZeRO 3 gathers in buckets: the same bytes in more, smaller collectives, which
over a large group are latency-bound."""

from __future__ import annotations

import dataclasses

import pytest

from simcore.domain.layout import Layout, Recompute, validate_layout
from simcore.domain.model import model_from_fields
from simcore.domain.presets import MODEL_PRESETS
from simcore.simulate import Outcome, Scenario, simulate
from topology import NODE_PRESETS, sized
from topology.errors import SpecError

MODEL = model_from_fields(MODEL_PRESETS["gpt3-1.3b"])
LAYOUT = Layout(dp=64, tp=1, pp=1, microbatch_size=1, global_batch_size=64, zero_stage=3,
                recompute=Recompute.FULL, overlap_grad_reduce=True)


def outcome(bucket: int | None, gpus: int = 64) -> Outcome:
    layout = dataclasses.replace(LAYOUT, dp=gpus, global_batch_size=gpus, zero3_gather_bucket_elements=bucket)
    return simulate(Scenario(MODEL, sized(NODE_PRESETS["dgx-a100"], gpus), layout))


def test_buckets_move_the_same_bytes_in_more_collectives() -> None:
    whole, buckets = outcome(None), outcome(5_000_000)
    assert buckets.metrics.communication_bytes["zero"] == pytest.approx(whole.metrics.communication_bytes["zero"])
    assert buckets.events > whole.events + 2 * 24 * 5  # >= 7 buckets a layer instead of 1, twice, 24 layers
    assert buckets.metrics.iteration_time_s > whole.metrics.iteration_time_s


def test_small_buckets_cost_more_as_the_group_grows() -> None:
    # The per-step latency of a ring grows with its length while the bytes per GPU stay put.
    slowdown = {n: outcome(1_000_000, n).metrics.iteration_time_s / outcome(None, n).metrics.iteration_time_s
                for n in (16, 128)}
    assert slowdown[128] > slowdown[16]


def test_bucket_size_needs_zero_3() -> None:
    layout = dataclasses.replace(LAYOUT, zero_stage=1, zero3_gather_bucket_elements=1000)
    with pytest.raises(SpecError) as err:
        validate_layout(layout, MODEL, 64)
    assert err.value.field == "layout.zero3_gather_bucket_elements"
