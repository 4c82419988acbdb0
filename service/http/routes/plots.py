"""Pictures over HTTP, drawn by the CLI's code (service.plots) in worker processes:

- GET /v1/jobs/{id}/plot?kind=timeline|breakdown|memory&format=svg|png: a succeeded simulation job's picture
  (the timeline from its recorded trace); a search job's picture is `kind=search` (its top layouts and the
  families it discarded), its default.
- POST /v1/plots?kind=...&format=...: a simulation request, admitted and simulated as POST /v1/simulations would
  (the same limits, slots and results cache), answered with its picture.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from api_schemas import SimulationRequest
from service.http.context import AUTHORIZED, Service, ServiceDep
from service.http.errors import ApiError
from service.http.httpio import read_document
from service.http.inline import busy, cached, run_inline
from service.http.openapi import ERROR, body_of
from service.http.pictures import MEDIA_TYPES
from service.jobs.pool import Drawing
from service.jobs.store import CachedResult
from service.plots import NEEDS_SPANS

router = APIRouter(tags=["pictures"], dependencies=AUTHORIZED)

ResultKind = Literal["timeline", "breakdown", "memory"]
JobKind = Literal["timeline", "breakdown", "memory", "search"]
Format = Literal["svg", "png"]
_PICTURE: dict[int | str, dict[str, Any]] = {200: {"content": {media: {"schema": {"type": "string", "format": "binary"}}
                              for media in MEDIA_TYPES.values()},
                  "description": "the picture (SVG or PNG; the same result gives the same bytes)"}}
_KIND = ("timeline: one row per pipeline stage, time on x, the bubble hatched; breakdown: where the iteration's "
         "time goes; memory: memory per GPU by stage against the capacity")


def _trace_bytes(svc: Service, stored: CachedResult) -> bytes:
    """The stored result's compressed trace, whole (the drawing process needs all of it)."""
    return stored.trace if stored.trace is not None else b"".join(svc.store.trace_chunks(stored.key))


async def _draw(svc: Service, cache_key: str, drawing: Drawing, timeout_s: float,
                traced: CachedResult | None = None) -> Response:
    """The picture of a stored result, from the picture cache or drawn in a worker process once an inline slot
    is free (with the trace of `traced`, read only then); 413 if drawing runs past `timeout_s`."""
    key = (cache_key, drawing.kind, drawing.fmt)
    picture = svc.pictures.get(key)
    if picture is None:
        if svc.inline.full:
            raise busy()
        if traced is not None:
            drawing = replace(drawing, trace=await asyncio.to_thread(_trace_bytes, svc, traced))
        async with svc.inline:
            outcome = await svc.pool.draw(drawing, timeout_s)
        if outcome.status == "timeout":
            limit = timeout_s
            raise ApiError(413, "too_large", f"drawing the {drawing.kind} ran past the limit of {limit:g} s",
                           extra={"limit": limit})
        if outcome.status != "ok" or outcome.picture is None:
            raise RuntimeError(f"drawing the {drawing.kind} failed: {outcome.error_type}: {outcome.message}")
        picture = outcome.picture
        svc.pictures.put(key, picture)
    return Response(picture, media_type=MEDIA_TYPES[drawing.fmt])


@router.get("/v1/jobs/{job_id}/plot", responses={**_PICTURE, 401: ERROR, 404: ERROR, 409: ERROR, 422: ERROR})
async def job_plot(job_id: str, svc: ServiceDep,
                   kind: Annotated[JobKind | None, Query(description=_KIND + "; search: a search job's ranking "
                                                         "(default: timeline, or search for a search job)")] = None,
                   format: Annotated[Format, Query(description="svg or png")] = "svg") -> Response:
    """A succeeded job's picture; 409 until it has succeeded, or for a kind its job does not have."""
    job = svc.jobs.job(job_id)
    kind = kind or ("search" if job.kind == "search" else "timeline")
    if (kind == "search") != (job.kind == "search"):
        raise ApiError(409, "no_plot", f"job {job_id} is a {job.kind} job: its pictures are "
                       + ("kind=search" if job.kind == "search" else "kind=timeline, breakdown or memory"),
                       extra={"job_kind": job.kind})
    _, stored = svc.jobs.result(job_id)
    traced = svc.jobs.trace(job_id) if kind in NEEDS_SPANS else None
    # A job may be as large as the job limits allow (the 1T GPT's trace is tens of megabytes): its picture is held
    # to the job time limit, not the inline one.
    drawing = Drawing(kind, format, job.request, stored.result)
    return await _draw(svc, job.cache_key, drawing, svc.settings.job_timeout_s, traced)


@router.post("/v1/plots", openapi_extra=body_of(SimulationRequest),
             responses={**_PICTURE, 401: ERROR, 408: ERROR, 413: ERROR, 415: ERROR, 422: ERROR, 429: ERROR})
async def request_plot(request: Request, svc: ServiceDep,
                       kind: Annotated[ResultKind, Query(description=_KIND)] = "timeline",
                       format: Annotated[Format, Query(description="svg or png")] = "svg") -> Response:
    """Simulate a request as POST /v1/simulations does (the same limits, slots and results cache) and answer
    with its picture."""
    body, syntax = await read_document(request, svc.settings)
    admitted = await svc.off_loop(svc.admit, body, True, syntax)
    spans = kind in NEEDS_SPANS
    stored = cached(svc, admitted, spans)
    hit = stored is not None
    if stored is None:
        if svc.inline.full:
            raise busy()
        stored = await run_inline(svc, admitted, spans)
    response = await _draw(svc, admitted.cache_key,
                           Drawing(kind, format, admitted.canonical_json, stored.result),
                           svc.settings.inline_timeout_s, stored if spans else None)
    response.headers["X-Clustersim-Cache"] = "hit" if hit else "miss"
    return response
