"""Pictures of results (matplotlib, deterministic SVG or PNG): the pipeline timeline, where the time goes, memory
per stage, candidates side by side and sweeps. The CLI, the Python API and (later) the HTTP service draw with
these same functions."""

from service.plots.charts import breakdown_figure, comparison_figure, memory_figure, sweep_figure, sweep_rows_figure
from service.plots.pictures import KINDS, NEEDS_SPANS, describe, result_figure, summary
from service.plots.ranking import search_figure
from service.plots.style import FORMATS, Figure, format_of, render, save
from service.plots.timeline import TimelineSpan, rows_of, spans_from, spans_from_chrome_trace, timeline_figure

__all__ = ["FORMATS", "KINDS", "NEEDS_SPANS", "Figure", "TimelineSpan", "breakdown_figure", "comparison_figure",
           "describe", "format_of", "memory_figure", "render", "result_figure", "rows_of", "save", "search_figure",
           "spans_from", "spans_from_chrome_trace", "summary", "sweep_figure", "sweep_rows_figure", "timeline_figure"]
