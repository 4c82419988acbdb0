"""The pipeline timeline drawn binned: for pictures with more boxes than can be drawn one by one (a full-fidelity
run of thousands of GPUs has hundreds of thousands), each lane of each row is cut into `COLUMNS` equal columns
across the picture, each column takes the kind that covers most of it (none where less than half of it is
covered), and neighbouring columns of one kind are one box. What it costs to draw is set by the number
of rows and columns, not by the number of spans; what it costs to bin is one sort of each kind's boxes.

A row has four layers, as the box-by-box picture (service.plots.timeline) draws them: the compute lane (passes,
exposed waits, optimizer, idle; the recomputation inside a backward pass takes its place there, as it is drawn
over it), the strip of tensor-parallel collectives and MoE all-to-alls along the compute lane's bottom, and the pp
and dp lanes under it. Boxes of a
kind are drawn as one path with the SVG id `binned-LAYER-KIND` (`binned-compute-idle`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.patches import PathPatch, Rectangle
from matplotlib.path import Path

from service.plots.rows import COMPUTE, DP, EXTRAPOLATED, PP, Row
from service.plots.style import box_style

__all__ = ["COLUMNS", "LAYERS", "Run", "binned_runs", "draw_binned"]

COLUMNS = 1400  # about the PNG's pixels across the axes (11 in x 86% at 150 dpi)
_MAIN = ("forward", "backward", "recompute", "idle", "pp_comm", "dp_comm", "cp_comm", "optimizer", EXTRAPOLATED,
         "other")
_STRIP = ("tp_comm", "ep_comm")  # the collectives of a pass, along the bottom of its box
LAYERS: dict[str, tuple[str, ...]] = {COMPUTE: _MAIN, "tp": _STRIP, PP: ("pp_comm",), DP: ("dp_comm",)}


@dataclass(frozen=True, slots=True)
class Run:
    """Neighbouring columns of one layer of one row that show one kind, drawn as one box: the row's index (top
    row 0), the layer (a key of LAYERS), the kind and the box's left and right edges in the picture's x units
    (seconds of the drawn windows laid side by side)."""

    row: int
    layer: str
    kind: str
    x0: float
    x1: float


def _layer(lane: str, kind: str, inner: bool) -> str:
    """The layer a box is binned in: an inner recompute is drawn in the compute lane over its pass, an inner
    TP collective or MoE all-to-all along the lane's bottom."""
    if inner:
        return "tp" if kind in _STRIP else COMPUTE
    return lane


_PAIRS = [(layer, kind) for layer, kinds in LAYERS.items() for kind in kinds]
_PAIR_OF = {(lane, kind, inner): _PAIRS.index((_layer(lane, kind, inner), kind))
            for lane, kind, inner in itertools.product((COMPUTE, PP, DP), _MAIN + _STRIP, (False, True))
            if (_layer(lane, kind, inner), kind) in _PAIRS}  # (lane, kind, inner) of a Block -> its index in _PAIRS


def _coverage(x0: np.ndarray, x1: np.ndarray, columns: int) -> np.ndarray:
    """How much of each unit column [c, c + 1) the intervals [x0, x1) cover, summed (overlaps count twice).

    The covered length left of u is G(u) = sum over intervals of clip(u - x0, 0, x1 - x0), the same as
    (u n0 - S0) - (u n1 - S1) with n0, S0 the count and sum of the starts left of u (and n1, S1 of the ends);
    a column's coverage is G(c + 1) - G(c).
    """
    u = np.arange(columns + 1, dtype=float)
    total = np.zeros(columns + 1)
    for edges, sign in ((np.sort(x0), 1.0), (np.sort(x1), -1.0)):
        sums = np.concatenate(([0.0], np.cumsum(edges)))
        n = np.searchsorted(edges, u, side="left")
        total += sign * (u * n - sums[n])
    return np.diff(total)


def binned_runs(rows: Sequence[Row], picked: Sequence[tuple[float, float]], offsets: Sequence[float],
                width_x: float, columns: int = COLUMNS) -> list[Run]:
    """The boxes of the binned picture: `picked` are the drawn windows in seconds, `offsets` where each starts
    on the x axis and `width_x` the axis' length (as service.plots.timeline lays them out)."""
    column_x = width_x / columns
    runs: list[Run] = []
    for i, row in enumerate(rows):
        if not row.blocks:
            continue
        lanes, kinds, starts, ends, _, _, inner, _ = zip(*row.blocks, strict=True)
        pairs = np.array([_PAIR_OF.get(key, -1) for key in zip(lanes, kinds, inner, strict=True)])
        start, end = np.array(starts), np.array(ends)
        offset = 0
        for layer, kinds_drawn in LAYERS.items():
            cover = np.zeros((len(kinds_drawn), columns))
            for k in range(len(kinds_drawn)):
                chosen = pairs == offset + k
                if chosen.any():
                    cover[k] = _covered(start[chosen], end[chosen], picked, offsets, column_x, columns)
            offset += len(kinds_drawn)
            if layer == COMPUTE:  # the recomputation is drawn over the pass it belongs to
                left = cover[_MAIN.index("recompute")].copy()
                for kind in ("backward", "forward"):
                    taken = np.minimum(cover[_MAIN.index(kind)], left)
                    cover[_MAIN.index(kind)] -= taken
                    left -= taken
            shown = np.where(cover.sum(axis=0) >= 0.5, np.argmax(cover, axis=0), -1)
            cuts = np.flatnonzero(np.diff(shown)) + 1
            for first, last in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [columns])), strict=True):
                if shown[first] >= 0:
                    runs.append(Run(i, layer, kinds_drawn[shown[first]], float(first * column_x),
                                    float(last * column_x)))
    return runs


def _covered(start: np.ndarray, end: np.ndarray, picked: Sequence[tuple[float, float]],
             offsets: Sequence[float], column_x: float, columns: int) -> np.ndarray:
    """Each column's covered share by boxes from `start` to `end` (seconds), clipped to the drawn windows."""
    x0s, x1s = [], []
    for (a, b), offset in zip(picked, offsets, strict=True):
        lo, hi = np.maximum(start, a), np.minimum(end, b)
        keep = hi > lo
        x0s.append((offset + lo[keep] - a) / column_x)
        x1s.append((offset + hi[keep] - a) / column_x)
    x0, x1 = np.clip(np.concatenate(x0s), 0, columns), np.clip(np.concatenate(x1s), 0, columns)
    return _coverage(x0, x1, columns)


def draw_binned(ax: Any, rows: Sequence[Row], picked: Sequence[tuple[float, float]], offsets: Sequence[float],
                width_x: float, lane_y: Mapping[str, tuple[float, float]], inner_tp: float,
                columns: int = COLUMNS) -> None:
    """Draw `binned_runs` on `ax`: each row's grey compute lane (`stageS-row`), then one path per layer and
    kind. `lane_y` gives each lane's top and bottom within a row, `inner_tp` the TP strip's share of the compute
    lane."""
    top, bottom = lane_y[COMPUTE]
    right = offsets[-1] + picked[-1][1] - picked[-1][0]
    for i, row in enumerate(rows):
        ax.add_artist(Rectangle((offsets[0], i + top), right - offsets[0], bottom - top, facecolor="#F4F4F4",
                                edgecolor="none", gid=f"stage{row.stage}-row"))
    boxes: dict[tuple[str, str], list[list[tuple[float, float]]]] = {}
    for run in binned_runs(rows, picked, offsets, width_x, columns):
        lane_top, lane_bottom = lane_y[COMPUTE if run.layer == "tp" else run.layer]
        if run.layer == "tp":
            lane_top = lane_bottom - inner_tp * (lane_bottom - lane_top)
        y0, y1 = run.row + lane_top, run.row + lane_bottom
        boxes.setdefault((run.layer, run.kind), []).append([(run.x0, y0), (run.x0, y1), (run.x1, y1), (run.x1, y0)])
    for layer, kinds in LAYERS.items():
        for kind in kinds:
            if (layer, kind) not in boxes:
                continue
            # One compound path per kind: a renderer fills (and hatches) it once, where a collection of the same
            # boxes costs a fill each (the 1T example's 1,800 hatched idle boxes took 2 s more)
            ax.add_artist(PathPatch(Path.make_compound_path_from_polys(np.array(boxes[layer, kind])),
                                    **box_style(kind), gid=f"binned-{layer}-{kind}"))
