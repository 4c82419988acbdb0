"""The search space's bound (checked before a search is accepted) is never below what enumeration generates, and
divisors are found in O(sqrt n) with the same, increasing order."""

from __future__ import annotations

import pytest

from simcore import MODEL_PRESETS, Schedule, model_from_fields
from simcore.planning.space import Space, divisors, enumerate_layouts, space_bound


def test_divisors_in_increasing_order() -> None:
    for n in (1, 2, 12, 36, 97, 1536, 3072):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    assert divisors(2**24 * 3)[-1] == 2**24 * 3


@pytest.mark.parametrize(("model", "gpus", "batch", "space"), [
    ("gpt3-175b", 1024, 1536, Space()),
    ("gpt3-1.3b", 64, 512, Space()),
    ("gpt3-1.3b", 48, 96, Space(tp=(1, 2, 3), schedule=(Schedule.INTERLEAVED_1F1B,), virtual_stages=(2, 4))),
    ("t5-large", 16, 64, Space(max_microbatch_size=32, max_virtual_stages=4)),
])
def test_the_bound_is_at_least_what_is_generated(model: str, gpus: int, batch: int, space: Space) -> None:
    shape = model_from_fields(MODEL_PRESETS[model])
    generated = sum(1 for _ in enumerate_layouts(shape, gpus, 8, batch, space))
    assert generated <= space_bound(shape, gpus, 8, space)
