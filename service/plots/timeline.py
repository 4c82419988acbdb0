"""The pipeline timeline: one row per pipeline stage (its first data-parallel replica), time on x.

Input is the simulation's recorded spans (simcore's `Outcome.spans` when the scenario keeps spans) or a saved
Chrome trace of them, grouped into rows by service.plots.rows.

Each row draws the compute stream as one lane: one box per forward and per backward pass (the recomputation,
and the pass's exposed tensor-parallel collectives and MoE all-to-alls along its bottom, drawn inside it), the
exposed waits for pipeline, data-parallel and context-parallel communication, the optimizer, and the idle time on
pipeline dependencies, hatched white: the bubble. Two thin lanes under it show the pipeline sends and the DP/ZeRO
collectives as they run, overlapped or not. Every box carries an SVG id (`stage3-forward-mb5`, `stage3-idle-0`,
`stage3-row`) so tools and tests can read the picture back.

What the engine extrapolated instead of simulating (options.extrapolate, the default) is drawn as such, never as
work: each row's extrapolated span cross-hatched in sand (`stage3-extrapolated-0`), and the time when every stage
is in it cut out as one break labelled with the periods and the time put back (`extrapolated-1`, a legend entry of
its own). A long run simulated in full (more passes a stage than `ELIDE_ABOVE_PASSES`) is drawn in three
windows, the start, one steady-state window from the middle and the end, with the elided time marked between
them (`elided-1`); service.plots.windows picks both kinds of break. A picture that would still draw more than
`MAX_BOXES` boxes (a full-fidelity run of thousands of GPUs) is drawn binned instead (service.plots.binned): what
it costs to draw is then set by the picture's width, not by the number of spans.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from service.plots.binned import COLUMNS, draw_binned
from service.plots.rows import (
    COMPUTE,
    DP,
    EXTRAPOLATED,
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
from service.plots.style import LABELS, Figure, box_style, new_figure, seconds_label, style
from service.plots.windows import ELIDE_ABOVE_PASSES, Break, breaks, windows

__all__ = ["ELIDE_ABOVE_PASSES", "MAX_BOXES", "Block", "Row", "TimelineSpan", "rows_from_chrome_trace", "rows_of",
           "spans_from", "spans_from_chrome_trace", "timeline_figure", "timeline_rows_figure", "windows"]

# Boxes one picture draws one by one, at most; above it, binned. Each costs about a millisecond to build and save
# (the 1T example simulated period by period: 14,922 in its three windows, 17 s on the quiet 2-core development
# machine); the largest example picture, T5's timeline with its steady state extrapolated, has 2,578.
MAX_BOXES = 4_000


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


_TICK_PT = 9.0  # the tick labels' font size (the style's font.size)
_DIGIT_EM = 0.64  # DejaVu Sans: a digit is 0.636 em wide, a point narrower; labels are digits and points
_TICK_GAP_PT = 6.0  # the least room between two tick labels


def spaced(ticks: Sequence[tuple[float, str]], points_per_x: float) -> list[tuple[float, str]]:
    """The ticks, left to right, without those whose label would touch the one before (windows side by side put
    their edge ticks close: 50 at one window's end and 50.8 at the next one's start)."""
    kept: list[tuple[float, str]] = []
    right_pt = -math.inf
    for x, label in sorted(ticks):
        half_pt = len(label) * _DIGIT_EM * _TICK_PT / 2
        centre_pt = x * points_per_x
        if centre_pt - half_pt >= right_pt + _TICK_GAP_PT:
            kept.append((x, label))
            right_pt = centre_pt + half_pt
    return kept


def _gap_label(cut: Break) -> str:
    """The text on a break: what the engine extrapolated, or the simulated time not drawn."""
    if cut.extrapolated:
        periods = f"{cut.periods} periods\n" if cut.periods else ""
        return f"{periods}extrapolated\n({seconds_label(cut.extrapolated_s)})"
    return f"{seconds_label(cut.duration_s)} not drawn"


def _extrapolated_note(rows: Sequence[Row]) -> str | None:
    """A line saying what the engine extrapolated (the first row's extrapolated spans: every row has the same),
    or None when it extrapolated nothing."""
    spans = [b for b in rows[0].blocks if b.kind == EXTRAPOLATED]
    if not spans:
        return None
    periods, seconds = sum(b.periods for b in spans), sum(b.duration_s for b in spans)
    return (f"{periods} steady-state periods extrapolated ({seconds_label(seconds)} a stage), not simulated: "
            "cross-hatched, the time every stage is in them cut out")


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
    picked, cuts = breaks(rows, end_s)
    shown = sum(b - a for a, b in picked)
    # an extrapolated break is wide enough for its three lines of text; an elided one is a thin mark
    gaps = [(0.09 if cut.extrapolated else 0.03) * shown for cut in cuts]
    offsets = [0.0]
    for k in range(1, len(picked)):
        offsets.append(offsets[-1] + (picked[k - 1][1] - picked[k - 1][0]) + gaps[k - 1])
    width_x = offsets[-1] + picked[-1][1] - picked[-1][0]
    scale, unit = (1.0, "s") if end_s >= 1.0 else (1e3, "ms")
    rows_in = max(0.24, min(_ROW_IN, 9.0 / len(rows)))
    figure = new_figure(_WIDTH_IN, 1.5 + rows_in * len(rows))
    points_per_x = _WIDTH_IN * 72 * 0.86 / width_x  # the axes take about 86% of the width
    binned = _boxes(rows, picked, points_per_x, max_boxes) > max_boxes
    present = {b.kind for row in rows for b in row.blocks}
    with style():
        ax = figure.add_subplot()
        if binned:
            draw_binned(ax, rows, picked, offsets, width_x, _LANE_Y, _INNER_TP)
        else:
            for i, row in enumerate(rows):
                _draw_row(ax, i, row, picked, offsets, points_per_x)
        for k, cut in enumerate(cuts, start=1):
            left = offsets[k] - gaps[k - 1]
            band = (box_style(EXTRAPOLATED) if cut.extrapolated else
                    {"facecolor": "#EFEFEF", "edgecolor": "#9A9A9A", "hatch": "\\\\\\", "linewidth": 0.5})
            ax.add_artist(Rectangle((left, -0.1), gaps[k - 1], len(rows) + 0.2, **band,
                                    gid=f"{'extrapolated' if cut.extrapolated else 'elided'}-{k}"))
            # the extrapolated break's three short lines across it; the thin elided mark's one line along it
            turned: dict[str, Any] = {"linespacing": 1.15} if cut.extrapolated else {"rotation": 90}
            ax.text(left + gaps[k - 1] / 2, len(rows) / 2, _gap_label(cut), **turned, ha="center", va="center",
                    fontsize=7, color="#404040", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.0},
                    gid=f"{'extrapolated' if cut.extrapolated else 'elided'}-{k}-label")
        ticks = [t for k, w in enumerate(picked) for t in _ticks(w, offsets[k], scale, (w[1] - w[0]) / width_x)]
        ticks = spaced(ticks, points_per_x)
        ax.set_xticks([t[0] for t in ticks], [t[1] for t in ticks])
        ax.set_xlim(0, width_x)
        ax.set_ylim(len(rows), 0)
        ax.set_yticks([i + sum(_LANE_Y[COMPUTE]) / 2 for i in range(len(rows))],
                      [f"stage {row.stage}" for row in rows])
        ax.tick_params(axis="y", length=0)
        ax.spines["left"].set_visible(False)
        extrapolated = any(cut.extrapolated for cut in cuts)
        ax.set_xlabel(f"time ({unit})" + ("; the steady state's extrapolated periods cut out" if extrapolated else
                                          "; three windows of the iteration, the time between them left out"
                                          if cuts else ""))
        kinds = ["forward", "backward", "recompute", "tp_comm", "ep_comm", "pp_comm", "dp_comm", "cp_comm",
                 "optimizer", "idle", EXTRAPOLATED]
        kinds = [k for k in kinds if k not in ("ep_comm", "cp_comm", EXTRAPOLATED) or k in present]
        handles = [Patch(facecolor=look["facecolor"], edgecolor=look["edgecolor"], hatch=look["hatch"], label=LABELS[k])
                   for k in kinds for look in (box_style(k),)]
        figure.legend(handles=handles, loc="outside lower center",
                      ncols=len(kinds) if len(kinds) <= 8 else math.ceil(len(kinds) / 2))
        heading = title or "Pipeline timeline"
        notes = ["lanes under each stage: pipeline sends, then DP / ZeRO collectives, overlapped or not"]
        if binned:
            notes.append(f"drawn binned, too many passes to draw one by one: each of a lane's {COLUMNS} columns "
                         "shows what fills most of it")
        note = _extrapolated_note(rows)
        if note:
            notes.append(note)
        figure.suptitle("\n".join([heading, f"{subtitle}; {notes[0]}" if subtitle else notes[0], *notes[1:]]),
                        fontsize=9.5)
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
        look = box_style(block.kind)
        if block.kind in PASS_KINDS:
            look.update(edgecolor="white", linewidth=0.4)
        for k, (a, b) in enumerate(picked):
            start, end = max(block.start_s, a), min(block.end_s, b)
            if end <= start or (block.kind != "idle" and (end - start) * points_per_x < _INVISIBLE_PT):
                continue
            x = offsets[k] + start - a
            lane_top, lane_bottom = _LANE_Y[block.lane]
            if block.inner and block.kind in ("tp_comm", "ep_comm"):
                lane_top = lane_bottom - _INNER_TP * (lane_bottom - lane_top)
            ax.add_artist(Rectangle((x, i + lane_top), end - start, lane_bottom - lane_top, **look,
                                    gid=gid + (f"-w{k}" if len(picked) > 1 else "")))
            if block.kind in PASS_KINDS and block.microbatch is not None:
                text = str(block.microbatch)
                if (end - start) * points_per_x >= 0.62 * _LABEL_PT * len(text) + 2:
                    ax.text(x + (end - start) / 2, i + top + (1 - _INNER_TP) * (bottom - top) / 2, text,
                            ha="center", va="center", fontsize=_LABEL_PT,
                            color="black" if block.kind == "forward" else "white", clip_on=True)
