"""Seconds and bytes of one tensor-parallel collective on a rank's groups, alone on the links (what the workload
folds into the passes that issue it)."""

from __future__ import annotations

from collections.abc import Sequence

from simcore.cost.comm.collectives import Collective, CollectiveModel, ring_factor

__all__ = ["collective_s", "tp_collectives_s", "tp_ring_bytes"]


def tp_collectives_s(model: CollectiveModel | None, groups: Sequence[tuple[int, ...]], size: float,
                     sp: bool) -> float:
    """One tensor-parallel block's collectives on `size` bytes: an all-reduce, or with sequence parallelism an
    all-gather and a reduce-scatter."""
    if len(groups[0]) < 2:
        return 0.0
    assert model is not None, "tensor-parallel time needs a collective model (or free communication)"
    if sp:
        return (model.isolated_time(Collective.ALL_GATHER, groups, size)
                + model.isolated_time(Collective.REDUCE_SCATTER, groups, size))
    return model.isolated_time(Collective.ALL_REDUCE, groups, size)


def collective_s(model: CollectiveModel | None, kind: Collective, groups: Sequence[tuple[int, ...]],
                 size: float) -> float:
    """One collective of `kind` on `size` bytes over the groups (0 for groups of one)."""
    if len(groups[0]) < 2:
        return 0.0
    assert model is not None, "tensor-parallel time needs a collective model (or free communication)"
    return model.isolated_time(kind, groups, size)


def tp_ring_bytes(t: int, size: float) -> float:
    """Bytes one tensor rank sends for one all-reduce (or reduce-scatter plus all-gather) of `size` bytes in a
    ring: 2(t-1)/t S."""
    if t < 2:
        return 0.0
    return ring_factor(Collective.ALL_REDUCE, t) * size
