"""Which stretches of an iteration the pipeline timeline draws, and what it draws between them.

Two kinds of break cut the time axis:

- extrapolated: where the engine simulated some periods of the pipeline's steady state and put the rest back
  without simulating them (options.extrapolate, simcore/engine/steady_state/periodic.py), every stage's row holds one
  box of kind `extrapolated` at about the same time (each stage's cut is its own, so the boxes are staggered by a pass
  or two). The time when every stage is in its box is drawn as one labelled break, 'N periods extrapolated
  (X s)', X being one stage's box: the time put back. The staggered ends of the boxes stay drawn in their rows.
- elided: a long run simulated in full (more passes a stage than `ELIDE_ABOVE_PASSES`) is drawn in three
  windows, the start (the pipeline filling), one steady-state window from the middle and the end (draining,
  gradient reduction, optimizer), the time between them left out and marked as such.

Times are seconds of the iteration.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from service.plots.rows import EXTRAPOLATED, PASS_KINDS, Row

__all__ = ["ELIDE_ABOVE_PASSES", "MIN_BREAK_SHARE", "Break", "breaks", "extrapolated_breaks", "windows"]

ELIDE_ABOVE_PASSES = 96  # passes a stage; above it the picture shows three windows (about 40 boxes each)
# An extrapolated stretch common to every stage shorter than this share of the iteration is not cut out: its
# boxes are drawn in place (the picture then loses little room to them).
MIN_BREAK_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class Break:
    """Time left out of the picture between two drawn windows, in seconds: extrapolated (`periods` steady-state
    periods put back without simulating them, `extrapolated_s` one stage's extrapolated time) or elided (a
    simulated stretch not drawn: `periods` 0)."""

    start_s: float
    end_s: float
    periods: int = 0
    extrapolated_s: float = 0.0

    @property
    def extrapolated(self) -> bool:
        return self.extrapolated_s > 0.0

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


def _intersect(a: list[tuple[float, float, int, float]], b: list[tuple[float, float, int, float]]
               ) -> list[tuple[float, float, int, float]]:
    """Where the intervals of `a` and of `b` (each sorted, not overlapping) overlap; each keeps `a`'s periods and
    length."""
    out = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end, a[i][2], a[i][3]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def extrapolated_breaks(rows: Sequence[Row], end_s: float) -> list[Break]:
    """The stretches, in time order, when every row is inside one of its extrapolated boxes, those at least
    MIN_BREAK_SHARE of `end_s` long."""
    common: list[tuple[float, float, int, float]] | None = None
    for row in rows:
        boxes = sorted((b.start_s, b.end_s, b.periods, b.duration_s) for b in row.blocks if b.kind == EXTRAPOLATED)
        common = boxes if common is None else _intersect(common, boxes)
        if not common:
            return []
    return [Break(start, end, periods, length) for start, end, periods, length in common or []
            if end - start >= MIN_BREAK_SHARE * end_s]


def _elided(rows: Sequence[Row], end_s: float) -> list[tuple[float, float]]:
    """The start (until the last stage has run three cycles), one steady-state window of two cycles from the
    middle and the end (from three cycles before the earliest-finishing stage's last pass) of a long run, or the
    whole iteration. A cycle is a forward and a backward pass of the slowest stage (medians)."""
    whole = [(0.0, end_s)]
    if max(row.passes for row in rows) <= ELIDE_ABOVE_PASSES:
        return whole
    cycle = 0.0
    for row in rows:
        fwd = [b.duration_s for b in row.blocks if b.kind == "forward" and not b.inner]
        bwd = [b.duration_s for b in row.blocks if b.kind == "backward" and not b.inner]
        cycle = max(cycle, (statistics.median(fwd) if fwd else 0.0) + (statistics.median(bwd) if bwd else 0.0))
    first_on_last = min((b.start_s for b in rows[-1].blocks if b.kind in PASS_KINDS), default=0.0)
    head_end = first_on_last + 3 * cycle
    tail_start = min(max((b.end_s for b in row.blocks if b.kind in PASS_KINDS), default=end_s) for row in rows)
    tail_start -= 3 * cycle
    middle = (head_end + tail_start) / 2
    picked = [(0.0, head_end), (middle - cycle, middle + cycle), (tail_start, end_s)]
    shown = sum(b - a for a, b in picked)
    if cycle <= 0 or middle - cycle <= head_end + cycle or middle + cycle >= tail_start - cycle or shown > 0.7 * end_s:
        return whole
    return picked


def breaks(rows: Sequence[Row], end_s: float) -> tuple[list[tuple[float, float]], list[Break]]:
    """The windows drawn, in time order, and the breaks between them (one fewer): the extrapolated breaks where
    the run has any, else the elided ones of a long run, else the whole iteration and no break."""
    cut = extrapolated_breaks(rows, end_s)
    if cut:
        edges = [0.0, *(x for b in cut for x in (b.start_s, b.end_s)), end_s]
        return [(edges[k], edges[k + 1]) for k in range(0, len(edges), 2)], cut
    picked = _elided(rows, end_s)
    return picked, [Break(picked[k - 1][1], picked[k][0]) for k in range(1, len(picked))]


def windows(rows: Sequence[Row], end_s: float) -> list[tuple[float, float]]:
    """The time windows drawn, in seconds (`breaks` says what lies between them)."""
    return breaks(rows, end_s)[0]
