"""How the frameworks bucket a chunk's gradients for their data-parallel reduction (no I/O): Megatron-Core's
DistributedDataParallel, or one bucket per layer under ZeRO 3 (FSDP reduces each layer's flat parameter at once).
The engine (simcore/engine/data_parallel/dp_sync.py) runs these buckets as collectives; the search's estimate
(simcore/planning/estimate.py) prices the same buckets, so both see the same sizes."""

from __future__ import annotations

from simcore.cost.parameters import DP_BUCKET_ELEMENTS

# Megatron-Core's bucket grows with the data-parallel group: bucket_size = max(40,000,000, 1,000,000 x dp)
# (megatron/core/distributed/distributed_data_parallel.py).
BUCKET_ELEMENTS_PER_DP_RANK = 1_000_000


def bucket_elements(group: int) -> int:
    """Megatron-Core's gradient bucket (elements) for a reduction group of `group` ranks."""
    return max(DP_BUCKET_ELEMENTS, BUCKET_ELEMENTS_PER_DP_RANK * group)


def gradient_buckets(parameters: int, layers: int, group: int, zero_stage: int, overlap: bool,
                     chunk: int) -> list[int]:
    """Parameters per gradient bucket of one model chunk of `parameters` over `layers`, in the order backward
    produces them: with ZeRO 3 one per layer; else Megatron-Core's, which buckets only when the reduction
    overlaps backward and only the first model chunk (the later chunks of an interleaved rank go whole)."""
    if zero_stage >= 3:
        layers = max(layers, 1)
        return [parameters // layers] * layers
    if not overlap or chunk > 0:
        return [parameters]
    size = bucket_elements(group)
    full, rest = divmod(parameters, size)
    return [size] * full + ([rest] if rest else [])
