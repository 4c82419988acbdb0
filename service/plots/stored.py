"""Pictures of a stored result, as the service keeps it: the canonical request JSON, the result JSON and, for the
timeline, the simulation's Chrome trace compressed (gzip, or zlib in stores written before). One figure is
built and saved in each format asked for, each given as soon as it is saved."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator, Sequence

from api_schemas import SimulationRequest
from service.plots.kinds import FORMATS, KINDS, NEEDS_SPANS
from service.plots.pictures import result_figure
from service.plots.ranking import search_figure
from service.plots.rows import Block, Row, rows_from_chrome_trace
from service.plots.style import Figure, render
from service.plots.timeline import timeline_rows_figure

__all__ = ["STORED_KINDS", "draw_stored", "warm_up"]

STORED_KINDS = (*KINDS, "search")  # "search": the picture of a search job's result document


def draw_stored(kind: str, formats: Sequence[str], request_json: str, result_json: str,
                trace: bytes | None = None) -> Iterator[tuple[str, bytes]]:
    """(format, bytes) of picture `kind` of a stored result, in the order of `formats` (each of FORMATS).
    ValueError for an unknown kind or format, or a timeline without its trace."""
    if kind not in STORED_KINDS:
        raise ValueError(f"kind must be one of {', '.join(STORED_KINDS)}, not '{kind}'")
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not '{unknown[0]}'")
    figure = _figure(kind, request_json, result_json, trace)
    for fmt in formats:
        yield fmt, render(figure, fmt)


def warm_up() -> None:
    """Draw a one-box timeline, binned, in each format, and throw it away: the first picture a process draws
    pays for loading the fonts and the renderers (about half a second of CPU), which a drawing process pays so
    before it is asked for anything."""
    figure = timeline_rows_figure([Row(0, (Block("compute", "forward", 0.0, 1.0, 0),))], iteration_time_s=1.0,
                                  max_boxes=0)
    for fmt in FORMATS:
        render(figure, fmt)


def _figure(kind: str, request_json: str, result_json: str, trace: bytes | None) -> Figure:
    result = json.loads(result_json)
    if kind == "search":
        return search_figure(result)
    rows = None
    if kind in NEEDS_SPANS:
        if trace is None:
            raise ValueError("the timeline needs the simulation's trace")
        # 32 + MAX_WBITS: zlib reads gzip and zlib streams alike
        rows = rows_from_chrome_trace(json.loads(zlib.decompress(trace, 32 + zlib.MAX_WBITS)))
    request = SimulationRequest.model_validate_json(request_json)
    return result_figure(kind, result, rows=rows, request=request)
