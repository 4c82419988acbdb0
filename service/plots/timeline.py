"""The pipeline timeline: one row per pipeline stage (its first data-parallel replica), time on x.

Input is the simulation's recorded spans (simcore's `Outcome.spans` when the scenario keeps spans) or a saved
Chrome trace of them. The engine names its tracks `stage S` (the compute stream), `stage S pp` (sends to the
next or previous stage) and `stage S dp` / `stage S gather` (DP and ZeRO collectives); under full fidelity
each replica's compute and collective tracks carry its number (`stage S dpR`, `stage S gatherR`).

Each row draws the compute stream as one lane: one box per forward and per backward pass (the recomputation
and the pass's exposed tensor-parallel collectives drawn inside it), the exposed waits for pipeline and
data-parallel communication, the optimizer, and the idle time on pipeline dependencies, hatched white: the
bubble. Two thin lanes under it show the pipeline sends and the DP/ZeRO collectives as they run, overlapped or
not. Every box carries an SVG id (`stage3-forward-mb5`, `stage3-idle-0`, `stage3-row`) so tools and tests can
read the picture back.

Long runs (more passes a stage than `ELIDE_ABOVE_PASSES`) are drawn in three windows, the start (the pipeline
filling), one steady-state window from the middle and the end (draining, gradient reduction, optimizer), with
the elided time marked between them.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import MaxNLocator

from service.plots.style import COLOURS, IDLE_HATCH, LABELS, Figure, new_figure, seconds_label, style

__all__ = ["ELIDE_ABOVE_PASSES", "Block", "Row", "TimelineSpan", "rows_of", "spans_from", "spans_from_chrome_trace",
           "timeline_figure", "windows"]

ELIDE_ABOVE_PASSES = 96  # passes a stage; above it the picture shows three windows (about 40 boxes each)
COMPUTE, PP, DP = "compute", "pp", "dp"
PASS_KINDS = ("forward", "backward")

_TRACK = re.compile(r"^stage (\d+)(?: (pp|dp|gather)(\d*))?$")
_PASS = re.compile(r"^(?:(tp recompute|recompute|tp) )?(fwd|bwd)\S* mb(\d+)(?: chunk(\d+))?(?: part \d+)?$")
_ON_COMPUTE = {"bubble": "idle", "pp_comm": "pp_comm", "dp_comm": "dp_comm", "optimizer": "optimizer"}


@dataclass(frozen=True, slots=True)
class TimelineSpan:
    """One recorded span: its track (e.g. 'stage 3'), name, category and start and end in seconds."""

    track: str
    name: str
    category: str
    start_s: float
    end_s: float


def spans_from(spans: Iterable[Any]) -> list[TimelineSpan]:
    """Spans from any objects with the recorder's fields (simcore's Outcome.spans)."""
    return [TimelineSpan(s.track, s.name, s.category, float(s.start_s), float(s.end_s)) for s in spans]


def spans_from_chrome_trace(trace: Any) -> list[TimelineSpan]:
    """Spans from a Chrome trace (the object with `traceEvents`, or the bare event list) as clustersim writes
    it: complete ('X') events, microsecond times, thread names as tracks. ValueError says what is wrong."""
    events = trace.get("traceEvents") if isinstance(trace, Mapping) else trace
    if not isinstance(events, list):
        raise ValueError("not a Chrome trace: expected an object with a traceEvents list")
    names: dict[tuple[Any, Any], str] = {}
    for event in events:
        if isinstance(event, Mapping) and event.get("ph") == "M" and event.get("name") == "thread_name":
            names[(event.get("pid"), event.get("tid"))] = str((event.get("args") or {}).get("name", ""))
    spans = []
    for i, event in enumerate(events):
        if not isinstance(event, Mapping) or event.get("ph") != "X":
            continue
        ts, dur = event.get("ts"), event.get("dur")
        if not isinstance(ts, int | float) or not isinstance(dur, int | float) or dur < 0:
            raise ValueError(f"traceEvents[{i}]: a complete event needs numbers ts and dur >= 0")
        track = names.get((event.get("pid"), event.get("tid")), f"thread {event.get('tid')}")
        spans.append(TimelineSpan(track, str(event.get("name", "")), str(event.get("cat", "")),
                                  ts * 1e-6, (ts + dur) * 1e-6))
    if not spans:
        raise ValueError("the trace has no complete ('X') events to draw")
    return spans


@dataclass(frozen=True, slots=True)
class Block:
    """One box of the picture: a lane ('compute', 'pp', 'dp'), a kind (forward, backward, recompute, tp_comm,
    pp_comm, dp_comm, optimizer, idle, other), seconds, and the pass's microbatch and model chunk."""

    lane: str
    kind: str
    start_s: float
    end_s: float
    microbatch: int | None = None
    chunk: int = 0
    inner: bool = False  # drawn inside its pass's box

    @property
    def duration_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class Row:
    """One pipeline stage's boxes."""

    stage: int
    blocks: tuple[Block, ...]

    def count(self, kind: str) -> int:
        return sum(1 for b in self.blocks if b.kind == kind and not b.inner)

    @property
    def passes(self) -> int:
        return self.count("forward") + self.count("backward")

    @property
    def idle_s(self) -> float:
        return sum(b.duration_s for b in self.blocks if b.kind == "idle")


def _lane(span: TimelineSpan, tracks: dict[str, tuple[int, str | None, str] | None]) -> tuple[int, str] | None:
    """(stage, lane) of the span, or None for a track that is not drawn (another replica, not a stage).
    `tracks` caches each track name's parse."""
    if span.track not in tracks:
        match = _TRACK.match(span.track)
        tracks[span.track] = None if match is None else (int(match[1]), match[2], match[3])
    parsed = tracks[span.track]
    if parsed is None:
        return None
    stage, kind, replica = parsed
    if kind is None:
        return stage, COMPUTE
    if kind == PP:
        return stage, PP
    if replica not in ("", "0"):
        return None
    if kind == "gather" or replica == "":
        return stage, DP
    # Under full fidelity `stage S dp0` names both replica 0's compute stream and its gradient stream; the
    # compute stream's DP spans are its waits.
    stream = span.category == "dp_comm" and not span.name.startswith("wait")
    return stage, DP if stream else COMPUTE


def _pass_of(name: str) -> tuple[str, int, int] | None:
    """(direction 'fwd' or 'bwd', microbatch, chunk) of a span that is part of a pass, from its name."""
    match = _PASS.match(name)
    return None if match is None else (match[2], int(match[3]), int(match[4] or 0))


def rows_of(spans: Iterable[TimelineSpan]) -> list[Row]:
    """The stages' boxes, from the recorded spans, stage 0 first. ValueError when no span is a stage's."""
    lanes: dict[int, dict[str, list[TimelineSpan]]] = {}
    tracks: dict[str, tuple[int, str | None, str] | None] = {}
    for span in spans:
        where = _lane(span, tracks)
        if where is not None:
            lanes.setdefault(where[0], {COMPUTE: [], PP: [], DP: []})[where[1]].append(span)
    if not lanes:
        raise ValueError("no span belongs to a pipeline stage (tracks named 'stage N')")
    names: dict[str, tuple[str, int, int] | None] = {}  # span names repeat across stages: parse each once
    rows = []
    for stage in sorted(lanes):
        blocks: list[Block] = []
        passes: dict[tuple[str, int, int], list[TimelineSpan]] = {}
        for span in sorted(lanes[stage][COMPUTE], key=lambda s: (s.start_s, s.end_s)):
            if span.name not in names:
                names[span.name] = _pass_of(span.name)
            key = names[span.name]
            if key is not None:
                passes.setdefault(key, []).append(span)
            else:
                blocks.append(Block(COMPUTE, _ON_COMPUTE.get(span.category, "other"), span.start_s, span.end_s))
        for (direction, microbatch, chunk), parts in passes.items():
            kind = "forward" if direction == "fwd" else "backward"
            blocks.append(Block(COMPUTE, kind, min(p.start_s for p in parts), max(p.end_s for p in parts),
                                microbatch, chunk))
            blocks.extend(Block(COMPUTE, p.category, p.start_s, p.end_s, microbatch, chunk, inner=True)
                          for p in parts if p.category in ("recompute", "tp_comm"))
        for lane, kind in ((PP, "pp_comm"), (DP, "dp_comm")):
            blocks.extend(Block(lane, kind, s.start_s, s.end_s) for s in lanes[stage][lane])
        blocks.sort(key=lambda b: (b.start_s, b.inner, b.end_s, b.lane, b.kind))
        rows.append(Row(stage, tuple(blocks)))
    return rows


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
    with style():
        ax = figure.add_subplot()
        points_per_x = _WIDTH_IN * 72 * 0.86 / width_x  # the axes take about 86% of the width
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
        figure.suptitle(heading + "\n" + (f"{subtitle}; {note}" if subtitle else note), fontsize=9.5)
    return figure


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
