"""The look shared by every picture (colours, fonts) and deterministic rendering to SVG or PNG bytes.

Figures are built on `matplotlib.figure.Figure` directly, never through pyplot: no global figure registry, and
no backend is switched for a caller (a notebook keeps its own); saving to SVG or PNG uses matplotlib's file
renderers (Agg for PNG). They are saved with a fixed SVG hash salt and no dates in the metadata, so the same
figure gives the same bytes. Colours are the Okabe-Ito palette (Okabe & Ito 2008, "Color Universal Design"),
told apart with the common forms of colour blindness.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from service.plots.kinds import FORMATS, format_of

__all__ = ["COLOURS", "EXTRAPOLATED_EDGE", "EXTRAPOLATED_HATCH", "FORMATS", "IDLE_HATCH", "LABELS", "Figure",
           "box_style", "format_of", "new_figure", "render", "save", "seconds_label", "style"]

# One colour per kind of span or time category, the same in every picture.
COLOURS: dict[str, str] = {
    "forward": "#56B4E9",  # sky blue
    "backward": "#0072B2",  # blue
    "compute": "#0072B2",
    "recompute": "#E69F00",  # orange
    "tp_comm": "#CC79A7",  # reddish purple
    "pp_comm": "#009E73",  # bluish green
    "dp_comm": "#D55E00",  # vermillion
    "cp_comm": "#F0E442",  # yellow
    "ep_comm": "#882255",  # wine (Tol's muted scheme), an eighth colour
    "optimizer": "#8C8C8C",  # grey
    "bubble": "#FFFFFF",  # idle is white space, hatched so it reads as a span
    "idle": "#FFFFFF",
    "other": "#D9D9D9",
    # the steady state the engine extrapolated (not simulated): sand, cross-hatched in brown, a colour and a hatch
    # no kind of work or wait has
    "extrapolated": "#F3EBD8",
    "weights": "#0072B2",
    "gradients": "#56B4E9",
    "optimizer_states": "#009E73",
    "activations": "#E69F00",
    "buffers": "#CC79A7",
}
IDLE_HATCH = "////"
EXTRAPOLATED_HATCH = "xx"
EXTRAPOLATED_EDGE = "#8C7350"
LABELS: dict[str, str] = {
    "forward": "forward",
    "backward": "backward",
    "compute": "compute",
    "recompute": "recompute",
    "tp_comm": "TP comm.",
    "pp_comm": "PP comm.",
    "dp_comm": "DP / ZeRO comm.",
    "cp_comm": "CP comm.",
    "ep_comm": "EP comm.",
    "optimizer": "optimizer",
    "bubble": "bubble (idle)",
    "idle": "idle (bubble)",
    "other": "other",
    "extrapolated": "extrapolated, not simulated",
    "weights": "weights",
    "gradients": "gradients",
    "optimizer_states": "optimizer states",
    "activations": "activations",
    "buffers": "buffers",
}
PNG_DPI = 150

_RC: dict[str, Any] = {
    "font.family": "DejaVu Sans",  # shipped with matplotlib: the same glyph metrics on every machine
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.labelsize": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8.0,
    "legend.frameon": False,
    "hatch.linewidth": 0.6,
    "hatch.color": "#9A9A9A",
    "svg.fonttype": "none",  # text stays text: small files, searchable labels
    "svg.hashsalt": "clustersim",  # fixed ids in the SVG
    "path.simplify": False,  # every span drawn as given
}


# matplotlib's settings are one process-wide dictionary that rc_context changes and restores: threads drawing
# at once (a threaded server) take turns, so that none restores the defaults under another's picture.
_SETTINGS_LOCK = threading.RLock()


@contextmanager
def style() -> Iterator[None]:
    """The project's matplotlib settings, for building and for saving a figure (one thread at a time)."""
    with _SETTINGS_LOCK, matplotlib.rc_context(_RC):  # type: ignore[arg-type]  # keys checked at run time
        yield


def new_figure(width_in: float, height_in: float) -> Figure:
    with style():
        return Figure(figsize=(width_in, height_in), layout="constrained")


def render(figure: Figure, fmt: str) -> bytes:
    """The figure as SVG or PNG bytes; the same figure gives the same bytes (no dates, fixed ids)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not '{fmt}'")
    metadata: dict[str, Any] = ({"Date": None, "Creator": "clustersim"} if fmt == "svg"
                                else {"Software": "clustersim"})
    out = io.BytesIO()
    with style():
        figure.savefig(out, format=fmt, metadata=metadata, dpi=PNG_DPI)
    return out.getvalue()


def save(figure: Figure, path: str | os.PathLike[str]) -> None:
    """Write the figure to `path`, its format from the suffix."""
    data = render(figure, format_of(path))
    Path(path).write_bytes(data)


def box_style(kind: str) -> dict[str, Any]:
    """A timeline box's look by kind (matplotlib patch keywords): idle white, hatched grey; extrapolated sand,
    cross-hatched; any other kind its colour, without an edge."""
    if kind == "idle":
        return {"facecolor": COLOURS["idle"], "edgecolor": "#9A9A9A", "linewidth": 0.4, "hatch": IDLE_HATCH}
    if kind == "extrapolated":
        return {"facecolor": COLOURS["extrapolated"], "edgecolor": EXTRAPOLATED_EDGE, "linewidth": 0.4,
                "hatch": EXTRAPOLATED_HATCH}
    return {"facecolor": COLOURS.get(kind, COLOURS["other"]), "edgecolor": "none", "linewidth": 0.0, "hatch": None}


def seconds_label(seconds: float) -> str:
    """A duration for a picture: '450 ms', '12.3 s', '85 µs'."""
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} µs"
