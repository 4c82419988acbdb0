"""Pictures of one simulated request, by kind, with titles that say what was simulated."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from api_schemas import SimulationRequest
from service.naming import echoed_request, request_line
from service.plots.charts import as_document, breakdown_figure, memory_figure
from service.plots.kinds import KINDS, NEEDS_SPANS
from service.plots.rows import Row, spans_from
from service.plots.style import Figure, seconds_label
from service.plots.timeline import timeline_figure, timeline_rows_figure

__all__ = ["KINDS", "NEEDS_SPANS", "describe", "result_figure", "summary"]


def describe(request: SimulationRequest) -> str:
    """One line naming the model, the cluster and the layout (every parallel dimension, the GPU and the precision:
    service.naming), e.g. 'gpt3-13b on 8 x dgx-a100: DP 1 x TP 8 x PP 8, A100 80GB, bf16, m = 8, 1f1b, recompute
    full'."""
    model = request.model.preset or str(request.model.architecture or "model")
    c = request.cluster
    size = (f"{c.num_nodes} x {c.preset or c.gpu}" if c.num_nodes is not None
            else f"{c.num_gpus} GPUs ({c.preset or c.gpu})")
    lay = request.layout
    m = lay.global_batch_size // (lay.dp * lay.microbatch_size)
    parts = [request_line(request), f"m = {m}", str(lay.schedule)]
    if lay.virtual_stages > 1:
        parts.append(f"v = {lay.virtual_stages}")
    if str(lay.recompute) != "none":
        parts.append(f"recompute {lay.recompute}")
    if lay.zero_stage:
        parts.append(f"ZeRO {lay.zero_stage}")
    return f"{model} on {size}: " + ", ".join(parts)


def summary(result: Any) -> str:
    """The headline figures of a result in one line."""
    doc = as_document(result)
    return (f"iteration {seconds_label(float(doc['iteration_time_s']))}, bubble {float(doc['bubble_fraction']):.1%} "
            f"of it (stage mean), MFU {float(doc['mfu']):.1%}")


def result_figure(kind: str, result: Any, *, spans: Iterable[Any] | None = None,
                  request: SimulationRequest | None = None, title: str | None = None,
                  rows: Sequence[Row] | None = None) -> Figure:
    """The picture `kind` (timeline, breakdown or memory) of a result; the timeline needs the recorded spans,
    or the rows made of them (service.plots.rows: `rows_from_chrome_trace` of a saved trace). The title says
    what was simulated: `title`, else a line made from `request`, else from the request the result echoes."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not '{kind}'")
    request = request if request is not None else echoed_request(as_document(result))
    title = title or (describe(request) if request is not None else None)
    if kind == "timeline":
        doc = as_document(result)
        if rows is not None:
            return timeline_rows_figure(rows, iteration_time_s=float(doc["iteration_time_s"]), title=title,
                                        subtitle=summary(doc))
        if spans is None:
            raise ValueError("the timeline needs the simulation's spans (simulate with spans kept)")
        return timeline_figure(spans_from(spans), iteration_time_s=float(doc["iteration_time_s"]),
                               title=title, subtitle=summary(doc))
    if kind == "breakdown":
        return breakdown_figure(result, title=(f"Where the time goes\n{title}" if title else None))
    return memory_figure(result, title=(f"Memory per GPU, by pipeline stage\n{title}" if title else None))
