"""Megatron-Core's gradient buckets, which the engine runs and the search's estimate prices."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simcore import FITTED, GPUS, MODEL_PRESETS, Layout, model_from_fields
from simcore.cost.comm.grad_buckets import (
    bucket_elements,
    chunk_tensors,
    gradient_buckets,
    megatron_buckets,
)
from simcore.cost.workload import build_workload
from simcore.domain.layout import Precision
from topology.hardware import GpuKind

LLAMA3_8B = model_from_fields(MODEL_PRESETS["llama3-8b"])
GB200 = GPUS[GpuKind("gb200-186gb")]
# Llama 3.1 8B as MLPerf v5.1's 512-GPU configs run it: TP 2, CP 4, DP 64, FP8 parameters gathered in FP8
MLPERF_8B = Layout(dp=64, tp=2, pp=1, cp=4, microbatch_size=1, global_batch_size=64, zero_stage=1,
                   overlap_grad_reduce=True, sequence_parallel=True, precision=Precision.FP8, fp8_param_gather=True)


def _buckets(layout: Layout) -> list[tuple[int, tuple[int, ...]]]:
    """(pipeline rank, buckets) of every chunk of the layout on Llama 3 8B."""
    work = build_workload(LLAMA3_8B, layout, GB200, None, None, True, FITTED)
    return [(c.rank, c.grad_buckets) for c in work.chunks]


def test_the_default_bucket_grows_with_the_data_parallel_group_past_40_ranks() -> None:
    assert bucket_elements(8) == 40_000_000
    assert bucket_elements(64) == 64_000_000
    assert bucket_elements(64, 768_000_000) == 768_000_000


def test_a_bucket_closes_at_the_first_parameter_that_fills_it() -> None:
    # Megatron's `(param_end_index - bucket_start_index) >= bucket_size`: 30 + 30 closes a 50-element bucket at 60
    assert megatron_buckets([(30, False, False)] * 5, 50) == (60, 60, 30)
    assert megatron_buckets([(30, False, False)] * 5, None) == (150,)


def test_fp8_parameters_bucket_apart_and_the_others_join_their_last_group() -> None:
    # backward order: output layer (16-bit), two FP8 weights, a norm, two FP8 weights, the embedding (16-bit)
    tensors = [(40, False, False), (30, True, False), (30, True, False), (1, False, False), (30, True, False),
               (30, True, False), (40, False, False)]
    assert megatron_buckets(tensors, 50) == (60, 60 + 81)


def test_a_tied_embedding_split_over_stages_gets_a_bucket_of_its_own() -> None:
    assert megatron_buckets([(30, False, False), (10, False, False), (90, False, True)], 1000) == (40, 90)


def test_equal_layers_for_the_search_estimate() -> None:
    assert gradient_buckets(100_000_000, 10, 8, 1, True, 0) == [40_000_000, 40_000_000, 20_000_000]
    assert gradient_buckets(100_000_000, 10, 8, 1, True, 1) == [100_000_000]
    assert gradient_buckets(100_000_000, 10, 8, 2, False, 0) == [100_000_000]
    assert gradient_buckets(100_000_000, 10, 8, 1, True, 0, 60_000_000) == [60_000_000, 40_000_000]


def test_zero_3_reduces_a_layer_at_a_time() -> None:
    assert gradient_buckets(100_000_000, 4, 8, 3, False, 0) == [25_000_000] * 4


def test_the_mlperf_8b_buckets_are_megatrons_parameter_by_parameter() -> None:
    """768M-element buckets over a TP-2 rank's FP8 GEMM weights from layer 31 down (fc2, fc1, proj, qkv of 29.4M,
    58.7M, 8.4M and 12.6M): 4 buckets close at 792.7M, 822.1M, 771.8M and 775.9M; the 327.2M left (layers 0-2
    and part of 3) and every 16-bit parameter (embedding, output layer, norms: 525.1M) are the last group."""
    [(_, buckets)] = _buckets(replace(MLPERF_8B, grad_bucket_elements=768_000_000))
    h, f, kv = 4096, 14336, 1024
    layer = [h * f // 2, h * 2 * f // 2, h * h // 2, h * (h + 2 * kv) // 2]  # backward order, per TP rank
    expected, current = [], 0
    for n in layer * 32:
        current += n
        if current >= 768_000_000:
            expected.append(current)
            current = 0
    assert buckets[:-1] == tuple(expected) and len(buckets) == 5
    assert buckets[-1] - current == pytest.approx(128256 * h + 8192 * h / 2 + 65 * h / 2, rel=0.01)


def test_the_default_bucket_counts_data_parallel_ranks_without_context_parallelism() -> None:
    """Megatron-Core's default is max(40M, 1M x dp) with dp the data-parallel size alone: 64M here, not dp x cp's
    256M; the bucket closes past 64M, at a layer's fc1 (88.1M) and then every 109.0M."""
    [(_, buckets)] = _buckets(MLPERF_8B)
    assert buckets[0] == 14336 * 4096 // 2 + 2 * 14336 * 4096 // 2
    assert all(64_000_000 <= b < 110_000_000 for b in buckets[:-1])


def test_only_the_first_pipeline_rank_and_chunk_bucket_and_only_with_overlap() -> None:
    piped = replace(MLPERF_8B, dp=16, pp=4, cp=1, global_batch_size=64, fp8_param_gather=False)
    by_rank = _buckets(piped)
    assert len(by_rank[0][1]) > 1 and all(len(b) == 1 for rank, b in by_rank if rank > 0)
    assert all(len(b) == 1 for _, b in _buckets(replace(piped, overlap_grad_reduce=False)))


def test_every_parameter_is_in_one_bucket() -> None:
    work = build_workload(LLAMA3_8B, MLPERF_8B, GB200, None, None, True, FITTED)
    [chunk] = work.chunks
    assert sum(chunk.grad_buckets) == chunk.reduced_parameters
    assert sum(n for n, _, _ in chunk_tensors(LLAMA3_8B, chunk, MLPERF_8B)) == chunk.reduced_parameters
