"""Pictures of results (matplotlib, deterministic SVG or PNG): the pipeline timeline, where the time goes, memory
per stage, candidates side by side and sweeps. The CLI, the Python API and the HTTP service draw with these same
functions.

The names are imported on first use (PEP 562), so that importing the package, or its matplotlib-free names
(`KINDS`, `NEEDS_SPANS`, `FORMATS`, `format_of` from service.plots.kinds), does not import matplotlib.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.plots.charts import (
        breakdown_figure,
        comparison_figure,
        memory_figure,
        sweep_figure,
        sweep_rows_figure,
    )
    from service.plots.kinds import FORMATS, KINDS, NEEDS_SPANS, format_of
    from service.plots.pictures import describe, result_figure, summary
    from service.plots.ranking import search_figure
    from service.plots.stored import draw_stored
    from service.plots.style import Figure, render, save
    from service.plots.timeline import (
        TimelineSpan,
        rows_from_chrome_trace,
        rows_of,
        spans_from,
        spans_from_chrome_trace,
        timeline_figure,
        timeline_rows_figure,
    )

_HOMES = {
    "charts": ("breakdown_figure", "comparison_figure", "memory_figure", "sweep_figure", "sweep_rows_figure"),
    "kinds": ("FORMATS", "KINDS", "NEEDS_SPANS", "format_of"),
    "pictures": ("describe", "result_figure", "summary"),
    "ranking": ("search_figure",),
    "stored": ("draw_stored",),
    "style": ("Figure", "render", "save"),
    "timeline": ("TimelineSpan", "rows_from_chrome_trace", "rows_of", "spans_from", "spans_from_chrome_trace",
                 "timeline_figure", "timeline_rows_figure"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = ["FORMATS", "KINDS", "NEEDS_SPANS", "Figure", "TimelineSpan", "breakdown_figure", "comparison_figure",
           "describe", "draw_stored", "format_of", "memory_figure", "render", "result_figure", "rows_from_chrome_trace",
           "rows_of", "save", "search_figure", "spans_from", "spans_from_chrome_trace", "summary", "sweep_figure",
           "sweep_rows_figure", "timeline_figure", "timeline_rows_figure"]


def __getattr__(name: str) -> Any:
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'service.plots' has no attribute '{name}'")
    value = getattr(importlib.import_module(f"service.plots.{module}"), name)
    globals()[name] = value
    return value
