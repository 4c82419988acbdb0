"""The pipeline timeline: one row per pipeline stage (its first data-parallel replica), time on x.

Input is the simulation's recorded spans (simcore's `Outcome.spans` when the scenario keeps spans) or a saved
Chrome trace of them, grouped into rows by service.plots.rows.

Each row draws the compute stream as one lane: one box per forward and per backward pass (the recomputation
and the pass's exposed tensor-parallel collectives drawn inside it), the exposed waits for pipeline and
data-parallel communication, the optimizer, and the idle time on pipeline dependencies, hatched white: the
bubble. Two thin lanes under it show the pipeline sends and the DP/ZeRO collectives as they run, overlapped or
not. Every box carries an SVG id (`stage3-forward-mb5`, `stage3-idle-0`, `stage3-row`) so tools and tests can
read the picture back.

Long runs (more passes a stage than `ELIDE_ABOVE_PASSES`) are drawn in three windows, the start (the pipeline
filling), one steady-state window from the middle and the end (draining, gradient reduction, optimizer), with
the elided time marked between them. A picture that would still draw more than `MAX_BOXES` boxes (a
full-fidelity run of thousands of GPUs) is drawn binned instead (service.plots.binned): what it costs to draw
is then set by the picture's width, not by the number of spans.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from service.plots.binned import COLUMNS, draw_binned
from service.plots.rows import (
    COMPUTE,
    DP,
    PASS_KINDS,
    PP,
    Block,
    Row,
    TimelineSpan,
    rows_from_chrome_trace,
    rows_of,
    spans_from,
    spans_from_chrome_trace,
)
from service.plots.style import COLOURS, IDLE_HATCH, LABELS, Figure, new_figure, seconds_label, style

__all__ = ["ELIDE_ABOVE_PASSES", "MAX_BOXES", "Block", "Row", "TimelineSpan", "rows_from_chrome_trace", "rows_of",
           "spans_from", "spans_from_chrome_trace", "timeline_figure", "timeline_rows_figure", "windows"]

ELIDE_ABOVE_PASSES = 96  # passes a stage; above it the picture shows three windows (about 40 boxes each)
# Boxes one picture draws one by one, at most; above it, binned. Each costs about a millisecond to build and save
# (the 1T example's 14,922, in its three windows, took 17 s on the quiet 2-core development machine); the largest
# example picture, T5's timeline, has 3,701.
MAX_BOXES = 4_000


def windows(rows: Sequence[Row], end_s: float) -> list[tuple[float, float]]:
    """The time windows drawn, in seconds: the whole iteration, or for long runs the start (until the last stage
    has run three cycles), one steady-state window of two cycles from the middle, and the end (from three
    cycles before the earliest-finishing stage's last pass). A cycle is a forward and a backward pass of the
    slowest stage (medians)."""
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


# Lanes of a row, as (top, bottom) offsets within the row's unit height (the y axis points down).
_LANE_Y = {COMPUTE: (0.05, 0.60), PP: (0.64, 0.76), DP: (0.80, 0.92)}
_INNER_TP = 0.35  # the tensor-parallel strip: this fraction of the compute lane, at its bottom
_WIDTH_IN, _ROW_IN = 11.0, 0.5
_LABEL_PT = 6.5
_INVISIBLE_PT = 0.05  # boxes narrower than this (in points) are not drawn, idle excepted: no pixel would show


def _gid(stage: int, block: Block, serial: int) -> str:
    if block.kind in PASS_KINDS or block.kind == "recompute":
        return f"stage{stage}-{block.kind}-mb{block.microbatch}" + (f"-c{block.chunk}" if block.chunk else "")
    return f"stage{stage}-{block.kind}-{serial}"


def _ticks(window: tuple[float, float], offset: float, scale: float, share: float) -> list[tuple[float, str]]:
    """Ticks of one window, as (x, label): about one per tenth of the picture's width the window takes."""
    start, end = window
    values = [v for v in MaxNLocator(nbins=max(1, min(6, round(share * 10)))).tick_values(start, end)
              if start <= v <= end]
    if not values:  # a narrow window: one tick in its middle, precise enough to tell it from its neighbours
        values = [(start + end) / 2]
    digits = max(0, -math.floor(math.log10(max((end - start) * scale, 1e-12))) + 1)
    return [(offset + v - start, f"{v * scale:.{digits}f}" if len(values) == 1 and share < 0.1 else f"{v * scale:g}")
            for v in values]


def timeline_figure(spans: Iterable[TimelineSpan], *, iteration_time_s: float | None = None,
                    title: str | None = None, subtitle: str | None = None) -> Figure:
    """The pipeline timeline of one iteration. `iteration_time_s` is the row length (default: the last span's
    end); rows shorter than it end in blank space."""
    spans = list(spans)
    rows = rows_of(spans)
    end_s = iteration_time_s if iteration_time_s is not None else max(s.end_s for s in spans)
    return timeline_rows_figure(rows, iteration_time_s=end_s, title=title, subtitle=subtitle)


def timeline_rows_figure(rows: Sequence[Row], *, iteration_time_s: float | None = None, title: str | None = None,
                         subtitle: str | None = None, max_boxes: int = MAX_BOXES) -> Figure:
    """The pipeline timeline of rows (service.plots.rows); `iteration_time_s` as for `timeline_figure` (default:
    the last box's end). Drawn binned when it would draw more than `max_boxes` boxes."""
    if not rows:
        raise ValueError("no span belongs to a pipeline stage (tracks named 'stage N')")
    end_s = iteration_time_s if iteration_time_s is not None else max(
        (b.end_s for row in rows for b in row.blocks), default=0.0)
    picked = windows(rows, end_s)
    shown = sum(b - a for a, b in picked)
    gap = 0.03 * shown if len(picked) > 1 else 0.0
    offsets = []
    x = 0.0
    for a, b in picked:
        offsets.append(x)
        x += (b - a) + gap
    width_x = x - gap
    scale, unit = (1.0, "s") if end_s >= 1.0 else (1e3, "ms")
    rows_in = max(0.24, min(_ROW_IN, 9.0 / len(rows)))
    figure = new_figure(_WIDTH_IN, 1.5 + rows_in * len(rows))
    points_per_x = _WIDTH_IN * 72 * 0.86 / width_x  # the axes take about 86% of the width
    binned = _boxes(rows, picked, points_per_x, max_boxes) > max_boxes
    with style():
        ax = figure.add_subplot()
        if binned:
            draw_binned(ax, rows, picked, offsets, width_x, _LANE_Y, _INNER_TP)
        else:
            for i, row in enumerate(rows):
                _draw_row(ax, i, row, picked, offsets, points_per_x)
        for k in range(1, len(picked)):
            left = offsets[k] - gap
            elided = picked[k][0] - picked[k - 1][1]
            ax.add_artist(Rectangle((left, -0.1), gap, len(rows) + 0.2, facecolor="#EFEFEF", edgecolor="#9A9A9A",
                                   hatch="\\\\\\", linewidth=0.5, gid=f"elided-{k}"))
            ax.text(left + gap / 2, len(rows) / 2, f"{seconds_label(elided)} not drawn", rotation=90,
                    ha="center", va="center", fontsize=7, color="#404040",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0})
        ticks = [t for k, w in enumerate(picked) for t in _ticks(w, offsets[k], scale, (w[1] - w[0]) / width_x)]
        ax.set_xticks([t[0] for t in ticks], [t[1] for t in ticks])
        ax.set_xlim(0, width_x)
        ax.set_ylim(len(rows), 0)
        ax.set_yticks([i + sum(_LANE_Y[COMPUTE]) / 2 for i in range(len(rows))],
                      [f"stage {row.stage}" for row in rows])
        ax.tick_params(axis="y", length=0)
        ax.spines["left"].set_visible(False)
        ax.set_xlabel(f"time ({unit})" + ("; three windows of the iteration, the time between them left out"
                                          if len(picked) > 1 else ""))
        kinds = ["forward", "backward", "recompute", "tp_comm", "pp_comm", "dp_comm", "optimizer", "idle"]
        handles = [Patch(facecolor=COLOURS[k], edgecolor="#9A9A9A" if k == "idle" else "none",
                         hatch=IDLE_HATCH if k == "idle" else None, label=LABELS[k]) for k in kinds]
        figure.legend(handles=handles, loc="outside lower center", ncols=len(kinds))
        heading = title or "Pipeline timeline"
        note = "lanes under each stage: pipeline sends, then DP / ZeRO collectives, overlapped or not"
        if binned:
            note += (f"\ndrawn binned, too many passes to draw one by one: each of a lane's {COLUMNS} columns shows "
                     "what fills most of it")
        figure.suptitle(heading + "\n" + (f"{subtitle}; {note}" if subtitle else note), fontsize=9.5)
    return figure


def _boxes(rows: Sequence[Row], picked: list[tuple[float, float]], points_per_x: float, stop: int) -> int:
    """How many boxes `_draw_row` would draw for these rows and windows (those wide enough to show), counted up
    to `stop` and no further."""
    count = 0
    for row in rows:
        for block in row.blocks:
            for a, b in picked:
                width = min(block.end_s, b) - max(block.start_s, a)
                if width > 0 and (block.kind == "idle" or width * points_per_x >= _INVISIBLE_PT):
                    count += 1
        if count > stop:
            break
    return count


def _draw_row(ax: Any, i: int, row: Row, picked: list[tuple[float, float]], offsets: list[float],
              points_per_x: float) -> None:
    top, bottom = _LANE_Y[COMPUTE]
    ax.add_artist(Rectangle((offsets[0], i + top), offsets[-1] + picked[-1][1] - picked[-1][0] - offsets[0],
                           bottom - top, facecolor="#F4F4F4", edgecolor="none", gid=f"stage{row.stage}-row"))
    serial: dict[str, int] = {}
    for block in row.blocks:
        n = serial[block.kind] = serial.get(block.kind, -1) + 1
        gid = _gid(row.stage, block, n)
        for k, (a, b) in enumerate(picked):
            start, end = max(block.start_s, a), min(block.end_s, b)
            if end <= start or (block.kind != "idle" and (end - start) * points_per_x < _INVISIBLE_PT):
                continue
            x = offsets[k] + start - a
            lane_top, lane_bottom = _LANE_Y[block.lane]
            if block.inner and block.kind == "tp_comm":
                lane_top = lane_bottom - _INNER_TP * (lane_bottom - lane_top)
            idle = block.kind == "idle"
            ax.add_artist(Rectangle(
                (x, i + lane_top), end - start, lane_bottom - lane_top, facecolor=COLOURS.get(block.kind, "#D9D9D9"),
                edgecolor="#9A9A9A" if idle else ("white" if block.kind in PASS_KINDS else "none"),
                linewidth=0.4 if idle or block.kind in PASS_KINDS else 0.0, hatch=IDLE_HATCH if idle else None,
                gid=gid + (f"-w{k}" if len(picked) > 1 else "")))
            if block.kind in PASS_KINDS and block.microbatch is not None:
                text = str(block.microbatch)
                if (end - start) * points_per_x >= 0.62 * _LABEL_PT * len(text) + 2:
                    ax.text(x + (end - start) / 2, i + top + (1 - _INNER_TP) * (bottom - top) / 2, text,
                            ha="center", va="center", fontsize=_LABEL_PT,
                            color="black" if block.kind == "forward" else "white", clip_on=True)
