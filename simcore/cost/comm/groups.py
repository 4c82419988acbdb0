"""Groups of GPUs that are copies of one group: every replica's tensor-parallel group, every tensor rank's
data-parallel group, the tied embedding's pair in every replica. `GroupCopies` holds the first group and the
offsets that move it; it reads as the tuple of its groups (group i is the first with offsets[i] added to every
member) but is compared and hashed by (first group, offsets), so a cache key over thousands of groups costs what
one group's does, and the collective model can build a pattern from the structure instead of group by group
(simcore/cost/comm/symmetry.py, simcore/cost/comm/link_loads.py). Equal groups given as a plain tuple of tuples are an
other key (the same patterns, built again)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

from simcore.domain.placement import Placement


@dataclass(frozen=True, slots=True)
class GroupCopies(Sequence[tuple[int, ...]]):
    """Groups base + offsets[i], i = 0..len(offsets)-1; offsets[0] == 0 (`copies` makes them so)."""

    base: tuple[int, ...]
    offsets: range

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, i: int, /) -> tuple[int, ...]: ...

    @overload
    def __getitem__(self, i: slice, /) -> GroupCopies: ...

    def __getitem__(self, i: int | slice, /) -> tuple[int, ...] | GroupCopies:
        if isinstance(i, slice):
            return _normal(self.base, self.offsets[i])
        offset = self.offsets[i]
        return tuple(g + offset for g in self.base) if offset else self.base

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        base = self.base
        for offset in self.offsets:
            yield tuple(g + offset for g in base)


def _merged(outer: range, inner: range) -> range | None:
    """The offsets o + i (o in outer, i in inner, inner fastest) as one range, when they are one."""
    lo, li = len(outer), len(inner)
    if not lo or not li:
        return range(0)
    if li == 1:
        start = outer.start + inner.start
        return range(start, start + lo * outer.step, outer.step)
    if lo == 1 or outer.step == inner.step * li:
        start = outer.start + inner.start
        return range(start, start + lo * li * inner.step, inner.step)
    return None


def copies(base: Sequence[int], grid: Sequence[range]) -> GroupCopies | tuple[tuple[int, ...], ...]:
    """The groups base + o, o = the sum of one offset of each range of `grid` (the first range outermost, the last
    fastest): a GroupCopies when those offsets are one range, else the tuple of the groups in that order."""
    merged: range | None = range(1)
    for outer in reversed(grid):
        merged = _merged(outer, merged) if merged is not None else None
        if merged is None:
            break
    if merged is None:
        offsets = [0]
        for axis in grid:
            offsets = [o + i for o in offsets for i in axis]
        return tuple(tuple(g + o for g in base) for o in offsets)
    return _normal(base, merged)


def _normal(base: Sequence[int], offsets: range) -> GroupCopies:
    """The groups base + offsets with the first offset moved into the base (offsets[0] == 0)."""
    if not offsets:
        return GroupCopies(tuple(base), range(0))
    shift = offsets[0]
    return GroupCopies(tuple(g + shift for g in base), range(0, len(offsets) * offsets.step, offsets.step))


def as_groups(groups: Sequence[Sequence[int]]) -> GroupCopies | tuple[tuple[int, ...], ...]:
    """`groups` as a cache key: itself if a GroupCopies; else a GroupCopies when they are copies of the first
    group moved by equally spaced offsets (every replica's groups listed one by one), else a tuple of tuples."""
    if isinstance(groups, GroupCopies):
        return groups
    plain = tuple(tuple(group) for group in groups)
    if len(plain) < 2 or not plain[0] or len(plain[1]) != len(plain[0]):
        return plain
    base = plain[0]
    step = plain[1][0] - base[0]
    offsets = range(0, len(plain) * step, step) if step else range(0)
    if not step or any(group != tuple(g + offset for g in base) for group, offset in zip(plain, offsets)):
        return plain
    return GroupCopies(base, offsets)


def _axis(values: range, stride: int) -> range:
    """The offsets v * stride, v in values."""
    if len(values) == 1:
        return range(values.start * stride, values.start * stride + 1)
    return range(values.start * stride, values.stop * stride, values.step * stride)


def data_parallel_groups(place: Placement, pp_rank: int) -> GroupCopies | tuple[tuple[int, ...], ...]:
    """The data-parallel groups of pipeline rank `pp_rank`, one per tensor rank:
    [place.dp_group(t, pp_rank) for t in range(place.tp)]."""
    return copies(place.dp_group(0, pp_rank), (_axis(range(place.tp), place.strides[1]),))


def tensor_parallel_groups(place: Placement, pp_rank: int,
                           replicas: range) -> GroupCopies | tuple[tuple[int, ...], ...]:
    """The tensor-parallel groups of pipeline rank `pp_rank` in `replicas`, context-parallel rank outermost:
    [place.tp_group(d, pp_rank, c) for c in range(place.cp) for d in replicas]."""
    return copies(place.tp_group(0, pp_rank, 0),
                  (_axis(range(place.cp), place.cp_stride), _axis(replicas, place.strides[0])))


def stage_groups(place: Placement, ranks: Sequence[int],
                 replicas: range) -> GroupCopies | tuple[tuple[int, ...], ...]:
    """For each replica in `replicas`, context-parallel rank and tensor rank (in that order, the last fastest), the
    group of its GPUs on pipeline ranks `ranks` (the tied embedding's copies):
    [tuple(place.gpu(d, t, r, c) for r in ranks) for d in replicas for c in range(cp) for t in range(tp)]."""
    return copies(tuple(place.gpu(0, 0, r, 0) for r in ranks),
                  (_axis(replicas, place.strides[0]), _axis(range(place.cp), place.cp_stride),
                   _axis(range(place.tp), place.strides[1])))
