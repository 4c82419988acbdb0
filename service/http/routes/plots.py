"""Pictures over HTTP, drawn by the CLI's code (service.plots) in the service's drawing process, never in a
simulation's slot (service.http.pictures):

- GET /v1/jobs/{id}/plot?kind=timeline|breakdown|memory&format=svg|png: a succeeded simulation job's picture
  (the timeline from its recorded trace); a search job's picture is `kind=search` (its top layouts and the
  families it discarded), its default. A picture drawn already answers at once; one that is not is drawn in the
  background, and the request answers 202 with `Retry-After` unless it is drawn within FIRST_WAIT_S.
- POST /v1/plots?kind=...&format=...: a simulation request, admitted and simulated as POST /v1/simulations would
  (the same limits, slots and results cache), answered with its picture once it is drawn.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from api_schemas import SimulationRequest
from service.http.context import AUTHORIZED, Service, ServiceDep
from service.http.errors import ApiError
from service.http.httpio import read_document
from service.http.inline import busy, cached, run_inline
from service.http.openapi import ERROR, body_of
from service.http.pictures import DRAW_TIMEOUT_S, MEDIA_TYPES, PictureFailed, PicturesBusy, Source
from service.plots.kinds import NEEDS_SPANS

__all__ = ["FIRST_WAIT_S", "router"]

router = APIRouter(tags=["pictures"], dependencies=AUTHORIZED)

FIRST_WAIT_S = 0.5  # how long GET .../plot waits for a picture being drawn before it answers 202

ResultKind = Literal["timeline", "breakdown", "memory"]
JobKind = Literal["timeline", "breakdown", "memory", "search"]
Format = Literal["svg", "png"]
_PICTURE: dict[int | str, dict[str, Any]] = {200: {"content": {media: {"schema": {"type": "string", "format": "binary"}}
                              for media in MEDIA_TYPES.values()},
                  "description": "the picture (SVG or PNG; the same result gives the same bytes)"}}
_DRAWING: dict[int | str, dict[str, Any]] = {202: {
    "description": "the picture is being drawn (in the background, once): ask again after `Retry-After` seconds",
    "headers": {"Retry-After": {"description": "seconds until the picture is expected", "required": True,
                                "schema": {"type": "integer", "minimum": 1}},
                "Location": {"description": "this picture's URL, to ask again", "required": True,
                             "schema": {"type": "string"}}},
    "content": {"application/json": {"schema": {
        "title": "PictureDrawing", "type": "object", "required": ["status", "kind", "format", "retry_after_s"],
        "properties": {"status": {"type": "string", "enum": ["drawing"]},
                       "kind": {"type": "string", "enum": ["timeline", "breakdown", "memory", "search"]},
                       "format": {"type": "string", "enum": ["svg", "png"]},
                       "retry_after_s": {"type": "integer", "minimum": 1}}}}}}}
_KIND = ("timeline: one row per pipeline stage, time on x, the bubble hatched; breakdown: where the iteration's "
         "time goes; memory: memory per GPU by stage against the capacity")


def _failed(err: PictureFailed, kind: str) -> Exception:
    """What the API says of a picture that could not be drawn: 413 past the time or memory it may take."""
    if err.status == "timeout":
        return ApiError(413, "too_large", f"drawing the {kind} ran past the limit of {DRAW_TIMEOUT_S:g} s",
                        extra={"limit": DRAW_TIMEOUT_S})
    if err.error_type in ("MemoryError", "WorkerDied"):
        return ApiError(413, "too_large", f"drawing the {kind} ran out of the memory a drawing may use "
                        f"({err.error_type})")
    return RuntimeError(f"drawing the {kind} failed: {err.error_type}: {err.message}")


def _busy() -> ApiError:
    return ApiError(429, "busy", "too many pictures are waiting to be drawn; retry later", headers={"Retry-After": "5"})


async def _picture(svc: Service, source: Source, fmt: str, wait_s: float) -> bytes | None:
    try:
        return await svc.pictures.picture(source, fmt, wait_s)
    except PictureFailed as err:
        raise _failed(err, source.kind) from None
    except PicturesBusy:
        raise _busy() from None


@router.get("/v1/jobs/{job_id}/plot",
            responses={**_PICTURE, **_DRAWING, 401: ERROR, 404: ERROR, 409: ERROR, 413: ERROR, 422: ERROR, 429: ERROR})
async def job_plot(job_id: str, svc: ServiceDep,
                   kind: Annotated[JobKind | None, Query(description=_KIND + "; search: a search job's ranking "
                                                         "(default: timeline, or search for a search job)")] = None,
                   format: Annotated[Format, Query(description="svg or png")] = "svg") -> Response:
    """A succeeded job's picture; 202 while it is being drawn; 409 until the job has succeeded, or for a kind
    its job does not have."""
    job = svc.jobs.job(job_id)
    kind = kind or ("search" if job.kind == "search" else "timeline")
    if (kind == "search") != (job.kind == "search"):
        raise ApiError(409, "no_plot", f"job {job_id} is a {job.kind} job: its pictures are "
                       + ("kind=search" if job.kind == "search" else "kind=timeline, breakdown or memory"),
                       extra={"job_kind": job.kind})
    _, stored = svc.jobs.result(job_id)
    if kind in NEEDS_SPANS:
        svc.jobs.trace(job_id)  # 409 no_trace when there is none to draw from
    source = Source(job.cache_key, kind, job.request, stored.result)
    picture = await _picture(svc, source, format, FIRST_WAIT_S)
    if picture is not None:
        return Response(picture, media_type=MEDIA_TYPES[format])
    retry = svc.pictures.retry_after_s(source)
    here = f"/v1/jobs/{job_id}/plot?kind={kind}&format={format}"
    return JSONResponse({"status": "drawing", "kind": kind, "format": format, "retry_after_s": retry},
                        status_code=202, headers={"Retry-After": str(retry), "Location": here})


@router.post("/v1/plots", openapi_extra=body_of(SimulationRequest),
             responses={**_PICTURE, 401: ERROR, 408: ERROR, 413: ERROR, 415: ERROR, 422: ERROR, 429: ERROR})
async def request_plot(request: Request, svc: ServiceDep,
                       kind: Annotated[ResultKind, Query(description=_KIND)] = "timeline",
                       format: Annotated[Format, Query(description="svg or png")] = "svg") -> Response:
    """Simulate a request as POST /v1/simulations does (the same limits, slots and results cache) and answer
    with its picture, drawn once its simulation has ended (out of the simulation's slot)."""
    body, syntax = await read_document(request, svc.settings)
    admitted = await svc.off_loop(svc.admit, body, True, syntax)
    spans = kind in NEEDS_SPANS
    stored = cached(svc, admitted, spans)
    hit = stored is not None
    if stored is None:
        if svc.inline.full:
            raise busy()
        stored = await run_inline(svc, admitted, spans)
    source = Source(admitted.cache_key, kind, admitted.canonical_json, stored.result, stored.trace)
    limit = svc.settings.inline_timeout_s
    picture = await _picture(svc, source, format, limit)
    if picture is None:
        raise ApiError(413, "too_large", f"drawing the {kind} takes longer than the inline limit of {limit:g} s; it "
                       "goes on being drawn: ask again, or submit the request as a job (POST /v1/jobs)",
                       extra={"limit": limit, "jobs": "/v1/jobs"})
    response = Response(picture, media_type=MEDIA_TYPES[format])
    response.headers["X-Clustersim-Cache"] = "hit" if hit else "miss"
    return response
