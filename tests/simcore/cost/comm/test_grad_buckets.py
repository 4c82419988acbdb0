"""Megatron-Core's gradient buckets, which the engine runs and the search's estimate prices."""

from __future__ import annotations

from simcore.cost.comm.grad_buckets import bucket_elements, gradient_buckets


def test_a_bucket_grows_with_the_group_past_40_ranks() -> None:
    assert bucket_elements(8) == 40_000_000
    assert bucket_elements(64) == 64_000_000


def test_only_the_first_chunk_is_bucketed_and_only_with_overlap() -> None:
    assert gradient_buckets(100_000_000, 10, 8, 1, True, 0) == [40_000_000, 40_000_000, 20_000_000]
    assert gradient_buckets(100_000_000, 10, 8, 1, True, 1) == [100_000_000]
    assert gradient_buckets(100_000_000, 10, 8, 2, False, 0) == [100_000_000]


def test_zero_3_reduces_a_layer_at_a_time() -> None:
    assert gradient_buckets(100_000_000, 4, 8, 3, False, 0) == [25_000_000] * 4
